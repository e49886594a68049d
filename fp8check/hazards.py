"""The inputs that break casts, enumerated exactly, per format and input dtype.

Each hazard is a named, finite set of input bit patterns (``hazard_bits``),
built from the format's own values with exact rationals, so the sets say
precisely what they test:

``exact_values``     every finite value of the format (a cast must keep it).
``rounding_ties``    every exact midpoint between adjacent values, and the
                     patterns 1 and 2 ulps (of the input dtype) either side.
``mantissa_carry``   midpoints just below a power of two (mantissa all ones
                     rounding up carries into the exponent), ±ulps, and the
                     largest input below the power of two.
``overflow``         the largest finite value, the overflow tie (max plus
                     half a step), just past it, the first value beyond, a
                     few powers of two further out, the input dtype's max.
``infinity``         ±Inf.
``nan``              NaNs of both signs, quiet and signalling, with varied
                     payloads.
``signed_zero``      ±0.0 and tiny values of both signs that round to zero
                     (half the smallest subnormal is a tie to zero),
                     including the input dtype's own smallest patterns.
``subnormal``        the format's subnormals and the boundary to the
                     smallest normal, ±ulps.
``input_subnormal``  the input dtype's subnormal boundaries, and format
                     values and midpoints that are subnormal in the input
                     dtype (e5m2 subnormals are float16 subnormals; e8m0's
                     2^-127 is a float32 subnormal).

A value that the input dtype cannot hold exactly is left out (e8m0's 2^127
has no float16 pattern), so some sets are empty for some pairs.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from fp8check import inputs
from fp8check.formats import Format, get as get_format

__all__ = ["HAZARDS", "hazard_bits", "all_hazard_bits", "positive_values"]

HAZARDS = (
    "exact_values",
    "rounding_ties",
    "mantissa_carry",
    "overflow",
    "infinity",
    "nan",
    "signed_zero",
    "subnormal",
    "input_subnormal",
)


@lru_cache(maxsize=None)
def positive_values(fmt: Format) -> tuple[Fraction, ...]:
    """The finite non-negative values of ``fmt``, ascending (0 included when it has one)."""
    values = set()
    for code in range(fmt.code_count):
        if code & fmt.sign_mask:
            continue
        v = fmt.exact_value(code)
        if isinstance(v, Fraction):
            values.add(v)
    return tuple(sorted(values))


def _is_power_of_two(v: Fraction) -> bool:
    n, d = v.numerator, v.denominator
    return v > 0 and (n == 1 or d == 1) and n & (n - 1) == 0 and d & (d - 1) == 0


def _step_at_max(fmt: Format) -> Fraction:
    """The spacing of the grid at the largest binade."""
    return Fraction(2) ** (fmt.emax - fmt.mantissa_bits)


class _Builder:
    """Collects positive magnitudes (as input patterns) with ulp neighbours."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.src = inputs.source_format(name)
        self.top = ((1 << self.src.exponent_bits) - 1) << self.src.mantissa_bits  # +Inf pattern
        self.mags: set[int] = set()

    def add(self, value: Fraction, spread: int = 0) -> None:
        """Add |value| and the ``spread`` patterns either side of it."""
        if value == 0:
            self.mags.add(0)
            return
        bits = inputs.exact_bits(abs(value), self.name)
        if bits is None:
            return
        for k in range(-spread, spread + 1):
            if 0 < bits + k < self.top:
                self.mags.add(bits + k)

    def add_pattern(self, mag: int) -> None:
        if 0 <= mag < self.top:
            self.mags.add(mag)

    def both_signs(self) -> np.ndarray:
        mags = np.array(sorted(self.mags), dtype=np.uint64)
        signed = np.concatenate([mags, mags | np.uint64(self.src.sign_mask)])
        return signed


def _dtype_boundaries(name: str) -> list[int]:
    """Positive patterns at the input dtype's subnormal boundaries."""
    src = inputs.source_format(name)
    smallest_normal = 1 << src.mantissa_bits
    return [1, 2, smallest_normal - 1, smallest_normal, smallest_normal + 1]


def _build(fmt: Format, name: str, hazard: str) -> np.ndarray:
    src = inputs.source_format(name)
    b = _Builder(name)
    values = positive_values(fmt)
    pairs = list(zip(values, values[1:]))
    if hazard == "exact_values":
        for v in values:
            b.add(v)
    elif hazard == "rounding_ties":
        if fmt.has_zero is False:
            b.add(values[0] / 2, spread=2)  # below the smallest code of e8m0
        for lo, hi in pairs:
            b.add((lo + hi) / 2, spread=2)
    elif hazard == "mantissa_carry":
        for lo, hi in pairs:
            if _is_power_of_two(hi) and hi >= Fraction(fmt.smallest_normal):
                mid = (lo + hi) / 2
                b.add(mid, spread=2)
                hi_bits = inputs.exact_bits(hi, name)
                if hi_bits is not None:
                    b.add_pattern(hi_bits - 1)
    elif hazard == "overflow":
        top = values[-1]
        step = _step_at_max(fmt)
        b.add(top, spread=2)
        b.add(top + step / 2, spread=2)  # the overflow tie
        b.add(top + step, spread=1)
        b.add(2 * top)
        for k in range(1, 5):
            b.add(Fraction(2) ** (fmt.emax + k))
        b.add_pattern(b.top - 1)  # the input dtype's largest finite value
        b.add_pattern(b.top - 2)
    elif hazard == "infinity":
        b.add_pattern(b.top)
        b.mags.add(b.top)
    elif hazard == "nan":
        m = src.mantissa_bits
        quiet = 1 << (m - 1)
        mask = (1 << m) - 1
        alternating = int("01" * 32, 2) & mask
        payloads = {quiet, quiet | 1, mask, 1, 2, 1 << (m - 2), (1 << (m - 2)) | 1,
                    quiet | alternating, alternating or 1, quiet | (mask >> 3)}
        b.mags.update(b.top | p for p in payloads if p)
    elif hazard == "signed_zero":
        b.add(Fraction(0))
        smallest = values[1] if values[0] == 0 else values[0]
        half = smallest / 2
        b.add(half, spread=2)
        b.add(half / 2, spread=1)
        b.add(half / 1024)
        for pattern in _dtype_boundaries(name):
            b.add_pattern(pattern)
    elif hazard == "subnormal":
        if fmt.has_subnormals:
            normal = Fraction(fmt.smallest_normal)
            sub = [v for v in values if 0 < v < normal]
            for v in sub:
                b.add(v, spread=1)
            for lo, hi in pairs:
                if hi <= normal:
                    b.add((lo + hi) / 2, spread=1)
            b.add(normal, spread=2)
    elif hazard == "input_subnormal":
        for pattern in _dtype_boundaries(name):
            b.add_pattern(pattern)
        input_normal = Fraction(src.smallest_normal)
        for lo, hi in pairs:
            if lo < input_normal:
                b.add(lo, spread=1)
                b.add((lo + hi) / 2, spread=1)
    else:
        raise ValueError(f"unknown hazard {hazard!r}; known: {', '.join(HAZARDS)}")
    out = b.both_signs().astype(inputs.bits_dtype(name))
    return inputs.unique(out)


@lru_cache(maxsize=None)
def _cached(fmt: Format, name: str, hazard: str) -> np.ndarray:
    out = _build(fmt, name, hazard)
    out.setflags(write=False)
    return out


def hazard_bits(fmt: object, name: str, hazard: str) -> np.ndarray:
    """The input patterns (dtype ``name``'s unsigned type) of one hazard, sorted.

    Read-only and cached. Raises ValueError for an unknown hazard.
    """
    if hazard not in HAZARDS:
        raise ValueError(f"unknown hazard {hazard!r}; known: {', '.join(HAZARDS)}")
    inputs.source_format(name)
    return _cached(get_format(fmt), name, hazard)


@lru_cache(maxsize=None)
def _all(fmt: Format, name: str) -> np.ndarray:
    out = inputs.unique(np.concatenate([hazard_bits(fmt, name, h) for h in HAZARDS]))
    out.setflags(write=False)
    return out


def all_hazard_bits(fmt: object, name: str) -> np.ndarray:
    """The union of every hazard set for ``fmt`` and input dtype ``name``."""
    inputs.source_format(name)
    return _all(get_format(fmt), name)



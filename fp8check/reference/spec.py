"""The scalar spec of encode and decode: exact rationals, one value at a time.

This module is meant to be read. It says what a conversion into a narrow
format must produce, in the plainest terms: the input's exact value as a
``Fraction``, rounded onto the format's grid as IEEE 754 defines it (the
exponent unbounded above, so overflow is decided after rounding), then looked
up among the values the format's codes decode to. The vectorised model in
:mod:`fp8check.reference.model` is tested equal to this on every 16-bit input.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

from fp8check.formats import SOURCE_FORMATS, Format
from fp8check.profiles import Profile

__all__ = ["decode_code", "source_value", "round_magnitude", "encode_value", "encode_bits",
           "finite_overflow_policy", "source_bits"]

Value = Fraction | float  # a Fraction, or a float Inf or NaN


def decode_code(code: int, fmt: Format) -> float:
    """The value of ``code`` as a float (exact: every value fits a float64).

    A Fraction has no -0, so the sign of a zero comes from the sign bit.
    """
    value = float(fmt.exact_value(code))
    if value == 0 and code & fmt.sign_mask:
        return -0.0
    return value


@lru_cache(maxsize=None)
def _codes_by_value(fmt: Format) -> dict[Fraction, int]:
    """Each finite non-negative value of ``fmt`` and its positive code."""
    table: dict[Fraction, int] = {}
    for code in range(fmt.code_count):
        if code & fmt.sign_mask:
            continue
        value = fmt.exact_value(code)
        if isinstance(value, Fraction):
            table[value] = code
    return table


@lru_cache(maxsize=1 << 18)  # every 16-bit input of both 16-bit sources
def source_value(bits: int, source: Format) -> tuple[bool, Value]:
    """Split an IEEE input's bit pattern into (negative, exact magnitude)."""
    negative = bool(bits >> (source.bits - 1))
    magnitude = source.exact_value(bits & source.magnitude_mask)
    return negative, magnitude


@lru_cache(maxsize=None)
def _limits(fmt: Format) -> tuple[Fraction, Fraction]:
    """(largest finite value, smallest normal value) of ``fmt``, exactly."""
    return Fraction(fmt.max), Fraction(fmt.smallest_normal)


def _floor_log2(v: Fraction) -> int:
    """The integer e with 2**e <= v < 2**(e+1), for v > 0."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


@lru_cache(maxsize=1 << 20)
def round_magnitude(v: Fraction, fmt: Format, rounding: str, random: int = 0, bits: int = 0) -> Fraction:
    """Round ``v > 0`` onto the grid of ``fmt`` with the exponent unbounded above.

    The grid near v has spacing 2**q, where q is v's binade (never below the
    smallest normal binade, which is where subnormals live) less the mantissa
    bits. The result may exceed ``fmt.max``: the caller decides overflow.
    """
    e = max(_floor_log2(v), fmt.emin)
    quantum = Fraction(2) ** (e - fmt.mantissa_bits)
    scaled = v / quantum
    k = math.floor(scaled)
    fraction = scaled - k  # in [0, 1): the part the kept bits cannot hold
    if rounding == "rtz":
        up = False
    elif rounding == "rne":
        up = fraction > Fraction(1, 2) or (fraction == Fraction(1, 2) and k % 2 == 1)
    elif rounding == "rna":
        up = fraction >= Fraction(1, 2)
    elif rounding == "stochastic":
        up = math.floor(fraction * 2**bits) + random >= 2**bits
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    return (k + up) * quantum


def _nan_code(negative: bool, fmt: Format, p: Profile) -> int:
    if fmt.has_nan:
        all_ones = p.nan in ("all_ones", "all_ones_positive")
        if p.nan.endswith("_positive"):
            negative = False
        return fmt.canonical_nan(negative, all_ones=all_ones)  # type: ignore[return-value]
    # fp4/fp6 have no NaN: the profile says what stands in for one.
    if p.nan_without_code == "max":
        return _signed(fmt.max_code, negative, fmt)
    flip = p.nan_without_code == "flipped_zero"
    return _zero(negative != flip, fmt)


def _signed(magnitude_code: int, negative: bool, fmt: Format) -> int:
    return magnitude_code | (fmt.sign_mask if negative else 0)


def _zero(negative: bool, fmt: Format) -> int:
    # fnuz has no -0 (its pattern is NaN): every zero is +0.
    return fmt.sign_mask if negative and fmt.has_negative_zero else 0


def finite_overflow_policy(p: Profile) -> str:
    """What a finite value beyond the largest code becomes under ``p``.

    IEEE 754 (7.4) carries every overflow under round toward zero to the
    largest finite value: truncation never increases a magnitude. Other
    roundings follow the profile's ``overflow``.
    """
    return "satfinite" if p.rounding == "rtz" else p.overflow


def _overflow_code(negative: bool, fmt: Format, p: Profile, policy: str) -> int:
    if policy == "satfinite":
        return _signed(fmt.max_code, negative, fmt)
    if policy == "nan":
        return _nan_code(negative, fmt, p)
    # nonsat: Inf where the format has it, else NaN, else (fp4/fp6) clamp.
    if fmt.has_inf:
        return fmt.inf_codes[1 if negative else 0]
    if fmt.has_nan:
        return _nan_code(negative, fmt, p)
    return _signed(fmt.max_code, negative, fmt)


@lru_cache(maxsize=None)
def _holds(wide: Format, narrow: Format) -> bool:
    """Whether every finite value of the IEEE type ``narrow`` is one of ``wide``."""
    return (wide.mantissa_bits >= narrow.mantissa_bits and wide.emax >= narrow.emax
            and wide.emin - wide.mantissa_bits <= narrow.emin - narrow.mantissa_bits)


def encode_value(negative: bool, magnitude: Value, fmt: Format, profile: Profile,
                 *, random: int = 0, source: Format | None = None) -> int:
    """The code of the value (-1)**negative * magnitude under ``profile``.

    ``source`` is the input's own type; when the profile names an
    intermediate type, the value is first rounded to it (RNE, IEEE overflow
    to Inf), as torch and ml_dtypes do for float64 inputs.
    """
    p = profile.resolve(fmt)
    if isinstance(magnitude, float) and math.isnan(magnitude):
        return _nan_code(negative, fmt, p)

    inter = SOURCE_FORMATS.get(p.intermediate or "")
    if inter is not None and isinstance(magnitude, Fraction) and magnitude != 0 \
            and not (source is not None and _holds(inter, source)):
        magnitude = round_magnitude(magnitude, inter, "rne")
        if magnitude > inter.max:
            magnitude = math.inf

    if not fmt.signed:
        if magnitude == 0:
            return _nan_code(False, fmt, p) if p.unsigned_zero == "nan" else 0
        if negative:
            if p.unsigned_negative == "nan":
                return _nan_code(False, fmt, p)
            if p.unsigned_negative == "min":
                return 0
            negative = False

    if isinstance(magnitude, float):  # ±Inf: NaN was handled above
        return _overflow_code(negative, fmt, p, p.infinity)
    if magnitude == 0:
        return _zero(negative, fmt)

    largest, smallest_normal = _limits(fmt)
    rounded = round_magnitude(magnitude, fmt, p.rounding, random, p.stochastic_bits)
    if rounded == 0:
        return _zero(negative, fmt) if fmt.has_zero else 0  # e8m0: the smallest code
    if rounded > largest:
        return _overflow_code(negative, fmt, p, finite_overflow_policy(p))
    if p.subnormals == "flush" and rounded < smallest_normal:
        return _zero(negative, fmt)
    return _signed(_codes_by_value(fmt)[rounded], negative, fmt)


def encode_bits(bits: int, source: str | Format, fmt: Format, profile: Profile, *, random: int = 0) -> int:
    """The code for the input whose IEEE bit pattern is ``bits``.

    ``source`` is ``"float16"``, ``"bfloat16"``, ``"float32"`` or ``"float64"``.
    """
    src = source if isinstance(source, Format) else SOURCE_FORMATS[source]
    negative, magnitude = source_value(bits, src)
    return encode_value(negative, magnitude, fmt, profile, random=random, source=src)


def source_bits(negative: bool, magnitude: Value, source: str | Format) -> int:
    """The IEEE bit pattern of ``source`` nearest (RNE) to the given value.

    Overflow gives Inf and NaN a quiet NaN; the inverse of
    :func:`source_value` on every value ``source`` holds exactly.
    """
    src = source if isinstance(source, Format) else SOURCE_FORMATS[source]
    sign = (1 << (src.bits - 1)) if negative else 0
    top = (1 << src.exponent_bits) - 1
    if isinstance(magnitude, float) and math.isnan(magnitude):
        return sign | (top << src.mantissa_bits) | (1 << (src.mantissa_bits - 1))
    if magnitude != math.inf and magnitude != 0:
        magnitude = round_magnitude(Fraction(magnitude), src, "rne")
    if magnitude == math.inf or magnitude > _limits(src)[0]:
        return sign | (top << src.mantissa_bits)
    if magnitude == 0:
        return sign
    e = _floor_log2(magnitude)
    if e < src.emin:  # subnormal: exponent field 0
        return sign | int(magnitude / Fraction(2) ** (src.emin - src.mantissa_bits))
    mantissa = int(magnitude / Fraction(2) ** (e - src.mantissa_bits)) - (1 << src.mantissa_bits)
    return sign | ((e + src.bias) << src.mantissa_bits) | mantissa


"""Input dtypes of a cast, as bit patterns.

The suite thinks of a cast's input as an IEEE bit pattern of a source type
(float32, float16, bfloat16 or float64): patterns are exact, cover NaN
payloads and -0.0, and index the exhaustive sweeps. This module converts
between patterns, NumPy arrays and readable text, and builds the sweep sets.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import ml_dtypes
import numpy as np

from fp8check.errors import UnsupportedDtypeError
from fp8check.formats import SOURCE_FORMATS, Format

__all__ = [
    "INPUT_DTYPES",
    "CAST_INPUT_DTYPES",
    "dtype_name",
    "source_format",
    "numpy_dtype",
    "bits_dtype",
    "from_bits",
    "to_bits",
    "exact_bits",
    "value_of",
    "describe",
    "hex_bits",
    "sweep_bits",
    "is_nan_bits",
    "simplicity",
    "low_bit_patterns",
    "unique",
    "first_occurrences",
]

# The input dtypes the suite feeds a cast; float64 only where asked for
# (torch and ml_dtypes round it through float32 first: see the profiles).
INPUT_DTYPES = ("float32", "float16", "bfloat16", "float64")
CAST_INPUT_DTYPES = ("float32", "float16", "bfloat16")

_NUMPY = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float64": np.dtype(np.float64),
}
_BITS = {
    "float32": np.dtype(np.uint32),
    "float16": np.dtype(np.uint16),
    "bfloat16": np.dtype(np.uint16),
    "float64": np.dtype(np.uint64),
}


def unique(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (1-D). NumPy 2.4's ``np.unique`` hashes
    and takes seconds on a few million integers; sorting takes milliseconds."""
    s = np.sort(np.asarray(a).reshape(-1))
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def first_occurrences(a: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct value of ``a``, ascending."""
    a = np.asarray(a).reshape(-1)
    order = np.argsort(a, kind="stable")
    s = a[order]
    keep = np.ones(s.size, dtype=bool)
    if s.size > 1:
        np.not_equal(s[1:], s[:-1], out=keep[1:])
    return np.sort(order[keep])


def _check(name: str) -> str:
    if name not in _NUMPY:
        raise UnsupportedDtypeError(
            f"unknown input dtype {name!r}; the suite takes {', '.join(INPUT_DTYPES)}"
        )
    return name


def dtype_name(x: object) -> str:
    """The input dtype name of a NumPy array or torch tensor (``"bfloat16"``, ...)."""
    name = str(getattr(x, "dtype", type(x).__name__)).removeprefix("torch.")
    if name not in _NUMPY:
        raise UnsupportedDtypeError(
            f"an input of dtype {name} cannot be cast; the suite takes {', '.join(INPUT_DTYPES)}"
        )
    return name


def source_format(name: str) -> Format:
    """The IEEE :class:`~fp8check.formats.Format` describing input dtype ``name``."""
    return SOURCE_FORMATS[_check(name)]


def numpy_dtype(name: str) -> np.dtype:
    return _NUMPY[_check(name)]


def bits_dtype(name: str) -> np.dtype:
    """The unsigned integer dtype of the same width as input dtype ``name``."""
    return _BITS[_check(name)]


def from_bits(bits: np.ndarray | list[int], name: str) -> np.ndarray:
    """Bit patterns (any integer array) as an array of input dtype ``name``."""
    return np.asarray(bits).astype(bits_dtype(name)).view(numpy_dtype(name))  # a copy: callers write to it


def to_bits(x: np.ndarray, name: str) -> np.ndarray:
    """The bit patterns of an array of input dtype ``name``."""
    return np.ascontiguousarray(x).view(bits_dtype(name))


def exact_bits(value: Fraction | float, name: str) -> int | None:
    """The pattern of ``value`` in ``name``, or None when it is not exactly representable."""
    src = source_format(name)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        top = ((1 << src.exponent_bits) - 1) << src.mantissa_bits
        if math.isnan(value):
            return top | (1 << (src.mantissa_bits - 1))
        return top | (src.sign_mask if value < 0 else 0)
    negative_zero = isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0
    value = Fraction(value)
    as_float = float(value)
    if Fraction(as_float) != value:
        return None
    with np.errstate(over="ignore"):
        arr = np.array([as_float], dtype=np.float64).astype(numpy_dtype(name))
    if not np.isfinite(arr[0].astype(np.float64)) or Fraction(float(arr[0].astype(np.float64))) != value:
        return None
    bits = int(to_bits(arr, name)[0])
    if negative_zero:
        bits |= src.sign_mask
    return bits


def is_nan_bits(bits: np.ndarray, name: str) -> np.ndarray:
    src = source_format(name)
    b = np.asarray(bits).astype(np.uint64)
    mag = b & np.uint64(src.magnitude_mask)
    return mag > np.uint64(((1 << src.exponent_bits) - 1) << src.mantissa_bits)


def value_of(bits: int, name: str) -> Fraction | float:
    """The exact value of one pattern: a Fraction, or a float ±Inf/NaN (signed zero as float)."""
    src = source_format(name)
    negative = bool(bits & src.sign_mask)
    mag = src.exact_value(bits & src.magnitude_mask)
    if isinstance(mag, float):
        return -mag if negative and not math.isnan(mag) else mag
    if mag == 0:
        return -0.0 if negative else 0.0
    return -mag if negative else mag


def hex_bits(bits: int, name: str) -> str:
    """``bits`` as hex in the width of ``name`` (4 digits for 16-bit, 8 for float32)."""
    digits = source_format(name).bits // 4
    return f"0x{bits:0{digits}x}"


def describe(bits: int, name: str) -> str:
    """A short exact decimal for one input: ``-0.0``, ``inf``, ``nan(0x7fc00001)``, ``1.0625``.

    Every float16, bfloat16 and float32 value is exact as a float64, whose
    ``repr`` is the shortest string that reads back to it.
    """
    src = source_format(name)
    with np.errstate(all="ignore"):
        value = float(from_bits(np.array([bits], dtype=bits_dtype(name)), name).astype(np.float64)[0])
    if math.isnan(value):
        sign = "-" if bits & src.sign_mask else ""
        return f"{sign}nan({hex_bits(bits, name)})"
    return repr(value)


@lru_cache(maxsize=None)
def sweep_bits(name: str) -> np.ndarray:
    """The exhaustive sweep of an input dtype, as bit patterns (read-only).

    float16 and bfloat16: all 65,536 patterns. float32: every upper half
    (the bfloat16 grid) with the lower halves 0x0000, 0x0001, 0x8000 and
    0xFFFF, plus every float16 value: 327,680 patterns that reach every
    rounding class of the reference (a code depends only on the upper 16
    bits and on whether any lower bit is set) and every float16 midpoint.
    float64: the float32 set widened exactly, plus each pattern's float64
    neighbours (the double-rounding hazard).
    """
    _check(name)
    if name in ("float16", "bfloat16"):
        out = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    elif name == "float32":
        upper = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
        lows = np.array([0x0000, 0x0001, 0x8000, 0xFFFF], dtype=np.uint32)
        grid = (upper[:, None] | lows[None, :]).reshape(-1)
        f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
        out = unique(np.concatenate([grid, f16.view(np.uint32)]))
    else:
        f32 = sweep_bits("float32").view(np.float32)
        with np.errstate(invalid="ignore"):
            wide = f32.astype(np.float64).view(np.uint64)
        finite = np.isfinite(f32) & (f32 != 0)
        out = unique(np.concatenate([wide, wide[finite] + np.uint64(1), wide[finite] - np.uint64(1)]))
    out.setflags(write=False)
    return out


# The lower halves of float32 patterns beyond the sweep's four: each single
# bit, each run of bits from bit 0 up and from bit 15 down.
_LOW_HALVES = np.unique(np.array(
    [1 << i for i in range(16)] + [(1 << k) - 1 for k in range(1, 17)] + [(0xFFFF << k) & 0xFFFF for k in range(16)],
    dtype=np.uint32))


@lru_cache(maxsize=None)
def low_bit_patterns() -> np.ndarray:
    """float32 patterns for bugs that look at some low mantissa bits and not others (read-only).

    Every upper 16-bit half with each lower half of :data:`_LOW_HALVES`: a
    single set bit (bits 0..15), and the runs 0x0001..0xFFFF and
    0x8000..0xFFFE. Why this suffices: the rounding point of every format
    here lies in the upper half, so the guard bit and the higher sticky bits
    range over every value already; a cast that forgets or misreads some
    lower bits when it decides "is anything below the guard bit set"
    disagrees with the reference on an input whose lower half is one bit it
    forgets (each single bit), and one that looks at a prefix or suffix of
    the bits only disagrees on a run. 2,949,120 patterns.
    """
    upper = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    out = (upper[:, None] | _LOW_HALVES[None, :]).reshape(-1)
    out.setflags(write=False)
    return out


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x)
    return np.array([bin(int(v)).count("1") for v in x.reshape(-1)], dtype=np.int64).reshape(x.shape)


def simplicity(bits: np.ndarray, input_dtype: str) -> np.ndarray:
    """A sort key per input: ±0 first, then the shortest significand (fewest bits up
    to the lowest set one), then fewest set bits, then nearest 1.0, then positive."""
    src = source_format(input_dtype)
    b = np.asarray(bits).astype(np.uint64)
    mant = b & np.uint64(src.mantissa_mask)
    exp = ((b & np.uint64(src.magnitude_mask)) >> np.uint64(src.mantissa_bits)).astype(np.int64) - src.bias
    negative = ((b >> np.uint64(src.bits - 1)) & np.uint64(1)).astype(np.int64)
    pop = _popcount(mant).astype(np.int64)
    lowest = mant & (~mant + np.uint64(1))  # the lowest set bit
    trailing = np.where(mant == 0, src.mantissa_bits, _popcount(lowest - np.uint64(1)).astype(np.int64))
    length = src.mantissa_bits - trailing
    zero = (b & np.uint64(src.magnitude_mask)) == 0
    exp = np.where(zero, 0, exp)  # ±0 is the simplest input of all
    low = (b & np.uint64((1 << 26) - 1)).astype(np.int64) if src.bits <= 32 else np.zeros(b.shape, dtype=np.int64)
    # Lexicographic key packed into one int64.
    return ((np.minimum(length, 63) << 57) | (np.minimum(pop, 63) << 51) | (np.minimum(np.abs(exp), 4095) << 39)
            | (negative << 38) | (low >> 0 & ((1 << 38) - 1)))

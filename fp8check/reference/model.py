"""The vectorised model of encode and decode: integer bit arithmetic only.

Written against the array API standard (through ``array_api_compat``), so the
same functions run on NumPy arrays and on torch tensors, on the CPU or a GPU.
Inputs are IEEE bit patterns held in int64 arrays; there is no ``log2``, no
float arithmetic and no rounding through a narrower float anywhere: every
rounding decision is made on integer significands. The scalar spec in
:mod:`fp8check.reference.spec` is the definition; this is tested equal to it.

A finite input is ``sig * 2**exp2`` with ``sig < 2**54``. Rounding it onto a
format with M mantissa bits keeps ``K = sig * 2**(exp2 - q)`` (truncated)
at the quantum ``2**q`` of its binade, decides from the remainder whether to
add one, and builds the code as ``((q + M + bias - 1) << M) + K``: for a
normal result that is (biased exponent, mantissa) with the implicit bit
carried into the exponent field, for a subnormal result just K, and a
mantissa carry becomes an exponent increment by itself.
"""

from __future__ import annotations

from typing import Any

from fp8check.formats import SOURCE_FORMATS, Format
from fp8check.profiles import Profile

__all__ = ["decompose", "round_fields", "encode_bits", "decode_codes", "decode_fields"]

Array = Any


def _floor_log2(xp: Any, v: Array) -> Array:
    """floor(log2(v)) of positive int64 values < 2**63, by binary search."""
    n = xp.zeros_like(v)
    for k in (32, 16, 8, 4, 2, 1):
        big = v >= (1 << k)
        v = xp.where(big, v >> k, v)
        n = xp.where(big, n + k, n)
    return n


def decompose(xp: Any, bits: Array, source: Format) -> tuple[Array, ...]:
    """Split int64 IEEE bit patterns of ``source`` into fields.

    Returns (negative, is_nan, is_inf, is_zero, sig, exp2) with the value of
    a finite input equal to ``(-1)**negative * sig * 2**exp2``.
    """
    m = source.mantissa_bits
    width = source.bits
    negative = ((bits >> (width - 1)) & 1) == 1
    mag = bits & source.magnitude_mask
    e_field = mag >> m
    frac = mag & source.mantissa_mask
    top = (1 << source.exponent_bits) - 1
    special = e_field == top
    is_nan = special & (frac != 0)
    is_inf = special & (frac == 0)
    is_zero = mag == 0
    subnormal = e_field == 0
    sig = xp.where(subnormal, frac, frac | (1 << m))
    exp2 = xp.where(subnormal, 1 - source.bias, e_field - source.bias) - m
    return negative, is_nan, is_inf, is_zero, sig, exp2


def round_fields(xp: Any, sig: Array, exp2: Array, fmt: Format, rounding: str,
                 random: Array | None = None, stochastic_bits: int = 0) -> tuple[Array, Array, Array]:
    """Round ``sig * 2**exp2`` (sig > 0) onto the grid of ``fmt``.

    Returns (K, q, code_mag): the rounded value is ``K * 2**q`` and, when it
    is representable, ``code_mag`` is its positive code. ``code_mag`` beyond
    ``fmt.max_code`` means overflow; K == 0 means the value rounded to zero.
    """
    M = fmt.mantissa_bits
    E = exp2 + _floor_log2(xp, sig)
    # Far beyond the largest binade the result overflows whatever the
    # rounding; park such lanes on a harmless value and flag them.
    beyond = E > fmt.emax + 1
    sig = xp.where(beyond, 1, sig)
    exp2 = xp.where(beyond, fmt.emax + 1, exp2)
    E = xp.where(beyond, fmt.emax + 1, E)

    q = xp.where(E > fmt.emin, E, fmt.emin) - M
    shift = q - exp2
    left = xp.where(shift < 0, -shift, 0)
    right = xp.where(shift > 62, 62, xp.where(shift > 0, shift, 0))
    # sig < 2**54, so a right shift of 62 leaves K = 0 and rem = sig exactly.
    K = (sig << left) >> right
    rem = sig - ((K << right) >> left)
    half = xp.where(right > 0, (xp.ones_like(right) << xp.where(right > 0, right - 1, 0)), 0)
    inexact = rem != 0
    if rounding == "rtz":
        up = xp.zeros_like(inexact)
    elif rounding == "rne":
        up = inexact & ((rem > half) | ((rem == half) & ((K & 1) == 1)))
    elif rounding == "rna":
        up = inexact & (rem >= half)
    elif rounding == "stochastic":
        if random is None:
            raise ValueError("stochastic rounding needs random bits")
        n = stochastic_bits
        # t = floor(rem * 2**n / 2**shift), exact for any shift.
        d = shift - n
        t = xp.where(d >= 0, rem >> xp.where(d > 63, 63, xp.where(d > 0, d, 0)),
                     rem << xp.where(d < 0, -d, 0))
        up = inexact & (t + random >= (1 << n))
    else:
        raise ValueError(f"unknown rounding {rounding!r}")
    K = K + xp.astype(up, K.dtype)
    code_mag = ((q + (M + fmt.bias - 1)) << M) + K
    code_mag = xp.where(beyond, fmt.max_code + 1, code_mag)
    return K, q, code_mag


def _nan_code(xp: Any, negative: Array, fmt: Format, p: Profile) -> Array:
    if fmt.has_nan:
        all_ones = p.nan in ("all_ones", "all_ones_positive")
        pos = fmt.canonical_nan(False, all_ones=all_ones)
        if p.nan.endswith("_positive"):
            return xp.zeros_like(negative, dtype=xp.int64) + pos
        return xp.where(negative, fmt.canonical_nan(True, all_ones=all_ones), pos)
    if p.nan_without_code == "max":
        return _signed(xp, fmt.max_code, negative, fmt)
    flipped = (~negative) if p.nan_without_code == "flipped_zero" else negative
    return _zero(xp, flipped, fmt)


def _signed(xp: Any, mag: Any, negative: Array, fmt: Format) -> Array:
    if not fmt.signed:
        return xp.zeros_like(negative, dtype=xp.int64) + mag
    return xp.where(negative, mag | fmt.sign_mask, mag)


def _zero(xp: Any, negative: Array, fmt: Format) -> Array:
    if fmt.has_negative_zero:
        return xp.where(negative, fmt.sign_mask, 0)
    return xp.zeros_like(negative, dtype=xp.int64)


def _overflow_code(xp: Any, negative: Array, fmt: Format, p: Profile, policy: str) -> Array:
    if policy == "satfinite":
        return _signed(xp, fmt.max_code, negative, fmt)
    if policy == "nan" or (not fmt.has_inf and fmt.has_nan):
        return _nan_code(xp, negative, fmt, p)
    if fmt.has_inf:
        return xp.where(negative, fmt.inf_codes[1], fmt.inf_codes[0])
    return _signed(xp, fmt.max_code, negative, fmt)


def encode_bits(xp: Any, bits: Array, source: Format | str, fmt: Format, profile: Profile,
                random: Array | None = None) -> Array:
    """Codes (int64) for int64 IEEE bit patterns of ``source`` under ``profile``."""
    src = source if isinstance(source, Format) else SOURCE_FORMATS[source]
    p = profile.resolve(fmt)
    negative, is_nan, is_inf, is_zero, sig, exp2 = decompose(xp, bits, src)
    sig = xp.where(is_zero | is_nan | is_inf, 1, sig)  # keep dead lanes harmless

    if p.intermediate is not None:
        inter = SOURCE_FORMATS[p.intermediate]
        K, q, code_mag = round_fields(xp, sig, exp2, inter, "rne")
        to_inf = code_mag > inter.max_code
        to_zero = K == 0
        finite = ~(is_nan | is_inf | is_zero)
        is_inf = is_inf | (finite & to_inf)
        is_zero = is_zero | (finite & to_zero)
        sig = xp.where(to_inf | to_zero, 1, K)
        exp2 = q

    K, q, code_mag = round_fields(xp, sig, exp2, fmt, p.rounding, random, p.stochastic_bits)
    # Later rules win: rounding, then flush, overflow, zeros, Inf, NaN.
    code = _signed(xp, code_mag, negative, fmt)
    if p.subnormals == "flush":
        code = xp.where(code_mag < (1 << fmt.mantissa_bits), _zero(xp, negative, fmt), code)
    finite_overflow = "satfinite" if p.rounding == "rtz" else p.overflow  # IEEE 754 7.4
    code = xp.where(code_mag > fmt.max_code, _overflow_code(xp, negative, fmt, p, finite_overflow), code)
    if fmt.signed:
        code = xp.where((K == 0) | is_zero, _zero(xp, negative, fmt), code)
        code = xp.where(is_inf, _overflow_code(xp, negative, fmt, p, p.infinity), code)
    else:
        # e8m0fnu: no sign and no zero. A negative input is NaN or |x|; a
        # value that rounds below the smallest code takes the smallest code.
        positive = xp.zeros_like(negative)
        code = xp.where(K == 0, 0, code)
        code = xp.where(is_inf, _overflow_code(xp, positive, fmt, p, p.infinity), code)
        if p.unsigned_negative == "nan":
            code = xp.where(negative & ~is_zero, _nan_code(xp, positive, fmt, p), code)
        elif p.unsigned_negative == "min":
            code = xp.where(negative & ~is_zero, 0, code)
        zero_code = _nan_code(xp, positive, fmt, p) if p.unsigned_zero == "nan" else 0
        code = xp.where(is_zero, zero_code, code)
    code = xp.where(is_nan, _nan_code(xp, negative, fmt, p), code)
    return code


def decode_codes(xp: Any, codes: Array, fmt: Format) -> tuple[Array, Array, Array]:
    """Field decode of int64 codes: (signed significand, exponent, special).

    A finite code's value is ``sig * 2**exp2`` and ``special`` is 1 for NaN
    and 2 for Inf. An integer has no -0: a negative zero code has sig 0, so
    take the sign from :func:`decode_fields` where it matters.
    """
    negative, sig, exp2, special = decode_fields(xp, codes, fmt)
    return xp.where(negative, -sig, sig), exp2, special


def decode_fields(xp: Any, codes: Array, fmt: Format) -> tuple[Array, Array, Array, Array]:
    """Field decode of int64 codes: (negative, significand, exponent, special).

    A finite code's value is ``(-1)**negative * sig * 2**exp2`` (sig >= 0;
    -0 is negative with sig 0) and ``special`` is 1 for NaN and 2 for Inf.
    """
    m = fmt.mantissa_bits
    negative = (codes & fmt.sign_mask) != 0 if fmt.signed else xp.zeros_like(codes, dtype=xp.bool)
    mag = codes & fmt.magnitude_mask
    e_field = mag >> m
    frac = mag & fmt.mantissa_mask
    if fmt.has_subnormals:
        subnormal = e_field == 0
        sig = xp.where(subnormal, frac, frac | (1 << m))
        exp2 = xp.where(subnormal, fmt.emin, e_field - fmt.bias) - m
    else:
        sig = frac | (1 << m)
        exp2 = e_field - fmt.bias - m
    if fmt.nan_encoding == "ieee":
        top = e_field == (1 << fmt.exponent_bits) - 1
        special = xp.where(top & (frac != 0), 1, xp.where(top, 2, 0))
    elif fmt.nan_encoding == "all_ones":
        special = xp.where(mag == fmt.magnitude_mask, 1, 0)
    elif fmt.nan_encoding == "negative_zero":
        special = xp.where(codes == fmt.sign_mask, 1, 0)
    else:
        special = xp.zeros_like(codes)
    return negative, sig, exp2, special

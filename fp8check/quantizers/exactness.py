"""Which side of a ``codes`` divergence is exact: the correctly rounded x / scale.

A quantizer and its recipe may agree on the scale ``S`` and still give
different codes because they round differently on the way: ``x / S``
rounded to float32 and then to fp8 is two roundings, ``x * fl(1/S)`` three.
The value they both approximate is the real number ``x / S`` (``x * S``
under the ``scale`` convention), and exactly one code is its correct
rounding under the profile. :func:`exact_code` is the spec (Python
fractions, one rounding); :func:`exact_codes` the vectorised model, which
encodes the float64 quotient (product): for float32 ``x = X 2^a`` and
``S = Y 2^b`` and an fp8 rounding boundary ``m = M 2^c`` (M of at most 5
significant bits), a nonzero ``x - m S`` is at least ``2^min(a, b+c)``, so
the exact quotient lies at least 2^-29 (relative) from every boundary it is
not on, far beyond float64's 2^-53 rounding, and no float64 quotient of
float32 numbers overflows or underflows. The two are tested equal.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np

from fp8check.formats import Format
from fp8check.profiles import Profile
from fp8check.reference import decode, encode
from fp8check.reference.spec import encode_value

__all__ = ["exact_code", "exact_codes", "exact_quotient", "ExactnessCounts", "verdicts", "verdict_text", "count"]


def exact_code(x: float, scale: float, op: str, fmt: Format, profile: Profile) -> int:
    """The code of the real number ``x / scale`` (``op`` divide or multiply-reciprocal) or ``x * scale``
    (``op`` multiply), rounded once under ``profile``; ``x`` and ``scale`` finite, ``scale > 0``."""
    fx, fs = Fraction(float(x)), Fraction(float(scale))
    v = fx * fs if op == "multiply" else fx / fs
    negative = v < 0 or (v == 0 and np.signbit(np.float64(x)))
    return int(encode_value(bool(negative), abs(v), fmt, profile))


def exact_codes(x32: np.ndarray, s32: np.ndarray, op: str, fmt: Format, profile: Profile) -> np.ndarray:
    """:func:`exact_code` of every (x, scale) pair (float32 arrays of one shape), vectorised."""
    x64, s64 = np.asarray(x32, np.float32).astype(np.float64), np.asarray(s32, np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        v = x64 * s64 if op == "multiply" else x64 / s64
    return encode(v, fmt, profile)


class ExactnessCounts(NamedTuple):
    """Over the ``codes`` divergences of a check: how many have the kernel's code the correctly rounded one
    (and the recipe's not), the recipe's (and the kernel's not), or neither."""

    kernel_exact: int
    recipe_exact: int
    neither: int

    def to_dict(self) -> dict[str, int]:
        return self._asdict()


def verdicts(x32: np.ndarray, s32: np.ndarray, expected: np.ndarray, actual: np.ndarray, op: str, fmt: Format,
             profile: Profile, nan_table: np.ndarray) -> np.ndarray:
    """Per divergence: 1 the kernel is exact, 2 the recipe is exact, 0 neither (NaN codes by class)."""
    exact = exact_codes(x32, s32, op, fmt, profile).astype(np.int64)
    expected, actual = np.asarray(expected, np.int64), np.asarray(actual, np.int64)
    kernel = (actual == exact) | (nan_table[actual] & nan_table[exact])
    recipe = (expected == exact) | (nan_table[expected] & nan_table[exact])
    x, s = np.asarray(x32, np.float32), np.asarray(s32, np.float32)
    real = np.isfinite(x) & np.isfinite(s) & (s != 0)  # 0/0, x/0: no real quotient, neither side is exact
    return np.where(real & kernel & ~recipe, 1, np.where(real & recipe & ~kernel, 2, 0))


def exact_quotient(x: float, scale: float, op: str) -> str:
    """The real number ``x / scale`` (``x * scale`` for ``op`` multiply) in decimal: exact when it has a short
    expansion, else 21 significant digits and "..." (never a float's rounding of it)."""
    from decimal import Context, Decimal

    fx, fs = Fraction(float(x)), Fraction(float(scale))
    v = fx * fs if op == "multiply" else fx / fs
    if v == 0:  # a Fraction has no -0; a zero x keeps the sign its operands give it
        return "-0" if bool(np.signbit(np.float64(x))) != bool(np.signbit(np.float64(scale))) else "0"
    ctx = Context(prec=21)
    d = ctx.divide(Decimal(v.numerator), Decimal(v.denominator))
    exact = Fraction(d) == v
    text = format(d.normalize(ctx), "g") if exact else format(d, "g")
    return text if exact else text + "..."


def _tie_text(x: float, scale: float, op: str, fmt: Format, code: int, actual: int) -> str:
    """When the exact quotient lies halfway between the correctly rounded code and the kernel's: that it is a
    tie, and which way the kernel rounds it (empty otherwise)."""
    fx, fs = Fraction(float(x)), Fraction(float(scale))
    v = fx * fs if op == "multiply" else fx / fs
    ve, va = (float(decode(np.array([c], dtype=np.uint8), fmt)[0]) for c in (code, actual))
    if not (np.isfinite(ve) and np.isfinite(va)) or ve == va or v != (Fraction(ve) + Fraction(va)) / 2:
        return ""
    way = "away from" if abs(va) > abs(ve) else "toward"
    return (f"; it is a tie, halfway between {code:02X} ({ve:g}) and {actual:02X} ({va:g}): the kernel rounds it "
            f"{way} zero")


def _zero_sign_text(fmt: Format, code: int, actual: int) -> str:
    """When the correctly rounded code and the kernel's are zeros of opposite sign: the kernel writes the other
    zero, which no rounding explains (a sign taken from ``x < 0``, which -0.0 is not, or dropped); else empty."""
    ve, va = (float(decode(np.array([c], dtype=np.uint8), fmt)[0]) for c in (code, actual))
    if code == actual or ve != 0 or va != 0:
        return ""
    return (f"; the kernel's {actual:02X} is {'+0' if np.signbit(ve) else '-0'}: a zero of the wrong sign, not a "
            "rounding (a sign bit taken from x < 0 misses -0.0)")


def verdict_text(verdict: int, x: float, scale: float, op: str, fmt: Format, profile: Profile,
                 actual: int | None = None) -> str:
    """The sentence a divergence's detail ends with: the exact quotient, its correctly rounded code, and which
    side (the kernel, the recipe, neither) gave that code; with the kernel's code ``actual``, whether the
    quotient is a tie the kernel rounds the other way."""
    what = "x * scale" if op == "multiply" else "x / scale"
    if not (np.isfinite(x) and np.isfinite(scale) and scale != 0):  # 0/0, x/0, x*Inf: no real number
        with np.errstate(all="ignore"):
            ieee = np.float64(x) * np.float64(scale) if op == "multiply" else np.float64(x) / np.float64(scale)
        return (f"{what} with x = {float(x)!r}, scale = {float(scale)!r} is no real number (IEEE: {float(ieee)!r}); "
                "neither side is more exact")
    code = exact_code(x, scale, op, fmt, profile)
    exact = f"{what} = {exact_quotient(x, scale, op)} exactly, correctly rounded code {code:02X}"
    if verdict == 1:
        how = {"divide": f"x / scale rounded to float32, then to {fmt.name}",
               "multiply": f"x * scale rounded to float32, then to {fmt.name}",
               "multiply-reciprocal": f"1/scale rounded to float32, x * fl(1/scale) rounded to float32, then to "
                                      f"{fmt.name}"}[op]
        return f"the kernel is exact here; the recipe rounds twice ({how}): {exact}"
    if verdict == 2:
        zero_sign = _zero_sign_text(fmt, code, actual) if actual is not None else ""
        if zero_sign:
            return f"the recipe is exact here: {exact}{zero_sign}"
        tie = _tie_text(x, scale, op, fmt, code, actual) if actual is not None else ""
        return f"the recipe is exact here; the kernel rounds twice or otherwise differs: {exact}{tie}"
    return f"neither side is exact here: {exact}"


def count(v: np.ndarray) -> ExactnessCounts:
    v = np.asarray(v)
    return ExactnessCounts(int(np.count_nonzero(v == 1)), int(np.count_nonzero(v == 2)), int(np.count_nonzero(v == 0)))

"""The FP8 defect family, as data: one row per defect, each a mutation of a correct quantizer's output.

A mutation takes the input ``x`` (float32), the recipe and the reference's correct output
(:func:`fp8check.quantizers.quantize`: codes and stored scales) and returns the codes and
scales a kernel with that defect returns. Everything a mutation recomputes goes through the
quantizer reference (:mod:`fp8check.quantizers.scaling`, :func:`fp8check.encode`), so the
mutant differs from the correct output by the defect and nothing else.

Each row also names the inputs that expose it (:func:`exposing_input`): a defect that depends
on the data (saturation, NaN, a stale scale, a shifted scale) only shows on inputs that have
it, and a layout defect only where neighbouring blocks have different scales.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np

from fp8check.formats import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ
from fp8check.quantizers.recipe import Recipe
from fp8check.quantizers.scaling import (Quantized, applied_scales, apply_scale, block_amax, expand_scales, quantize,
                                         reciprocal32)
from fp8check.reference import decode, encode

__all__ = ["Defect", "DEFECTS", "defect", "mutate", "exposing_input", "Inputs"]

Inputs = Literal["varied", "saturating", "nan"]

# The other variant's largest value, for the fn/fnuz maximum swap.
_SWAPPED_MAX = {E4M3FN: E4M3FNUZ.max, E4M3FNUZ: E4M3FN.max, E5M2: E5M2FNUZ.max, E5M2FNUZ: E5M2.max}


@dataclass(frozen=True, kw_only=True)
class Defect:
    """One defect: what goes wrong, how large (``magnitude`` in ``unit``), and the larger or smaller
    versions measured for "the largest magnitude a gate accepts" (``sweep``)."""

    name: str
    family: str
    description: str
    mutation: str
    magnitude: float
    unit: str
    sweep: tuple[float, ...] = ()
    inputs: Inputs = "varied"
    realistic: str = field(default="", compare=False)

    def magnitude_text(self, m: float | None = None) -> str:
        m = self.magnitude if m is None else m
        if self.unit == "relative":
            return "1 ulp" if m == 2.0 ** -23 else f"{m:.3g} ({m * 100:.3g}%)"
        if self.unit == "fraction":
            return f"{m * 100:.3g}% of elements"
        if self.unit == "factor":
            return f"x{m:g}"
        if self.unit == "tile":
            return f"{m:g}x{m:g} tile"
        if not self.unit:
            return "-"
        if self.unit == "steps":
            return f"{m:g} step" + ("s" if m != 1 else "")
        return f"{m:g} {self.unit}".strip()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "description": self.description,
                "magnitude": self.magnitude, "unit": self.unit, "magnitude_text": self.magnitude_text(),
                "sweep": list(self.sweep), "inputs": self.inputs}


_REL_SWEEP = (2.0 ** -23, 1e-4, 1e-3, 3e-3, 1e-2, 2e-2, 4.5e-2, 0.1, 0.25, 1.0)
_FRACTION_SWEEP = (1e-4, 1e-3, 1e-2, 5e-2, 0.1, 0.5, 1.0)
_STALE_SWEEP = (1.001, 1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0)

DEFECTS: tuple[Defect, ...] = (
    Defect(name="scale-x2", family="scale", mutation="stored-scale-factor", magnitude=2.0, unit="factor",
           description="the stored scale is twice the right one (codes right): every value doubles",
           realistic="an e8m0 exponent stored one too high; fn bytes reinterpreted as fnuz without halving"),
    Defect(name="scale-half", family="scale", mutation="stored-scale-factor", magnitude=0.5, unit="factor",
           description="the stored scale is half the right one (codes right): every value halves",
           realistic="fn bytes read as fnuz (bias 8) without doubling the scale"),
    Defect(name="scale-1ulp", family="scale", mutation="stored-scale-relative", magnitude=2.0 ** -23,
           unit="relative", description="the stored scale is one float32 ulp too large (codes right)",
           realistic="the reciprocal of the applied scale stored instead of the exact quotient"),
    Defect(name="scale-4.5%", family="scale", mutation="stored-scale-relative", magnitude=0.045, unit="relative",
           sweep=_REL_SWEEP, description="the stored scale is 4.5% too large (codes right): a uniform 4.5% error",
           realistic="an amax taken after a clamp or from a stale buffer"),
    Defect(name="fn-fnuz-max", family="range", mutation="swapped-max", magnitude=1.0, unit="",
           description="the scale maps amax to the other variant's largest value (e4m3fn 448 <-> e4m3fnuz 240), "
           "applied and stored", realistic="finfo of the wrong dtype: 448 on MI300, 240 on an OCP target"),
    Defect(name="e8m0-step", family="range", mutation="pow2-step-down", magnitude=1.0, unit="steps",
           description="a power-of-two (e8m0) scale one exponent step too small, applied and stored: the "
           "block's largest elements saturate", realistic="floor instead of ceil of log2 (or the reverse rule)"),
    Defect(name="saturation-to-nan", family="non-finite", mutation="overflow-nan", magnitude=1.0, unit="",
           inputs="saturating", description="values past the format's range become NaN instead of saturating",
           realistic="a cast without satfinite (torch <= 2.11 eager, ml_dtypes)"),
    Defect(name="nan-to-max", family="non-finite", mutation="nan-max", magnitude=1.0, unit="", inputs="nan",
           description="NaN inputs become +max instead of NaN", realistic="a clamp by fminf/fmaxf, which drop NaN"),
    Defect(name="zero-row", family="coverage", mutation="zero-rows", magnitude=1.0, unit="row",
           description="the last row is left zero", realistic="a grid one program short (off by one)"),
    Defect(name="zero-block", family="coverage", mutation="zero-block", magnitude=128.0, unit="elements",
           description="the last 1x128 block of the last row is left zero", realistic="a masked tail not stored"),
    Defect(name="zero-tile", family="coverage", mutation="zero-tile", magnitude=128.0, unit="tile",
           description="the last 128x128 tile is left zero", realistic="one program of a 2-D grid missing"),
    Defect(name="sign-flip-0.1%", family="sign", mutation="sign-flip", magnitude=1e-3, unit="fraction",
           sweep=_FRACTION_SWEEP, description="0.1% of the elements have the wrong sign",
           realistic="a sign bit taken from the wrong lane"),
    Defect(name="scale-transposed", family="layout", mutation="scale-transposed", magnitude=1.0, unit="",
           description="the scale grid written column-major (transposed), read row-major",
           realistic="MN-major scales where K-major are expected (DeepGEMM's layouts)"),
    Defect(name="scale-shifted", family="layout", mutation="scale-shifted", magnitude=1.0, unit="block",
           description="each element dequantized with the next block's scale (the scale array shifted by one)",
           realistic="a scale pointer advanced once too often"),
    Defect(name="stale-scale", family="state", mutation="stale-scale", magnitude=1.1, unit="x amax",
           sweep=_STALE_SWEEP, description="the scale of the previous batch stored with this batch's codes "
           "(previous batch: this one times 1.1)", realistic="a scale buffer read before the amax of this batch lands"),
    Defect(name="zeros", family="output", mutation="zeros", magnitude=1.0, unit="",
           description="zeros everywhere: the kernel returns an untouched zero buffer",
           realistic="the output allocated and never written (a launch that did nothing)"),
)

_BY_NAME = {d.name: d for d in DEFECTS}


def defect(name: str) -> Defect:
    from fp8check.errors import InvalidValueError

    if name not in _BY_NAME:
        raise InvalidValueError(f"unknown defect {name!r}; defects: {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


# -- mutations, one free function each -----------------------------------------------------------


def _stored_from_applied(applied: np.ndarray, recipe: Recipe) -> np.ndarray:
    return applied if recipe.stored == "applied" else reciprocal32(applied)


def _applied_from_stored(stored: np.ndarray, recipe: Recipe) -> np.ndarray:
    return stored.astype(np.float32) if recipe.stored == "applied" else reciprocal32(stored)


def _requantize(x: np.ndarray, recipe: Recipe, applied: np.ndarray, profile: Any = None) -> Quantized:
    """Codes of ``x`` under the given applied scales (the reference's element step), and those scales stored."""
    y = apply_scale(x, expand_scales(applied, x.shape, recipe), recipe)
    return Quantized(encode(y, recipe.format, recipe.profile if profile is None else profile),
                     _stored_from_applied(applied, recipe))


def _value_scale(stored: np.ndarray, factor: float, recipe: Recipe) -> np.ndarray:
    """The stored scale changed so that every dequantized value is ``factor`` times larger."""
    f = np.float64(factor) if recipe.stored_convention == "scale_inv" else 1 / np.float64(factor)
    with np.errstate(all="ignore"):
        return (stored.astype(np.float64) * f).astype(np.float32)


def _stored_scale_factor(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    return Quantized(q.codes, _value_scale(q.scales, m, recipe))


def _stored_scale_relative(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    s = np.asarray(q.scales, np.float32)
    if m == 2.0 ** -23:  # one ulp, exactly
        out = np.nextafter(s, np.float32(np.inf)) if recipe.stored_convention == "scale_inv" else \
            np.nextafter(s, np.float32(0))
        return Quantized(q.codes, np.where(np.isfinite(s) & (s > 0), out, s).astype(np.float32))
    return Quantized(q.codes, _value_scale(s, 1 + m, recipe))


def _swapped_max(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    if recipe.rule != "amax" or recipe.format not in _SWAPPED_MAX:
        return q  # an MX rule maps amax to a power of two, not to the format's max
    return quantize(x, recipe.replace(target=_SWAPPED_MAX[recipe.format]))


def _pow2_step_down(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    if recipe.scale_dtype != "e8m0" and recipe.pow2 is None:
        return q  # only power-of-two scales have steps
    applied = _applied_from_stored(np.asarray(q.scales, np.float32), recipe)
    # scale_inv (a multiplier) one step smaller; scale (a divisor's reciprocal) one step larger
    step = np.float32(2.0 ** (-m if recipe.convention == "scale_inv" else m))
    with np.errstate(all="ignore"):
        return _requantize(x, recipe, (applied * step).astype(np.float32))


def _overflow_nan(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    if recipe.format.has_inf:
        return q  # e5m2 overflows to Inf under both; not this defect
    applied = _applied_from_stored(np.asarray(q.scales, np.float32), recipe)
    return _requantize(x, recipe, applied, profile="ieee")  # ieee: past max + half an ulp is NaN


def _nan_max(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    nan = np.isnan(decode(q.codes, recipe.format))
    top = int(encode(np.array([recipe.format.max], np.float32), recipe.format, "satfinite")[0])
    return Quantized(np.where(nan, np.uint8(top), q.codes).astype(np.uint8), q.scales)


def _zeroed(q: Quantized, rows: slice, cols: slice) -> Quantized:
    codes = q.codes.copy()
    codes[rows, cols] = 0
    return Quantized(codes, q.scales)


def _zero_rows(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    return _zeroed(q, slice(q.codes.shape[0] - int(m), None), slice(None))


def _zero_block(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    n = q.codes.shape[1]
    return _zeroed(q, slice(q.codes.shape[0] - 1, None), slice((max(n - 1, 0) // int(m)) * int(m), None))


def _zero_tile(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    rows, cols = q.codes.shape
    t = int(m)
    return _zeroed(q, slice((max(rows - 1, 0) // t) * t, None), slice((max(cols - 1, 0) // t) * t, None))


def _sign_flip(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    values = decode(q.codes, recipe.format)
    candidates = np.flatnonzero(np.isfinite(values) & (values != 0))  # fnuz: flipping 0x00 would make NaN
    if candidates.size == 0:
        return q
    count = max(1, int(round(candidates.size * m)))
    chosen = candidates[np.linspace(0, candidates.size - 1, count).round().astype(np.int64)]  # spread evenly
    codes = q.codes.copy().reshape(-1)
    codes[chosen] ^= np.uint8(0x80)
    return Quantized(codes.reshape(q.codes.shape), q.scales)


def _scale_transposed(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    s = np.asarray(q.scales, np.float32)
    if s.ndim < 2:
        return q
    return Quantized(q.codes, np.ascontiguousarray(s.T).reshape(s.shape))


def _scale_shifted(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    s = np.asarray(q.scales, np.float32)
    if s.size < 2:
        return q
    return Quantized(q.codes, np.roll(s.reshape(-1), -int(m)).reshape(s.shape))


def _stale_scale(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    if prev is None or np.shape(prev.scales) != np.shape(q.scales):
        return q  # the first batch of a shape has no previous one
    return Quantized(q.codes, np.asarray(prev.scales, np.float32))


def _zeros(x: np.ndarray, recipe: Recipe, q: Quantized, m: float, prev: Quantized | None) -> Quantized:
    return Quantized(np.zeros_like(q.codes), q.scales)


Mutation = Callable[[np.ndarray, Recipe, Quantized, float, "Quantized | None"], Quantized]
_MUTATIONS: dict[str, Mutation] = {
    "stored-scale-factor": _stored_scale_factor, "stored-scale-relative": _stored_scale_relative,
    "swapped-max": _swapped_max, "pow2-step-down": _pow2_step_down, "overflow-nan": _overflow_nan,
    "nan-max": _nan_max, "zero-rows": _zero_rows, "zero-block": _zero_block, "zero-tile": _zero_tile,
    "sign-flip": _sign_flip, "scale-transposed": _scale_transposed, "scale-shifted": _scale_shifted,
    "stale-scale": _stale_scale, "zeros": _zeros,
}


def mutate(d: Defect, x: np.ndarray, recipe: Recipe, correct: Quantized, *, magnitude: float | None = None,
           previous: Quantized | None = None) -> Quantized:
    """The output of a kernel with defect ``d`` on ``x`` (``correct``: the reference's output on ``x``;
    ``previous``: the kernel's output on the batch before, for a stale scale)."""
    m = d.magnitude if magnitude is None else magnitude
    out = _MUTATIONS[d.mutation](np.asarray(x, np.float32), recipe, correct, m, previous)
    return Quantized(np.ascontiguousarray(out.codes, dtype=np.uint8), np.asarray(out.scales, np.float32))


def previous_batch(d: Defect, x: np.ndarray, magnitude: float | None = None) -> np.ndarray | None:
    """The batch before ``x`` for a stale-scale defect: ``x`` times the magnitude (its amax that much larger)."""
    if d.mutation != "stale-scale":
        return None
    return (np.asarray(x, np.float32) * np.float32(d.magnitude if magnitude is None else magnitude)).astype(np.float32)


# -- inputs that expose each defect ---------------------------------------------------------------


def exposing_input(d: Defect | None, recipe: Recipe, shape: tuple[int, int], seed: int) -> np.ndarray:
    """A float32 input of ``shape`` on which ``d`` shows: normal values whose magnitude steps by 2^3 from
    row to row and from one block to the next (so neighbouring scales differ, powers of two included),
    plus what the defect needs: elements past the range (saturating), NaN elements (nan)."""
    rng = np.random.default_rng(seed)
    m, n = shape
    x = rng.standard_normal(shape)
    # neighbouring rows, 32-column blocks, 128-column blocks and 128-row tiles differ by 2^3 at least once over
    # each boundary, more than the spread of a block's largest normal value: their scales always differ
    rows = np.arange(m)[:, None]
    cols = np.arange(n)[None, :]
    octaves = 3 * ((rows % 3) - 1) + 3 * ((cols // 32) % 2) + 3 * ((cols // 128) % 3) + 3 * ((rows // 128) % 2) - 6
    x = (x * np.exp2(octaves)).astype(np.float32)
    inputs = d.inputs if d is not None else "varied"
    if inputs == "saturating":
        _add_saturating(x, recipe, rng)
    elif inputs == "nan":
        idx = rng.choice(x.size, size=max(1, x.size // 512), replace=False)
        x.reshape(-1)[idx] = np.nan
    return x


def _add_saturating(x: np.ndarray, recipe: Recipe, rng: np.random.Generator) -> None:
    """Make elements land past the format's range after scaling, where the recipe lets any do so:
    an Inf among finite values (amax over finite values only), or a block amax whose significand
    is 1.96 (an MX floor scale puts it at 1.96 * 2^emax, past the largest value)."""
    m, n = x.shape
    if recipe.nonfinite == "finite":
        idx = rng.choice(x.size, size=max(2, x.size // 1024), replace=False)
        x.reshape(-1)[idx] = np.where(rng.random(idx.size) < 0.5, -np.inf, np.inf).astype(np.float32)
    amax = block_amax(np.where(np.isfinite(x), x, 0).astype(np.float32), recipe.replace(nonfinite="finite"))
    per_element = expand_scales(amax, x.shape, recipe)
    # one element of every block: set to 1.96 * 2^ceil(log2 amax), the block's new largest
    with np.errstate(divide="ignore"):
        top = np.where(per_element > 0, np.exp2(np.ceil(np.log2(np.maximum(per_element, 1e-30)))) * 1.96, 0)
    g = recipe.granularity
    rows, cols = (g.rows, g.cols) if g.kind == "block" else ((1, n) if g.kind == "rowwise" else
                                                            (m, 1) if g.kind == "colwise" else (m, n))
    for r in range(0, m, rows):
        for c in range(0, n, cols):
            if np.isfinite(x[r, c]):
                x[r, c] = np.float32(math.copysign(float(top[r, c]), 1.0 if x[r, c] >= 0 else -1.0))


def applies(d: Defect, recipe: Recipe) -> str | None:
    """Why ``d`` cannot occur under ``recipe`` (a sentence), or None when it can."""
    if d.mutation == "swapped-max" and (recipe.rule != "amax" or recipe.format not in _SWAPPED_MAX):
        return "an MX rule maps amax to a power of two, not to the format's largest value"
    if d.mutation == "pow2-step-down" and recipe.scale_dtype != "e8m0" and recipe.pow2 is None:
        return "the recipe's scales are not powers of two"
    if d.mutation == "nan-max" and recipe.nonfinite == "ieee":
        return "a NaN makes its block's scale NaN (IEEE amax): the block is NaN whatever its codes"
    if d.mutation == "overflow-nan" and recipe.format.has_inf:
        return "the format overflows to Inf either way"
    if d.mutation in ("scale-transposed", "scale-shifted") and recipe.granularity.kind == "tensorwise":
        return "one scale per tensor has no layout"
    if d.mutation == "scale-transposed" and recipe.granularity.kind != "block":
        return "a one-dimensional scale vector reads the same transposed"
    if d.mutation == "stored-scale-relative" and recipe.scale_dtype == "e8m0":
        return "an e8m0 scale holds powers of two only"
    return None

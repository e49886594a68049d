"""Scale hazards: the targeted inputs that break quantizers, and what to count.

Each hazard is a named property every quantizer is held to (see
``docs/recipes.md``). Conformance to the recipe is decided bit for bit by
:func:`fp8check.quantizers.conformance.check_quantizer` (categories ``scale``,
``codes``, ``nonfinite``); on top of that the check counts, on the kernel's
own outputs, what a deployer needs to know even when the kernel does
exactly what its recipe says:

``nonfinite_blast_radius``
    finite values in a block holding an Inf or NaN that the kernel turned
    into 0 or NaN although the block's other values determine a perfectly
    good scale (torchao tensorwise: one Inf zeroes the whole tensor).
``scale_not_finite``
    blocks of finite input whose scale is Inf or NaN (no eps clamp: amax 0
    or tiny; a scale computed or stored in float16 or bfloat16 overflowing).
``scale_zero``
    blocks of finite input whose scale is 0 (a ``scale`` that underflowed
    for a huge amax, a ``scale_inv`` of an all-zero block without eps).
``nan_codes_from_finite_input``
    NaN codes for finite input (0 * Inf, 0/0 when amax is 0 and there is
    no eps).
``dequant_overflow``
    finite inputs within range of the dequantized dtype whose code x scale
    overflows it (a scale rounded up, a fnuz conversion doubling the scale).

:func:`edge_cases` builds the targeted inputs for a recipe: all-zero,
subnormal, tiny and huge block maxima, maxima on and one ulp around every
scale boundary, values on fp8 rounding ties, signed zeros, ±Inf and NaN in
one block among finite ones, one +Inf in a 256x256 tensor, and MoE group
layouts with empty groups and one group much larger than the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fp8check.reference import decode
from fp8check.quantizers.recipe import TENSORWISE as _TENSOR, Recipe
from fp8check.quantizers.scaling import (
    dequantize,
    element_blocks,
    overflow_threshold,
    quantize,
    element_scales,
    block_amax,
)
from fp8check.quantizers.cases import QuantCase, assemble, boundary_amaxes, to_dtype

__all__ = ["HAZARDS", "HazardTally", "edge_cases", "nan_code_table"]

HAZARDS = {
    "nonfinite_blast_radius": "finite values zeroed or made NaN because their block held an Inf or NaN",
    "scale_not_finite": "blocks of finite input whose scale is Inf or NaN",
    "scale_zero": "blocks of finite input whose scale is 0",
    "nan_codes_from_finite_input": "NaN codes produced from finite input values",
    "dequant_overflow": "finite inputs whose code x scale overflows the dequantized dtype",
}


def nan_code_table(fmt) -> np.ndarray:  # noqa: ANN001 - a Format
    return np.array([fmt.is_nan(c) for c in range(256)], dtype=bool)


@dataclass
class HazardTally:
    """Counts of each hazard over all cases, with the first example of each."""

    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in HAZARDS})
    examples: dict[str, str] = field(default_factory=dict)
    blast_blocks: int = 0
    blast_finite: int = 0
    worst_blast: tuple[int, int, str] = (0, 0, "")

    def _add(self, name: str, count: int, example: str) -> None:
        if count:
            self.counts[name] += int(count)
            self.examples.setdefault(name, example)

    def observe(self, case: QuantCase, recipe: Recipe, actual_codes: np.ndarray, actual_scales: np.ndarray) -> None:
        """Count the hazards in one kernel output (scales: float64 canonical)."""
        x = case.x
        m, n = x.shape
        blocks = element_blocks(x.shape, recipe, case.offsets).reshape(-1)
        s = actual_scales.reshape(-1)
        per_tensor = None
        if recipe.two_level:  # the per-tensor scale comes after the block scales
            s, per_tensor = s[:-1], s[-1]
        count = s.size
        finite = np.isfinite(x).reshape(-1)
        elements = np.bincount(blocks, minlength=count)
        finite_per_block = np.bincount(blocks, weights=finite, minlength=count)
        bad_block = finite_per_block < elements
        nan_tab = nan_code_table(recipe.format)
        codes = actual_codes.reshape(-1)
        is_nan = nan_tab[codes]
        is_zero = (codes & recipe.format.magnitude_mask) == 0

        # Blast radius: compare with the same recipe that leaves non-finite values out of amax.
        if bad_block.any():
            robust = quantize(x, recipe.replace(nonfinite="finite"), offsets=case.offsets).codes.reshape(-1)
            robust_ok = ~nan_tab[robust] & ((robust & recipe.format.magnitude_mask) != 0)
            in_bad = bad_block[blocks] & finite
            lost = in_bad & robust_ok & (is_nan | is_zero)
            n_lost, n_fin = int(lost.sum()), int(in_bad.sum())
            self.blast_blocks += int(bad_block.sum())
            self.blast_finite += n_fin
            self._add("nonfinite_blast_radius", n_lost,
                      f"{case.name}: {n_lost} of {n_fin} finite values lost in {m}x{n} {case.dtype}")
            if n_lost > self.worst_blast[0]:
                self.worst_blast = (n_lost, n_fin, f"{case.name} ({m}x{n} {case.dtype})")

        good = ~bad_block & (elements > 0)
        with np.errstate(invalid="ignore"):
            not_finite = good & ~np.isfinite(s)
            zero = good & (s == 0)
        for hazard, bad_scale in (("scale_not_finite", not_finite), ("scale_zero", zero)):
            if bad_scale.any():
                b = int(np.flatnonzero(bad_scale)[0])
                self._add(hazard, int(bad_scale.sum()),
                          f"{case.name}: block {b} of {m}x{n} {case.dtype} has scale {float(s[b])!r}")
        nan_from_finite = finite & is_nan & good[blocks]
        if nan_from_finite.any():
            i = int(np.flatnonzero(nan_from_finite)[0])
            self._add("nan_codes_from_finite_input", int(nan_from_finite.sum()),
                      f"{case.name}: x[{i // n}, {i % n}] = {float(x.reshape(-1)[i])!r} gave NaN code {codes[i]:#04x}")
        threshold = overflow_threshold(recipe.dequant_dtype)
        values = dequantize(actual_codes, s, recipe, offsets=case.offsets, per_tensor=per_tensor).reshape(-1)
        with np.errstate(invalid="ignore"):
            over = finite & (np.abs(x.reshape(-1)) < threshold) & (np.abs(values) >= threshold)
        if over.any():
            i = int(np.flatnonzero(over)[0])
            self._add("dequant_overflow", int(over.sum()),
                      f"{case.name}: x = {float(x.reshape(-1)[i])!r} dequantizes to {float(values[i])!r}, beyond {recipe.dequant_dtype}")

    def to_list(self) -> list[dict[str, object]]:
        return [
            {"name": k, "count": self.counts[k], "description": HAZARDS[k], "example": self.examples.get(k, "")}
            for k in HAZARDS
        ]

    def blast_radius(self) -> dict[str, object]:
        return {
            "blocks_with_nonfinite": self.blast_blocks,
            "finite_values_in_them": self.blast_finite,
            "finite_values_lost": self.counts["nonfinite_blast_radius"],
            "worst_case": {"lost": self.worst_blast[0], "finite": self.worst_blast[1], "case": self.worst_blast[2]},
        }


# -- targeted inputs --------------------------------------------------------------

_FILL = np.array([1.0, -0.75, 0.5, -0.3125, 0.1234567, 0.0078125, -1e-3, 0.0, 0.999, -0.5001, 0.33, 1e-6,
                  -0.0625, 0.875, 0.2, -0.9], dtype=np.float64)


def _scaled(amax: float) -> np.ndarray:
    with np.errstate(over="ignore", under="ignore"):
        p = (np.float64(amax) * _FILL).astype(np.float32)
    p[0] = np.float32(amax)
    return p


def _tie_payloads(recipe: Recipe) -> list[np.ndarray]:
    """Blocks whose scale is an exact power of two and whose other values
    scale onto exact midpoints between adjacent codes."""
    values = decode(np.arange(recipe.format.code_count), recipe.format)
    pos = np.unique(values[np.isfinite(values) & (values > 0)])
    mids = (pos[:-1] + pos[1:]) / 2
    out = []
    for k in (-6, 0, 5):
        amax = recipe.amax_target * 2.0 ** k if recipe.rule == "amax" else 2.0 ** (recipe.format.emax + k) * 1.75
        r1 = recipe.replace(granularity=_TENSOR)
        scale = float(element_scales(block_amax(np.full((1, 1), amax, np.float32), r1), r1))
        unit = 1.0 / scale if recipe.element_op == "multiply" else scale
        if not (np.isfinite(unit) and unit > 0):
            continue
        with np.errstate(over="ignore", under="ignore"):
            ties = (mids * unit).astype(np.float32)
        ties = ties[np.isfinite(ties) & (np.abs(ties) <= amax)]
        signs = np.where(np.arange(ties.size) % 2 == 0, 1, -1).astype(np.float32)
        out.append(np.concatenate([[np.float32(amax)], ties * signs]).astype(np.float32))
    return out


def _payloads(recipe: Recipe) -> list[tuple[str, np.ndarray]]:
    f32 = np.finfo(np.float32)
    out: list[tuple[str, np.ndarray]] = [("all zeros", np.zeros(4, np.float32)),
                                         ("negative zeros", np.array([-0.0, 0.0, -0.0], np.float32))]
    tiny = [2.0 ** -149, 1e-40, float(f32.tiny), 3e-38, 1e-30, 1e-20, 1e-13, 1e-12, 9.9e-13, 1e-5, 1e-4, 2e-3]
    out += [(f"amax {v:.3g} (tiny)", _scaled(v)) for v in tiny]
    huge = [1e5, 65504.0, 65520.0, 3.4e38, float(f32.max), 1e30, 2.0 ** 120]
    out += [(f"amax {v:.3g} (huge)", _scaled(v)) for v in huge]
    out += [(f"amax {v!r} (scale boundary)", _scaled(v))
            for v in boundary_amaxes(recipe, list(range(-10, 11)) + [-120, -100, -60, 60, 100, 120])]
    out += [("rounding ties", p) for p in _tie_payloads(recipe)]
    return out


def _nonfinite_payloads() -> list[tuple[str, np.ndarray]]:
    base = _scaled(3.5)
    out = []
    for name, v in (("+Inf", np.inf), ("-Inf", -np.inf), ("NaN", np.nan)):
        p = base.copy()
        p[3] = v
        out.append((f"one {name} among finite values", p))
    both = base.copy()
    both[2], both[5] = np.inf, np.nan
    out.append(("+Inf and NaN among finite values", both))
    out.append(("all +Inf", np.full(4, np.inf, np.float32)))
    return out


def _layout(recipe: Recipe, count: int) -> tuple[tuple[int, int], np.ndarray | None]:
    """A shape (and offsets) with at least ``count`` blocks, at most ~2**16 elements."""
    g = recipe.granularity
    width = 32 if recipe.granularity.kind != "block" else g.cols
    if g.kind == "tensorwise":
        return (2, 32), None
    if g.kind == "rowwise":
        return (count, 40), None
    if g.kind == "colwise":
        return (40, count), None
    if g.kind == "block":
        per_row = max(1, min(count, (1 << 16) // (g.rows * g.cols)))
        rows = -(-count // per_row)
        return (rows * g.rows, per_row * width), None
    sizes = np.array([0, 24, 0, 40, 9, 0], dtype=np.int64)  # empty first, middle and last groups
    offsets = np.cumsum(sizes)
    other = -(-count // 3)
    return ((other, int(offsets[-1])) if g.kind == "group_rowwise" else (int(offsets[-1]), other)), offsets


def _cases_from_payloads(recipe: Recipe, named: list[tuple[str, np.ndarray]], label: str,
                         dtype: str = "float32") -> list[QuantCase]:
    g = recipe.granularity
    if g.kind == "tensorwise":
        shape, _ = _layout(recipe, 1)
        return [QuantCase(name, to_dtype(assemble(recipe, shape, [p]), dtype), dtype) for name, p in named]
    payloads = [p for _, p in named]
    if g.kind == "block":
        per_case = max(1, (1 << 16) // (g.rows * g.cols))
        out = []
        for start in range(0, len(payloads), per_case):
            chunk = payloads[start:start + per_case]
            shape, _ = _layout(recipe, len(chunk))
            out.append(QuantCase(f"{label} [{start}:{start + len(chunk)}]",
                                 to_dtype(assemble(recipe, shape, chunk), dtype), dtype))
        return out
    shape, offsets = _layout(recipe, len(payloads))
    if g.grouped:
        # Map payloads onto the non-empty (group, row/col) blocks in order.
        blocks = element_blocks(shape, recipe, offsets)
        used = np.unique(blocks)
        full = [payloads[0]] * (int(blocks.max()) + 1)
        for i, b in enumerate(used):
            full[int(b)] = payloads[i % len(payloads)]
        payloads = full
    return [QuantCase(label, to_dtype(assemble(recipe, shape, payloads, offsets), dtype), dtype, offsets)]


def _group_layout_cases(recipe: Recipe, rng: np.random.Generator) -> list[QuantCase]:
    g = recipe.granularity
    layouts = {
        "one group": [37],
        "empty first group": [0, 30, 18],
        "empty last groups": [25, 11, 0, 0],
        "groups of one": [1, 1, 0, 1],
        "one group of 300, larger than the mean": [0, 300],
        "one group of 590, larger than the mean": [10, 590],
    }
    out = []
    for name, sizes in layouts.items():
        offsets = np.cumsum(np.array(sizes, dtype=np.int64))
        split = int(offsets[-1])
        shape = (6, split) if g.kind == "group_rowwise" else (split, 6)
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, size=shape))).astype(np.float32)
        if "larger" in name:  # the group's largest values at its far end
            if g.kind == "group_rowwise":
                x[:, -1] = 1.0e4
            else:
                x[-1, :] = 1.0e4
        out.append(QuantCase(f"groups: {name}", x, "float32", offsets))
    return out


def edge_cases(recipe: Recipe, *, seed: int = 0) -> list[QuantCase]:
    """The targeted inputs for ``recipe`` (deterministic)."""
    rng = np.random.default_rng(seed)
    named = _payloads(recipe)
    cases = _cases_from_payloads(recipe, named, "amax edge cases")
    cases += _cases_from_payloads(recipe, named[:8] + named[-4:], "amax edge cases, bfloat16", "bfloat16")
    finite = [("finite block", _scaled(2.0)), ("finite block", _scaled(0.3))]
    cases += _cases_from_payloads(recipe, _interleave(_nonfinite_payloads(), finite), "non-finite values in some blocks")
    # One +Inf in a 256x256 tensor (columns a multiple of every block width).
    big = rng.standard_normal((256, 256)).astype(np.float32)
    big[17, 33] = np.inf
    offsets = None
    if recipe.grouped:
        offsets = np.array([0, 100, 100, 256], dtype=np.int64)
    cases.append(QuantCase("one +Inf in a 256x256 tensor", big, "float32", offsets))
    if recipe.grouped:
        cases += _group_layout_cases(recipe, rng)
    if recipe.granularity.kind == "block" and recipe.ragged:
        g = recipe.granularity
        shape = (g.rows + max(1, g.rows // 2) if g.rows > 1 else 3, g.cols + max(1, g.cols // 3))
        x = (rng.standard_normal(shape) * 4).astype(np.float32)
        x[-1, -1] = 1000.0  # the partial corner block has the largest value
        cases.append(QuantCase("ragged edge blocks", x))
    return cases


def _interleave(a: list, b: list) -> list:
    out = []
    for i, item in enumerate(a):
        out += [item, b[i % len(b)]]
    return out

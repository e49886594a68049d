"""Inputs for quantizers: targeted edge cases and a Hypothesis strategy.

A :class:`QuantCase` is one input to a quantize kernel: a 2-D float32 array
holding values representable in ``dtype`` (``float32`` or ``bfloat16``),
group ``offsets`` for per-group recipes, and a name saying why it exists.

:func:`quantizer_inputs` draws cases in Hypothesis's own style: a shape fit
for the recipe (whole and ragged blocks, MoE groups including empty ones),
a magnitude per block over the whole float32 range (subnormal, tiny, huge),
block maxima placed exactly on and one ulp around the points where a scale
changes (``target * 2**k`` and ``2**k``), dyadic values that land on fp8
rounding ties after a power-of-two scale, signed zeros, and now and then an
Inf or NaN. Bulk values come from a NumPy generator seeded by the draw, so
large blocks (128x128) cost one draw, not 16,384.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from fp8check.errors import InvalidValueError
from fp8check.quantizers.recipe import Recipe
from fp8check.quantizers.scaling import element_blocks

__all__ = ["QuantCase", "quantizer_inputs", "assemble", "to_dtype", "boundary_amaxes", "QUANTIZER_INPUT_DTYPES"]


@dataclass(frozen=True)
class QuantCase:
    """One quantizer input: ``x`` (float32 values exact in ``dtype``), ``offsets``, a name."""

    name: str
    x: np.ndarray
    dtype: str = "float32"
    offsets: np.ndarray | None = None
    # How the kernel receives x (fp8check.casts.harness.layout_base), and
    # what a divergence seen only in this case needs ("" for none).
    layout: str = "contiguous"
    condition: str = ""

    def __repr__(self) -> str:
        off = "" if self.offsets is None else f", offsets={self.offsets.tolist()}"
        lay = "" if self.layout == "contiguous" else f", {self.layout}"
        return f"QuantCase({self.name!r}, {self.x.shape[0]}x{self.x.shape[1]} {self.dtype}{off}{lay})"


QUANTIZER_INPUT_DTYPES = ("float32", "bfloat16")  # the input dtypes quantizer cases are drawn in


def to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded (RNE) to ``dtype`` and held as float32."""
    if dtype == "float32":
        return x.astype(np.float32)
    if dtype == "bfloat16":
        return x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    raise InvalidValueError(f"quantizer inputs are {' or '.join(QUANTIZER_INPUT_DTYPES)}, got {dtype!r}")


def _next(v: float, toward: float) -> float:
    return float(np.nextafter(np.float32(v), np.float32(toward)))


def boundary_amaxes(recipe: Recipe, ks: range | list[int] = range(-8, 9)) -> list[float]:
    """Block maxima on and one float32 ulp around every point where the
    recipe's scale changes: ``target * 2**k`` (amax rule, power-of-two
    rounding) and ``2**k`` (MX rules)."""
    out: list[float] = []
    bases = [recipe.amax_target, 1.0] if recipe.rule == "amax" else [1.0, 1.5]
    for base in bases:
        for k in ks:
            with np.errstate(over="ignore"):
                v = float(np.float32(base * 2.0 ** k))
            if np.isfinite(v) and v > 0:
                out += [v, _next(v, np.inf), _next(v, 0)]
    return out


def _block_grid(recipe: Recipe, shape: tuple[int, int], offsets: np.ndarray | None) -> tuple[np.ndarray, int]:
    blocks = element_blocks(shape, recipe, offsets)
    count = int(blocks.max()) + 1 if blocks.size else 0
    return blocks, count


def assemble(recipe: Recipe, shape: tuple[int, int], payloads: list[np.ndarray],
             offsets: np.ndarray | None = None) -> np.ndarray:
    """A float32 tensor of ``shape`` whose block b holds ``payloads[b % len]``,
    tiled over the block's elements in row-major order (payload[0] first);
    a block of more than 256 elements gets the payload once, spread over
    it, and zeros elsewhere."""
    blocks, count = _block_grid(recipe, shape, offsets)
    x = np.zeros(shape, dtype=np.float32)
    flat_blocks = blocks.reshape(-1)
    order = np.argsort(flat_blocks, kind="stable")
    sorted_blocks = flat_blocks[order]
    starts = np.searchsorted(sorted_blocks, np.arange(count))
    ends = np.searchsorted(sorted_blocks, np.arange(count), side="right")
    flat = x.reshape(-1)
    for b in range(count):
        idx = order[starts[b]:ends[b]]
        if idx.size:
            p = np.asarray(payloads[b % len(payloads)], dtype=np.float32)
            if idx.size <= 256:
                flat[idx] = np.resize(p, idx.size)
            else:  # a large block: the payload once, spread out, zeros elsewhere
                spots = idx[np.linspace(0, idx.size - 1, num=min(p.size, idx.size)).astype(np.int64)]
                flat[spots] = p[:spots.size]
    return x


def _shape_and_offsets(draw: st.DrawFn, recipe: Recipe, max_elements: int) -> tuple[tuple[int, int], np.ndarray | None]:
    g = recipe.granularity
    if g.kind == "block":
        per_block = g.rows * g.cols
        mb = draw(st.integers(1, max(1, min(3, max_elements // per_block))))
        nb = draw(st.integers(1, max(1, min(3, max_elements // (per_block * mb)))))
        m, n = mb * g.rows, nb * g.cols
        if recipe.ragged:
            m -= draw(st.integers(0, g.rows - 1)) if mb * g.rows > 1 else 0
            n -= draw(st.integers(0, g.cols - 1)) if nb * g.cols > 1 else 0
        return (max(m, 1), max(n, 1)), None
    if g.grouped:
        sizes = draw(st.lists(st.one_of(st.just(0), st.integers(1, 40)), min_size=1, max_size=6))
        if sum(sizes) == 0:
            sizes[-1] = draw(st.integers(1, 40))
        other = draw(st.integers(1, 24))
        offsets = np.cumsum(np.array(sizes, dtype=np.int64))
        split = int(offsets[-1])
        shape = (other, split) if g.kind == "group_rowwise" else (split, other)
        return shape, offsets
    m = draw(st.integers(1, 24))
    n = draw(st.integers(1, 64))
    return (m, n), None


_EXPONENTS = [-149, -140, -130, -127, -126, -120, -100, -60, -30, -14, -8, -3, -1, 0, 1, 3, 8, 15, 16, 30, 60, 100,
              120, 126, 127]


@st.composite
def quantizer_inputs(draw: st.DrawFn, recipe: Recipe, *, dtypes: tuple[str, ...] = ("float32", "bfloat16"),
                     nonfinite: bool = True, max_elements: int = 1 << 15) -> QuantCase:
    """Quantizer inputs for ``recipe``: see the module docstring."""
    dtype = draw(st.sampled_from(dtypes))
    shape, offsets = _shape_and_offsets(draw, recipe, max_elements)
    blocks, count = _block_grid(recipe, shape, offsets)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    style = draw(st.sampled_from(["normal", "dyadic", "uniform"]))
    base = draw(st.one_of(st.sampled_from(_EXPONENTS), st.integers(-149, 127)))
    spread = draw(st.sampled_from([0, 0, 1, 4, 20]))
    block_exp = base + rng.integers(-spread, spread + 1, size=max(count, 1))
    e = np.clip(block_exp[blocks], -149, 127)
    if style == "normal":
        mant = rng.standard_normal(shape)
    elif style == "dyadic":  # few significant bits: lands on fp8 ties after a power-of-two scale
        mant = rng.integers(-31, 32, size=shape) / 16.0
    else:
        mant = rng.uniform(-2, 2, size=shape)
    with np.errstate(over="ignore", under="ignore"):
        x = np.ldexp(mant, e).astype(np.float32)
    x[~np.isfinite(x)] = np.float32(3.0e38)
    # Block maxima on the points where a scale changes.
    if count and draw(st.booleans()):
        amaxes = boundary_amaxes(recipe, range(-20, 21))
        picks = draw(st.lists(st.sampled_from(amaxes), min_size=1, max_size=4))
        for i, v in enumerate(picks):
            where = np.flatnonzero(blocks.reshape(-1) == (i * 7919) % count)
            if where.size:
                x.reshape(-1)[where] = np.clip(x.reshape(-1)[where], -v, v)
                x.reshape(-1)[where[rng.integers(where.size)]] = v * (1 if rng.integers(2) else -1)
    zeros = draw(st.sampled_from([0.0, 0.0, 0.1, 1.0]))
    if zeros:
        mask = rng.random(shape) < zeros
        x[mask] = np.where(rng.random(int(mask.sum())) < 0.5, np.float32(0.0), np.float32(-0.0))
    x = to_dtype(x, dtype)
    if nonfinite and x.size and draw(st.integers(0, 9)) == 0:
        special = draw(st.sampled_from([np.inf, -np.inf, np.nan]))
        x.reshape(-1)[draw(st.integers(0, x.size - 1))] = special
    return QuantCase("hypothesis", x, dtype, offsets)

"""Scaled FP8 GEMM kernels checked bit for bit: ``kernel(a_codes, a_scales, b_codes, b_scales) -> out``.

A GEMM kernel of this kind multiplies ``A`` (M, K) by ``B`` (N, K) -- the
weight as it is stored, one row per output column -- both FP8 codes of one
format, with the dequantization scales of a :class:`GemmRecipe` (per tensor,
per row, 1x128 / 128x128 blocks, MX blocks of 32), and returns ``out`` (M, N)
in float32, bfloat16 or float16. The reference computes what the declared
target's tensor cores compute (:func:`fp8check.matmul.tensorcore.mma`, the
model ``tl.dot`` has in the faithful interpreter) and applies the scales in
the declared **epilogue** order, each float32 operation rounded as the
target rounds it (its fma contraction of ``acc + t * s``,
:mod:`fp8check.triton.ops`):

- ``k-block`` (DeepSeek-V3, vLLM, SGLang): for each K block of the recipe,
  ``acc = acc + (dot(A_kb, B_kb) * a_s) * b_s``, the dot from zero (per ``tl.dot`` tile where the kernel's tiles,
  each from zero, are shorter than the block: as the faithful interpreter recorded them);
- ``k-block-product`` (FBGEMM's block GEMM without fast accumulation): ``acc = acc + dot(A_kb, B_kb) * (a_s *
  b_s)``, the scales' product first;
- ``end``: ``(dot(A, B) * a_s) * b_s`` once, the dot chained over all of K;
- ``end-product``: ``dot(A, B) * (a_s * b_s)`` (FBGEMM's ``acc *= a_s * b_s``);
- ``rescaled`` (FBGEMM's block GEMM with fast accumulation, lmdeploy's ``blocked_gemm_fp8``): one dot chained
  through the accumulator over all of K, the accumulator kept in units of the current K block's scale:
  after block ``j``, ``acc = acc * (s_j / s_(j+1))`` with ``s_j = a_s * b_s`` (the division as the target
  divides), after the last ``acc * s_last``;
- ``dot-scaled`` (the ``mx`` recipe): ``acc = tl.dot_scaled(a, a_s, b, b_s, acc)`` over K, the scales applied
  as the target applies them (:func:`fp8check.matmul.dot_scaled.dot_scaled`: sm100's block-scaled
  ``tcgen05`` MMA, or the operands upcast to bfloat16 with their scales and the bfloat16 ``tl.dot``: the
  lowering the kernel's ``tl.dot_scaled`` calls got in the faithful interpreter, which depends on their
  tiles; for a kernel not interpreted, sm100's native one).

The output must be the reference rounded to the kernel's output dtype, bit
for bit (NaN by class, -0 distinct). Elements the target's model brackets
(AMD NaN/Inf, gfx950) are counted, not judged. A divergence is located: its
element, its 64x64 output tile, and -- from the kernel called again with
one K block at a time -- the K block it comes from and the scales that
explain the kernel's value (``a_scales[i, j] x b_scales[p, q]``), or that
no pair of scales does (the accumulation).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from fp8check.checking import CheckOptions, Tally, kernel_name
from fp8check.errors import FP8CheckError, InvalidValueError
from fp8check.formats import get as get_format
from fp8check.results import CheckResult, Divergence

__all__ = ["GemmRecipe", "GEMM_RECIPES", "EPILOGUES", "GemmCase", "GEMM_CASES", "gemm_recipe", "gemm_reference",
           "gemm_inputs", "check_gemm", "check_epilogue", "default_epilogue", "TILE"]

EPILOGUES = ("k-block", "k-block-product", "end", "end-product", "rescaled", "dot-scaled")
_PER_K_BLOCK = ("k-block", "k-block-product", "rescaled")  # the epilogues that scale each K block
TILE = 64  # the output tile a divergence is named by (the smallest tl.dot tile the kernels here use)


@dataclass(frozen=True, kw_only=True)
class GemmRecipe:
    """The scales of a scaled GEMM, as data: one scale per ``a_block`` of A (rows, K) and per ``b_block`` of
    B (N rows, K); 0 is the whole dimension. ``scale_format``: float32, or e8m0fnu (MX: powers of two, given
    as uint8 codes)."""

    name: str
    a_block: tuple[int, int]
    b_block: tuple[int, int]
    scale_format: str = "float32"
    description: str = ""

    @property
    def k_block(self) -> int:
        """The K extent of one scale (0: the scales are constant along K)."""
        return self.a_block[1] or self.b_block[1]

    def scale_shape(self, operand: str, rows: int, k: int) -> tuple[int, int]:
        r, c = self.a_block if operand == "a" else self.b_block
        return (math.ceil(rows / r) if r else 1, math.ceil(k / c) if c else 1)


GEMM_RECIPES: dict[str, GemmRecipe] = {r.name: r for r in (
    GemmRecipe(name="tensorwise", a_block=(0, 0), b_block=(0, 0), description="one scale per operand"),
    GemmRecipe(name="rowwise", a_block=(1, 0), b_block=(1, 0),
               description="one scale per row of A (token) and per row of B (output channel)"),
    GemmRecipe(name="block-1x128-128x128", a_block=(1, 128), b_block=(128, 128),
               description="DeepSeek-V3: A per 1x128 group, B per 128x128 block"),
    GemmRecipe(name="block-128x128", a_block=(128, 128), b_block=(128, 128),
               description="both operands per 128x128 block"),
    GemmRecipe(name="block-1x128-1x128", a_block=(1, 128), b_block=(1, 128),
               description="both operands per 1x128 group along K (blockwise training's weight gradient: "
                           "torchao's 1x128_128x1, DeepGEMM's 1D1D)"),
    GemmRecipe(name="mx", a_block=(1, 32), b_block=(1, 32), scale_format="e8m0fnu",
               description="MX: e8m0 scales per 32 elements along K (uint8 codes)"),
)}


def gemm_recipe(recipe: str | GemmRecipe) -> GemmRecipe:
    if isinstance(recipe, GemmRecipe):
        return recipe
    if recipe not in GEMM_RECIPES:
        raise InvalidValueError(f"GEMM recipe {recipe!r}: use one of {', '.join(GEMM_RECIPES)}")
    return GEMM_RECIPES[recipe]


def default_epilogue(recipe: str | GemmRecipe) -> str:
    """k-block for scales per K block, else end."""
    return "k-block" if gemm_recipe(recipe).k_block else "end"


def check_epilogue(recipe: GemmRecipe, epilogue: str) -> None:
    if epilogue not in EPILOGUES:
        raise InvalidValueError(f"epilogue {epilogue!r}: use one of {', '.join(EPILOGUES)}")
    if epilogue == "dot-scaled":
        if recipe.scale_format != "e8m0fnu" or recipe.a_block != (1, 32) or recipe.b_block != (1, 32):
            raise InvalidValueError(f"epilogue dot-scaled (tl.dot_scaled) takes e8m0 scales per 1x32 (recipe mx), "
                                    f"not recipe {recipe.name}")
        return
    if epilogue not in _PER_K_BLOCK and recipe.k_block:
        other = "dot-scaled" if recipe.scale_format == "e8m0fnu" else "k-block-product or rescaled"
        raise InvalidValueError(f"recipe {recipe.name} scales per K block: its epilogue is k-block or {other}, "
                                f"not {epilogue}")
    if epilogue in ("k-block", "k-block-product") and not recipe.k_block:
        raise InvalidValueError(f"epilogue {epilogue} scales each K block, and recipe {recipe.name} has none (its "
                                "scales are constant along K): its epilogue is end or end-product")
    if epilogue == "rescaled" and (not recipe.k_block or recipe.scale_format != "float32"):
        raise InvalidValueError(f"epilogue rescaled keeps the accumulator in units of each K block's scale: it needs "
                                f"float32 scales per K block, which recipe {recipe.name} has not")
    if epilogue in _PER_K_BLOCK and recipe.a_block[1] != recipe.b_block[1]:
        raise InvalidValueError(f"recipe {recipe.name}: A and B scale blocks differ along K")


def _scale_values(recipe: GemmRecipe, scales: Any) -> np.ndarray:
    """Scales as float32 values (e8m0 codes decoded: 2^(e - 127), 0xFF NaN)."""
    s = np.asarray(scales.detach().cpu() if hasattr(scales, "detach") else scales)
    if recipe.scale_format == "float32":
        return s.astype(np.float32)
    from fp8check import reference

    return reference.decode(s.astype(np.uint8), recipe.scale_format).astype(np.float32)


def _expand(recipe: GemmRecipe, operand: str, scales: np.ndarray, rows: int, kb: int, k_block: int) -> np.ndarray:
    """(rows, kb): the scale of each row in each K block of ``k_block`` (one block when 0)."""
    r, c = recipe.a_block if operand == "a" else recipe.b_block
    s = scales.reshape(recipe.scale_shape(operand, rows, max(kb * max(k_block, 1), 1)))
    ri = np.arange(rows) // r if r else np.zeros(rows, dtype=int)
    ki = (np.arange(kb) * k_block) // c if c else np.zeros(kb, dtype=int)
    return s[ri][:, ki]


def _tile_dot(target: str, fmt: str, dot_model: str | None, a: np.ndarray,
              b_t: np.ndarray) -> Callable[..., Any]:
    """The tensor-core product of a K slice of A (M, K) and B (K, N) (a kernel's ``tl.dot`` tile, from zero or
    from a float32 accumulator ``acc``), as
    the target's own instruction computes it or, given ``dot_model``, the one the kernel's tiles got, the
    operands fed as Triton feeds them (gfx942's OCP fp8 through f16; sm90's mma.sync fp8 through fp16, K in
    its 8-bit order: :func:`~fp8check.matmul.tensorcore.triton_operands`)."""
    from fp8check.matmul import tensorcore

    # the recorded instruction, or the target's own for a 64-row tile (gfx942: OCP fp8 through the f16 MFMA)
    dot = tensorcore.fed(tensorcore.MODELS[dot_model], fmt, fmt) if dot_model else tensorcore.triton_dot(
        target, 64, fmt, fmt)
    if dot is None:
        return lambda ks, acc=None: tensorcore.mma(target, a[:, ks], fmt, b_t[ks, :], fmt, acc=acc)

    def product(ks: slice, acc: np.ndarray | None = None) -> Any:
        x, y = tensorcore.triton_operands(dot, a[:, ks], fmt, b_t[ks, :], fmt)
        return tensorcore.mma(dot.model, x, dot.a_fmt, y, dot.b_fmt, acc=acc)
    return product


def _dot_scaled(target: str, fmt: str, a: np.ndarray, b: np.ndarray, a_scales: np.ndarray | None,
                b_scales: np.ndarray | None, how: str | None = None) -> Any:
    """``tl.dot_scaled`` over all of K (the kernel's K steps chain through its accumulator as the instructions
    do), K padded with zero codes to the scales' blocks of 32 (a masked load's zeros); scales None: 1.0.
    ``how`` None: on sm100 and gfx950 the native block-scaled instruction, elsewhere the decomposition."""
    from fp8check.matmul.dot_scaled import dot_scaled

    blocks = -(-a.shape[1] // 32)
    pad = ((0, 0), (0, 32 * blocks - a.shape[1]))
    ones = np.full((max(a.shape[0], b.shape[0]), blocks), 127, np.uint8)
    sa = ones[:a.shape[0]] if a_scales is None else a_scales.astype(np.uint8).reshape(a.shape[0], blocks)
    sb = ones[:b.shape[0]] if b_scales is None else b_scales.astype(np.uint8).reshape(b.shape[0], blocks)
    how = how or ("native" if target in ("sm100", "gfx950") else "decomposed")
    return dot_scaled(target, np.pad(a, pad), fmt, np.pad(b, pad).T, fmt, a_scales=sa, b_scales=sb,
                      how=how)  # type: ignore[arg-type]


def _rescaled(target: str, tile_dot: Callable[..., Any], sa: np.ndarray, sb: np.ndarray, kb: int, k_block: int,
              K: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``rescaled`` epilogue: the dot chained over all of K through an accumulator kept in units of the
    current block's scale ``s_j = a_s * b_s`` (one float32 product), multiplied by ``s_j / s_(j+1)`` after block
    ``j`` and by ``s_last`` after the last. Elements whose ratio the target's division leaves unknown are
    bracketed."""
    from fp8check.triton import ops

    acc = np.zeros((sa.shape[0], sb.shape[0]), dtype=np.float32)
    dependent = np.zeros(acc.shape, dtype=bool)
    with np.errstate(all="ignore"):
        scale = [(sa[:, j][:, None] * sb[:, j][None, :]).astype(np.float32) for j in range(kb)]
        for j in range(kb):
            d = tile_dot(slice(j * k_block, min(K, (j + 1) * k_block)), acc)
            dependent |= d.target_dependent
            if j + 1 < kb:
                ratio, known = ops.divide_f32(scale[j], scale[j + 1], target)
                dependent |= ~known
            else:
                ratio = scale[j]
            acc = (d.values * ratio).astype(np.float32)
    return acc, dependent


def _contracts(target: str) -> bool:
    from fp8check.triton import ops, targets

    rules = targets.get(target).ops
    return rules is not None and "float32" in rules.fma_contraction and ops.fp_fusion_enabled()


def gemm_reference(target: str, fmt: str, recipe: str | GemmRecipe, a_codes: Any, a_scales: Any, b_codes: Any,
                   b_scales: Any, *, epilogue: str | None = None, how: str | None = None,
                   dot_model: str | None = None, dot_k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The float32 (M, N) a correct kernel accumulates, and the mask of the elements ``target``'s model brackets.

    ``a_codes`` (M, K), ``b_codes`` (N, K): codes of ``fmt``; scales as :class:`GemmRecipe` shapes them;
    ``how``: the ``dot-scaled`` epilogue's lowering (``native``/``decomposed``; default: the target's native
    one where it has one); ``dot_model``: the instruction the kernel's ``tl.dot`` tiles got (a name of
    :data:`~fp8check.matmul.tensorcore.MODELS`, as :func:`~fp8check.matmul.tensorcore.dot_models` recorded it;
    default: the target's own model for ``fmt``); ``dot_k``: the K tile of the kernel's ``tl.dot`` calls where each
    starts from zero (:func:`~fp8check.matmul.tensorcore.dot_steps`): under ``k-block``, a tile shorter than the
    scales' K block that divides it is each scaled and added on its own, as such a kernel does."""
    from fp8check.matmul import tensorcore
    from fp8check.triton import ops

    rec = gemm_recipe(recipe)
    epilogue = epilogue or default_epilogue(rec)
    check_epilogue(rec, epilogue)
    a, b = np.asarray(a_codes, dtype=np.uint8), np.asarray(b_codes, dtype=np.uint8)
    (M, K), N = a.shape, b.shape[0]
    if b.shape[1] != K:
        raise InvalidValueError(f"A is (M, K) = {a.shape}, B must be (N, K): got {b.shape}")
    if epilogue == "dot-scaled":
        r = _dot_scaled(target, fmt, a, b, np.asarray(a_scales), np.asarray(b_scales), how)
        return r.values, r.target_dependent
    tile_dot = _tile_dot(target, fmt, dot_model, a, b.T)
    k_block = rec.k_block if epilogue in _PER_K_BLOCK else K
    kb = max(1, math.ceil(K / k_block))
    sa = _expand(rec, "a", _scale_values(rec, a_scales), M, kb, rec.k_block)
    sb = _expand(rec, "b", _scale_values(rec, b_scales), N, kb, rec.k_block)
    if epilogue == "rescaled":
        return _rescaled(target, tile_dot, sa, sb, kb, k_block, K)
    step = dot_k if epilogue in ("k-block", "k-block-product") and dot_k and dot_k < k_block and not k_block % dot_k \
        else k_block
    fused = _contracts(target)
    acc = np.zeros((M, N), dtype=np.float32)
    dependent = np.zeros((M, N), dtype=bool)
    with np.errstate(all="ignore"):
        for i in range(max(1, math.ceil(K / step))):
            ks, j = slice(i * step, min(K, (i + 1) * step)), i * step // k_block  # the dot's tile, its scales' block
            d = tile_dot(ks)
            dependent |= d.target_dependent
            s_a, s_b = sa[:, j][:, None], sb[:, j][None, :]
            if epilogue == "end-product":
                acc = d.values * (s_a * s_b)
                continue
            if epilogue == "k-block-product":
                acc = ops.fma(d.values, s_a * s_b, acc, "float32") if fused else acc + d.values * (s_a * s_b)
                continue
            t = d.values * s_a
            if epilogue == "end":
                acc = t * s_b
            elif fused:
                acc = ops.fma(t, s_b, acc, "float32")
            else:
                acc = acc + t * s_b
    return acc.astype(np.float32), dependent


# -- the inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GemmCase:
    """One call: the shape, and how A and B are laid out in memory (contiguous, transposed: a column-major
    buffer, strided: every other column of a wider one)."""

    m: int
    n: int
    k: int
    layout: str = "contiguous"
    specials: bool = False  # a few NaN, +-0 and largest codes among the operands

    def describe(self) -> str:
        extra = f", {self.layout} operands" if self.layout != "contiguous" else ""
        return f"M={self.m} N={self.n} K={self.k}{extra}" + (", with NaN/zero/max codes" if self.specials else "")


GEMM_CASES: tuple[GemmCase, ...] = (
    GemmCase(64, 128, 256),  # aligned
    GemmCase(50, 130, 320),  # M and N not multiples of a tile, a K tail of half a block
    GemmCase(16, 64, 100),  # K shorter than one block
    GemmCase(40, 96, 256, "transposed"),
    GemmCase(40, 96, 256, "strided"),
    GemmCase(32, 64, 128, specials=True),
)


def gemm_inputs(case: GemmCase, fmt: str, recipe: str | GemmRecipe, seed: int) -> tuple[np.ndarray, ...]:
    """Codes of A (M, K) and B (N, K), finite (NaN, +-0 and the largest codes sprinkled in for a
    ``specials`` case), and scales in the recipe's shapes: float32 like amax / max (not powers of two, so
    that the order of the scale multiplies matters), or e8m0 codes."""
    from fp8check import reference

    rec = gemm_recipe(recipe)
    rng = np.random.default_rng(seed)
    values = reference.decode(np.arange(256, dtype=np.uint8), fmt)
    finite = np.flatnonzero(np.isfinite(values)).astype(np.uint8)
    a = rng.choice(finite, size=(case.m, case.k))
    b = rng.choice(finite, size=(case.n, case.k))
    if case.specials:
        nan = np.uint8(np.flatnonzero(np.isnan(values))[0])
        big = finite[np.argmax(values[finite])]
        negative_zero = np.uint8(0 if fmt.endswith("fnuz") else 0x80)
        for x, v in ((a, nan), (b, np.uint8(0)), (a, big), (b, negative_zero)):
            idx = rng.integers(0, x.size, size=3)
            x.flat[idx] = v
    scales = []
    for operand, rows in (("a", case.m), ("b", case.n)):
        shape = rec.scale_shape(operand, rows, case.k)
        if rec.scale_format == "float32":
            scales.append((2.0 ** rng.uniform(-12, 2, size=shape)).astype(np.float32))
        else:
            scales.append(rng.integers(127 - 8, 127 + 4, size=shape).astype(np.uint8))
    return a, scales[0], b, scales[1]


def _laid_out(codes: np.ndarray, layout: str, torch_dtype: Any) -> Any:
    import torch

    t = torch.from_numpy(np.ascontiguousarray(codes)).view(torch_dtype)
    if layout == "transposed":
        return t.t().contiguous().t()
    if layout == "strided":
        wide = torch.zeros((t.shape[0], 2 * t.shape[1]), dtype=torch.uint8).view(torch_dtype)
        wide[:, ::2] = t
        return wide[:, ::2]
    return t


def _scale_tensor(s: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(s))


# -- the check ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GemmOptions(CheckOptions):
    """What a GEMM check is asked, beyond every check's options."""

    recipe: GemmRecipe
    fmt: str
    target: str
    epilogue: str = "k-block"
    args: Callable[..., Any] | None = None  # (a, a_scales, b, b_scales) -> the kernel's positional arguments
    cases: tuple[GemmCase, ...] = GEMM_CASES

    @property
    def k_step(self) -> int:
        """The K granularity the kernel declares (``k-multiple-of``; 1: none): each case's K is rounded up to it."""
        return getattr(self.supports, "k_multiple_of", 1) or 1


def _call(opts: GemmOptions, kernel: Callable[..., Any], a: Any, sa: Any, b: Any, sb: Any) -> np.ndarray:
    import torch

    call_args = tuple(opts.args(a, sa, b, sb)) if opts.args is not None else (a, sa, b, sb)
    out = kernel(*call_args)
    t = out if isinstance(out, torch.Tensor) else torch.from_numpy(np.asarray(out))
    return t.detach().cpu()


def _check_signature(kernel: Callable[..., Any], name: str) -> None:
    """A Python function that cannot be called as ``kernel(a, a_scales, b, b_scales)`` is a declaration
    mistake (another kind's kernel, or a GEMM with its own signature and no ``args`` hook), not six refused
    calls."""
    if not (inspect.isfunction(kernel) or inspect.ismethod(kernel) or isinstance(kernel, functools.partial)):
        return  # a Triton JITFunction or another callable object: its calls say
    try:
        signature = inspect.signature(kernel)
    except (TypeError, ValueError):  # wraps something without one
        return
    try:
        signature.bind(None, None, None, None)
    except TypeError as exc:
        raise InvalidValueError(f"{name}{signature} cannot be called as a gemm kernel, "
                                f"kernel(a, a_scales, b, b_scales) ({exc}): give its own signature an args hook "
                                "(--args MODULE:FUNC, or args = in the declaration)") from None


def _rounding_slack(dtype: Any) -> float:
    """The relative rounding of a stored ``dtype`` output (half an ulp at the bottom of a binade): the slack a
    ratio of the kernel's output to the block's dot carries."""
    import torch

    return {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}.get(dtype, 0.0)


def _out_bits(t: Any) -> tuple[np.ndarray, Any]:
    import torch

    width = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
    if t.dtype not in width:
        raise InvalidValueError(f"the kernel returned {t.dtype}: a GEMM's output is float32, bfloat16 or float16")
    return t.contiguous().view(width[t.dtype]).numpy(), t.dtype


def _rounded(values: np.ndarray, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The reference rounded to ``dtype`` (round to nearest even, as Triton's ``.to`` and a store do): its
    bits and float values."""
    import torch

    t = torch.from_numpy(values).to(dtype)
    return _out_bits(t)[0], t.float().numpy()


def _differs(actual: np.ndarray, expected: np.ndarray, actual_f: np.ndarray, expected_f: np.ndarray) -> np.ndarray:
    nan_a, nan_e = np.isnan(actual_f), np.isnan(expected_f)
    return np.where(nan_a | nan_e, nan_a != nan_e, actual != expected)


@dataclass
class _Run:
    opts: GemmOptions
    kernel: Callable[..., Any]
    tally: Tally
    bracketed: int = 0
    diverging: dict[str, int] = field(default_factory=dict)  # case -> diverging elements
    k_of: dict[str, int] = field(default_factory=dict)  # case -> its K, for every case judged
    declared_sums: int = 0  # diverging elements within a rounding of their declared scales (each block, or the sum)
    nearest: dict[Any, Any] = field(default_factory=dict)  # the scale-pair search's per-(scales, index) tables
    lowerings: Counter[str] = field(default_factory=Counter)  # of the kernel's tl.dot_scaled calls, all cases
    how: str | None = None  # the lowering the last call's tl.dot_scaled got (None: not seen, or both)
    dot_models: Counter[str] = field(default_factory=Counter)  # of the kernel's tl.dot calls, all cases
    dot_model: str | None = None  # the model the last call's tl.dot tiles got (None: not seen, or several)
    dot_k: int | None = None  # the K tile of the last call's tl.dot calls, where every one starts from zero
    out_rel: float = 0.0  # the relative rounding of the last call's output dtype (_rounding_slack)
    out_dtype: str = "float32"  # the last call's output dtype (the report shows its bit fields)
    examples: Counter[str] = field(default_factory=Counter)  # divergences listed so far, per category

    def torch_dtype(self) -> Any:
        import torch

        return {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e4m3fnuz": torch.float8_e4m3fnuz,
                "e5m2fnuz": torch.float8_e5m2fnuz}[self.opts.fmt]

    def reference(self, a: np.ndarray, sa: np.ndarray, b: np.ndarray, sb: np.ndarray) -> tuple[np.ndarray, ...]:
        o = self.opts
        return gemm_reference(o.target, o.fmt, o.recipe, a, sa, b, sb, epilogue=o.epilogue, how=self.how,
                              dot_model=self.dot_model, dot_k=self.dot_k)

    def outcome(self, case: GemmCase, a: np.ndarray, sa: np.ndarray, b: np.ndarray,
                sb: np.ndarray) -> tuple[Any, ...] | str:
        """(actual values, expected values, differs mask, bracketed mask, actual bits, expected bits) of the
        kernel's output against the reference, or the kernel's refusal as text."""
        from fp8check.matmul.dot_scaled import lowerings
        from fp8check.matmul.tensorcore import dot_models, dot_steps, dot_tile

        dt = self.torch_dtype()
        try:
            # what the faithful interpreter made of the kernel's tl.dot_scaled and tl.dot tiles
            with lowerings() as seen, dot_models() as dots, dot_steps() as steps:
                out = _call(self.opts, self.kernel, _laid_out(a, case.layout, dt), _scale_tensor(sa),
                            _laid_out(b, case.layout, dt), _scale_tensor(sb))
            self.lowerings.update(seen)
            self.how = next(iter(seen)) if len(seen) == 1 else None
            self.dot_models.update(dots)
            self.dot_model = next(iter(dots)) if len(dots) == 1 else None
            self.dot_k = dot_tile(steps)
            bits, dtype = _out_bits(out)
            self.out_rel = _rounding_slack(dtype)
            self.out_dtype = str(dtype).removeprefix("torch.")
        except FP8CheckError as exc:
            if isinstance(exc, TypeError):  # the faithful interpreter: the target's compiler refuses what it does
                return f"{type(exc).__name__}: {exc}"
            raise  # fp8check's own error (a bad declaration, an adapter whose package cannot be imported)
        except Exception as exc:  # the kernel's own failure is a finding (a refusal), never a crash of the check
            return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if tuple(bits.shape) != (case.m, case.n):
            return f"returned shape {tuple(bits.shape)}, not (M, N) = ({case.m}, {case.n})"
        values, dependent = self.reference(a, sa, b, sb)
        expected, expected_f = _rounded(values, dtype)
        actual_f = out.float().numpy()
        differs = _differs(bits, expected, actual_f, expected_f) & ~dependent
        return actual_f, expected_f, differs, dependent, bits, expected

    def check(self, case: GemmCase, index: int) -> None:
        o = self.opts
        if case.layout != "contiguous" and o.supports is not None and o.supports.contiguous_only:
            return
        if case.k % o.k_step:  # a declared K granularity: the case keeps its M and N, its K rounded up to one
            case = replace(case, k=-(-case.k // o.k_step) * o.k_step)
        a, sa, b, sb = gemm_inputs(case, o.fmt, o.recipe, (o.seed or 0) * 1000 + index)
        got = self.outcome(case, a, sa, b, sb)
        self.tally.cases += 1
        if isinstance(got, str):  # every call made is inside the declared domain (the others are not made)
            div = self.tally.refuse(case.describe(), got, declared=True, input_dtype=o.fmt, describe=case.describe())
            if div is not None:  # every case is the GEMM's unless a supports key takes it out: no domain to name
                self.tally.add("refused", 1, (index, 0, 0), replace(div, condition=f"the case {case.describe()}"))
            return
        actual_f, expected_f, differs, dependent, bits, expected = got
        self.k_of[case.describe()] = case.k
        self.tally.checked += differs.size - int(dependent.sum())
        self.bracketed += int(dependent.sum())
        if not differs.any():
            return
        self.diverging[case.describe()] = int(differs.sum())
        blocks = self.locate(case, a, sa, b, sb)
        self.nearest = {}  # keyed by the blocks' scale arrays, alive until the next case
        listed = max(1, o.cap) if o.cap is not None else differs.size
        mask = (1 << (8 * bits.dtype.itemsize)) - 1  # the output's bit width (float32: 8 hex digits, 16-bit: 4)
        for m, n in np.argwhere(differs):
            category, where = self.explain(blocks, int(m), int(n), actual_f, expected_f)
            div = None
            if self.examples[category] < listed:  # up to the cap per category: a rarer one is listed too
                self.examples[category] += 1
                div = Divergence(
                    category=category, input_hex=f"C[{m}, {n}]", expected_hex=f"{int(expected[m, n]) & mask:x}",
                    actual_hex=f"{int(bits[m, n]) & mask:x}", input_dtype=o.fmt,
                    expected_value=repr(float(expected_f[m, n])), actual_value=repr(float(actual_f[m, n])),
                    detail=f"element ({m}, {n}) of output tile ({m // TILE}, {n // TILE}) ({TILE}x{TILE}): {where}",
                    condition=case.describe())
            self.tally.add(category, 1, (index, int(m), int(n)), div)

    def locate(self, case: GemmCase, a: np.ndarray, sa: np.ndarray, b: np.ndarray,
               sb: np.ndarray) -> dict[int, Any]:
        """The kernel called on A with one K block kept (the others zero codes), for each K block where that
        call diverges: block -> (actual, expected, differs, the block's unscaled dot under the target's
        model, the scales as values, A's kept codes)."""
        from fp8check.matmul import tensorcore

        o = self.opts
        step = o.recipe.k_block or 128
        out = {}
        for j in range(min(8, math.ceil(case.k / step))):
            keep = np.zeros_like(a)
            keep[:, j * step:(j + 1) * step] = a[:, j * step:(j + 1) * step]
            got = self.outcome(case, keep, sa, b, sb)
            if isinstance(got, str) or not got[2].any():
                continue
            with np.errstate(all="ignore"):
                if o.epilogue == "dot-scaled":  # the same lowering with every scale 1.0
                    dot = _dot_scaled(o.target, o.fmt, keep, b, None, None, self.how).values.astype(np.float64)
                else:
                    dot = _tile_dot(o.target, o.fmt, self.dot_model, keep, b.T)(slice(None)).values.astype(np.float64)
            out[j] = (got[0], got[1], got[2], dot, _scale_values(o.recipe, sa), _scale_values(o.recipe, sb), keep, b)
        return out

    def explain(self, blocks: dict[int, Any], m: int, n: int, actual_f: np.ndarray,
                expected_f: np.ndarray) -> tuple[str, str]:
        """The category of a diverging element and where it comes from, in words."""
        rec, fmt = self.opts.recipe, self.opts.fmt
        step = rec.k_block or 128
        for j, (act, exp, differs, dot, sa, sb, keep, b) in blocks.items():
            if not differs[m, n]:
                continue
            K = keep.shape[1]
            tail = (j + 1) * step > K  # a partial last block
            ka = f"K block {j} (k {j * step}..{min(K, (j + 1) * step) - 1}{': the K tail' if tail else ''})"
            want_a = _index(rec, "a", m, j * step, sa.shape)
            want_b = _index(rec, "b", n, j * step, sb.shape)
            declared = f"a_scales{list(want_a)} x b_scales{list(want_b)}"
            got, due = float(act[m, n]), float(exp[m, n])
            if np.isnan(got) != np.isnan(due):
                what = "NaN where the reference has none" if np.isnan(got) else "a number where NaN is due"
                return "nan", f"{ka}: {what}{_other_format_nan(fmt, keep[m], b[n])}"
            if got == 0 and dot[m, n] != 0:
                return "accuracy", (f"{ka}: 0.0 where {due!r} is due: its products are missing, or a scale was read "
                                    "as 0 (a masked or out-of-bounds scale load)")
            ratio = got / dot[m, n] if dot[m, n] else math.nan
            slack = self.out_rel  # a bfloat16 or float16 output rounds the ratio too
            if math.isfinite(ratio) and abs(ratio / (sa[want_a] * np.float64(sb[want_b])) - 1) <= 2.0 ** -9 + slack:
                # within an accumulator's rounding of the declared scales: a sum, never blamed on another scale
                self.declared_sums += 1
                return "accuracy", f"{ka}: the declared scales {declared}, a sum other than the target's"
            for ia, ib, how in _crossed_indices(rec, m, n, j * step, sa.shape, sb.shape):
                # an operand's scale read at the other operand's index: tried before the nearest pair, which a
                # 16-bit output's slack lets a coincidental pair of entries win
                if (ia, ib) != (want_a, want_b) and math.isfinite(ratio) and ratio != 0 and \
                        _explains(sa[ia] * np.float64(sb[ib]), ratio, slack):
                    return "scale", (f"{ka}: scaled by a_scales{list(ia)} x b_scales{list(ib)} where {declared} "
                                     f"is declared ({how})")
            pair = _scale_pair(ratio, sa, sb, want_a, want_b, self.nearest, slack)
            if pair is None and _format_swapped(ratio, sa[want_a] * np.float64(sb[want_b]), slack):
                return "scale", (f"{ka}: the block's value is {ratio / (sa[want_a] * np.float64(sb[want_b])):g}x "
                                 f"what {declared} gives: the operands read in a format of another exponent bias "
                                 f"than the declared {fmt} (e4m3fn for e4m3fnuz, or the reverse)")
            if pair is None:
                rescaled = ", or the ratio s_j / s_(j+1) it rescales by between K blocks" \
                    if self.opts.epilogue == "rescaled" else ""
                return "accuracy", (f"{ka}: no pair of scales explains {got!r} ({due!r} due under {declared}): "
                                    f"the accumulation{rescaled}")
            if pair == (want_a, want_b):
                self.declared_sums += 1
                return "accuracy", f"{ka}: the declared scales {declared}, a sum other than the target's"
            return "scale", (f"{ka}: scaled by a_scales{list(pair[0])} x b_scales{list(pair[1])} where "
                             f"{declared} is declared")
        if np.isnan(actual_f[m, n]) != np.isnan(expected_f[m, n]):
            nan = bool(np.isnan(actual_f[m, n]))
            return "nan", "NaN where the reference has none" if nan else "a number where NaN is due"
        self.declared_sums += 1
        return "accuracy", "every single K block conforms: the blocks' sum differs (their order or accumulation)"


def _crossed_indices(rec: GemmRecipe, m: int, n: int, k: int, a_shape: tuple[int, ...],
                     b_shape: tuple[int, ...]) -> list[tuple[tuple[int, int], tuple[int, int], str]]:
    """The scale entries of C[m, n] when a kernel reads B's scale at the output row m, A's at the column n, or
    both (in range only): (a index, b index, what the kernel did)."""
    a_at_n = _index(rec, "a", n, k, a_shape) if rec.a_block[0] and n // rec.a_block[0] < a_shape[0] else None
    b_at_m = _index(rec, "b", m, k, b_shape) if rec.b_block[0] and m // rec.b_block[0] < b_shape[0] else None
    want_a, want_b = _index(rec, "a", m, k, a_shape), _index(rec, "b", n, k, b_shape)
    out = []
    if b_at_m is not None:
        out.append((want_a, b_at_m, f"b's scale read at the output row {m}, not at its column {n}"))
    if a_at_n is not None:
        out.append((a_at_n, want_b, f"a's scale read at the output column {n}, not at its row {m}"))
    if a_at_n is not None and b_at_m is not None:
        out.append((a_at_n, b_at_m, "a's and b's scales read at each other's index"))
    return out


def _index(rec: GemmRecipe, operand: str, row: int, k: int, shape: tuple[int, ...]) -> tuple[int, int]:
    r, c = rec.a_block if operand == "a" else rec.b_block
    return (min(row // r, shape[0] - 1) if r else 0, min(k // c, shape[1] - 1) if c else 0)


_OTHER_BIAS = {"e4m3fn": "e4m3fnuz", "e4m3fnuz": "e4m3fn", "e5m2": "e5m2fnuz", "e5m2fnuz": "e5m2"}


def _other_format_nan(fmt: str, a_row: np.ndarray, b_row: np.ndarray) -> str:
    """The words for operand codes finite in ``fmt`` but NaN in its twin of the other bias, if any."""
    from fp8check import reference

    other = _OTHER_BIAS.get(fmt)
    codes = np.concatenate([a_row, b_row])
    if other is None:
        return ""
    hits = np.unique(codes[np.isnan(reference.decode(codes, other)) & ~np.isnan(reference.decode(codes, fmt))])
    if not len(hits):
        return ""
    return (f"; its operands hold {', '.join(f'0x{c:02x}' for c in hits[:4])}, finite in {fmt} and NaN in {other}: "
            f"the codes read as {other}")


def _format_swapped(ratio: float, declared: float, slack: float = 0.0) -> bool:
    """Whether ``ratio`` is the declared scale times 2 or 1/2 (to 2^-8: a sum in another instruction, plus the
    output's rounding ``slack``): the codes of e4m3fn and e4m3fnuz (e5m2 and e5m2fnuz) differ by their bias,
    one binade."""
    return bool(math.isfinite(ratio) and declared and any(abs(ratio / (declared * f) - 1) <= 2.0 ** -8 + slack
                                                          for f in (2.0, 0.5)))


def _nearest_per_value(scales: np.ndarray, want: tuple[int, int], memo: dict[Any, Any]) -> tuple[np.ndarray, ...]:
    """For each distinct value of ``scales`` (returned sorted): the least distance of an entry holding it to
    ``want`` (Manhattan, in indices) and the first flat index at that distance; remembered in ``memo`` by the
    array's identity (the caller keeps the arrays alive while ``memo`` lives)."""
    key = (id(scales), want)
    if key not in memo:
        memo[key] = _nearest_table(scales.reshape(-1).astype(np.float64), scales.shape, want)
    return memo[key]


def _nearest_table(values: np.ndarray, shape: tuple[int, ...], want: tuple[int, int]) -> tuple[np.ndarray, ...]:
    idx = np.array(np.unravel_index(np.arange(values.size), shape)).T
    dist = np.abs(idx - np.asarray(want)).sum(1)
    uniq, inv = np.unique(values, return_inverse=True)
    order = np.lexsort((np.arange(values.size), dist, inv))  # by value, then distance, then flat index
    first = order[np.r_[0, np.flatnonzero(np.diff(inv[order])) + 1]]
    return uniq, dist[first], first


def _explains(product: Any, ratio: float, slack: float) -> Any:
    """Whether a product of scale entries is ``ratio`` to 2^-21 (the two float32 roundings of the scaling) plus
    ``slack`` (a 16-bit output's rounding)."""
    with np.errstate(all="ignore"):
        return np.abs(product / ratio - 1) <= 2.0 ** -21 + slack


def _scale_pair(ratio: float, sa: np.ndarray, sb: np.ndarray, want_a: tuple[int, int], want_b: tuple[int, int],
                memo: dict[Any, Any] | None = None,
                slack: float = 0.0) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The pair of scale entries whose product is ``ratio`` (to 2^-21: the two float32 roundings of the
    scaling, plus ``slack``: a 16-bit output's rounding), nearest the declared pair (the first in row-major
    order among the nearest); None when none is.
    Distinct values are paired, not entries: MX scales repeat a few powers of two over thousands of
    entries."""
    if not math.isfinite(ratio) or ratio == 0:
        return None
    memo = {} if memo is None else memo
    ua, da, fa = _nearest_per_value(sa, want_a, memo)
    ub, db, fb = _nearest_per_value(sb, want_b, memo)
    pa, pb = np.nonzero(_explains(np.multiply.outer(ua, ub), ratio, slack))
    if not len(pa):
        return None
    best = np.lexsort((fb[pb], fa[pa], da[pa] + db[pb]))[0]
    ia, ib = np.unravel_index(fa[pa[best]], sa.shape), np.unravel_index(fb[pb[best]], sb.shape)
    return tuple(int(x) for x in ia), tuple(int(x) for x in ib)  # type: ignore[return-value]


def check_gemm(kernel: Callable[..., Any], *, recipe: str | GemmRecipe, format: str, target: str,
               epilogue: str | None = None, args: Callable[..., Any] | None = None, name: str | None = None,
               seed: int = 0, cap: int | None = 100, supports: Any = None,
               cases: Sequence[GemmCase] = GEMM_CASES) -> CheckResult:
    """Check a scaled FP8 GEMM kernel ``kernel(a, a_scales, b, b_scales) -> out`` (or ``kernel(*args(a,
    a_scales, b, b_scales))``) against :func:`gemm_reference` under ``target``'s tensor cores: bit for bit on
    every case of ``cases`` (K tails, M/N off the tile, transposed and strided operands, special codes).

    ``a`` (M, K) and ``b`` (N, K) are torch fp8 tensors of ``format``; the scales float32 tensors (e8m0 uint8
    codes for MX) shaped by the recipe. Run a Triton kernel inside :func:`fp8check.triton.faithful` for
    ``target`` (a declaration with ``triton_target`` does)."""
    from fp8check import formats
    from fp8check.matmul import tensorcore
    from fp8check.results import MATMUL_CATEGORIES

    fmt = formats.get(format).name
    rec = gemm_recipe(recipe)
    epilogue = epilogue or default_epilogue(rec)
    check_epilogue(rec, epilogue)
    if target not in tensorcore.TARGETS:
        raise InvalidValueError(f"GEMM target {target!r}: use one of {', '.join(tensorcore.TARGETS)}")
    opts = GemmOptions(name=kernel_name(kernel, name), seed=seed, cap=cap, supports=supports, recipe=rec, fmt=fmt,
                       target=target, epilogue=epilogue, args=args, cases=tuple(cases))
    if args is None:
        _check_signature(kernel, opts.name)
    run = _Run(opts, kernel, Tally(counts={c: 0 for c in ("scale", "nan") + MATMUL_CATEGORIES}))
    for i, case in enumerate(opts.cases):
        run.check(case, i)
    t = run.tally
    diverged = [c for c, n in t.counts.items() if n]
    result = CheckResult(kernel=opts.name, format=fmt, profile=f"{rec.name}, epilogue {epilogue}",
                         passed=t.passed, checked=t.checked, categories={c: n for c, n in t.counts.items()},
                         divergences=t.listed(cap, diverged) if diverged else [], kind="gemm", input_dtype=fmt,
                         seed=seed, refusals=t.refusals, target_dependent=run.bracketed)
    if epilogue == "dot-scaled":
        names = []
        for how in sorted(run.lowerings) or [None]:
            model = _dot_scaled(target, fmt, np.zeros((1, 32), np.uint8), np.zeros((1, 32), np.uint8), None, None,
                                how).model
            names.append(model.name + ("" if model.scaled else ", the operands upcast to bfloat16 with their scales"))
        result.extra["profile_summary"] = f"{rec.description}; {target}'s tl.dot_scaled ({'; '.join(names)})"
    else:
        own = tensorcore.triton_dot(target, 64, fmt, fmt)
        names = sorted(run.dot_models) or [own.model.name if own else tensorcore.model(target, fmt, fmt).name]
        if get_format(fmt).bits <= 8:  # an FP8 GEMM under a 16-bit model: say why, not only its name
            names = [n + (", the fp8 operands widened to fp16 exactly: what Triton compiles for a tile that "
                          "wgmma does not take" if n == "sm90-mma-16bit" else "") for n in names]
        result.extra["profile_summary"] = f"{rec.description}; {target}'s tensor cores ({'; '.join(names)})"
    result.extra["checked_means"] = "output elements"
    result.extra["output_dtype"] = run.out_dtype
    result.extra["gemm"] = {"recipe": rec.name, "epilogue": epilogue, "target": target, "cases": t.cases,
                            "bracketed": run.bracketed, "diverging": run.diverging}
    if run.bracketed:
        result.add_note(f"{run.bracketed} elements bracketed by the {target} model (AMD NaN/Inf or gfx950): "
                        "counted, not judged")
    tail_note = _k_tail_note(run, rec.k_block or 128)
    if tail_note:
        result.add_note(tail_note)
    elif epilogue in ("k-block", "k-block-product") and run.declared_sums and run.declared_sums == sum(t.counts.values()):
        other = "k-block-product (dot * (a_s * b_s))" if epilogue == "k-block" else "k-block ((dot * a_s) * b_s)"
        result.add_note(f"every divergence keeps its K block's declared scales to a rounding: the scales applied "
                        f"in another order (epilogue {other}?) or another accumulation of the blocks")
    if opts.k_step > 1:
        result.extra["gemm"]["k_multiple_of"] = opts.k_step
        result.add_note(f"each case's K rounded up to a multiple of {opts.k_step} (declared k-multiple-of): K tails "
                        f"of finer grain were not tried")
    return result


def _k_tail_note(run: _Run, step: int) -> str | None:
    """When every diverging case has a K that is not a multiple of ``step`` and a case that has one conforms:
    the K tail, said once for the whole check (an unmasked tail load reads codes of the next row or past the
    tensor, so each K block's own value can look like any scale pair's)."""
    tails = [c for c, k in run.k_of.items() if k % step]
    whole = [c for c, k in run.k_of.items() if not k % step]
    if not run.diverging or not set(run.diverging) <= set(tails) or not any(c not in run.diverging for c in whole):
        return None
    return (f"every divergence is in a case whose K is not a multiple of {step} ({', '.join(run.diverging)}): the "
            f"kernel mishandles the K tail (a K mask that does not move with k reads the next row's codes or past "
            f"the tensor; a dropped tail loses its products). If its callers only ever give K a multiple of "
            f"{step}, declare k-multiple-of = {step} (--k-multiple-of {step})")

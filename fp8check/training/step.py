"""One training step checked: every operand cast bit for bit, every FP8 GEMM against the bound,
and the format-twin statistics of every operand.

The cast reference is fp8check's quantizer reference (:func:`fp8check.quantizers.quantize`)
under the torchao recipe the operand declares (``torchao-tensorwise``, ``torchao-rowwise-pow2``,
``torchao-colwise-pow2``, ...; :mod:`fp8check.training.recipes`), in the format torchao picks for
the platform. The GEMM bound is :func:`fp8check.matmul.error_bound`, widened for what torchao's
FP8 linear adds around the kernel (see :func:`gemm_bound`), under the accumulation model of the
device the GEMM ran on (:mod:`fp8check.matmul.accumulation`: ``float32`` for torchao's emulation
and the CPU, ``sm90-wgmma-fp8`` for torchao's real kernels on a Hopper GPU).

A mismatching cast is explained before it is called wrong; each explanation is a category:

``format``              the fp8 dtype is not the one the recipe declares for the operand here
``fnuz-max-448``        a fnuz operand scaled to 448 (the e4m3fn max) instead of 240: the seed's bug
``stale-scale``         the scale is the reference scale of the same operand one step earlier
``amax-before-all-reduce`` the scale is that of one tensor-parallel shard's own amax, not the
                        all-reduced amax of the whole tensor (``tensor_parallel`` shards)
``pow2-log2``           the scale is twice the reference power of two: torchao takes
                        ``floor(log2(scale))`` in float32 (a known torchao 0.18 divergence)
``scale``               any other scale difference
``codes``               the scales agree and some codes differ
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from fp8check import quantizers
from fp8check.formats import E4M3FN, E4M3FNUZ, get as get_format
from fp8check.matmul import accumulation_bound, error_bound, exact_product, get_model, unit_roundoff
from fp8check.training.capture import CastRecord, GemmRecord
from fp8check.training.recipes import TrainingRecipe, platform_format, twin_formats

__all__ = ["CastCheck", "GemmCheck", "TwinStats", "reference_recipe", "check_cast", "check_gemm", "gemm_bound",
           "twin_stats", "CATEGORIES"]

CATEGORIES = ("format", "fnuz-max-448", "stale-scale", "amax-before-all-reduce", "pow2-log2", "scale", "codes")


@dataclass
class CastCheck:
    step: int
    layer: str
    operand: str
    declared: str  # e.g. "rowwise e4m3fnuz, pow2"
    dtype: str
    shape: tuple[int, int]
    passed: bool
    category: str | None = None
    scale_mismatches: int = 0
    code_mismatches: int = 0
    detail: str = ""
    rank: int = 0  # the process that made the cast (distributed runs)
    placement: str = ""  # "": the whole tensor; a shard's placement (distributed runs)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d


@dataclass
class GemmCheck:
    step: int
    layer: str
    gemm: str
    formats: str
    M: int
    K: int
    N: int
    out_dtype: str
    checked: int = 0
    violations: int = 0
    nan_mismatches: int = 0
    max_ratio: float = 0.0  # max |out - C| / bound
    accumulation: str = "float32"  # the accumulation model the bound is derived from
    float32_ratio: float | None = None  # max |out - C| / the float32 bound, where another model judged it

    @property
    def passed(self) -> bool:
        return not (self.violations or self.nan_mismatches)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def reference_recipe(recipe: TrainingRecipe, operand: str, fnuz: bool) -> quantizers.Recipe | None:
    """The fp8check quantizer recipe an operand's cast must follow (None: kept in high precision)."""
    c = recipe.cast(operand)
    if c.disabled:
        return None
    name = f"torchao-{c.granularity}" + ("-pow2" if recipe.pow2 else "")
    return quantizers.get(name, platform_format(c.family, fnuz))


def _declared_text(recipe: TrainingRecipe, operand: str, fnuz: bool) -> str:
    c = recipe.cast(operand)
    if c.disabled:
        return "high precision"
    return f"{c.granularity} {platform_format(c.family, fnuz).name}" + (", pow2" if recipe.pow2 else "")


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).reshape(-1)


def _same_scales(actual: np.ndarray, expected: np.ndarray) -> bool:
    return actual.size == expected.size and bool(np.array_equal(_bits(actual), _bits(expected)))


def _shard_scales(hp: np.ndarray, ref: quantizers.Recipe, shards: int) -> list[np.ndarray]:
    """The scales each of ``shards`` tensor-parallel shards (split along either dim) would give from its own amax."""
    out = []
    for axis in (0, 1):
        if hp.shape[axis] % shards:
            continue
        for part in np.split(hp, shards, axis=axis):
            s = quantizers.scales_from_amax(quantizers.block_amax(part, ref), ref)
            out.append(s)
    return out


def check_cast(rec: CastRecord, recipe: TrainingRecipe, fnuz: bool, *, previous: CastRecord | None = None,
               tensor_parallel: int = 1) -> CastCheck:
    """``rec`` against the reference of its declared recipe (``previous``: the same operand one step earlier)."""
    ref = reference_recipe(recipe, rec.operand, fnuz)
    res = CastCheck(step=rec.step, layer=rec.layer, operand=rec.operand, declared=_declared_text(recipe, rec.operand, fnuz),
                    dtype=rec.dtype, shape=tuple(rec.hp.shape), passed=True)
    if ref is None:
        res.passed, res.category = False, "format"
        res.detail = "the recipe keeps this operand in high precision, but it was cast to " + rec.dtype
        return res
    if rec.dtype != ref.format.name:
        res.passed, res.category = False, "format"
        res.detail = f"cast to {rec.dtype}; the recipe declares {ref.format.name} for {rec.operand}"
        return res
    expected = quantizers.quantize(rec.hp, ref)
    exp_scales = expected.scales.reshape(-1)
    same_scale = _same_scales(rec.scale, exp_scales)
    codes_bad = int(np.count_nonzero(rec.codes.reshape(-1) != expected.codes.reshape(-1))) \
        if rec.codes.size == expected.codes.size else rec.codes.size
    res.code_mismatches = codes_bad
    if same_scale:
        if codes_bad:
            res.passed, res.category = False, "codes"
            res.detail = f"{codes_bad} of {rec.codes.size} codes differ from the reference with the same scales"
        return res
    res.passed = False
    res.scale_mismatches = int(np.count_nonzero(_bits(rec.scale) != _bits(exp_scales))) \
        if rec.scale.size == exp_scales.size else max(rec.scale.size, exp_scales.size)
    first = int(np.argmax(_bits(rec.scale) != _bits(exp_scales))) if rec.scale.size == exp_scales.size else 0
    actual_v = float(rec.scale.reshape(-1)[min(first, rec.scale.size - 1)])
    expected_v = float(exp_scales[min(first, exp_scales.size - 1)])
    res.detail = f"scale {actual_v!r}, reference {expected_v!r} ({res.scale_mismatches} of {exp_scales.size} scales differ)"
    if ref.format in (E4M3FNUZ,):
        as448 = quantizers.scales_from_amax(quantizers.block_amax(rec.hp, ref), ref.replace(target=E4M3FN.max))
        if _same_scales(rec.scale, as448.reshape(-1)):
            res.category = "fnuz-max-448"
            res.detail = f"scale = 448/amax on {ref.format.name} (max {ref.format.max:g}): " + res.detail
            return res
    if previous is not None and previous.hp.shape == rec.hp.shape:
        stale = quantizers.quantize(previous.hp, ref).scales.reshape(-1)
        if _same_scales(rec.scale, stale):
            res.category = "stale-scale"
            res.detail = f"the scale is the reference scale of step {previous.step}: " + res.detail
            return res
    if tensor_parallel > 1:
        for s in _shard_scales(rec.hp, ref, tensor_parallel):
            if _same_scales(rec.scale, s.reshape(-1)):
                res.category = "amax-before-all-reduce"
                res.detail = f"the scale comes from one of {tensor_parallel} shards' local amax: " + res.detail
                return res
    if ref.pow2 == "floor" and rec.scale.size == exp_scales.size:
        diff = _bits(rec.scale) != _bits(exp_scales)
        if np.array_equal(rec.scale.reshape(-1)[diff].astype(np.float64), 2.0 * exp_scales[diff].astype(np.float64)):
            res.category = "pow2-log2"
            res.detail = "torchao's float32 floor(log2(scale)) rounded a scale just below 2**k up to 2**k: " + res.detail
            return res
    res.category = "scale"
    return res


# Float32 roundings torchao's FP8 linear adds around the sum: ``scale.reciprocal()`` of each operand (2),
# their product (1), the scaling of the sum (1), and the rowwise path's second multiply (1).
EPILOGUE_ROUNDINGS = 5


def gemm_bound(C: np.ndarray, P: np.ndarray, K: int, out_dtype: str, *,
               accumulation: np.ndarray | None = None) -> np.ndarray:
    """The error a correct FP8 linear GEMM of torchao may make, element by element.

    ``float32`` accumulation: :func:`fp8check.matmul.error_bound` for ``K + 4`` float32 roundings per
    term (torchao passes ``scale.reciprocal()`` of each operand, 2 roundings; the rowwise path
    multiplies the output by their product, 1 more, computed in float32 and then rounded again: 1).
    Another model: ``accumulation``, its bound on the float32 result with the
    ``EPILOGUE_ROUNDINGS`` (:func:`fp8check.matmul.accumulation_bound`). Either way a second
    rounding to the output dtype (the rowwise path rounds the unscaled product to bfloat16 and the
    scaled one again). The emulated path (float32 ``mm`` of ``data / scale``) is inside the float32 bound.
    """
    b = error_bound(C, P, K + 4, out_dtype) if accumulation is None else \
        error_bound(C, P, K, out_dtype, accumulation=accumulation)
    u = unit_roundoff(out_dtype)
    eta = {"float32": 2.0 ** -150, "bfloat16": 2.0 ** -134, "float16": 2.0 ** -25}.get(out_dtype, 0.0)
    return b + u * (np.abs(C) + b) + eta


def check_gemm(rec: GemmRecord) -> GemmCheck:
    fa, fb = get_format(rec.fmt_a), get_format(rec.fmt_b)
    with np.errstate(divide="ignore"):
        C, P = exact_product(rec.qa, fa, 1.0 / rec.sa.astype(np.float64), rec.qb, fb, 1.0 / rec.sb.astype(np.float64))
    M, K = rec.qa.shape
    N = rec.qb.shape[1]
    res = GemmCheck(step=rec.step, layer=rec.layer, gemm=rec.gemm, formats=f"{fa.name} x {fb.name}", M=M, K=K, N=N,
                    out_dtype=rec.out_dtype)
    out = rec.out.reshape(C.shape)
    model = get_model(rec.accumulation)
    res.accumulation = model.name
    with np.errstate(divide="ignore"):
        acc = accumulation_bound(model, rec.qa, fa, 1.0 / rec.sa.astype(np.float64), rec.qb, fb,
                                 1.0 / rec.sb.astype(np.float64), P, roundings=EPILOGUE_ROUNDINGS)
    bound = gemm_bound(C, P, K, rec.out_dtype, accumulation=acc)
    with np.errstate(invalid="ignore", divide="ignore"):
        finite = np.isfinite(C) & np.isfinite(P)
        err = np.abs(out - C)
        bad = finite & ~(err <= bound)
        res.checked = int(finite.sum())
        res.violations = int(bad.sum())
        res.nan_mismatches = int((np.isnan(C) != np.isnan(out)).sum())
        if finite.any():
            res.max_ratio = float(np.max(np.where(finite, err / np.where(bound > 0, bound, 1), 0)))
            if acc is not None:
                b32 = gemm_bound(C, P, K, rec.out_dtype)
                res.float32_ratio = float(np.max(np.where(finite, err / np.where(b32 > 0, b32, 1), 0)))
    return res


@dataclass
class TwinStats:
    """One operand quantized by its recipe to a format and to its twin, side by side."""

    step: int
    layer: str
    operand: str
    formats: tuple[str, str]
    underflow_pct: tuple[float, float]  # non-zero inputs that became zero
    saturated_pct: tuple[float, float]  # elements whose scaled float32 value rounds past the format's max
    sqnr_db: tuple[float, float]
    amax: float
    headroom_448_bits: float  # log2(448 / float32(amax * the scale the run applied)) -- < 0: saturates in e4m3fn
    headroom_240_bits: float  # the same against 240, e4m3fnuz's max
    actual_dtype: str

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def _sqnr(x: np.ndarray, y: np.ndarray) -> float:
    x = x.astype(np.float64)
    noise = float(np.sum((x - y) ** 2))
    signal = float(np.sum(x ** 2))
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


def twin_stats(rec: CastRecord, recipe: TrainingRecipe) -> TwinStats | None:
    c = recipe.cast(rec.operand)
    if c.disabled:
        return None
    fn_fmt, fnuz_fmt = twin_formats(c.family)
    under, sat, sq = [], [], []
    finite = np.isfinite(rec.hp)
    nonzero = finite & (rec.hp != 0)
    for fmt in (fn_fmt, fnuz_fmt):
        ref = reference_recipe(recipe, rec.operand, fmt is fnuz_fmt)
        q = quantizers.quantize(rec.hp, ref)
        deq = quantizers.dequantize(q.codes, q.scales, ref)
        s = quantizers.expand_scales(q.scales, rec.hp.shape, ref)
        with np.errstate(all="ignore"):
            scaled = np.abs((rec.hp * s).astype(np.float32))  # the float32 product the reference casts
        # saturated: the scaled value rounds past the format's max (RNE would leave the range), not the
        # amax element landing a rounding error above max
        threshold = fmt.max + 2.0 ** (fmt.emax - fmt.mantissa_bits - 1)
        under.append(100.0 * float(np.count_nonzero(nonzero & (deq == 0))) / max(int(nonzero.sum()), 1))
        sat.append(100.0 * float(np.count_nonzero(finite & (scaled >= threshold))) / max(int(finite.sum()), 1))
        sq.append(_sqnr(np.where(finite, rec.hp, 0), np.where(finite, deq, 0)))
    amax = float(np.max(np.abs(rec.hp[finite]))) if finite.any() else 0.0
    with np.errstate(all="ignore"):
        scaled_amax = float(np.max(np.abs(rec.hp[finite] * _expanded_actual(rec)[finite].astype(np.float32))
                                   .astype(np.float32))) if finite.any() else 0.0
    h448 = math.log2(448.0 / scaled_amax) if scaled_amax > 0 else math.inf
    h240 = math.log2(240.0 / scaled_amax) if scaled_amax > 0 else math.inf
    return TwinStats(step=rec.step, layer=rec.layer, operand=rec.operand, formats=(fn_fmt.name, fnuz_fmt.name),
                     underflow_pct=(under[0], under[1]), saturated_pct=(sat[0], sat[1]), sqnr_db=(sq[0], sq[1]),
                     amax=amax, headroom_448_bits=h448, headroom_240_bits=h240, actual_dtype=rec.dtype)


def _expanded_actual(rec: CastRecord) -> np.ndarray:
    """The scale the run applied to every element (scalar, per row or per column)."""
    m, n = rec.hp.shape
    s = rec.scale.astype(np.float64).reshape(-1)
    if rec.axiswise_dim is None or s.size == 1:
        return np.full((m, n), s[0])
    if rec.axiswise_dim == -1:
        return np.broadcast_to(s.reshape(m, 1), (m, n))
    return np.broadcast_to(s.reshape(1, n), (m, n))


def check_all(casts: Sequence[CastRecord], gemms: Sequence[GemmRecord], recipe: TrainingRecipe, fnuz: bool, *,
              tensor_parallel: int = 1, progress: Callable[[], None] | None = None
              ) -> tuple[list[CastCheck], list[GemmCheck], list[TwinStats]]:
    previous: dict[tuple[str, str], CastRecord] = {}
    cast_checks, twins = [], []
    for rec in casts:
        key = (rec.layer, rec.operand)
        cast_checks.append(check_cast(rec, recipe, fnuz, previous=previous.get(key), tensor_parallel=tensor_parallel))
        t = twin_stats(rec, recipe) if recipe.cast(rec.operand).granularity else None
        if t is not None:
            twins.append(t)
        previous[key] = rec
        if progress:
            progress()
    return cast_checks, [check_gemm(g) for g in gemms], twins


__all__ += ["check_all"]

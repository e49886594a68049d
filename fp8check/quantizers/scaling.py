"""The reference quantizer: the exact codes and scales a correct kernel produces.

``quantize(x, recipe, offsets=None)`` follows :class:`~fp8check.quantizers.Recipe`
to the bit: the block amax is exact (|x| of float32 or bfloat16 values), the
scale is computed in the recipe's stated precision with NumPy's IEEE float32
and float64 arithmetic (round to nearest even, subnormals kept), powers of
two are taken from the exact binary exponent (never from a ``log2``), the
element product or quotient is one IEEE float32 operation, and the codes
come from :func:`fp8check.encode` under the recipe's profile.

``dequantize(codes, scales, recipe)`` gives the values a checkpoint reader
gets, in float64: exact for the ``scale_inv`` convention (an fp8 value times
a float32 scale has at most 28 significant bits), correctly rounded for the
``scale`` convention (a division).

``convert_fn_to_fnuz`` is the byte conversion deployers do for AMD MI300
(e4m3fn -> e4m3fnuz, e5m2 -> e5m2fnuz), done right: every finite byte keeps
its bits and its value halves, so the scale doubles; 0x80 (-0) becomes 0x00;
fn NaN (and e5m2 Inf, which fnuz cannot hold) becomes the fnuz NaN 0x80.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from fp8check.errors import InvalidValueError, UnsupportedDtypeError, UnsupportedFormatError
from fp8check.formats import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0FNU, Format, get as get_format
from fp8check.reference import conversion_table, decode, encode
from fp8check.quantizers.recipe import TARGET_OPS, Recipe

__all__ = [
    "Quantized",
    "quantize",
    "dequantize",
    "block_amax",
    "scales_from_amax",
    "applied_scales",
    "element_scales",
    "global_scale",
    "apply_scale",
    "reciprocal32",
    "expand_scales",
    "element_blocks",
    "check_offsets",
    "e8m0_codes",
    "overflow_threshold",
    "FnuzConversion",
    "convert_fn_to_fnuz",
    "FNUZ_COUNTERPART",
]

FNUZ_COUNTERPART: dict[Format, Format] = {E4M3FN: E4M3FNUZ, E5M2: E5M2FNUZ}


class Quantized(NamedTuple):
    """Reference output: ``codes`` (uint8, the input's shape) and ``scales``
    (float32 in the recipe's convention and canonical scale shape; e8m0
    scales are given as their exact float32 values, NaN for 0xFF)."""

    codes: np.ndarray
    scales: np.ndarray


def _as_float32(x: Any) -> tuple[np.ndarray, str]:
    """A 2-D float32 NumPy copy of ``x`` (exact from bfloat16/float16) and the source dtype name."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        name = str(x.dtype).removeprefix("torch.")
        if name not in ("float32", "bfloat16", "float16"):
            raise UnsupportedDtypeError(f"a quantizer input must be float32, bfloat16 or float16, got {name}")
        arr = x.detach().to(torch.float32).cpu().numpy()
    else:
        arr = np.asarray(x)
        name = str(arr.dtype)
        if name not in ("float32", "bfloat16", "float16"):
            raise UnsupportedDtypeError(f"a quantizer input must be float32, bfloat16 or float16, got {name}")
        arr = arr.astype(np.float32)
    if arr.ndim != 2:
        raise InvalidValueError(f"a quantizer input must be 2-D, got shape {tuple(arr.shape)}")
    return np.ascontiguousarray(arr), name


def check_offsets(offsets: Any, length: int, recipe: Recipe) -> np.ndarray | None:
    """Validate group ``offsets`` for ``recipe`` (cumulative ends, last == length)."""
    if not recipe.grouped:
        if offsets is not None:
            raise InvalidValueError(f"recipe {recipe.name!r} ({recipe.granularity}) takes no group offsets")
        return None
    if offsets is None:
        raise InvalidValueError(f"recipe {recipe.name!r} ({recipe.granularity}) needs group offsets")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(offsets, torch.Tensor):
        offsets = offsets.detach().cpu().numpy()
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size == 0 or off.dtype.kind not in "iu":
        raise InvalidValueError(f"group offsets must be a non-empty 1-D integer array, got {off!r}")
    off = off.astype(np.int64)
    if off[0] < 0 or np.any(np.diff(off) < 0) or off[-1] != length:
        raise InvalidValueError(
            f"group offsets must be non-decreasing ends of groups, the last equal to {length}; got {off.tolist()}"
        )
    return off


def element_blocks(shape: tuple[int, int], recipe: Recipe, offsets: np.ndarray | None = None) -> np.ndarray:
    """For every element, the flat index of its scale in the canonical scale array."""
    m, n = shape
    g = recipe.granularity
    rows = np.arange(m)[:, None]
    cols = np.arange(n)[None, :]
    if g.kind == "tensorwise":
        return np.zeros((m, n), dtype=np.int64)
    if g.kind == "rowwise":
        return np.broadcast_to(rows, (m, n)).astype(np.int64)
    if g.kind == "colwise":
        return np.broadcast_to(cols, (m, n)).astype(np.int64)
    if g.kind == "block":
        nb = -(-n // g.cols)
        return (rows // g.rows) * nb + cols // g.cols
    assert offsets is not None
    if g.kind == "group_rowwise":
        group = np.searchsorted(offsets, np.arange(n), side="right")[None, :]
        return group * m + rows
    group = np.searchsorted(offsets, np.arange(m), side="right")[:, None]
    return group * n + cols


def block_amax(x: Any, recipe: Recipe, offsets: Any = None) -> np.ndarray:
    """The exact amax of every block, float32, in the canonical scale shape.

    Under ``nonfinite="ieee"`` an Inf gives Inf and a NaN gives NaN; under
    ``"finite"`` non-finite elements are left out. An empty group's amax is 0.
    """
    x32, _ = _as_float32(x)
    m, n = x32.shape
    g = recipe.granularity
    off = check_offsets(offsets, m if g.kind == "group_colwise" else n, recipe)
    with np.errstate(invalid="ignore"):
        a = np.abs(x32)
    if recipe.nonfinite == "finite":
        a = np.where(np.isfinite(a), a, np.float32(0))
    elif recipe.nonfinite == "skip-nan":  # tl.max / fmaxf: NaN loses a maximum, Inf wins it
        a = np.where(np.isnan(a), np.float32(0), a)
    shape = g.scale_shape((m, n), 0 if off is None else off.size)
    if g.kind == "block":
        mb, nb = shape
        padded = np.zeros((mb * g.rows, nb * g.cols), dtype=np.float32)
        padded[:m, :n] = a
        return padded.reshape(mb, g.rows, nb, g.cols).max(axis=(1, 3)) if a.size else padded[:mb, :nb]
    flat = element_blocks((m, n), recipe, off).reshape(-1)
    size = int(np.prod(shape)) if shape else 1
    out = np.zeros(size, dtype=np.float32)
    # np.maximum.at keeps NaN (NaN wins a maximum), like torch.amax.
    with np.errstate(invalid="ignore"):
        np.maximum.at(out, flat, a.reshape(-1))
    return out.reshape(shape)


def _pow2_exponent(q: np.ndarray, mode: str) -> np.ndarray:
    """floor or ceil of log2 of positive finite float32 values, from their bits."""
    mant, exp = np.frexp(q.astype(np.float32))
    k = exp.astype(np.int64) - 1
    if mode == "ceil":
        k = k + (mant != np.float32(0.5))
    return k


def _exact_pow2(k: np.ndarray) -> np.ndarray:
    """2**k as float32 (Inf above 2**127, 0 below 2**-149), exactly."""
    with np.errstate(over="ignore", under="ignore"):
        return np.array(np.ldexp(np.float32(1.0), np.clip(k, -200, 200).astype(np.int32)), dtype=np.float32)


def _to_e8m0(q: np.ndarray) -> np.ndarray:
    """Store positive powers of two (or 0/Inf/NaN) as e8m0 values in float32.

    The exponent is clamped at -127 from below (0 included: e8m0 has no
    zero); above 127, Inf and NaN become the e8m0 NaN.
    """
    q = q.astype(np.float32)
    finite_pos = np.isfinite(q) & (q > 0)
    k = np.where(finite_pos, _pow2_exponent(np.where(finite_pos, q, 1), "floor"), -127)
    nan = ~np.isfinite(q) | (k > 127) | (q < 0)
    out = _exact_pow2(np.maximum(k, -127))
    out[nan] = np.nan
    return out


def scales_from_amax(amax: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The stored scales (float32) for blocks with the given amax: the applied ones, or their float32
    reciprocals when the recipe stores ``reciprocal``."""
    applied = applied_scales(amax, recipe)
    return applied if recipe.stored == "applied" else reciprocal32(applied)


def reciprocal32(s: np.ndarray) -> np.ndarray:
    """``fl(1/s)``: one IEEE float32 division, round to nearest even (1/0 = Inf, 1/Inf = 0, NaN stays)."""
    with np.errstate(all="ignore"):
        return (np.float32(1) / np.asarray(s, dtype=np.float32)).astype(np.float32)


def quotient32(num: Any, den: Any, how: str, target: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``num / den`` computed as ``how`` says: ``divide`` (one IEEE division), ``multiply-reciprocal``
    (``num * fl(1/den)``), or their target-* forms (:data:`~.recipe.TARGET_OPS`), the Triton ``target``'s own
    ``/`` (:func:`fp8check.triton.ops.divide_f32`; without a target the correctly rounded one). Also the mask of
    the quotients known bit for bit (all but those the target's division leaves within a bound)."""
    num, den = np.asarray(num, dtype=np.float32), np.asarray(den, dtype=np.float32)
    base = TARGET_OPS.get(how, how)
    with np.errstate(all="ignore"):
        if how in TARGET_OPS and target is not None:
            from fp8check.triton import ops

            if base == "divide":
                return ops.divide_f32(num, den, target)
            r, known = ops.divide_f32(np.float32(1), den, target)
            q = (num * r).astype(np.float32)
            return q, np.broadcast_to(known, q.shape)
        q = (num / den if base == "divide" else num * reciprocal32(den)).astype(np.float32)
    return q, np.ones(q.shape, dtype=bool)


def apply_scale(x32: np.ndarray, s: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The float32 values the element cast receives: x and the applied scale of its block, as the recipe
    combines them (each operation one float32 operation; a target-* one as the recipe's Triton target does it)."""
    op = recipe.element_op
    if op == "multiply":
        with np.errstate(all="ignore"):
            return (x32 * s).astype(np.float32)
    return quotient32(x32, s, op, recipe.triton_target)[0]


def applied_scales(amax: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The scales (float32) a kernel applies for blocks with the given amax."""
    amax = np.asarray(amax, dtype=np.float32)
    fmt = recipe.format
    if recipe.two_level:
        return _two_level(amax, recipe)[0]
    with np.errstate(all="ignore"):
        if recipe.rule != "amax":
            a = amax if recipe.eps is None else np.maximum(amax, np.float32(recipe.eps))
            finite_pos = np.isfinite(a) & (a > 0)
            e = _pow2_exponent(np.where(finite_pos, a, 1), "ceil" if recipe.rule == "mx-ceil" else "floor")
            k = np.where(a == 0, -127, e - fmt.emax)
            nan = ~np.isfinite(a) | (k > 127)
            out = _exact_pow2(np.maximum(k, -127))
            out[nan] = np.nan
            return out
        target = recipe.amax_target
        if recipe.scale_precision == "float64":
            a64 = amax.astype(np.float64)
            if recipe.eps is not None:
                a64 = np.maximum(a64, np.float64(recipe.eps))
            q = (target / a64 if recipe.convention == "scale" else a64 / target).astype(np.float32)
        else:
            a32 = amax if recipe.eps is None else np.maximum(amax, np.float32(recipe.eps))
            t32 = np.float32(target)
            num, den = (t32, a32) if recipe.convention == "scale" else (a32, t32)
            q = quotient32(num, den, recipe.scale_divide, recipe.triton_target)[0]
        if recipe.pow2 is not None:
            normal = np.isfinite(q) & (q > 0)
            k = _pow2_exponent(np.where(normal, q, 1), recipe.pow2)
            q = np.where(normal, _exact_pow2(k), q).astype(np.float32)
        if recipe.scale_min is not None:
            q = np.where(q < np.float32(recipe.scale_min), np.float32(recipe.scale_min), q).astype(np.float32)
        if recipe.scale_dtype == "e8m0":
            return _to_e8m0(q)
        if recipe.scale_dtype == "e4m3fn":
            q = _to_e4m3(q)
        elif recipe.scale_dtype == "bfloat16":
            q = q.astype(ml_dtypes.bfloat16).astype(np.float32)
        elif recipe.scale_dtype == "float16":
            q = q.astype(np.float16).astype(np.float32)
        if recipe.zero_scale is not None:  # scale_inv: a zero scale; scale: the scale of an all-zero block (Inf)
            stored = _round_scale(np.float32(recipe.zero_scale), recipe.scale_dtype)
            zero = (q == 0) if recipe.convention == "scale_inv" else (amax == 0)
            q = np.where(zero, stored, q).astype(np.float32)
        return q


def _to_e4m3(q: np.ndarray) -> np.ndarray:
    """e4m3fn scales as float32: RNE, finite overflow and Inf to 448 (torch's clamp then cast), NaN stays."""
    return decode(encode(np.asarray(q, dtype=np.float32), E4M3FN, "satfinite"), E4M3FN).astype(np.float32)


# NVFP4: e4m3fn block scales (scale_inv, per 16 elements) over a float32 per-tensor scale. The sources differ in
# which way the per-tensor number points and how it meets the block scale, so each is a rule of its own.
_F4_MAX = np.float32(6.0)
_NVFP4_RANGE = np.float32(448.0 * 6.0)  # e4m3fn max * e2m1fn max: the tensor amax maps to the largest block scale


def _tensor_amax(amax: np.ndarray) -> np.float32:
    """The tensor's amax from all its blocks' (NaN wins, as torch.max(torch.abs(x)) gives it)."""
    a = np.asarray(amax, dtype=np.float32).reshape(-1)
    if a.size == 0:
        return np.float32(0)
    return np.float32(np.nan) if np.isnan(a).any() else np.float32(a.max())


def _two_level(amax: np.ndarray, recipe: Recipe) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """(stored e4m3 block scales as float32, the per-block number the elements meet, the stored float32
    per-tensor scale), each step one IEEE float32 operation as the variant's source writes it. torchao and
    ModelOpt store the per-tensor number as a dequant multiplier (amax / 2688), compressed-tensors as its
    inverse (2688 / amax); the block scale is e4m3fn, scale_inv, in all three."""
    a = np.asarray(amax, dtype=np.float32)
    t = _tensor_amax(a)
    one = np.float32(1)
    with np.errstate(all="ignore"):
        b = (a / _F4_MAX).astype(np.float32)  # amax / 6, a true division (tensor / Python float) in both
        if recipe.rule == "nvfp4-torchao":
            # torchao 0.18.0 prototype/mx_formats/nvfp4_tensor.py: per_tensor_amax_to_scale:
            # amax.to(float32) / (F8E4M3_MAX * F4_E2M1_MAX); nvfp4_quantize (two-level branch):
            # clamp(block_scale / per_tensor_scale, min=E4M3_EPS (2^-6), max=448).to(e4m3fn),
            # data * ((1.0 / per_tensor_scale) / scaled_block_scales_fp32), clamp(+-6), f32_to_f4_unpacked.
            g = np.float32(t / _NVFP4_RANGE)
            q = (b / g).astype(np.float32)
            if recipe.scale_min is not None:
                q = np.where(q < np.float32(recipe.scale_min), np.float32(recipe.scale_min), q).astype(np.float32)
            s = _to_e4m3(q)
            per_block = ((one / g) / s).astype(np.float32)
        elif recipe.rule == "nvfp4-modelopt":
            # nvidia-modelopt 0.47.0 torch/quantization/qtensor/nvfp4_tensor.py NVFP4QTensor:
            # get_weights_scaling_factor_2: amax.float() / (E2M1_MAX * E4M3_MAX); get_weights_scaling_factor:
            # per_block_amax / (E2M1_MAX * wsf2), zeros -> 1.0, clamp(min=2^-9, max=448).to(e4m3fn);
            # quantize: input / (scale.to(float32) * wsf2), _cast_fp4 (RNE), low nibble first.
            g = np.float32(t / _NVFP4_RANGE)
            q = (a / np.float32(_F4_MAX * g)).astype(np.float32)
            if recipe.zero_scale is not None:
                q = np.where(q == 0, np.float32(recipe.zero_scale), q).astype(np.float32)
            if recipe.scale_min is not None:
                q = np.where(q < np.float32(recipe.scale_min), np.float32(recipe.scale_min), q).astype(np.float32)
            s = _to_e4m3(q)
            per_block = (s * g).astype(np.float32)
        else:
            # compressed-tensors 0.19.0 quantization/utils/helpers.py: generate_gparam: 448 * 6 / clamp(amax,
            # min=float32 tiny) -- a Python float over a tensor, which torch computes as 2688 * (1 / amax) --,
            # nan_to_num(nan=1, posinf=1, neginf=1); calculate_qparams: global_scale * (amax / 6),
            # round_to_quantized_type_dtype (clamp +-448, .to(e4m3fn)), a zero scale -> 0.125 (e4m3's eps);
            # lifecycle/forward_helpers.py _quantize: scale = scale / global_scale, x / scale.
            tiny = np.float32(np.finfo(np.float32).tiny)
            clamped = np.float32(np.nan) if np.isnan(t) else max(t, tiny)
            g = np.float32(_NVFP4_RANGE * np.float32(one / clamped))
            if not np.isfinite(g):
                g = one
            s = _to_e4m3((g * b).astype(np.float32))
            if recipe.zero_scale is not None:
                s = np.where(s == 0, _to_e4m3(np.float32(recipe.zero_scale)), s).astype(np.float32)
            per_block = (s / g).astype(np.float32)
    return s, per_block, np.float32(g)


def element_scales(amax: np.ndarray, recipe: Recipe) -> np.ndarray:
    """The number each block's elements meet under ``recipe.element_op``: the applied scale itself, or for a
    two-level (NVFP4) recipe the per-block combination of the block and per-tensor scales."""
    if recipe.two_level:
        return _two_level(amax, recipe)[1]
    return applied_scales(amax, recipe)


def global_scale(x: Any, recipe: Recipe) -> np.float32:
    """The float32 per-tensor scale a two-level (NVFP4) recipe stores for ``x`` (as its source stores it)."""
    if not recipe.two_level:
        raise InvalidValueError(f"recipe {recipe.name!r} ({recipe.rule}) has no per-tensor global scale")
    return _two_level(block_amax(x, recipe), recipe)[2]


def _round_scale(v: np.float32, scale_dtype: str) -> np.float32:
    if scale_dtype == "e4m3fn":
        return np.float32(_to_e4m3(np.float32(v)))
    if scale_dtype == "bfloat16":
        return np.float32(np.float32(v).astype(ml_dtypes.bfloat16))
    if scale_dtype == "float16":
        return np.float32(np.float16(v))
    return np.float32(v)


def expand_scales(scales: np.ndarray, shape: tuple[int, int], recipe: Recipe, offsets: Any = None) -> np.ndarray:
    """The scale of every element, shape ``shape``."""
    m, n = shape
    g = recipe.granularity
    off = None
    if recipe.grouped:
        off = check_offsets(offsets, m if g.kind == "group_colwise" else n, recipe)
    flat = np.asarray(scales).reshape(-1)
    return flat[element_blocks(shape, recipe, off)]


def quantize(x: Any, recipe: Recipe, *, offsets: Any = None) -> Quantized:
    """The codes and scales a correct quantizer produces for ``x`` (2-D float32/bfloat16/float16).

    ``offsets`` (per-group recipes only): cumulative group ends along the
    split dimension, as for ``torch._scaled_grouped_mm``.
    """
    x32, _ = _as_float32(x)
    amax = block_amax(x32, recipe, offsets)
    applied = applied_scales(amax, recipe)
    y = apply_scale(x32, expand_scales(element_scales(amax, recipe), x32.shape, recipe, offsets), recipe)
    codes = encode(y, recipe.format, recipe.profile)
    return Quantized(codes, applied if recipe.stored == "applied" else reciprocal32(applied))


def e8m0_codes(scales: np.ndarray) -> np.ndarray:
    """The e8m0 bytes of e8m0 scale values (powers of two, NaN for 0xFF)."""
    return encode(np.asarray(scales, dtype=np.float32), E8M0FNU, "ieee")


def dequantize(codes: Any, scales: Any, recipe: Recipe, *, offsets: Any = None, per_tensor: Any = None) -> np.ndarray:
    """The float64 values ``codes`` (one per element) and ``scales`` stand for under ``recipe``.

    ``per_tensor``: a two-level (NVFP4) recipe's stored per-tensor scale (required there): torchao's is a
    multiplier (``amax / 2688``), compressed-tensors' a divisor (``2688 / amax``).
    """
    values = decode(codes, recipe.format)
    s = expand_scales(np.asarray(scales, dtype=np.float64), values.shape, recipe, offsets)
    with np.errstate(all="ignore"):
        out = values * s if recipe.stored_convention == "scale_inv" else values / s
        if recipe.two_level:
            if per_tensor is None:
                raise InvalidValueError(f"recipe {recipe.name!r} is two-level: dequantize needs its per-tensor scale")
            g = np.float64(np.asarray(per_tensor, dtype=np.float64).reshape(-1)[0])
            out = out / g if recipe.rule == "nvfp4-ct" else out * g
        return out


def overflow_threshold(dtype: str) -> float:
    """The smallest magnitude that rounds (RNE) to Inf in ``dtype``: max + half an ulp.

    The largest finite value has an odd significand, so the tie rounds up to Inf.
    """
    emax, mant = {"float32": (127, 23), "float16": (15, 10), "bfloat16": (127, 7)}[dtype]
    return 2.0 ** (emax + 1) - 2.0 ** (emax - mant - 1)


class FnuzConversion(NamedTuple):
    """Result of :func:`convert_fn_to_fnuz`: the new bytes and scales, and what
    could not be carried over exactly (counts)."""

    codes: np.ndarray
    scales: np.ndarray
    nan_codes: int  # fn NaN bytes, now fnuz NaN 0x80
    inf_codes: int  # e5m2 ±Inf bytes, fnuz has no Inf: now NaN
    negative_zeros: int  # 0x80 bytes (-0), now 0x00
    scale_overflows: int  # scales that doubled past float32's largest value
    scale_inexact: int  # scale convention: halving a subnormal scale lost a bit


def convert_fn_to_fnuz(codes: Any, scales: Any, *, source: object = "e4m3fn",
                       convention: str = "scale_inv") -> FnuzConversion:
    """Reinterpret OCP fp8 bytes as their fnuz counterpart, values unchanged.

    The same byte means half the value in fnuz (bias + 1), so a
    ``scale_inv`` scale doubles (a ``scale`` scale halves). ``codes``: uint8
    or a torch/ml_dtypes fp8 array; ``scales``: float32 (any shape).
    """
    src = get_format(source)
    if src not in FNUZ_COUNTERPART:
        raise UnsupportedFormatError(f"convert_fn_to_fnuz converts e4m3fn or e5m2, got {src.name}")
    if convention not in ("scale", "scale_inv"):
        raise InvalidValueError(f"convention must be 'scale' or 'scale_inv', got {convention!r}")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(codes, torch.Tensor):
        codes = codes.detach().cpu().contiguous().view(torch.uint8).numpy()
    c = np.asarray(codes)
    if c.dtype != np.uint8:
        c = c.view(np.uint8) if c.dtype.itemsize == 1 else c.astype(np.uint8)
    table_nan = np.array([src.is_nan(i) for i in range(256)])
    table_inf = np.array([src.is_inf(i) for i in range(256)])
    nan = table_nan[c]
    inf = table_inf[c]
    negzero = c == 0x80
    # Each byte keeps its pattern at twice the scale, but -0 -> 0x00 and NaN/Inf -> 0x80.
    out = conversion_table(src, FNUZ_COUNTERPART[src], 2.0)[c]
    if torch is not None and isinstance(scales, torch.Tensor):
        scales = scales.detach().cpu().to(torch.float32).numpy()
    s = np.asarray(scales, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore"):
        new = (s * np.float32(2)) if convention == "scale_inv" else (s / np.float32(2))
    overflow = int(np.count_nonzero(np.isfinite(s) & ~np.isfinite(new)))
    inexact = 0
    if convention == "scale":
        inexact = int(np.count_nonzero(np.isfinite(s) & (new.astype(np.float64) * 2 != s.astype(np.float64))))
    return FnuzConversion(out, new.astype(np.float32), int(nan.sum()), int(inf.sum()), int(negzero.sum()),
                          overflow, inexact)

r"""``tl.dot_scaled`` as compiled Triton computes it on each target, from codes and block scales.

Read from Triton 3.9.0's own compiler (``triton.compile`` for ``cuda:90``, ``cuda:100``, ``hip:gfx942`` and
``hip:gfx950`` without a GPU, the TTGIR / LLVM IR / PTX / AMDGCN read) and its source
(``lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp`` ``ScaledBlockedToMMAv5``,
``lib/Dialect/TritonGPU/Transforms/DecomposeScaledBlocked.cpp``,
``third_party/amd/lib/TritonAMDGPUTransforms/AccelerateAMDMatmul.cpp`` ``DecomposeAMDScaledBlocked`` and
``ScaledBlockedToScaledMFMAF8F6F4``; read at triton-lang/triton commit
01f9a369c950d9da2574aed271609eae4fc8990f, the 3.9.0 wheel's IR agreeing except where noted):

**native** (:func:`lowering`)
    sm100, both scales given, the dot's tile at least 128 x 16 (M x N, ``num_warps`` 4 or 8: the default 4
    assumed): one ``tcgen05.mma ... kind::mxf8f6f4.block_scale`` (or ``kind::mxf4`` for e2m1 x e2m1) per K
    step, the scales applied inside the instruction (:data:`fp8check.matmul.tensorcore.SM100_TCGEN05_MXF8F6F4`,
    ``SM100_TCGEN05_MXF4``: MMA-Sim's models). gfx950, tiles the scaled MFMA takes (M, N >= 32 and K >= 64,
    or M, N >= 16 and K >= 128): ``v_mfma_scale_f32_*_f8f6f4``, not in MMA-Sim: **bracketed**
    (``gfx950-mfma-scale-f8f6f4``, CDNA3's datapath assumed, as ``tl.dot`` on gfx950).

**decomposed** (every other target and tile: sm90, sm89, gfx942, and sm100 / gfx950 below those tiles)
    each operand is upcast to bfloat16 (float16 when an operand is fp16: not modelled) with its scale
    applied, then an ordinary ``tl.dot`` of bfloat16 operands into the float32 accumulator runs: sm90
    ``wgmma ... bf16`` (``sm90-wgmma-16bit``), sm100 ``tcgen05 kind::f16``, sm89 ``mma.sync ... bf16``,
    gfx942 ``v_mfma_f32_*_bf16`` (the same models ``tl.dot`` of bfloat16 uses). The upcast:

    - the e8m0 scale becomes bfloat16 bits ``max(s << 7, 0x0040)`` (3.9.0: code 0 is 2^-127, a bfloat16
      subnormal; the source at the commit above has no ``max``: code 0 gives 0) and ``fma(s, 0, s)`` turns
      code 255's Inf into NaN (NVIDIA: not under ``fast_math``, where the scale stays +Inf: ±Inf products,
      NaN for a zero element);
    - NVIDIA: the element decoded to bfloat16 as ``fp8.to(tl.bfloat16)`` compiles (e5m2: the shift and
      ``mul.rn.bf16x2`` by 2^112, Inf/NaN codes finite, :mod:`fp8check.triton.targets`), then
      ``mul.bf16`` by the scale: one rounding to nearest even, bfloat16 subnormals kept;
    - AMD gfx942 (``amdg.scaled_upcast_fp8/fp4``): the element decoded to float32 (e4m3fn: shift and
      multiply by 2^120 with ``nnan``, NaN codes ±480; e5m2: the byte as the upper half of a float16,
      exact; e2m1 exact), multiplied by the scale in float32 (denormals kept), **truncated** to bfloat16
      (the upper 16 bits), and 0x7FC0 (NaN) where the scale code is 255;
    - gfx950 uses ``v_cvt_scalef32_pk_bf16_*`` and a bfloat16 MFMA fp8check has no model of: every element
      is bracketed.

    ``fast_math`` drops the NaN select of a scale code 255 (AMD: its ``fma`` still gives NaN) and, on
    NVIDIA, the ``fma`` too.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, Literal

import numpy as np

from fp8check.errors import InvalidValueError
from fp8check.matmul import tensorcore
from fp8check.matmul.tensorcore import MMAResult

__all__ = ["FORMATS", "lowering", "lowerings", "upcast", "dot_scaled"]

#: The element formats of ``tl.dot_scaled`` (Triton's names -> fp8check's).
FORMATS = {"e4m3": "e4m3fn", "e5m2": "e5m2", "e2m1": "e2m1fn", "bf16": "bfloat16", "fp16": "float16"}
_NVIDIA = ("sm89", "sm90", "sm100")
_MX = ("e4m3fn", "e5m2", "e2m1fn")
Lowering = Literal["native", "decomposed"]


def lowering(target: str, m: int, n: int, k: int, a_fmt: str, b_fmt: str, scaled: bool) -> Lowering:
    """Whether Triton 3.9 lowers a ``tl.dot_scaled`` of an (m, k) x (k, n) tile to ``target``'s block-scaled
    instruction (``native``) or to an upcast and a bfloat16 dot (``decomposed``)."""
    mx = a_fmt in _MX and b_fmt in _MX
    if target == "sm100" and scaled and mx and m >= 128 and n >= 16:
        return "native"
    if target == "gfx950" and mx and ((min(m, n) >= 32 and k >= 64) or (min(m, n) >= 16 and k >= 128)):
        return "native"
    return "decomposed"


_LOWERINGS = tensorcore.Recorder()


def lowerings() -> contextlib.AbstractContextManager[Counter[str]]:
    """Count the lowerings (``native``/``decomposed``) of the :func:`dot_scaled` calls made inside the block --
    the faithful interpreter's, while a kernel runs: the gemm kind's reference then follows the lowering the
    kernel's tiles got."""
    return _LOWERINGS.counting()


def _scale_values(codes: np.ndarray, scale_fmt: str, code255: float = np.nan) -> np.ndarray:
    """The float32 values the decomposition multiplies by: e8m0 ``max(s << 7, 0x40)`` as bfloat16 (code 0:
    2^-127), code 255 ``code255`` (NaN; +Inf where no ``fma`` makes it NaN); e4m3 scales (NVFP4) decoded, NaN
    codes NaN."""
    from fp8check import reference

    c = np.asarray(codes).astype(np.uint8)
    if scale_fmt == "e8m0fnu":
        bits = np.maximum(c.astype(np.uint32) << np.uint32(23), np.uint32(0x00400000))
        values = bits.view(np.float32).copy()
        values[c == 0xFF] = np.float32(code255)
        return values
    return reference.decode(c, scale_fmt).astype(np.float32)


def _element_values(target: str, codes: np.ndarray, fmt: str) -> np.ndarray:
    """float32 values of the elements as the target's upcast decodes them (before the scale)."""
    from fp8check import reference
    from fp8check.triton import ops, targets, upcasts

    if fmt == "bfloat16":
        return ops.widen_bf16(codes.astype(np.uint16))
    if fmt == "e2m1fn" or (fmt == "e5m2" and not target.startswith("sm")):
        return reference.decode(codes, fmt).astype(np.float32)  # exact (AMD e5m2: the byte as a float16)
    return ops.widen_bf16(upcasts.upcast_values(codes, fmt, "bfloat16", targets.get(target)))


def upcast(target: str, codes: Any, fmt: str, scales: Any = None, scale_fmt: str = "e8m0fnu", *,
           k_axis: int = 1, fast_math: bool = False) -> np.ndarray:
    """The bfloat16 bits (uint16) the decomposition of ``tl.dot_scaled`` feeds its dot on ``target``:
    ``codes`` of ``fmt`` (one per byte), ``scales`` one per block of K (``k_axis`` of ``codes``: 1 for
    A (M, K), 0 for B (K, N)), already laid out as ``codes`` with K blocks (None: no scale)."""
    from fp8check.triton import ops

    c = np.asarray(codes)
    v = _element_values(target, c, fmt)
    if scales is None:
        return ops.round_bf16(v)
    s = _scale_values(scales, scale_fmt, np.inf if fast_math and target in _NVIDIA else np.nan)
    block = c.shape[k_axis] // s.shape[k_axis]
    s = np.repeat(s, block, axis=k_axis)
    with np.errstate(all="ignore"):
        p = (v.astype(np.float64) * s.astype(np.float64)).astype(np.float32)  # exact: <= 11 bits, >= 2^-143
    if target in _NVIDIA:
        return ops.round_bf16(p)  # mul.bf16: one rounding to nearest even
    bits = (p.view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # AMD: truncation to the upper half
    code255 = np.repeat(np.asarray(scales).astype(np.uint8) == 0xFF, block, axis=k_axis) \
        if scale_fmt == "e8m0fnu" else np.isnan(s)
    return np.where(code255, np.uint16(0x7FC0), bits)


def dot_scaled(target: str, a_codes: Any, a_fmt: str, b_codes: Any, b_fmt: str, *, a_scales: Any = None,
               b_scales: Any = None, scale_fmt: str = "e8m0fnu", acc: Any = None,
               how: Lowering | None = None, fast_math: bool = False) -> MMAResult:
    """``acc + dot_scaled(A, B)`` as ``target`` computes it, with the target-dependent mask.

    ``a_codes`` (M, K), ``b_codes`` (K, N): codes of ``a_fmt``/``b_fmt`` (fp8check names, one per byte; fp4
    unpacked); ``a_scales`` (M, K / block) and ``b_scales`` (N, K / block) as ``tl.dot_scaled`` takes
    them (None: that operand unscaled); ``how``: the lowering (default: :func:`lowering` of this tile);
    ``fast_math``: ``tl.dot_scaled``'s own (the decomposition's scale code 255 on NVIDIA)."""
    a, b = np.asarray(a_codes), np.asarray(b_codes)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise InvalidValueError(f"dot_scaled: A (M, K) and B (K, N) expected, got shapes {a.shape} and {b.shape}")
    (M, K), N = a.shape, b.shape[1]
    if "float16" in (a_fmt, b_fmt):
        raise InvalidValueError("dot_scaled: fp16 operands (Triton's float16 compute type) are not modelled")
    sa = None if a_scales is None else np.asarray(a_scales)
    sb = None if b_scales is None else np.asarray(b_scales).T  # (K / block, N)
    how = how or lowering(target, M, N, K, a_fmt, b_fmt, sa is not None and sb is not None)
    _LOWERINGS.record(how)
    blocks = next((s.shape[1 - i] for i, s in enumerate((sa, sb)) if s is not None), 0)
    if blocks and (K % blocks or K // blocks not in (16, 32)):
        raise InvalidValueError(f"dot_scaled: K={K} with {blocks} scale blocks: blocks of 32 (MX) or 16 (NVFP4) "
                                "along K expected")
    c = np.zeros((M, N), np.float32) if acc is None else np.broadcast_to(np.asarray(acc, np.float32), (M, N))
    if how == "native":
        ones = np.full((M, max(blocks, 1)), 127, np.uint8), np.full((max(blocks, 1), N), 127, np.uint8)
        model = tensorcore.model(target, a_fmt, b_fmt, scaled=True)
        return tensorcore.mma(model, a, a_fmt, b, b_fmt, acc=c, a_scales=ones[0] if sa is None else sa,
                              b_scales=ones[1] if sb is None else sb, scale_fmt=scale_fmt)
    ua = upcast(target, a, a_fmt, sa, scale_fmt, k_axis=1, fast_math=fast_math)
    ub = upcast(target, b, b_fmt, sb, scale_fmt, k_axis=0, fast_math=fast_math)
    try:
        model = tensorcore.model(target, "bfloat16", "bfloat16")
    except InvalidValueError:  # gfx950: no bfloat16 MFMA model: the float sum, every element bracketed
        from fp8check.triton import ops

        with np.errstate(all="ignore"):
            values = (ops.widen_bf16(ua).astype(np.float64) @ ops.widen_bf16(ub) + c).astype(np.float32)
        return MMAResult(values, np.ones((M, N), dtype=bool), tensorcore.model(target, "e4m3fn", "e4m3fn"))
    return tensorcore.mma(model, ua, "bfloat16", ub, "bfloat16", acc=c)

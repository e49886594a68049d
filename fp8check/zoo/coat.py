"""fp8-coat 1.0.11: ``coat.activation.real_quantization._quantize.fp8_quantize``.

fp8-coat installs with ``pip install --no-deps fp8-coat==1.0.11`` (its
metadata pins ``triton==3.1.0`` and ``transformers==4.45.2``; the module
itself needs only torch and triton) and imports on a CPU.

What its source does (``_fp8_quantize_kernel``, "Input uses 1 * 16 group
quantization"; ``Coat_quantize_bgn_func`` calls it with the activation group
size, 16): ``scale = (max|x| + 1e-10) / fp8_max`` per 1xQB group in float32,
``y = tl.fdiv(x, scale)`` cast to fp8 (no clamp: ``|x| / scale < fp8_max``
for finite input), and the scale stored in ``scale_dtype`` (bfloat16 by
default) after the codes were computed with the float32 one. The kernel is
autotuned over ``BLOCK_M`` in {QB, 2QB} and ``BLOCK_N`` in {QB, 2QB, 4QB} and
reads its tiles with ``tl.make_block_ptr`` without ``boundary_check``: the
shape must be a multiple of the tile. The interpreted modes launch the
kernel with one configuration (``BLOCK_M = BLOCK_N = QB``: the autotuner
would time all 24) on inputs whose row count is padded to a multiple of 32
with zeros (rows the result drops); ``compiled`` calls ``fp8_quantize``.

Triton 3.9 removed block pointers ("Block pointers have been removed in
favor of the tensor descriptor API"): the kernels run with Triton 3.6 and
3.8 only (the entry says so and is unavailable under 3.9).

``tl.fdiv`` is ``div.full.f32`` (approximate) on NVIDIA; the interpreter
divides exactly, so ``faithful:sm90`` shows the codes of an exact division
and only the GPU run shows what the approximate one does.
"""

from __future__ import annotations

from typing import Any

from fp8check.zoo import KnownIssue, ZooEntry, ZooUnavailable
from fp8check.zoo._adapters import example, import_package, lazy
from fp8check.zoo._triton import interpreter_conversions_issue, mode_context, require_mode

NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"
QUANTIZE = "coat.activation.real_quantization._quantize"
QB = 16


def make_fp8_quantize(mode: str = "faithful:sm90") -> Any:
    require_mode(mode)
    import torch
    import triton

    m = import_package(QUANTIZE, "fp8-coat", "pip install --no-deps fp8-coat==1.0.11")
    if tuple(int(p) for p in triton.__version__.split("+")[0].split(".")[:2]) >= (3, 9):
        raise ZooUnavailable(f"fp8-coat's kernels use tl.make_block_ptr, which Triton {triton.__version__} removed "
                             "('Block pointers have been removed in favor of the tensor descriptor API'); "
                             "Triton 3.6 or 3.8 runs them")

    def launch(x: Any) -> tuple[Any, Any]:
        rows, n = x.shape
        pad = -rows % (2 * QB)
        xp = torch.nn.functional.pad(x, (0, 0, 0, pad)).contiguous() if pad else x.contiguous()
        y = torch.empty_like(xp, dtype=torch.float8_e4m3fn)
        s = torch.empty((xp.shape[0], n // QB), dtype=torch.bfloat16)
        kernel = m._fp8_quantize_kernel[QB].fn  # the heuristics-wrapped kernel under the autotuner
        grid = (triton.cdiv(xp.shape[0], QB) * triton.cdiv(n, QB),)
        kernel[grid](y, s, xp, xp.shape[0], n, n // QB, QB, 448.0, xp.stride(0), xp.stride(1), y.stride(0),
                     y.stride(1), s.stride(0), s.stride(1), SCALE_MIN_THRES=1e-10, BLOCK_M=QB, BLOCK_N=QB)
        return y[:rows], s[:rows]

    def kernel(x: Any) -> tuple[Any, Any]:
        if mode == "compiled":
            return m.fp8_quantize(x.contiguous(), QB, torch.float8_e4m3fn)
        with mode_context(mode):
            return launch(x)

    kernel.__name__ = f"coat.fp8_quantize[{mode}]"
    return kernel


fp8_quantize = lazy(make_fp8_quantize, "faithful:sm90", "fp8check.zoo.coat:fp8_quantize")
fp8_quantize_interpret = lazy(make_fp8_quantize, "interpret", "fp8check.zoo.coat:fp8_quantize_interpret")
fp8_quantize_compiled = lazy(make_fp8_quantize, "compiled", "fp8check.zoo.coat:fp8_quantize_compiled")

_TRITON = frozenset({"faithful:sm90", "interpret", "compiled"})

ENTRIES = (
    ZooEntry(
        id="fp8-coat.fp8_quantize",
        package="fp8-coat", module=QUANTIZE, versions="==1.0.11",
        function="coat.activation.real_quantization._quantize.fp8_quantize(x, 16, float8_e4m3fn) -> "
                 "_fp8_quantize_kernel (Triton, autotuned)",
        kind="quantize", claims="coat-1x16",
        citation="fp8-coat 1.0.11, coat/activation/real_quantization/_quantize.py _fp8_quantize_kernel: max_val = "
                 "tl.max(abs) + SCALE_MIN_THRES (1e-10); scale = max_val / fp8_max; output = tl.fdiv(output, scale); "
                 "scale stored as scale_dtype=torch.bfloat16; func_quantize.py: '(Qoutput, Oscale) uses 1 * 16 "
                 "quantization'",
        adapter="fp8check.zoo.coat:fp8_quantize",
        modes=("faithful:sm90", "interpret", "compiled"),
        known=(
            KnownIssue(summary="the codes are computed with the float32 scale and the scale is stored in bfloat16: "
                               "code x stored scale is not what was quantized (the stored scale is off by up to 2^-9 "
                               "relative) and codes differ from x / (the stored scale): in a group with amax 2, "
                               "-1.5 / 0.004464286 = -336, a tie, RNE -320; with the stored 0.0044555664 it is -336.7, "
                               "-352",
                       upstream=NO, categories=frozenset({"codes"}),
                       modes=frozenset({"faithful:sm90", "compiled"}),  # the raw interpreter's own errors hide it
                       example=lambda: example("1x16 group, amax 2", [[2.0, -1.5]]),
                       shown_by="a 1x16 group holding 2.0 and -1.5"),
            KnownIssue(summary="amax + 1e-10, not max(amax, 1e-10): the stored scale differs for tiny amax (amax 1e-13: "
                               "bf16((1e-13 + 1e-10)/448) = 2.2382e-13, bf16(1e-10/448) = 2.2293e-13)",
                       upstream="by design; " + NO, categories=frozenset({"scale"}),
                       modes=frozenset({"faithful:sm90", "compiled"}),  # hidden by the interpreter's bf16 truncation
                       example=lambda: example("1x16 group, amax 1e-13", [[1e-13, 3e-14]]),
                       shown_by="a 1x16 group with amax 1e-13"),
            KnownIssue(summary="a group holding NaN gets the scale of its finite values (tl.max ignores NaN), where "
                               "the recipe gives a NaN scale; the NaN element stays NaN",
                       upstream=NO, categories=frozenset({"nonfinite"}), modes=_TRITON,
                       example=lambda: example("1x16 group holding NaN", [[3.5, float("nan"), 1.0]]),
                       shown_by="a 1x16 group holding 3.5, NaN, 1.0"),
            interpreter_conversions_issue("1x16"),
        ),
        note="rows padded to a multiple of 32 in the interpreted modes (the kernel has no boundary checks)",
    ),
)

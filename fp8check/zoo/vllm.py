"""vLLM: ``per_token_group_quant_fp8`` (Triton) and ``normalize_e4m3fn_to_e4m3fnuz``.

vLLM's wheel pins torch (0.33.0: ``torch==2.14.0``, CUDA) and a CUDA stack
(flashinfer, cutlass-dsl, ...), so ``pip install vllm`` next to a CPU torch
is not possible. Its Python modules import without its compiled extensions:
unpack the wheel (``pip download --no-deps vllm==0.33.0``; 336 MB) onto
``sys.path`` with eight small pure-Python dependencies (pyzmq, msgspec,
cachetools, blake3, cbor2, pybase64, cloudpickle, py-cpuinfo, openai) and
``vllm.model_executor.layers.quantization.utils.fp8_utils`` imports, with
the warning ``Failed to import from vllm._C``. On the CPU the function
takes its Triton fallback (``current_platform.is_cuda_alike()`` is false);
on CUDA it calls the compiled ``torch.ops._C.per_token_group_fp8_quant``,
so the adapter's ``compiled`` mode launches the Triton kernel itself with
the arguments the fallback passes.
"""

from __future__ import annotations

from typing import Any

from fp8check.zoo import KnownIssue, ZooEntry, ZooUnavailable
from fp8check.zoo._adapters import example, import_package, lazy
from fp8check.zoo._triton import interpreter_conversions_issue, is_interpreted, mode_context, require_mode

NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"

FP8_UTILS = "vllm.model_executor.layers.quantization.utils.fp8_utils"
W8A8_UTILS = "vllm.model_executor.layers.quantization.utils.w8a8_utils"
_HINT = "vLLM cannot be pip-installed beside a CPU torch; see fp8check.zoo.vllm's docstring"


def _fp8_utils(mode: str) -> Any:
    """vLLM's fp8_utils. For the interpreter: vLLM uses Triton only where a
    Triton driver is active (vllm/triton_utils/importing.py), and on a CPU
    none is, so its kernels would be placeholders; it allows zero active
    drivers when ``CUDA_VISIBLE_DEVICES`` is set and empty (its
    "distributed environment" path), which is set while vLLM is imported."""
    import os
    import sys

    if is_interpreted(mode) and "vllm.triton_utils" not in sys.modules:
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        try:
            m = import_package(FP8_UTILS, "vllm", _HINT)
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
    else:
        m = import_package(FP8_UTILS, "vllm", _HINT)
    if is_interpreted(mode) and not hasattr(m.triton, "next_power_of_2"):
        raise ZooUnavailable("vllm was imported without Triton (its placeholder module is in use): import it "
                             "through fp8check.zoo.vllm in a fresh process")
    return m


def make_per_token_group_quant_fp8(mode: str = "faithful:sm90", layout: str = "rowmajor") -> Any:
    """``per_token_group_quant_fp8(x, 128, dtype=float8_e4m3fn, use_ue8m0=False)`` (``layout``: ``colmajor``
    passes ``column_major_scales=True``, which launches ``_per_token_group_quant_fp8_colmajor``; ``mi300``
    gives what ROCm gfx94x runs: e4m3fnuz, ``get_fp8_min_max()`` = +-224)."""
    require_mode(mode)
    import contextlib

    import torch

    m = _fp8_utils(mode)
    mi300 = layout == "mi300"

    @contextlib.contextmanager
    def as_mi300() -> Any:
        saved = m.get_fp8_min_max
        m.get_fp8_min_max = lambda: (-224.0, 224.0)  # quant_utils.get_fp8_min_max when is_fp8_fnuz()
        try:
            yield
        finally:
            m.get_fp8_min_max = saved

    def kernel(x: Any) -> tuple[Any, Any]:
        with mode_context(mode), (as_mi300() if mi300 else contextlib.nullcontext()):
            if mode == "compiled" and layout == "rowmajor":  # the Triton kernel the CPU fallback launches
                return _launch_compiled(m, x)
            if mode == "compiled":
                raise ZooUnavailable("vllm: only the row-major kernel is launched compiled here")
            q, s = m.per_token_group_quant_fp8(x.contiguous(), 128,
                                               dtype=torch.float8_e4m3fnuz if mi300 else torch.float8_e4m3fn,
                                               column_major_scales=layout == "colmajor", use_ue8m0=False)
            return q, s.contiguous()

    kernel.__name__ = f"vllm.per_token_group_quant_fp8[{layout}, {mode}]"
    return kernel


def make_per_token_group_quant_fp8_colmajor(mode: str = "faithful:sm90") -> Any:
    return make_per_token_group_quant_fp8(mode, "colmajor")


def make_per_token_group_quant_fp8_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_per_token_group_quant_fp8(mode, "mi300")


def _launch_compiled(m: Any, x: Any) -> tuple[Any, Any]:
    import torch
    import triton

    x = x.contiguous()
    fp8_min, fp8_max = m.get_fp8_min_max()
    q = torch.empty(x.shape, device=x.device, dtype=torch.float8_e4m3fn)
    s = torch.empty(x.shape[:-1] + (x.shape[-1] // 128,), device=x.device, dtype=torch.float32)
    block = triton.next_power_of_2(128)
    m._per_token_group_quant_fp8[(x.numel() // 128,)](
        x, q, s, 128, x.shape[1], x.stride(0), 1e-10, fp8_min=fp8_min, fp8_max=fp8_max, use_ue8m0=False,
        BLOCK=block, num_warps=min(max(block // 256, 1), 8), num_stages=1)
    return q, s


def make_normalize_e4m3fn_to_e4m3fnuz(mode: str = "eager") -> Any:
    """``normalize_e4m3fn_to_e4m3fnuz(weight, weight_scale)`` (what vLLM applies on MI300)."""
    m = import_package(W8A8_UTILS, "vllm", _HINT)

    def kernel(codes: Any, scale: Any) -> tuple[Any, Any]:
        w, s, _ = m.normalize_e4m3fn_to_e4m3fnuz(codes.clone(), scale.clone())
        return w, s

    kernel.__name__ = "vllm.normalize_e4m3fn_to_e4m3fnuz"
    return kernel


per_token_group_quant_fp8 = lazy(make_per_token_group_quant_fp8, "faithful:sm90",
                                 "fp8check.zoo.vllm:per_token_group_quant_fp8")
per_token_group_quant_fp8_interpret = lazy(make_per_token_group_quant_fp8, "interpret",
                                           "fp8check.zoo.vllm:per_token_group_quant_fp8_interpret")
per_token_group_quant_fp8_compiled = lazy(make_per_token_group_quant_fp8, "compiled",
                                          "fp8check.zoo.vllm:per_token_group_quant_fp8_compiled")
per_token_group_quant_fp8_colmajor = lazy(make_per_token_group_quant_fp8_colmajor, "faithful:sm90",
                                          "fp8check.zoo.vllm:per_token_group_quant_fp8_colmajor")
per_token_group_quant_fp8_mi300 = lazy(make_per_token_group_quant_fp8_mi300, "faithful:gfx942",
                                       "fp8check.zoo.vllm:per_token_group_quant_fp8_mi300")
normalize_e4m3fn_to_e4m3fnuz = lazy(make_normalize_e4m3fn_to_e4m3fnuz, "eager",
                                    "fp8check.zoo.vllm:normalize_e4m3fn_to_e4m3fnuz")

_V = "==0.33.0"
_SRC = f"vllm 0.33.0, {FP8_UTILS.replace('.', '/')}.py"

ENTRIES = (
    ZooEntry(
        id="vllm.per_token_group_quant_fp8",
        package="vllm", module=FP8_UTILS, versions=_V,
        function="per_token_group_quant_fp8(x, group_size=128, eps=1e-10) -> _per_token_group_quant_fp8 (Triton)",
        kind="quantize", claims="per-token-group-1x128",
        citation=f"{_SRC}: per_token_group_quant_fp8 docstring ('per-token-group quantization ... the scaling "
                 "factor'), eps=1e-10 default, kernel _per_token_group_quant_fp8: y_s = max(amax, eps) * (1/fp8_max), "
                 "y_q = clamp(y / y_s)",
        adapter="fp8check.zoo.vllm:per_token_group_quant_fp8",
        modes=("faithful:sm90", "interpret", "compiled"),
        known=(
            KnownIssue(summary="scale = max(amax, eps) * fl32(1/448), not max(amax, eps)/448: 1 ulp off on about a "
                               "third of groups (amax 1.125: 0.002511161 vs 0.0025111607); deliberate: the source "
                               "comment says it matches torch's tensor/scalar division on CUDA",
                       upstream="by design (source comment in _per_token_group_quant_fp8); " + NO,
                       categories=frozenset({"scale"}), modes=frozenset({"faithful:sm90", "interpret", "compiled"}),
                       example=lambda: example("1x128 group, amax 1.125", [[1.125, 0.5]]),
                       shown_by="a 1x128 group with amax 1.125"),
            KnownIssue(summary="+Inf in a group becomes +448 (0x7E) on sm90: the scale is Inf, Inf / Inf = NaN, and "
                               "tl.clamp with the constexpr bounds -448, 448 compiles to min.xorsign.abs.f32, which "
                               "returns +448 for NaN (Triton's interpreter, np.fmax/np.fmin, gives fp8_min: 0xFE); "
                               "the recipe gives NaN",
                       upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:sm90", "interpret", "compiled"}),
                       example=lambda: example("1x128 group holding +Inf", [[1.0, float("inf"), -2.0]]),
                       shown_by="a 1x128 group holding 1.0, +Inf, -2.0"),
            interpreter_conversions_issue("1x128"),
        ),
        note="on CUDA vLLM itself calls its compiled op; 'compiled' launches the Triton fallback kernel",
    ),
    ZooEntry(
        id="vllm.normalize_e4m3fn_to_e4m3fnuz",
        package="vllm", module=W8A8_UTILS, versions=_V,
        function="normalize_e4m3fn_to_e4m3fnuz(weight, weight_scale)",
        kind="convert", claims="convert_fn_to_fnuz",
        citation=f"vllm 0.33.0, {W8A8_UTILS.replace('.', '/')}.py: 'For the same bits representation, e4m3fnuz value "
                 "is half of the e4m3fn value, so we should double the scaling factor to get the same dequantized "
                 "value'",
        adapter="fp8check.zoo.vllm:normalize_e4m3fn_to_e4m3fnuz",
        modes=("eager",), dtypes=("float32",),
        known=(KnownIssue(summary="e4m3fn NaN bytes 0x7F/0xFF become fnuz +-240 (finite), not the fnuz NaN 0x80: "
                                  "only -128 (0x80) is rewritten", upstream=NO, categories=frozenset({"nan"}),
                          reproducer="fp8check survey --zoo --entry vllm.normalize_e4m3fn_to_e4m3fnuz"),),
    ),
    ZooEntry(
        id="vllm.per_token_group_quant_fp8.colmajor",
        package="vllm", module=FP8_UTILS, versions=_V,
        function="per_token_group_quant_fp8(x, 128, column_major_scales=True) -> _per_token_group_quant_fp8_colmajor "
                 "(Triton)",
        kind="quantize", claims="per-token-group-1x128",
        citation=f"{_SRC}: _per_token_group_quant_fp8_colmajor: y_s = max(amax, eps) * (1/fp8_max), "
                 "y_q = clamp(y / y_s)",
        adapter="fp8check.zoo.vllm:per_token_group_quant_fp8_colmajor", modes=("faithful:sm90",),
        known=(
            KnownIssue(summary="scale = max(amax, eps) * fl32(1/fp8_max), 1 ulp off on part of the groups (by design)",
                       upstream="by design (source comment in _per_token_group_quant_fp8); " + NO,
                       categories=frozenset({"scale"}), modes=frozenset({"faithful:sm90"}),
                       example=lambda: example("1x128 group, amax 1.125", [[1.125, 0.5]]),
                       shown_by="a 1x128 group with amax 1.125"),
            KnownIssue(summary="+Inf in a group: y / Inf = NaN for the Inf, and the constexpr-bounded tl.clamp gives "
                               "+448 on sm90 (min.xorsign.abs); the recipe gives NaN", upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:sm90"}),
                       example=lambda: example("1x128 group holding +Inf", [[1.0, float("inf"), -2.0]]),
                       shown_by="a 1x128 group holding 1.0, +Inf, -2.0"),
        ),
    ),
    ZooEntry(
        id="vllm.per_token_group_quant_fp8.mi300",
        package="vllm", module=FP8_UTILS, versions=_V,
        function="per_token_group_quant_fp8(x, 128) on ROCm gfx94x: e4m3fnuz, get_fp8_min_max() = +-224",
        kind="quantize", claims="per-token-group-1x128-224", fmt="e4m3fnuz",
        citation=f"{_SRC}; vllm/model_executor/layers/quantization/utils/quant_utils.py: get_fp8_min_max: "
                 "'use 224.0 for fnuz on ROCm platforms'",
        adapter="fp8check.zoo.vllm:per_token_group_quant_fp8_mi300", modes=("faithful:gfx942",),
        known=(
            KnownIssue(summary="scale = max(amax, eps) * fl32(1/fp8_max), 1 ulp off on part of the groups (by design)",
                       upstream="by design (source comment in _per_token_group_quant_fp8); " + NO,
                       categories=frozenset({"scale"}), modes=frozenset({"faithful:gfx942"}),
                       example=lambda: example("1x128 group, amax 1.125", [[1.125, 0.5]]),
                       shown_by="a 1x128 group with amax 1.125"),
            KnownIssue(summary="+Inf in a group: y / Inf = NaN for the Inf, and the constexpr-bounded tl.clamp gives "
                               "-224 on gfx942 (v_med3 returns the lower bound); the recipe gives NaN", upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:gfx942"}),
                       example=lambda: example("1x128 group holding +Inf", [[1.0, float("inf"), -2.0]]),
                       shown_by="a 1x128 group holding 1.0, +Inf, -2.0"),
        ),
        note="runs on a CPU under the faithful interpreter's gfx942 target; MI300 hardware not measured",
    ),
)

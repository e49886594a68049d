"""SGLang: the per-token-group FP8 Triton kernel ``_per_token_group_quant_8bit``.

SGLang 0.5.23's wheel pins ``torch==2.14.1``, ``sglang-kernel``, flashinfer
and CUDA packages, so it cannot be pip-installed beside a CPU torch. Its
``sglang/kernels/ops/quantization/fp8_kernel.py`` imports without the
compiled kernels from the unpacked wheel (``pip download --no-deps
sglang==0.5.23``; 39 MB) plus about twenty small pure-Python packages its
``sglang.srt.utils`` imports (orjson, pybase64, starlette, msgspec, pyzmq,
ipython, traitlets, aiohttp and its dependencies, ...). On CUDA SGLang calls
its JIT CUDA kernel; everywhere else (``per_token_group_quant_fp8 =
_per_token_group_quant_8bit_raw`` when not ``_is_cuda``: ROCm included) the
Triton path runs, and is what is checked, on every device:

- row-major scales: ``_per_token_group_quant_8bit``, ``y * (1 / y_s)``;
- column-major scales (``column_major_scales=True``):
  ``_per_token_group_quant_8bit_colmajor``, ``y / y_s``: the same
  quantization computed another way, so the two layouts can differ by a code;
- on MI300 (gfx94x, ``_is_hip`` and ``is_fp8_fnuz()``): e4m3fnuz with
  ``bit8_max = fp8_max = 224.0``, run here under ``faithful:gfx942`` with the
  module's ``_is_hip``/``fp8_max`` set as that platform sets them.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from fp8check.zoo import KnownIssue, ZooEntry
from fp8check.zoo._adapters import example, import_package, lazy
from fp8check.zoo._triton import interpreter_conversions_issue, mode_context, require_mode

NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"

FP8_KERNEL = "sglang.kernels.ops.quantization.fp8_kernel"
_HINT = "SGLang cannot be pip-installed beside a CPU torch; see fp8check.zoo.sglang's docstring"


@contextlib.contextmanager
def _as_mi300(m: Any) -> Iterator[None]:
    """The module globals ROCm on gfx94x sets at import: ``_is_hip``, ``fp8_dtype = float8_e4m3fnuz``,
    ``fp8_max = 224.0``."""
    import torch

    saved = (m._is_hip, m.fp8_max, m.fp8_min, m.fp8_dtype)
    m._is_hip, m.fp8_max, m.fp8_min, m.fp8_dtype = True, 224.0, -224.0, torch.float8_e4m3fnuz
    try:
        yield
    finally:
        m._is_hip, m.fp8_max, m.fp8_min, m.fp8_dtype = saved


def _make(mode: str, layout: str) -> Any:
    require_mode(mode)
    import torch

    m = import_package(FP8_KERNEL, "sglang", _HINT)
    fnuz = layout == "mi300"

    def kernel(x: Any) -> tuple[Any, Any]:
        with mode_context(mode), (_as_mi300(m) if fnuz else contextlib.nullcontext()):
            q, s = m._per_token_group_quant_8bit_raw(
                x.contiguous(), 128, eps=1e-10, dtype=torch.float8_e4m3fnuz if fnuz else torch.float8_e4m3fn,
                column_major_scales=layout == "colmajor")
        return q, s.contiguous()

    kernel.__name__ = f"sglang.per_token_group_quant_8bit[{layout}, {mode}]"
    return kernel


def make_per_token_group_quant_fp8(mode: str = "faithful:sm90") -> Any:
    """``_per_token_group_quant_8bit_raw(x, 128, eps=1e-10, dtype=float8_e4m3fn)`` (row-major scales)."""
    return _make(mode, "rowmajor")


def make_per_token_group_quant_fp8_colmajor(mode: str = "faithful:sm90") -> Any:
    """The same with ``column_major_scales=True`` (scales returned row-major for the check)."""
    return _make(mode, "colmajor")


def make_per_token_group_quant_fp8_mi300(mode: str = "faithful:gfx942") -> Any:
    """The same as it runs on MI300: e4m3fnuz, ``bit8_max = 224``."""
    return _make(mode, "mi300")


def make_static_cast(mode: str = "faithful:sm90") -> Any:
    """``static_quant_fp8(x, x_s=1.0)`` -> ``_static_quant_fp8``: with a unit scale, a saturating cast
    (``clamp(y * (1 / 1), fp8_min, fp8_max).to(fp8_dtype)``); on gfx94x fp8_max is 224."""
    require_mode(mode)
    import torch

    from fp8check.zoo._triton import faithful_target

    m = import_package(FP8_KERNEL, "sglang", _HINT)
    mi300 = faithful_target(mode) == "gfx942"

    def kernel(x: Any) -> Any:
        x2 = x.reshape(1, -1) if x.dim() < 2 else x.reshape(-1, x.shape[-1]).contiguous()
        one = torch.ones(1, dtype=torch.float32, device=x.device)
        if not x2.numel():
            return torch.empty(x.shape, dtype=torch.float8_e4m3fnuz if mi300 else torch.float8_e4m3fn)
        with mode_context(mode), (_as_mi300(m) if mi300 else contextlib.nullcontext()):
            q, _ = m.static_quant_fp8(x2, one)
        return q.reshape(x.shape)

    kernel.__name__ = f"sglang.static_quant_fp8[{mode}]"
    return kernel


def make_per_tensor_mla(mode: str = "faithful:sm90") -> Any:
    """``per_tensor_quant_mla_fp8(x[None], x_s_out)``: an atomic-max amax pass (max(amax, 1e-12) / fp8_max),
    then ``clamp(x * (1 / x_s))``; the input seen as one head."""
    require_mode(mode)
    import torch

    from fp8check.zoo._triton import faithful_target

    m = import_package(FP8_KERNEL, "sglang", _HINT)
    mi300 = faithful_target(mode) == "gfx942"

    def kernel(x: Any) -> tuple[Any, Any]:
        x3 = (x.reshape(1, -1) if x.dim() < 2 else x.reshape(-1, x.shape[-1]))[None]
        s = torch.zeros(1, dtype=torch.float32, device=x.device)
        with mode_context(mode), (_as_mi300(m) if mi300 else contextlib.nullcontext()):
            q, s = m.per_tensor_quant_mla_fp8(x3, s)
        return q.reshape(x.shape), s.reshape(())

    kernel.__name__ = f"sglang.per_tensor_quant_mla_fp8[{mode}]"
    return kernel


_M = "fp8check.zoo.sglang:"


def make_static_cast_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_static_cast(mode)


def make_per_tensor_mla_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_per_tensor_mla(mode)


static_cast = lazy(make_static_cast, "faithful:sm90", _M + "static_cast")
static_cast_compiled = lazy(make_static_cast, "compiled", _M + "static_cast_compiled")
static_cast_mi300 = lazy(make_static_cast, "faithful:gfx942", _M + "static_cast_mi300")
per_tensor_mla = lazy(make_per_tensor_mla, "faithful:sm90", _M + "per_tensor_mla")
per_tensor_mla_compiled = lazy(make_per_tensor_mla, "compiled", _M + "per_tensor_mla_compiled")
per_tensor_mla_mi300 = lazy(make_per_tensor_mla, "faithful:gfx942", _M + "per_tensor_mla_mi300")
per_token_group_quant_fp8 = lazy(make_per_token_group_quant_fp8, "faithful:sm90", _M + "per_token_group_quant_fp8")
per_token_group_quant_fp8_interpret = lazy(make_per_token_group_quant_fp8, "interpret",
                                           _M + "per_token_group_quant_fp8_interpret")
per_token_group_quant_fp8_compiled = lazy(make_per_token_group_quant_fp8, "compiled",
                                          _M + "per_token_group_quant_fp8_compiled")
per_token_group_quant_fp8_colmajor = lazy(make_per_token_group_quant_fp8_colmajor, "faithful:sm90",
                                          _M + "per_token_group_quant_fp8_colmajor")
per_token_group_quant_fp8_colmajor_compiled = lazy(make_per_token_group_quant_fp8_colmajor, "compiled",
                                                   _M + "per_token_group_quant_fp8_colmajor_compiled")
per_token_group_quant_fp8_mi300 = lazy(make_per_token_group_quant_fp8_mi300, "faithful:gfx942",
                                       _M + "per_token_group_quant_fp8_mi300")

_SRC = "sglang 0.5.23, sglang/kernels/ops/quantization/fp8_kernel.py"
_INF = ("+Inf in a group becomes -max (e4m3fn 0xFE, -448): the scale is Inf, y * (1/Inf) = Inf * 0 = NaN for the "
        "Inf element, and tl.clamp (propagate_nan NONE) returns bit8_min for NaN; the recipe gives NaN")
_INF_DIV = _INF.replace("y * (1/Inf) = Inf * 0", "y / Inf = Inf / Inf")
_INF_MI300 = _INF.replace("e4m3fn 0xFE, -448", "e4m3fnuz 0xFE, -224")


def _transposed() -> Any:
    import numpy as np

    from fp8check.quantizers.cases import QuantCase

    x = (np.arange(64 * 128, dtype=np.float32).reshape(64, 128) % 13) - 6.0
    return [QuantCase(name="stored transposed", x=x, dtype="float32", layout="transposed")]


def _inf() -> Any:
    return example("1x128 group holding +Inf", [[1.0, float("inf"), -2.0]])


def _tie() -> Any:
    return example("1x128 group, x / s a tie", [[3.0625, 2.734375]])


def _scale_448() -> Any:
    return example("1x128 group, amax 0.56640625", [[0.56640625, 0.5]])


#: bit8_max is a run-time float argument: `max(amax, eps) / bit8_max` is div.full.f32 on sm90, MUFU.RCP(448) =
#: fl(1/448) then one multiply (fp8check.triton.nvidia_approx; the H200 gave amax * fl(1/448) in every group)
_SCALE_RCP = KnownIssue(
    summary="scale = max(amax, eps) * fl(1/448), not max(amax, eps) / 448, on sm90: bit8_max is a run-time "
            "argument, and div.full.f32 multiplies by the hardware reciprocal of 448, fl(1/448); 1 ulp off the "
            "correctly rounded quotient on part of the groups (amax 0.56640625: 0x3AA5B6DC, not 0x3AA5B6DB)",
    upstream="by design (Triton's `/` is div.full.f32 on NVIDIA: triton-lang/triton#10661); " + NO,
    categories=frozenset({"scale"}), modes=frozenset({"faithful:sm90", "compiled"}), example=_scale_448,
    shown_by="a 1x128 group with amax 0.56640625")

ENTRIES = (
    ZooEntry(
        id="sglang.per_token_group_quant_fp8",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="_per_token_group_quant_8bit_raw(x, group_size=128, eps=1e-10) -> _per_token_group_quant_8bit (Triton)",
        kind="quantize", claims="per-token-group-1x128",
        citation=f"{_SRC}: _per_token_group_quant_8bit: y_s = max(amax, eps) / bit8_max, "
                 "y_q = clamp(y * (1 / y_s)); eps=1e-10 default",
        adapter=_M + "per_token_group_quant_fp8",
        modes=("faithful:sm90", "interpret", "compiled"),
        known=(
            KnownIssue(summary=_INF, upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:sm90", "interpret", "compiled"}), example=_inf,
                       shown_by="a 1x128 group holding 1.0, +Inf, -2.0"),
            KnownIssue(summary="codes are y * fl(1/y_s), not y / y_s: one code off where the rounded reciprocal moves "
                               "a value across a rounding midpoint (x = 2.734375 in a group with amax 0.765625: "
                               "x / s = 400 exactly, a tie, RNE 384; x * fl(1/s) = 400.00003, 416); the column-major "
                               "kernel divides. On sm90 1.0 / y_s is div.full.f32 (within 2 ulp), so under "
                               "faithful:sm90 such a code is target-dependent (the low end of the bracket gives 384), "
                               "not a divergence; compiled, it is whatever the H200's reciprocal gives",
                       upstream="by design (the kernel's formula); " + NO, categories=frozenset({"codes"}),
                       modes=frozenset({"interpret", "compiled"}), example=_tie,
                       shown_by="a 1x128 group holding 3.0625 (the amax) and 2.734375"),
            _SCALE_RCP,
            interpreter_conversions_issue("1x128"),
        ),
    ),
    ZooEntry(
        id="sglang.per_token_group_quant_fp8.colmajor",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="_per_token_group_quant_8bit_raw(x, 128, eps=1e-10, column_major_scales=True) -> "
                 "_per_token_group_quant_8bit_colmajor (Triton)",
        kind="quantize", claims="per-token-group-1x128",
        citation=f"{_SRC}: _per_token_group_quant_8bit_colmajor: y_s = max(amax, eps) / bit8_max, y_q = clamp(y / y_s)",
        adapter=_M + "per_token_group_quant_fp8_colmajor",
        modes=("faithful:sm90", "compiled"),
        known=(
            KnownIssue(summary=_INF_DIV, upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:sm90", "compiled"}), example=_inf,
                       shown_by="a 1x128 group holding 1.0, +Inf, -2.0"),
            _SCALE_RCP,
        ),
    ),
    ZooEntry(
        id="sglang.per_token_group_quant_fp8.mi300",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="_per_token_group_quant_8bit_raw(x, 128, eps=1e-10) on ROCm gfx94x: e4m3fnuz, bit8_max 224",
        kind="quantize", claims="per-token-group-1x128-224", fmt="e4m3fnuz",
        citation=f"{_SRC}: is_fp8_fnuz() -> fp8_dtype = float8_e4m3fnuz, fp8_max = 224.0; "
                 "_per_token_group_quant_8bit_raw: 'fp8 range is device-dependent on ROCm: e4m3fnuz (max 224.0) on "
                 "gfx94x', bit8_max = fp8_max; per_token_group_quant_fp8 = _per_token_group_quant_8bit_raw when not "
                 "_is_cuda",
        adapter=_M + "per_token_group_quant_fp8_mi300",
        modes=("faithful:gfx942",),
        note="runs on a CPU under the faithful interpreter's gfx942 target; MI300 hardware not measured",
        known=(
            KnownIssue(summary=_INF_MI300, upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:gfx942"}), example=_inf, shown_by="a 1x128 group holding 1.0, +Inf, -2.0"),
            KnownIssue(summary="codes are y * fl(1/y_s), as in the e4m3fn row-major kernel", upstream="by design; " + NO,
                       categories=frozenset({"codes"}), modes=frozenset({"faithful:gfx942"}),
                       example=lambda: example("1x128 group, x / s a tie", [[1.53125, 1.3671875]]),
                       shown_by="a 1x128 group holding 1.53125 (the amax) and 1.3671875"),
        ),
    ),
    ZooEntry(
        id="sglang.static_quant_fp8",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="static_quant_fp8(x, x_s=1.0) -> _static_quant_fp8 (Triton): clamp(y * (1 / x_s), fp8_min, "
                 "fp8_max).to(fp8_dtype)",
        kind="cast", claims="satfinite", dtypes=("float32",),
        citation=f"{_SRC}: _static_quant_fp8: y_s_inv = 1.0 / y_s, y_q = tl.clamp(y * y_s_inv, fp8_min, fp8_max)",
        adapter=_M + "static_cast", modes=("faithful:sm90", "compiled"),
        known=(KnownIssue(summary="NaN becomes -448 (0xFE): tl.clamp with fp8_min/fp8_max passed as run-time "
                                  "arguments is max then min, which return the non-NaN operand; satfinite keeps NaN",
                          upstream=NO, categories=frozenset({"nan"}), modes=frozenset({"faithful:sm90", "compiled"})),),
    ),
    ZooEntry(
        id="sglang.static_quant_fp8.mi300",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="the same kernel on ROCm gfx94x: e4m3fnuz, fp8_max 224", kind="cast", claims="satfinite",
        fmt="e4m3fnuz", dtypes=("float32",),
        citation=f"{_SRC}: is_fp8_fnuz() -> fp8_dtype = float8_e4m3fnuz, fp8_max = 224.0",
        adapter=_M + "static_cast_mi300", modes=("faithful:gfx942",),
        known=(KnownIssue(summary="the range is +-224, not e4m3fnuz's 240 (by design: SGLang's comment on ROCm "
                                  "accuracy): everything from 232 up saturates to 0x7E; NaN becomes -224 (0xFE, "
                                  "v_med3 returns the lower bound)", upstream="by design (fp8_max = 224.0); " + NO,
                          categories=frozenset({"nan", "overflow", "infinity", "rounding", "other"}),
                          modes=frozenset({"faithful:gfx942"})),),
        note="runs on a CPU under the faithful interpreter's gfx942 target; MI300 hardware not measured",
    ),
    ZooEntry(
        id="sglang.per_tensor_quant_mla_fp8",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="per_tensor_quant_mla_fp8(x, x_s_out, eps=1e-12) -> _per_tensor_quant_mla_fp8_stage1 "
                 "(atomic_max of max(amax, eps) / fp8_max) and _stage2 (clamp(x * (1 / x_s)))",
        kind="quantize", claims="tensorwise",
        citation=f"{_SRC}: _per_tensor_quant_mla_fp8_stage1: tl.atomic_max(x_s_ptr, max(amax, eps) / fp8_max); "
                 "stage2: x_q = tl.clamp(x * (1.0 / x_s), fp8_min, fp8_max)",
        adapter=_M + "per_tensor_mla", modes=("faithful:sm90", "compiled"),
        known=(KnownIssue(summary="both kernels step by the head and sequence strides but read x_ptr + arange(head_size), "
                                  "assuming a contiguous last dimension: a transposed or strided input gives other "
                                  "elements' values (scale and codes); +Inf makes the scale Inf", upstream=NO,
                          categories=frozenset({"scale", "codes", "nonfinite"}), modes=frozenset({"faithful:sm90", "compiled"}),
                          example=lambda: _transposed(), shown_by="a 64x128 input stored transposed"),),
    ),
    ZooEntry(
        id="sglang.per_tensor_quant_mla_fp8.mi300",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="the same kernels on ROCm gfx94x: e4m3fnuz, fp8_max 224", kind="quantize", claims="tensorwise",
        fmt="e4m3fnuz",
        citation=f"{_SRC}: is_fp8_fnuz() -> fp8_dtype = float8_e4m3fnuz, fp8_max = 224.0",
        adapter=_M + "per_tensor_mla_mi300", modes=("faithful:gfx942",),
        known=(KnownIssue(summary="both kernels step by the head and sequence strides but read x_ptr + arange(head_size), "
                                  "assuming a contiguous last dimension: a transposed or strided input gives other "
                                  "elements' values (scale and codes); +Inf makes the scale Inf", upstream=NO,
                          categories=frozenset({"scale", "codes", "nonfinite"}), modes=frozenset({"faithful:gfx942"}),
                          example=lambda: _transposed(), shown_by="a 64x128 input stored transposed"),),
        note="runs on a CPU under the faithful interpreter's gfx942 target; MI300 hardware not measured",
    ),
)

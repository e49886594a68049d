"""SGLang: the per-token-group FP8 Triton kernel ``_per_token_group_quant_8bit``.

SGLang 0.5.23's wheel pins ``torch==2.14.1``, ``sglang-kernel``, flashinfer
and CUDA packages, so it cannot be pip-installed beside a CPU torch. Its
``sglang/kernels/ops/quantization/fp8_kernel.py`` imports without the
compiled kernels from the unpacked wheel (``pip download --no-deps
sglang==0.5.23``; 39 MB) plus about twenty small pure-Python packages its
``sglang.srt.utils`` imports (orjson, pybase64, starlette, msgspec, pyzmq,
ipython, traitlets, aiohttp and its dependencies, ...). On CUDA SGLang calls
its JIT CUDA kernel; ``_per_token_group_quant_8bit_raw`` is the Triton path
(the one taken on other devices), and is what is checked, on every device.
"""

from __future__ import annotations

from typing import Any

from fp8check.zoo import KnownIssue, ZooEntry
from fp8check.zoo._adapters import import_package, lazy
NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"

from fp8check.zoo._triton import float32_store_kernel, mode_context, require_mode

FP8_KERNEL = "sglang.kernels.ops.quantization.fp8_kernel"
_HINT = "SGLang cannot be pip-installed beside a CPU torch; see fp8check.zoo.sglang's docstring"


def make_per_token_group_quant_fp8(mode: str = "interpret-f32") -> Any:
    """``_per_token_group_quant_8bit_raw(x, 128, eps=1e-10, dtype=float8_e4m3fn)`` (row-major scales)."""
    require_mode(mode)
    import torch

    m = import_package(FP8_KERNEL, "sglang", _HINT)

    def call(x: Any) -> tuple[Any, Any]:
        with mode_context(mode):
            return m._per_token_group_quant_8bit_raw(x.contiguous(), 128, eps=1e-10, dtype=torch.float8_e4m3fn)

    kernel = float32_store_kernel(call, (m,)) if mode == "interpret-f32" else call
    kernel.__name__ = f"sglang.per_token_group_quant_8bit[{mode}]"
    return kernel


per_token_group_quant_fp8 = lazy(make_per_token_group_quant_fp8, "interpret-f32",
                                 "fp8check.zoo.sglang:per_token_group_quant_fp8")
per_token_group_quant_fp8_interpret = lazy(make_per_token_group_quant_fp8, "interpret",
                                           "fp8check.zoo.sglang:per_token_group_quant_fp8_interpret")
per_token_group_quant_fp8_compiled = lazy(make_per_token_group_quant_fp8, "compiled",
                                          "fp8check.zoo.sglang:per_token_group_quant_fp8_compiled")

ENTRIES = (
    ZooEntry(
        id="sglang.per_token_group_quant_fp8",
        package="sglang", module=FP8_KERNEL, versions="==0.5.23",
        function="_per_token_group_quant_8bit_raw(x, group_size=128, eps=1e-10) -> _per_token_group_quant_8bit (Triton)",
        kind="quantize", claims="per-token-group-1x128",
        citation="sglang 0.5.23, sglang/kernels/ops/quantization/fp8_kernel.py: _per_token_group_quant_8bit: "
                 "y_s = max(amax, eps) / bit8_max, y_q = clamp(y * (1 / y_s)); eps=1e-10 default",
        adapter="fp8check.zoo.sglang:per_token_group_quant_fp8",
        modes=("interpret-f32", "interpret", "compiled"),
        known=(
            KnownIssue(summary="+Inf in a group becomes -448 (0xFE): y * (1/Inf) gives NaN for the Inf, and tl.clamp "
                               "(propagate_nan NONE) returns bit8_min for NaN; the recipe gives NaN",
                       upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"interpret-f32", "interpret", "compiled"})),
            KnownIssue(summary="the Triton interpreter's own fp8 stores (ties away, lost carry) and its bfloat16 upcast "
                   "(bf16 subnormals come out wrong: 9.18e-41 -> 0, 1.0e-38 -> 8.27e-39)",
           upstream="triton-lang/triton#8322 (fp8 casts); bf16 subnormal upcast: " + NO,
           categories=frozenset({"codes", "scale", "nonfinite"}), modes=frozenset({"interpret"}), interpreter_only=True),
        ),
    ),
)

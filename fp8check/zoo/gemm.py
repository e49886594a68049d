"""Other projects' Triton FP8 GEMM kernels, called through their own launchers as ``(a, a_scales, b,
b_scales) -> out`` for the gemm kind (:mod:`fp8check.matmul.gemm`: ``a`` (M, K), ``b`` (N, K) fp8, float32
scales shaped by the GEMM recipe).

Each adapter runs inside the caller's context (a declaration's ``triton-target`` runs it in the faithful
interpreter under that target) and changes nothing in the project's code; where a launcher asks the
machine what it is (a device name, an architecture, TMA support), the adapter answers, for the call, what
the declared target's machine answers:

- transformers 4.57.6 ``integrations/finegrained_fp8.py``: ``w8a8_block_fp8_matmul_triton`` (DeepSeek-V3's
  block-scaled GEMM as vLLM/SGLang wrote it) -> ``_w8a8_block_fp8_matmul``;
- SGLang 0.5.23 ``sglang/kernels/ops/gemm/fp8_kernel.py``: ``w8a8_block_fp8_matmul_triton`` ->
  ``_w8a8_block_fp8_matmul`` (its default config: no tuned file for these shapes; the module imports
  ``sglang.srt.layers.deep_gemm_wrapper``, which only its DeepGEMM paths use and whose import chain needs
  torchvision: a bare stand-in module is put in its place) and ``triton_scaled_mm`` (per-token x
  per-channel) -> ``scaled_mm_kernel``;
- AMD aiter 0.1.7.post2.dev18 ``aiter/ops/triton/gemm_a8w8_blockscale.py``: ``gemm_a8w8_blockscale`` ->
  ``_gemm_a8w8_blockscale_kernel``, its config read from aiter's gfx942 file (``arch_info.get_arch()``
  answered ``gfx942``);
  and ``gemm_a8w8`` (per-token x per-channel, ``w_scale`` (1, N)) -> ``_gemm_a8w8_kernel``;
- DeepSeek-V3 ``inference/kernel.py`` (commit 9b4e978, the file unchanged since adecc0e):
  ``fp8_gemm`` -> ``fp8_gemm_kernel`` (autotuned over 36 configs, each checked), its output in the default
  dtype, bfloat16 as DeepSeek's ``generate.py`` sets it;
- torchao 0.18 ``torchao/prototype/blockwise_fp8_training/kernels.py`` (blockwise FP8 training's forward and
  weight-gradient GEMMs): ``triton_fp8_gemm_1x128_128x128`` -> ``triton_fp8_gemm_1x128_128x128_kernel`` and
  ``triton_fp8_gemm_1x128_128x1`` (both operands per 1x128 group along K) ->
  ``triton_fp8_gemm_1x128_128x1_kernel``, each autotuned over 6 configs. Their launchers take ``b`` (K, N)
  column-major and the scales in the layouts they assert (``a_s`` column-major; ``b_s`` column-major for
  the first, row-major for the second): the adapter hands them the same values so laid out.
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, Iterator

from fp8check.zoo._adapters import import_package, import_skipping_init

__all__ = ["transformers_block", "sglang_block", "sglang_scaled_mm", "aiter_blockscale", "aiter_a8w8",
           "deepseek_fp8_gemm", "torchao_blockwise", "torchao_blockwise_1x128_128x1"]

_BLOCK = [128, 128]


@contextlib.contextmanager
def _set(obj: Any, **values: Any) -> Iterator[None]:
    """``obj``'s attributes set to ``values`` for the call, then restored."""
    saved = {k: getattr(obj, k) for k in values}
    for k, v in values.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(obj, k, v)


def transformers_block(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    import torch

    m = import_package("transformers.integrations.finegrained_fp8", "transformers")
    return m.w8a8_block_fp8_matmul_triton(a, b, a_scales, b_scales, _BLOCK, torch.float32)


def _sglang() -> Any:
    name = "sglang.srt.layers.deep_gemm_wrapper"
    if name not in sys.modules:
        stand_in = types.ModuleType(name)
        stand_in.ENABLE_JIT_DEEPGEMM = False  # the Triton path never reads more of it
        sys.modules[name] = stand_in
    return import_package("sglang.kernels.ops.gemm.fp8_kernel", "sglang")


def sglang_block(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    import torch

    m = _sglang()
    with _set(m, get_device_name=lambda: "NVIDIA H200"):  # no tuned file for these shapes: the default config
        return m.w8a8_block_fp8_matmul_triton(a, b, a_scales, b_scales, _BLOCK, torch.float32)


def sglang_scaled_mm(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    import torch

    return _sglang().triton_scaled_mm(a, b.t(), a_scales, b_scales, torch.float32)


def aiter_blockscale(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    import torch

    arch = import_skipping_init("aiter.ops.triton.utils._triton.arch_info", "aiter", "amd-aiter")
    m = import_skipping_init("aiter.ops.triton.gemm_a8w8_blockscale", "aiter", "amd-aiter")
    with _set(arch, get_arch=lambda: "gfx942"):
        return m.gemm_a8w8_blockscale(a, b, a_scales, b_scales, torch.bfloat16)


def deepseek_fp8_gemm(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    import torch

    m = import_package("deepseek_v3_inference.kernel", "DeepSeek-V3 inference/kernel.py")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # what DeepSeek-V3's generate.py sets: the output dtype
    try:
        return m.fp8_gemm(a, a_scales, b, b_scales)
    finally:
        torch.set_default_dtype(previous)


def aiter_a8w8(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    import torch

    arch = import_skipping_init("aiter.ops.triton.utils._triton.arch_info", "aiter", "amd-aiter")
    m = import_skipping_init("aiter.ops.triton.gemm_a8w8", "aiter", "amd-aiter")
    with _set(arch, get_arch=lambda: "gfx942"):
        return m.gemm_a8w8(a, b, a_scales, b_scales.reshape(1, -1), dtype=torch.bfloat16)


def _torchao_blockwise() -> Any:
    return import_package("torchao.prototype.blockwise_fp8_training.kernels", "torchao")


def _column_major(x: Any) -> Any:
    return x.t().contiguous().t()


def torchao_blockwise(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    """``a`` per 1x128 group, ``b`` per 128x128 block (``b_scales`` (N / 128, K / 128), given to torchao as
    its (K / 128, N / 128))."""
    m = _torchao_blockwise()
    return m.triton_fp8_gemm_1x128_128x128(a, b.t(), _column_major(a_scales), b_scales.t())


def torchao_blockwise_1x128_128x1(a: Any, a_scales: Any, b: Any, b_scales: Any) -> Any:
    """Both operands per 1x128 group along K (``b_scales`` (N, K / 128), given to torchao as its row-major
    (K / 128, N))."""
    m = _torchao_blockwise()
    return m.triton_fp8_gemm_1x128_128x1(a, b.t(), _column_major(a_scales), b_scales.t().contiguous())

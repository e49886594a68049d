"""FBGEMM's rowwise FP8 quantizer (fbgemm-gpu-genai 1.9.0,
``fbgemm_gpu/experimental/gemm/triton_gemm/fp8_gemm.py``), both paths:

- ``quantize_fp8_row_torch``: ``quantize_fp8_row(x)`` on a CPU tensor, which takes the package's
  PyTorch path ("Triton does not support cpu, falling back to torch ops");
- ``quantize_fp8_row_triton``: the Triton kernel ``_kernel_quantize_fp8_row`` that
  ``triton_quantize_fp8_row`` launches on a GPU, launched here with the arguments that function
  passes for a 2-D input (it enters ``torch.cuda.device(a.device.index)``, which a CPU tensor
  cannot). The kernel is autotuned over BLOCK_SIZE 512..8192; the interpreter cannot benchmark, so
  one configuration is kept (every BLOCK_SIZE computes the same: the loop covers the row).
"""

from __future__ import annotations

FP8_GEMM = "fbgemm_gpu.experimental.gemm.triton_gemm.fp8_gemm"


def _module():
    import importlib

    return importlib.import_module(FP8_GEMM)


def quantize_fp8_row_torch(x):
    return _module().quantize_fp8_row(x, use_triton=False)


def quantize_fp8_row_triton(x):
    import torch
    from triton import Config

    m = _module()
    m._kernel_quantize_fp8_row.configs = [Config({"BLOCK_SIZE": 1024})]
    a = x.reshape(1, 1, *x.shape)
    pt_dtype, tl_dtype, max_fp8, eps = m.get_fp8_constants()
    rows = a.numel() // a.shape[-1]
    scale = torch.empty((rows,), dtype=torch.float32, device=a.device)
    out = torch.empty(a.shape, dtype=pt_dtype, device=a.device)
    m._kernel_quantize_fp8_row[(rows,)](
        a, scale, out, None, None, *a.shape, out.shape[3], *a.stride(), *out.stride(), None, None,
        TL_FP8_DTYPE=tl_dtype, MAX_FP8=max_fp8, EPS=eps, CLAMP_MAX=False, JAGGED=False,
        USE_INT64=a.numel() > 2**31 - 1)
    return out.view(x.shape), scale.view(x.shape[0], 1)

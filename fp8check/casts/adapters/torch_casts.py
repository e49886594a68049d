"""torch ``.to()`` casts on the CPU or a CUDA device."""

from __future__ import annotations

from typing import Any

import numpy as np

from fp8check import formats, stacks
from fp8check.formats import Format
from fp8check.casts.adapters.kernel import CastKernel
from fp8check.errors import KernelLoadError


def _torch_input(x: np.ndarray, device: str) -> Any:
    import torch

    if x.dtype.name == "bfloat16":  # torch.from_numpy has no bfloat16
        t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(x))
    return t.to(device)


def torch_kernel(device: str) -> CastKernel:
    try:
        import torch
    except ImportError:
        raise KernelLoadError("torch is not installed (pip install torch)") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise KernelLoadError("torch-cuda needs a CUDA device; none is available")
    fmts = tuple(f for f in formats.ALL_FORMATS if f.torch_name and hasattr(torch, f.torch_name))

    def dtype_of(fmt: Format) -> Any:
        return getattr(torch, fmt.torch_name)

    def cast(x: np.ndarray, fmt: Format) -> Any:
        return _torch_input(x, device).to(dtype_of(fmt)).view(torch.uint8).cpu()

    def cast_tensor(x: Any, fmt: Format) -> Any:
        return x.to(dtype_of(fmt)).view(torch.uint8)

    def decode(codes: np.ndarray, fmt: Format) -> np.ndarray:
        t = torch.from_numpy(codes).to(device).view(dtype_of(fmt))
        return t.float().cpu().numpy()

    where = "CPU" if device == "cpu" else torch.cuda.get_device_name(0)
    claim = stacks.claim("torch", device=device, version=torch.__version__)
    return CastKernel(
        name=f"torch-{device}",
        description=f"torch {torch.__version__} tensor.to(torch.float8_*) on {where}",
        claims=claim.profile,
        observation=claim.observation,
        unpinned=claim.unpinned,
        formats=fmts,
        input_dtypes=("float32", "float16", "bfloat16", "float64"),
        cast_fn=cast,
        tensor_fn=cast_tensor,
        decode_fn=decode,
        device=device,
        known=claim.known,
    )

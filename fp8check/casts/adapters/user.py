"""User kernels named ``module:function`` or ``path/to/file.py:function``.

The function receives one torch tensor (float32, float16 or bfloat16, on the
chosen device) and returns, for the format under test, an fp8 tensor of that
format or uint8 codes (torch or NumPy) of the same shape. The format is not
passed: a user kernel casts to one format, named on the command line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fp8check import formats, profiles
from fp8check.casts.adapters.kernel import CastKernel
from fp8check.errors import KernelLoadError
from fp8check.formats import Format
from fp8check.loader import load_callable


def user_kernel(spec: str, *, device: str = "cpu", profile: object = "ieee",
                input_dtypes: tuple[str, ...] | None = None) -> CastKernel:
    """The cast kernel ``spec`` (``MODULE:FUNC``) names, as a :class:`CastKernel`."""
    _require_torch(device)
    return wrap_callable(load_callable(spec), name=spec, device=device, profile=profile, input_dtypes=input_dtypes)


def _require_torch(device: str) -> None:
    try:
        import torch
    except ImportError:
        raise KernelLoadError("user kernels take torch tensors: install torch") from None
    if device not in ("cpu", "cuda"):
        raise KernelLoadError(f"--device {device!r}: use cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise KernelLoadError("--device cuda: no CUDA device is available")


def wrap_callable(fn: Any, *, name: str | None = None, device: str = "cpu", profile: object = "ieee",
                  input_dtypes: tuple[str, ...] | None = None) -> CastKernel:
    """A cast function object ``fn(x) -> fp8 tensor or uint8 codes`` as a :class:`CastKernel`."""
    import torch

    _require_torch(device)
    claims = profiles.get(profile)
    spec = name or getattr(fn, "__name__", repr(fn))

    def cast_tensor(x: Any, fmt: Format) -> Any:
        return fn(x)

    def cast(x: np.ndarray, fmt: Format) -> Any:
        if x.dtype.name == "bfloat16":
            t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.ascontiguousarray(x))
        return fn(t.to(device))

    fmts = formats.ALL_FORMATS  # the profile says which it defines (profile_for raises)
    return CastKernel(
        name=spec,
        description=f"user kernel {spec} on {device}",
        claims=claims,
        formats=fmts,
        input_dtypes=input_dtypes or ("float32", "float16", "bfloat16", "float64"),
        cast_fn=cast,
        tensor_fn=cast_tensor,
        device=device,
        builtin=False,
    )


def check_callable(kernel: CastKernel, fmt: Format, input_dtype: str = "float32") -> None:
    """Call ``kernel`` once on a few values so that a broken kernel fails early, in one line."""
    from fp8check import inputs

    probe = inputs.from_bits(np.array([0, 1], dtype=np.uint64), input_dtype)
    kernel.cast(probe, fmt)  # raises KernelCallError / KernelOutputError in one line

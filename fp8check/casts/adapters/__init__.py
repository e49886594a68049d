"""Kernel adapters: each real FP8 cast, wrapped with the profile it claims.

A :class:`CastKernel` turns inputs (NumPy arrays of float32, float16,
bfloat16 or float64) into codes (uint8) the way one real implementation
does, and says which :class:`~fp8check.profiles.Profile` it claims to
implement, for which formats and input dtypes. The built-in adapters:

==================== ===========================================================
``torch-cpu``        ``tensor.to(torch.float8_*)`` on the CPU.
``torch-cuda``       the same on a CUDA device (when one is present).
``ml_dtypes``        ``ndarray.astype(ml_dtypes.float8_*)``.
``triton-interpreter`` the casts this project ships as Triton kernels
                     (:mod:`fp8check.casts.adapters.triton_casts`), run by Triton's
                     interpreter on the CPU.
``triton-faithful``  the same kernels in fp8check's faithful interpreter
                     (:mod:`fp8check.triton`) with the sm90 target: what
                     compiled Triton does on Hopper, on a CPU.
``triton-cuda``      the same kernels compiled for a CUDA GPU; fnuz types do
                     not compile for NVIDIA and are reported unsupported.
==================== ===========================================================

A user kernel named ``module:function`` (or ``path/to/file.py:function``)
is wrapped by :func:`load_user_kernel`: it receives a torch tensor and
returns an fp8 tensor or uint8 codes of the same shape.

What a built-in adapter claims comes from the stack registry
(:mod:`fp8check.stacks`): the observation covering the installed release and
this platform gives the profile and the known upstream bugs (which the
properties mark ``xfail(strict=True)`` naming the upstream issue). Where no
observation covers what is installed, the adapter claims the nearest
observed profile and says so in ``unpinned``.
"""

from __future__ import annotations

from fp8check.casts.adapters.kernel import CastKernel
from fp8check.errors import KernelCallError, KernelError, KernelLoadError, KernelOutputError

__all__ = [
    "CastKernel",
    "KernelError",
    "KernelLoadError",
    "KernelCallError",
    "KernelOutputError",
    "builtin_kernels",
    "builtin_names",
    "get_kernel",
    "load_user_kernel",
]


def builtin_names() -> tuple[str, ...]:
    return ("torch-cpu", "torch-cuda", "ml_dtypes", "triton-interpreter", "triton-faithful", "triton-cuda")


def builtin_kernels(*, include_unavailable: bool = False) -> list[CastKernel]:
    """The built-in adapters available on this machine (in a stable order)."""
    out = []
    for name in builtin_names():
        try:
            out.append(get_kernel(name))
        except KernelLoadError:
            if include_unavailable:
                raise
    return out


_CACHE: dict[str, CastKernel] = {}


def get_kernel(name: str, *, device: str | None = None, profile: object = "ieee") -> CastKernel:
    """A built-in adapter by name, or a user kernel ``module:function``.

    Raises :class:`KernelLoadError` when the adapter's library or device is
    missing or the user kernel cannot be imported.
    """
    if ":" in name and name not in builtin_names():
        return load_user_kernel(name, device=device or "cpu", profile=profile)
    if name not in builtin_names():
        raise KernelLoadError(
            f"unknown kernel {name!r}: give module:function, or a built-in adapter ({', '.join(builtin_names())})"
        )
    if name in _CACHE:
        return _CACHE[name]
    if name.startswith("torch-"):
        from fp8check.casts.adapters.torch_casts import torch_kernel

        kernel = torch_kernel(name.removeprefix("torch-"))
    elif name == "ml_dtypes":
        from fp8check.casts.adapters.ml_dtypes_casts import ml_dtypes_kernel

        kernel = ml_dtypes_kernel()
    else:
        from fp8check.casts.adapters.triton_casts import triton_kernel

        kernel = triton_kernel(name.removeprefix("triton-"))
    _CACHE[name] = kernel
    return kernel


def load_user_kernel(spec: str, *, device: str = "cpu", profile: object = "ieee",
                     input_dtypes: tuple[str, ...] | None = None) -> CastKernel:
    """Wrap the callable named ``module:function`` (see :mod:`fp8check.casts.adapters.user`)."""
    from fp8check.casts.adapters.user import user_kernel

    return user_kernel(spec, device=device, profile=profile, input_dtypes=input_dtypes)

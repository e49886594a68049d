"""How zoo adapters run a package's Triton kernels: interpreted, interpreted
with float32 stores, compiled, or (once it exists) faithfully interpreted.

The interpreter must be switched on (``TRITON_INTERPRET=1``) before triton
is first imported in the process, because Triton decides then whether its
language helpers and every ``@triton.jit`` of a package's import are
interpreted. :func:`require_mode` sets it when that is still possible and
says clearly when it is not.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Iterator

import numpy as np

from fp8check.errors import FP8CheckError
from fp8check.zoo import ZooUnavailable

__all__ = ["require_mode", "Float32Stores", "float32_store_kernel", "mode_context", "encode_stored"]


def require_mode(mode: str) -> None:
    """Make ``mode`` possible in this process, or raise saying why not."""
    if mode in ("interpret", "interpret-f32") or mode.startswith("faithful"):
        if "triton" not in sys.modules:
            os.environ["TRITON_INTERPRET"] = "1"
            return
        import triton.language.standard as standard

        if type(standard.max).__name__ != "InterpretedFunction":
            raise FP8CheckError(
                "the Triton interpreter needs TRITON_INTERPRET=1 before triton is first imported, and triton was "
                "imported without it in this process; run with TRITON_INTERPRET=1 set"
            )
    elif mode == "compiled":
        import torch

        if not torch.cuda.is_available():
            raise ZooUnavailable("compiled Triton kernels need a CUDA device; none here")
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise FP8CheckError("mode 'compiled' with TRITON_INTERPRET=1 set: unset it to compile the kernels")


@contextlib.contextmanager
def mode_context(mode: str) -> Iterator[None]:
    """Around each call of a Triton kernel: the faithful interpreter when asked for."""
    if mode.startswith("faithful"):
        target = mode.partition(":")[2] or "sm90"
        try:
            from fp8check import triton as faithful_triton  # the faithful interpreter, when it lands
        except ImportError:
            raise ZooUnavailable(f"mode {mode!r} needs fp8check.triton (the faithful interpreter), not installed "
                                 "in this fp8check") from None
        with faithful_triton.faithful(target=target):
            yield
        return
    if mode in ("interpret", "interpret-f32"):
        saved = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1"
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = saved
        return
    yield


_FP8_NAMES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


class Float32Stores:
    """``torch`` for a kernel module, except that an fp8 ``empty``/``empty_like``
    allocates float32: the kernel then stores the values it would have
    converted (``x.to(out_ptr.dtype.element_ty)`` becomes a float32 store)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self.enabled = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def _dtype(self, dtype: Any) -> Any:
        if self.enabled and dtype is not None and str(dtype).removeprefix("torch.") in _FP8_NAMES:
            return self._torch.float32
        return dtype

    def empty(self, *size: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return self._torch.empty(*size, dtype=self._dtype(dtype), **kwargs)

    def empty_like(self, t: Any, *, dtype: Any = None, **kwargs: Any) -> Any:
        return self._torch.empty_like(t, dtype=self._dtype(dtype), **kwargs)

    def empty_strided(self, size: Any, stride: Any, *, dtype: Any = None, **kwargs: Any) -> Any:
        return self._torch.empty_strided(size, stride, dtype=self._dtype(dtype), **kwargs)


@contextlib.contextmanager
def float32_stores(*modules: Any) -> Iterator[None]:
    """Within: the fp8 buffers the ``modules`` allocate are float32."""
    proxies = []
    for m in modules:
        if not isinstance(m.torch, Float32Stores):
            m.torch = Float32Stores(m.torch)
        proxies.append(m.torch)
    for p in proxies:
        p.enabled = True
    try:
        yield
    finally:
        for p in proxies:
            p.enabled = False


def encode_stored(values: Any, fmt: object = "e4m3fn", profile: object = "triton-sm90") -> Any:
    """The fp8 codes (a torch uint8 tensor) compiled Triton on sm90 gives for float32 ``values``."""
    import torch

    from fp8check.reference import encode

    arr = values.detach().to("cpu", torch.float32).contiguous().numpy()
    return torch.from_numpy(np.ascontiguousarray(encode(arr, fmt, profile)))


def float32_store_kernel(call: Callable[[Any], tuple[Any, Any]], modules: tuple[Any, ...], fmt: object = "e4m3fn",
                         profile: object = "triton-sm90") -> Callable[[Any], tuple[Any, Any]]:
    """``call`` run with float32 fp8 buffers, its stored values encoded by the reference."""

    def kernel(x: Any) -> tuple[Any, Any]:
        with float32_stores(*modules):
            q, s = call(x)
        if q.dtype.is_floating_point and q.element_size() == 1:
            raise FP8CheckError("the float32-store adapter got an fp8 buffer back: the kernel allocates its output "
                                "elsewhere than the modules patched")
        return encode_stored(q, fmt, profile), s

    return kernel

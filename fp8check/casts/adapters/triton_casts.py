"""The Triton cast kernels this project ships, interpreted on the CPU or compiled.

Two kernels of a few lines each: ``cast_kernel`` loads float32, float16 or
bfloat16 and stores ``x.to(<fp8 type of the output pointer>)``; Triton
picks the fp8 type from the output tensor (``float8e4nv`` for e4m3fn,
``float8e5`` for e5m2, ``float8e4b8``/``float8e5b16`` for the fnuz types).
``decode_kernel`` is the reverse, fp8 to float32.

``triton-interpreter`` runs them through Triton's interpreter
(``TRITON_INTERPRET=1``, set only while the kernels are decorated, so
compiled kernels elsewhere in the process are unaffected).
``triton-cuda`` compiles them for the CUDA device; NVIDIA has no fnuz
conversion, so the fnuz formats are reported unsupported there.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fp8check import formats, stacks
from fp8check.formats import Format
from fp8check.casts.adapters.kernel import CastKernel
from fp8check.errors import KernelLoadError

try:  # the kernels are defined only where Triton is installed
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None


def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton style
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, x.to(y_ptr.dtype.element_ty), mask=mask)


def decode_kernel(c_ptr, y_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    c = tl.load(c_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, c.to(tl.float32), mask=mask)


FP8 = (formats.E4M3FN, formats.E4M3FNUZ, formats.E5M2, formats.E5M2FNUZ)

def _jit(fn: Any, interpret: bool) -> Any:
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        return triton.jit(fn)
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


def _block(n: int, interpret: bool) -> int:
    if not interpret:
        return 1024
    return max(16, min(1 << 16, 1 << max(0, (n - 1).bit_length())))


def _launch(kernel: Any, x: Any, y: Any, interpret: bool) -> None:
    n = x.numel()
    if n == 0:
        return
    block = _block(n, interpret)
    kernel[(triton.cdiv(n, block),)](x.reshape(-1), y.reshape(-1), n, BLOCK=block)


def _torch_input(x: np.ndarray) -> Any:
    import torch

    if x.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def triton_kernel(mode: str) -> CastKernel:
    if triton is None:
        raise KernelLoadError("triton is not installed (pip install triton)")
    try:
        import torch
    except ImportError:
        raise KernelLoadError("the Triton adapters need torch") from None
    interpret = mode in ("interpreter", "faithful")
    if not interpret and not torch.cuda.is_available():
        raise KernelLoadError("triton-cuda needs a CUDA device; none is available")
    device = "cpu" if interpret else "cuda"
    cast_jit = _jit(cast_kernel, interpret)
    decode_jit = _jit(decode_kernel, interpret)

    def torch_dtype(fmt: Format) -> Any:
        return getattr(torch, fmt.torch_name)

    def cast_tensor(x: Any, fmt: Format) -> Any:
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch_dtype(fmt), device=x.device)
        _launch(cast_jit, x, y, interpret)
        return y.view(torch.uint8)

    def cast(x: np.ndarray, fmt: Format) -> Any:
        return cast_tensor(_torch_input(x).to(device), fmt).cpu()

    def decode(codes: np.ndarray, fmt: Format) -> np.ndarray:
        c = torch.from_numpy(codes).to(device).view(torch_dtype(fmt))
        y = torch.empty(c.shape, dtype=torch.float32, device=device)
        _launch(decode_jit, c, y, interpret)
        return y.cpu().numpy()

    if mode == "faithful":  # every FP8 conversion by the reference, as compiled Triton does it on sm90
        import fp8check.triton as ft

        ft.check_triton_version()  # a version the patch was not tested with: one clear line
        cast, cast_tensor, decode = (_faithful(fn, ft) for fn in (cast, cast_tensor, decode))
    unsupported: tuple[tuple[str, str], ...] = ()
    if (not interpret or mode == "faithful") and torch.version.hip is None:
        unsupported = tuple(
            (f.name, f"Triton does not compile {f.name} (tl.{name}) casts for NVIDIA GPUs")
            for f, name in ((formats.E4M3FNUZ, "float8e4b8"), (formats.E5M2FNUZ, "float8e5b16"))
        )
    version = getattr(triton, "__version__", "?")
    stack = {"interpreter": "triton-interpreter", "faithful": "triton-faithful"}.get(mode, "triton")
    claim = stacks.claim(stack, device=device, version=version)
    if mode == "interpreter":
        # Some interpreter versions cannot even build some fp8 types (Triton
        # 3.6: "fail to convert fp8e4b8 to ir type"): report, don't crash.
        failing = []
        for f in FP8:
            try:
                cast(np.zeros(1, np.float32), f)
            except Exception as exc:  # whatever the interpreter raises
                failing.append((f.name, f"Triton {version}'s interpreter cannot cast to {f.name}: "
                                        f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
        unsupported = tuple(failing)
    return CastKernel(
        name=f"triton-{mode}",
        description=(
            f"Triton {version} x.to(fp8) kernels, "
            + {"interpreter": "interpreted on the CPU (TRITON_INTERPRET=1)",
               "faithful": "in fp8check's faithful interpreter (target sm90) on the CPU"}.get(
                mode, f"compiled for {torch.cuda.get_device_name(0) if not interpret else ''}")
        ),
        claims=claim.profile,
        observation=claim.observation,
        unpinned=claim.unpinned,
        formats=FP8,
        input_dtypes=("float32", "float16", "bfloat16"),
        cast_fn=cast,
        tensor_fn=cast_tensor,
        decode_fn=decode,
        device=device,
        unsupported=unsupported,
        known=claim.known,
    )


def _faithful(fn: Any, ft: Any) -> Any:
    """``fn`` run inside the faithful interpreter with the sm90 target."""

    def wrapped(*args: Any) -> Any:
        with ft.faithful("sm90"):
            return fn(*args)

    return wrapped

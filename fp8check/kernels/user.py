"""User kernels named ``module:function`` or ``path/to/file.py:function``.

The function receives one torch tensor (float32, float16 or bfloat16, on the
chosen device) and returns, for the format under test, an fp8 tensor of that
format or uint8 codes (torch or NumPy) of the same shape. The format is not
passed: a user kernel casts to one format, named on the command line.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fp8check import formats, profiles
from fp8check.formats import Format
from fp8check.kernels import CastKernel, KernelLoadError


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def resolve(spec: str) -> Callable[..., Any]:
    """The callable ``spec`` names; raises :class:`KernelLoadError` in one line."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise KernelLoadError(f"kernel {spec!r} must be MODULE:FUNCTION (e.g. mykernels:cast_e4m3)")
    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise KernelLoadError(f"cannot import kernel {spec!r}: no file {module_name}")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            if mod_spec is None or mod_spec.loader is None:
                raise KernelLoadError(f"cannot import kernel {spec!r}: {module_name} is not a Python file")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules.setdefault(path.stem, module)
            mod_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())  # like `python -m`: modules in the working directory
            module = importlib.import_module(module_name)
    except KernelLoadError:
        raise
    except BaseException as exc:  # an import runs user code: anything can go wrong
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise KernelLoadError(f"cannot import kernel {spec!r}: {_one_line(exc)}") from None
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise KernelLoadError(f"cannot load kernel {spec!r}: module {module_name!r} has no {attr!r}") from None
    if not callable(target):
        raise KernelLoadError(f"cannot load kernel {spec!r}: {attr!r} is a {type(target).__name__}, not callable")
    return target


def user_kernel(spec: str, *, device: str = "cpu", profile: object = "ieee",
                input_dtypes: tuple[str, ...] | None = None) -> CastKernel:
    try:
        import torch
    except ImportError:
        raise KernelLoadError("user kernels take torch tensors: install torch") from None
    if device not in ("cpu", "cuda"):
        raise KernelLoadError(f"--device {device!r}: use cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise KernelLoadError("--device cuda: no CUDA device is available")
    claims = profiles.get(profile)
    fn = resolve(spec)

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

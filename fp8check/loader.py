"""The one kernel loader: ``module:function`` or ``path/to/file.py:function`` to a callable.

Every kind of check (casts, quantizers, fused kernels), the CLI and the
pytest plugin load the kernel under test through :func:`load_callable`, so a
kernel that cannot be imported fails the same way everywhere: one line, a
:class:`~fp8check.errors.KernelLoadError`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

from fp8check.errors import KernelLoadError

__all__ = ["load_callable", "without_triton"]


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def load_callable(spec: str) -> Callable[..., Any]:
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
        err = KernelLoadError(f"cannot import kernel {spec!r}: {_one_line(exc)}")
        err.name = getattr(exc, "name", None)  # the module that was missing, for without_triton
        raise err from None
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise KernelLoadError(f"cannot load kernel {spec!r}: module {module_name!r} has no {attr!r}") from None
    if not callable(target):
        raise KernelLoadError(f"cannot load kernel {spec!r}: {attr!r} is a {type(target).__name__}, not callable")
    return target


def without_triton(exc: BaseException) -> str:
    """Why a kernel is not checked here when ``exc`` (raised loading or running it) says Triton itself is not
    installed ("" otherwise: a kernel module's own import error is no reason to skip)."""
    name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if not name or name.split(".")[0] != "triton":
        return ""
    return f"without Triton, these kernels' tests are skipped ({_one_line(exc)})"


def no_driver_hint(error: str, remedy: str) -> str:
    """Triton's "0 active drivers" (a Triton kernel launched on a machine without a GPU) in ``error``, with what
    to do (``remedy``: the flag or the declaration key of the caller); any other error as it is."""
    if "active drivers" not in error:
        return error
    return f"{error} (a Triton kernel on a machine without a GPU: {remedy})"

"""Pieces the check, fingerprint, survey and sweep commands share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fp8check.errors import InvalidValueError

KERNEL_HELP = (
    "the kernel under test: MODULE:FUNC or path/to/file.py:FUNC (called with a torch tensor, returns an fp8 "
    "tensor or uint8 codes), or a built-in adapter: torch-cpu, torch-cuda, ml_dtypes, triton-interpreter, triton-cuda"
)


def console(stderr: bool = False) -> Any:
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Logs and pipes are wider than rich's 80-column default for them.
    width = None if stream.isatty() else 160
    return Console(highlight=False, stderr=stderr, soft_wrap=True, width=width)


def load_kernel(spec: str, device: str, profile: str | None) -> Any:
    from fp8check import kernels

    if spec in kernels.builtin_names():
        return kernels.get_kernel(spec)
    if ":" not in spec:
        raise kernels.KernelLoadError(
            f"kernel {spec!r} must be MODULE:FUNC or a built-in adapter ({', '.join(kernels.builtin_names())})"
        )
    return kernels.load_user_kernel(spec, device=device, profile=profile or "ieee")


def write_json(path: str, data: dict[str, Any]) -> None:
    try:
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InvalidValueError(f"--json {path}: cannot write: {exc.strerror or exc}") from None


def parse_int(text: str, what: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise InvalidValueError(f"{what} {text!r} is not an integer (decimal or 0x hex)") from None


def require_formats(kernel: Any, fmt: Any) -> None:
    why = kernel.unsupported_reason(fmt)
    if why is not None:
        from fp8check.errors import UnsupportedFormatError

        raise UnsupportedFormatError(why)


__all__ = ["console", "load_kernel", "write_json", "parse_int", "require_formats", "KERNEL_HELP"]

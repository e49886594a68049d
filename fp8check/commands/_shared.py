"""Pieces the check, fingerprint, survey and sweep commands share."""

from __future__ import annotations

from typing import Any

from fp8check.errors import InvalidValueError

KERNEL_HELP = (
    "the kernel under test: MODULE:FUNC or path/to/file.py:FUNC (called with a torch tensor, returns an fp8 "
    "tensor or uint8 codes), or a built-in adapter: torch-cpu, torch-cuda, ml_dtypes, triton-interpreter, triton-faithful, triton-cuda"
)


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


__all__ = ["parse_int", "require_formats", "check_outputs_and_examples", "KERNEL_HELP"]


def check_outputs_and_examples(args: Any) -> None:
    """The checks every checking command makes before it runs: ``--json``/``--html`` can be written, and
    ``--max-examples`` is not negative (one line each, exit 2)."""
    from fp8check.outputs import check_writable

    for path, option in ((args.json, "--json"), (args.html, "--html")):
        check_writable(path, option)
    if args.max_examples < 0:
        raise InvalidValueError(f"--max-examples {args.max_examples}: must be >= 0")

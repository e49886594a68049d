"""The terminal face: one console, byte sizes, and the one divergence printer.

Only turns library results into text; nothing here computes a verdict.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["console", "format_bytes"]


def console(stderr: bool = False, *, file: Any = None, wide: bool = False) -> Any:
    """The rich console every command prints through.

    A terminal gets its own width; a pipe or a log gets 160 columns and
    soft wrapping, so that names stay whole and greppable (``wide``: as wide
    as the content, for tables a script reads back).
    """
    from rich.console import Console

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    width = None if getattr(stream, "isatty", lambda: False)() else (1000 if wide else 160)
    return Console(file=stream, highlight=False, soft_wrap=True, width=width)


def format_bytes(n: float) -> str:
    """``1.5 MiB``: binary units, as the HTML reports show them."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v):,} B" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{v:,.1f} TiB"  # pragma: no cover

"""What a long-running library call tells a progress display.

A core type: the library (the auditor, convert) calls a ``ProgressSink``; the
faces at the edge implement it (``fp8check.terminal.progress.RichProgress``).
The library never imports a face.
"""

from __future__ import annotations

__all__ = ["ProgressSink"]


class ProgressSink:
    """Progress across files and bytes (all no-ops here: the library's default when nobody watches)."""

    def start(self, total_bytes: int, total_files: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...

    def file_done(self, path: str) -> None: ...

    def close(self) -> None: ...

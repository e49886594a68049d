"""The terminal's progress bar: a face implementing the library's ``ProgressSink``."""

from __future__ import annotations

import sys
from typing import Any

from fp8check.progress import ProgressSink
from fp8check.terminal import console as terminal_console

__all__ = ["RichProgress"]


class RichProgress(ProgressSink):
    """A progress bar on stderr across files and bytes; silent when stderr is not a terminal."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None
        self._task: Any = None
        self._files = 0
        self._done_files = 0

    def start(self, total_bytes: int, total_files: int) -> None:
        if not self.enabled:
            return
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        self._files = total_files
        self._progress = Progress(
            TextColumn("[bold]audit[/] {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            TimeRemainingColumn(), console=terminal_console(stderr=True), transient=True)
        self._progress.start()
        self._task = self._progress.add_task(f"files 0/{total_files}", total=max(total_bytes, 1))

    def advance(self, nbytes: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, nbytes)

    def file_done(self, path: str) -> None:
        if self._progress is not None:
            self._done_files += 1
            self._progress.update(self._task, description=f"files {self._done_files}/{self._files}")

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

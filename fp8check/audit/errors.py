"""Errors of the checkpoint loader.

Each is an :class:`~fp8check.errors.FP8CheckError`, so the CLI prints its
message on one line and exits 2. A multi-file audit catches them per file,
reports the file as unreadable and goes on with the rest.
"""

from __future__ import annotations

from fp8check.errors import FP8CheckError


class CheckpointError(FP8CheckError):
    """A checkpoint file or directory that cannot be read safely."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


class UnsafeCheckpointError(CheckpointError):
    """A pickle that asks for a global outside torch's weights-only safe set.

    ``globals`` names every such global found (``module.name``); nothing of
    the file was executed.
    """

    def __init__(self, path: str, message: str, globals_: tuple[str, ...] = ()) -> None:
        super().__init__(path, message)
        self.globals = globals_


class MissingDependencyError(FP8CheckError):
    """A library the command needs (torch, a recent safetensors) is missing."""

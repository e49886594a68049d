"""The exceptions fp8check raises.

Every error the library raises on bad input is an ``FP8CheckError``; the CLI
catches that one class, prints its message on one line and exits with code 2.
Each subclass also derives from the builtin a caller would expect
(``LookupError`` for an unknown name, ``TypeError`` for a wrong dtype, ...).
"""

from __future__ import annotations


class FP8CheckError(Exception):
    """Base class of every error fp8check raises on bad input."""


class UnknownFormatError(FP8CheckError, LookupError):
    """A format name, dtype or string that names no known format."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownProfileError(FP8CheckError, LookupError):
    """A profile name that names no known profile."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsupportedDtypeError(FP8CheckError, TypeError):
    """An input array whose dtype the reference does not accept."""


class InvalidValueError(FP8CheckError, ValueError):
    """A value that cannot be used: a malformed number, a code out of range, ..."""


class UnsupportedFormatError(FP8CheckError, ValueError):
    """A profile or kernel asked to handle a format it does not define."""


class KernelError(FP8CheckError):
    """A kernel under test that cannot be loaded, called or understood."""


class KernelLoadError(KernelError, ImportError):
    """``module:function`` names nothing importable and callable."""


class KernelCallError(KernelError, RuntimeError):
    """The kernel raised when called."""


class KernelOutputError(KernelError, TypeError):
    """The kernel returned something that is not codes of the right shape."""


class CheckpointError(FP8CheckError):
    """A checkpoint file or directory that cannot be read safely.

    A multi-file audit catches it per file, reports the file as unreadable
    and goes on with the rest.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


class UnsafeCheckpointError(CheckpointError):
    """A pickle that asks for a global fp8check does not read.

    ``globals`` names every such global found (``module.name``); nothing of
    the file was executed.
    """

    def __init__(self, path: str, message: str, globals_: tuple[str, ...] = ()) -> None:
        super().__init__(path, message)
        self.globals = globals_


class MissingDependencyError(FP8CheckError):
    """A library the command needs (torch, a recent safetensors) is missing."""

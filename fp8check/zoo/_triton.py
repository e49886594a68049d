"""How zoo adapters run a package's Triton kernels: in Triton's interpreter,
in fp8check's faithful interpreter under a target, or compiled.

Modes (:data:`fp8check.zoo.MODES`):

``interpret``          Triton's own interpreter, its FP8 conversions included
                       (known wrong: triton-lang/triton#8322). A divergence
                       seen here and not under ``faithful:<target>`` is the
                       interpreter's, not the package's.
``faithful:<target>``  the interpreter with every FP8 conversion done as
                       compiled Triton does it on ``target`` (``sm90``,
                       ``sm89``, ``sm100``, ``gfx942``, ``gfx950``):
                       :func:`fp8check.triton.faithful`. Arithmetic other
                       than FP8 conversions is still the interpreter's
                       (numpy float32; ``/`` is IEEE division, where
                       compiled Triton on NVIDIA emits ``div.full.f32``).
``compiled``           the kernel compiled for the CUDA device.

Both interpreted modes run through :func:`fp8check.triton.interpreting`, so
``TRITON_INTERPRET`` need not be set before triton is imported.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Iterator

from fp8check.errors import FP8CheckError
from fp8check.zoo import ZooUnavailable

if TYPE_CHECKING:
    from fp8check.zoo import KnownIssue

__all__ = ["require_mode", "mode_context", "is_interpreted", "faithful_target"]


def faithful_target(mode: str) -> str | None:
    """``"gfx942"`` for ``"faithful:gfx942"``; None for any other mode."""
    return mode.partition(":")[2] or None if mode.startswith("faithful") else None


def is_interpreted(mode: str) -> bool:
    return mode == "interpret" or mode.startswith("faithful")


def require_mode(mode: str) -> None:
    """Make ``mode`` possible in this process, or raise :class:`ZooUnavailable` saying why not."""
    if is_interpreted(mode):
        try:
            import fp8check.triton as ft

            ft.check_triton_version()
            target = faithful_target(mode)
            if mode.startswith("faithful") and target is None:
                raise ZooUnavailable(f"mode {mode!r} names no target (faithful:sm90, faithful:gfx942, ...)")
            if target is not None:
                ft.get_target(target)
        except (ImportError, FP8CheckError) as exc:
            if isinstance(exc, ZooUnavailable):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ZooUnavailable(f"mode {mode!r}: {first}") from None
    elif mode == "compiled":
        import torch

        if not torch.cuda.is_available():
            raise ZooUnavailable("compiled Triton kernels need a CUDA device; none here")
        if os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on"):
            raise FP8CheckError("mode 'compiled' with TRITON_INTERPRET=1 set: unset it to compile the kernels")


@contextlib.contextmanager
def mode_context(mode: str) -> Iterator[None]:
    """Around each call of a package function that launches Triton kernels."""
    if not is_interpreted(mode):
        yield
        return
    import fp8check.triton as ft

    target = faithful_target(mode)
    with ft.interpreting():
        if target is None:
            yield
        else:
            with ft.faithful(target):
                yield


def interpreter_conversions_issue(group: str) -> KnownIssue:
    """The known divergence every Triton entry shows in the stock interpreter: its own fp8
    conversions (``group``: the entry's group, e.g. "1x128"), shown on a tie."""
    from fp8check.zoo import KnownIssue
    from fp8check.zoo._adapters import example

    return KnownIssue(summary="the Triton interpreter's own fp8 conversions (ties away, lost carry)",
                      upstream="triton-lang/triton#8322", categories=frozenset({"codes", "scale", "nonfinite"}),
                      modes=frozenset({"interpret"}), interpreter_only=True,
                      example=lambda: example(f"{group} group, a tie", [[448.0, 400.0, 3.0]]),
                      shown_by="400 in a group with amax 448 (a tie: RNE 384, the interpreter 416)")

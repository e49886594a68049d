"""The faithful interpreter's patching helpers, importable by module (``fp8check.triton.faithful`` is also the
name of a function in ``fp8check.triton``, which hides the module of that name)."""

from fp8check.triton.faithful import _interp, _restore, _set

__all__ = ["_interp", "_restore", "_set"]

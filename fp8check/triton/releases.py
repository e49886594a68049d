"""What each supported Triton release's frontend accepts, where the releases differ, as data.

A kernel written for one release can fail to run under another before any of its arithmetic does: Triton
3.9.0 removed block pointers (``tl.make_block_ptr``/``tl.advance`` raise ``NotImplementedError('Block
pointers have been removed in favor of the tensor descriptor API')``, ``triton/language/core.py``), and
only 3.9.0 compiles a chained comparison (``triton/compiler/code_generator.py`` ``visit_Compare`` of 3.6.0
and 3.8.0: "simultaneous multiple comparison is not supported"). Read from the 3.6.0, 3.8.0 and 3.9.0
wheels.

While :func:`fp8check.triton.interpreting` is active, a launch that stops on a removed feature raises
:class:`TritonFeatureError` in one line naming the releases under which fp8check runs
the kernel, instead of Triton's ``InterpreterError`` wrapping a ``NotImplementedError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fp8check.errors import FP8CheckError
from fp8check.patching import PatchScope
from fp8check.triton.layer import Layer, installed_triton_version


class TritonFeatureError(FP8CheckError, RuntimeError):
    """The kernel uses a language feature the installed Triton does not run (and another supported one does)."""

__all__ = ["FrontendFeature", "FEATURES", "TritonFeatureError", "accepting", "feature_named", "explain", "LAYER"]


@dataclass(frozen=True, kw_only=True)
class FrontendFeature:
    """A language form some supported releases run and others refuse."""

    name: str  # what the kernel uses, as a user would name it
    releases: tuple[str, ...]  # the supported releases that run it
    refusal: str  # the message of the others' error (how a launch that stops on it is recognised)
    source: str  # where the releases' behaviour was read
    raised_in: str = ""  # the function the refusal comes from, where its message alone is not specific


FEATURES = (
    FrontendFeature(name="block pointers (tl.make_block_ptr, tl.advance)", releases=("3.6.0", "3.8.0"),
                    refusal="Block pointers have been removed in favor of the tensor descriptor API",
                    source="triton/language/core.py make_block_ptr and advance, 3.6.0, 3.8.0 and 3.9.0 wheels"),
    FrontendFeature(name="chained comparisons (a < b < c)", releases=("3.9.0",),
                    refusal="simultaneous multiple comparison is not supported",
                    source="triton/compiler/code_generator.py visit_Compare, 3.6.0, 3.8.0 and 3.9.0 wheels"),
    # 3.6.0's interpreter passes the format strings unwrapped to semantic.dot_scaled, which reads .value
    # (triton-lang/triton#6854), and its InterpreterBuilder has no create_dot_scaled (added by #10311)
    FrontendFeature(name="tl.dot_scaled", releases=("3.8.0", "3.9.0"),
                    refusal="'str' object has no attribute 'value'", raised_in="dot_scaled",
                    source="triton/language/semantic.py dot_scaled and runtime/interpreter.py, 3.6.0, 3.8.0 and "
                           "3.9.0 wheels"),
)


def feature_named(prefix: str) -> FrontendFeature:
    return next(f for f in FEATURES if f.name.startswith(prefix))


def accepting(feature: FrontendFeature, version: str | None = None) -> bool:
    """Whether Triton ``version`` (default: the installed one) runs ``feature``."""
    return (version or installed_triton_version()).split("+")[0] in feature.releases


def explain(exc: BaseException) -> Exception | None:
    """A one-line :class:`TritonFeatureError` for a launch that stopped on a feature the installed Triton
    removed (found anywhere in the exception's causes), or None."""
    found: tuple[FrontendFeature, BaseException] | None = None
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:  # the innermost cause that names a refusal
        seen.add(id(cause))
        for feature in FEATURES:
            if feature.refusal in str(cause) and not accepting(feature) and _raised_in(cause, feature.raised_in):
                found = (feature, cause)
        cause = cause.__cause__ or cause.__context__
    if found is None:
        return None
    feature, cause = found
    return TritonFeatureError(f"the kernel uses {feature.name}, which Triton {installed_triton_version()} does "
                              f"not run ({type(cause).__name__}: {feature.refusal}); fp8check runs it under "
                              f"Triton {' and '.join(feature.releases)}")


def _raised_in(exc: BaseException, function: str) -> bool:
    tb = exc.__traceback__
    while function and tb is not None:
        if tb.tb_frame.f_code.co_name == function:
            return True
        tb = tb.tb_next
    return not function


class _RemovedFeatures(Layer):
    """Launches that stop on a removed feature raise :func:`explain`'s error."""

    name = "removed language features in one line"
    triton_versions = ("3.6.0", "3.8.0", "3.9.0")

    def install(self, scope: PatchScope, interp: Any) -> None:
        ifn = interp.InterpretedFunction
        stock_run = ifn.__dict__["run"]

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return stock_run(self, *args, **kwargs)
            except Exception as exc:
                plain = explain(exc)
                if plain is None:
                    raise
            raise plain

        scope.set(ifn, "run", run)


LAYER = _RemovedFeatures()

"""Triton FP8 kernels on a CPU, with the FP8 semantics of a chosen GPU.

``fp8check.triton`` runs a Triton kernel in Triton's interpreter with every
FP8 conversion replaced by fp8check's exact reference under a named target
(``sm90``, ``sm89``, ``sm100``, ``gfx942``, ``gfx950``)::

    import fp8check.triton as ft

    with ft.faithful("gfx942"):                      # MI300: fnuz types work here
        ft.interpreted(quantize_kernel)[grid](x, y, n, BLOCK=1024)

- :func:`faithful` — the context manager (see :mod:`.interpreter_mode`);
- :func:`interpreted` — the interpreted twin of a ``@triton.jit`` kernel
  (no ``TRITON_INTERPRET`` to remember); :func:`interpreting` — interpreter
  mode for a whole block (a user's Python function that launches kernels);
- :func:`faithful_fixture` — a pytest fixture that does both;
- :mod:`.targets` — what compiled Triton does per target, as data;
- :func:`watch`, :func:`uses_unpatched_interpreter`,
  :func:`interpreter_active` — to tell a user that an unpatched
  interpreter run is happening (:data:`UNPATCHED_WARNING`).
"""

from __future__ import annotations

from typing import Any

from fp8check.triton import targets
from fp8check.triton.interpreter_mode import (
    SUPPORTED_TRITON_VERSIONS,
    UNPATCHED_WARNING,
    InterpretedKernel,
    TritonUnavailableError,
    TritonVersionError,
    UnsupportedConversionError,
    Watch,
    active_target,
    check_triton_version,
    decode_for_target,
    encode_for_target,
    faithful,
    interpreted,
    interpreter_active,
    interpreting,
    is_patched,
    triton_version,
    uses_unpatched_interpreter,
    watch,
)
from fp8check.triton.releases import TritonFeatureError
from fp8check.triton.targets import TARGETS, Target, UnknownTargetError

__all__ = [
    "faithful", "interpreted", "interpreting", "faithful_fixture", "targets", "TARGETS", "Target",
    "SUPPORTED_TRITON_VERSIONS", "TritonVersionError", "TritonUnavailableError", "UnsupportedConversionError",
    "UnknownTargetError", "interpreter_active", "uses_unpatched_interpreter", "watch", "Watch",
    "UNPATCHED_WARNING", "active_target", "is_patched", "check_triton_version", "triton_version",
    "encode_for_target", "decode_for_target", "InterpretedKernel", "get_target", "TritonFeatureError",
]


def get_target(name: object) -> Target:
    """The target ``name`` (``sm90``, ``sm89``, ``sm100``, ``gfx942``, ``gfx950``)."""
    return targets.get(name)


def faithful_fixture(target: str = "sm90", *, strict: bool = True, name: str | None = None) -> Any:
    """A pytest fixture running the test inside ``faithful(target)`` and
    interpreter mode. In a ``conftest.py``::

        from fp8check.triton import faithful_fixture
        mi300 = faithful_fixture("gfx942")

        def test_quantizer(mi300):        # the fixture yields the Target
            quantize[grid](x, y, ...)      # interpreted, gfx942 FP8 semantics

    A Triton version the patch was not tested with fails the test in one line.
    """
    import pytest

    targets.get(target)  # an unknown target fails at collection

    def fixture() -> Any:
        with interpreting(), faithful(target, strict=strict) as t:
            yield t

    fixture.__name__ = name or f"faithful_{target}"
    return pytest.fixture(name=name)(fixture) if name else pytest.fixture(fixture)

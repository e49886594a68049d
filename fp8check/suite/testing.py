"""The shipped property suite as a test class of the user's own.

    TestMyCast = fp8check.kernel_tests(fp8check.cast_kernel(my_cast, format="e4m3fnuz", profile="satfinite"))

For those who want neither ``[tool.fp8check]`` nor a conftest hook: the class
holds every property of :mod:`fp8check.suite.properties` that applies to the
kernels given (a cast gets the whole check and the hazard, sweep and
Hypothesis properties; a quantizer or a fused kernel its whole check), and
the pytest plugin parametrizes them with those kernels only. The test ids,
markers (``fnuz``, ``ocp``, ``e4m3fn``, ``gpu``, ...) and reports are the
plugin's.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from fp8check.errors import InvalidValueError

_MODULES = ("test_declared", "test_casts", "test_hazards", "test_float64", "test_device_sweep")


def kernel_tests(*declarations: Any, name: str = "KernelTests") -> type:
    """A pytest test class running the shipped suite on ``declarations``
    (:func:`fp8check.cast_kernel`, :func:`fp8check.quantizer_kernel`,
    :func:`fp8check.fused_kernel`). Assign it to a module-level name that
    starts with ``Test`` so that pytest collects it."""
    from fp8check.declarations import KernelDeclaration, first_duplicate
    from fp8check.plugin import _FIXTURES, build_targets, register_generic_markers_of_current_session

    if not declarations:
        raise InvalidValueError("kernel_tests() needs at least one declaration (fp8check.cast_kernel(...), ...)")
    for d in declarations:
        if not isinstance(d, KernelDeclaration):
            raise InvalidValueError(f"kernel_tests() takes declarations (fp8check.cast_kernel(fn, ...), ...), "
                                    f"not {type(d).__name__}")
    duplicate = first_duplicate([d.name for d in declarations])
    if duplicate:
        raise InvalidValueError(f"two kernels given to kernel_tests() are named {duplicate!r}: give one a name=")
    # The suite's modules carry `exhaustive`, `gpu`, `slow` marks: registered before they are imported
    # (under --strict-markers) in the session importing this class, which runs fp8check's own tests.
    register_generic_markers_of_current_session()
    present = {fixture for fixture, targets in build_targets(declarations).items() if targets}
    namespace: dict[str, Any] = {"fp8check_declarations": tuple(declarations), "__doc__": __doc__.split("\n\n")[0]}
    for module_name in _MODULES:
        module = importlib.import_module(f"fp8check.suite.properties.{module_name}")
        for attr, fn in vars(module).items():
            if not attr.startswith("test_") or not callable(fn):
                continue
            wanted = set(inspect.signature(fn).parameters) & set(_FIXTURES)
            if wanted and wanted <= present:
                namespace[attr] = staticmethod(fn)
    return type(name, (), namespace)

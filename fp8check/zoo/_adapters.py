"""Small helpers the zoo's adapter modules share."""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable

from fp8check.zoo import ZooUnavailable

__all__ = ["import_package", "import_skipping_init", "lazy", "example"]


def import_package(name: str, package: str, hint: str = "") -> Any:
    """Import ``name``; any failure becomes :class:`ZooUnavailable` with the exact error line."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a package import can fail in many ways: report it, do not crash
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ZooUnavailable(f"{package}: import {name} failed: {type(exc).__name__}: {first}"
                             + (f" ({hint})" if hint else "")) from None


def import_skipping_init(name: str, root: str, package: str, hint: str = "") -> Any:
    """Import ``name`` from the package ``root`` without running ``root/__init__.py``: packages whose
    top-level import loads a GPU runtime (AMD aiter reads the ROCm version, ``fbgemm_gpu`` loads its CUDA
    library) hold Triton kernels in plain submodules that import without it. ``root`` is found on
    ``sys.path`` (an unpacked wheel, e.g. ``pip download --no-deps`` + unzip) and stands in
    ``sys.modules`` as a bare package (its ``__path__`` only); no line of the package is changed."""
    import importlib.util
    import sys
    import types

    if root not in sys.modules:
        try:
            spec = importlib.util.find_spec(root)
        except Exception:  # a broken or partial install: say so below
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise ZooUnavailable(f"{package}: no package {root!r} on sys.path" + (f" ({hint})" if hint else ""))
        bare = types.ModuleType(root)
        bare.__path__ = list(spec.submodule_search_locations)
        bare.__spec__ = spec
        bare.__file__ = spec.origin
        sys.modules[root] = bare
    return import_package(name, package, hint)


_LOCK = threading.Lock()
_BUILT: dict[tuple[Any, str], Callable[..., Any]] = {}


def lazy(factory: Callable[..., Callable[..., Any]], mode: str, name: str) -> Callable[..., Any]:
    """A module-level kernel ``name`` (what ``fp8check check MODULE:NAME`` loads) that builds
    ``factory(mode=mode)`` on its first call."""

    def kernel(*args: Any) -> Any:
        with _LOCK:
            key = (factory, mode)
            if key not in _BUILT:
                _BUILT[key] = factory(mode=mode)
            built = _BUILT[key]
        return built(*args)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


def example(name: str, rows: list[list[float]], *, shape: tuple[int, int] | None = None,
            dtype: str = "float32") -> Any:
    """A :class:`~fp8check.quantizers.cases.QuantCase` for a known issue: ``rows``
    written into the top-left corner of a zero tensor of ``shape`` (default:
    the rows padded with zeros to 128 columns), values rounded to ``dtype``."""
    import numpy as np

    from fp8check.quantizers.cases import QuantCase, to_dtype

    width = max(len(r) for r in rows)
    m, n = shape if shape is not None else (len(rows), max(128, -(-width // 128) * 128))
    x = np.zeros((m, n), dtype=np.float32)
    for i, r in enumerate(rows):
        x[i, : len(r)] = np.asarray(r, dtype=np.float64).astype(np.float32)
    return [QuantCase(name=name, x=to_dtype(x, dtype), dtype=dtype)]

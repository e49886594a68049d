"""Small helpers the zoo's adapter modules share."""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable

from fp8check.zoo import ZooUnavailable

__all__ = ["import_package", "lazy", "example"]


def import_package(name: str, package: str, hint: str = "") -> Any:
    """Import ``name``; any failure becomes :class:`ZooUnavailable` with the exact error line."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a package import can fail in many ways: report it, do not crash
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ZooUnavailable(f"{package}: import {name} failed: {type(exc).__name__}: {first}"
                             + (f" ({hint})" if hint else "")) from None


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

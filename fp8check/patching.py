"""The one patch scope: attributes of Triton or torch replaced for a while, and put back.

Every layer that patches a third-party object (the faithful interpreter's
layers in :mod:`fp8check.triton`, the training capture) sets attributes
through a :class:`PatchScope` and restores them with it. A leaf: it imports
nothing of fp8check.
"""

from __future__ import annotations

import threading
from typing import Any, MutableMapping

__all__ = ["PatchScope", "LOCK"]

#: The one lock of the patching layers (re-entrant: a layer installed under it may open another).
LOCK = threading.RLock()

_MISSING = object()


class PatchScope:
    """Sets attributes (and mapping items), remembering each original; :meth:`restore` puts them back,
    the last set first. A class's own ``__dict__`` entry is what is remembered (an inherited attribute
    is deleted again, not copied onto the class; a staticmethod stays one)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, Any, Any, bool]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        old = obj.__dict__.get(name, _MISSING) if isinstance(obj, type) else getattr(obj, name, _MISSING)
        self._saved.append((obj, name, old, False))
        setattr(obj, name, value)

    def set_item(self, mapping: MutableMapping[Any, Any], key: Any, value: Any) -> None:
        self._saved.append((mapping, key, mapping.get(key, _MISSING), True))
        mapping[key] = value

    def restore(self) -> None:
        while self._saved:
            obj, name, old, item = self._saved.pop()
            if item:
                if old is _MISSING:
                    del obj[name]
                else:
                    obj[name] = old
            elif old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)

    def __len__(self) -> int:
        return len(self._saved)

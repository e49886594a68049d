"""A static look at a pickle: which globals would it import?

Before torch ever unpickles a file, the loader disassembles its pickle with
the standard library's :mod:`pickletools` (which only parses opcodes, never
imports or calls anything) and refuses the file if it names a global outside
torch's *default* weights-only safe set. This is a second lock in front of
``torch.load(weights_only=True)``, for two reasons:

- the refusal names the global (``posix.system``) in one line, before any
  unpickling starts;
- torch's safe set also holds whatever the running process allow-listed with
  ``torch.serialization.add_safe_globals`` (importing torchao does so for its
  tensor subclasses); fp8check refuses those regardless of what else is
  imported.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from dataclasses import dataclass
from typing import IO

# Opcodes that push a string onto the pickle stack.
_STRING_OPS = {
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
    "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
}
_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
# Opcodes that import through the copyreg extension registry: unresolvable here.
_EXT_OPS = {"EXT1", "EXT2", "EXT4"}
UNRESOLVED = "<unresolved STACK_GLOBAL>"


@dataclass(frozen=True)
class PickleScan:
    """Globals named by one or more pickles, in order of first appearance."""

    globals: tuple[str, ...]
    opcodes: frozenset[str]
    error: str = ""  # why the scan stopped early (malformed or truncated), if it did


def scan(stream: IO[bytes], *, count: int = 1) -> PickleScan:
    """Disassemble up to ``count`` consecutive pickles from ``stream``.

    A malformed or truncated pickle ends the scan with ``error`` set; the
    globals seen before that point are still reported (a refusal names
    them first).
    """
    names: dict[str, None] = {}
    ops: set[str] = set()
    try:
        _scan(stream, count, names, ops)
    except Exception as exc:  # pickletools raises ValueError; a broken stream anything
        return PickleScan(tuple(names), frozenset(ops), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return PickleScan(tuple(names), frozenset(ops))


def _scan(stream: IO[bytes], count: int, names: dict[str, None], ops: set[str]) -> None:
    for _ in range(count):
        recent: list[object] = []  # what the last pushes were (strings or None)
        memo: dict[int, object] = {}
        for opcode, arg, _pos in pickletools.genops(stream):
            name = opcode.name
            ops.add(name)
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                names.setdefault(f"{module}.{attr}", None)
                recent.append(None)
            elif name == "STACK_GLOBAL":
                if len(recent) >= 2 and all(isinstance(v, str) for v in recent[-2:]):
                    names.setdefault(f"{recent[-2]}.{recent[-1]}", None)
                else:
                    names.setdefault(UNRESOLVED, None)
                del recent[-2:]
                recent.append(None)
            elif name in _EXT_OPS:
                names.setdefault(f"<copyreg extension {arg}>", None)
                recent.append(None)
            elif name in _STRING_OPS:
                recent.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1] if recent else None
            elif name in _PUT_OPS:
                memo[int(arg)] = recent[-1] if recent else None
            elif name in _GET_OPS:
                recent.append(memo.get(int(arg)))
            elif name != "PROTO" and name != "FRAME":
                recent.append(None)
            if len(recent) > 64:
                del recent[:-8]


def scan_bytes(data: bytes, *, count: int = 1) -> PickleScan:
    return scan(io.BytesIO(data), count=count)


def torch_default_safe_globals() -> frozenset[str] | None:
    """The globals torch's weights-only unpickler allows by default, or None
    when this torch does not expose them (then torch alone guards the load)."""
    try:
        from torch import _weights_only_unpickler as wou

        return frozenset(wou._get_allowed_globals())
    except Exception:  # a torch without the (private) helper
        return None


def unsafe_globals(found: PickleScan, allowed: frozenset[str]) -> tuple[str, ...]:
    """The globals of ``found`` outside ``allowed``, in order."""
    return tuple(g for g in found.globals if g not in allowed)


# -- storages declared by a torch zip pickle ------------------------------------------


class _Stub:
    """Stands in for every global a pickle names and every object it builds:
    calling, indexing or setting state on one does nothing and makes another."""

    _qualname = "stub"

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> _Stub:
        return _Stub()

    def __setstate__(self, state: object) -> None:
        pass

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def __getattr__(self, name: str) -> _Stub:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()


class _StorageScanner(pickle.Unpickler):
    """Runs a torch data.pkl with every global replaced by a stub class
    (nothing is imported or called) to collect the storages it declares."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.storages: list[tuple[str, str, int]] = []  # (storage type, key, numel)

    def find_class(self, module: str, name: str) -> type:
        full = f"{module}.{name}"
        return type("Stub", (_Stub,), {"_qualname": full})

    def persistent_load(self, pid: object) -> object:
        if isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage":
            kind = getattr(pid[1], "_qualname", str(pid[1]))
            self.storages.append((str(kind), str(pid[2]), int(pid[4])))
        return _Stub()


def declared_storages(data: bytes) -> list[tuple[str, str, int]]:
    """(storage type, record key, element count) of every storage a torch zip
    pickle declares. Raises ``pickle.UnpicklingError``/``ValueError``/... on a
    malformed pickle."""
    scanner = _StorageScanner(data)
    scanner.load()
    return scanner.storages


def storage_itemsize(kind: str) -> int | None:
    """Bytes per element of a storage type named in a torch pickle (UntypedStorage: 1)."""
    if kind.endswith("UntypedStorage"):
        return 1
    try:
        import torch
        from torch.storage import _dtype_to_storage_type_map

        for dtype, name in _dtype_to_storage_type_map().items():
            if kind in (f"torch.{name}", name):
                return torch.empty((), dtype=dtype).element_size()
    except Exception:
        return None
    return None

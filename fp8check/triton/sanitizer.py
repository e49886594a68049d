"""Memory-safe interpretation: every load and store of an interpreted kernel checked, hints checked.

What compute-sanitizer (memcheck, initcheck, racecheck) does on a GPU, done with the interpreter's
concrete addresses (no solver). While :func:`fp8check.triton.interpreting` is active:

- every ``tl.load``/``tl.store`` lane (atomics and tensor-descriptor accesses too) is checked against
  the allocation (torch storage) of the tensor argument its pointer was derived from (carried through
  ``ptr + offsets``, splats, broadcasts, reshapes); a pointer of unknown origin (a ``tl.where`` of two
  pointers, a pointer loaded from memory) is checked lane by lane against every tensor argument of the
  launch. A lane outside is an ``out_of_bounds`` fault and is **not performed** (a load gives ``other``
  or 0, a store writes nothing), so no kernel can write into, or read from, memory that is not its
  tensors': the process that checks it cannot be corrupted;
- a load of bytes of a ``torch.empty``-family allocation (made inside the block: the launcher's
  outputs and scratch buffers) that nothing has written yet is an ``uninitialised`` read. Bytes count
  as written once an interpreted store (of any launch) wrote them, or once torch wrote to the tensor
  (its version counter moved: ``zero_()``, ``copy_()``, an autotuner's ``reset_to_zero``);
- two programs of one launch storing different bytes to one address is a ``race``: on a GPU, which
  store lands last depends on scheduling (atomics are not races);
- a false ``tl.assume``, ``tl.multiple_of`` or ``tl.max_contiguous`` is a ``false_hint`` (undefined
  behaviour once compiled: the compiler optimises on it) and a failing ``tl.device_assert`` a
  ``device_assert`` fault. Triton's interpreter stops the kernel at the first (``AssertionError('Assume
  failed')``); here each is reported and the kernel goes on.

Each fault names the kernel, its file:line, the program id, the tensor argument and element offsets
into it (and the autotune config, :mod:`.launch`). Faults are collected by :func:`collect` blocks;
outside one they are still suppressed, only not reported.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import linecache
import os
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from fp8check.patching import LOCK, PatchScope
from fp8check.triton import alignment, launch
from fp8check.triton.layer import BuilderOps, Layer, interpreter

__all__ = ["KernelFault", "FAULT_KINDS", "collect", "Collected"]

#: The kinds of fault, in the order a report lists them (also result categories).
FAULT_KINDS = ("out_of_bounds", "uninitialised", "race", "false_hint", "device_assert", "compile_error")

_KEY = "fp8check.buffer"  # TensorHandle.attr key: the buffer a pointer was derived from
_LOCK = LOCK
_HERE = os.path.dirname(os.path.abspath(__file__))
_MAX_FAULTS = 200  # distinct (kind, site, buffer, config) faults kept per collect block


@dataclass(frozen=True)
class KernelFault:
    """One fault of an interpreted kernel: where, in which program, on which tensor."""

    kind: str
    kernel: str
    site: str  # "file.py:LINE" of the kernel source
    program: tuple[int, int, int]
    buffer: str  # the tensor argument's name ("" where unknown)
    offsets: tuple[int, ...]  # the first element offsets concerned (into that tensor)
    detail: str
    count: int = 1  # lanes (or events) concerned, summed over launches
    config: str = ""  # the autotune config label, where the kernel is autotuned

    @property
    def message(self) -> str:
        offs = ""
        if self.offsets:
            shown = ", ".join(str(o) for o in self.offsets[:6]) + (", ..." if len(self.offsets) > 6 else "")
            offs = f" at element offsets [{shown}]"
        where = f"; tensor {self.buffer!r}" if self.buffer else ""
        conf = f" [config {self.config}]" if self.config else ""
        return (f"{self.kernel} {self.site}: program {self.program}{conf}: {self.detail}{where}{offs} "
                f"({self.count:,} lane{'s' if self.count != 1 else ''})")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "program": list(self.program), "offsets": list(self.offsets),
                "message": self.message}


@dataclass
class Collected:
    """What a :func:`collect` block saw: faults, merged by kind, site, buffer and config."""

    faults: list[KernelFault] = field(default_factory=list)
    _index: dict[tuple[str, str, str, str], int] = field(default_factory=dict, repr=False)

    def add(self, fault: KernelFault) -> None:
        key = (fault.kind, fault.site, fault.buffer, fault.config)
        i = self._index.get(key)
        if i is not None:
            old = self.faults[i]
            self.faults[i] = dataclasses.replace(old, count=old.count + fault.count)
        elif len(self.faults) < _MAX_FAULTS:
            self._index[key] = len(self.faults)
            self.faults.append(fault)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.faults:
            out[f.kind] = out.get(f.kind, 0) + f.count
        return out


_COLLECTORS: list[Collected] = []


@contextlib.contextmanager
def collect() -> Iterator[Collected]:
    """Collect the faults of the kernels interpreted inside the block."""
    c = Collected()
    with _LOCK:
        _COLLECTORS.append(c)
    try:
        yield c
    finally:
        with _LOCK:
            _COLLECTORS.remove(c)


# -- where in the kernel ----------------------------------------------------------------


def _kernel_frame() -> Any:
    """The innermost frame of user code: the kernel (or its helper) line that made the access."""
    import triton

    skip = (os.path.dirname(os.path.abspath(triton.__file__)), _HERE, os.path.dirname(np.__file__),
            os.path.dirname(contextlib.__file__))
    f = sys._getframe(2)
    while f is not None:
        if not os.path.abspath(f.f_code.co_filename).startswith(skip):
            return f
        f = f.f_back
    return None


def _site(frame: Any) -> str:
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _builder() -> Any:
    return interpreter().interpreter_builder


def _program() -> tuple[int, int, int]:
    idx = getattr(_builder(), "grid_idx", None)
    return tuple(int(i) for i in idx) if idx is not None else (0, 0, 0)  # type: ignore[return-value]


def _grid() -> tuple[int, int, int]:
    return tuple(getattr(_builder(), "grid_dim", None) or (1, 1, 1))  # type: ignore[return-value]


def _linear(program: tuple[int, int, int]) -> int:
    dim = _grid()
    return int(program[0] + program[1] * dim[0] + program[2] * dim[0] * dim[1])


def _unlinear(p: int) -> tuple[int, int, int]:
    dim = _grid()
    return (p % dim[0], (p // dim[0]) % dim[1], p // (dim[0] * dim[1]))


def _source_line(frame: Any) -> str:
    """The statement on the frame's line, without its comment."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    try:
        return ast.unparse(ast.parse(line.rstrip(":")))
    except SyntaxError:
        return line


def _values_on_line(frame: Any) -> str:
    """The frame's statement with ``name=value`` for the kernel variables it names (what a hint was about)."""
    if frame is None:
        return ""
    line = _source_line(frame)
    try:
        names = sorted({n.id for n in ast.walk(ast.parse(line)) if isinstance(n, ast.Name)})
    except SyntaxError:
        names = []
    shown = []
    for n in names:
        v = frame.f_locals.get(n)
        data = getattr(getattr(v, "handle", None), "data", None)
        if isinstance(data, np.ndarray) and data.size <= 8:
            flat = data.reshape(-1).tolist()
            shown.append(f"{n}={flat[0] if data.size == 1 else flat}")
        elif isinstance(data, np.ndarray):
            flat = data.reshape(-1)
            shown.append(f"{n}=[{', '.join(str(x) for x in flat[:4].tolist())}, ...] ({data.size} values)")
        elif isinstance(getattr(v, "value", None), (int, float, bool)):  # a constexpr
            shown.append(f"{n}={v.value}")
        elif isinstance(v, (int, float, bool)):
            shown.append(f"{n}={v}")
    return f"`{line}`" + (f" with {', '.join(shown)}" if shown else "")


def _fault(kind: str, detail: str, *, buffer: str = "", offsets: Any = (), count: int = 1,
           program: tuple[int, int, int] | None = None, frame: Any = None) -> None:
    if not _COLLECTORS:
        return

    state = _LAUNCHES[-1] if _LAUNCHES else None
    frame = frame if frame is not None else _kernel_frame()
    fault = KernelFault(kind=kind, kernel=state.kernel if state else "?", site=_site(frame),
                        program=program if program is not None else _program(), buffer=buffer,
                        offsets=tuple(int(o) for o in list(offsets)[:8]), detail=detail, count=int(count),
                        config=launch.current_config())
    with _LOCK:
        for c in _COLLECTORS:
            c.add(fault)


# -- allocations whose bytes are not yet written ---------------------------------------


@dataclass
class _Fresh:
    """A ``torch.empty``-family allocation: which of its storage's bytes something has written."""

    ref: Any  # weakref to the tensor allocated
    version: int  # its version counter at allocation (torch's writes move it)
    written: np.ndarray  # bool per byte of the storage

    def live(self) -> bool:
        t = self.ref()
        return t is not None and int(t._version) == self.version


_FRESH: dict[int, _Fresh] = {}  # storage address -> allocation
_EMPTY_NAMES = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def _track(t: Any) -> None:
    try:
        if t.device.type != "cpu":
            return
        storage = t.untyped_storage()
        start, nbytes = int(storage.data_ptr()), int(storage.nbytes())
    except Exception:  # not a plain strided tensor
        return
    if not nbytes:
        return

    def forget(_: Any, start: int = start) -> None:
        entry = _FRESH.get(start)
        if entry is not None and entry.ref() is None:
            del _FRESH[start]

    _FRESH[start] = _Fresh(weakref.ref(t, forget), int(t._version), np.zeros(nbytes, bool))


def _allocation_mode() -> Any:
    """A torch function mode that records the ``torch.empty``-family tensors made while it is active."""
    import torch
    from torch.overrides import TorchFunctionMode

    class _AllocationWatch(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _EMPTY_NAMES and isinstance(out, torch.Tensor):
                _track(out)
            return out

    return _AllocationWatch()


# -- the tensors of a launch -------------------------------------------------------------


class _Buffer:
    """A tensor argument's storage; the shadow bytes of its stores in this launch (made on first store)."""

    def __init__(self, name: str, start: int, nbytes: int, tensor_start: int, itemsize: int,
                 fresh: _Fresh | None) -> None:
        self.name, self.start, self.nbytes = name, start, nbytes
        self.tensor_start, self.itemsize = tensor_start, itemsize
        self.fresh = fresh
        # int32 per byte: 1 + the linear program id of its last store, 0 none (zeros: a huge buffer's pages
        # are committed only where stored, fp8check.triton.virtual)
        self.writer: np.ndarray | None = None
        self.last: np.ndarray | None = None  # uint8 per byte: the byte last stored

    def elements(self, byte_offsets: np.ndarray) -> np.ndarray:
        """Element offsets into the tensor argument (in its own elements, from its first one)."""
        return (byte_offsets + self.start - self.tensor_start) // max(1, self.itemsize)


@dataclass
class _Launch:
    kernel: str
    buffers: list[_Buffer] = field(default_factory=list)

    def locate(self, addr: np.ndarray, size: int) -> np.ndarray:
        """Per lane, the index of the buffer holding all ``size`` bytes at ``addr``, or -1."""
        if not self.buffers:
            return np.full(addr.shape, -1, np.int64)
        order = sorted(range(len(self.buffers)), key=lambda i: self.buffers[i].start)
        starts = np.array([self.buffers[i].start for i in order], np.uint64)
        ends = np.array([self.buffers[i].start + self.buffers[i].nbytes for i in order], np.uint64)
        pos = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
        clipped = np.maximum(pos, 0)
        inside = (pos >= 0) & (addr + np.uint64(size) <= ends[clipped])
        return np.where(inside, np.array(order, np.int64)[clipped], -1)


_LAUNCHES: list[_Launch] = []


def _register(state: _Launch, name: str, arg: Any) -> None:
    if not hasattr(arg, "data_ptr") or not hasattr(arg, "untyped_storage"):
        return
    try:
        storage = arg.untyped_storage()
        start, nbytes = int(storage.data_ptr()), int(storage.nbytes())
        tensor_start, itemsize = int(arg.data_ptr()), int(arg.element_size())
    except Exception:  # not a plain strided tensor: its accesses are checked against the others
        return
    for b in state.buffers:
        if b.start == start and b.nbytes == nbytes:
            if name not in b.name.split("/"):
                b.name += f"/{name}"
            return
    fresh = _FRESH.get(start)
    if fresh is not None and (not fresh.live() or fresh.written.size != nbytes):
        del _FRESH[start]  # torch wrote to it (or it is gone): every byte counts as written
        fresh = None
    state.buffers.append(_Buffer(name, start, nbytes, tensor_start, itemsize, fresh))


# -- the checks ------------------------------------------------------------------------


def _itemsize(ptrs: Any) -> int:
    return max(1, int(ptrs.get_element_ty().primitive_bitwidth) // 8)


@dataclass
class _Access:
    """The lanes of one access that fall inside one buffer."""

    buf: _Buffer
    lanes: np.ndarray  # flat lane indices
    off: np.ndarray  # byte offsets of those lanes into the buffer


def _check(ptrs: Any, mask: Any, what: str) -> tuple[np.ndarray, list[_Access]]:
    """The mask with every lane outside its tensor off (each reported), and the lanes kept, per buffer."""
    state = _LAUNCHES[-1]
    addr = np.asarray(ptrs.data)
    shape = addr.shape
    flat = addr.reshape(-1).astype(np.uint64, copy=False)
    if mask is None:
        m = np.ones(flat.size, bool)
    else:
        m = np.asarray(mask if isinstance(mask, np.ndarray) else mask.data)  # 3.6's block pointers pass arrays
        m = (m if m.shape == shape else np.broadcast_to(m, shape)).reshape(-1).astype(bool, copy=False)
    size = _itemsize(ptrs)
    live = np.flatnonzero(m)
    buf = ptrs.attr.get(_KEY) if getattr(ptrs, "attr", None) else None
    if buf is not None and not any(b is buf for b in state.buffers):
        buf = None  # derived from a tensor of another launch
    at = flat[live]
    if buf is not None:  # the tensor it was derived from: anything else is out of bounds (even another tensor)
        off = (at - np.uint64(buf.start)).view(np.int64)
        bad = (at < np.uint64(buf.start)) | (off > buf.nbytes - size)
        accesses = [_Access(buf, live[~bad], off[~bad])] if not bad.all() else []
    else:
        where = state.locate(at, size)
        bad = where < 0
        accesses = []
        for i in np.unique(where[~bad]):
            b = state.buffers[int(i)]
            lanes = live[where == i]
            accesses.append(_Access(b, lanes, (flat[lanes] - np.uint64(b.start)).view(np.int64)))
    if bad.any():
        n = int(np.count_nonzero(bad))
        if buf is not None:
            elems = buf.elements(off[bad])
            n_elems = buf.nbytes // size
            _fault("out_of_bounds", f"{what} outside the tensor's storage ({n_elems:,} element"
                                    f"{'s' if n_elems != 1 else ''} of {size} byte{'s' if size != 1 else ''}; "
                                    f"not performed)",
                   buffer=buf.name, offsets=elems, count=n)
        else:
            _fault("out_of_bounds", f"{what} {n:,} lane{'s' if n != 1 else ''} at addresses inside no tensor "
                                    f"argument of the launch (not performed)", count=n)
        m = m.copy()
        m[live[bad]] = False
    return m.reshape(shape), accesses


def _bytes(off: np.ndarray, size: int) -> np.ndarray:
    return (off[:, None] + np.arange(size, dtype=np.int64)[None, :]).reshape(-1)


def _read(accesses: list[_Access], size: int, what: str) -> None:
    """Report lanes that read bytes of a fresh allocation nothing has written."""
    for a in accesses:
        fresh = a.buf.fresh
        if fresh is None:
            continue
        unwritten = ~fresh.written[_bytes(a.off, size)].reshape(-1, size).all(axis=1)
        if unwritten.any():
            elems = np.unique(a.buf.elements(a.off[unwritten]))
            _fault("uninitialised", f"{what} memory nothing has written (a torch.empty allocation)",
                   buffer=a.buf.name, offsets=elems, count=int(np.count_nonzero(unwritten)))


def _write(accesses: list[_Access], size: int, value: Any, shape: tuple[int, ...]) -> None:
    """Record stores: the written bytes of fresh allocations, and races between programs (``value`` None: an
    atomic, never a race)."""
    new_all = None
    if value is not None:
        data = np.asarray(value.data)
        if data.dtype.itemsize == size:
            new_all = np.broadcast_to(data, shape).reshape(-1)
    pid = _linear(_program())
    for a in accesses:
        bi = _bytes(a.off, size)
        if a.buf.fresh is not None:
            a.buf.fresh.written[bi] = True
        if new_all is None:
            continue
        b = a.buf
        if b.writer is None:
            b.writer, b.last = np.zeros(b.nbytes, np.int32), np.zeros(b.nbytes, np.uint8)
        new = np.ascontiguousarray(new_all[a.lanes]).view(np.uint8).reshape(-1)
        prev = b.writer[bi]
        clash = (prev > 0) & (prev != pid + 1) & (b.last[bi] != new)
        if clash.any():
            at = np.flatnonzero(clash)
            other = _unlinear(int(prev[at[0]]) - 1)
            elems = np.unique(b.elements(bi[at] - bi[at] % size))
            _fault("race", f"stores bytes that program {other} stored differently (0x{int(b.last[bi[at[0]]]):02x} "
                           f"there, 0x{int(new[at[0]]):02x} here): which lands last depends on scheduling",
                   buffer=b.name, offsets=elems, count=int(elems.size))
        b.last[bi] = new
        b.writer[bi] = pid + 1


def _storage_starts(handle: Any, addresses: np.ndarray) -> np.ndarray | None:
    """Per lane, the start of the storage a pointer's ``addresses`` point into: the tensor argument the
    pointer was derived from, else the one holding the lane; None when a lane lies in none."""
    if not _LAUNCHES:
        return None
    state = _LAUNCHES[-1]
    buf = (getattr(handle, "attr", None) or {}).get(_KEY)
    if buf is not None and any(b is buf for b in state.buffers):
        return np.full(addresses.shape, buf.start, np.uint64)
    where = state.locate(addresses.reshape(-1).astype(np.uint64), 1)
    if (where < 0).any():
        return None
    return np.array([b.start for b in state.buffers], np.uint64)[where].reshape(addresses.shape)


def _check_hint(kind: str, input: Any, values: Any) -> None:
    data = getattr(getattr(input, "handle", None), "data", None)
    if not isinstance(data, np.ndarray) or not np.issubdtype(data.dtype, np.integer):
        return
    vals = [values] if not isinstance(values, (list, tuple)) else list(values)
    vals = [int(getattr(v, "value", v)) for v in vals]
    arr = data.astype(np.int64).reshape(data.shape or (1,))
    step, base, values_are = 1, 0, "values"
    dtype = getattr(input, "dtype", None)
    if dtype is not None and dtype.is_ptr():
        # a pointer's divisibility is in bytes, its contiguity in elements; judged on the target's addresses
        step = max(1, int(dtype.element_ty.primitive_bitwidth) // 8)
        starts = _storage_starts(input.handle, arr)
        if starts is not None:
            arr, base = alignment.device_offsets(arr, starts), alignment.allocator().alignment
            values_are = "byte offsets into the storage"
    for axis, v in enumerate(vals[:arr.ndim]):
        if v <= 1:
            continue
        moved = np.moveaxis(arr, axis, -1)
        if kind == "multiple_of":
            # as Triton's axis analysis reads it: the first element of each contiguous run is divisible by v
            starts = np.ones(moved.shape, bool)
            starts[..., 1:] = np.diff(moved, axis=-1) != step
            what = f"tl.multiple_of(..., {v}) is false along axis {axis}"
            if base and base % v:
                bad = starts  # a storage starts at a multiple of `base` only
                what += f" on the target: a tensor's storage starts at a multiple of {base} bytes only"
            else:
                bad = starts & (moved % v != 0)
        else:
            n = moved.shape[-1]
            group = min(v, n)
            if n % group:
                continue
            runs = moved.reshape(moved.shape[:-1] + (n // group, group))
            bad = np.zeros(runs.shape, bool)
            bad[..., 1:] = np.diff(runs, axis=-1) != step
            bad = bad.reshape(moved.shape)
            what = f"tl.max_contiguous(..., {v}) is false along axis {axis}"
        if bad.any():
            frame = _kernel_frame()
            sample = moved[bad][:4].tolist()
            _fault("false_hint", f"{what}: {values_are} {sample} ({_values_on_line(frame)})",
                   count=int(np.count_nonzero(bad)), frame=frame)
            return


# -- installing ------------------------------------------------------------------------

class _SanitizerOps(BuilderOps):
    """The builder's memory ops and hints, checked (one method per interpreter op)."""

    def __init__(self, interp: Any) -> None:
        self.TensorHandle, self.int1 = interp.TensorHandle, interp.tl.int1

    def table(self) -> dict[str, Callable[..., Any]]:
        carry = functools.partial
        return {
            "create_masked_load": self.create_masked_load, "create_masked_store": self.create_masked_store,
            "create_addptr": carry(self.carry, 0), "create_splat": carry(self.carry, 1),
            "create_broadcast": carry(self.carry, 0), "create_expand_dims": carry(self.carry, 0),
            "create_reshape": carry(self.carry, 0), "create_trans": carry(self.carry, 0),
            "create_atomic_rmw": self.create_atomic_rmw, "create_atomic_cas": self.create_atomic_cas,
        }

    def install_ops(self, scope: PatchScope, builder: type) -> None:
        super().install_ops(scope, builder)
        # installed whether the builder has them or not (they replace Triton's stop at the first)
        scope.set(builder, "create_assume", self.bind("create_assume", None, self.create_assume))
        scope.set(builder, "create_assert", self.bind("create_assert", None, self.create_assert))

    def create_masked_load(self, inner: Any, builder: Any, ptrs: Any, mask: Any, other: Any, *rest: Any,
                           **kw: Any) -> Any:
        if _LAUNCHES:
            kept, accesses = _check(ptrs, mask, "loads")
            _read(accesses, _itemsize(ptrs), "loads")
            mask = self.TensorHandle(kept, self.int1)
        return inner(builder, ptrs, mask, other, *rest, **kw)

    def create_masked_store(self, inner: Any, builder: Any, ptrs: Any, value: Any, mask: Any, *rest: Any,
                            **kw: Any) -> Any:
        if _LAUNCHES:
            kept, accesses = _check(ptrs, mask, "stores")
            _write(accesses, _itemsize(ptrs), value, np.shape(ptrs.data))
            mask = self.TensorHandle(kept, self.int1)
        return inner(builder, ptrs, value, mask, *rest, **kw)

    def create_assume(self, inner: Any, builder: Any, condition: Any, *rest: Any, **kw: Any) -> Any:
        data = np.asarray(getattr(condition, "data", condition)).astype(bool)
        if not data.all():
            frame = _kernel_frame()
            _fault("false_hint", f"tl.assume is false: {_values_on_line(frame)}",
                   count=int(np.count_nonzero(~data)), frame=frame)
        return None

    def create_assert(self, inner: Any, builder: Any, condition: Any, message: Any = "", *rest: Any,
                      **kw: Any) -> Any:
        data = np.asarray(getattr(condition, "data", condition)).astype(bool)
        if not data.all():
            frame = _kernel_frame()
            lanes = np.flatnonzero(~data.reshape(-1))
            _fault("device_assert", f"tl.device_assert failed ({message}) on lanes {lanes[:6].tolist()}: "
                                    f"{_values_on_line(frame)}", count=int(lanes.size), frame=frame)
        return None

    @staticmethod
    def carry(source: int, inner: Any, builder: Any, *args: Any, **kw: Any) -> Any:
        """A pointer op: the result keeps the buffer its pointer operand (``args[source]``) came from."""
        out = inner(builder, *args, **kw)
        attr = getattr(args[source], "attr", None)
        if attr and _KEY in attr and hasattr(out, "attr"):
            out.attr[_KEY] = attr[_KEY]
        return out

    def create_atomic_rmw(self, inner: Any, builder: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any,
                          **kw: Any) -> Any:
        if _LAUNCHES:
            kept, accesses = _check(ptr, mask, "atomically updates")
            _read(accesses, _itemsize(ptr), "atomically updates")
            _write(accesses, _itemsize(ptr), None, np.shape(ptr.data))
            mask = self.TensorHandle(kept, self.int1)
        return inner(builder, op, ptr, val, mask, *rest, **kw)

    def create_atomic_cas(self, inner: Any, builder: Any, ptr: Any, cmp: Any, val: Any, *rest: Any,
                          **kw: Any) -> Any:
        if not _LAUNCHES:
            return inner(builder, ptr, cmp, val, *rest, **kw)
        kept, accesses = _check(ptr, None, "atomically compares and swaps")
        _read(accesses, _itemsize(ptr), "atomically compares and swaps")
        _write(accesses, _itemsize(ptr), None, np.shape(ptr.data))
        if kept.all():
            return inner(builder, ptr, cmp, val, *rest, **kw)
        # a compare-and-swap has no mask: perform the lanes inside only (the others give 0)
        shape = np.shape(ptr.data)
        sel = kept.reshape(-1)
        out = np.zeros(shape, dtype=np.asarray(cmp.data).dtype).reshape(-1)
        if sel.any():
            def part(h: Any) -> Any:
                return self.TensorHandle(np.ascontiguousarray(
                    np.broadcast_to(np.asarray(h.data), shape).reshape(-1)[sel]), h.dtype)

            out[sel] = np.asarray(inner(builder, part(ptr), part(cmp), part(val), *rest, **kw).data).reshape(-1)
        return self.TensorHandle(out.reshape(shape), cmp.dtype.scalar)


class _Sanitizer(Layer):
    """Every load, store and hint of an interpreted kernel checked (installed by ``interpreting()``)."""

    name = "sanitizer"
    triton_versions = ("3.6.0", "3.8.0", "3.9.0")

    def __init__(self) -> None:
        self.modes: list[Any] = []  # the torch function mode entered (records torch.empty allocations)

    def install(self, scope: PatchScope, interp: Any) -> None:
        _SanitizerOps(interp).install_ops(scope, interp.InterpreterBuilder)
        ge = interp.GridExecutor
        orig_call, orig_init = ge.__dict__["__call__"], ge.__dict__["_init_args_hst"]

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _launch(orig_call, self, *args, **kwargs)

        def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
            return _init_args(orig_init, self, args_dev, kwargs)

        scope.set(ge, "__call__", __call__)
        scope.set(ge, "_init_args_hst", _init_args_hst)
        scope.set(interp, "_implicit_cvt", functools.partial(_implicit_cvt, interp._implicit_cvt))
        scope.set(interp, "_patch_lang", functools.partial(_patch_lang, interp, interp._patch_lang))
        # tl.device_assert runs only in debug mode; the integer-overflow checks debug mode adds stay off
        opts = getattr(interp.interpreter_builder, "options", None)
        if opts is not None and dataclasses.is_dataclass(opts):
            new = dataclasses.replace(opts, debug=True, **({"sanitize_overflow": False}
                                                           if hasattr(opts, "sanitize_overflow") else {}))
            scope.set(interp.interpreter_builder, "options", new)
        try:
            mode = _allocation_mode()
        except ImportError:  # no torch: no tensors to allocate either
            return
        mode.__enter__()
        self.modes.append(mode)

    def remove(self, scope: PatchScope) -> None:
        while self.modes:
            self.modes.pop().__exit__(None, None, None)
        _FRESH.clear()
        scope.restore()


def _launch(orig_call: Any, executor: Any, *args: Any, **kwargs: Any) -> Any:
    """``GridExecutor.__call__``: one launch's tensors registered while it runs."""
    state = _Launch(kernel=getattr(executor.fn, "__name__", "kernel"))
    with _LOCK:
        _LAUNCHES.append(state)
    try:
        return orig_call(executor, *args, **kwargs)
    finally:
        with _LOCK:
            _LAUNCHES.remove(state)


def _init_args(orig_init: Any, executor: Any, args_dev: Any, kwargs: Any) -> Any:
    args_hst, kwargs_hst = orig_init(executor, args_dev, kwargs)
    if _LAUNCHES:
        state = _LAUNCHES[-1]
        for name, arg in list(zip(executor.arg_names, args_hst)) + list(kwargs_hst.items()):
            for i, item in enumerate(arg if isinstance(arg, tuple) else (arg,)):
                _register(state, name if not isinstance(arg, tuple) else f"{name}[{i}]",
                          getattr(item, "base", item))
    return args_hst, kwargs_hst


def _implicit_cvt(orig_cvt: Any, arg: Any) -> Any:
    """A tensor argument's pointer carries its buffer."""
    out = orig_cvt(arg)
    if _LAUNCHES and hasattr(arg, "data_ptr") and hasattr(out, "handle"):
        try:
            storage = int(arg.untyped_storage().data_ptr())
        except Exception:
            storage = None
        for b in _LAUNCHES[-1].buffers:
            if b.start == storage:
                out.handle.attr[_KEY] = b
                break
    return out


def _patch_lang(interp: Any, orig_patch: Any, fn: Any) -> Any:
    """``tl.multiple_of`` and ``tl.max_contiguous`` checked before they run."""
    scope = orig_patch(fn)
    langs = [v for v in fn.__globals__.values() if v is interp.tl or v is interp.tl.core]
    for lang in langs:
        for hint in ("multiple_of", "max_contiguous"):
            below = getattr(lang, hint, None)
            if below is None:
                continue

            def checked(input: Any, values: Any, *a: Any, _below: Any = below, _hint: str = hint,
                        **k: Any) -> Any:
                _check_hint(_hint, input, values)
                return _below(input, values, *a, **k)

            scope.set_attr(lang, hint, checked)
    return scope


LAYER = _Sanitizer()

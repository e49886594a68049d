"""Programs of a launch interpreted together: the faithful interpreter's fast path.

Triton's interpreter runs a kernel's Python body once per program of the
grid, so a quantizer launched over 10,000 rows runs its body 10,000 times,
and almost all of that time is Python overhead per op (the semantic layer's
type checks and broadcasts), not arithmetic. Here the programs of a launch
run in chunks: the body runs once per chunk, every value carrying one more
leading axis, one entry per program (or 1, for a value every program
shares). NumPy's broadcasting makes elementwise ops, fp8 conversions and
the target's op rules (:mod:`.ops`) work unchanged; the ops that take an axis
or a shape are shifted by one.

A chunk is run one program at a time instead (exactly as the stock loop
does, from the chunk's first program) whenever batching could make a
difference:

- control flow that differs between programs: ``if``/``while`` on a value,
  a ``range`` bound, an index that is not the same in every program;
- programs that communicate: a program loading what another program of the
  chunk stores, two programs storing to one element, an atomic, a load or
  store outside every tensor argument (the memory-safety checks of
  :mod:`.sanitizer` then see it program by program), a false ``tl.assume``
  or ``tl.device_assert`` (reported program by program; ``tl.multiple_of``
  and ``tl.max_contiguous`` are checked program by program inside the chunk);
- ops whose result could depend on the batch shape (float sums, scans,
  ``tl.dot`` and ``tl.dot_scaled`` run program by program inside the chunk;
  ``tl.histogram``, tensor descriptors and ``tl.device_print`` fall back).

Memory effects of an abandoned chunk are undone before its programs are
rerun, faults the sanitizer reported during it are dropped (the rerun
reports them again, once), and loads and stores go through whatever the
interpreter has installed (the sanitizer's checked versions) one program at
a time, with that program's id set, so every check sees what it sees in the
stock loop. Chunks run in program order, each to its end before the next,
as the stock loop runs programs: what a program sees of an earlier chunk's
stores is what it sees there. The outputs are bit-identical to the stock
loop's (``tests/triton_faithful/test_batched.py`` compares them kernel by
kernel, and the faithful and exhaustive tests run on this path).

:func:`sequential` turns it off for a block (``FP8CHECK_TRITON_BATCH=0`` for
a process); :func:`stats` counts what ran batched and what fell back
(``FP8CHECK_TRITON_BATCH_DEBUG=1`` prints the traceback of an error that made
a chunk fall back).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from fp8check.patching import LOCK, PatchScope
from fp8check.triton.layer import BuilderOps, Layer, installed_triton_version

__all__ = ["sequential", "enabled", "stats", "Stats", "SUPPORTED_TRITON_VERSIONS", "supported", "LAYER",
           "OUTER_LAYER"]

_LOCK = LOCK
_MAX_LANES = 1 << 21  # lanes of one value in a chunk (programs x elements per program), to bound memory
_FIRST_CHUNK = 64


class _Fallback(BaseException):
    """Raised inside a batched chunk: rerun the chunk one program at a time (a BaseException, so that the
    interpreter's ``except Exception`` around device-function calls lets it through)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Stats:
    """What the fast path did since the counter was made (see :func:`stats`)."""

    launches: int = 0
    programs: int = 0
    batched_programs: int = 0
    chunks: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)


_STATS: list[Stats] = []
_DISABLED = [0]


def enabled() -> bool:
    return not _DISABLED[0] and os.environ.get("FP8CHECK_TRITON_BATCH", "1").strip() not in ("0", "false", "no")


@contextlib.contextmanager
def sequential() -> Iterator[None]:
    """Interpret every program of a launch one at a time inside the block (Triton's own loop)."""
    with _LOCK:
        _DISABLED[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DISABLED[0] -= 1


@contextlib.contextmanager
def stats() -> Iterator[Stats]:
    """Count launches, programs run batched and the reasons of fallbacks inside the block."""
    s = Stats()
    _STATS.append(s)
    try:
        yield s
    finally:
        _STATS.remove(s)


def _count(attr: str, n: int = 1) -> None:
    for s in _STATS:
        setattr(s, attr, getattr(s, attr) + n)


def _count_fallback(reason: str) -> None:
    for s in _STATS:
        s.fallbacks[reason] = s.fallbacks.get(reason, 0) + 1


# -- the batch of programs being run ------------------------------------------------------


@dataclass
class _Buffer:
    start: int
    end: int
    owner: np.ndarray | None = None  # per element: -1 untouched in this chunk, program, -2 read by several
    written: np.ndarray | None = None
    itemsize: int = 0
    touched: list[np.ndarray] = field(default_factory=list)
    reads: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # loads not yet checked
    stored: bool = False  # stored to in this chunk


class _Batch:
    """The programs of one chunk: their grid indices, the memory they touched, how to undo their stores."""

    def __init__(self, grid_idx: np.ndarray, buffers: list[_Buffer]) -> None:
        self.grid_idx = grid_idx  # (P, 3)
        self.size = int(grid_idx.shape[0])
        self.buffers = buffers
        self.starts = np.array([b.start for b in buffers], dtype=np.uint64)
        self.undo: list[tuple[np.ndarray, np.ndarray, np.ndarray, Any]] = []
        self.lanes = 0  # the most lanes one program used in one value

    def program_ids(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(np.arange(self.size, dtype=np.int32).reshape((self.size,) + (1,) * (len(shape) - 1)),
                               shape)

    def reset(self) -> None:
        for b in self.buffers:
            for idx in b.touched:
                b.owner[idx] = -1
                b.written[idx] = False
            b.touched.clear()
            b.reads.clear()
            b.stored = False

    def check(self, addr: np.ndarray, active: np.ndarray, size: int, store: bool) -> None:
        """Fall back unless every active lane lies in one tensor argument and no program of the chunk
        touches an element another one stores (program order would matter). Loads of a tensor the chunk
        has not stored to are only noted; they are checked if a store to it follows."""
        if not active.any():
            return
        a = addr[active]
        if not self.buffers:
            raise _Fallback("pointer outside the tensor arguments")
        which = np.searchsorted(self.starts, a, side="right").astype(np.int64) - 1
        lo, hi = int(which.min()), int(which.max())
        if lo < 0:
            raise _Fallback("pointer outside the tensor arguments")
        prog = self.program_ids(addr.shape)[active]
        for w in range(lo, hi + 1):
            b = self.buffers[w]
            sel = None if lo == hi else which == w
            aw, pw = (a, prog) if sel is None else (a[sel], prog[sel])
            if aw.size == 0:
                continue
            off = (aw - np.uint64(b.start)).astype(np.int64)
            if (off + size > b.end - b.start).any():
                raise _Fallback("pointer outside the tensor arguments")
            if b.itemsize == 0:
                b.itemsize = size
            if b.itemsize != size or (off % size).any():
                raise _Fallback("one tensor accessed with two element sizes")
            idx = off // size
            if not store and not b.stored:
                b.reads.append((idx, pw))
                continue
            if b.owner is None:
                n = (b.end - b.start) // size
                b.owner, b.written = np.full(n, -1, np.int32), np.zeros(n, bool)
            for ridx, rp in b.reads:  # the loads before the chunk's first store to this tensor
                self._note_load(b, ridx, rp)
            b.reads.clear()
            if store:
                owner = b.owner[idx]
                if ((owner != -1) & (owner != pw)).any():
                    raise _Fallback("programs of a chunk touch an element one of them stores")
                b.owner[idx] = pw
                if (b.owner[idx] != pw).any():
                    raise _Fallback("two programs store to one element")
                b.written[idx] = True
                b.stored = True
                b.touched.append(idx)
            else:
                if (b.written[idx] & (b.owner[idx] != pw)).any():
                    raise _Fallback("a program loads what another one stores")
                self._note_load(b, idx, pw)

    @staticmethod
    def _note_load(b: _Buffer, idx: np.ndarray, p: np.ndarray) -> None:
        owner = b.owner[idx]
        new = np.where((owner == -1) | (owner == p), p, -2).astype(np.int32)
        b.owner[idx] = new
        b.owner[idx[b.owner[idx] != new]] = -2
        b.touched.append(idx)


_BATCHES: list[_Batch] = []
_GIVE_UP: dict[Any, int] = {}  # kernel -> launches in a row that fell back twice


def _batch() -> _Batch | None:
    return _BATCHES[-1] if _BATCHES else None


def _lead(h: Any) -> int:
    return int(np.shape(h.data)[0])


# -- installing ----------------------------------------------------------------------------

class _Batched(Layer):
    """The executor and the builder's shape ops (installed under the sanitizer's wrappers)."""

    name = "batched programs"
    triton_versions = ("3.9.0",)  # the interpreter this layer was written against; others run the stock loop
    optional = True

    def install(self, scope: PatchScope, interp: Any) -> None:
        _install_executor(interp, scope)
        _ShapeOps(interp).install_ops(scope, interp.InterpreterBuilder)
        _install_reduce(interp, scope)


class _BatchedOuter(Layer):
    """What must wrap every other patch: memory ops, hints and the language's scalar conversions."""

    name = "batched memory ops"
    triton_versions = _Batched.triton_versions
    optional = True

    def install(self, scope: PatchScope, interp: Any) -> None:
        _OuterOps(interp).install_ops(scope, interp.InterpreterBuilder)
        scope.set(interp, "_patch_lang", functools.partial(_patch_lang, interp, interp._patch_lang))


LAYER, OUTER_LAYER = _Batched(), _BatchedOuter()

#: The Triton releases whose interpreter this module was written against (others run the stock loop).
SUPPORTED_TRITON_VERSIONS = _Batched.triton_versions


def supported() -> bool:
    return LAYER.supports(installed_triton_version())


# -- the executor ---------------------------------------------------------------------------

_PATCHED_LANGS: list[set[int]] = []  # per launch under way: ids of the language modules patched for it


def _langs(fn: Any, interp: Any) -> set[int]:
    tl = interp.tl
    return {id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)}


def _install_executor(interp: Any, scope: PatchScope) -> None:
    ge = interp.GridExecutor
    stock_call = ge.__dict__["__call__"]

    def __call__(self: Any, *args_dev: Any, **kwargs: Any) -> Any:
        if not enabled():
            return stock_call(self, *args_dev, **kwargs)
        import triton

        argspec = inspect.getfullargspec(self.fn)
        kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
        args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
        for hook in self.pre_run_hooks:
            hook(*args_hst, **kwargs_hst)
        patch_scope = interp._patch_lang(self.fn)
        _PATCHED_LANGS.append(_langs(self.fn, interp))
        try:
            args = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
            args = {name: arg if name in self.constexprs else interp._implicit_cvt(arg) for name, arg in args.items()}
            grid = self.grid(args) if callable(self.grid) else self.grid
            assert len(grid) <= 3, "grid must have at most 3 dimensions"
            grid = tuple(grid) + (1, ) * (3 - len(grid))
            interp.interpreter_builder.set_grid_dim(*grid)
            try:
                _run_grid(self, interp, args, args_hst, kwargs_hst, grid)
            except Exception as e:
                if triton.knobs.compilation.front_end_debugging:
                    raise
                raise interp.InterpreterError(repr(e)) from e
        finally:
            _PATCHED_LANGS.pop()
            patch_scope.restore()
        self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    scope.set(ge, "__call__", __call__)

    ifn = interp.InterpretedFunction
    stock_device_call = ifn.__dict__["__call__"]

    def device_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        # A device function (tl.max, a kernel's helper) re-patches triton.language at every call, which took
        # a third of the interpretation time; within a launch the modules it would patch are patched already.
        if not _PATCHED_LANGS or not _langs(self.fn, interp) <= _PATCHED_LANGS[-1]:
            return stock_device_call(self, *args, **kwargs)
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interp.InterpreterError(repr(e)) from e

    scope.set(ifn, "__call__", device_call)


def _tensor_buffers(args_hst: list[Any], kwargs_hst: dict[str, Any]) -> list[_Buffer]:
    seen: dict[int, _Buffer] = {}

    def visit(a: Any) -> None:
        if isinstance(a, tuple):
            for x in a:
                visit(x)
            return
        base = getattr(a, "base", a) if type(a).__name__ == "TensorWrapper" else a
        if not hasattr(base, "untyped_storage"):
            return
        try:
            st = base.untyped_storage()
            start, n = int(st.data_ptr()), int(st.nbytes())
        except Exception:
            return
        if start not in seen or seen[start].end < start + n:
            seen[start] = _Buffer(start, start + n)

    for a in list(args_hst) + list(kwargs_hst.values()):
        visit(a)
    bufs = sorted(seen.values(), key=lambda b: b.start)
    out: list[_Buffer] = []
    for b in bufs:  # overlapping storages (cannot happen for distinct storages, but be safe): merge
        if out and b.start < out[-1].end:
            out[-1].end = max(out[-1].end, b.end)
        else:
            out.append(b)
    return out


def _batched_args(args: dict[str, Any], interp: Any) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, interp.tl.tensor):
            d = np.asarray(v.handle.data)
            return interp.tl.tensor(interp.TensorHandle(d.reshape((1,) + d.shape), v.handle.dtype,
                                                        v.handle.attr), v.type)
        if isinstance(v, getattr(interp.tl.core, "tuple", ())) and not isinstance(v, tuple):
            raise _Fallback("tuple argument")
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return type(v)(conv(x) for x in v) if type(v) is tuple else v
        if type(v).__name__ in ("tensor_descriptor", "TensorDescHandle") or hasattr(v, "handle") and \
                type(getattr(v, "handle", None)).__name__ == "TensorDescHandle":
            raise _Fallback("tensor descriptor argument")
        return v

    return {k: conv(v) for k, v in args.items()}


def _grid_order(grid: tuple[int, int, int]) -> np.ndarray:
    gx, gy, gz = grid
    lin = np.arange(gx * gy * gz, dtype=np.int64)
    return np.stack([lin // (gy * gz), (lin // gz) % gy, lin % gz], axis=1)


def _staged() -> Any:
    """Hold back the faults the sanitizer reports during a chunk (replayed if the chunk completes)."""
    san = sys.modules.get("fp8check.triton.sanitizer")
    cols = getattr(san, "_COLLECTORS", None)
    if not cols:
        return contextlib.nullcontext(None)

    @contextlib.contextmanager
    def block() -> Iterator[Any]:
        saved = list(cols)
        stage = san.Collected()
        cols[:] = [stage]
        try:
            yield stage
        finally:
            cols[:] = saved

    return block()


def _sanitizer_sites() -> list[tuple[Any, Any]]:
    """The first-unwritten-read site the sanitizer keeps per tensor (restored when a chunk is abandoned)."""
    san = sys.modules.get("fp8check.triton.sanitizer")
    launches = getattr(san, "_LAUNCHES", None)
    if not launches:
        return []
    return [(b, getattr(b, "read_site", None)) for b in getattr(launches[-1], "buffers", ())]


def _replay(stage: Any) -> None:
    if stage is None:
        return
    san = sys.modules.get("fp8check.triton.sanitizer")
    for c in list(getattr(san, "_COLLECTORS", ())):
        for f in stage.faults:
            c.add(f)


def _run_grid(self: Any, interp: Any, args: dict[str, Any], args_hst: Any, kwargs_hst: Any,
              grid: tuple[int, int, int]) -> None:
    builder = interp.interpreter_builder
    order = _grid_order(grid)
    total = int(order.shape[0])
    _count("launches")
    _count("programs", total)

    def one_by_one(lo: int, hi: int) -> None:
        for x, y, z in order[lo:hi].tolist():
            builder.set_grid_idx(x, y, z)
            self.fn(**args)

    if total <= 1:
        one_by_one(0, total)
        return
    try:
        bargs = _batched_args(args, interp)
    except _Fallback as f:
        _count_fallback(f.reason)
        one_by_one(0, total)
        return
    if _GIVE_UP.get(self.fn, 0) >= 3:  # three launches in a row fell back: not worth trying
        _count_fallback("given up for this kernel")
        one_by_one(0, total)
        return
    buffers = _tensor_buffers(list(args_hst), kwargs_hst)
    start, chunk, fallbacks = 0, _FIRST_CHUNK, 0
    while start < total:
        stop = min(total, start + chunk)
        if stop - start == 1:
            one_by_one(start, stop)
            start = stop
            continue
        batch = _Batch(order[start:stop], buffers)
        builder.set_grid_idx(*order[start].tolist())
        sites = _sanitizer_sites()
        failed: BaseException | None = None
        try:
            with _staged() as stage:
                _BATCHES.append(batch)
                try:
                    self.fn(**bargs)
                finally:
                    _BATCHES.pop()
            _replay(stage)
            _count("batched_programs", stop - start)
            _count("chunks")
        except (_Fallback, Exception) as f:
            failed = f
        finally:
            batch.reset()
        if failed is None:
            fallbacks = 0
            _GIVE_UP.pop(self.fn, None)
        else:
            # anything a chunk cannot do batched (or an error it raised) is done the stock way, from the memory
            # as it was before the chunk: an error the stock loop raises too is raised there (outside this
            # handler, so that it does not carry the abandoned attempt as its context)
            _count_fallback(failed.reason if isinstance(failed, _Fallback) else f"error: {type(failed).__name__}")
            if os.environ.get("FP8CHECK_TRITON_BATCH_DEBUG") and not isinstance(failed, _Fallback):
                import traceback

                traceback.print_exception(failed)
            for ptrs, mask, old, _ in reversed(batch.undo):
                interp._interpreter.store(ptrs, old, mask)
            for b, site in sites:
                b.read_site = site
            failed = None
            fallbacks += 1
            one_by_one(start, stop)
            if fallbacks >= 2:  # this launch keeps falling back: the rest program by program
                _GIVE_UP[self.fn] = _GIVE_UP.get(self.fn, 0) + 1
                one_by_one(stop, total)
                return
        if batch.lanes:
            chunk = max(2, min(4096, _MAX_LANES // max(1, batch.lanes)))
        start = stop


# -- builder ops that take a shape or an axis ------------------------------------------------


@contextlib.contextmanager
def _swapped(pairs: list[tuple[Any, np.ndarray]]) -> Iterator[None]:
    """Run an inner builder method on handles whose data is replaced for the call (identity and attrs kept)."""
    saved = [(h, h.data) for h, _ in pairs]
    try:
        for h, d in pairs:
            h.data = d
        yield
    finally:
        for h, d in saved:
            h.data = d


class _ShapeOps(BuilderOps):
    """The builder ops that take a shape or an axis, shifted by the program axis inside a chunk (one method
    per interpreter op; outside a chunk each runs the method it replaces)."""

    _LEADING_ONE = ("get_int1", "get_uint8", "get_int8", "get_uint16", "get_int16", "get_uint32", "get_int32",
                    "get_uint64", "get_int64", "get_fp16", "get_fp32", "get_fp64", "get_null_value",
                    "get_all_ones_value", "create_get_num_programs", "create_make_range")
    _REFUSED = ("create_histogram", "create_make_tensor_descriptor", "create_descriptor_load",
                "create_descriptor_store", "create_descriptor_gather", "create_descriptor_scatter",
                "create_print", "create_inline_asm", "create_extern_elementwise")

    def __init__(self, interp: Any) -> None:
        self.tl, self.TensorHandle = interp.tl, interp.TensorHandle

    def table(self) -> dict[str, Callable[..., Any]]:
        ops: dict[str, Callable[..., Any]] = {name: self.leading_one for name in self._LEADING_ONE}
        ops.update({
            "create_get_program_id": self.create_get_program_id, "create_splat": self.create_splat,
            "create_unsplat": self.create_unsplat, "create_reshape": self.create_reshape,
            "create_trans": self.create_trans, "create_expand_dims": self.create_expand_dims,
            "create_broadcast": self.create_broadcast, "create_cat": self.create_cat,
            "create_join": self.create_join, "create_gather": self.create_gather, "create_dot": self.create_dot,
            "create_dot_scaled": self.create_dot,
        })
        ops.update({name: functools.partial(self.refuse, name.replace("create_", "")) for name in self._REFUSED})
        return ops

    def bind(self, name: str, inner: Callable[..., Any], op: Callable[..., Any]) -> Callable[..., Any]:
        try:
            signature = inspect.signature(inner)
        except (TypeError, ValueError):
            signature = None

        def wrapped(builder: Any, *args: Any, **kw: Any) -> Any:
            if not kw:
                return op(inner, builder, *args)
            if not _BATCHES or signature is None:
                return inner(builder, *args, **kw)
            bound = signature.bind(builder, *args, **kw)  # keywords (Triton's own callers use some) as positions
            return op(inner, *bound.args)

        wrapped.__name__ = wrapped.__qualname__ = name
        return wrapped

    @staticmethod
    def leading_one(inner: Any, builder: Any, *args: Any) -> Any:
        h = inner(builder, *args)
        if _BATCHES:
            data = np.asarray(h.data)
            h.data = data.reshape((1,) + data.shape)
        return h

    @staticmethod
    def create_get_program_id(inner: Any, builder: Any, axis: Any) -> Any:
        h = inner(builder, axis)
        b = _batch()
        if b is not None:
            h.data = b.grid_idx[:, int(axis)].astype(np.int32).reshape(b.size, 1)
        return h

    def create_splat(self, inner: Any, builder: Any, *args: Any) -> Any:
        if not _BATCHES:
            return inner(builder, *args)
        ret_ty, arg = args[0], args[-1]
        if isinstance(arg.dtype, self.tl.block_type):
            raise _Fallback("splat of a block")
        data = np.asarray(arg.data)
        lead, shape = data.shape[0], list(ret_ty.shape)
        wide = types.SimpleNamespace(shape=[lead] + shape, element_ty=ret_ty.element_ty)  # no power-of-2 check
        with _swapped([(arg, data.reshape((lead,) + (1,) * len(shape)))]):
            return inner(builder, wide, *args[1:-1], arg)

    @staticmethod
    def create_unsplat(inner: Any, builder: Any, arg: Any) -> Any:
        if not _BATCHES:
            return inner(builder, arg)
        data = np.asarray(arg.data)
        with _swapped([(arg, data[0])]):
            h = inner(builder, arg)
        h.data = data.reshape(data.shape[0], -1)[:, :1].copy()
        return h

    @staticmethod
    def create_reshape(inner: Any, builder: Any, arg: Any, shape: Any, *rest: Any) -> Any:
        if not _BATCHES:
            return inner(builder, arg, shape, *rest)
        return inner(builder, arg, [_lead(arg)] + list(shape), *rest)

    @staticmethod
    def create_trans(inner: Any, builder: Any, arg: Any, perm: Any) -> Any:
        if not _BATCHES:
            return inner(builder, arg, perm)
        return inner(builder, arg, [0] + [int(p) + 1 for p in perm])

    @staticmethod
    def create_expand_dims(inner: Any, builder: Any, arg: Any, axis: Any) -> Any:
        if not _BATCHES:
            return inner(builder, arg, axis)
        return inner(builder, arg, int(axis) + 1 if int(axis) >= 0 else int(axis))

    @staticmethod
    def create_broadcast(inner: Any, builder: Any, arg: Any, shape: Any) -> Any:
        if not _BATCHES:
            return inner(builder, arg, shape)
        return inner(builder, arg, [_lead(arg)] + list(shape))

    @staticmethod
    def _common(*hs: Any) -> list[np.ndarray]:
        lead = max(_lead(h) for h in hs)
        return [np.broadcast_to(np.asarray(h.data), (lead,) + np.shape(h.data)[1:]) for h in hs]

    def create_cat(self, inner: Any, builder: Any, lhs: Any, rhs: Any) -> Any:
        if not _BATCHES:
            return inner(builder, lhs, rhs)
        a, b = self._common(lhs, rhs)
        return self.TensorHandle(np.concatenate([a, b], axis=1), lhs.dtype.scalar)

    def create_join(self, inner: Any, builder: Any, lhs: Any, rhs: Any) -> Any:
        if not _BATCHES:
            return inner(builder, lhs, rhs)
        a, b = self._common(lhs, rhs)
        with _swapped([(lhs, a), (rhs, b)]):
            return inner(builder, lhs, rhs)

    def create_gather(self, inner: Any, builder: Any, src: Any, indices: Any, axis: Any) -> Any:
        if not _BATCHES:
            return inner(builder, src, indices, axis)
        a, b = self._common(src, indices)
        with _swapped([(src, a), (indices, b)]):
            return inner(builder, src, indices, int(axis) + 1)

    def create_dot(self, inner: Any, builder: Any, *args: Any) -> Any:
        """``tl.dot`` and ``tl.dot_scaled``: one product per program, as the stock loop computes it (a stacked
        matmul may sum in another order)."""
        if not _BATCHES:
            return inner(builder, *args)
        hs = [a for a in args if isinstance(a, self.TensorHandle)]
        lead = max(_lead(h) for h in hs)
        outs = []
        for i in range(lead):
            with _swapped([(h, np.asarray(h.data)[i if _lead(h) > 1 else 0]) for h in hs]):
                out = inner(builder, *args)
            outs.append(np.asarray(out.data))
        out.data = np.stack(outs)
        return out

    @staticmethod
    def refuse(reason: str, inner: Any, builder: Any, *args: Any, **kwargs: Any) -> Any:
        """An op whose result could depend on the batch: the chunk runs program by program."""
        if _BATCHES:
            raise _Fallback(reason)
        return inner(builder, *args, **kwargs)


# -- reductions and scans ----------------------------------------------------------------------


def _install_reduce(interp: Any, scope: PatchScope) -> None:
    tl = interp.tl
    TensorHandle = interp.TensorHandle
    reduce_ops, scan_ops = interp.ReduceOps, interp.ScanOps
    orig_reduce, orig_scan = reduce_ops.apply, scan_ops.apply
    std = tl.standard
    exact = {getattr(std, n, None) for n in (
        "_elementwise_max", "_elementwise_min", "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast",
        "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast")} - {None}

    def logical(t: Any) -> list[int]:
        return [int(s) for s in t.shape]

    def per_program(orig: Any, self: Any, tup: tuple) -> tuple:
        """The stock reduction on each program's slice (exactly the sequential computation)."""
        lead = max(_lead(t.handle) for t in tup)
        results: list[list[Any]] = []
        for i in range(lead):
            sl = tuple(tl.tensor(TensorHandle(np.asarray(t.handle.data)[i if _lead(t.handle) > 1 else 0],
                                              t.handle.dtype, t.handle.attr), t.type) for t in tup)
            results.append(list(orig(self, sl)))
        out = []
        for j, first in enumerate(results[0]):
            datas = np.stack([np.asarray(r[j].handle.data) for r in results])
            out.append(tl.tensor(TensorHandle(datas, first.handle.dtype), first.type))
        return tuple(out)

    def stacked(self: Any, tup: tuple, orig: Any) -> tuple:
        """A min/max/argmin/argmax over the program axis too (exact whatever the order)."""
        shape = logical(tup[0])
        lead = max(_lead(t.handle) for t in tup)
        axis, keep = self.axis, self.keep_dims
        datas = [np.broadcast_to(np.asarray(t.handle.data), (lead,) + tuple(shape)) for t in tup]
        if axis is None:
            datas = [d.reshape(lead, -1) for d in datas]
            shape_in, ax = [int(np.prod(shape))], 0
        else:
            shape_in, ax = shape, int(axis) % len(shape)
        proxy = copy.copy(self)
        proxy.axis, proxy.keep_dims = ax + 1, keep if axis is not None else False

        def to_tensor(ret: Any, dtype: Any) -> Any:
            arr = np.asarray(ret)
            np_dtype = interp._get_np_dtype(dtype)
            arr = arr.astype(np_dtype)
            rest = list(arr.shape[1:])
            if rest:
                return tl.core.tensor(TensorHandle(arr, dtype.scalar), tl.block_type(dtype, rest))
            return tl.core.tensor(TensorHandle(arr.reshape(arr.shape[0], 1), dtype.scalar), dtype)

        proxy.to_tensor = to_tensor
        ins = tuple(tl.tensor(TensorHandle(d, t.handle.dtype, t.handle.attr), tl.block_type(t.dtype, shape_in))
                    for d, t in zip(datas, tup))
        ret = proxy.apply_impl(ins)
        ret = tuple(ret) if isinstance(ret, (list, tuple)) else (ret,)
        if axis is None and keep:
            ret = tuple(tl.tensor(TensorHandle(np.asarray(r.handle.data).reshape((lead,) + (1,) * len(shape)),
                                               r.handle.dtype), tl.block_type(r.dtype, [1] * len(shape)))
                        for r in ret)
        return ret

    def reduce_apply(self: Any, input: Any) -> Any:
        if not _BATCHES:
            return orig_reduce(self, input)
        if not isinstance(input, tuple):
            return reduce_apply(self, (input,))[0]
        self.check_tensor(input)
        if not logical(input[0]):
            raise _Fallback("reduction of a scalar")
        if self.combine_fn in exact:
            return stacked(self, input, orig_reduce)
        return per_program(orig_reduce, self, input)

    def scan_apply(self: Any, input: Any) -> Any:
        if not _BATCHES:
            return orig_scan(self, input)
        if not isinstance(input, tuple):
            return scan_apply(self, (input,))[0]
        self.check_tensor(input)
        return per_program(orig_scan, self, input)

    scope.set(reduce_ops, "apply", reduce_apply)
    scope.set(scan_ops, "apply", scan_apply)


# -- the outermost layer: memory, hints, Python's view of values --------------------------------------


class _OuterOps(BuilderOps):
    """Memory ops, hints and atomics in a chunk: checked for what batching could change, then run program by
    program through whatever is installed below (the sanitizer's checked versions), each with its program id
    set."""

    def __init__(self, interp: Any) -> None:
        self.tl, self.TensorHandle = interp.tl, interp.TensorHandle
        self.stock_load = interp._interpreter.load
        self.ib = interp.interpreter_builder

    def table(self) -> dict[str, Callable[..., Any]]:
        ops: dict[str, Callable[..., Any]] = {
            "create_masked_load": self.create_masked_load, "create_masked_store": self.create_masked_store,
            "create_assume": functools.partial(self.condition, "assume"),
            "create_assert": functools.partial(self.condition, "assert"),
        }
        # outside the sanitizer's wrappers, which see one program
        ops.update({name: self.atomic for name in ("create_atomic_cas", "create_atomic_rmw", "create_atomic_poll",
                                                   "create_atomic_load", "create_atomic_store")})
        return ops

    @staticmethod
    def _full(b: _Batch, h: Any, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(np.asarray(h.data), (b.size,) + shape)

    def create_masked_load(self, inner: Any, builder: Any, ptrs: Any, mask: Any, other: Any, *rest: Any,
                           **kw: Any) -> Any:
        b = _batch()
        if b is None:
            return inner(builder, ptrs, mask, other, *rest, **kw)
        hs = [h for h in (ptrs, mask, other) if h is not None]
        shape = np.broadcast_shapes(*(np.shape(h.data)[1:] for h in hs))
        p = self._full(b, ptrs, shape)
        m = self._full(b, mask, shape).astype(bool) if mask is not None else np.ones(p.shape, bool)
        size = max(1, int(ptrs.get_element_ty().primitive_bitwidth) // 8)
        b.check(p, m, size, store=False)
        b.lanes = max(b.lanes, int(np.prod(shape)) if shape else 1)
        o = self._full(b, other, shape) if other is not None else None
        TensorHandle = self.TensorHandle

        def one(i: int) -> np.ndarray:
            args = [TensorHandle(p[i], ptrs.dtype, ptrs.attr), TensorHandle(m[i], self.tl.int1),
                    TensorHandle(o[i], other.dtype, other.attr) if o is not None else None]
            return np.asarray(inner(builder, *args, *rest, **kw).data)

        result = _per_program_calls(self.ib, b, one)
        return TensorHandle(np.stack(result), ptrs.get_element_ty())

    def create_masked_store(self, inner: Any, builder: Any, ptrs: Any, value: Any, mask: Any, *rest: Any,
                            **kw: Any) -> Any:
        b = _batch()
        if b is None:
            return inner(builder, ptrs, value, mask, *rest, **kw)
        hs = [h for h in (ptrs, value, mask) if h is not None]
        shape = np.broadcast_shapes(*(np.shape(h.data)[1:] for h in hs))
        p = np.ascontiguousarray(self._full(b, ptrs, shape))
        m = (np.ascontiguousarray(self._full(b, mask, shape).astype(bool)) if mask is not None
             else np.ones(p.shape, bool))
        v = self._full(b, value, shape)
        size = max(1, int(ptrs.get_element_ty().primitive_bitwidth) // 8)
        b.check(p, m, size, store=True)
        b.lanes = max(b.lanes, int(np.prod(shape)) if shape else 1)
        np_dtype = np.asarray(value.data).dtype
        old = self.stock_load(p, m, np.zeros(p.shape, np_dtype), np_dtype)
        b.undo.append((p, m, old, None))
        TensorHandle = self.TensorHandle

        def one(i: int) -> Any:
            return inner(builder, TensorHandle(p[i], ptrs.dtype, ptrs.attr),
                         TensorHandle(np.ascontiguousarray(v[i]), value.dtype, value.attr),
                         TensorHandle(m[i], self.tl.int1), *rest, **kw)

        _per_program_calls(self.ib, b, one)
        return None

    @staticmethod
    def condition(what: str, inner: Any, builder: Any, cond: Any, *rest: Any, **kw: Any) -> Any:
        """``tl.assume``/``tl.device_assert``: false in a program of the chunk, the chunk runs program by program
        (reported there, program by program)."""
        b = _batch()
        if b is not None and not np.asarray(getattr(cond, "data", cond)).all():
            raise _Fallback(f"{what} false in a program")
        return inner(builder, cond, *rest, **kw)

    @staticmethod
    def atomic(inner: Any, builder: Any, *args: Any, **kwargs: Any) -> Any:
        if _BATCHES:
            raise _Fallback("atomic")
        return inner(builder, *args, **kwargs)


def _per_program_calls(ib: Any, b: _Batch, fn: Any) -> list[Any]:
    """``fn(i)`` for each program ``i`` of the chunk, with its program id set on the interpreter's builder
    ``ib`` (the chunk's first one after)."""
    out = []
    for i in range(b.size):
        ib.set_grid_idx(*b.grid_idx[i].tolist())
        out.append(fn(i))
    ib.set_grid_idx(*b.grid_idx[0].tolist())
    return out


def _patch_lang(interp: Any, orig_patch: Any, fn: Any) -> Any:
    """Python's view of a value in a chunk (``__index__``, ``__bool__``, ``.T``) and the hints, program by
    program."""
    scope = orig_patch(fn)
    _patch_tensor(interp, scope)
    # identity, not ==: a NumPy array among the globals makes `in` ambiguous (ValueError)
    for lang in [v for v in fn.__globals__.values() if v is interp.tl or v is interp.tl.core]:
        for hint in ("multiple_of", "max_contiguous", "max_constancy"):
            below = getattr(lang, hint, None)
            if below is not None:
                scope.set_attr(lang, hint, functools.partial(_hinted, interp, below))
    return scope


def _hinted(interp: Any, below: Any, input: Any, values: Any, *a: Any, **k: Any) -> Any:
    b = _batch()
    if b is None or not isinstance(input, interp.tl.tensor):
        return below(input, values, *a, **k)
    data = np.asarray(input.handle.data)
    lead = data.shape[0]

    def one(i: int) -> Any:
        h = interp.TensorHandle(data[i if lead > 1 else 0], input.handle.dtype, input.handle.attr)
        return below(interp.tl.tensor(h, input.type), values, *a, **k)

    _per_program_calls(interp.interpreter_builder, b, one)
    return input


def _uniform(data: np.ndarray) -> np.ndarray:
    flat = data.reshape(data.shape[0], -1)
    if flat.shape[0] > 1 and not (flat == flat[0]).all():
        raise _Fallback("a value used by Python differs between programs")
    return flat[0]


def _patch_tensor(interp: Any, scope: Any) -> None:
    tl, TensorHandle = interp.tl, interp.TensorHandle
    tensor = tl.core.tensor
    below_index, below_bool = tensor.__dict__.get("__index__"), tensor.__dict__.get("__bool__")
    below_t = tensor.__dict__.get("T")

    def __index__(self: Any) -> int:
        if not _BATCHES:
            return below_index(self)
        return int(_uniform(np.asarray(self.handle.data)).squeeze())

    def __bool__(self: Any) -> bool:
        if not _BATCHES:
            return below_bool(self)
        data = np.asarray(self.handle.data)
        if data[0].size != 1:
            return True
        return bool(_uniform(data.astype(bool))[0])

    def transpose(self: Any) -> Any:
        if not _BATCHES:
            return below_t.fget(self)
        handle = TensorHandle(np.swapaxes(np.asarray(self.handle.data), -1, -2), self.handle.dtype)
        shape = list(self.type.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return tl.core.tensor(handle, tl.core.block_type(self.dtype, shape))

    if below_index is not None:
        scope.set_attr(tensor, "__index__", __index__)
    if below_bool is not None:
        scope.set_attr(tensor, "__bool__", __bool__)
    if isinstance(below_t, property):
        scope.set_attr(tensor, "T", property(transpose))

"""A launch past 2^31 elements, interpreted on a CPU without allocating it.

Index arithmetic that wraps only past 2^31 elements (``tl.program_id(0) * BLOCK`` in int32) is right on
every input a CPU test can afford. Here the huge call is made anyway, virtually:

- the input is a ``torch.empty`` of the huge shape: virtual memory, no page of it touched until read. Each
  load of the interpreted kernel first writes the bytes its lanes read, from the repeated tile the input
  stands for (byte ``b`` of the input is byte ``b mod len(tile)`` of the tile), so the kernel reads exactly
  what a materialised input would hold, and only those pages are ever committed;
- of each launch, only the last :data:`TAIL_PROGRAMS` programs (in the stock loop's order) are interpreted:
  the ones whose offsets pass 2^31 elements, where an int32 offset has wrapped. The executor loops over
  those only (a grid of that many programs), and the builder's ``set_grid_dim``/``set_grid_idx`` give each
  the real grid's dimensions and its real program ids, so the cost does not grow with the grid;
- the output is the launcher's own allocation (virtual too); only the elements the interpreted programs
  stored are judged (:meth:`VirtualCall.stored`); an access the wrapped offsets take outside every tensor is
  the sanitizer's ``out_of_bounds`` fault, as on a GPU an illegal address or another buffer's bytes.

The launcher may look at the input (shape, strides, ``contiguous()`` of a contiguous tensor, views), not
compute on it: a torch operation reading the whole input (``x.abs().max()``, a copy) raises
:class:`VirtualInputError` before it runs, and the call is reported as not made. Programs that read what
skipped programs write (a multi-pass kernel, a persistent grid) are outside what this models: casts are
elementwise, which is where :mod:`fp8check.casts.engine` uses it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from fp8check.errors import FP8CheckError
from fp8check.patching import LOCK, PatchScope
from fp8check.triton import batched
from fp8check.triton.layer import BuilderOps, Layer

__all__ = ["TAIL_PROGRAMS", "VirtualCall", "VirtualInputError", "virtual_call", "LAYER"]

#: Programs interpreted at the end of each launch: 4,096 elements past 2^31 in blocks of 64 or more.
TAIL_PROGRAMS = 64

_LOCK = LOCK

# torch operations a launcher may apply to the virtual input: metadata and views, nothing that reads it
_VIEWS = frozenset({
    "__get__", "__len__", "__hash__", "__index__", "contiguous", "is_contiguous", "view", "view_as", "reshape",
    "flatten", "unflatten", "squeeze", "unsqueeze", "expand", "expand_as", "as_strided", "detach", "narrow",
    "select", "__getitem__", "t", "transpose", "permute", "movedim", "unbind", "split", "chunk", "numel",
    "size", "stride", "dim", "ndimension", "element_size", "data_ptr", "storage_offset", "untyped_storage",
    "is_floating_point", "is_complex", "get_device", "new_empty", "new_empty_strided", "empty_like", "cpu",
    "to", "type", "__format__", "__repr__", "__dlpack_device__", "_is_view", "is_set_to", "has_names",
})


class VirtualInputError(FP8CheckError, RuntimeError):
    """The launcher computes on the virtual input (the huge call cannot be made without allocating it)."""


@dataclass
class VirtualCall:
    """One virtual call: its input, the launches' programs and the addresses the interpreted programs stored."""

    input: Any  # the torch tensor handed to the launcher
    data: np.ndarray = field(repr=False)  # its storage, as bytes (a view: writing it writes the input)
    tile_bytes: np.ndarray = field(repr=False)
    start: int  # the input's storage, in bytes
    end: int
    launches: int = 0
    programs_run: int = 0
    programs_total: int = 0
    _stored: list[np.ndarray] = field(default_factory=list, repr=False)

    def fill(self, addresses: np.ndarray, size: int) -> None:
        """Write the input bytes that lanes at ``addresses`` (``size`` bytes each) are about to read."""
        a = addresses[(addresses >= self.start) & (addresses < self.end)]
        if not a.size:
            return
        b = ((a - np.uint64(self.start)).astype(np.int64)[:, None] + np.arange(size)[None, :]).reshape(-1)
        b = np.unique(b[b < self.end - self.start])
        self.data[b] = self.tile_bytes[b % self.tile_bytes.size]

    def stored(self, codes: np.ndarray) -> np.ndarray:
        """The flat indices of ``codes`` (a view of the launcher's output) the interpreted programs stored."""
        if not self._stored:
            return np.zeros(0, np.int64)
        base, itemsize = int(codes.ctypes.data), codes.itemsize
        a = np.concatenate(self._stored)
        a = a[(a >= np.uint64(base)) & (a < np.uint64(base + codes.nbytes))]
        return np.unique((a - np.uint64(base)).astype(np.int64) // itemsize)

    def describe(self) -> str:
        return (f"the last {TAIL_PROGRAMS} programs of each launch ({self.programs_run:,} of "
                f"{self.programs_total:,} in {self.launches} launch{'es' if self.launches != 1 else ''}) "
                "interpreted over a virtual input")


_ACTIVE: list[VirtualCall] = []


def _guard() -> Any:
    """A torch function mode refusing operations that would read the virtual input."""
    import torch
    from torch.overrides import TorchFunctionMode

    class _Guard(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if _ACTIVE and getattr(func, "__name__", "") not in _VIEWS:
                v = _ACTIVE[-1]
                for a in list(args) + list((kwargs or {}).values()):
                    if isinstance(a, torch.Tensor) and v.start <= int(a.data_ptr()) < v.end:
                        name = getattr(func, "__qualname__", getattr(func, "__name__", str(func)))
                        raise VirtualInputError(
                            f"the launcher computes {name} on the whole input: the call past 2^31 elements "
                            "cannot be interpreted without allocating it")
            return func(*args, **(kwargs or {}))

    return _Guard()


@contextlib.contextmanager
def virtual_call(tile: Any, shape: tuple[int, ...]) -> Iterator[VirtualCall]:
    """A virtual input of ``shape`` holding the torch tensor ``tile`` repeated; inside the block, launches
    interpret their last programs only (see the module docstring)."""
    import torch

    x = torch.empty(shape, dtype=tile.dtype)  # virtual memory: untouched pages are never committed
    x.reshape(-1)[:0].zero_()  # its version moves: the sanitizer counts its bytes as written (synthesised)
    storage = x.untyped_storage()
    v = VirtualCall(input=x, data=x.view(torch.uint8).reshape(-1).numpy(),
                    tile_bytes=tile.contiguous().view(torch.uint8).reshape(-1).numpy().copy(),
                    start=int(storage.data_ptr()), end=int(storage.data_ptr()) + int(storage.nbytes()))
    with _LOCK:
        _ACTIVE.append(v)
    try:
        with batched.sequential(), _guard():
            yield v
    finally:
        with _LOCK:
            _ACTIVE.remove(v)


# -- the interpreter layer -------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Tail:
    """The real grid of the launch under way and the first (linear, in the stock loop's order) program of it
    that is interpreted: program ``i`` of the reduced grid the executor loops over is program ``first + i``."""

    dims: tuple[int, int, int]
    first: int

    def program(self, i: int) -> tuple[int, int, int]:
        _, gy, gz = self.dims
        lin = self.first + i
        return lin // (gy * gz), (lin // gz) % gy, lin % gz


_TAILS: list[_Tail] = []


class _VirtualLaunch(Layer):
    """The outermost layer: loads synthesised, stores recorded, grids cut to their tail while a
    :func:`virtual_call` is open."""

    name = "virtual launch past 2^31 elements"
    triton_versions = ("3.6.0", "3.8.0", "3.9.0")

    def install(self, scope: PatchScope, interp: Any) -> None:
        builder_cls = interp.InterpreterBuilder
        _VirtualOps().install_ops(scope, builder_cls)
        ge = interp.GridExecutor
        inner_call = ge.__dict__["__call__"]

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not _ACTIVE:
                return inner_call(self, *args, **kwargs)
            return _tail_launch(inner_call, self, *args, **kwargs)

        scope.set(ge, "__call__", __call__)


def _tail_launch(inner_call: Any, executor: Any, *args: Any, **kwargs: Any) -> Any:
    """One launch, its grid cut to its last programs: the executor loops over a grid of that many programs,
    and the builder's grid ops (below) give each the real grid's dimensions and the real program's ids."""
    v, grid = _ACTIVE[-1], executor.grid

    def tail_grid(args: Any) -> tuple[int]:
        real = tuple(grid(args) if callable(grid) else grid)
        dims = (tuple(int(d) for d in real) + (1, 1, 1))[:3]
        total = dims[0] * dims[1] * dims[2]
        tail = _Tail(dims, max(0, total - TAIL_PROGRAMS))  # type: ignore[arg-type]
        _TAILS.append(tail)
        v.launches += 1
        v.programs_total += total
        v.programs_run += total - tail.first
        return (total - tail.first,)

    executor.grid = tail_grid
    depth = len(_TAILS)
    try:
        return inner_call(executor, *args, **kwargs)
    finally:
        executor.grid = grid
        del _TAILS[depth:]


def _lanes(ptrs: Any, mask: Any) -> np.ndarray:
    addr = np.asarray(ptrs.data)
    m = np.ones(addr.shape, bool) if mask is None else np.broadcast_to(
        np.asarray(getattr(mask, "data", mask)).astype(bool), addr.shape)
    return addr[m].astype(np.uint64).reshape(-1)


class _VirtualOps(BuilderOps):
    """Loads fill what they read from the tile first; stores are recorded; gathers are refused."""

    def table(self) -> dict[str, Any]:
        return {"create_masked_load": self.load, "create_masked_store": self.store,
                "create_descriptor_gather": self.gather, "set_grid_dim": self.grid_dim, "set_grid_idx": self.grid_idx}

    @staticmethod
    def grid_dim(inner: Any, builder: Any, *dims: Any) -> Any:
        return inner(builder, *(_TAILS[-1].dims if _ACTIVE and _TAILS else dims))

    @staticmethod
    def grid_idx(inner: Any, builder: Any, x: Any, y: Any, z: Any) -> Any:
        return inner(builder, *(_TAILS[-1].program(int(x)) if _ACTIVE and _TAILS else (x, y, z)))

    @staticmethod
    def load(inner: Any, builder: Any, ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        if _ACTIVE:
            _ACTIVE[-1].fill(_lanes(ptrs, mask), max(1, int(ptrs.get_element_ty().primitive_bitwidth) // 8))
        return inner(builder, ptrs, mask, *rest, **kw)

    @staticmethod
    def store(inner: Any, builder: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        if _ACTIVE:
            _ACTIVE[-1]._stored.append(_lanes(ptrs, mask))
        return inner(builder, ptrs, value, mask, *rest, **kw)

    @staticmethod
    def gather(inner: Any, builder: Any, *args: Any, **kw: Any) -> Any:
        if _ACTIVE:  # it reads memory itself (a descriptor load goes through the masked load)
            raise VirtualInputError("the kernel reads through a descriptor gather, which the virtual input does "
                                    "not synthesise")
        return inner(builder, *args, **kw)


LAYER = _VirtualLaunch()

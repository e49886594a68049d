"""The reference's fast path: table lookups in cache-sized blocks, on every core.

The tables come from the model (:mod:`.model`); this module only decides
which entry each input selects and spreads the blocks over threads (NumPy
releases the GIL inside ``take`` and the ufunc loops). Every function here
writes into an output array the caller owns, and every temporary is a
per-thread scratch buffer allocated once: a sweep calls these millions of
times and must not page-fault fresh memory each time.

The index of a 32- or 64-bit input is its upper 16 bits: with every format's
mantissa within the 7 (float32) or 4 (float64) mantissa bits they hold, a
code depends only on them and on whether any lower bit is set (the sticky
bit). ``sticky`` holds the code of each upper half with a lower half that is
not zero (the common case), ``exact`` the code with a zero lower half; the
few lanes of a block whose lower half is zero are corrected from ``exact``.

Two engines do the lookups and give the same codes (both only index the
model's tables): the NumPy passes below, and numba-compiled loops
(:mod:`._compiled`, one pass per value) where numba is installed (``pip
install 'fp8check[fast]'``), loaded once the process has looked up
:data:`COMPILED_AFTER` values. ``FP8CHECK_NUMBA=1`` loads them at the first
large call, ``=0`` never; :func:`engine` says which one large lookups use.
"""

from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

__all__ = ["threads", "parallel", "serial", "engine", "numba_asked", "compiled", "take16", "take_split",
           "decode_into", "sweep32_mismatches"]

# Elements per block: the block's index (8 bytes each) and temporaries stay in
# L2 beside the table.
BLOCK = 1 << 15
# Below this, one thread: starting the others costs more than it saves.
PARALLEL_MIN = 1 << 17
SPANS_PER_THREAD = 4

# Calls below COMPILED_MIN values run on NumPy; the compiled loops are loaded
# once the process has looked up COMPILED_AFTER values (loading numba and its
# cached loops costs about as much CPU as NumPy's extra passes over a few
# hundred million values: a check or a sweep does not pay it, a long run
# does). FP8CHECK_NUMBA=1 loads them at the first large call.
COMPILED_MIN = 1 << 14
COMPILED_AFTER = 1 << 28

_local = threading.local()
_compiled: Any = None  # the compiled loops' module, False when numba is missing or switched off
_looked_up = 0  # values looked up so far in this process (approximate under threads: a heuristic's input)
_compiled_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()


def threads() -> int:
    """Threads the reference uses: ``FP8CHECK_THREADS``, else the cores this process may run on,
    shared among the workers of a pytest-xdist run (each of them is a process of its own)."""
    text = os.environ.get("FP8CHECK_THREADS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = max(1, os.cpu_count() or 1)
    xdist = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").strip()
    return max(1, cores // int(xdist)) if xdist.isdigit() and int(xdist) > 0 else cores


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        # A forked child inherits the pool object but not its threads: make a new one.
        if _pool is None or _pool_pid != os.getpid() or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fp8check")
            _pool_pid = os.getpid()
        return _pool


def numba_asked() -> str:
    """``FP8CHECK_NUMBA`` as set: ``"1"`` (the compiled engines from the first call), ``"0"`` (never), else ``""``
    (by how much a process has run): read by the reference's lookups and the tensor-core models alike."""
    return os.environ.get("FP8CHECK_NUMBA", "").strip()


def compiled(load: bool = True) -> Any:
    """The numba-compiled loops (:mod:`._compiled`), or None (numba missing, or ``FP8CHECK_NUMBA=0``).

    ``load=False``: None unless they are loaded already.
    """
    global _compiled
    if numba_asked() == "0":
        return None
    if _compiled is None and load:
        with _compiled_lock:
            if _compiled is None:
                try:
                    from fp8check.reference import _compiled as module
                except ImportError:  # no numba, or one that cannot load beside this NumPy
                    module = False
                except Exception as exc:  # a broken numba must not break the reference: say so once
                    warnings.warn(f"fp8check: numba could not be loaded ({type(exc).__name__}: {exc}); "
                                  "the reference's lookups run on NumPy", RuntimeWarning, stacklevel=2)
                    module = False
                _compiled = module
    return _compiled or None


def engine() -> str:
    """``"numba <version>"`` or ``"numpy"``: the engine of large lookups once the process runs long
    enough to load the compiled loops (:data:`COMPILED_AFTER`)."""
    c = compiled()
    return f"numba {c.VERSION}" if c is not None else "numpy"


def _compiled_for(n: int) -> Any:
    """The compiled loops for a call of ``n`` values, or None (NumPy)."""
    global _looked_up
    _looked_up += n
    if n < COMPILED_MIN:
        return None
    hot = _looked_up >= COMPILED_AFTER or numba_asked() == "1"
    return compiled(load=hot)


class serial:
    """Context: block-parallel calls on this thread run on it alone (the caller already runs one per core)."""

    def __enter__(self) -> None:
        self._before = getattr(_local, "serial", False)
        _local.serial = True

    def __exit__(self, *exc: Any) -> None:
        _local.serial = self._before


def parallel(n: int, fn: Callable[[int, int], None], *, workers: int | None = None) -> None:
    """Call ``fn(lo, hi)`` over [0, n) in spans of whole blocks, which the threads take in turn.

    :data:`SPANS_PER_THREAD` spans per thread: a thread that the system
    preempts (a busy machine) holds up one span, not a whole share.
    """
    k = workers or threads()
    if k <= 1 or n < PARALLEL_MIN or getattr(_local, "serial", False):
        fn(0, n)
        return
    blocks = -(-n // BLOCK)
    spans = min(blocks, k * SPANS_PER_THREAD)
    k = min(k, spans)
    edges = [min(n, (blocks * i // spans) * BLOCK) for i in range(spans + 1)]
    turn = iter(range(spans))
    lock = threading.Lock()

    def take() -> None:
        with serial():
            while True:
                with lock:
                    i = next(turn, spans)
                if i >= spans:
                    return
                fn(edges[i], edges[i + 1])

    pool = _executor(k - 1)
    futures = [pool.submit(take) for _ in range(k - 1)]
    try:
        take()
    finally:
        for f in futures:
            f.result()  # re-raises a worker's exception


def scratch(name: str, dtype: Any, size: int) -> np.ndarray:
    """This thread's reusable buffer ``name`` of at least ``size`` elements (first ``size`` returned)."""
    bufs = getattr(_local, "buffers", None)
    if bufs is None:
        bufs = _local.buffers = {}
    buf = bufs.get(name)
    if buf is None or buf.dtype != dtype or buf.size < size:
        buf = bufs[name] = np.empty(max(size, BLOCK), dtype=dtype)
    return buf[:size]


def take16(table: np.ndarray, index: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = table[index[i]]`` for 1-d unsigned ``index`` (8- or 16-bit) within the table."""
    c = _compiled_for(index.size)
    if c is not None and index.dtype in (np.uint8, np.uint16):
        parallel(index.size, lambda lo, hi: c.take(table, index[lo:hi], out[lo:hi]))
        return

    def span(lo: int, hi: int) -> None:
        for s in range(lo, hi, BLOCK):
            e = min(hi, s + BLOCK)
            ix = scratch("index", np.intp, e - s)
            ix[...] = index[s:e]
            # mode="clip" skips the bounds check (every index is in range by construction).
            np.take(table, ix, out=out[s:e], mode="clip")

    parallel(index.size, span)


def take_split(bits: np.ndarray, sticky: np.ndarray, exact: np.ndarray, out: np.ndarray) -> None:
    """Codes of 1-d uint32 or uint64 ``bits`` from their upper 16 bits (see the module docstring)."""
    width = bits.dtype.itemsize * 8
    c = _compiled_for(bits.size)
    if c is not None:
        loop = c.take_split32 if width == 32 else c.take_split64
        parallel(bits.size, lambda lo, hi: loop(bits[lo:hi], sticky, exact, out[lo:hi]))
        return
    shift = bits.dtype.type(width - 16)
    low_mask = bits.dtype.type((1 << (width - 16)) - 1)

    def span(lo: int, hi: int) -> None:
        for s in range(lo, hi, BLOCK):
            e = min(hi, s + BLOCK)
            m = e - s
            b = bits[s:e]
            o = out[s:e]
            ix = scratch("index", np.intp, m)
            if width == 64:
                np.right_shift(b, shift, out=ix.view(np.uint64))
            else:
                upper = scratch("upper", np.uint32, m)
                np.right_shift(b, shift, out=upper)
                ix[...] = upper
            np.take(sticky, ix, out=o, mode="clip")
            low = scratch(f"low{width}", bits.dtype, m)
            np.bitwise_and(b, low_mask, out=low)
            zeros = m - np.count_nonzero(low)
            if not zeros:
                continue
            is_zero = scratch("zero", np.bool_, m)
            np.equal(low, 0, out=is_zero)
            if zeros * 16 < m:
                where = np.flatnonzero(is_zero)
                o[where] = exact[ix[where]]
            else:  # many exact lower halves (e.g. float32 holding bfloat16 values)
                alt = scratch("alt", np.uint8, m)
                np.take(exact, ix, out=alt, mode="clip")
                np.copyto(o, alt, where=is_zero)

    parallel(bits.size, span)


def decode_into(table: np.ndarray, codes: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = table[codes[i]]`` (codes 1-d, 8- or 16-bit unsigned or any int in range)."""
    take16(table, codes, out)


def sweep32_mismatches(first: int, actual: np.ndarray, sticky: np.ndarray, exact: np.ndarray,
                       where: np.ndarray, expected: np.ndarray) -> int:
    """Compare ``actual`` (codes of the float32 patterns ``first``, ``first + 1``, ... < 2**32) with the tables.

    Returns how many differ, and writes the offsets and expected codes of
    the first ``where.size`` of them into ``where`` and ``expected``.
    Consecutive patterns share their upper half 65,536 at a time, so the
    expected code is one constant per run (``exact``'s for the pattern
    whose lower half is zero, ``sticky``'s for the rest): each run is one
    comparison with a scalar, no lookup per pattern.
    """
    m = actual.size
    diff = scratch("sweep_diff", np.bool_, min(m, 1 << 16))
    n = kept = 0
    pos = 0
    while pos < m:
        pattern = first + pos
        upper = pattern >> 16
        if pattern & 0xFFFF == 0:  # the exact lower half: one pattern on its own
            code = exact[upper]
            if actual[pos] != code:
                if kept < where.size:
                    where[kept], expected[kept] = pos, code
                    kept += 1
                n += 1
            pos += 1
            continue
        end = min(m, pos + (((upper + 1) << 16) - pattern))
        code = sticky[upper]
        d = diff[:end - pos]
        np.not_equal(actual[pos:end], code, out=d)
        bad = int(np.count_nonzero(d))
        if bad:
            if kept < where.size:
                idx = np.flatnonzero(d)[:where.size - kept]
                where[kept:kept + idx.size] = idx + pos
                expected[kept:kept + idx.size] = code
                kept += idx.size
            n += bad
        pos = end
    return n


_STEPS = np.arange(BLOCK, dtype=np.uint32)


def _steps(m: int) -> np.ndarray:
    """0, 1, ..., m - 1 as uint32 (one array, grown when a larger one is asked for)."""
    global _STEPS
    if _STEPS.size < m:
        _STEPS = np.arange(m, dtype=np.uint32)
    return _STEPS[:m]

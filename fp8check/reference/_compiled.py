"""The fast path's loops compiled by numba: one pass per value, no temporaries.

Each loop does what a NumPy function of :mod:`.fast` does in several passes
(shift, widen the index, ``take``, test the lower bits, correct): it reads
an input, picks its table entry and writes it. The tables are the model's
(:mod:`.model`), so both engines give the same codes by construction, and
the tests compare them on every 16-bit input and every upper half of the
wider ones. Imported only when numba is installed and a call is large
enough to pay for it (:func:`fp8check.reference.fast.compiled`).

The loops release the GIL (``nogil``): :func:`fast.parallel` runs one per
core. Compiled code is cached on disk where numba can write its cache, so a
process after the first loads it instead of compiling.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["take", "take_split32", "take_split64", "VERSION"]

VERSION = numba.__version__


def _jit(fn: Any) -> Any:
    try:
        return numba.njit(nogil=True, cache=True, boundscheck=False)(fn)
    except RuntimeError:  # no cache locator (a read-only install and no user cache): compile per process
        return numba.njit(nogil=True, boundscheck=False)(fn)


@_jit
def take(table: np.ndarray, index: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = table[index[i]]``; every index lies within the table (the caller checked)."""
    for i in range(index.size):
        out[i] = table[index[i]]


@_jit
def take_split32(bits: np.ndarray, sticky: np.ndarray, exact: np.ndarray, out: np.ndarray) -> None:
    """Codes of float32 ``bits`` (uint32): the upper half selects, a zero lower half selects from ``exact``."""
    for i in range(bits.size):
        b = bits[i]
        upper = b >> np.uint32(16)
        out[i] = sticky[upper] if b & np.uint32(0xFFFF) else exact[upper]


@_jit
def take_split64(bits: np.ndarray, sticky: np.ndarray, exact: np.ndarray, out: np.ndarray) -> None:
    """As :func:`take_split32` for float64 ``bits`` (uint64): upper 16 bits, lower 48."""
    for i in range(bits.size):
        b = bits[i]
        upper = b >> np.uint64(48)
        out[i] = sticky[upper] if b & np.uint64(0xFFFFFFFFFFFF) else exact[upper]

"""The ``aligned`` step of :mod:`fp8check.matmul.tensorcore` compiled by numba: one pass per output element.

The NumPy step makes about fifteen passes over a (B, L, N) array of products (gathers, the largest
exponent, the scaling, the truncation, the sum); this loop reads each product's table entries once
and keeps the running values in registers. Same tables, same arithmetic (float64 products scaled by
powers of two, ``trunc`` of integers below 2**53, the truncation of the result from its exponent), so
both engines give the same bits; tests/test_matmul_tensorcore.py compares them on every kind. Imported
only when numba is installed (the ``fast`` extra) and ``FP8CHECK_NUMBA`` is not ``0``.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

__all__ = ["aligned_step", "VERSION"]

VERSION = numba.__version__


def _jit(fn: Any) -> Any:
    try:
        return numba.njit(nogil=True, cache=True, boundscheck=False)(fn)
    except RuntimeError:  # no cache locator: compile per process
        return numba.njit(nogil=True, boundscheck=False)(fn)


@_jit
def aligned_step(a: np.ndarray, b: np.ndarray, nb: int, pv: np.ndarray, pe: np.ndarray, pflags: np.ndarray,
                 c: np.ndarray, f: int, g: int, zero_exponent: int, out: np.ndarray, flags: np.ndarray) -> None:
    """``out[i, j]``: one step of ``a[i, :, j] x b[i, :, j]`` (codes, broadcast 3-D arrays) and ``c[i, j]``
    (finite float32): the terms' largest exponent E, each term truncated toward zero to 2**(E - f), the
    exact sum truncated toward zero to ``g`` fractional bits in float32's range (+0 for zero). ``flags``:
    the products' special flags OR-ed (the caller resolves NaN/Inf)."""
    B, L, N = a.shape
    terms = np.empty(L, np.float64)
    for i in range(B):
        for j in range(N):
            cv = np.float64(c[i, j])
            if cv == 0.0:
                top = zero_exponent
            else:
                top = max(math.frexp(cv)[1] - 1, -126)
            fl = 0
            for k in range(L):
                idx = a[i, k, j] * nb + b[i, k, j]
                e = pe[idx]
                if e > top:
                    top = e
                fl |= pflags[idx]
                terms[k] = pv[idx]
            scale = math.ldexp(1.0, f - top)
            total = np.float64(math.trunc(cv * scale))
            for k in range(L):
                total += np.float64(math.trunc(terms[k] * scale))
            v = total / scale
            if v == 0.0:
                r = 0.0
            else:
                ev = math.frexp(v)[1] - 1
                if ev < -126:
                    ev = -126
                unit = math.ldexp(1.0, ev - g)
                r = math.trunc(v / unit) * unit
            out[i, j] = np.float32(r)
            flags[i, j] = fl

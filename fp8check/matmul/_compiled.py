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

__all__ = ["aligned_step", "two_stage_step", "VERSION"]

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


@_jit
def two_stage_step(a: np.ndarray, b: np.ndarray, nb: int, pv: np.ndarray, pe: np.ndarray, pflags: np.ndarray,
                   c: np.ndarray, f: int, f2: int, pairs: bool, drop_tiny_c: bool, out: np.ndarray,
                   flags: np.ndarray) -> None:
    """``out[i, j]``: one ``two-stage`` step (CDNA3): the products (the even and the odd ones apart when
    ``pairs``) truncated toward zero to ``f`` bits below their group's largest exponent and summed, the
    groups rounded down to ``f`` bits below the larger, that dot rounded down to ``f2 + 1`` bits and
    ``c`` (finite) to ``f`` bits below the larger of the two exponents, the sum rounded down to ``f2``
    fractional bits and to nearest even into float32 (+0 for zero). ``flags`` as in :func:`aligned_step`."""
    B, L, N = a.shape
    groups = 2 if pairs else 1
    terms = np.empty(L, np.float64)
    exps = np.empty(L, np.int64)
    tops = np.empty(groups, np.int64)
    sums = np.empty(groups, np.float64)
    for i in range(B):
        for j in range(N):
            fl = 0
            for k in range(L):
                idx = a[i, k, j] * nb + b[i, k, j]
                terms[k] = pv[idx]
                exps[k] = pe[idx]
                fl |= pflags[idx]
            for g in range(groups):
                top = -(1 << 40)
                for k in range(g, L, groups):
                    if exps[k] > top:
                        top = exps[k]
                scale = math.ldexp(1.0, f - top)
                s = 0.0
                for k in range(g, L, groups):
                    s += np.float64(math.trunc(terms[k] * scale))
                tops[g] = top
                sums[g] = s
            e_dot = tops[0]
            for g in range(1, groups):
                if tops[g] > e_dot:
                    e_dot = tops[g]
            s_dot = 0.0
            for g in range(groups):
                s_dot += math.floor(sums[g] * math.ldexp(1.0, tops[g] - e_dot))
            cv = np.float64(c[i, j])
            ec = -126 if cv == 0.0 else max(math.frexp(cv)[1] - 1, -126)
            e_max = max(e_dot, ec)
            sd = math.floor(s_dot * math.ldexp(1.0, e_dot - e_max + f2 + 1 - f))
            sc = math.floor(cv * math.ldexp(1.0, f - e_max))
            if drop_tiny_c and ec < e_max - f - 1:
                sc = 0.0
            v = (sd + sc * math.ldexp(1.0, f2 + 1 - f)) * math.ldexp(1.0, e_max - f2 - 1)
            if v == 0.0:
                r = 0.0
            else:
                ev = max(math.frexp(v)[1] - 1, -126)
                grid = math.ldexp(1.0, ev - f2)
                r = math.floor(v / grid) * grid
            out[i, j] = np.float32(r) + np.float32(0.0)
            flags[i, j] = fl

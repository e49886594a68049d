"""The faithful interpreter's float arithmetic: every op as compiled Triton computes it on a target.

Triton's interpreter computes with NumPy: ``np.fmax``/``np.clip`` for
``tl.maximum``/``tl.clamp``, ``np.nanmax`` for ``tl.max``, IEEE division and
square roots, no fma contraction, x86's NaNs, and bfloat16 arithmetic on the
uint16 bit pattern (``int32 5 .to(tl.bfloat16)`` gives 4.6e-40). Compiled
Triton differs on every one of these, differently per target. This module
replaces the interpreter's builder methods while a
:func:`~fp8check.triton.faithful` block is open, following the target's
:class:`~fp8check.triton.targets.OpRules`:

- ``minimum``/``maximum`` (``propagate_nan`` NONE: the non-NaN operand wins,
  +0 > -0 where the target orders zeros; ALL: NaN wins), ``clamp`` (sm90
  compiles ``lo == -hi`` to ``min.xorsign.abs.f32``: NaN in, hi with the
  NaN's sign out; which forms of ``-hi`` the compiler recognises depends on
  the Triton version and is read from how the bounds were built; AMD:
  ``v_med3_f32``),
  ``tl.max``/``tl.min`` with the same rules, ``tl.argmax``/``tl.argmin``
  with Triton's combine in the compiled reduction orders;
- fma contraction of ``a * b + c`` (and ``a * b - c``, ``c - a * b``),
  rounded once, for the dtypes the target fuses;
- ``/``, ``sqrt``, ``rsqrt``, ``exp``, ``exp2``, ``log2``, ``log``: exact where
  the instruction is specified (``div.rn``, ``sqrt.rn``, AMD's IEEE division);
  where it is not (NVIDIA's ``div.full.f32`` and ``.approx`` functions, AMD's
  1-ulp transcendental instructions) the result is the correctly rounded one,
  and under :func:`bracket` the lowest or highest one the documented error
  bound allows (``lo``/``hi``): a code that changes between the three runs
  depends on the hardware's approximation (target-dependent);
- the NaN an arithmetic op writes (NVIDIA's canonical 0x7FFFFFFF; AMD's
  quiet input NaN or 0x7FC00000 where x86 writes 0xFFC00000);
- bfloat16 arithmetic, comparisons, min/max and int <-> bfloat16 casts on
  bfloat16 values, rounded to nearest even (the interpreter works on bits).

Every rule is data in :mod:`fp8check.triton.targets`; docs/triton.md says which
are pinned on an H200, which are derived from source and which are bracketed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from fp8check import brackets
from fp8check.triton import nvidia_approx
from fp8check.triton.layer import BuilderOps

__all__ = ["FloatOps", "bracket", "bracket_mode", "BRACKET_MODES", "fma", "round_bf16", "widen_bf16",
           "approximate", "minmax", "clamp", "med3", "xorsign_clamp", "reduce_minmax", "argminmax",
           "canonical_nans", "divide_by_constant", "bracketed_runs", "divide_f32"]

#: ``rn``: every unspecified result is the correctly rounded one; ``lo``/``hi``:
#: the lowest/highest result the target's documented error bound allows.
BRACKET_MODES = ("rn", "lo", "hi")

_STATE = threading.local()


def bracket_mode() -> str:
    return getattr(_STATE, "mode", "rn")


@contextlib.contextmanager
def bracket(mode: str) -> Iterator[dict[str, int]]:
    """Run interpreted kernels with every unspecified result at one end of its bound.

    Yields a counter of the bracketed op evaluations in the block (by op name):
    a kernel that used none gives the same codes in every mode."""
    if mode not in BRACKET_MODES:
        raise ValueError(f"unknown bracket mode {mode!r}; known: {', '.join(BRACKET_MODES)}")
    old, old_count = bracket_mode(), getattr(_STATE, "count", None)
    _STATE.mode, _STATE.count = mode, {}
    try:
        yield _STATE.count
    finally:
        _STATE.mode, _STATE.count = old, old_count


def bracketed_runs(run: Callable[[], Any]) -> list[Any]:
    """``[run()]`` in ``rn`` mode, and, when that run evaluated an op whose result the target leaves
    unspecified, ``run()`` again in ``lo`` and ``hi`` mode: ``[rn, lo, hi]``. ``run`` must compute from
    fresh copies of its inputs each time (a kernel may write them)."""
    return _runs(run)[0]


def _runs(run: Callable[[], Any]) -> tuple[list[Any], tuple[str, ...]]:
    if bracket_mode() != "rn" or getattr(_STATE, "count", None) is not None:
        return [run()], ()  # already inside a bracketed run (a check calling a check): one run
    with bracket("rn") as count:
        first = run()
    if not count:
        return [first], ()
    out = [first]
    for mode in ("lo", "hi"):
        with bracket(mode):
            out.append(run())
    return out, tuple(sorted(count))


brackets.set_runner(_runs)  # the checks bracket their kernel calls through fp8check.brackets


def _counted(op: str) -> None:
    count = getattr(_STATE, "count", None)
    if count is not None:
        count[op] = count.get(op, 0) + 1


# -- bfloat16 ---------------------------------------------------------------------


def widen_bf16(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) -> float32, exactly (a 16-bit shift)."""
    return (np.ascontiguousarray(bits).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray, nan: int | None = 0x7FFF) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even; NaN as ``nan`` (None: sign and top payload kept, quiet)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.view(np.uint32)
    out = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    isnan = np.isnan(x)
    if isnan.any():
        fill = np.uint16(nan) if nan is not None else ((b >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
        out = np.where(isnan, fill, out)
    return out.astype(np.uint16)


# -- NaNs of arithmetic -----------------------------------------------------------

_NAN_BITS = {np.dtype(np.float32): (np.uint32, 0x7FFFFFFF, 0x7FC00000, 0x00400000),
             np.dtype(np.float16): (np.uint16, 0x7FFF, 0x7E00, 0x0200),
             np.dtype(np.float64): (np.uint64, 0x7FFFFFFFFFFFFFFF, 0x7FF8000000000000, 0x0008000000000000)}


def canonical_nans(out: np.ndarray, rule: str, operands: Sequence[np.ndarray] = ()) -> np.ndarray:
    """The NaNs an arithmetic result holds, as the target writes them.

    ``canonical`` (NVIDIA): every NaN is 0x7FFFFFFF (float16 0x7FFF).
    ``propagate`` (AMD, IEEE 754): a NaN that came from a NaN operand is that
    operand's NaN made quiet (the first NaN operand); a NaN the operation
    made (Inf - Inf, 0 * Inf, 0 / 0) is the positive default NaN 0x7FC00000
    (x86, and so NumPy, writes the negative 0xFFC00000)."""
    out = np.asarray(out)
    if out.dtype not in _NAN_BITS:
        return out
    isnan = np.isnan(out)
    if not isnan.any():
        return out
    uint, canonical, default, quiet = _NAN_BITS[out.dtype]
    if rule == "canonical":
        return np.where(isnan, np.array(canonical, dtype=uint).view(out.dtype), out).astype(out.dtype, copy=False)
    fill = np.broadcast_to(np.array(default, dtype=uint), out.shape)
    for op in reversed(list(operands)):
        op = np.asarray(op)
        if op.dtype != out.dtype:
            continue
        op = np.broadcast_to(op, out.shape)
        fill = np.where(np.isnan(op), np.ascontiguousarray(op).view(uint) | uint(quiet), fill)
    return np.where(isnan, np.asarray(fill, dtype=uint).view(out.dtype), out).astype(out.dtype, copy=False)


# -- exact fused multiply-add ------------------------------------------------------


def _to_odd_f32(s: np.ndarray, exact_lost: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd (sticky), so a later RNE to 8 bits rounds once."""
    t = s.astype(np.float32)
    inexact = (t.astype(np.float64) != s) | exact_lost
    even = (t.view(np.uint32) & np.uint32(1)) == 0
    fix = inexact & even & np.isfinite(t) & np.isfinite(s)
    toward = np.where(s > t.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
    return np.where(fix, np.nextafter(t, toward), t).astype(np.float32)


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: str) -> np.ndarray:
    """``a * b + c`` rounded once to ``dtype`` (``float32``, ``float16``; ``bfloat16`` returns bits).

    Operands are values of at most 24 significant bits, so the float64
    product is exact; the float64 sum is rounded to odd (TwoSum's error as
    the sticky bit), which makes the final round to nearest even exact."""
    with np.errstate(all="ignore"):
        a64, b64, c64 = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
        p = a64 * b64
        s = p + c64
        bb = s - p
        err = (p - (s - bb)) + (c64 - bb)
        sticky = np.isfinite(err) & (err != 0)
        odd = (s.view(np.int64) & 1) == 0
        fix = sticky & odd & np.isfinite(s)
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        if dtype == "float32":
            return s.astype(np.float32)
        if dtype == "float16":
            return s.astype(np.float16)
        if dtype == "bfloat16":
            return round_bf16(_to_odd_f32(s, np.zeros(s.shape, bool)))
        raise ValueError(f"fma: unsupported dtype {dtype}")


# -- NaN and signed-zero rules -----------------------------------------------------


def _canonical_nan(dtype: np.dtype, pattern: int) -> np.ndarray:
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    return np.array(pattern, dtype=width).view(dtype)


_NAN32 = {"canonical_nvidia": 0x7FFFFFFF, "quiet": 0x7FC00000}
_NAN16 = {"canonical_nvidia": 0x7FFF, "quiet": 0x7E00}


def _nan_like(x: np.ndarray, rule: str) -> np.ndarray:
    table = _NAN32 if x.dtype == np.float32 else _NAN16
    if x.dtype == np.float64:
        return np.array(np.nan, dtype=np.float64)
    return _canonical_nan(x.dtype, table[rule])


def _num(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``fn(a, b)`` where a NaN operand, signalling or quiet, loses to the other (PTX ``max.f32``/``min.f32``;
    LLVM's maxnum/minnum on canonicalized operands). Not ``np.fmax``/``np.fmin``: their scalar tail (C's
    fmaxf, IEEE 754-2008 maxNum) returns NaN for a signalling NaN where their SIMD body ignores it, so the
    result depends on where in the array an element sits (NumPy 2.4, x86)."""
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, fn(a, b)))


def minmax(a: np.ndarray, b: np.ndarray, *, maximum: bool, propagate_nan: bool, zeros: str, nan: str) -> np.ndarray:
    """``tl.maximum``/``tl.minimum`` on float arrays.

    ``propagate_nan`` False (Triton's default): a NaN operand loses to the
    other one (IEEE maxNum, PTX ``max.f32``); both NaN give ``nan``'s NaN.
    True: any NaN operand gives ``nan``'s NaN. ``zeros``: ``ordered``
    (-0 < +0, PTX's rule), ``either`` (unspecified: the bracket's ``lo``
    mode takes -0, ``hi`` +0, ``rn`` the first operand)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    with np.errstate(invalid="ignore"):
        out = _num(np.maximum if maximum else np.minimum, a, b)
        both_zero = (a == 0) & (b == 0)
        if both_zero.any():
            neg_a, neg_b = np.signbit(a), np.signbit(b)
            if zeros == "ordered":
                negative = (neg_a & neg_b) if maximum else (neg_a | neg_b)
            else:
                if (both_zero & (neg_a != neg_b)).any():
                    _counted("signed_zero")
                mode = bracket_mode()
                negative = {"lo": neg_a | neg_b, "hi": neg_a & neg_b}.get(mode, neg_a)
            zero = np.where(negative, -np.zeros((), a.dtype), np.zeros((), a.dtype))
            out = np.where(both_zero, zero, out)
        na, nb = np.isnan(a), np.isnan(b)
        nan_out = (na | nb) if propagate_nan else (na & nb)
        if nan_out.any():
            out = np.where(nan_out, _nan_like(out, nan), out)
    return out.astype(a.dtype, copy=False)


def xorsign_clamp(x: np.ndarray, hi: np.ndarray, *, propagate_nan: bool, nan: str) -> np.ndarray:
    """PTX ``min{.NaN}.xorsign.abs.f32 d, x, hi``: ``min(|x|, |hi|)`` with the
    sign ``sign(x) ^ sign(hi)``, the signs read before ``.abs``. The sign rule
    applies to every non-NaN result, so a NaN ``x`` (the non-NaN operand wins)
    gives ``|hi|`` with the NaN's sign xor hi's: ``tl.clamp(x, -448, 448)`` of
    +NaN is +448 and of -NaN -448 (the H200's op table, 2026-12-04); a NaN
    ``hi`` gives ``|x|`` with the sign rule; with ``.NaN`` any NaN operand
    gives the canonical NaN."""
    x, hi = np.broadcast_arrays(np.asarray(x), np.asarray(hi))
    with np.errstate(invalid="ignore"):
        mag = _num(np.minimum, np.abs(x), np.abs(hi))
        negative = np.signbit(x) ^ np.signbit(hi)
        out = np.where(negative, -mag, mag)
        both = np.isnan(x) & np.isnan(hi)
        nan_out = (np.isnan(x) | np.isnan(hi)) if propagate_nan else both
        if nan_out.any():
            out = np.where(nan_out, _nan_like(out, nan), out)
    return out.astype(x.dtype, copy=False)


def med3(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, nan: str = "quiet") -> np.ndarray:
    """AMD ``v_med3_f32 x, lo, hi``: the median of three; if any operand is
    NaN, ``v_min3_f32`` of the three, in IEEE mode a minimum that ignores
    NaN (all three NaN: NaN). For ``lo <= hi`` and a non-NaN ``x`` this is
    ``min(max(x, lo), hi)``; a NaN ``x`` gives ``min(lo, hi)``."""
    x, lo, hi = np.broadcast_arrays(np.asarray(x), np.asarray(lo), np.asarray(hi))
    with np.errstate(invalid="ignore"):
        median = np.maximum(np.minimum(x, lo), np.minimum(np.maximum(x, lo), hi))
        anynan = np.isnan(x) | np.isnan(lo) | np.isnan(hi)
        if anynan.any():
            smallest = _num(np.minimum, _num(np.minimum, x, lo), hi)
            if np.isnan(smallest).any():
                smallest = np.where(np.isnan(smallest), _nan_like(smallest, nan), smallest)
            median = np.where(anynan, smallest, median)
    return median.astype(x.dtype, copy=False)


def clamp(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, rule: str, propagate_nan: bool, zeros: str,
          nan: str) -> np.ndarray:
    """``tl.clamp``: ``xorsign_abs`` (sm90's ``min.xorsign.abs.f32 x, hi``, see
    :func:`xorsign_clamp`), ``med3`` (AMD's ``v_med3_f32``, see :func:`med3`;
    with ``propagate_nan`` a NaN ``x`` is kept: Triton selects ``x`` where
    ``x != x``) or ``minmax`` (``min(max(x, lo), hi)`` with :func:`minmax`'s
    rules: maxnum/minnum, or maximum/minimum with ``propagate_nan``, Triton's
    common lowering on targets with hardware NaN propagation)."""
    x, lo, hi = np.broadcast_arrays(np.asarray(x), np.asarray(lo), np.asarray(hi))
    with np.errstate(invalid="ignore"):
        if rule == "xorsign_abs":
            return xorsign_clamp(x, hi, propagate_nan=propagate_nan, nan=nan)
        if rule == "med3":
            out = med3(x, lo, hi, nan=nan)
            if propagate_nan:
                out = np.where(np.isnan(x), x, out)
            return out.astype(x.dtype, copy=False)
        out = minmax(minmax(x, lo, maximum=True, propagate_nan=propagate_nan, zeros=zeros, nan=nan), hi,
                     maximum=False, propagate_nan=propagate_nan, zeros=zeros, nan=nan)
        return out.astype(x.dtype, copy=False)


def reduce_minmax(x: np.ndarray, axis: int | None, keepdims: bool, *, maximum: bool, zeros: str,
                  nan: str) -> np.ndarray:
    """``tl.max``/``tl.min``: the ``maxNum`` combine (NaN ignored unless every
    element is NaN) with the target's signed-zero rule. NaNs are replaced by
    -Inf (+Inf for ``tl.min``) before NumPy's max: ``np.nanmax`` (``fmax.reduce``)
    returns a smaller element for a row holding a signalling NaN (NumPy 2.4
    and 2.5 on x86: 0x79F8CE49 for a row whose maximum is 0x7AA8C0B8 beside
    0x7FB395CE), where ``max.f32`` ignores every NaN (the H200's op table)."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
        filled = np.where(np.isnan(x), x.dtype.type(-np.inf if maximum else np.inf), x)
        out = np.asarray(np.max(filled, axis=axis, keepdims=keepdims) if maximum
                         else np.min(filled, axis=axis, keepdims=keepdims))
        isz = x == 0
        if isz.any():
            neg = np.signbit(x) & isz
            pos = ~np.signbit(x) & isz
            any_neg = np.asarray(np.any(neg, axis=axis, keepdims=keepdims))
            any_pos = np.asarray(np.any(pos, axis=axis, keepdims=keepdims))
            if zeros == "ordered":
                negative = ~any_pos if maximum else any_neg
            else:
                mixed = any_neg & any_pos
                if mixed.any():
                    _counted("signed_zero")
                mode = bracket_mode()
                negative = {"lo": any_neg, "hi": ~any_pos}.get(mode, ~any_pos if maximum else any_neg)
            zero = np.where(negative, -np.zeros((), x.dtype), np.zeros((), x.dtype))
            out = np.where(out == 0, zero, out)
        allnan = np.asarray(np.all(np.isnan(x), axis=axis, keepdims=keepdims))
        if allnan.any():
            out = np.where(allnan, _nan_like(np.asarray(out, dtype=x.dtype), nan), out)
    return np.asarray(out, dtype=x.dtype)


def _arg_combine(v1: np.ndarray, i1: np.ndarray, v2: np.ndarray, i2: np.ndarray, maximum: bool,
                 tie_left: bool) -> tuple[np.ndarray, np.ndarray]:
    """Triton's ``_argmax_combine``/``_argmin_combine``: the left operand if ``v1 > v2`` (``<``), or, with
    ``tie_left``, ``v1 == v2 and i1 < i2``; else the right one (every comparison with a NaN is false)."""
    with np.errstate(invalid="ignore"):
        left = (v1 > v2) if maximum else (v1 < v2)
        if tie_left:
            left = left | ((v1 == v2) & (i1 < i2))
    return np.where(left, v1, v2), np.where(left, i1, i2)


def _arg_tree(v: np.ndarray, order: str, maximum: bool, tie_left: bool) -> np.ndarray:
    """The index ``order`` reduces the last axis of ``v`` to with Triton's combine (ReduceOpToLLVM.cpp):
    ``thread``: one thread's registers, left to right (reduceWithinThreads: ``acc = combine(acc, x)``);
    ``shuffle``: one element per lane, butterfly shuffles with xor offsets n/2, ..., 1, each lane taking
    ``combine(own, partner)``, lane 0's result stored (warpReduce; the PTX of a 16-element row on sm90:
    ``shfl.sync.bfly`` 8, 4, 2, 1, stored by thread 0)."""
    n = v.shape[-1]
    idx = np.broadcast_to(np.arange(n, dtype=np.int64), v.shape)
    if order == "shuffle" and n & (n - 1) == 0:
        lane = np.arange(n)
        step = n // 2
        while step:
            partner = lane ^ step
            v, idx = _arg_combine(v, idx, v[..., partner], idx[..., partner], maximum, tie_left)
            step //= 2
        return idx[..., 0]
    acc_v, acc_i = v[..., 0], idx[..., 0]
    for k in range(1, n):
        acc_v, acc_i = _arg_combine(acc_v, acc_i, v[..., k], idx[..., k], maximum, tie_left)
    return acc_i


def argminmax(x: np.ndarray, axis: int | None, keepdims: bool, *, maximum: bool,
              tie_left: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``tl.argmax``/``tl.argmin``: Triton's combine (:func:`_arg_combine`) keeps
    the right operand when either is NaN, so the index of a row holding a NaN
    depends on the compiled reduction order (the layout: elements per thread,
    lanes, warps), and so does a tie under ``tie_break_left=False``. ``rn``: the
    leftmost non-NaN extreme (NaN ignored, NumPy's order); ``lo``: the shuffle
    tree of a row held one element per lane (the H200's op table: a 16-element
    row of 1..16 with a NaN at 8 gives argmin 1); ``hi``: the row folded left to
    right in one thread (the extreme after the last NaN, or that NaN). A row
    whose index changes between the runs is target-dependent."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        flat_axis = axis
        data = x
        if axis is None:
            data, flat_axis = x.reshape(-1), 0
        nan = np.isnan(data)
        filled = np.where(nan, -np.inf if maximum else np.inf, data)
        idx = np.argmax(filled, axis=flat_axis) if maximum else np.argmin(filled, axis=flat_axis)
        any_nan = nan.any(axis=flat_axis)
        if any_nan.any() or not tie_left:
            _counted("argmax_order")
            mode = bracket_mode()
            if mode in ("lo", "hi"):
                rows = np.moveaxis(data, flat_axis, -1)
                idx = _arg_tree(rows, "shuffle" if mode == "lo" else "thread", maximum, tie_left)
        val = np.take_along_axis(data, np.expand_dims(idx, flat_axis), axis=flat_axis).squeeze(flat_axis)
        if keepdims:
            if axis is None:
                val, idx = val.reshape((1,) * x.ndim), idx.reshape((1,) * x.ndim)
            else:
                val, idx = np.expand_dims(val, axis), np.expand_dims(idx, axis)
    return np.asarray(val, dtype=x.dtype), np.asarray(idx, dtype=np.int32)


# -- approximate instructions ------------------------------------------------------


def _step(x: np.ndarray, n: int, up: bool) -> np.ndarray:
    target = np.asarray(np.inf if up else -np.inf, dtype=x.dtype)
    for _ in range(n):
        x = np.nextafter(x, target)
    return x


def _ceil32(v: np.ndarray) -> np.ndarray:
    t = v.astype(np.float32)
    return np.where(t.astype(np.float64) < v, np.nextafter(t, np.float32(np.inf)), t).astype(np.float32)


def _floor32(v: np.ndarray) -> np.ndarray:
    t = v.astype(np.float32)
    return np.where(t.astype(np.float64) > v, np.nextafter(t, np.float32(-np.inf)), t).astype(np.float32)


def _ftz(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    return np.where((np.abs(x) < tiny) & (x != 0), np.copysign(np.float32(0), x), x).astype(np.float32)


def approximate(exact: np.ndarray, bound: Any, *, op: str = "", ftz: bool = False,
                known: np.ndarray | None = None, end: str | None = None) -> np.ndarray:
    """The float32 result of an instruction whose result is bounded, not specified.

    ``exact``: the true result (float64). ``bound``: a
    :class:`~fp8check.triton.targets.ErrorBound` (None: exact). ``rn`` mode:
    the correctly rounded result; ``lo``/``hi``: the lowest/highest float32
    the bound allows. Zero, infinite and NaN results are the instructions'
    specified special cases and stay exact. ``ftz``: subnormal results are
    written as zero of their sign (``.ftz`` instructions). ``known``: the
    elements whose result is known to be the correctly rounded one (measured
    or specified: :mod:`fp8check.triton.nvidia_approx`), exact in every mode. ``end``: the mode (default:
    the bracketed run's)."""
    exact = np.asarray(exact, dtype=np.float64)
    with np.errstate(all="ignore"):
        rn = exact.astype(np.float32)
    if bound is not None and (known is None or not np.all(known)):
        _counted(op or "approximate")
        mode = end or bracket_mode()
        if mode != "rn":
            up = mode == "hi"
            with np.errstate(all="ignore"):
                width = np.maximum(bound.rel * np.abs(exact), bound.abs)
                out = _floor32(exact + width) if up else _ceil32(exact - width)
                if bound.ulps:
                    out = (np.maximum(out, _step(rn, bound.ulps, True)) if up
                           else np.minimum(out, _step(rn, bound.ulps, False)))
                keep = ~np.isfinite(rn) | (rn == 0) | (False if known is None else known)
                rn = np.where(keep, rn, out).astype(np.float32)
    return _ftz(rn) if ftz else rn


def divides_bit_for_bit(target: Any) -> bool:
    """Whether every float32 ``/`` of the Triton ``target`` is known bit for bit (AMD's correctly rounded one,
    sm90's through its measured reciprocals), not only within a bound (sm100): :func:`divide_f32`'s cases."""
    from fp8check.triton import targets

    rules = targets.get(target).ops
    return rules is None or rules.fdiv is None or rules.approx_model == "sm90"


def divide_f32(x: np.ndarray, y: np.ndarray, target: Any, *, end: str = "rn") -> tuple[np.ndarray, np.ndarray]:
    """A run-time float32 ``x / y`` as ``target``'s compiled Triton computes it: the one per-target division, of
    the interpreter's ``fdiv`` and of the references outside it (the ``rescaled`` GEMM epilogue). The quotients
    and the mask of those known bit for bit: sm90's div.full.f32 through its measured reciprocals; AMD's
    correctly rounded division; another NVIDIA target's div.full.f32 within its bound, known only where zero,
    infinite or NaN. An unknown quotient is taken at ``end`` of its bracket (``rn``: correctly rounded) and
    counted as a bracketed ``fdiv``; a NaN is the target's (:func:`canonical_nans`)."""
    from fp8check.triton import targets

    x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.float32))
    rules = targets.get(target).ops
    with np.errstate(all="ignore"):
        q = np.divide(x, y).astype(np.float32)
    if rules is None:
        return q, np.ones(q.shape, dtype=bool)
    if rules.fdiv is None:
        known = np.ones(q.shape, dtype=bool)
    elif rules.approx_model == "sm90":
        q, known = nvidia_approx.div_full_f32(x, y, end=end)
        if not known.all():
            _counted("fdiv")
    else:
        known = ~np.isfinite(q) | (q == 0)
        with np.errstate(all="ignore"):
            q = approximate(x.astype(np.float64) / y.astype(np.float64), rules.fdiv, op="fdiv", known=known, end=end)
    return canonical_nans(q, rules.arith_nan, (x, y)), known


def divide_by_constant(x: np.ndarray, c: float, rule: str, bound: Any, fdiv: Any) -> np.ndarray:
    """float32 ``x / C`` for a compile-time constant ``C`` on NVIDIA.

    Triton 3.9 compiles it to ``div.approx.f32 r, 1.0, C`` and ``mul.f32 x, r``;
    3.6 and 3.8 to ``div.full.f32``, which for ``C = 448`` equals
    ``x * fl(1/448)`` on every one of 2^20 inputs (H200). ``rn`` mode:
    ``fl(x * fl(1/C))``, one rounding of the product; ``lo``/``hi``: the
    extremes of ``fl(x * r)`` over ``r`` within ``bound`` of ``fl(1/C)``,
    widened to the quotient's own bound ``fdiv`` (3.6's div.full.f32).
    ``bound`` None: the reciprocal is pinned (``fl(1/C)``), the result exact."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        r = np.float32(1.0) / np.float32(c)
        rn = (x * r).astype(np.float32)
        if bound is None:  # the reciprocal is pinned: fl(1/C)
            return rn
        _counted("fdiv_const")
        mode = bracket_mode()
        if mode == "rn":
            return rn
        up = mode == "hi"
        r_lo, r_hi = _step(np.asarray(r), bound.ulps, False), _step(np.asarray(r), bound.ulps, True)
        ends = [(x * r_lo).astype(np.float32), (x * r_hi).astype(np.float32), rn]
        if fdiv is not None:
            ends.append(approximate(x.astype(np.float64) / np.float64(c), fdiv, op="fdiv_const"))
        out = np.maximum.reduce(ends) if up else np.minimum.reduce(ends)
        keep = ~np.isfinite(rn) | (rn == 0)
        return np.where(keep, rn, out).astype(np.float32)


# -- the builder patch --------------------------------------------------------------

# Provenance the compiler's pattern matches look at, kept on the interpreter's TensorHandles:
# the value a splat/broadcast came from, a negation (negf or 0 - x) and of what, whether a splat
# carried the negation (a negated scalar), a constant, the factors of a product.
_ROOT, _NEG, _NEG_SPLAT, _CONST, _PRODUCT = (
    "fp8check_root", "fp8check_neg", "fp8check_neg_splat", "fp8check_const", "fp8check_product")


def _root(h: Any) -> Any:
    return h.attr.get(_ROOT, h)


def _same_value(a: Any, b: Any) -> bool:
    """One SSA value in the compiled IR: the same handle, or (after CSE) one holding the same bits
    (``tl.abs(b)`` written twice is one value in the compiled kernel)."""
    if a is b:
        return True
    x, y = np.asarray(a.data), np.asarray(b.data)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def fp_fusion_enabled() -> bool:
    """Whether Triton compiles with ``enable_fp_fusion`` (its default; ``TRITON_DEFAULT_FP_FUSION=0`` turns
    it off, Triton 3.9 on; a launch's ``enable_fp_fusion=False`` is not seen by the interpreter)."""
    value = os.environ.get("TRITON_DEFAULT_FP_FUSION", "").strip().lower()
    return value not in ("0", "false", "off", "no")


def _inherit(h: Any, src: Any, splat: bool) -> None:
    """A splat/broadcast keeps what the compiler's pattern matches see through it."""
    h.attr[_ROOT] = _root(src)
    if _CONST in src.attr:
        h.attr[_CONST] = src.attr[_CONST]
    if _NEG in src.attr:
        h.attr[_NEG] = src.attr[_NEG]
        h.attr[_NEG_SPLAT] = src.attr.get(_NEG_SPLAT, False) or splat


def _clip_pattern(lo: Any, hi: Any, patterns: tuple[str, ...]) -> bool:
    """Whether the compiler sees ``lo == -hi`` (NVIDIA's ClampFOpConversion::isClipPattern, by version)."""
    neg = lo.attr.get(_NEG)
    if neg is not None:
        kind, of = neg
        via_splat = lo.attr.get(_NEG_SPLAT, False)
        if via_splat:
            ok = kind == "negf" and "splat_negf" in patterns and _ROOT in hi.attr
        else:
            ok = kind in patterns
        if ok and _same_value(of, _root(hi) if via_splat else hi):
            return True
    c_lo, c_hi = lo.attr.get(_CONST), hi.attr.get(_CONST)
    return "const" in patterns and c_lo is not None and c_hi is not None and c_lo == -c_hi


def _either_contraction(fused: list, va: np.ndarray, vb: np.ndarray, subtract: bool, dtype: str) -> np.ndarray:
    """``a * b + c * d`` where the target may fuse either product, or neither, per element (AMD: the SLP
    vectorizer packs some products into ``v_pk_mul_f32``): ``rn`` the first fused, ``lo``/``hi`` the
    lowest/highest of the three."""
    _counted("fma_pair")
    first = fused[0][0]
    mode = bracket_mode()
    if mode == "rn":
        return first
    with np.errstate(all="ignore"):
        plain = va - vb if subtract else va + vb
        if dtype == "bfloat16":
            cands = [widen_bf16(fused[0][0]), widen_bf16(fused[1][0]), widen_bf16(round_bf16(plain))]
        else:
            cands = [fused[0][0], fused[1][0], plain.astype(first.dtype)]
        stacked = np.stack(np.broadcast_arrays(*cands))
        pick = np.nanmax(stacked, axis=0) if mode == "hi" else np.nanmin(stacked, axis=0)
        pick = np.where(np.isnan(stacked).any(axis=0), cands[0], pick)
    return round_bf16(pick) if dtype == "bfloat16" else pick.astype(first.dtype)


# float32 functions of the approximate instructions: (rules attribute, the exact function in float64)
_UNARY: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "sqrt": ("sqrt", np.sqrt), "rsqrt": ("rsqrt", lambda w: 1.0 / np.sqrt(w)), "exp2": ("exp2", np.exp2),
    "log2": ("log2", np.log2), "log": ("log", np.log)}


class FloatOps(BuilderOps):
    """The interpreter's float builder methods as the open faithful block's target computes them: one
    method per interpreter op (``op(inner, builder, *args)``, ``inner`` the method replaced), the table
    in :meth:`table`. ``active()`` is the open faithful block (None: the replaced methods run);
    ``note_division(target, known)`` is told of every float32 ``/`` the target divides approximately (``known``:
    every quotient of it known bit for bit, as sm90's through its measured reciprocals), ``note_nan_clamp(target,
    rule, count)`` of every ``tl.clamp`` that turned ``count`` NaN elements into numbers. A
    target's rule for an op is the op's method here, reading the target's
    :class:`~fp8check.triton.targets.OpRules`."""

    def __init__(self, interp: Any, active: Callable[[], Any],
                 note_division: Callable[[Any, bool], None] = lambda target, known: None,
                 note_nan_clamp: Callable[[Any, str, int], None] = lambda target, rule, count: None) -> None:
        import triton.language as tl

        self.interp, self.active, self.note_division = interp, active, note_division
        self.note_nan_clamp = note_nan_clamp
        self.tl, self.TensorHandle = tl, interp.TensorHandle
        self.BF16, self.F32 = tl.bfloat16, tl.float32

    def table(self) -> dict[str, Callable[..., Any]]:
        p = functools.partial
        ops: dict[str, Callable[..., Any]] = {
            "get_fp32": self.get_const, "get_fp16": self.get_const, "get_null_value": self.get_null_value,
            "create_splat": self.create_splat, "create_broadcast": self.create_broadcast,
            "create_fneg": self.create_fneg, "create_fadd": self.create_fadd, "create_fsub": self.create_fsub,
            "create_fmul": self.create_fmul, "create_fma": self.create_fma, "create_fdiv": self.create_fdiv,
            "create_precise_divf": self.create_precise_divf, "create_frem": self.create_frem,
            "create_minimumf": p(self.minmax, maximum=False, propagate=True),
            "create_maximumf": p(self.minmax, maximum=True, propagate=True),
            "create_minnumf": p(self.minmax, maximum=False, propagate=False),
            "create_maxnumf": p(self.minmax, maximum=True, propagate=False),
            "create_clampf": self.create_clampf,
            "create_sqrt": p(self.approximate_unary, "sqrt"),
            "create_precise_sqrt": self.create_precise_sqrt,
            "create_rsqrt": p(self.approximate_unary, "rsqrt"),
            "create_exp": self.create_exp, "create_exp2": p(self.approximate_unary, "exp2"),
            "create_log": p(self.approximate_unary, "log"), "create_log2": p(self.approximate_unary, "log2"),
            "cast_impl": self.cast_impl,
        }
        return ops

    def install(self, scope: Any, builder: type) -> None:
        """Every op of :meth:`table`, every ``create_fcmp*``, the float kernel arguments and the reductions."""
        self.install_ops(scope, builder)
        for name in [n for n in builder.__dict__ if n.startswith("create_fcmp")]:
            scope.set(builder, name, self.bind(name, builder.__dict__[name], self.fcmp))
        orig_cvt = getattr(self.interp, "_implicit_cvt", None)
        if orig_cvt is not None:
            scope.set(self.interp, "_implicit_cvt", functools.partial(self.implicit_cvt, orig_cvt))
        reduce_ops = getattr(self.interp, "ReduceOps", None)
        if reduce_ops is not None and "apply_impl" in reduce_ops.__dict__:
            self._reduce_combines()
            orig_apply = reduce_ops.__dict__["apply_impl"]

            def apply_impl(reduce: Any, input: Any) -> Any:
                return self.reduce(orig_apply, reduce, input)

            scope.set(reduce_ops, "apply_impl", apply_impl)

    # -- helpers ------------------------------------------------------------------------

    def target(self) -> Any:
        a = self.active()
        return None if a is None else a.target

    def rules(self) -> Any:
        t = self.target()
        return None if t is None else t.ops

    def is_bf16(self, h: Any) -> bool:
        return h.dtype.scalar == self.BF16

    def values(self, h: Any) -> np.ndarray:
        return widen_bf16(h.data) if self.is_bf16(h) else np.asarray(h.data)

    def result(self, like: Any, data: np.ndarray, r: Any, operands: Sequence[np.ndarray] | None = None) -> Any:
        """A handle of ``like``'s type; ``operands`` given: an arithmetic result, whose NaNs are the target's."""
        data = np.asarray(data)
        if operands is not None:
            data = canonical_nans(data, r.arith_nan, operands)
        if self.is_bf16(like):
            return self.TensorHandle(round_bf16(np.asarray(data, dtype=np.float32), r.bf16_nan), self.BF16)
        return self.TensorHandle(data.astype(np.asarray(like.data).dtype, copy=False), like.dtype.scalar)

    @staticmethod
    def floating(*hs: Any) -> bool:
        return all(h.dtype.scalar.is_floating() for h in hs)

    # -- constants and provenance ---------------------------------------------------------

    def get_const(self, inner: Any, builder: Any, value: Any) -> Any:
        h = inner(builder, value)
        h.attr[_CONST] = float(value)
        return h

    def get_null_value(self, inner: Any, builder: Any, ty: Any) -> Any:
        # Triton 3.6 negates a float as get_null_value(ty) - x: the zero the clamp pattern looks for
        h = inner(builder, ty)
        if np.asarray(h.data).dtype.kind == "f" or h.dtype.scalar == self.BF16:
            h.attr[_CONST] = 0.0
        return h

    def create_splat(self, inner: Any, builder: Any, *args: Any) -> Any:
        h = inner(builder, *args)
        _inherit(h, args[-1], splat=True)
        return h

    def create_broadcast(self, inner: Any, builder: Any, arg: Any, shape: Any) -> Any:
        h = inner(builder, arg, shape)
        _inherit(h, arg, splat=False)
        return h

    def implicit_cvt(self, orig_cvt: Any, arg: Any) -> Any:
        # A float kernel argument is a runtime float32 value, not a constant the compiler can fold
        # (the interpreter passes it on as a Python float, which the clamp pattern would read as one).
        if isinstance(arg, float) and self.rules() is not None:
            return self.tl.tensor(self.TensorHandle(np.array([arg], dtype=np.float32), self.F32), self.F32)
        return orig_cvt(arg)

    # -- arithmetic -----------------------------------------------------------------------

    def create_fneg(self, inner: Any, builder: Any, x: Any) -> Any:
        r = self.rules()
        if r is None or not self.is_bf16(x):
            h = inner(builder, x)
        else:
            h = self.TensorHandle((np.asarray(x.data).view(np.uint16) ^ np.uint16(0x8000)).astype(np.uint16),
                                  self.BF16)
        h.attr[_NEG] = ("negf", _root(x))
        if _CONST in x.attr:
            h.attr[_CONST] = -x.attr[_CONST]
        return h

    def create_frem(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        r = self.rules()
        if r is None or not self.floating(a, b):
            return inner(builder, a, b)
        x, y = self.values(a), self.values(b)
        with np.errstate(all="ignore"):
            return self.result(a, np.fmod(x, y), r, (x, y))

    def contracted(self, inner: Any, builder: Any, a: Any, b: Any, subtract: bool) -> Any:
        """``a + b`` / ``a - b``, an fma where an operand is a product the target contracts into it."""
        r = self.rules()
        if r is None or not self.floating(a, b):
            return inner(builder, a, b)
        dtype = "bfloat16" if self.is_bf16(a) else str(np.asarray(a.data).dtype)
        va, vb = self.values(a), self.values(b)
        if dtype in r.fma_contraction and fp_fusion_enabled():
            fused = []  # every way the compiler may contract the sum, the first product first
            for prod, other, prod_first in ((a, vb, True), (b, va, False)):
                if _PRODUCT in prod.attr:
                    x, y = prod.attr[_PRODUCT]
                    c = other
                    if subtract:
                        c, x = (-c, x) if prod_first else (c, -x)
                    fused.append((fma(x, y, c, dtype), (x, y, c)))
            if fused:
                out, operands = fused[0]
                if len(fused) == 2 and r.fma_pair == "either":
                    out = _either_contraction(fused, va, vb, subtract, dtype)
                if dtype == "bfloat16":
                    out = round_bf16(canonical_nans(widen_bf16(out), r.arith_nan, operands), r.bf16_nan)
                    return self.TensorHandle(out, self.BF16)
                return self.TensorHandle(canonical_nans(out, r.arith_nan, operands), a.dtype.scalar)
        with np.errstate(all="ignore"):
            data = va - vb if subtract else va + vb
        return self.result(a, data, r, (va, vb))

    def create_fadd(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        return self.contracted(inner, builder, a, b, False)

    def create_fsub(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        h = self.contracted(inner, builder, a, b, True)
        if a.attr.get(_CONST) == 0.0:  # 0 - x: how Triton 3.6 negates, a form the clamp pattern reads
            h.attr[_NEG] = ("sub0", _root(b))
        return h

    def create_fmul(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        r = self.rules()
        if r is None or not self.floating(a, b):
            return inner(builder, a, b)
        x, y = np.broadcast_arrays(self.values(a), self.values(b))
        with np.errstate(all="ignore"):
            h = self.result(a, x * y, r, (x, y))
        h.attr[_PRODUCT] = (x, y)
        return h

    def create_fma(self, inner: Any, builder: Any, x: Any, y: Any, z: Any) -> Any:
        r = self.rules()
        if r is None or not self.floating(x, y, z):
            return inner(builder, x, y, z)
        vx, vy, vz = self.values(x), self.values(y), self.values(z)
        dtype = "bfloat16" if self.is_bf16(z) else str(vz.dtype)
        if dtype not in ("float32", "float16", "bfloat16"):
            return inner(builder, x, y, z)
        out = fma(vx, vy, vz, dtype)
        if dtype == "bfloat16":
            return self.TensorHandle(round_bf16(canonical_nans(widen_bf16(out), r.arith_nan, (vx, vy, vz)),
                                                r.bf16_nan), self.BF16)
        return self.TensorHandle(canonical_nans(out, r.arith_nan, (vx, vy, vz)), z.dtype.scalar)

    def divide(self, inner: Any, builder: Any, a: Any, b: Any, precise: bool) -> Any:
        r = self.rules()
        if r is None or not self.floating(a, b):
            return inner(builder, a, b)
        x, y = self.values(a), self.values(b)
        with np.errstate(all="ignore"):
            q = np.divide(x, y)
            if not precise and q.dtype == np.float32 and not self.is_bf16(a):
                c = b.attr.get(_CONST)
                target = self.target()
                if c is not None and r.approx_model == "sm90":
                    q = self.sm90_divide_by_constant(x, y, c)
                elif c is not None and r.fdiv_const == "reciprocal":
                    self.note_division(target, False)
                    q = divide_by_constant(x, float(c), r.fdiv_const, r.fdiv_const_bound, r.fdiv)
                elif r.fdiv is not None:
                    q, known = divide_f32(x, y, target, end=bracket_mode())
                    self.note_division(target, bool(known.all()) and r.approx_model == "sm90")
        return self.result(a, q, r, (x, y))

    def sm90_divide_by_constant(self, x: np.ndarray, y: np.ndarray, c: Any) -> np.ndarray:
        """``x / C`` for a compile-time ``C`` as ptxas folds it on sm90 (nvidia_approx): exact where the
        reciprocal is known; elsewhere counted, noted and bracketed (1 ulp in the reciprocal)."""
        q, known = nvidia_approx.divide_by_constant(np.broadcast_to(x, np.broadcast(x, y).shape), float(c),
                                                    end=bracket_mode(), lowering="div.approx")
        if not known.all():
            _counted("fdiv_const")
        self.note_division(self.target(), bool(known.all()))
        return q

    def create_fdiv(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        return self.divide(inner, builder, a, b, False)

    def create_precise_divf(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        return self.divide(inner, builder, a, b, True)

    # -- min, max, clamp ------------------------------------------------------------------

    def minmax(self, inner: Any, builder: Any, a: Any, b: Any, *, maximum: bool, propagate: bool) -> Any:
        r = self.rules()
        if r is None or not self.floating(a, b):
            return inner(builder, a, b)
        out = minmax(self.values(a), self.values(b), maximum=maximum, propagate_nan=propagate,
                     zeros=r.minmax_zeros, nan=r.nan_pattern)
        return self.result(a, out, r)

    def create_clampf(self, inner: Any, builder: Any, x: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        r = self.rules()
        if r is None:
            return inner(builder, x, lo, hi, propagate_nans)
        propagate = "ALL" in str(getattr(propagate_nans, "name", propagate_nans)).upper()
        rule = r.bf16_clamp if self.is_bf16(x) else r.clamp
        if rule == "xorsign_abs" and not _clip_pattern(lo, hi, r.clip_patterns):
            rule = "minmax"
        xv = self.values(x)
        out = clamp(xv, self.values(lo), self.values(hi), rule=rule, propagate_nan=propagate,
                    zeros=r.minmax_zeros, nan=r.nan_pattern)
        if not propagate and np.issubdtype(np.asarray(xv).dtype, np.floating):
            with np.errstate(invalid="ignore"):
                lost = int(np.count_nonzero(np.isnan(xv) & ~np.isnan(out)))
            if lost:
                self.note_nan_clamp(self.target(), rule, lost)
        return self.result(x, out, r)

    # -- square roots and transcendentals ---------------------------------------------------

    def unary(self, inner: Any, builder: Any, x: Any, compute: Callable[[Any, np.ndarray], np.ndarray]) -> Any:
        r = self.rules()
        if r is None or not self.floating(x):
            return inner(builder, x)
        v = self.values(x)
        if v.dtype != np.float32:  # float16/float64: libdevice/ocml in their own precision; Triton's
            return inner(builder, x)  # frontend computes bfloat16 math in float32
        with np.errstate(all="ignore"):
            return self.result(x, compute(r, v), r, (v,))

    @staticmethod
    def _apply(how: Any, v: np.ndarray, exact: Callable[[np.ndarray], np.ndarray], op: str,
               model: str = "") -> np.ndarray:
        v = _ftz(v) if how.ftz else v
        if model == "sm90" and op in ("sqrt", "rsqrt"):  # MUFU.SQRT/RSQ measured for every input (H200)
            return nvidia_approx.mufu_root(op, v)
        # the inputs whose result the target's model knows (sm90: ex2 of integers, log2 of 2^k)
        known = nvidia_approx.EXACT_INPUTS[op](v) if model == "sm90" and op in nvidia_approx.EXACT_INPUTS else None
        return approximate(exact(v.astype(np.float64)), how.bound, op=op, ftz=how.ftz, known=known)

    def approximate_unary(self, op: str, inner: Any, builder: Any, x: Any) -> Any:
        """``sqrt``, ``rsqrt``, ``exp2``, ``log2``, ``log``: the target's instruction (exact or bracketed)."""
        attr, exact = _UNARY[op]
        return self.unary(inner, builder, x,
                          lambda r, v: self._apply(getattr(r, attr), v, exact, op, r.approx_model))

    def create_precise_sqrt(self, inner: Any, builder: Any, x: Any) -> Any:
        return self.unary(inner, builder, x, lambda r, v: np.sqrt(v))  # sqrt.rn: exact

    def create_exp(self, inner: Any, builder: Any, x: Any) -> Any:
        # x * log2(e) rounded to float32 (a separate mul on every target here), then 2^that
        return self.unary(inner, builder, x, lambda r, v: self._apply(
            r.exp, (v * np.float32(1.4426950408889634)).astype(np.float32), np.exp2, "exp"))

    # -- conversions and comparisons --------------------------------------------------------

    def cast_impl(self, inner: Any, builder: Any, src: Any, dst_type: Any) -> Any:
        r = self.rules()
        tl, BF16, F32 = self.tl, self.BF16, self.F32
        s, d = src.dtype.scalar, dst_type.scalar
        if r is not None and s.is_floating() and d in (tl.int32, tl.int64):
            return self._float_to_int(src, d)
        if r is None or not (s == BF16 or d == BF16):
            h = inner(builder, src, dst_type)
        elif s == BF16 and d == BF16:
            h = self.TensorHandle(np.asarray(src.data), BF16)
        elif s == BF16:  # widen exactly, then what float32 -> dst does
            wide = self.TensorHandle(widen_bf16(src.data), F32)
            h = wide if d == F32 else inner(builder, wide, dst_type)
        elif s == F32:
            h = self.TensorHandle(round_bf16(np.asarray(src.data, dtype=np.float32), r.bf16_nan), BF16)
        elif s.is_int() and r.int_to_bf16 == "direct":
            # one rounding from the integer (cvt.rn.bf16.s32): through float64 (exact for 32-bit
            # integers) and a float32 rounded to odd
            wide = np.asarray(src.data).astype(np.float64)
            h = self.TensorHandle(round_bf16(_to_odd_f32(wide, np.zeros(wide.shape, bool)), r.bf16_nan), BF16)
        else:  # via float32: two roundings (AMD's SIToFP lowering; float16 and float64 sources)
            f32 = inner(builder, src, F32)
            h = self.TensorHandle(round_bf16(np.asarray(f32.data, dtype=np.float32), r.bf16_nan), BF16)
        if _CONST in src.attr and h is not src:
            try:
                h.attr[_CONST] = float(np.asarray(self.values(h)).reshape(-1)[0])
            except (TypeError, ValueError, IndexError):
                pass
        return h

    def _float_to_int(self, src: Any, d: Any) -> Any:
        # cvt.rzi.s32.f32 / v_cvt_i32_f32: toward zero, saturating, NaN -> 0 (NumPy's cast is undefined)
        info = np.iinfo(np.int32 if d == self.tl.int32 else np.int64)
        with np.errstate(invalid="ignore"):
            v = np.trunc(self.values(src).astype(np.float64))
            v = np.where(np.isnan(v), 0.0, np.clip(v, float(info.min), float(info.max)))
            ints = np.where(v >= float(info.max), info.max, v.astype(info.dtype) if d == self.tl.int32
                            else np.where(v >= 2.0 ** 63, 0, v).astype(info.dtype))
        return self.TensorHandle(ints.astype(info.dtype), d)

    def fcmp(self, inner: Any, builder: Any, a: Any, b: Any) -> Any:
        """Every ``create_fcmp*``: bfloat16 operands compared as the float32 values they are."""
        if self.rules() is None or not (self.is_bf16(a) or self.is_bf16(b)):
            return inner(builder, a, b)
        wa, wb = self.TensorHandle(self.values(a), self.F32), self.TensorHandle(self.values(b), self.F32)
        return inner(builder, wa, wb)

    # -- reductions -------------------------------------------------------------------------

    def _reduce_combines(self) -> None:
        std = self.tl.standard
        arg = {getattr(std, n, None): (n.startswith("_argmax"), n.endswith("_left")) for n in (
            "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast",
            "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast")}
        arg.pop(None, None)
        elementwise = {getattr(std, "_elementwise_max", None): True, getattr(std, "_elementwise_min", None): False}
        elementwise.pop(None, None)
        self.arg_combines, self.elementwise_combines = arg, elementwise

    def reduce(self, orig_apply: Any, reduce: Any, input: Any) -> Any:
        """``tl.max``/``tl.min``/``tl.argmax``/``tl.argmin`` with the target's rules (the interpreter's
        ReduceOps takes NumPy's nanmax/nanargmax shortcut for them)."""
        r = self.rules()
        fn = reduce.combine_fn
        arg, elementwise = self.arg_combines, self.elementwise_combines
        if r is None or (fn not in arg and fn not in elementwise):
            return orig_apply(reduce, input)
        t = input[0]
        if not t.dtype.scalar.is_floating():
            return orig_apply(reduce, input)
        bf16 = t.dtype.scalar == self.BF16
        x = self.values(t.handle)
        if fn in elementwise:
            out = reduce_minmax(x, reduce.axis, reduce.keep_dims, maximum=elementwise[fn], zeros=r.minmax_zeros,
                                nan=r.nan_pattern)
            return reduce.to_tensor(round_bf16(out, r.bf16_nan) if bf16 else out, t.dtype)
        val, idx = argminmax(x, reduce.axis, reduce.keep_dims, maximum=arg[fn][0], tie_left=arg[fn][1])
        return (reduce.to_tensor(round_bf16(val, r.bf16_nan) if bf16 else val, t.dtype),
                reduce.to_tensor(idx, self.tl.int32))

"""The faithful interpreter's float arithmetic: every op as compiled Triton computes it on a target.

Triton's interpreter computes with NumPy: ``np.fmax``/``np.clip`` for
``tl.maximum``/``tl.clamp``, ``np.nanmax`` for ``tl.max``, IEEE division and
square roots, no fma contraction, and bfloat16 arithmetic on the uint16 bit
pattern (``int32 5 .to(tl.bfloat16)`` gives 4.6e-40). Compiled Triton differs
on every one of these, differently per target. This module replaces the
interpreter's builder methods while a :func:`~fp8check.triton.faithful`
block is open, following the target's :class:`~fp8check.triton.targets.OpRules`:

- ``minimum``/``maximum`` (``propagate_nan`` NONE: the non-NaN operand wins,
  +0 > -0 where the target says so; ALL: NaN wins), ``clamp`` (sm90 compiles
  symmetric bounds to ``min.xorsign.abs.f32``: NaN in, +bound out, found from
  how the bounds were built, as the compiler's pattern match finds them),
  ``tl.max``/``tl.min``/``tl.argmax``/``tl.argmin`` with the same rules;
- fma contraction of ``a * b + c`` (and ``a * b - c``, ``c - a * b``), rounded
  once, where the target contracts;
- ``/``, ``sqrt``, ``rsqrt``, ``exp``, ``exp2``, ``log2``, ``log``: exact where
  the instruction is specified (``div.rn``, ``sqrt.rn``, AMD's IEEE division);
  where it is not (NVIDIA's ``div.full.f32`` and ``.approx`` functions) the
  result is the correctly rounded one, and under :func:`bracket` the lowest or
  highest one the documented error bound allows (``lo``/``hi``): a code that
  changes between the three runs depends on the hardware's approximation;
- bfloat16 arithmetic, comparisons, min/max and int <-> bfloat16 casts on
  bfloat16 values, rounded to nearest even (the interpreter works on bits).

Every rule is data in :mod:`fp8check.triton.targets`; docs/triton.md says which
are pinned on an H200, which are derived from source and which are bracketed.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import numpy as np

__all__ = ["install", "bracket", "bracket_mode", "BRACKET_MODES", "fma", "round_bf16", "widen_bf16",
           "approximate", "minmax", "clamp", "reduce_minmax", "argminmax"]

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


def minmax(a: np.ndarray, b: np.ndarray, *, maximum: bool, propagate_nan: bool, zeros: str, nan: str) -> np.ndarray:
    """``tl.maximum``/``tl.minimum`` on float arrays.

    ``propagate_nan`` False (Triton's default): a NaN operand loses to the
    other one (IEEE maxNum, PTX ``max.f32``); both NaN give ``nan``'s NaN.
    True: any NaN operand gives ``nan``'s NaN. ``zeros``: ``ordered``
    (-0 < +0, PTX's rule), ``either`` (unspecified: the bracket's ``lo``
    mode takes -0, ``hi`` +0, ``rn`` the first operand)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    with np.errstate(invalid="ignore"):
        out = np.fmax(a, b) if maximum else np.fmin(a, b)
        both_zero = (a == 0) & (b == 0)
        if both_zero.any():
            neg_a, neg_b = np.signbit(a), np.signbit(b)
            if zeros == "ordered":
                negative = (neg_a & neg_b) if maximum else (neg_a | neg_b)
            else:
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


def clamp(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, rule: str, propagate_nan: bool, zeros: str,
          nan: str) -> np.ndarray:
    """``tl.clamp``: ``xorsign_abs`` (sm90's ``min.xorsign.abs.f32 x, hi``:
    ``min(|x|, |hi|)`` with the sign ``sign(x) ^ sign(hi)``; a NaN ``x`` gives
    ``hi``, measured on the H200; with ``propagate_nan`` the NaN), ``med3``
    (AMD's ``v_med3_f32``: NaN gives ``lo``) or ``minmax``
    (``min(max(x, lo), hi)`` with :func:`minmax`'s rules)."""
    x, lo, hi = np.broadcast_arrays(np.asarray(x), np.asarray(lo), np.asarray(hi))
    with np.errstate(invalid="ignore"):
        if rule == "xorsign_abs":
            mag = np.fmin(np.abs(x), np.abs(hi))
            negative = np.signbit(x) ^ np.signbit(hi)
            out = np.where(negative, -mag, mag)
            out = np.where(np.isnan(x), np.abs(hi), out)
            if propagate_nan:
                out = np.where(np.isnan(x) | np.isnan(hi), _nan_like(out, nan), out)
            return out.astype(x.dtype, copy=False)
        out = minmax(minmax(x, lo, maximum=True, propagate_nan=propagate_nan, zeros=zeros, nan=nan), hi,
                     maximum=False, propagate_nan=propagate_nan, zeros=zeros, nan=nan)
        if rule == "med3" and propagate_nan:
            out = np.where(np.isnan(x), x, out)  # the select on x != x keeps x's own NaN
        return out.astype(x.dtype, copy=False)


def reduce_minmax(x: np.ndarray, axis: int | None, keepdims: bool, *, maximum: bool, zeros: str,
                  nan: str) -> np.ndarray:
    """``tl.max``/``tl.min``: the ``maxNum`` combine (NaN ignored unless every
    element is NaN) with the target's signed-zero rule."""
    with np.errstate(invalid="ignore"), _quiet_all_nan():
        out = np.asarray(np.nanmax(x, axis=axis, keepdims=keepdims) if maximum
                         else np.nanmin(x, axis=axis, keepdims=keepdims))
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


@contextlib.contextmanager
def _quiet_all_nan() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def argminmax(x: np.ndarray, axis: int | None, keepdims: bool, *, maximum: bool) -> tuple[np.ndarray, np.ndarray]:
    """``tl.argmax``/``tl.argmin`` (tie break left): Triton's combine
    ``gt = v1 > v2 or (v1 == v2 and i1 < i2)`` ignores NaN only when the NaN
    is not where the reduction tree starts, so a row with a NaN gives an
    index that depends on the compiled reduction order (layout, warps):
    ``rn`` the leftmost non-NaN extreme, ``lo``/``hi`` the first/last NaN
    (the NaN row is target-dependent)."""
    with np.errstate(invalid="ignore"), _quiet_all_nan():
        flat_axis = axis
        data = x
        if axis is None:
            data, flat_axis = x.reshape(-1), 0
        nan = np.isnan(data)
        filled = np.where(nan, -np.inf if maximum else np.inf, data)
        idx = np.argmax(filled, axis=flat_axis) if maximum else np.argmin(filled, axis=flat_axis)
        any_nan = nan.any(axis=flat_axis)
        if any_nan.any():
            _counted("argmax_nan")
            mode = bracket_mode()
            if mode in ("lo", "hi"):
                first = np.argmax(nan, axis=flat_axis)
                last = nan.shape[flat_axis] - 1 - np.argmax(np.flip(nan, axis=flat_axis), axis=flat_axis)
                idx = np.where(any_nan, first if mode == "lo" else last, idx)
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


def approximate(exact: np.ndarray, bound: Any, *, op: str = "") -> np.ndarray:
    """The float32 result of an instruction whose result is bounded, not specified.

    ``exact``: the true result (float64). ``bound``: a
    :class:`~fp8check.triton.targets.ErrorBound` (None: exact). ``rn`` mode:
    the correctly rounded result; ``lo``/``hi``: the lowest/highest float32
    the bound allows. Zero, infinite and NaN results are the instructions'
    specified special cases and stay exact."""
    exact = np.asarray(exact, dtype=np.float64)
    with np.errstate(all="ignore"):
        rn = exact.astype(np.float32)
    if bound is None:
        return rn
    _counted(op or "approximate")
    mode = bracket_mode()
    if mode == "rn":
        return rn
    up = mode == "hi"
    with np.errstate(all="ignore"):
        width = np.maximum(bound.rel * np.abs(exact), bound.abs)
        out = _floor32(exact + width) if up else _ceil32(exact - width)
        if bound.ulps:
            out = np.maximum(out, _step(rn, bound.ulps, True)) if up else np.minimum(out, _step(rn, bound.ulps, False))
        keep = ~np.isfinite(rn) | (rn == 0)
        return np.where(keep, rn, out).astype(np.float32)


def _ftz(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    return np.where((np.abs(x) < tiny) & (x != 0), np.copysign(np.float32(0), x), x).astype(np.float32)


# -- the builder patch --------------------------------------------------------------

_ROOT, _NEG_OF, _CONST, _PRODUCT = "fp8check_root", "fp8check_neg_of", "fp8check_const", "fp8check_product"


def _root(h: Any) -> Any:
    return h.attr.get(_ROOT, h)


def install(saved: list, set_attr: Callable[..., None], builder: type, interp: Any,
            active: Callable[[], Any], note_division: Callable[[Any], None] = lambda target: None) -> None:
    """Replace the interpreter's float builder methods (``builder``: its
    ``InterpreterBuilder``); ``active()`` is the open faithful block (or
    None, when the originals run). ``set_attr(saved, obj, name, value)``
    records what it replaces, for the caller to restore; ``note_division(target)``
    is told of every float32 ``/`` the target divides approximately."""
    import triton.language as tl

    TensorHandle = interp.TensorHandle
    orig = {name: builder.__dict__[name] for name in (
        "create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_fneg",
        "create_minimumf", "create_maximumf", "create_minnumf", "create_maxnumf", "create_clampf",
        "create_fma", "create_sqrt", "create_precise_sqrt", "create_rsqrt", "create_exp", "create_exp2",
        "create_log", "create_log2", "create_precise_divf", "create_splat", "create_broadcast",
        "get_fp32", "get_fp16", "cast_impl") if name in builder.__dict__}
    orig.update({name: builder.__dict__[name] for name in builder.__dict__
                 if name.startswith("create_fcmp")})
    BF16, F32 = tl.bfloat16, tl.float32

    def rules() -> Any:
        a = active()
        return None if a is None else a.target.ops

    def is_bf16(h: Any) -> bool:
        return h.dtype.scalar == BF16

    def values(h: Any) -> np.ndarray:
        return widen_bf16(h.data) if is_bf16(h) else np.asarray(h.data)

    def result(like: Any, data: np.ndarray, r: Any) -> Any:
        if is_bf16(like):
            return TensorHandle(round_bf16(np.asarray(data, dtype=np.float32), r.bf16_nan), BF16)
        return TensorHandle(np.asarray(data).astype(np.asarray(like.data).dtype, copy=False), like.dtype.scalar)

    def floating(*hs: Any) -> bool:
        return all(h.dtype.scalar.is_floating() for h in hs)

    # provenance the compiler's pattern matches look at: constants, negations, splats, products
    def get_const(name: str) -> Callable[..., Any]:
        def get(self: Any, value: Any) -> Any:
            h = orig[name](self, value)
            h.attr[_CONST] = float(value)
            return h
        return get

    def create_splat(self: Any, *args: Any) -> Any:
        src = args[-1]
        h = orig["create_splat"](self, *args)
        _inherit(h, src)
        return h

    def create_broadcast(self: Any, arg: Any, shape: Any) -> Any:
        h = orig["create_broadcast"](self, arg, shape)
        _inherit(h, arg)
        return h

    def _inherit(h: Any, src: Any) -> None:
        h.attr[_ROOT] = _root(src)
        for key in (_NEG_OF, _CONST):
            if key in src.attr:
                h.attr[key] = src.attr[key]

    def create_fneg(self: Any, x: Any) -> Any:
        r = rules()
        if r is None or not is_bf16(x):
            h = orig["create_fneg"](self, x)
        else:
            h = TensorHandle((np.asarray(x.data).view(np.uint16) ^ np.uint16(0x8000)).astype(np.uint16), BF16)
        h.attr[_NEG_OF] = _root(x)
        if _CONST in x.attr:
            h.attr[_CONST] = -x.attr[_CONST]
        return h

    def binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., Any]:
        def op(self: Any, a: Any, b: Any) -> Any:
            r = rules()
            if r is None or not (is_bf16(a) or is_bf16(b)):
                return orig[name](self, a, b)
            with np.errstate(all="ignore"):
                return result(a, fn(values(a), values(b)), r)
        return op

    def contracted(self: Any, a: Any, b: Any, subtract: bool) -> Any:
        r = rules()
        name = "create_fsub" if subtract else "create_fadd"
        if r is None or not floating(a, b):
            return orig[name](self, a, b)
        dtype = "bfloat16" if is_bf16(a) else str(np.asarray(a.data).dtype)
        if r.fma_contraction and dtype in ("float32", "float16", "bfloat16"):
            for prod, other, prod_first in ((a, b, True), (b, a, False)):
                if _PRODUCT in prod.attr:
                    x, y = prod.attr[_PRODUCT]
                    c = values(other)
                    if subtract:
                        c, x = (-c, x) if prod_first else (c, -x)
                    out = fma(x, y, c, dtype)
                    if dtype == "bfloat16":
                        return TensorHandle(out, BF16)
                    return TensorHandle(out, a.dtype.scalar)
        with np.errstate(all="ignore"):
            data = values(a) - values(b) if subtract else values(a) + values(b)
        return result(a, data, r)

    def create_fadd(self: Any, a: Any, b: Any) -> Any:
        return contracted(self, a, b, False)

    def create_fsub(self: Any, a: Any, b: Any) -> Any:
        h = contracted(self, a, b, True)
        if a.attr.get(_CONST) == 0.0:  # 0 - x: what the clamp pattern reads as a negation
            h.attr[_NEG_OF] = _root(b)
        return h

    def create_fmul(self: Any, a: Any, b: Any) -> Any:
        r = rules()
        if r is None or not floating(a, b):
            return orig["create_fmul"](self, a, b)
        x, y = np.broadcast_arrays(values(a), values(b))
        with np.errstate(all="ignore"):
            h = result(a, x * y, r)
        h.attr[_PRODUCT] = (x, y)
        return h

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        r = rules()
        if r is None or not is_bf16(z):
            return orig["create_fma"](self, x, y, z)
        return TensorHandle(fma(values(x), values(y), values(z), "bfloat16"), BF16)

    def divide(self: Any, a: Any, b: Any, precise: bool) -> Any:
        r = rules()
        name = "create_precise_divf" if precise else "create_fdiv"
        if r is None or not floating(a, b):
            return orig[name](self, a, b)
        x, y = values(a), values(b)
        with np.errstate(all="ignore"):
            q = np.divide(x, y)
            if not precise and q.dtype == np.float32 and not is_bf16(a) and r.fdiv is not None:
                note_division(active().target)
                q = approximate(x.astype(np.float64) / y.astype(np.float64), r.fdiv, op="fdiv")
        return result(a, q, r)

    def create_fdiv(self: Any, a: Any, b: Any) -> Any:
        return divide(self, a, b, False)

    def create_precise_divf(self: Any, a: Any, b: Any) -> Any:
        return divide(self, a, b, True)

    def minmax_op(name: str, maximum: bool, propagate: bool) -> Callable[..., Any]:
        def op(self: Any, a: Any, b: Any) -> Any:
            r = rules()
            if r is None or not floating(a, b):
                return orig[name](self, a, b)
            out = minmax(values(a), values(b), maximum=maximum, propagate_nan=propagate, zeros=r.minmax_zeros,
                         nan=r.nan_pattern)
            return result(a, out, r)
        return op

    def create_clampf(self: Any, x: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        r = rules()
        if r is None:
            return orig["create_clampf"](self, x, lo, hi, propagate_nans)
        propagate = "ALL" in str(getattr(propagate_nans, "name", propagate_nans)).upper()
        rule = r.clamp
        if rule == "xorsign_abs" and not _symmetric(lo, hi):
            rule = "minmax"
        out = clamp(values(x), values(lo), values(hi), rule=rule, propagate_nan=propagate, zeros=r.minmax_zeros,
                    nan=r.nan_pattern)
        return result(x, out, r)

    def _symmetric(lo: Any, hi: Any) -> bool:
        # the pattern Triton's ClampFOpConversion matches: lo is -hi (negf, 0 - hi) or both are constants
        # lo == -hi. "hi" after CSE: the same handle, or one holding the same bits (two tl.abs(b) calls are
        # one value in the compiled IR)
        negated = lo.attr.get(_NEG_OF)
        if negated is not None:
            h = _root(hi)
            if negated is h:
                return True
            x, y = np.asarray(negated.data), np.asarray(h.data)
            if x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes():
                return True
        c_lo, c_hi = lo.attr.get(_CONST), hi.attr.get(_CONST)
        return c_lo is not None and c_hi is not None and c_lo == -c_hi

    def unary(name: str, compute: Callable[[Any, np.ndarray], np.ndarray]) -> Callable[..., Any]:
        def op(self: Any, x: Any) -> Any:
            r = rules()
            if r is None or not floating(x) or np.asarray(x.data).dtype == np.float64 and not is_bf16(x):
                return orig[name](self, x)
            v = values(x)
            if v.dtype != np.float32:  # float16: computed in float32 by every target here, rounded back
                return orig[name](self, x)
            with np.errstate(all="ignore"):
                return result(x, compute(r, v), r)
        return op

    def sqrt(r: Any, v: np.ndarray) -> np.ndarray:
        v = _ftz(v) if r.sqrt.ftz else v
        return approximate(np.sqrt(v.astype(np.float64)), r.sqrt.bound, op="sqrt")

    def rsqrt(r: Any, v: np.ndarray) -> np.ndarray:
        v = _ftz(v) if r.rsqrt.ftz else v
        return approximate(1.0 / np.sqrt(v.astype(np.float64)), r.rsqrt.bound, op="rsqrt")

    def exp2(r: Any, v: np.ndarray) -> np.ndarray:
        v = _ftz(v) if r.exp2.ftz else v
        return approximate(np.exp2(v.astype(np.float64)), r.exp2.bound, op="exp2")

    def exp(r: Any, v: np.ndarray) -> np.ndarray:
        # x * log2(e) rounded to float32, then exp2 (NVIDIA's ex2.approx, AMD's llvm.exp2): both targets
        return exp2(r, (v * np.float32(1.4426950408889634)).astype(np.float32))

    def log2(r: Any, v: np.ndarray) -> np.ndarray:
        v = _ftz(v) if r.log2.ftz else v
        return approximate(np.log2(v.astype(np.float64)), r.log2.bound, op="log2")

    def log(r: Any, v: np.ndarray) -> np.ndarray:
        v = _ftz(v) if r.log.ftz else v
        return approximate(np.log(v.astype(np.float64)), r.log.bound, op="log")

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        r = rules()
        s, d = src.dtype.scalar, dst_type.scalar
        if r is not None and s.is_floating() and d in (tl.int32, tl.int64):
            # cvt.rzi.s32.f32 / v_cvt_i32_f32: toward zero, saturating, NaN -> 0 (NumPy's cast is undefined)
            info = np.iinfo(np.int32 if d == tl.int32 else np.int64)
            with np.errstate(invalid="ignore"):
                v = np.trunc(values(src).astype(np.float64))
                v = np.where(np.isnan(v), 0.0, np.clip(v, float(info.min), float(info.max)))
                ints = np.where(v >= float(info.max), info.max, v.astype(info.dtype) if d == tl.int32
                                else np.where(v >= 2.0 ** 63, 0, v).astype(info.dtype))
            return TensorHandle(ints.astype(info.dtype), d)
        if r is None or not (s == BF16 or d == BF16):
            h = orig["cast_impl"](self, src, dst_type)
        elif s == BF16 and d == BF16:
            h = TensorHandle(np.asarray(src.data), BF16)
        elif s == BF16:  # widen exactly, then what float32 -> dst does
            wide = TensorHandle(widen_bf16(src.data), F32)
            h = wide if d == F32 else orig["cast_impl"](self, wide, dst_type)
        elif s == F32:
            h = TensorHandle(round_bf16(np.asarray(src.data, dtype=np.float32), r.bf16_nan), BF16)
        elif s.is_int() and r.int_to_bf16 == "direct":
            # one rounding from the integer (cvt.rn.bf16.s32): through float64 (exact for 32-bit
            # integers) and a float32 rounded to odd
            wide = np.asarray(src.data).astype(np.float64)
            h = TensorHandle(round_bf16(_to_odd_f32(wide, np.zeros(wide.shape, bool)), r.bf16_nan), BF16)
        else:  # via float32: two roundings (AMD's SIToFP lowering; float16 and float64 sources)
            f32 = orig["cast_impl"](self, src, F32)
            h = TensorHandle(round_bf16(np.asarray(f32.data, dtype=np.float32), r.bf16_nan), BF16)
        if _CONST in src.attr and h is not src:
            try:
                h.attr[_CONST] = float(np.asarray(values(h)).reshape(-1)[0])
            except (TypeError, ValueError, IndexError):
                pass
        return h

    def fcmp(name: str) -> Callable[..., Any]:
        def op(self: Any, a: Any, b: Any) -> Any:
            r = rules()
            if r is None or not (is_bf16(a) or is_bf16(b)):
                return orig[name](self, a, b)
            wa, wb = TensorHandle(values(a), F32), TensorHandle(values(b), F32)
            return orig[name](self, wa, wb)
        return op

    patches: dict[str, Any] = {
        "get_fp32": get_const("get_fp32"), "get_fp16": get_const("get_fp16"),
        "create_splat": create_splat, "create_broadcast": create_broadcast, "create_fneg": create_fneg,
        "create_fadd": create_fadd, "create_fsub": create_fsub, "create_fmul": create_fmul,
        "create_fma": create_fma, "create_fdiv": create_fdiv, "create_precise_divf": create_precise_divf,
        "create_frem": binary("create_frem", np.fmod),
        "create_minimumf": minmax_op("create_minimumf", False, True),
        "create_maximumf": minmax_op("create_maximumf", True, True),
        "create_minnumf": minmax_op("create_minnumf", False, False),
        "create_maxnumf": minmax_op("create_maxnumf", True, False),
        "create_clampf": create_clampf,
        "create_sqrt": unary("create_sqrt", sqrt),
        "create_precise_sqrt": unary("create_precise_sqrt", lambda r, v: np.sqrt(v)),  # sqrt.rn: exact
        "create_rsqrt": unary("create_rsqrt", rsqrt),
        "create_exp": unary("create_exp", exp), "create_exp2": unary("create_exp2", exp2),
        "create_log": unary("create_log", log), "create_log2": unary("create_log2", log2),
        "cast_impl": cast_impl,
    }
    patches.update({name: fcmp(name) for name in orig if name.startswith("create_fcmp")})
    for name, fn in patches.items():
        if name in orig:
            set_attr(saved, builder, name, fn)
    orig_cvt = getattr(interp, "_implicit_cvt", None)
    if orig_cvt is not None:
        def _implicit_cvt(arg: Any) -> Any:
            # A float kernel argument is a runtime float32 value, not a constant the compiler can fold
            # (the interpreter passes it on as a Python float, which the clamp pattern would read as one).
            if isinstance(arg, float) and rules() is not None:
                return tl.tensor(TensorHandle(np.array([arg], dtype=np.float32), F32), F32)
            return orig_cvt(arg)

        set_attr(saved, interp, "_implicit_cvt", _implicit_cvt)
    _install_reduce(saved, set_attr, interp, rules, values)


def _install_reduce(saved: list, set_attr: Callable[..., None], interp: Any, rules: Callable[[], Any],
                    values: Callable[[Any], np.ndarray]) -> None:
    """``tl.max``/``tl.min``/``tl.argmax``/``tl.argmin`` with the target's rules (the interpreter's
    ReduceOps takes NumPy's nanmax/nanargmax shortcut for them)."""
    reduce_ops = getattr(interp, "ReduceOps", None)
    if reduce_ops is None or "apply_impl" not in reduce_ops.__dict__:
        return
    import triton.language as tl

    orig_apply = reduce_ops.__dict__["apply_impl"]
    std = tl.standard
    arg = {getattr(std, n, None): (n.startswith("_argmax"), ) for n in (
        "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast",
        "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast")}
    arg.pop(None, None)
    elementwise = {getattr(std, "_elementwise_max", None): True, getattr(std, "_elementwise_min", None): False}
    elementwise.pop(None, None)

    def apply_impl(self: Any, input: Any) -> Any:
        r = rules()
        fn = self.combine_fn
        if r is None or (fn not in arg and fn not in elementwise):
            return orig_apply(self, input)
        t = input[0]
        if not t.dtype.scalar.is_floating():
            return orig_apply(self, input)
        bf16 = t.dtype.scalar == tl.bfloat16
        x = values(t.handle)
        if fn in elementwise:
            out = reduce_minmax(x, self.axis, self.keep_dims, maximum=elementwise[fn], zeros=r.minmax_zeros,
                                nan=r.nan_pattern)
            return self.to_tensor(round_bf16(out, r.bf16_nan) if bf16 else out, t.dtype)
        val, idx = argminmax(x, self.axis, self.keep_dims, maximum=arg[fn][0])
        return (self.to_tensor(round_bf16(val, r.bf16_nan) if bf16 else val, t.dtype),
                self.to_tensor(idx, tl.int32))

    set_attr(saved, reduce_ops, "apply_impl", apply_impl)

"""The tensor-core models of :mod:`fp8check.matmul.tensorcore` compiled by numba: one fused pass per output element.

:func:`chain` computes every output element of a GEMM (or every row pair of ``dot_instances``) over
the whole K chain -- all instruction steps, Triton's promotion -- in one call, reading each operand
code once per pass and keeping everything in registers: no table gathers, no temporaries.

- Decoding: an fp8/fp6/fp4 code is split by its bit fields (sign, exponent field, mantissa; the
  layout of each format is checked against its decode table by ``tensorcore._bit_layout`` before a
  kernel runs), so the inner loops are straight integer arithmetic that the compiler vectorises.
- Arithmetic: integers only. A product is ``sig_a * sig_b * 2**(e_a + e_b - Q)``; truncating it
  toward zero to ``2**(E - F)`` is a shift of its magnitude (``(sig << (F - Q)) >> (E - e)``, in
  int32), the truncated terms sum exactly (in int32 runs short enough to stay below 2**31 -- 16 lanes
  per vector, not int64's 8 -- the runs in int64; below 2**50 in every model), rounding down
  (CDNA3) is an arithmetic shift, and the result's float32 bits are assembled from the integer sum
  (truncation; CDNA3's floor then round to nearest even: the floored integer converted to float32
  where the result is a normal float32, else with selects).
- Lanes (paired rows of 8-bit codes without promotion: ``dot_instances``; ``aligned`` steps of 16 or 32 with or
  without e8m0 scales, CDNA3's two-stage steps of 16): 64 rows at a time, each step's codes transposed K-major,
  the step straight-line code over the rows (no reduction along K, the special codes, significands and exponent
  sums as bytes, the terms as float32 products truncated by the conversion to int32, the last rounding with
  selects; the next blocks' codes prefetched); a row that meets a special value is done again alone (a float
  sum's NaN or Inf; CDNA3: also a result the lanes' rounding does not cover, by the per-element step). A GEMM's
  ``aligned`` elements without promotion run 64 columns at a time the same way (:func:`_aligned_gemm_lanes`): a
  block of columns taken apart once for the whole K, a term the exact float32 product of the two codes' values
  times a power of two. Elsewhere sm89's k32 instruction (two chained aligned steps of 16) is one function
  (:func:`_aligned_pair`).
- e2m1 (Blackwell NVFP4/MXFP4, steps of 64 in groups of 16): a step's four group sums are one straight-line block
  of LLVM vector IR (:func:`_e2m1_ir`: x86's byte shuffle and multiply-add where the CPU has AVX2 or AVX-512BW,
  generic vector IR elsewhere, tested equal); paired rows finish _GROUP_LANES at a time in float64 lanes (every
  scaled group term an integer below 2**48: the sum is exact; the scales looked up in scalar code, row by row), a
  lane with a NaN scale or a special accumulator done again by the per-element step.
- Special values (NaN/Inf codes, NaN scales, a non-finite accumulator) leave the fast loop: the step's
  value is what a float sum of the products and ``c`` gives, as in the NumPy engine, told from the
  codes' bits (the layouts name the Inf codes).
- :func:`chain` takes the formats' layouts and the model's parameters as arguments (one compilation
  for every kind); :func:`specialised` compiles the same code for one kind with them as constants
  (known shifts and masks: about twice as fast), which ``tensorcore`` uses for calls of 2**22
  products or more and, once made, for every call of the kind.

Same models, same bits as the NumPy engine of tensorcore.py (tests/test_matmul_tensorcore.py compares
them on every instruction kind, edge cases included). Imported only when numba is installed (the
``fast`` extra) and ``FP8CHECK_NUMBA`` is not ``0``.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros
from numba.extending import intrinsic

__all__ = ["chain", "specialised", "cached", "ALIGNED", "TWO_STAGE", "GROUPED", "VERSION"]

VERSION = numba.__version__
ALIGNED, TWO_STAGE, GROUPED = 0, 1, 2  # the algorithms (tensorcore.MMAModel.algorithm)
_NAN_BITS, _POS_INF_BITS, _NEG_INF_BITS = 0x7FFFFFFF, 0x7F800000, 0xFF800000  # MMA-Sim's NaN


def _jit(fn: Any) -> Any:
    try:
        return numba.njit(nogil=True, cache=True, boundscheck=False)(fn)
    except RuntimeError:  # no cache locator: compile per process
        return numba.njit(nogil=True, boundscheck=False)(fn)


def _inline(fn: Any) -> Any:
    try:
        return numba.njit(nogil=True, cache=True, boundscheck=False, inline="always")(fn)
    except RuntimeError:
        return numba.njit(nogil=True, boundscheck=False, inline="always")(fn)


def _constants(element: Any) -> Any:
    """An intrinsic that makes a tuple of literals (a kind's layouts or model: see :func:`_specialise`) constants of
    the compiled code (``element``: every element's type, else each literal's own), so that its shifts and
    branches fold; any other tuple it returns as it is (:func:`chain`'s, read at run time)."""
    @intrinsic
    def constants(typingctx: Any, t: Any) -> Any:
        if not (isinstance(t, types.BaseTuple) and all(isinstance(x, types.Literal) for x in t.types)):
            return t(t), lambda context, builder, signature, args: args[0]
        out = types.Tuple([element or types.unliteral(x) for x in t.types])

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return context.make_tuple(builder, out, [context.get_constant(ty, x.literal_value)
                                                     for ty, x in zip(out.types, t.types)])
        return out(t), codegen
    return constants


_layout_constants, _model_constants = _constants(types.int32), _constants(None)


# -- pieces of a step --------------------------------------------------------------------------------

# The narrow arithmetic is written with int32 casts (numba widens every integer operation to int64; the casts
# let the compiler keep 16 lanes per vector): exponents, significands, and a truncated term (a significand
# product below 2**(ma + mb + 2) lifted by f - ma - mb: below 2**(f + 2), f <= 28 checked by the caller) fit.
_I = np.int32


@_inline
def _field(x: int, lay: tuple) -> tuple[int, int, int]:
    """(sign, significand, exponent) of code ``x`` of a format laid out as ``lay`` = (mantissa bits,
    exponent mask, bias, sign shift, ...): the value is ``(-1)**sign * sig * 2**(e - mantissa bits)``,
    ``e`` the exponent clamped to emin (subnormals: exponent field 0)."""
    ef = _I(_I(x >> lay[0]) & lay[1])
    sig = _I(_I(x & _I(_I(1 << lay[0]) - 1)) | _I(min(ef, _I(1)) << lay[0]))
    return _I(_I(x >> lay[3]) & 1), sig, _I(max(ef, _I(1)) - lay[2])


@_inline
def _exponent(x: int, lay: tuple) -> tuple[bool, int]:
    """(nonzero, exponent clamped to emin) of code ``x``: what the largest exponent needs."""
    return _I(x & lay[7]) != 0, _I(max(_I(_I(x >> lay[0]) & lay[1]), _I(1)) - lay[2])


@_inline
def _special(x: int, lay: tuple) -> bool:
    """A NaN/Inf code: ``x & mask == value``."""
    return _I(x & lay[4]) == lay[5]


@_inline
def _c_parts(bits: int) -> tuple[int, int, int, bool]:
    """(sign, significand, exponent clamped to -126, finite) of a float32 given by its bits; its value is
    ``sig * 2**(e - 23)``."""
    ef = (bits >> 23) & 0xFF
    sig = (bits & 0x7FFFFF) | (np.int64(ef != 0) << 23)
    return (bits >> 31) & 1, sig, max(ef, 1) - 127, ef != 0xFF


@_inline
def _shifted(x: int, left: int) -> int:
    """``x * 2**left`` rounded down (floor; toward zero for ``x >= 0``), both shifts always done: no branch."""
    return (x << max(left, 0)) >> min(max(-left, 0), 63)


@_inline
def _signed(mag: int, sign: int) -> int:
    return (mag ^ -sign) + sign


@_inline
def _special_bits(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, L: int, la: tuple, lb: tuple, cbits: int,
                  nan: bool) -> int:
    """A step with a special operand, scale or accumulator: what a float sum of its products and ``c`` gives
    (finite products cannot overflow float64): NaN, +Inf or -Inf. From the codes' bits: a product is NaN where an
    operand is NaN or Inf meets zero, else Inf of the operands' sign where one is Inf."""
    pos = neg = False
    if ((cbits >> 23) & 0xFF) == 0xFF:
        if cbits & 0x7FFFFF:
            nan = True
        elif cbits >> 31:
            neg = True
        else:
            pos = True
    if nan:  # a NaN stays NaN (a chain past its first special step mostly)
        return _NAN_BITS
    base = np.uint64(s0)
    nan_p = pos_p = neg_p = _I(0)
    for k in range(L):
        x, y = _I(a[i, base + np.uint64(k)]), _I(b[jb, base + np.uint64(k)])
        sx, sy = _I(_special(x, la)), _I(_special(y, lb))
        ix, iy = _I(_I(x & la[8]) == la[9]), _I(_I(y & lb[8]) == lb[9])
        zx, zy = _I(_I(_I(x & la[7]) == 0) & _I(1 - sx)), _I(_I(_I(y & lb[7]) == 0) & _I(1 - sy))
        p_nan = _I(_I(sx & _I(1 - ix)) | _I(sy & _I(1 - iy)) | _I(ix & zy) | _I(zx & iy))
        p_inf = _I(_I(ix | iy) & _I(1 - p_nan))
        sign = _I(_I(_I(x >> la[3]) ^ _I(y >> lb[3])) & 1)
        nan_p = _I(nan_p | p_nan)
        pos_p = _I(pos_p | _I(p_inf & _I(1 - sign)))
        neg_p = _I(neg_p | _I(p_inf & sign))
    pos, neg = pos or pos_p != 0, neg or neg_p != 0
    if nan_p or (pos and neg):
        return _NAN_BITS
    return _POS_INF_BITS if pos else _NEG_INF_BITS


@_inline
def _truncated_bits(total: int, u: int, g: int) -> int:
    """float32 bits of ``total * 2**u`` truncated toward zero to ``g`` fractional bits at its own exponent,
    float32's exponent range (below 2**-126 the grid 2**(-126 - g); from 2**128: Inf); zero is +0."""
    if total == 0:
        return 0
    sign = np.int64(total < 0)
    mag = -total if sign else total
    nb = 64 - leading_zeros(np.uint64(mag))
    ev = u + nb - 1
    if ev >= -126:
        drop = nb - (g + 1)
        if drop > 0:
            mag >>= drop
            nb -= drop
        if ev >= 128:
            return (sign << 31) | 0x7F800000
        frac = (mag << (24 - nb)) & 0x7FFFFF
        return (sign << 31) | ((ev + 127) << 23) | frac
    drop = -126 - g - u
    if drop > 0:
        mag = mag >> min(drop, 63)
        u = -126 - g
    if mag == 0:
        return 0
    return (sign << 31) | (mag << (u + 149))


@intrinsic
def _f32_bits(typingctx: Any, x: Any) -> Any:
    """The bits of a float32 as an int32 (a register move)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@_inline
def _floor_rne_bits(total: int, u: int, f2: int) -> int:
    """CDNA3's last rounding (:func:`_floor_rne_any`); a result inside float32's normal range (nearly all) through
    the FPU: after the floor to ``f2 + 1`` significant bits, the integer's conversion to float32 is its rounding
    to nearest even to 24 bits, and ``2**u`` an exponent shift."""
    mag = -total if total < 0 else total
    nb = 64 - leading_zeros(np.uint64(mag))
    drop = max(nb - f2 - 1, 0)
    bits = np.int64(_f32_bits(np.float32(total >> drop)))  # floor, then to nearest even
    field = ((bits >> 23) & 0xFF) + u + drop
    if total == 0 or u + nb - 1 < -126 or field < 1 or field > 254:
        return _floor_rne_any(total, u, f2)
    return (bits + ((u + drop) << 23)) & 0xFFFFFFFF


@_inline
def _floor_rne_any(total: int, u: int, f2: int) -> int:
    """CDNA3's last rounding: ``total * 2**u`` rounded down (floor) to ``f2`` fractional bits at its own
    exponent (clamped to -126), then to nearest even into float32 (past its range: Inf); zero is +0. Written
    with selects, not branches: the rounding decisions are data, and mispredicted branches cost more than
    the arithmetic."""
    mag = -total if total < 0 else total
    ev = max(u + 63 - leading_zeros(np.uint64(mag)), -126)
    drop = max(ev - f2 - u, 0)
    total >>= min(drop, 63)  # arithmetic: floor
    u += drop
    sign = np.int64(total < 0)
    mag = -total if sign else total
    drop = min(max(64 - leading_zeros(np.uint64(mag)) - 24, -149 - u, 0), 62)  # 24 bits, or the grid 2**-149
    kept = mag >> drop
    rest, half = mag - (kept << drop), (np.int64(1) << drop) >> 1
    mag = kept + np.int64((rest > half) | ((rest == half) & (drop > 0) & ((kept & 1) != 0)))
    carry = mag >> 24  # rounded up to the next binade
    mag, u = mag >> carry, u + drop + carry
    nb = 64 - leading_zeros(np.uint64(mag))
    ev = u + nb - 1
    bits = ((ev + 127) << 23) | ((mag << (24 - nb)) & 0x7FFFFF) if ev >= -126 else mag << (u + 149)
    bits = 0x7F800000 if ev >= 128 else bits
    return 0 if mag == 0 else (sign << 31) | bits  # an underflow to -0 is +0


# -- the steps: (float32 bits of the new accumulator, flags: 1 special, 2 a code outside its format, 4 NaN scale) --

@_inline
def _product_exponent(x: int, y: int, la: tuple, lb: tuple, zero_exp: int) -> int:
    nx, ex = _exponent(x, la)
    ny, ey = _exponent(y, lb)
    return _I(ex + ey) if nx and ny else zero_exp


@_inline
def _truncated_term(x: int, y: int, la: tuple, lb: tuple, lift: int, top: int) -> int:
    """The product of codes ``x`` and ``y`` truncated toward zero to ``2**(top - f)``, in those units (``lift``:
    ``f`` less both formats' mantissa bits); a zero product is 0."""
    sx, mx, ex = _field(x, la)
    sy, my, ey = _field(y, lb)
    mag = _I(_I(_I(mx * my) << lift) >> _I(min(max(_I(top - _I(ex + ey)), _I(0)), _I(31))))
    return _I(_I(mag ^ _I(-_I(sx ^ sy))) + _I(sx ^ sy))


@_inline
def _flags(special: bool, outside: int) -> int:
    return np.int64(2) if outside else np.int64(special)


@_inline
def _aligned_step(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, L: int, la: tuple, lb: tuple, se: int,
                  cbits: int, f: int, g: int, zero_exp: int) -> tuple[int, int]:
    """``aligned``: ``c`` and the products of ``a[i, s0:s0+L]`` and ``b[jb, s0:s0+L]`` (times their scales: ``se``
    their exponent sum) truncated toward zero to ``2**(E - f)``, E the largest exponent (a zero term's
    ``zero_exp``), summed, the sum truncated to ``g`` fractional bits."""
    c_sign, c_sig, ec, c_finite = _c_parts(cbits)
    special, outside, narrow = not c_finite, _I(0), la[6] < 8 or lb[6] < 8
    base = np.uint64(s0)  # unsigned indices: no negative-index wraparound, contiguous vector loads
    top_p, zero_p = _I(-(1 << 30)), _I(zero_exp - se)
    for k in range(L):  # the largest exponent
        x, y = _I(a[i, base + np.uint64(k)]), _I(b[jb, base + np.uint64(k)])
        special |= _special(x, la) | _special(y, lb)
        if narrow:
            outside |= _I(_I(x >> la[6]) | _I(y >> lb[6]))
        top_p = max(top_p, _product_exponent(x, y, la, lb, zero_p))
    if special or outside:
        return 0, _flags(special, outside)
    top = max(ec if c_sig else zero_exp, top_p + se if L else zero_exp)
    lift = _I(f - la[0] - lb[0])  # a product's significand is in units of 2**(e - mantissa bits of both)
    total = _signed(_shifted(c_sig, ec - 23 + f - top), c_sign)
    total += _aligned_terms(a, i, b, jb, base, L, la, lb, lift, _I(top - se), f)
    return _truncated_bits(total, top - f, g), np.int64(0)


@_inline
def _aligned_terms(a: np.ndarray, i: int, b: np.ndarray, jb: int, base: int, L: int, la: tuple, lb: tuple, lift: int,
                   top_p: int, f: int) -> int:
    """The sum of the products of ``a[i, base:base+L]`` and ``b[jb, base:base+L]`` truncated toward zero to
    ``2**(top_p - f)`` (:func:`_truncated_term`), exact."""
    total = np.int64(0)
    run = min(L, 1 << (29 - f))  # terms below 2**(f + 2): runs of them sum in int32 (16 lanes per vector, not 8)
    for r0 in range(0, L, run):
        terms = _I(0)
        for k in range(r0, min(r0 + run, L)):  # the truncated terms, summed exactly
            x, y = _I(a[i, base + np.uint64(k)]), _I(b[jb, base + np.uint64(k)])
            terms = _I(terms + _truncated_term(x, y, la, lb, lift, top_p))
        total += terms
    return total


@_inline
def _aligned_pair(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, la: tuple, lb: tuple, cbits: int, f: int,
                  g: int, zero_exp: int) -> tuple[int, bool]:
    """Two chained unscaled ``aligned`` steps of 16 (sm89's k32 instruction): :func:`_aligned_step` twice, the
    special and outside codes and both steps' largest product exponents in one pass over the 32 codes (one
    reduction less, the two maxima side by side), the first step's result handed on as an integer (no float32
    bits between the steps). (bits, True); (0, False) where a code is special or outside its format, ``c`` is not
    finite or the first result is not a normal float32 or zero: the caller then runs the steps one by one."""
    c_sign, c_sig, ec, c_finite = _c_parts(cbits)
    special, outside, narrow = not c_finite, _I(0), la[6] < 8 or lb[6] < 8
    base = np.uint64(s0)
    top1 = top2 = _I(-(1 << 30))
    zero_p = _I(zero_exp)
    for k in range(16):
        k0, k1 = base + np.uint64(k), base + np.uint64(16 + k)
        x0, y0, x1, y1 = _I(a[i, k0]), _I(b[jb, k0]), _I(a[i, k1]), _I(b[jb, k1])
        special |= _special(x0, la) | _special(y0, lb) | _special(x1, la) | _special(y1, lb)
        if narrow:
            outside |= _I(_I(x0 >> la[6]) | _I(y0 >> lb[6]) | _I(x1 >> la[6]) | _I(y1 >> lb[6]))
        top1 = max(top1, _product_exponent(x0, y0, la, lb, zero_p))
        top2 = max(top2, _product_exponent(x1, y1, la, lb, zero_p))
    if special or outside:
        return np.int64(0), False
    lift = _I(f - la[0] - lb[0])
    top = max(ec if c_sig else zero_exp, np.int64(top1))
    total = _signed(_shifted(c_sig, ec - 23 + f - top), c_sign)
    total += _aligned_terms(a, i, b, jb, base, 16, la, lb, lift, _I(top), f)
    # the first result as _truncated_bits makes it, kept as sign, magnitude and exponent
    sign = np.int64(total < 0)
    mag = -total if sign else total
    nb = 64 - leading_zeros(np.uint64(mag))
    ev = top - f + nb - 1
    if total != 0 and (ev < -126 or ev >= 128):
        return np.int64(0), False
    drop = max(nb - (g + 1), 0)
    mag >>= drop
    u = top - f + drop
    top = max(ev if total != 0 else zero_exp, np.int64(top2))
    total = _signed(_shifted(mag, u + f - top), sign)
    total += _aligned_terms(a, i, b, jb, base + np.uint64(16), 16, la, lb, lift, _I(top), f)
    return _truncated_bits(total, top - f, g), True


@_inline
def _two_stage_step(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, L: int, la: tuple, lb: tuple,
                    cbits: int, f: int, f2: int, drop_tiny_c: bool, zero_exp: int) -> tuple[int, int]:
    """``two-stage`` (CDNA3 FP8): the even and the odd products apart truncated toward zero to ``2**(E_g - f)``
    and summed, the two rounded down to ``f`` bits below the larger, that dot rounded down to ``f2 + 1`` bits
    and ``c`` to ``f`` below ``max(dot, c)``, the sum rounded down to ``f2`` bits and to nearest even."""
    c_sign, c_sig, ec, c_finite = _c_parts(cbits)
    special, outside, narrow = not c_finite, _I(0), la[6] < 8 or lb[6] < 8
    base = np.uint64(s0)
    top0 = top1 = _I(-(1 << 30))
    zero_p = _I(zero_exp)
    for q in range(L // 2):  # k in pairs: each group's largest exponent and sum in registers
        k0, k1 = base + np.uint64(2 * q), base + np.uint64(2 * q + 1)
        x0, y0, x1, y1 = _I(a[i, k0]), _I(b[jb, k0]), _I(a[i, k1]), _I(b[jb, k1])
        special |= _special(x0, la) | _special(y0, lb) | _special(x1, la) | _special(y1, lb)
        if narrow:
            outside |= _I(_I(x0 >> la[6]) | _I(y0 >> lb[6]) | _I(x1 >> la[6]) | _I(y1 >> lb[6]))
        top0 = max(top0, _product_exponent(x0, y0, la, lb, zero_p))
        top1 = max(top1, _product_exponent(x1, y1, la, lb, zero_p))
    if special or outside:
        return 0, _flags(special, outside)
    lift = _I(f - la[0] - lb[0])
    part0 = part1 = _I(0)  # L / 2 terms below 2**(f + 2) each: int32 (checked by the caller)
    for q in range(L // 2):
        k0, k1 = base + np.uint64(2 * q), base + np.uint64(2 * q + 1)
        part0 = _I(part0 + _truncated_term(_I(a[i, k0]), _I(b[jb, k0]), la, lb, lift, top0))
        part1 = _I(part1 + _truncated_term(_I(a[i, k1]), _I(b[jb, k1]), la, lb, lift, top1))
    e_dot = np.int64(max(top0, top1))  # the groups rounded down (floor: arithmetic shifts) at the larger exponent
    s_dot = (np.int64(part0) >> min(e_dot - top0, 63)) + (np.int64(part1) >> min(e_dot - top1, 63))
    e_max = max(e_dot, ec)
    up = e_dot - e_max + f2 + 1 - f
    sd = s_dot << up if up >= 0 else s_dot >> min(-up, 63)  # units of 2**(e_max - f2 - 1)
    cs = _signed(c_sig, c_sign)
    up = f - e_max + ec - 23
    sc = cs << up if up >= 0 else cs >> min(-up, 63)  # units of 2**(e_max - f)
    if drop_tiny_c and ec < e_max - f - 1:
        sc = 0
    return _floor_rne_bits(sd + (sc << (f2 + 1 - f)), e_max - f2 - 1, f2), np.int64(0)


# -- e2m1 steps (Blackwell fp4: 64 codes a step, groups of 16) as straight-line vector code ---------------------------

_E2M1 = (1, 3, 1, 3, 0, 1, 4, 7, 0, 1)  # tensorcore._bit_layout("e2m1fn")


def _x86_bytes(context: Any) -> int:
    """The widest x86 byte shuffles and multiply-adds (pshufb, pmaddubsw) of the CPU numba compiles for: 512
    (AVX-512BW), 256 (AVX2) or 0 (none, or not x86: generic vector IR). From the features numba gives its target
    machine (NUMBA_CPU_FEATURES where set, else the host's), which also key its cache: a kernel cached on one CPU
    is compiled again on another."""
    features = str(getattr(context.codegen(), "_tm_features", "")).split(",")
    return 512 if "+avx512bw" in features else 256 if "+avx2" in features else 0


def _x86_call(builder: Any, width: int, name: tuple[str, str], out: Any, *args: Any) -> Any:
    """The x86 intrinsic ``name`` (512-bit, 256-bit) on 64-byte vectors: once, or on each half where ``width`` is
    256, the halves joined (both return ``out``, the 256-bit one half as many elements)."""
    v8 = ir.VectorType(ir.IntType(8), 64)
    if width == 512:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(out, [v8] * len(args)), name[0])
        return builder.call(fn, list(args))
    i32, n = ir.IntType(32), out.count // 2
    h8, hout = ir.VectorType(ir.IntType(8), 32), ir.VectorType(out.element, n)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(hout, [h8] * len(args)), name[1])
    halves = [builder.call(fn, [builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, 32),
                                                                          list(range(32 * h, 32 * h + 32))))
                                for x in args]) for h in (0, 1)]
    return builder.shuffle_vector(halves[0], halves[1], ir.Constant(ir.VectorType(i32, 2 * n), list(range(2 * n))))


def _e2m1_ir(builder: Any, pa: Any, pb: Any, width: int = 0) -> tuple[Any, Any, Any]:
    """LLVM IR of the 64 e2m1 codes (one a byte) at addresses ``pa`` and ``pb``: their four group sums of 16 products
    (each value times 2, an integer) as <4 x i16>, the products' nonzero mask as <64 x i1>, and whether a code lies
    outside the format (16 or more) as i1. A value is a byte (magnitude ``m``: 0, 1, 2, 3, 4, 6, 8, 12), b's
    negated where the signs differ; the products in 16-bit lanes, a pair's sum at most 288, a group's 8 pair sums
    (one 128-bit lane) added by in-lane shuffles (at most 2304 in magnitude). ``width`` (:func:`_x86_bytes`): 0,
    generic vector IR for any CPU (a value ``m + (m - 4)+ + 2 (m - 6)+``, even and odd products apart); 256 or 512,
    x86's byte shuffle looks up the values (a's magnitude, b's signed by both signs: pshufb reads an index's low
    four bits and its top one, which is 0 for every code inside the format) and its multiply-add forms the pair
    sums (pmaddubsw: a's unsigned times b's signed bytes; no pair saturates): 14 fewer vector instructions."""
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    v8 = ir.VectorType(i8, 64)

    def splat(vt: Any, x: int) -> ir.Constant:
        return ir.Constant(vt, [x] * vt.count)

    def load(address: Any) -> Any:
        load = builder.load(builder.inttoptr(address, v8.as_pointer()))
        load.align = 1
        return load

    a, b = load(pa), load(pb)
    outside = builder.icmp_unsigned("!=", builder.bitcast(builder.icmp_unsigned(">", builder.or_(a, b), splat(v8, 15)),
                                                          ir.IntType(64)), ir.Constant(ir.IntType(64), 0))
    w16 = ir.VectorType(i16, 32)
    if width:
        magnitudes = (0, 1, 2, 3, 4, 6, 8, 12)
        shuffle = ("llvm.x86.avx512.pshuf.b.512", "llvm.x86.avx2.pshuf.b")
        va = _x86_call(builder, width, shuffle, v8, ir.Constant(v8, list(magnitudes) * 8), a)
        signed = ir.Constant(v8, [*magnitudes, *(-m & 0xFF for m in magnitudes)] * 4)
        vb = _x86_call(builder, width, shuffle, v8, signed, builder.xor(b, builder.and_(a, splat(v8, 8))))
        nonzero = builder.and_(builder.icmp_unsigned("!=", va, splat(v8, 0)),
                               builder.icmp_unsigned("!=", vb, splat(v8, 0)))
        x = _x86_call(builder, width, ("llvm.x86.avx512.pmaddubs.w.512", "llvm.x86.avx2.pmadd.ub.sw"), w16, va, vb)
    else:
        usub = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8]), "llvm.usub.sat.v64i8")

        def value(x: Any) -> Any:
            m = builder.and_(x, splat(v8, 7))
            v = builder.add(m, builder.call(usub, [m, splat(v8, 4)]))
            return builder.add(v, builder.shl(builder.call(usub, [m, splat(v8, 6)]), splat(v8, 1)))

        va, vb = value(a), value(b)
        nonzero = builder.icmp_unsigned("!=", builder.select(builder.icmp_unsigned("<", va, vb), va, vb),
                                        splat(v8, 0))
        negative = builder.icmp_unsigned("!=", builder.and_(builder.xor(a, b), splat(v8, 8)), splat(v8, 0))
        vb = builder.select(negative, builder.sub(splat(v8, 0), vb), vb)
        # the bytes as 32 pairs in 16-bit lanes: the even and the odd products apart, no widening across lanes
        xa, xb = builder.bitcast(va, w16), builder.bitcast(vb, w16)
        eight = splat(w16, 8)
        even = builder.mul(builder.and_(xa, splat(w16, 0xFF)), builder.ashr(builder.shl(xb, eight), eight))
        x = builder.add(even, builder.mul(builder.lshr(xa, eight), builder.ashr(xb, eight)))
    for step in (4, 2, 1):  # a group's 8 pair sums (one 128-bit lane) added into its first
        x = builder.add(x, builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, 32),
                                                                    [k + step if k % 8 + step < 8 else k
                                                                     for k in range(32)])))
    x = builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, 4), [0, 8, 16, 24]))
    return x, nonzero, outside


@intrinsic
def _e2m1_groups(typingctx: Any, pa: Any, pb: Any) -> Any:
    """:func:`_e2m1_ir` as (four group sums, the products' nonzero mask (bit k: product k), outside)."""
    sig = types.UniTuple(types.int64, 6)(types.uint64, types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32, i64 = ir.IntType(32), ir.IntType(64)
        x, nonzero, outside = _e2m1_ir(builder, args[0], args[1], _x86_bytes(context))
        sums = [builder.sext(builder.extract_element(x, ir.Constant(i32, g)), i64) for g in range(4)]
        return context.make_tuple(builder, signature.return_type,
                                  sums + [builder.bitcast(nonzero, i64), builder.zext(outside, i64)])
    return sig, codegen


def _e2m1_row_ir(builder: Any, pa: Any, pb: Any, dst: Any, width: int) -> Any:
    """:func:`_e2m1_ir` of the codes at ``pa`` and ``pb`` stored as one row of eight int16 at ``dst`` (the four group
    sums, then the products' nonzero mask, 16 bits a group); returns whether a code lies outside the format (i64)."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    x, nonzero, outside = _e2m1_ir(builder, pa, pb, width)
    row = builder.shuffle_vector(x, builder.bitcast(nonzero, ir.VectorType(i16, 4)),
                                 ir.Constant(ir.VectorType(i32, 8), list(range(8))))
    store = builder.store(row, builder.inttoptr(dst, ir.VectorType(i16, 8).as_pointer()))
    store.align = 2
    return builder.zext(outside, ir.IntType(64))


@intrinsic
def _e2m1_sums(typingctx: Any, pa: Any, pb: Any, dst: Any) -> Any:
    """:func:`_e2m1_row_ir` in the widest form of the CPU (:func:`_x86_bytes`)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return _e2m1_row_ir(builder, *args, _x86_bytes(context))
    return types.int64(types.uint64, types.uint64, types.uint64), codegen


@_inline
def _is_e2m1(lay: tuple) -> bool:
    return (lay[0] == _E2M1[0] and lay[1] == _E2M1[1] and lay[2] == _E2M1[2] and lay[3] == _E2M1[3]
            and lay[4] == _E2M1[4] and lay[5] == _E2M1[5] and lay[6] == _E2M1[6] and lay[7] == _E2M1[7])


@_inline
def _group_term(total_sum: int, live: int, sa: np.ndarray, i: int, sb: np.ndarray, jb: int, k0: int, block: int,
                scale_table: np.ndarray, zero_exp: int) -> tuple[int, int, int, int]:
    """A group's (sum times both scale significands, scales' exponent sum, its exponent for the alignment, NaN)."""
    ca, cb = sa[i, k0 // block], sb[jb, k0 // block]
    s_sig = scale_table[0, ca] * scale_table[0, cb]
    e = scale_table[1, ca] + scale_table[1, cb]
    return total_sum * s_sig, e, e if live and s_sig else np.int64(zero_exp), scale_table[2, ca] | scale_table[2, cb]


@_inline
def _aligned_term(w: int, lift: int, shift: int) -> int:
    """``w * 2**(lift - shift)`` truncated toward zero (``shift`` clamped to 0..63)."""
    sign = np.int64(w < 0)
    return _signed((abs(w) << lift) >> min(max(shift, 0), 63), sign)


@_inline
def _grouped_e2m1_step(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, sa: np.ndarray, sb: np.ndarray,
                       block: int, scale_table: np.ndarray, lift: int, cbits: int, f: int, g: int,
                       zero_exp: int) -> tuple[int, int]:
    """:func:`_grouped_step` of 64 e2m1 codes in groups of 16: the products by :func:`_e2m1_groups`, the rest
    with selects."""
    s_0, s_1, s_2, s_3, nonzero, outside = _e2m1_groups(np.uint64(a.ctypes.data + i * a.strides[0] + s0),
                                                        np.uint64(b.ctypes.data + jb * b.strides[0] + s0))
    c_sign, c_sig, ec, c_finite = _c_parts(cbits)
    w0, e0, t0, n0 = _group_term(s_0, nonzero & 0xFFFF, sa, i, sb, jb, s0, block, scale_table, zero_exp)
    w1, e1, t1, n1 = _group_term(s_1, (nonzero >> 16) & 0xFFFF, sa, i, sb, jb, s0 + 16, block, scale_table, zero_exp)
    w2, e2, t2, n2 = _group_term(s_2, (nonzero >> 32) & 0xFFFF, sa, i, sb, jb, s0 + 32, block, scale_table, zero_exp)
    w3, e3, t3, n3 = _group_term(s_3, (nonzero >> 48) & 0xFFFF, sa, i, sb, jb, s0 + 48, block, scale_table, zero_exp)
    nan = n0 | n1 | n2 | n3
    if outside or nan or not c_finite:
        return 0, _flags(not c_finite, outside) | (nan << 2)
    top = max(max(ec if c_sig else np.int64(zero_exp), t0), max(max(t1, t2), t3))
    total = _signed(_shifted(c_sig, ec - 23 + f - top), c_sign)
    total += _aligned_term(w0, lift, top - e0) + _aligned_term(w1, lift, top - e1)
    total += _aligned_term(w2, lift, top - e2) + _aligned_term(w3, lift, top - e3)
    return _truncated_bits(total, top - f, g), np.int64(0)


@intrinsic
def _f64_from_bits(typingctx: Any, x: Any) -> Any:
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _f64_bits(typingctx: Any, x: Any) -> Any:
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@_inline
def _pow2(e: int) -> float:
    """``2.0**e`` for -1022 <= e <= 1023, from its bits."""
    return _f64_from_bits(np.int64(e + 1023) << 52)


@_inline
def _scale_entries(scale_table: np.ndarray, sigs: np.ndarray, exps: np.ndarray) -> None:
    """Per scale code, for the lanes: its significand as float32 (NaN for a NaN scale: it propagates) and its
    exponent (``-2**20`` for a zero or NaN scale: no alignment)."""
    for code in range(scale_table.shape[1]):
        sig, nan = scale_table[0, code], scale_table[2, code] != 0
        sigs[code] = np.float32(np.nan if nan else sig)
        exps[code] = min(max(scale_table[1, code], -(1 << 20)), 1 << 20) if sig != 0 and not nan else -(1 << 20)


@_inline
def _lane_inputs(a: np.ndarray, b: np.ndarray, i: int, s0: int, sa: np.ndarray, sb: np.ndarray, block: int,
                 sigs: np.ndarray, exps: np.ndarray, xs: np.ndarray, xf: np.ndarray, xe: np.ndarray, l: int) -> int:
    """Row ``i``'s step from ``s0`` for lane ``l`` of :func:`_grouped_lanes_step`: ``xs[l]`` the four group sums and
    their nonzero masks (:func:`_e2m1_sums`), ``xf[g, l]`` group g's two scale significands' product (exact, float32;
    NaN for a NaN scale) and ``xe[g, l]`` their exponents' sum (``-2**20`` or less for a zero or NaN scale: see
    :func:`_scale_entries`), the scales in scalar code (no vector lanes to fill). Returns whether a code lies
    outside the format."""
    outside = _e2m1_sums(np.uint64(a.ctypes.data + i * a.strides[0] + s0),
                         np.uint64(b.ctypes.data + i * b.strides[0] + s0), np.uint64(xs.ctypes.data + l * 16))
    row = np.uint64(i)
    for grp in range(4):
        q = np.uint64((s0 + 16 * grp) // block)
        ca, cb = sa[row, q], sb[row, q]
        xf[grp, l] = sigs[ca] * sigs[cb]
        xe[grp, l] = exps[ca] + exps[cb]
    return outside


@_inline
def _lane_exponent(xs: np.ndarray, xe: np.ndarray, grp: int, l: int) -> int:
    """Group ``grp``'s exponent in lane ``l``: the scales' (``-2**20`` less where no product is nonzero)."""
    return np.int64(xe[grp, l]) - (np.int64(xs[l, 4 + grp] == 0) << 20)


@_inline
def _lane_term(xs: np.ndarray, xf: np.ndarray, e: int, grp: int, l: int, shift: int) -> float:
    """Group ``grp``'s term of lane ``l``: its sum times its scales' significands times ``2**(e + shift)``
    truncated toward zero, in float64 (exact: an integer below 2**48 where it is not 0)."""
    w = np.float64(xs[l, grp]) * np.float64(xf[grp, l])
    return np.trunc(w * _pow2(min(max(e + shift, -1022), 1023)))


@_inline
def _grouped_lanes_step(xs: np.ndarray, xf: np.ndarray, xe: np.ndarray, acc: np.ndarray, lift: int, f: int,
                        zero_exp: int) -> None:
    """The end of :func:`_grouped_e2m1_step` for every lane (:func:`_lane_inputs`), in float64: every term
    is an integer below 2**48 and their sum below 2**51, exact; the truncation to 24 bits a mask of the sum's bits,
    the float32 grid below 2**-126 a truncation at 2**-149. A NaN scale or a special accumulator leaves a NaN
    (the sum is not finite): the lane is done again."""
    for l in range(acc.shape[0]):
        cbits = acc[l]
        ec = max((cbits >> 23) & 0xFF, 1) - 127
        ec = np.int64(zero_exp) if (cbits & 0x7FFFFFFF) == 0 else ec
        e0, e1 = _lane_exponent(xs, xe, 0, l), _lane_exponent(xs, xe, 1, l)
        e2, e3 = _lane_exponent(xs, xe, 2, l), _lane_exponent(xs, xe, 3, l)
        top = max(max(np.int64(zero_exp), ec), max(max(e0, e1), max(e2, e3)))
        total = np.trunc(np.float64(_f32_from_bits(_I(cbits))) * _pow2(f - top))
        total += _lane_term(xs, xf, e0, 0, l, lift - top) + _lane_term(xs, xf, e1, 1, l, lift - top)
        total += _lane_term(xs, xf, e2, 2, l, lift - top) + _lane_term(xs, xf, e3, 3, l, lift - top)
        v = _f64_from_bits(_f64_bits(total) & ~np.int64((1 << 29) - 1)) * _pow2(top - f)
        v = np.trunc(v * _pow2(149)) * _pow2(-149) + (total - total)  # +0 for -0; NaN where total is not finite
        acc[l] = np.int64(_f32_bits(np.float32(v))) & 0xFFFFFFFF


@_jit
def _grouped_lanes(a: np.ndarray, b: np.ndarray, paired: bool, la: tuple, lb: tuple, sa: np.ndarray, sb: np.ndarray,
                   scale_table: np.ndarray, model: tuple, c_bits: np.ndarray, out_bits: np.ndarray, dep: np.ndarray,
                   wbuf: np.ndarray, ebuf: np.ndarray) -> int:
    """Paired rows of e2m1 codes (Blackwell fp4, steps of 64 in groups of 16) without promotion, _GROUP_LANES at a
    time: the group sums row by row (:func:`_lane_inputs`), the rest lane by lane (:func:`_grouped_lanes_step`);
    a lane with a NaN scale or a special accumulator done again by :func:`_grouped_step`. The rows done, or -1 where
    a code lies outside its format."""
    la, lb, model = _layout_constants(la), _layout_constants(lb), _model_constants(model)
    _wide_vectors()
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    rows = 0
    if (not paired or chunk != 64 or group != 16 or not (_is_e2m1(la) and _is_e2m1(lb)) or out_bits.shape[1] != 1
            or a.strides[1] != 1 or b.strides[1] != 1):
        return rows
    n = _GROUP_LANES
    sigs, exps = np.empty(scale_table.shape[1], np.float32), np.empty(scale_table.shape[1], np.int32)
    _scale_entries(scale_table, sigs, exps)
    xs, xf, xe = np.empty((n, 8), np.int16), np.empty((4, n), np.float32), np.empty((4, n), np.int32)
    acc = np.empty(n, np.int64)
    before = np.empty_like(acc)
    special = np.empty(n, np.bool_)
    bits32 = np.empty(n, np.uint32)
    steps = a.shape[1] // chunk
    for i0 in range(0, a.shape[0] - n + 1, n):
        _lanes_start(a, b, c_bits, i0, acc, special, bits32, False)
        for t in range(steps):
            s0 = t * chunk
            outside = np.int64(0)
            for l in range(n):
                outside |= _lane_inputs(a, b, i0 + l, s0, sa, sb, block, sigs, exps, xs, xf, xe, l)
            if outside:
                return -1
            before[:] = acc
            _grouped_lanes_step(xs, xf, xe, acc, lift, f, zero_exp)
            for l in range(n):
                if (acc[l] & 0x7FFFFFFF) > 0x7F800000:  # NaN: a NaN scale or a special accumulator
                    i = i0 + l
                    special[l] = True
                    if ((before[l] >> 23) & 0xFF) != 0xFF:  # a finite accumulator: a NaN scale, a NaN result
                        acc[l] = _NAN_BITS
                        continue
                    bits, flag = _grouped_step(a, i, b, i, s0, chunk, la, lb, sa, sb, block, group, scale_table, lift,
                                               before[l], f, g, zero_exp, wbuf, ebuf)
                    if flag:
                        bits = _special_bits(a, i, b, i, s0, chunk, la, lb, before[l], (flag & 4) != 0)
                    acc[l] = bits
        _lanes_finish(out_bits, dep, i0, acc, special, dep_specials, bits32)
        rows = i0 + n
    return rows


@_inline
def _grouped_step(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, L: int, la: tuple, lb: tuple,
                  sa: np.ndarray, sb: np.ndarray, block: int, group: int, scale_table: np.ndarray, lift: int,
                  cbits: int, f: int, g: int, zero_exp: int, wbuf: np.ndarray, ebuf: np.ndarray) -> tuple[int, int]:
    """``grouped-scaled`` (Blackwell fp4): each group's products summed exactly, times its block's two scales
    (``sa[i]``, ``sb[jb]`` through ``scale_table``: significand, exponent, NaN per code), aligned at the scales'
    exponent sum (a zero group's or zero scale's ``zero_exp``) with ``c`` as in ``aligned``; ``lift``: ``f``
    less the fractional bits of a group term (both operands' and both scales'). Flag 4: a NaN scale."""
    if L == 64 and group == 16 and _is_e2m1(la) and _is_e2m1(lb) and a.strides[1] == 1 and b.strides[1] == 1:
        return _grouped_e2m1_step(a, i, b, jb, s0, sa, sb, block, scale_table, lift, cbits, f, g, zero_exp)
    c_sign, c_sig, ec, c_finite = _c_parts(cbits)
    top = ec if c_sig else zero_exp
    special, outside, nan, narrow = not c_finite, _I(0), np.int64(0), la[6] < 8 or lb[6] < 8
    up_a, up_b = la[2] - 1, lb[2] - 1  # value * 2**(mantissa bits - emin) is sig << (e - emin): an integer
    step = np.uint64(s0)
    for k in range(L):  # NaN/Inf codes and codes outside the format over the whole step: one reduction each,
        x, y = _I(a[i, step + np.uint64(k)]), _I(b[jb, step + np.uint64(k)])  # not one per group (12% faster)
        special |= _special(x, la) | _special(y, lb)
        if narrow:
            outside |= _I(_I(x >> la[6]) | _I(y >> lb[6]))
    for grp in range(L // group):
        k0 = s0 + grp * group
        base = np.uint64(k0)
        part = _I(0)
        for k in range(group):
            x, y = _I(a[i, base + np.uint64(k)]), _I(b[jb, base + np.uint64(k)])
            sx, mx, ex = _field(x, la)
            sy, my, ey = _field(y, lb)
            # below 2**(2 (m + 1) + 2 (emax - emin)); int32 shifts (numba's << widens to int64): int32 lanes
            p = _I(np.left_shift(mx, _I(ex + up_a)) * np.left_shift(my, _I(ey + up_b)))
            part = _I(part + _I(_I(p ^ _I(-_I(sx ^ sy))) + _I(sx ^ sy)))
        nonzero = _I(part != 0)
        if not nonzero:  # a zero sum: are all its products zero? (if not, its scales still set the alignment)
            for k in range(group):  # asked only here: one reduction per group less (10% faster)
                x, y = _I(a[i, base + np.uint64(k)]), _I(b[jb, base + np.uint64(k)])
                nonzero |= _I(_I(x & la[7]) != 0) & _I(_I(y & lb[7]) != 0)
        ca, cb = sa[i, k0 // block], sb[jb, k0 // block]
        nan |= scale_table[2, ca] | scale_table[2, cb]
        s_sig = scale_table[0, ca] * scale_table[0, cb]
        wbuf[grp] = np.int64(part) * s_sig
        ebuf[grp] = scale_table[1, ca] + scale_table[1, cb]
        top = max(top, ebuf[grp] if nonzero and s_sig else zero_exp)
    if special or outside or nan:
        return 0, _flags(special, outside) | (nan << 2)
    total = _signed(_shifted(c_sig, ec - 23 + f - top), c_sign)
    for grp in range(L // group):
        w = wbuf[grp]
        if w:
            sign = np.int64(w < 0)
            total += _signed(((-w if sign else w) << lift) >> min(top - ebuf[grp], 63), sign)
    return _truncated_bits(total, top - f, g), np.int64(0)


# -- lanes: 64 paired instances at once --------------------------------------------------------------------------
# dot_instances' rows are independent: a block of _LANES of them runs each step as straight-line integer code over
# the block (every instruction a 16-lane vector, no reduction across lanes, the rounding without branches), the
# codes turned K-major by a byte transposition; a lane that meets a special value, a code outside its format or a
# result the fast rounding does not cover is done again by the per-element step (the same code as the element loop).

_LANES = 64
_GROUP_LANES = 128  # e2m1 rows at a time (_grouped_lanes), 200,000 NVFP4 rows: 2.7 ms; 32: 3.1, 64: 2.8-2.9, 256: 2.9


@intrinsic
def _transpose_lanes(typingctx: Any, src: Any, stride: Any, dst: Any) -> Any:
    """``dst[k, 16 g + r] = src[(16 g + r) * stride + k]`` for k, r < 16, g < 4 (addresses as integers): 16 codes of
    64 rows made 16 rows of 64 lanes. Four row groups side by side in one 64-byte vector, four rounds of the same
    byte interleave inside each 16-byte part (the 16 x 16 transposition as unpack instructions)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        src_i, stride_i, dst_i = args
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        v16, v64 = ir.VectorType(i8, 16), ir.VectorType(i8, 64)

        def mask(idx: list[int]) -> ir.Constant:
            return ir.Constant(ir.VectorType(i32, len(idx)), idx)

        base = builder.inttoptr(src_i, i8.as_pointer())
        rows = []
        for r in range(16):
            parts = []
            for g in range(4):
                ptr = builder.gep(base, [builder.mul(stride_i, ir.Constant(i64, 16 * g + r))])
                load = builder.load(builder.bitcast(ptr, v16.as_pointer()))
                load.align = 1
                parts.append(load)
            low = builder.shuffle_vector(parts[0], parts[1], mask(list(range(32))))
            high = builder.shuffle_vector(parts[2], parts[3], mask(list(range(32))))
            rows.append(builder.shuffle_vector(low, high, mask(list(range(64)))))
        low = mask([x for g in range(4) for j in range(8) for x in (16 * g + j, 64 + 16 * g + j)])
        high = mask([x for g in range(4) for j in range(8, 16) for x in (16 * g + j, 64 + 16 * g + j)])
        for _ in range(4):
            rows = [builder.shuffle_vector(rows[j], rows[j + 8], m) for j in range(8) for m in (low, high)]
        out = builder.inttoptr(dst_i, v64.as_pointer())
        for k in range(16):
            store = builder.store(rows[k], builder.gep(out, [ir.Constant(i64, k)]))
            store.align = 1
        return context.get_dummy_value()
    return types.void(types.uint64, types.int64, types.uint64), codegen


@intrinsic
def _wide_vectors(typingctx: Any) -> Any:
    """Lets the compiler use the CPU's widest vectors (512 bits on AVX-512) in the function being compiled: LLVM
    prefers 256 there by default (``prefer-vector-width``, a function attribute, so nothing else numba compiles in
    the process changes); no effect on results, none on CPUs without them."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        try:  # a string attribute llvmlite's checked set does not list
            set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        except Exception:  # another llvmlite: the default width
            pass
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _prefetch(typingctx: Any, address: Any) -> Any:
    """A hint to load the cache line at ``address`` (an integer) for reading (``llvm.prefetch``; no effect on
    results, no fault on any address)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.inttoptr(args[0], i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(types.uint64), codegen


@_inline
def _prefetch_rows(a: np.ndarray, i0: int, rows: int) -> None:
    """:func:`_prefetch` every cache line of rows ``i0:i0+rows`` of ``a`` (C-contiguous), where they exist."""
    end = min(i0 + rows, a.shape[0])
    if end > i0:
        for off in range(0, (end - i0) * a.strides[0], 64):
            _prefetch(np.uint64(a.ctypes.data + i0 * a.strides[0] + off))


@_inline
def _lane_codes(a: np.ndarray, i0: int, s0: int, x: np.ndarray, k0: int = 0) -> None:
    """``x[k0 + k, l] = a[i0 + l, s0 + k]`` for k < 16, l < 64 (``a``: C-contiguous uint8 rows)."""
    _transpose_lanes(np.uint64(a.ctypes.data + i0 * a.strides[0] + s0), np.int64(a.strides[0]),
                     np.uint64(x.ctypes.data + k0 * x.strides[0]))


@intrinsic
def _f32_from_bits(typingctx: Any, x: Any) -> Any:
    """The float32 of bits given as an int32 (a register move)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


_U8 = np.uint8


@_inline
def _lane_fields(x: int, lay: tuple) -> tuple[int, int]:
    """(significand, exponent field clamped to 1) of an 8-bit code as bytes: the value is ``(-1)**sign * sig *
    2**(e - bias - mantissa bits)``."""
    ef = _U8(_U8(x >> lay[0]) & lay[1])
    return _U8(_U8(x & _U8(_U8(1 << lay[0]) - 1)) | _U8(min(ef, _U8(1)) << lay[0])), _U8(max(ef, _U8(1)))


@_inline
def _lane_bytes(x: int, y: int, la: tuple, lb: tuple) -> tuple[int, int, int, int]:
    """Codes ``x`` and ``y`` (8-bit formats) taken apart as bytes, 64 lanes a vector: (a special code among them,
    the significand of ``x``, that of ``y`` with the product's sign (two's complement: at most 15 in magnitude), the
    product's biased exponent sum: 0 for a zero product, else 2 to 62). Scalars in and out: numba's inlining of a
    function given arrays and indices hides the loop from the vectoriser (ten times slower)."""
    mx, ex = _lane_fields(x, la)
    my, ey = _lane_fields(y, lb)
    negative = _U8(_U8(_U8(x >> la[3]) ^ _U8(y >> lb[3])) & 1)
    return (_U8(_special(x, la) | _special(y, lb)), mx, _U8(_U8(my ^ _U8(0 - negative)) + negative),
            _U8(ex + ey) if min(mx, my) != 0 else _U8(0))


@_inline
def _lane_truncated_term(mx: int, my: int, e: int, field: int) -> int:
    """The product of :func:`_lane_bytes` (``my`` signed) times ``2**(f - top)`` truncated toward zero, as int32
    (``field``: :func:`_term_field`). The significands' product is a float32 (exact), the power of two float32 bits
    from the exponent sum (exact: ``e + field`` lies in 1..254), the conversion to int32 the truncation."""
    p2 = _f32_from_bits(_I(_I(_I(e) + field) << 23))
    return np.int32(np.float32(_I(_I(mx) * _I(np.int8(my)))) * p2)


@_inline
def _term_field(f: int, top: int, la: tuple, lb: tuple) -> int:
    """``field`` of :func:`_lane_truncated_term` for terms truncated to ``2**(top - f)``: ``f - top`` less both
    biases and mantissa widths, plus 127, clamped to 1..192 so that ``e + field`` (``e`` 0 or 2..62) is a float32
    exponent field. Exact: a nonzero product's exponent is at most ``top``, so its ``e + field`` is at most
    ``f + 127`` (the field unclamped above 192 only where every product is zero); and where the field is below 1 every
    term is below ``2**(62 - 126) * 2**8``, 0, as it is with the field 1."""
    return _I(min(max(_I(f - top - (la[2] + lb[2]) - (la[0] + lb[0]) + 127), _I(1)), _I(192)))


@_inline
def _two_stage_lanes(xa: np.ndarray, xb: np.ndarray, acc: np.ndarray, slow: np.ndarray, la: tuple, lb: tuple, f: int,
                     f2: int, drop_tiny_c: bool, zero_exp: int, top0: np.ndarray, top1: np.ndarray, part0: np.ndarray,
                     part1: np.ndarray, field0: np.ndarray, field1: np.ndarray, bad8: np.ndarray, top08: np.ndarray,
                     top18: np.ndarray, sig_a: np.ndarray, sig_b: np.ndarray,
                     exp8: np.ndarray) -> None:
    """:func:`_two_stage_step` of 16 codes for every lane (``xa``/``xb`` (16, lanes): the codes, ``acc``: the
    accumulators, replaced): ``slow[l]`` 1 where the lane has a special code or accumulator, 2 where its result is
    one the FPU rounding does not cover (the lane is then done again)."""
    n = np.uint64(_LANES)
    for l in range(n):  # bytes (64 lanes a vector): special codes, the groups' largest biased exponent sums
        bad8[l] = top08[l] = top18[l] = _U8(0)
    for q in range(8):
        k0, k1 = np.uint64(2 * q), np.uint64(2 * q + 1)
        for l in range(n):
            bad0, sig_a[k0, l], sig_b[k0, l], exp8[k0, l] = _lane_bytes(xa[k0, l], xb[k0, l], la, lb)
            bad1, sig_a[k1, l], sig_b[k1, l], exp8[k1, l] = _lane_bytes(xa[k1, l], xb[k1, l], la, lb)
            bad8[l] |= _U8(bad0 | bad1)
            top08[l] = max(top08[l], exp8[k0, l])
            top18[l] = max(top18[l], exp8[k1, l])
    for l in range(n):
        t0, t1, bias = _I(top08[l]), _I(top18[l]), _I(la[2] + lb[2])
        top0[l] = _I(t0 - bias) if t0 else _I(zero_exp)
        top1[l] = _I(t1 - bias) if t1 else _I(zero_exp)
        field0[l], field1[l] = _term_field(f, top0[l], la, lb), _term_field(f, top1[l], la, lb)
    for l in range(n):  # the 8 terms of each group summed in registers (the k loop unrolled inside the lane loop)
        p0, p1, f0, f1 = _I(0), _I(0), field0[l], field1[l]
        for q in range(8):
            k0, k1 = np.uint64(2 * q), np.uint64(2 * q + 1)
            p0 = _I(p0 + _lane_truncated_term(sig_a[k0, l], sig_b[k0, l], exp8[k0, l], f0))
            p1 = _I(p1 + _lane_truncated_term(sig_a[k1, l], sig_b[k1, l], exp8[k1, l], f1))
        part0[l], part1[l] = p0, p1
    for l in range(n):  # as _two_stage_step's last lines, with selects; _floor_rne_bits' fast case only
        c_sign, c_sig, ec, c_finite = _c_parts(acc[l])
        t0, t1 = np.int64(top0[l]), np.int64(top1[l])
        e_dot = max(t0, t1)
        s_dot = (np.int64(part0[l]) >> min(e_dot - t0, 63)) + (np.int64(part1[l]) >> min(e_dot - t1, 63))
        e_max = max(e_dot, ec)
        sd = _shifted(s_dot, e_dot - e_max + f2 + 1 - f)
        sc = _shifted(_signed(c_sig, c_sign), f - e_max + ec - 23)
        if drop_tiny_c:
            sc = 0 if ec < e_max - f - 1 else sc
        total = sd + (sc << (f2 + 1 - f))
        u = e_max - f2 - 1
        mag = -total if total < 0 else total
        nb = 64 - leading_zeros(np.uint64(mag))
        drop = max(nb - f2 - 1, 0)
        bits = np.int64(_f32_bits(np.float32(total >> drop)))
        field = ((bits >> 23) & 0xFF) + u + drop
        zero = total == 0  # +0 (_floor_rne_any)
        fast = zero | ((u + nb - 1 >= -126) & (field >= 1) & (field <= 254))
        acc[l] = 0 if zero else (bits + ((u + drop) << 23)) & 0xFFFFFFFF
        slow[l] = _I(1) if bad8[l] or not c_finite else _I(2 * _I(not fast))


@_inline
def _truncated_bits_lane(total: int, u: int, g: int) -> int:
    """:func:`_truncated_bits` with selects, not branches (a lane of :func:`_aligned_lanes_step`)."""
    sign = np.int64(total < 0)
    mag = -total if sign else total
    nb = 64 - leading_zeros(np.uint64(mag))
    ev = u + nb - 1
    normal = ev >= -126
    drop = max(nb - (g + 1), 0) if normal else max(-126 - g - u, 0)
    mag >>= min(drop, 63)
    nb -= drop
    bits = ((ev + 127) << 23) | ((mag << min(max(24 - nb, 0), 63)) & 0x7FFFFF)
    bits = 0x7F800000 if ev >= 128 else bits
    bits = bits if normal else mag << min(max(u + drop + 149, 0), 63)
    return 0 if mag == 0 else (sign << 31) | bits


@_inline
def _aligned_lanes_step(xa: np.ndarray, xb: np.ndarray, L: int, acc: np.ndarray, slow: np.ndarray, se: np.ndarray,
                        la: tuple, lb: tuple, f: int, g: int, zero_exp: int, bad8: np.ndarray, top8: np.ndarray,
                        sig_a: np.ndarray, sig_b: np.ndarray, exp8: np.ndarray, top: np.ndarray,
                        field: np.ndarray, part: np.ndarray, total: np.ndarray) -> None:
    """:func:`_aligned_step` of ``L`` codes for every lane (``xa``/``xb`` (L, lanes): the codes, ``se``: the scales'
    exponent sums, ``acc``: the accumulators, replaced): ``slow[l]`` set where the lane has a special code or
    accumulator (it is then done again). The codes taken apart as bytes (:func:`_lane_bytes`), the terms by
    :func:`_lane_truncated_term` summed in int32 runs short enough to stay below 2**31, the rounding with selects."""
    n = np.uint64(_LANES)
    for l in range(n):
        bad8[l] = top8[l] = _U8(0)
    for k in range(L):
        for l in range(n):
            bad, sig_a[k, l], sig_b[k, l], exp8[k, l] = _lane_bytes(xa[k, l], xb[k, l], la, lb)
            bad8[l] |= bad
            top8[l] = max(top8[l], exp8[k, l])
    for l in range(n):
        cbits = acc[l]
        c_exp = max((cbits >> 23) & 0xFF, 1) - 127 if (cbits & 0x7FFFFFFF) != 0 else np.int64(zero_exp)
        t8 = np.int64(top8[l])
        t = max(c_exp, t8 - (la[2] + lb[2]) + se[l] if t8 else np.int64(zero_exp))
        top[l] = _I(t)
        slow[l] = _I(bad8[l]) | _I(((cbits >> 23) & 0xFF) == 0xFF)
        field[l] = _term_field(f, _I(t - se[l]), la, lb)  # the products' own top: the scales are in t
        total[l] = np.int64(0)
    run = min(L, 1 << (29 - f))  # terms below 2**(f + 2): runs of them sum in int32
    for r0 in range(0, L, run):
        for l in range(n):
            part[l] = _I(0)
        for k in range(r0, min(r0 + run, L)):
            for l in range(n):
                part[l] = _I(part[l] + _lane_truncated_term(sig_a[k, l], sig_b[k, l], exp8[k, l], field[l]))
        for l in range(n):
            total[l] += np.int64(part[l])
    for l in range(n):
        c_sign, c_sig, ec, c_finite = _c_parts(acc[l])
        t = np.int64(top[l])
        s = _signed(_shifted(c_sig, ec - 23 + f - t), c_sign) + total[l]
        acc[l] = _truncated_bits_lane(s, t - f, g)


@intrinsic
def _copy_bytes(typingctx: Any, dst: Any, src: Any, count: Any) -> Any:
    """Copies ``count`` bytes from address ``src`` to address ``dst`` (``llvm.memcpy``; integers as addresses)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i8p = ir.IntType(8).as_pointer()
        cgutils.raw_memcpy(builder, builder.inttoptr(args[0], i8p), builder.inttoptr(args[1], i8p), args[2], 1)
        return context.get_dummy_value()
    return types.void(types.uint64, types.uint64, types.int64), codegen


@_inline
def _lanes_start(a: np.ndarray, b: np.ndarray, c_bits: np.ndarray, i0: int, acc: np.ndarray, special: np.ndarray,
                 bits32: np.ndarray, prefetch: bool) -> None:
    """A block of paired rows (as many as ``acc`` has lanes) begins: its accumulators from ``c_bits``, no special
    value met; with ``prefetch``, the next blocks' codes prefetched while this one computes (the FP8 lanes' 16 or
    32 codes a row: faster; e2m1's 64: slower, measured). Rows of one element 4 bytes apart (as the callers give
    them) are copied as one block into ``bits32``: element by element the loop does not vectorise."""
    n = acc.shape[0]
    if c_bits.strides[0] == 4:
        _copy_bytes(np.uint64(bits32.ctypes.data), np.uint64(c_bits.ctypes.data + i0 * 4), np.int64(4 * n))
    else:
        for l in range(n):
            bits32[l] = c_bits[i0 + l, 0]
    for l in range(n):
        acc[l] = np.int64(bits32[l])
        special[l] = False
    if prefetch:
        _prefetch_rows(a, i0 + 2 * n, n)
        _prefetch_rows(b, i0 + 2 * n, n)


@_inline
def _lanes_finish(out_bits: np.ndarray, dep: np.ndarray, i0: int, acc: np.ndarray, special: np.ndarray,
                  dep_specials: bool, bits32: np.ndarray) -> None:
    """A block of paired rows ends: its results (NaN as 0x7FFFFFFF) and brackets written (``special`` and
    ``bits32`` reused), as one block where the rows are 4 and 1 bytes apart (see :func:`_lanes_start`)."""
    n = acc.shape[0]
    for l in range(n):
        bits32[l] = _result_bits(acc[l])
        special[l] = special[l] and dep_specials
    if out_bits.strides[0] == 4 and dep.strides[0] == 1:
        _copy_bytes(np.uint64(out_bits.ctypes.data + i0 * 4), np.uint64(bits32.ctypes.data), np.int64(4 * n))
        _copy_bytes(np.uint64(dep.ctypes.data + i0), np.uint64(special.ctypes.data), np.int64(n))
    else:
        for l in range(n):
            out_bits[i0 + l, 0] = bits32[l]
            dep[i0 + l, 0] = special[l]


@_inline
def _lane_mask(slow: np.ndarray) -> int:
    """The lanes with ``slow`` set as the bits of a uint64."""
    mask = np.uint64(0)
    for l in range(_LANES):
        mask |= np.uint64(slow[l] != 0) << np.uint64(l)
    return mask


@_inline
def _code_values(lay: tuple, values: np.ndarray, exps: np.ndarray, specials: np.ndarray) -> None:
    """Per code of an 8-bit format: its value as a float32 (exact; 0 for a NaN/Inf code), its exponent field clamped
    to 1 (0 for a zero), whether it is NaN/Inf."""
    for x in range(256):
        sx, mx, ex = _field(x, lay)
        special = _special(x, lay)
        v = np.float32(mx) * _f32_from_bits(_I(_I(ex - lay[0] + 127) << 23))
        values[x] = np.float32(0) if special else (-v if sx else v)
        exps[x] = _U8(0) if mx == 0 else _U8(ex + lay[2])
        specials[x] = _U8(special)


@_inline
def _aligned_gemm_lanes(a: np.ndarray, b: np.ndarray, la: tuple, lb: tuple, sa: np.ndarray, sb: np.ndarray,
                        model: tuple, c_bits: np.ndarray, out_bits: np.ndarray, dep: np.ndarray) -> int:
    """``aligned`` over a GEMM's columns, _LANES at a time (every row against 64 columns of ``b``): the columns done
    (a multiple of _LANES). A block of columns is taken apart once for the whole K (values as float32, biased
    exponent fields, special codes, K-major) and a row once per block; a step is then, per row, the largest exponent
    sum over bytes, a term the exact float32 product of the two values times ``2**(f - top)`` (a power of two
    clamped to float32's normal range: outside it every term is 0, or every product is), truncated by the
    conversion to int32, and the rounding of the paired lanes. A lane with a special value is done alone."""
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    M, K, N = a.shape[0], a.shape[1], out_bits.shape[1]
    cols = N - N % _LANES
    if cols == 0 or K % chunk:
        return 0
    val_a, val_b = np.empty(256, np.float32), np.empty(256, np.float32)
    exp_a, exp_b, spec_a, spec_b = (np.empty(256, np.uint8), np.empty(256, np.uint8), np.empty(256, np.uint8),
                                    np.empty(256, np.uint8))
    _code_values(la, val_a, exp_a, spec_a)
    _code_values(lb, val_b, exp_b, spec_b)
    codes = np.empty((K, _LANES), np.uint8)
    vb = np.empty((K, _LANES), np.float32)
    eb, bad_b = np.empty((K, _LANES), np.uint8), np.empty((K, _LANES), np.uint8)
    va, ea, bad_a = np.empty(K, np.float32), np.empty(K, np.uint8), np.empty(K, np.uint8)
    acc = np.empty(_LANES, np.int64)
    before, total, se = np.empty_like(acc), np.empty_like(acc), np.zeros_like(acc)
    nan, special = np.zeros(_LANES, np.bool_), np.empty(_LANES, np.bool_)
    slow, top, part = np.empty(_LANES, np.int32), np.empty(_LANES, np.int32), np.empty(_LANES, np.int32)
    scale = np.empty(_LANES, np.float32)
    bad8, top8 = np.empty(_LANES, np.uint8), np.empty(_LANES, np.uint8)
    n = np.uint64(_LANES)
    bias = la[2] + lb[2]
    run = min(chunk, 1 << (29 - f))  # terms below 2**(f + 2): runs of them sum in int32
    for j0 in range(0, cols, _LANES):
        for s0 in range(0, K, 16):
            _lane_codes(b, j0, s0, codes, s0)
        for k in range(K):
            for l in range(n):
                y = codes[k, l]
                vb[k, l], eb[k, l], bad_b[k, l] = val_b[y], exp_b[y], spec_b[y]
        for i in range(M):
            for k in range(K):
                x = a[i, k]
                va[k], ea[k], bad_a[k] = val_a[x], exp_a[x], spec_a[x]
            for l in range(n):
                acc[l] = np.int64(c_bits[i, j0 + l])
                special[l] = False
            for s0 in range(0, K, chunk):
                if block:  # e8m0 scales: 2**(code - 127), 0xFF NaN
                    for l in range(n):
                        ca, cb = np.int64(sa[i, s0 // block]), np.int64(sb[j0 + l, s0 // block])
                        se[l], nan[l] = ca + cb - 254, ca == 0xFF or cb == 0xFF
                a_bad = _U8(0)
                for l in range(n):
                    bad8[l] = top8[l] = _U8(0)
                for k in range(s0, s0 + chunk):
                    e_a, live = ea[k], ea[k] != 0
                    a_bad |= bad_a[k]
                    for l in range(n):
                        e_b = eb[k, l]
                        top8[l] = max(top8[l], _U8(e_a + e_b) if live and e_b != 0 else _U8(0))
                        bad8[l] |= bad_b[k, l]
                for l in range(n):
                    cbits = acc[l]
                    c_exp = max((cbits >> 23) & 0xFF, 1) - 127 if (cbits & 0x7FFFFFFF) != 0 else np.int64(zero_exp)
                    t8 = np.int64(top8[l])
                    t = max(c_exp, t8 - bias + se[l] if t8 else np.int64(zero_exp))
                    top[l] = _I(t)
                    slow[l] = _I(bad8[l] | a_bad) | _I(((cbits >> 23) & 0xFF) == 0xFF) | _I(nan[l])
                    scale[l] = _f32_from_bits(_I(_I(min(max(f - t + se[l], -126), 127) + 127) << 23))
                    total[l] = np.int64(0)
                for r0 in range(s0, s0 + chunk, run):
                    for l in range(n):
                        part[l] = _I(0)
                    for k in range(r0, r0 + run):
                        v = va[k]
                        for l in range(n):
                            part[l] = _I(part[l] + np.int32(v * vb[k, l] * scale[l]))
                    for l in range(n):
                        total[l] += np.int64(part[l])
                before[:] = acc
                for l in range(n):
                    c_sign, c_sig, ec, c_finite = _c_parts(acc[l])
                    t = np.int64(top[l])
                    acc[l] = _truncated_bits_lane(_signed(_shifted(c_sig, ec - 23 + f - t), c_sign) + total[l], t - f,
                                                  g)
                mask = _lane_mask(slow)
                while mask:  # a special code, scale or accumulator: a float sum's NaN or Inf
                    l = trailing_zeros(mask)
                    mask &= mask - np.uint64(1)
                    acc[l] = _special_bits(a, i, b, j0 + l, s0, chunk, la, lb, before[l], nan[l])
                    special[l] = True
            for l in range(n):
                out_bits[i, j0 + l] = _result_bits(acc[l])
                dep[i, j0 + l] = special[l] and dep_specials
    return cols


@_jit
def _aligned_lanes(a: np.ndarray, b: np.ndarray, paired: bool, la: tuple, lb: tuple, sa: np.ndarray,
                   sb: np.ndarray, scale_table: np.ndarray, model: tuple, c_bits: np.ndarray, out_bits: np.ndarray,
                   dep: np.ndarray, wbuf: np.ndarray, ebuf: np.ndarray) -> int:
    """``aligned``'s paired rows of 8-bit codes without promotion, _LANES at a time (see ``_LANES``; steps of 16 or
    32, e8m0 block scales): the rows done (a multiple of _LANES). Without promotion an instruction's steps are a
    chain like any other (sm89's two per instruction)."""
    la, lb, model = _layout_constants(la), _layout_constants(lb), _model_constants(model)
    _wide_vectors()
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    rows = 0
    if ((chunk != 16 and chunk != 32) or f > 27 or min(la[6], lb[6]) != 8 or la[1] > 31 or lb[1] > 31
            or a.strides[1] != 1 or b.strides[1] != 1 or (block and block % chunk)):
        return rows
    if not paired:
        return _aligned_gemm_lanes(a, b, la, lb, sa, sb, model, c_bits, out_bits, dep)
    if out_bits.shape[1] != 1:
        return rows
    xa = np.empty((chunk, _LANES), np.uint8)
    xb = np.empty_like(xa)
    acc = np.empty(_LANES, np.int64)
    before = np.empty_like(acc)
    total = np.empty_like(acc)
    se = np.zeros_like(acc)
    special = np.empty(_LANES, np.bool_)
    bits32 = np.empty(_LANES, np.uint32)
    nan = np.zeros(_LANES, np.bool_)
    slow = np.empty(_LANES, np.int32)
    top, part = np.empty_like(slow), np.empty_like(slow)
    field = np.empty_like(slow)
    bad8, top8 = np.empty(_LANES, np.uint8), np.empty(_LANES, np.uint8)
    sig_a, sig_b, exp8 = np.empty_like(xa), np.empty_like(xa), np.empty_like(xa)
    steps = a.shape[1] // ik * (ik // chunk)
    for i0 in range(0, a.shape[0] - _LANES + 1, _LANES):
        _lanes_start(a, b, c_bits, i0, acc, special, bits32, True)
        for t in range(steps):
            s0 = t * chunk
            for h in range(0, chunk, 16):
                _lane_codes(a, i0, s0 + h, xa, h)
                _lane_codes(b, i0, s0 + h, xb, h)
            if block:  # e8m0 scales: 2**(code - 127), 0xFF NaN
                for l in range(_LANES):
                    ca, cb = np.int64(sa[i0 + l, s0 // block]), np.int64(sb[i0 + l, s0 // block])
                    se[l], nan[l] = ca + cb - 254, ca == 0xFF or cb == 0xFF
            before[:] = acc
            _aligned_lanes_step(xa, xb, chunk, acc, slow, se, la, lb, f, g, zero_exp, bad8, top8, sig_a, sig_b, exp8,
                                top, field, part, total)
            if block:
                for l in range(_LANES):
                    slow[l] |= _I(nan[l])
            mask = _lane_mask(slow)
            while mask:  # a special code, scale or accumulator: a float sum's NaN or Inf, lane by lane (a tenth of
                l = trailing_zeros(mask)  # random rows: cheaper than every lane's classes)
                mask &= mask - np.uint64(1)
                acc[l] = _special_bits(a, i0 + l, b, i0 + l, s0, chunk, la, lb, before[l], nan[l])
                special[l] = True
        _lanes_finish(out_bits, dep, i0, acc, special, dep_specials, bits32)
        rows = i0 + _LANES
    return rows


@_jit
def _f32_add(x_bits: int, y_bits: int, fbuf: np.ndarray, ubuf: np.ndarray) -> int:
    """float32 bits of ``x + y`` (float32 arithmetic, round to nearest even): Triton's promotion fadd."""
    ubuf[0] = x_bits
    x = fbuf[0]
    ubuf[0] = y_bits
    fbuf[0] = x + fbuf[0]
    return np.int64(ubuf[0])


@_inline
def _result_bits(res: int) -> int:
    return _NAN_BITS if (res & 0x7FFFFFFF) > 0x7F800000 else res


@_jit
def _lanes(a: np.ndarray, b: np.ndarray, paired: bool, la: tuple, lb: tuple, sa: np.ndarray, sb: np.ndarray,
           scale_table: np.ndarray, model: tuple, c_bits: np.ndarray, out_bits: np.ndarray, dep: np.ndarray,
           wbuf: np.ndarray, ebuf: np.ndarray) -> int:
    """CDNA3's paired rows without promotion, _LANES at a time (see ``_LANES``): the rows done (a multiple of
    _LANES), or -1 where a code lies outside its format."""
    la, lb, model = _layout_constants(la), _layout_constants(lb), _model_constants(model)
    _wide_vectors()
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    rows = 0
    if (chunk != 16 or f > 27 or out_bits.shape[1] != 1 or min(la[6], lb[6]) != 8 or zero_exp + la[2] + lb[2] > 1
            or la[1] > 31 or lb[1] > 31):  # exponent fields of at most 5 bits: sums up to 62 (_term_field)
        return rows
    xa = np.empty((16, _LANES), np.uint8)
    xb = np.empty_like(xa)
    acc = np.empty(_LANES, np.int64)
    before = np.empty_like(acc)
    special = np.empty(_LANES, np.bool_)
    bits32 = np.empty(_LANES, np.uint32)
    slow = np.empty(_LANES, np.int32)
    top0, top1, part0, part1 = np.empty_like(slow), np.empty_like(slow), np.empty_like(slow), np.empty_like(slow)
    field0, field1 = np.empty_like(slow), np.empty_like(slow)
    bad8, top08, top18 = np.empty(_LANES, np.uint8), np.empty(_LANES, np.uint8), np.empty(_LANES, np.uint8)
    sig_a, sig_b, exp8 = np.empty_like(xa), np.empty_like(xa), np.empty_like(xa)
    steps = a.shape[1] // chunk
    for i0 in range(0, a.shape[0] - _LANES + 1, _LANES):
        _lanes_start(a, b, c_bits, i0, acc, special, bits32, True)
        for t in range(steps):
            s0 = t * chunk
            _lane_codes(a, i0, s0, xa)
            _lane_codes(b, i0, s0, xb)
            before[:] = acc
            _two_stage_lanes(xa, xb, acc, slow, la, lb, f, g, drop_tiny_c, zero_exp, top0, top1, part0, part1, field0,
                             field1, bad8, top08, top18, sig_a, sig_b, exp8)
            mask = _lane_mask(slow)
            while mask:  # a special value (a float sum's NaN or Inf) or a rounding the lanes do not cover
                l = trailing_zeros(mask)
                mask &= mask - np.uint64(1)
                i = i0 + l
                if slow[l] == 1:
                    acc[l] = _special_bits(a, i, b, i, s0, chunk, la, lb, before[l], False)
                    special[l] = True
                else:
                    acc[l] = _two_stage_step(a, i, b, i, s0, chunk, la, lb, before[l], f, g, drop_tiny_c, zero_exp)[0]
        _lanes_finish(out_bits, dep, i0, acc, special, dep_specials, bits32)
        rows = i0 + _LANES
    return rows


# -- the drivers: one per algorithm, so that a kind's kernel types and compiles only its own steps (a driver of all
# three took 59 s to compile for sm89's kind, one of its own 6 s; the same code, the same speed) ----------------------

@_inline
def _aligned_chunk(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, la: tuple, lb: tuple, sa: np.ndarray,
                   sb: np.ndarray, scale_table: np.ndarray, model: tuple, acc: int, wbuf: np.ndarray,
                   ebuf: np.ndarray) -> tuple[int, int, bool]:
    """One step of ``aligned`` (:func:`_aligned_step`): (bits, flags, a NaN scale)."""
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    se, nan = np.int64(0), False
    if block:  # e8m0 scales: 2**(code - 127), 0xFF NaN
        ca, cb = np.int64(sa[i, s0 // block]), np.int64(sb[jb, s0 // block])
        se, nan = ca + cb - 254, ca == 0xFF or cb == 0xFF
    bits, flag = _aligned_step(a, i, b, jb, s0, chunk, la, lb, se, acc, f, g, zero_exp)
    return bits, flag, nan


@_inline
def _aligned_instruction(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, la: tuple, lb: tuple, model: tuple,
                         acc: int) -> tuple[int, bool]:
    """sm89's k32 instruction in one function (:func:`_aligned_pair`) where the model is it: (bits, True); else
    (0, False) and the driver runs the instruction's steps one by one."""
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    if chunk == 16 and ik == 32 and not block and f <= 25:
        return _aligned_pair(a, i, b, jb, s0, la, lb, acc, f, g, zero_exp)
    return np.int64(0), False


@_inline
def _two_stage_chunk(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, la: tuple, lb: tuple, sa: np.ndarray,
                     sb: np.ndarray, scale_table: np.ndarray, model: tuple, acc: int, wbuf: np.ndarray,
                     ebuf: np.ndarray) -> tuple[int, int, bool]:
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    bits, flag = _two_stage_step(a, i, b, jb, s0, chunk, la, lb, acc, f, g, drop_tiny_c, zero_exp)
    return bits, flag, False


@_inline
def _no_instruction(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, la: tuple, lb: tuple, model: tuple,
                    acc: int) -> tuple[int, bool]:
    return np.int64(0), False


@_inline
def _grouped_chunk(a: np.ndarray, i: int, b: np.ndarray, jb: int, s0: int, la: tuple, lb: tuple, sa: np.ndarray,
                   sb: np.ndarray, scale_table: np.ndarray, model: tuple, acc: int, wbuf: np.ndarray,
                   ebuf: np.ndarray) -> tuple[int, int, bool]:
    chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
    bits, flag = _grouped_step(a, i, b, jb, s0, chunk, la, lb, sa, sb, block, group, scale_table, lift, acc, f, g,
                               zero_exp, wbuf, ebuf)
    return bits, flag, (flag & 4) != 0


def _driver(chunk_step: Any, instruction: Any, lanes: Any) -> Any:
    """The chain of :func:`chain` for one algorithm (``model``: its ``params`` but promotion, as a tuple):
    ``lanes`` does the paired rows it can, or without pairs the columns it can of every row (returns how many, -1
    for a code outside its format), ``instruction`` a whole instruction where it can, ``chunk_step`` a step of
    ``chunk`` codes. Returns it twice: to inline in :func:`chain` (layouts and model read at run time) and to
    compile for a kind (:func:`_specialise`: given as literals, made constants). The lanes are functions of their
    own (compiled once for each kind's literals), not inlined: that halved the compilation."""
    def drive(a: np.ndarray, b: np.ndarray, paired: bool, la: tuple, lb: tuple, sa: np.ndarray, sb: np.ndarray,
              scale_table: np.ndarray, model: tuple, promotion: int, c_bits: np.ndarray, out_bits: np.ndarray,
              dep: np.ndarray) -> int:
        kind = (la, lb, model)  # as given: a kind's literals, which the lanes make constants themselves
        la, lb, model = _layout_constants(la), _layout_constants(lb), _model_constants(model)
        chunk, ik, f, g, zero_exp, drop_tiny_c, dep_specials, block, group, lift = model
        _wide_vectors()
        wbuf = np.empty(max(chunk // max(group, 1), 1), np.int64)
        ebuf = np.empty_like(wbuf)
        steps = a.shape[1] // ik
        first = 0
        if not promotion:
            first = lanes(a, b, paired, kind[0], kind[1], sa, sb, scale_table, kind[2], c_bits, out_bits, dep, wbuf,
                          ebuf)
            if first < 0:
                return 1
        first_row, first_col = (first, 0) if paired else (0, first)  # what the lanes did: rows, or columns of every row
        fbuf = np.empty(1, np.float32)
        ubuf = fbuf.view(np.uint32)
        for i in range(first_row, a.shape[0]):
            for j in range(first_col, out_bits.shape[1]):
                jb = i if paired else j
                total = np.int64(c_bits[i, j])
                acc = np.int64(0) if promotion else total
                special = False
                for t in range(steps):
                    bits, done = instruction(a, i, b, jb, t * ik, la, lb, model, acc)
                    if done:
                        acc = bits
                    for s0 in range(t * ik, (t + 1) * ik if not done else t * ik, chunk):
                        bits, flag, nan = chunk_step(a, i, b, jb, s0, la, lb, sa, sb, scale_table, model, acc, wbuf,
                                                     ebuf)
                        if flag & 2:
                            return 1
                        if flag or nan:
                            bits = _special_bits(a, i, b, jb, s0, chunk, la, lb, acc, nan)
                            special = True
                        acc = bits
                    if promotion and ((t + 1) % promotion == 0 or t == steps - 1):
                        total = _f32_add(total, acc, fbuf, ubuf)
                        acc = 0
                res = total if promotion else acc
                out_bits[i, j] = _result_bits(res)
                dep[i, j] = special and dep_specials
        return 0
    return _inline(drive), _jit(drive)


_drive_aligned, _kind_aligned = _driver(_aligned_chunk, _aligned_instruction, _aligned_lanes)
_drive_two_stage, _kind_two_stage = _driver(_two_stage_chunk, _no_instruction, _lanes)
_drive_grouped, _kind_grouped = _driver(_grouped_chunk, _no_instruction, _grouped_lanes)


def _layout(lay: np.ndarray) -> tuple:
    return tuple(int(v) for v in lay)


def _model(params: np.ndarray) -> tuple:
    return (int(params[0]), int(params[1]), int(params[2]), int(params[3]), int(params[4]), bool(params[6]),
            bool(params[7]), int(params[8]), int(params[9]), int(params[10]))


@_jit
def chain(algorithm: int, a: np.ndarray, b: np.ndarray, paired: bool, lay_a: np.ndarray, lay_b: np.ndarray,
          sa: np.ndarray, sb: np.ndarray, scale_table: np.ndarray, params: np.ndarray, c_bits: np.ndarray,
          out_bits: np.ndarray, dep: np.ndarray) -> int:
    """Every output element ``(i, j)``: row ``i`` of the codes ``a`` (M, K) against row ``j`` of ``b`` (N, K)
    (row ``i`` when ``paired``: ``dot_instances``) from the float32 bits ``c_bits[i, j]``: K in steps of
    ``chunk``, instructions of ``instruction_k`` chained through the accumulator, every ``promotion``
    instructions added into a float32 total (0: never). Writes ``out_bits`` (NaN as 0x7FFFFFFF) and ``dep``
    (a special value met, where the model brackets them). ``lay_a``/``lay_b``: the formats' bit layouts
    (``tensorcore._bit_layout``); scales: ``sa`` (M, K / block) and ``sb`` (N, K / block) codes (``aligned``:
    e8m0; ``grouped``: through ``scale_table``). ``params``: chunk, instruction_k, f, g (``two-stage``: f2),
    zero_exp, promotion, drop_tiny_c, dependent specials, block, group, lift.
    Returns 0, or 1 when a code lies outside its format (nothing is judged: the caller decides)."""
    la = (_I(lay_a[0]), _I(lay_a[1]), _I(lay_a[2]), _I(lay_a[3]), _I(lay_a[4]), _I(lay_a[5]), _I(lay_a[6]),
          _I(lay_a[7]), _I(lay_a[8]), _I(lay_a[9]))
    lb = (_I(lay_b[0]), _I(lay_b[1]), _I(lay_b[2]), _I(lay_b[3]), _I(lay_b[4]), _I(lay_b[5]), _I(lay_b[6]),
          _I(lay_b[7]), _I(lay_b[8]), _I(lay_b[9]))
    model = (params[0], params[1], params[2], params[3], params[4], params[6] != 0, params[7] != 0, params[8],
             params[9], params[10])
    if algorithm == ALIGNED:
        return _drive_aligned(a, b, paired, la, lb, sa, sb, scale_table, model, params[5], c_bits, out_bits, dep)
    if algorithm == TWO_STAGE:
        return _drive_two_stage(a, b, paired, la, lb, sa, sb, scale_table, model, params[5], c_bits, out_bits, dep)
    return _drive_grouped(a, b, paired, la, lb, sa, sb, scale_table, model, params[5], c_bits, out_bits, dep)


def cached() -> bool | None:
    """Whether :func:`chain` has a compilation on disk from an earlier process (False: this process compiles it,
    about 45 s on two cores); None where this numba does not say (its cache's layout is its own)."""
    import os

    try:
        return os.path.exists(chain._cache._cache_file._index_path)
    except AttributeError:
        return None


_SPECIALISED: dict[tuple, Any] = {}


def specialised(algorithm: int, lay_a: np.ndarray, lay_b: np.ndarray, params: np.ndarray, make: bool = True) -> Any:
    """:func:`chain` compiled for one instruction kind: its formats' layouts and its model's parameters as
    constants (shifts by known amounts, 16-lane int32 vectors; about twice as fast, one compilation per kind,
    cached on disk); ``make=False``: only one this process has already made (else None). Called as ``(a, b,
    paired, sa, sb, scale_table, promotion, c_bits, out_bits, dep)``."""
    key = (algorithm, tuple(lay_a.tolist()), tuple(lay_b.tolist()), tuple(params.tolist()))
    if key not in _SPECIALISED and make:
        _SPECIALISED[key] = _specialise(algorithm, _layout(lay_a), _layout(lay_b), _model(params))
    return _SPECIALISED.get(key)


def made() -> bool:
    """Whether this process has a compiled kernel: :func:`chain` for some call, or a kind's own."""
    return bool(chain.signatures) or bool(_SPECIALISED)


def _specialise(algorithm: int, la: tuple, lb: tuple, model: tuple) -> Any:
    # the algorithm's driver called, not inlined, with the kind's layouts and model as tuples of literals: numba
    # compiles it (and its lanes) for those literals, made constants by _constants (inlining the whole driver here
    # copied its IR block by block: 2 to 2.5 times the compilation)
    drive = (_kind_aligned, _kind_two_stage, _kind_grouped)[algorithm]

    def kind_chain(a: np.ndarray, b: np.ndarray, paired: bool, sa: np.ndarray, sb: np.ndarray,
                   scale_table: np.ndarray, promotion: int, c_bits: np.ndarray, out_bits: np.ndarray,
                   dep: np.ndarray) -> int:
        return drive(a, b, paired, la, lb, sa, sb, scale_table, model, promotion, c_bits, out_bits, dep)
    return _jit(kind_chain)

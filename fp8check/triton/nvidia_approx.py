"""NVIDIA's approximate float32 instructions as an sm90 GPU executes them: data and free functions.

What ptxas makes of each instruction for ``sm_90`` (read with nvdisasm from the
cubins of the ptxas 12.9 and 13.4 that the Triton 3.9 wheel ships;
``python gpu/approx_ops.py --sass`` prints them):

- ``div.full.f32 d, a, b`` -- Triton's float32 ``/`` of run-time values (3.6,
  3.8 and 3.9: ``FDivOpConversion``, ``llvm.nvvm.div.full``)::

      |b| >  2^126:  a *= 0.25, b *= 0.25        (FMUL: IEEE, round to nearest, subnormals kept)
      |b| <  2^-126: a *= 2^24, b *= 2^24        (FSETP.GEU: a NaN divisor is not scaled)
      r = MUFU.RCP(b);  d = FMUL(r, a)

  so the quotient is one rounding of ``a' * rcp(b')``: bit-exact wherever the
  hardware reciprocal of ``b'`` is known (:func:`div_full_f32`).
- a divisor known at compile time, ``2^-126 <= |C| <= 2^126``: ptxas folds
  ``div.full.f32 x, C`` (Triton 3.6, 3.8) and ``div.approx.f32 r, 1.0, C`` +
  ``mul.f32`` (Triton 3.9) alike into ``FMUL x, K`` with ``K = fl(1/C)``, the
  correctly rounded reciprocal, computed by the compiler, not by MUFU.RCP
  (:data:`CONSTANT_FOLDING`). Outside that range the run-time sequence stays.
- ``rcp/sqrt/rsqrt/ex2/lg2.approx.ftz.f32``: one ``MUFU.RCP/SQRT/RSQ/EX2/LG2``
  each; the ``.ftz`` form reads subnormal inputs as zero and writes subnormal
  results as zero.

``MUFU.RCP`` is within 1 ulp (PTX ISA, ``rcp.approx.f32``) and deterministic.
Of a normal ``b = 1.m * 2^e`` it is ``rcp(1.m) * 2^-e``: the unit looks its
result up by the 23 mantissa bits, so one measured reciprocal per mantissa
covers every exponent (consistent with every H200 measurement here; the GPU
script measures it for every mantissa at every exponent). Which reciprocals
are known, and from what, is :func:`reciprocal_table` (data shipped with the
package, loaded on first use).

Everything here takes and returns NumPy float32 arrays; each model returns
its values and a mask of the elements whose value is known bit for bit. An
unknown element's value is the one the ``end`` asks for: ``rn`` (the
correctly rounded quotient, which lies between the other two), ``lo`` or
``hi`` (the lowest or highest result the 1-ulp reciprocal allows). ``rn``
is the correctly rounded quotient, not the product with ``fl(1/b)`` that
the hardware gives for about 87% of divisors, so that a check never calls
a kernel wrong on a value some reciprocal within the bound would give: the
three runs put every unknown division at one end, and a quotient that is
itself a divisor (two divisions deep) can land where no run samples it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Literal, Mapping

import numpy as np

from fp8check import formats

__all__ = [
    "ReciprocalTable", "reciprocal_table", "table_from_measurements", "write_table", "mantissa_reciprocal_bits",
    "mufu_rcp", "div_full_f32", "divide_by_constant", "constant_reciprocal", "RootTables", "root_tables",
    "mufu_root", "ROOTS_FILE", "sqrt_exact", "rsqrt_exact",
    "ex2_exact", "lg2_exact", "reciprocal_status", "FORMAT_MAXIMA", "CONSTANT_FOLDING", "DIV_FULL_SASS",
    "RCP_BOUND_ULPS", "CANONICAL_NAN", "TABLE_FILE", "UNKNOWN", "EXACT_INPUTS",
]

End = Literal["rn", "lo", "hi"]

#: The NaN every NVIDIA float instruction writes.
CANONICAL_NAN = 0x7FFFFFFF
#: rcp.approx.f32's documented bound (PTX ISA): the bracket of an unknown reciprocal.
RCP_BOUND_ULPS = 1
_HUGE = np.float32(2.0 ** 126)  # FSETP.GT |b|, 8.50705917302346158658e+37
_TINY = np.float32(2.0 ** -126)  # FSETP.GEU |b|, 1.175494350822287508e-38
_DOWN = np.float32(0.25)
_UP = np.float32(2.0 ** 24)
_MANTISSAS = 1 << 23
#: The offset stored for a mantissa whose reciprocal is not known.
UNKNOWN = -128

DIV_FULL_SASS = (
    "div.full.f32 d, a, b for sm_90 (ptxas 12.9 and 13.4, nvdisasm): FSETP.GT.AND P0, |b|, 2^126; "
    "FSETP.GEU.AND P1, |b|, 2^-126; @P0 FMUL b, b, 0.25; @P0 FMUL a, a, 0.25; @!P1 FMUL b, b, 2^24; "
    "@!P1 FMUL a, a, 2^24; MUFU.RCP r, b; FMUL d, r, a")
CONSTANT_FOLDING = (
    "a compile-time divisor 2^-126 <= |C| <= 2^126: ptxas 12.9 (div.full.f32 x, C) and 13.4 (div.approx.f32 "
    "1.0, C then mul.f32) emit FMUL x, fl(1/C), the correctly rounded reciprocal: 863 divisors of the H200 op "
    "table compared, 563 of them with a hardware reciprocal other than fl(1/C), and 448, 240, 57344, 6, 7.5, "
    "28, 127; outside that range the run-time sequence stays")

#: Every narrow format's largest finite value and int8's: the divisors of the scales quantizers compute.
FORMAT_MAXIMA: Mapping[str, float] = MappingProxyType({
    **{f.name: float(f.max) for f in (formats.E4M3FN, formats.E4M3FNUZ, formats.E5M2, formats.E5M2FNUZ,
                                      formats.E2M3FN, formats.E3M2FN, formats.E2M1FN)},
    "int8": 127.0,
})

#: The package data file of :func:`reciprocal_table`.
TABLE_FILE = "sm90-rcp.npz"


@dataclass(frozen=True, eq=False)
class ReciprocalTable:
    """MUFU.RCP's result per divisor mantissa, as far as it is known.

    ``offsets[m]``: the float32 bits of ``rcp(1.m)`` minus those of
    ``fl(1/1.m)`` (-1, 0 or +1), or :data:`UNKNOWN`. ``provenance``: where
    the known entries were measured (GPU, driver, Triton, date, inputs)."""

    offsets: np.ndarray  # int8, 2^23 entries
    provenance: str

    @property
    def known(self) -> int:
        return int(np.count_nonzero(self.offsets != UNKNOWN))

    def lookup(self, mantissa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The offsets of ``mantissa`` (uint32, 23 bits) and whether each is known."""
        off = self.offsets[np.asarray(mantissa, dtype=np.uint32) & (_MANTISSAS - 1)]
        known = off != UNKNOWN
        return np.where(known, off, 0).astype(np.int64), known


def mantissa_reciprocal_bits(mantissa: np.ndarray) -> np.ndarray:
    """``fl(1 / 1.m)`` as float32 bits (uint32), for 23-bit mantissas ``m``."""
    sig = (np.asarray(mantissa, dtype=np.uint32) | np.uint32(0x3F800000)).view(np.float32)
    return (np.float32(1.0) / sig).view(np.uint32)


def table_from_measurements(divisors: np.ndarray, reciprocals: np.ndarray, provenance: str) -> ReciprocalTable:
    """A table from measured ``rcp(b)`` (float32 bits of both), normal in-range divisors only (the others
    are skipped). Raises ValueError where two measurements of one mantissa disagree or one lies more than
    1 ulp from ``fl(1/1.m)``: the model does not hold for them."""
    b = np.asarray(divisors, dtype=np.uint32)
    r = np.asarray(reciprocals, dtype=np.uint32)
    e = ((b >> 23) & 0xFF).astype(np.int64)
    m = b & np.uint32(_MANTISSAS - 1)
    use = (e >= 1) & ((e <= 252) | ((e == 253) & (m == 0)))
    b, r, e, m = b[use], r[use], e[use], m[use]
    if np.any(((r >> 31) & 1) != ((b >> 31) & 1)):
        raise ValueError("a measured reciprocal has the other sign than its divisor")
    # rcp(1.m) = rcp(b) * 2^(e-127): add e-127 to the exponent field
    normalised = (r & np.uint32(0x7FFFFFFF)).astype(np.int64) + ((e - 127) << 23)
    offset = normalised - mantissa_reciprocal_bits(m).astype(np.int64)
    if np.any(np.abs(offset) > RCP_BOUND_ULPS):
        i = int(np.argmax(np.abs(offset)))
        raise ValueError(f"divisor 0x{int(b[i]):08X}: measured reciprocal 0x{int(r[i]):08X} is "
                         f"{int(offset[i])} ulp from fl(1/1.m)")
    offsets = np.full(_MANTISSAS, UNKNOWN, dtype=np.int8)
    offsets[m] = offset
    if np.any(offsets[m] != offset):
        i = int(np.flatnonzero(offsets[m] != offset)[0])
        raise ValueError(f"mantissa 0x{int(m[i]):06X}: measurements at two exponents disagree "
                         f"(the reciprocal is not exponent-independent there)")
    return ReciprocalTable(offsets=offsets, provenance=provenance)


def write_table(table: ReciprocalTable, path: object) -> None:
    """Store ``table`` compressed: the known mantissas and their offsets, or every offset when dense."""
    known = np.flatnonzero(table.offsets != UNKNOWN).astype(np.uint32)
    with open(str(path), "wb") as f:
        if known.size == _MANTISSAS:
            np.savez_compressed(f, offset=table.offsets, provenance=np.array(table.provenance))
        else:
            np.savez_compressed(f, mantissa=known, offset=table.offsets[known], provenance=np.array(table.provenance))


def _read_table(source: object) -> ReciprocalTable:
    with np.load(source, allow_pickle=False) as z:
        off = z["offset"].astype(np.int8)
        offsets = np.full(_MANTISSAS, UNKNOWN, dtype=np.int8)
        if "mantissa" in z.files:
            offsets[z["mantissa"].astype(np.int64)] = off
        else:
            offsets[:] = off
        return ReciprocalTable(offsets=offsets, provenance=str(z["provenance"]))


@functools.lru_cache(maxsize=None)
def reciprocal_table() -> ReciprocalTable:
    """The sm90 reciprocal table shipped with fp8check (read once, on first use)."""
    with resources.files("fp8check.triton").joinpath("data", TABLE_FILE).open("rb") as f:
        return _read_table(f)


def _fields(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    bits = x.view(np.uint32)
    return bits & np.uint32(0x80000000), ((bits >> 23) & 0xFF).astype(np.int64), bits & np.uint32(_MANTISSAS - 1)


def mufu_rcp(b: np.ndarray, table: ReciprocalTable | None = None,
             step: np.ndarray | int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``MUFU.RCP`` (``rcp.approx.ftz.f32``) of float32 ``b``: the values and whether each is known.

    Specials are specified: NaN -> NaN, +-0 and subnormals -> +-Inf, +-Inf
    and ``|b| > 2^126`` (a subnormal reciprocal, flushed) -> +-0. A normal
    ``b`` whose mantissa the table knows gets the measured reciprocal; an
    unknown one ``fl(1/b)`` moved ``step`` ulp in magnitude (-1, 0, +1, per
    element or one for all: the ends of the 1-ulp bound)."""
    table = table or reciprocal_table()
    b = np.asarray(b, dtype=np.float32)
    sign, e, m = _fields(b)
    off, known = table.lookup(m)
    off = np.where(known, off, np.asarray(step, dtype=np.int64))
    magnitude = mantissa_reciprocal_bits(m).astype(np.int64) + off - ((e - 127) << 23)
    normal = (e >= 1) & ((e <= 252) | ((e == 253) & (m == 0)))
    bits = np.where(normal, magnitude, 0).astype(np.uint32) | sign
    bits = np.where((e == 0), sign | np.uint32(0x7F800000), bits)  # zero, subnormal: Inf of its sign
    bits = np.where((e == 255) & (m != 0), np.uint32(CANONICAL_NAN), bits)  # NaN; Inf and huge: +-0 above
    return bits.view(np.float32), known | ~normal


def _canonical(q: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(q), np.uint32(CANONICAL_NAN).view(np.float32), q).astype(np.float32)


def _mul_ends(a: np.ndarray, b: np.ndarray, table: ReciprocalTable | None, end: End,
              correctly_rounded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fl(a * MUFU.RCP(b))`` for scaled operands: the value at ``end`` and where it is known
    (``correctly_rounded``: the quotient an unknown element takes in ``rn``)."""
    with np.errstate(all="ignore"):
        r_rn, known_r = mufu_rcp(b, table, 0)
        q = _canonical(a * r_rn)
        if known_r.all():
            return q, known_r
        lower = _canonical(a * mufu_rcp(b, table, -1)[0])
        upper = _canonical(a * mufu_rcp(b, table, 1)[0])
    # fl(a * r) is monotonic in r: the two ends of the reciprocal bound give the ends of the quotient's
    same = (lower.view(np.uint32) == upper.view(np.uint32)) | (np.isnan(lower) & np.isnan(upper))
    known = known_r | same
    if end == "rn":
        pick = correctly_rounded
    else:
        reduce = np.minimum.reduce if end == "lo" else np.maximum.reduce
        pick = reduce([lower, upper, correctly_rounded])
    return np.where(known, q, pick).astype(np.float32), known


def div_full_f32(a: np.ndarray, b: np.ndarray, table: ReciprocalTable | None = None,
                 end: End = "rn") -> tuple[np.ndarray, np.ndarray]:
    """``div.full.f32(a, b)`` as sm90 executes it (:data:`DIV_FULL_SASS`): float32 values and a mask of the
    elements known bit for bit (the divisor's reciprocal is known, or every reciprocal the 1-ulp bound
    allows gives the same quotient: a zero, infinite or NaN operand, an overflow, ...)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
    mag = np.abs(b)
    with np.errstate(invalid="ignore"):
        scale = np.where(mag > _HUGE, _DOWN, np.where(mag < _TINY, _UP, np.float32(1.0))).astype(np.float32)
    with np.errstate(all="ignore"):
        return _mul_ends((a * scale).astype(np.float32), (b * scale).astype(np.float32), table, end,
                         _canonical(a / b))


def constant_reciprocal(c: float) -> np.float32 | None:
    """The reciprocal ptxas folds a compile-time divisor ``c`` into (:data:`CONSTANT_FOLDING`), or None
    where it keeps the run-time sequence."""
    c32 = np.float32(c)
    if not (np.isfinite(c32) and _TINY <= abs(c32) <= _HUGE):
        return None
    return np.float32(1.0) / c32


def divide_by_constant(x: np.ndarray, c: float, table: ReciprocalTable | None = None, end: End = "rn",
                       lowering: Literal["div.full", "div.approx"] = "div.full") -> tuple[np.ndarray, np.ndarray]:
    """Float32 ``x / C`` for a compile-time constant ``C``: ``fl(x * fl(1/C))``, every element known, where
    ptxas folds the reciprocal; else the run-time ``div.full.f32`` (Triton 3.6, 3.8), or, for Triton 3.9's
    ``div.approx.f32 1.0, C`` (not modelled outside the folding range), that model's values, unknown."""
    x = np.asarray(x, dtype=np.float32)
    k = constant_reciprocal(c)
    if k is not None:
        with np.errstate(all="ignore"):
            return _canonical(x * k), np.ones(x.shape, dtype=bool)
    q, known = div_full_f32(x, np.float32(c), table, end)
    if lowering == "div.approx":
        known = np.zeros(q.shape, dtype=bool)
    return q, known


# -- square roots: measured for every input ---------------------------------------------------------------

#: The package data file of :func:`root_tables`.
ROOTS_FILE = "sm90-roots.npz"
_ROOTS = {"sqrt": (np.sqrt, 1), "rsqrt": (lambda v: 1.0 / np.sqrt(v), -1)}  # the function, the exponent's direction


@dataclass(frozen=True, eq=False)
class RootTables:
    """MUFU.SQRT's and MUFU.RSQ's result per input mantissa and exponent parity, measured for every normal
    positive float32 (each int8 (2, 2^23): row 0 the float32 bits of the result of ``1.m`` less those of the
    correctly rounded root, row 1 the same for ``2 * 1.m``). The unit reads the mantissa and the exponent's
    parity: ``x * 4^k`` gives the result of ``x`` times ``2^k`` (sqrt) or ``2^-k`` (rsqrt), which the GPU
    script checked on every normal input (0 of 2,130,706,432 off, per function)."""

    sqrt: np.ndarray
    rsqrt: np.ndarray
    provenance: str


@functools.lru_cache(maxsize=None)
def root_tables() -> RootTables:
    """The sm90 square-root tables shipped with fp8check (read once, on first use)."""
    with resources.files("fp8check.triton").joinpath("data", ROOTS_FILE).open("rb") as f, \
            np.load(f, allow_pickle=False) as z:
        return RootTables(sqrt=z["sqrt"].astype(np.int8), rsqrt=z["rsqrt"].astype(np.int8),
                          provenance=str(z["provenance"]))


def mufu_root(op: Literal["sqrt", "rsqrt"], x: np.ndarray, tables: RootTables | None = None) -> np.ndarray:
    """``sqrt.approx.ftz.f32`` or ``rsqrt.approx.ftz.f32`` (MUFU.SQRT, MUFU.RSQ) of float32 ``x``, bit for
    bit: a normal positive input from :func:`root_tables`; the rest specified (a subnormal read as zero of
    its sign; sqrt: ``±0 -> ±0``, ``+Inf -> +Inf``; rsqrt: ``±0 -> ±Inf``, ``+Inf -> +0``; a negative input
    or NaN -> the canonical NaN). Both results of a normal input are normal: nothing to flush."""
    fn, direction = _ROOTS[op]
    offsets = getattr(tables or root_tables(), op)
    x = np.asarray(x, dtype=np.float32)
    sign, e, m = _fields(x)
    normal = (sign == 0) & (e >= 1) & (e <= 254)
    odd = (e % 2 == 1)  # 1.m * 4^k: row 0; 2 * 1.m * 4^k: row 1
    e0 = np.where(odd, 127, 128)
    base = ((e0.astype(np.uint32) << 23) | m).view(np.float32)
    with np.errstate(all="ignore"):
        rounded = fn(base.astype(np.float64)).astype(np.float32).view(np.uint32).astype(np.int64)
        special = fn(np.where(e == 0, np.copysign(np.float32(0), x), x).astype(np.float64)).astype(np.float32)
    bits = rounded + offsets[np.where(odd, 0, 1), m] + direction * (((e - e0) // 2) << 23)
    out = np.where(normal, bits.astype(np.uint32).view(np.float32), special)
    return _canonical(out)


# -- approximate functions: the inputs whose result is known ---------------------------------------------

def _power_of_two(x: np.ndarray, *, subnormal: bool) -> tuple[np.ndarray, np.ndarray]:
    sign, e, m = _fields(np.asarray(x, dtype=np.float32))
    normal = (e >= 1) & (e <= 254) & (m == 0)
    sub = (e == 0) & (m != 0) & ((m & (m - np.uint32(1))) == 0)
    exponent = np.where(normal, e - 127, -127)  # (the subnormal ones: -127 - the leading zeros, not needed)
    return (sign == 0) & (normal | (sub if subnormal else False)), exponent


def sqrt_exact(x: np.ndarray) -> np.ndarray:
    """Where ``sqrt.approx.ftz.f32`` (MUFU.SQRT) is known to give the correctly rounded result of its input
    as the ``.ftz`` instruction reads it (a subnormal as zero of its sign): zeros, subnormals, +Inf, NaN and
    negative inputs (specified), and even powers of two ``4^k`` (measured at 2^0 and 2^-126 on the H200;
    the unit reads the mantissa and the exponent's parity, which gpu/approx_ops.py checks on every input)."""
    x = np.asarray(x, dtype=np.float32)
    pow2, k = _power_of_two(x, subnormal=False)
    return _specials(x) | (x < 0) | (pow2 & (k % 2 == 0)) | ((x != 0) & (np.abs(x) < _TINY))


def rsqrt_exact(x: np.ndarray) -> np.ndarray:
    """As :func:`sqrt_exact` for ``rsqrt.approx.ftz.f32`` (MUFU.RSQ; measured at 2^0 and 2^-126)."""
    return sqrt_exact(x)


def ex2_exact(x: np.ndarray) -> np.ndarray:
    """Where ``ex2.approx.ftz.f32`` (MUFU.EX2) is known to give the correctly rounded result (a subnormal
    result written as zero): specials, and integer inputs, whose ``2^n`` it gives exactly (0 below -126,
    Inf from 128): every integer -160..140 and 1,097 integer-valued floats measured on the H200."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        return _specials(x) | (np.isfinite(x) & (np.floor(x) == x))


def lg2_exact(x: np.ndarray) -> np.ndarray:
    """Where Triton's ``tl.log2`` on sm90 (libdevice ``__nv_log2f``) is known: specials, negative inputs
    (NaN), and powers of two, normal or subnormal (log2 is the exponent: measured at 2^-149, 2^-127,
    2^-126, 2^-1 and 2^0 on the H200; the subnormal ones are scaled by 2^23 first)."""
    x = np.asarray(x, dtype=np.float32)
    pow2, _ = _power_of_two(x, subnormal=True)
    return _specials(x) | (x < 0) | pow2


def _specials(x: np.ndarray) -> np.ndarray:
    return (x == 0) | ~np.isfinite(x)


#: The op names of fp8check.triton.ops' approximate functions -> the inputs whose sm90 result is known
#: (sqrt and rsqrt: every input, :func:`mufu_root`).
EXACT_INPUTS = MappingProxyType({"exp2": ex2_exact, "log2": lg2_exact})


def reciprocal_status(divisor: float, table: ReciprocalTable | None = None) -> str:
    """``"measured"`` where MUFU.RCP of ``divisor`` (a run-time value) is in the table, else
    ``"bracketed"`` (a compile-time one is always folded exactly: :func:`constant_reciprocal`)."""
    _, known = mufu_rcp(np.float32(divisor), table)
    return "measured" if bool(known) else "bracketed"

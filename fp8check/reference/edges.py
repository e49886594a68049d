"""The curated float32/float64 edge cases of a format, each with a note.

These are the inputs where conversions go wrong: every rounding tie between
two neighbouring values of the format and one input ulp either side of it,
the overflow tie (464 for e4m3fn, 248 for e4m3fnuz, 61440 for e5m2 and
e5m2fnuz), the subnormal boundaries, ±0 and tiny negatives, ±Inf, NaNs of
both signs with varied payloads, and for float64 the values that rounding
through float32 first puts on a tie (the double rounding torch and
ml_dtypes do). The golden vectors and the tests use the same set::

    >>> from fp8check.reference.edges import edge_cases
    >>> case = edge_cases("e4m3fn", "float32")[0]
    >>> case.source, hex(case.bits), case.note
    ('float32', '0x0', '+0')
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from fp8check.formats import SOURCE_FORMATS, Format, get as get_format
from fp8check.reference.spec import source_bits

__all__ = ["EdgeCase", "edge_cases", "EDGE_SOURCES"]

EDGE_SOURCES = ("float32", "float64")

# NaN bit patterns of both signs: quiet, signalling, all-ones payload, and a
# payload in the high bits only.
_NANS = {
    "float32": (0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000),
    "float64": (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFF0000000000001,
                0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x7FF4000000000000),
}


@dataclass(frozen=True)
class EdgeCase:
    """One input: its type, its IEEE bit pattern and why it is interesting."""

    source: str
    bits: int
    note: str


def _show(v: Fraction) -> str:
    return f"{float(v):g}"


def _positive_values(fmt: Format) -> list[tuple[Fraction, int]]:
    """(value, code) of every finite non-negative value, ascending."""
    found = []
    for code in range(fmt.code_count):
        if code & fmt.sign_mask:
            continue
        v = fmt.exact_value(code)
        if isinstance(v, Fraction):
            found.append((v, code))
    return sorted(found)


@lru_cache(maxsize=None)
def edge_cases(fmt: object, source: str) -> tuple[EdgeCase, ...]:
    """The curated edge cases of ``fmt`` as ``source`` inputs, without repeats."""
    f = get_format(fmt)
    src = SOURCE_FORMATS[source]
    sign = 1 << (src.bits - 1)
    cases: list[EdgeCase] = []
    seen: set[int] = set()

    def add(bits: int, note: str) -> None:
        if bits not in seen:
            seen.add(bits)
            cases.append(EdgeCase(source, bits, note))

    def add_value(v: Fraction, note: str, *, negative: bool = False) -> int:
        bits = source_bits(negative, v, src)
        add(bits, ("-" if negative else "") + note)
        return bits

    add(0, "+0")
    add(sign, "-0: fnuz has no -0 and must give 0x00, never the NaN 0x80")
    add(1, f"smallest positive {source} subnormal")
    add(sign | 1, f"tiny negative (smallest {source} subnormal): fnuz must give 0x00")
    add(source_bits(False, Fraction(1), src), "1.0")
    add(source_bits(True, Fraction(1), src), "-1.0")

    values = _positive_values(f)
    # Ties between neighbouring values, and one input ulp either side.
    for (lo, lo_code), (hi, hi_code) in zip(values, values[1:]):
        tie = (lo + hi) / 2
        what = f"tie between {lo_code:#04x} ({_show(lo)}) and {hi_code:#04x} ({_show(hi)})"
        if f.mantissa_bits and lo_code >> f.mantissa_bits != hi_code >> f.mantissa_bits and lo != 0:
            what += ", rounding up carries into the exponent"
        bits = add_value(tie, what)
        # A float64 this near the tie rounds to it in float32 (double rounding).
        via32 = ": float32 rounding lands on the tie (double rounding)" if source == "float64" else ""
        add(bits - 1, f"1 {source} ulp below the {what}{via32}")
        add(bits + 1, f"1 {source} ulp above the {what}{via32}")
        add_value(tie, what, negative=True)
        if source == "float64":
            # Within half a float32 ulp of the tie: rounding to float32 first
            # lands exactly on the tie, then ties-to-even decides wrongly.
            half_ulp32 = Fraction(2) ** (max(_exponent(tie), -126) - 24)
            add_value(tie + half_ulp32 - _ulp64(tie + half_ulp32),
                      f"just above the {what}: float32 rounding lands on the tie (double rounding)")
            add_value(tie - half_ulp32 + _ulp64(tie - half_ulp32),
                      f"just below the {what}: float32 rounding lands on the tie (double rounding)")

    # Overflow: the tie between max and the next grid point beyond it.
    largest, largest_code = values[-1]
    quantum = Fraction(2) ** (f.emax - f.mantissa_bits)
    overflow_tie = largest + quantum / 2
    what = f"overflow tie {_show(overflow_tie)} (max {_show(largest)} + half its ulp)"
    if largest_code & 1 or f.mantissa_bits == 0:
        bits = add_value(overflow_tie, what + ": ties-to-even overflows")
    else:
        bits = add_value(overflow_tie, what + ": ties-to-even keeps max (even mantissa)")
    add(bits - 1, f"1 {source} ulp below the {what}: rounds to max")
    add(bits + 1, f"1 {source} ulp above the {what}")
    add_value(overflow_tie, what, negative=True)
    bits = add_value(largest, f"max {_show(largest)} ({largest_code:#04x})")
    add(bits + 1, f"1 {source} ulp above max {_show(largest)}: rounds back to max")
    add_value(largest, f"max {_show(largest)}", negative=True)
    add_value(2 * largest + quantum, f"far beyond max {_show(largest)} (overflow under every rounding)")
    add_value(2 * largest + quantum, "far beyond max (overflow under every rounding)", negative=True)
    top = ((1 << src.exponent_bits) - 1) << src.mantissa_bits
    add(top - 1, f"largest finite {source}")
    add(sign | (top - 1), f"most negative finite {source}")

    # Subnormal boundaries of the format.
    smallest = values[1][0] if values[0][0] == 0 else values[0][0]
    normal = Fraction(2) ** f.emin
    bits = add_value(normal, f"smallest normal {_show(normal)}")
    add(bits - 1, f"1 {source} ulp below the smallest normal {_show(normal)}")
    bits = add_value(smallest, f"smallest positive value {_show(smallest)}")
    add(bits - 1, f"1 {source} ulp below the smallest positive value {_show(smallest)}")
    add_value(smallest / 4, "a quarter of the smallest positive value: underflows")
    add_value(smallest / 4, "a quarter of the smallest positive value: underflows (fnuz: 0x00)",
              negative=True)

    # Infinities and NaNs.
    add(top, "+Inf")
    add(sign | top, "-Inf")
    for bits in _NANS[source]:
        kind = "quiet" if bits & (1 << (src.mantissa_bits - 1)) else "signalling"
        add(bits, f"{'-' if bits & sign else '+'}NaN, {kind}, payload {bits & src.mantissa_mask:#x}")
    return tuple(cases)


def _exponent(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def _ulp64(v: Fraction) -> Fraction:
    return Fraction(2) ** (max(_exponent(v), -1022) - 52)

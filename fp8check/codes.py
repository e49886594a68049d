"""The one classifier of codes, and their bit fields as text.

Every part of fp8check that asks "is this code a NaN, an Inf, a zero, a
subnormal?" asks :func:`code_class` (one code) or :func:`code_classes` (an
array), as gfloat's ``FloatClass`` answers it for its formats. Every part
that shows a code's sign, exponent and mantissa bits asks
:func:`bit_fields`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from fp8check.formats import Format, get as get_format

__all__ = ["CLASSES", "code_class", "code_classes", "class_table", "bit_fields", "field_widths"]

# In value order of magnitude; a code is in exactly one class.
CLASSES = ("zero", "subnormal", "normal", "infinity", "nan")


def code_class(code: int, fmt: object) -> str:
    """``'zero'``, ``'subnormal'``, ``'normal'``, ``'infinity'`` or ``'nan'`` for one code of ``fmt``."""
    f = get_format(fmt)
    if f.is_nan(code):
        return "nan"
    if f.is_inf(code):
        return "infinity"
    mag = code & f.magnitude_mask
    if mag == 0 and f.has_zero:
        return "zero"
    if f.has_subnormals and mag >> f.mantissa_bits == 0:
        return "subnormal"
    return "normal"


@lru_cache(maxsize=None)
def class_table(fmt: Format) -> np.ndarray:
    """The class index (into :data:`CLASSES`) of every code of ``fmt``, read-only."""
    table = np.array([CLASSES.index(code_class(c, fmt)) for c in range(fmt.code_count)], dtype=np.uint8)
    table.setflags(write=False)
    return table


def code_classes(codes: np.ndarray, fmt: object) -> np.ndarray:
    """:func:`code_class` of every code in ``codes``, as indices into :data:`CLASSES` (uint8)."""
    return class_table(get_format(fmt))[np.asarray(codes).astype(np.intp)]


def field_widths(fmt: object) -> tuple[int, int, int]:
    """(sign, exponent, mantissa) widths in bits; 0 where the format has no such field."""
    f = get_format(fmt)
    return int(f.signed), f.exponent_bits, f.mantissa_bits


def bit_fields(code: int, fmt: object, sep: str = " ") -> str:
    """``code`` as its bit fields, sign, exponent and mantissa joined by ``sep``:
    ``'0 1111 110'``. With ``sep='|'`` a field the format lacks stays, empty
    (e8m0fnu: ``'|01111111|'``); with a blank separator it is left out."""
    bits = f"{code:0{get_format(fmt).bits}b}"
    s, e, _ = field_widths(fmt)
    fields = [bits[:s], bits[s:s + e], bits[s + e:]]
    if not sep.strip():
        fields = [x for x in fields if x]
    return sep.join(fields)

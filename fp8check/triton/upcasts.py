"""The values compiled Triton gives fp8 codes on a target: its upcast table (:mod:`.targets`) applied.

:func:`fp8check.triton.interpreter_mode.decode_for_target` is this plus the refusal of what the target does
not compile; :mod:`fp8check.matmul.dot_scaled` decodes ``tl.dot_scaled``'s operands with it."""

from __future__ import annotations

import numpy as np

from fp8check import reference
from fp8check.formats import get as get_format
from fp8check.triton.targets import Target

__all__ = ["finite_extension", "upcast_values"]


def finite_extension(fmt: str, codes: np.ndarray) -> np.ndarray:
    """Values of the codes read as if the all-ones exponent were an ordinary binade."""
    f = get_format(fmt)
    c = codes.astype(np.int64)
    m = c & f.mantissa_mask
    e = (c >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1)
    mag = np.ldexp((m + (1 << f.mantissa_bits)).astype(np.float64), (e - f.bias - f.mantissa_bits).astype(np.int32))
    return np.where((c >> (f.bits - 1)) & 1 == 1, -mag, mag)


def upcast_values(codes: np.ndarray, fmt: str, dest: str, target: Target) -> np.ndarray:
    """The values ``fmt`` codes become in ``dest`` (float32, float16, or bfloat16 as uint16 bits) as ``target``'s
    upcast lowers them (exactly, where the target does not compile the conversion)."""
    codes = np.ascontiguousarray(codes).view(np.uint8)
    values = reference.decode(codes, fmt)
    entry = target.upcast(fmt, dest)
    if not entry.supported:
        pass
    elif entry.specials == "fnuz_nan_negative_zero":
        values = np.where(codes == 0x80, -0.0, values)
    elif entry.specials == "as_e5m2":
        values = reference.decode(codes, "e5m2")
    elif entry.specials == "finite":
        f = get_format(fmt)
        special = np.isin(codes, np.array([c for c in range(256) if f.is_nan(c) or f.is_inf(c)], dtype=np.uint8))
        if f.nan_encoding != "negative_zero" and special.any():
            values = np.where(special, finite_extension(fmt, codes), values)
    if dest == "float32":
        return values.astype(np.float32)
    if dest == "float16":
        with np.errstate(over="ignore"):
            return values.astype(np.float16)
    # bfloat16: every fp8 value has at most 4 significant bits: exact
    f32 = values.astype(np.float32)
    out = (f32.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(f32), np.uint16(0x7FC0), out)

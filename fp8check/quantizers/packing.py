"""Two 4-bit codes per byte: the packed layouts of FP4 (e2m1fn) tensors, as a recipe declares them.

Codes are packed along each row: byte ``j`` of a row holds elements ``2j``
and ``2j + 1``. ``"low-first"``: element ``2j`` in the low nibble (bits 0-3),
``2j + 1`` in the high nibble -- torchao's ``pack_uint4``, compressed-tensors'
``pack_fp4_to_uint8``, ModelOpt's ``fuse_uint4_to_uint8`` all do this.
``"high-first"``: the other way round. A row of odd length cannot be packed.

Which order a kernel uses is declared (``packed`` of its recipe), never
guessed: the two orders are each other's image under :func:`swap_pairs`, so
a kernel that packs the other way is recognised as such, not as noise.
"""

from __future__ import annotations

import numpy as np

from fp8check.errors import InvalidValueError

__all__ = ["ORDERS", "pack_codes", "unpack_codes", "swap_pairs"]

ORDERS = ("low-first", "high-first")


def _order(order: str) -> bool:
    if order not in ORDERS:
        raise InvalidValueError(f"packed order {order!r} is not one of {', '.join(ORDERS)}")
    return order == "low-first"


def pack_codes(codes: np.ndarray, order: str) -> np.ndarray:
    """Pack 4-bit ``codes`` (uint8, shape (m, n), n even) into uint8 bytes of shape (m, n // 2)."""
    low_first = _order(order)
    c = np.asarray(codes, dtype=np.uint8)
    if c.ndim != 2 or c.shape[1] % 2:
        raise InvalidValueError(f"packing two codes per byte needs rows of even length, got shape {tuple(c.shape)}")
    if c.size and int(c.max()) > 0xF:
        raise InvalidValueError(f"packing 4-bit codes: got a code {int(c.max()):#04x} wider than 4 bits")
    first, second = c[:, 0::2], c[:, 1::2]
    low, high = (first, second) if low_first else (second, first)
    return (low | (high << 4)).astype(np.uint8)


def unpack_codes(packed: np.ndarray, order: str) -> np.ndarray:
    """The 4-bit codes (uint8, shape (m, 2 * n)) of packed bytes of shape (m, n)."""
    low_first = _order(order)
    p = np.asarray(packed, dtype=np.uint8)
    if p.ndim != 2:
        raise InvalidValueError(f"packed codes must be 2-D, got shape {tuple(p.shape)}")
    low, high = p & 0xF, p >> 4
    out = np.empty((p.shape[0], 2 * p.shape[1]), dtype=np.uint8)
    out[:, 0::2], out[:, 1::2] = (low, high) if low_first else (high, low)
    return out


def swap_pairs(codes: np.ndarray) -> np.ndarray:
    """Each pair (2j, 2j + 1) of a row exchanged: the codes read under the other packing order."""
    c = np.asarray(codes)
    out = c.copy()
    out[:, 0::2], out[:, 1::2] = c[:, 1::2], c[:, 0::2]
    return out

"""Which scaling granularity a scale's shape implies for its FP8 tensor.

The names follow the recipes issue so the two can be unified: ``tensorwise``,
``rowwise`` (one scale per output channel), ``colwise``, ``block-1x128``,
``block-128x128`` (ragged edge blocks: ``[ceil(out/128), ceil(in/128)]``),
``group`` (per group along the input dim), ``mx-e8m0`` (group 32 with e8m0
scales).

Every granularity is described as one shape of block: element ``(b, r, c)``
of data ``[..., out, in]`` (``b`` runs over the leading batch dims, e.g. MoE
experts) is dequantized with ``scale[b, r // block_rows, c // block_cols]``
of the scale normalised to 3-D ``[batches, ceil(out/block_rows),
ceil(in/block_cols)]``. A scale shared by all batches has ``batches == 1``.
Block and group sizes are powers of two (or the size a config declares), so
a scale of the wrong shape is not explained away by an odd block size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

TENSORWISE = "tensorwise"
ROWWISE = "rowwise"
COLWISE = "colwise"
GROUP = "group"
BLOCK = "block"
MX_E8M0 = "mx-e8m0"
MX_BLOCK = 32


@dataclass(frozen=True)
class Granularity:
    name: str  # tensorwise, rowwise, colwise, block-1x128, block-128x128, block-AxB, group, mx-e8m0
    block_rows: int
    block_cols: int
    batches: int  # 1 when the scale is shared by every batch (expert) of the data
    layout: str = ""  # "modelopt-4d" for [out/128, 1, in/128, 1] block scales

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "block": [self.block_rows, self.block_cols], "batches": self.batches,
                "layout": self.layout or None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Granularity:
        """Read back from :meth:`to_dict`'s JSON form."""
        rows, cols = d["block"]
        return cls(name=d["name"], block_rows=rows, block_cols=cols, batches=d["batches"], layout=d["layout"] or "")


def data_dims(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int, int]:
    """(batch dims, out, in) of a data tensor: 1-D data is one row; 0-D one element."""
    if len(shape) == 0:
        return (), 1, 1
    if len(shape) == 1:
        return (), 1, shape[0]
    return tuple(shape[:-2]), shape[-2], shape[-1]


def _cdiv(a: int, b: int) -> int:
    return -(-a // max(b, 1))


def _sizes(n: int, count: int, preferred: tuple[int, ...]) -> int | None:
    """A block size b with ceil(n / b) == count: the preferred ones first,
    then the smallest power of two."""
    if count <= 0 or n <= 0:
        return None
    for b in preferred:
        if b and b > 0 and _cdiv(n, b) == count:
            return b
    b = 1
    while b <= max(n, 1) * 2:
        if _cdiv(n, b) == count:
            return b
        b *= 2
    return None


def block_scale_shape(data_shape: tuple[int, ...], block: tuple[int, int]) -> list[int]:
    """The scale shape of ``block`` blocks over a weight's two last dims, ragged edge blocks included."""
    _, o, i = data_dims(data_shape)
    return [-(-o // block[0]), -(-i // block[1])]


def match(data_shape: tuple[int, ...], scale_shape: tuple[int, ...], *, e8m0: bool = False,
          block_hint: tuple[int, int] | None = None, group_hint: int | None = None) -> Granularity | None:
    """The granularity under which ``scale_shape`` fits ``data_shape``, or None."""
    batch, o, i = data_dims(data_shape)
    nb = math.prod(batch) if batch else 1
    n_scale = math.prod(scale_shape) if scale_shape else 1
    if n_scale == 1:
        return Granularity(TENSORWISE, max(o, 1), max(i, 1), 1)
    s = list(scale_shape)
    layout = ""
    batches = 1
    if batch and s[: len(batch)] == list(batch):
        s = s[len(batch):]
        batches = nb
    elif batch and len(batch) > 1 and s[:1] == [nb]:
        s = s[1:]
        batches = nb
    if len(s) == 4 and s[1] == 1 and s[3] == 1:
        s = [s[0], s[2]]
        layout = "modelopt-4d"
    while len(s) > 2 and s[0] == 1:
        s = s[1:]
    if s in ([], [1], [1, 1]):
        return Granularity(TENSORWISE, max(o, 1), max(i, 1), batches, layout)
    if s in ([o], [o, 1]) and o > 1:
        return Granularity(ROWWISE, 1, i, batches, layout)
    if s == [1, i] or (s == [i] and i != o):
        return Granularity(COLWISE, o, 1, batches, layout)
    if len(s) == 1 and o == 1:  # 1-D data in groups
        s = [1, s[0]]
    if len(s) != 2:
        return None
    so, si = s
    preferred = tuple(x for x in ((group_hint,) if group_hint else ()) + ((MX_BLOCK,) if e8m0 else ()) + (128,))
    if so == o:
        g = _sizes(i, si, preferred)
        if g is None:
            return None
        if e8m0 and g == MX_BLOCK:
            name = MX_E8M0
        elif g == 128 and not group_hint:
            name = "block-1x128"
        else:
            name = GROUP
        return Granularity(name, 1, g, batches, layout)
    rows_pref = ((block_hint[0],) if block_hint else ()) + (128,)
    cols_pref = ((block_hint[1],) if block_hint else ()) + (128,)
    bo = _sizes(o, so, rows_pref)
    bi = _sizes(i, si, cols_pref)
    if bo is None or bi is None:
        return None
    return Granularity(f"block-{bo}x{bi}", bo, bi, batches, layout)


def expected_shapes(data_shape: tuple[int, ...]) -> str:
    """A short list of scale shapes that would fit, for a SCALE_SHAPE message."""
    batch, o, i = data_dims(data_shape)
    pre = list(batch)
    opts = [
        "[] or [1] (tensorwise)",
        f"{pre + [o, 1]} (rowwise)",
        f"{pre + [_cdiv(o, 128), _cdiv(i, 128)]} (block-128x128)",
        f"{pre + [o, _cdiv(i, 128)]} (block-1x128)",
        f"{pre + [o, _cdiv(i, 32)]} (mx-e8m0)",
    ]
    return ", ".join(opts)


def normalise(scale: np.ndarray, g: Granularity, data_shape: tuple[int, ...]) -> np.ndarray:
    """The scale as 3-D ``[batches, ceil(out/block_rows), ceil(in/block_cols)]``."""
    _, o, i = data_dims(data_shape)
    if g.name == TENSORWISE and np.size(scale) == g.batches:
        return np.ascontiguousarray(scale).reshape(g.batches, 1, 1)
    return np.ascontiguousarray(scale).reshape(g.batches, _cdiv(o, g.block_rows), _cdiv(i, g.block_cols))


def elements_under(g: Granularity, data_shape: tuple[int, ...], scale3_shape: tuple[int, ...]) -> np.ndarray:
    """How many data elements each element of the 3-D scale (:func:`normalise`) applies to (ragged edges too)."""
    batch, o, i = data_dims(data_shape)
    nb = int(np.prod(batch)) if batch else 1
    _, rows_n, cols_n = scale3_shape
    rows = np.array([o]) if rows_n == 1 else np.minimum(g.block_rows, o - np.arange(rows_n) * g.block_rows)
    cols = np.array([i]) if cols_n == 1 else np.minimum(g.block_cols, i - np.arange(cols_n) * g.block_cols)
    per = (rows[:, None] * cols[None, :]).astype(np.int64) * max(nb // max(g.batches, 1), 1)
    return np.broadcast_to(per, scale3_shape)


def expand_rows(scale3: np.ndarray, g: Granularity, data_shape: tuple[int, ...], r0: int, r1: int) -> np.ndarray:
    """The scale of every element of rows [r0, r1) of the data viewed as 2-D
    ``[batches * out, in]``: an array ``[r1 - r0, in]``, or ``[r1 - r0, 1]``
    when one scale covers each whole row."""
    _, o, i = data_dims(data_shape)
    rows = np.arange(r0, r1)
    o = max(o, 1)
    b = rows // o if g.batches > 1 else np.zeros_like(rows)
    per_row = scale3[b, np.minimum((rows % o) // g.block_rows, scale3.shape[1] - 1), :]  # [n, ceil(in / block_cols)]
    if per_row.shape[1] == 1:
        return per_row
    return np.repeat(per_row, g.block_cols, axis=1)[:, :i]

"""A reciprocal table that lacks most mantissas, for the tests of what an unknown reciprocal does."""

from __future__ import annotations

import numpy as np

from fp8check.triton import nvidia_approx as na


def partial_reciprocal_table() -> na.ReciprocalTable:
    """The shipped sm90 table with only the mantissas 1.0, 1.5 and 1.75 known (what the stored op table's
    `1.0 / b` covered before every mantissa was measured): a division by 127, 240 or 0.7071 is bracketed."""
    full = na.reciprocal_table()
    keep = np.full(full.offsets.shape, na.UNKNOWN, dtype=full.offsets.dtype)
    for m in (0, 1 << 22, 3 << 21):
        keep[m] = full.offsets[m]
    return na.ReciprocalTable(offsets=keep, provenance="tests: three mantissas")

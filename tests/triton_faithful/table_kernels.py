"""A kernel module that also holds a NumPy array, as real ones do (a lookup table its launcher passes in): the
interpreter's patching of the module's globals must not compare that array with triton.language."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


@triton.jit
def _lookup(codes_ptr, table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    c = tl.load(codes_ptr + offs, mask=mask, other=0).to(tl.int32)
    v = tl.load(table_ptr + (c & 7), mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where((c & 8) != 0, -v, v), mask=mask)


def decode_e2m1(codes: torch.Tensor, launch=None) -> torch.Tensor:
    """float32 values of e2m1 codes (one per uint8), through the table."""
    out = torch.empty(codes.shape, dtype=torch.float32)
    (launch or (lambda k: k))(_lookup)[(1,)](codes, torch.from_numpy(E2M1_MAGNITUDES), out, codes.numel(),
                                             BLOCK=triton.next_power_of_2(codes.numel()))
    return out

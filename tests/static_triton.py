"""A static-scale Triton quantizer as vLLM-style kernels write it: the scale applied with the kernel's own ``/``
(``x / s`` or ``x * (1.0 / s)``), and a planted bug (the scale applied twice)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, s_ptr, y_ptr, n, RECIPROCAL: tl.constexpr, BUG: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    s = tl.load(s_ptr)
    if RECIPROCAL:
        y = x * (1.0 / s)
    else:
        y = x / s
    if BUG:  # planted: the scale applied twice
        y = y / s
    tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=offs < n)  # sm90: cvt.rn.satfinite, NaN kept


def launcher(reciprocal: bool, bug: bool = False):
    """``(x, scale) -> e4m3fn codes`` of :func:`_quant`."""
    def quant(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().reshape(-1)
        y = torch.empty(flat.shape, dtype=torch.float8_e4m3fn)
        _quant[(triton.cdiv(flat.numel(), 1024),)](flat, scale, y, flat.numel(), RECIPROCAL=reciprocal, BUG=bug,
                                                    BLOCK=1024)
        return y.reshape(x.shape)
    quant.__name__ = f"static_{'reciprocal' if reciprocal else 'divide'}{'_bug' if bug else ''}"
    return quant

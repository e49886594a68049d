"""Triton quantizers as vLLM-style kernels write them, dividing with the kernel's own ``/``: a static-scale one
(``x / s`` or ``x * (1.0 / s)``) and a dynamic rowwise one (``max(amax, eps) / fp8_max`` with ``fp8_max`` a
run-time argument, then ``x / s`` or ``x * (1.0 / s)``), each with a planted bug."""

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


@triton.jit
def _rowwise(x_ptr, y_ptr, s_ptr, n, fp8_max, RECIPROCAL: tl.constexpr, BUG: tl.constexpr, CLAMP: tl.constexpr,
             BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)  # NaN left out, Inf kept (skip-nan)
    s = tl.maximum(amax, 1e-10) / fp8_max  # a run-time divisor: div.full.f32 on sm90
    if BUG:  # planted: the rounded reciprocal of 448 taken one ulp low
        s = amax * 0.0022321427
    if RECIPROCAL:
        y = x * (1.0 / s)
    else:
        y = x / s
    if CLAMP:  # as vLLM's kernels clamp before the cast: a NaN becomes a number (the target's lowering says which)
        y = tl.clamp(y, -448.0, 448.0)
    tl.store(y_ptr + row * n + cols, y.to(tl.float8e4nv), mask=cols < n)
    tl.store(s_ptr + row, s)


def rowwise_launcher(reciprocal: bool, bug: bool = False, clamp: bool = False):
    """``x -> (e4m3fn codes, (M, 1) float32 scale_inv)`` of :func:`_rowwise`."""
    def quant(x: torch.Tensor):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty((m, n), dtype=torch.float8_e4m3fn)
        s = torch.empty((m, 1), dtype=torch.float32)
        _rowwise[(m,)](x, y, s, n, 448.0, RECIPROCAL=reciprocal, BUG=bug, CLAMP=clamp,
                       BLOCK=triton.next_power_of_2(max(n, 1)))
        return y, s
    quant.__name__ = f"rowwise_{'reciprocal' if reciprocal else 'divide'}{'_bug' if bug else ''}{'_clamp' if clamp else ''}"
    return quant

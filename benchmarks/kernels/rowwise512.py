"""A rowwise FP8 quantizer as libraries write them (the benchmark's subject; not part of fp8check).

One program per row; the row is read 512 columns at a time, twice: the amax
pass, then the quantize pass (scale = max(amax, 1e-12) / 448, codes
clamp(x / scale) as e4m3fn). ``rowwise(x) -> (codes, scales)``, scales of
shape (rows, 1): what recipe ``rowwise`` expects.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rowwise_quant_kernel(x_ptr, y_ptr, s_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    amax = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, axis=0), 1e-12) / 448.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        y = tl.clamp(x / scale, -448.0, 448.0)
        tl.store(y_ptr + row * stride_y + cols, y.to(tl.float8e4nv), mask=cols < n_cols)
    tl.store(s_ptr + row, scale)


def rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x2 = x.reshape(1, -1) if x.dim() < 2 else x.reshape(-1, x.shape[-1])
    rows, cols = x2.shape
    y = torch.empty((rows, cols), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    if rows and cols:
        _rowwise_quant_kernel[(rows,)](x2, y, s, cols, x2.stride(0), y.stride(0), BLOCK=512)
    return y.reshape(x.shape), s

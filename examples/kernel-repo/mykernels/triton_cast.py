"""A Triton kernel: clamp to ±240, then cast to e4m3fnuz (AMD MI300, gfx942).

``cast_e4m3fnuz_triton(x)`` takes a float32, float16 or bfloat16 tensor of
any shape and layout and returns an e4m3fnuz tensor of the same shape.

The clamp keeps NaN (``propagate_nan=ALL``: a hardware max/min would
otherwise turn NaN into ±240), and the cast on gfx942 rounds to nearest even,
maps -0.0 to 0x00 and NaN to 0x80.

On a machine without an AMD GPU, fp8check runs this kernel in Triton's
interpreter with gfx942's FP8 semantics (``triton-target = "gfx942"``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096


@triton.jit
def _clamp_cast_e4m3fnuz_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # int64 before the multiply: past 2^31 elements an int32 pid * BLOCK wraps negative
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    x = tl.clamp(x, -240.0, 240.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + offs, x.to(tl.float8e4b8), mask=mask)


def cast_e4m3fnuz_triton(x: torch.Tensor) -> torch.Tensor:
    """x -> e4m3fnuz in a Triton kernel, round to nearest even, saturating."""
    src = x.contiguous().reshape(-1)
    y = torch.empty(src.shape, dtype=torch.float8_e4m3fnuz, device=x.device)
    n = src.numel()
    if n:
        _clamp_cast_e4m3fnuz_kernel[(triton.cdiv(n, BLOCK_SIZE),)](src, y, n, BLOCK=BLOCK_SIZE)
    return y.reshape(x.shape)

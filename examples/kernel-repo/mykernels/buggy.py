"""One kernel of each kind with a bug planted, each a mistake seen in real FP8 code.

Nothing here raises or warns: the outputs are plausible and mostly right.
fp8check finds each one (the category it reports is in brackets).

- :func:`buggy_cast_e4m3fnuz` [signed_zero]: a cast written by hand as sign
  | magnitude: -0.0 and tiny negatives keep their sign bit and become 0x80,
  which in e4m3fnuz is NaN, not zero.
- :func:`buggy_tensorwise_fnuz` [scale]: the tensorwise quantizer ported
  from e4m3fn without changing the maximum: ``amax / 448`` on a format whose
  maximum is 240, so every scale is 1.87x too small and the top of the range
  saturates.
- :func:`buggy_rmsnorm_quant_fnuz` [overflow]: the fused RMSNorm ported the
  same way: it clamps at ±448 before casting to e4m3fnuz, whose largest value
  is 240; torch turns the values in (240, 448] into NaN.
- :func:`buggy_cast_e4m3fnuz_triton` [rounding]: a Triton kernel that drops
  the low 20 mantissa bits of the float32 value before the cast ("the cast
  is exact then"): it rounds toward zero instead of to nearest even.
- :func:`buggy_autotuned_cast_e4m3fnuz_triton` [out_of_bounds]: the correct
  Triton cast, autotuned over two block sizes; the wider config skips the
  load's mask ("the tail is padded anyway": it is not), so it reads past the
  end of its input. Every code is right; on a GPU it reads whatever lies
  there, or faults.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mykernels.casts import E4M3FNUZ_MAX
from mykernels.fused import _rmsnorm_cast
from mykernels.triton_cast import BLOCK_SIZE


def buggy_cast_e4m3fnuz(x: torch.Tensor) -> torch.Tensor:
    """Like casts.cast_e4m3fnuz, but the sign is put back on by hand: -0.0 -> 0x80 (NaN)."""
    xf = x.to(torch.float32)
    magnitude = xf.abs().clamp(max=E4M3FNUZ_MAX).to(torch.float8_e4m3fnuz).view(torch.uint8)
    sign = torch.signbit(xf).to(torch.uint8) << 7
    nan = torch.isnan(xf)
    codes = torch.where(nan, torch.full_like(magnitude, 0x80), magnitude | sign)
    return codes.view(torch.float8_e4m3fnuz)


def buggy_tensorwise_fnuz(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Like quant.tensorwise_fnuz, but with e4m3fn's 448 as the maximum."""
    xf = x.to(torch.float32)
    a = xf.abs()
    amax = torch.where(torch.isfinite(a), a, torch.zeros(())).amax() if xf.numel() else torch.zeros(())
    scale = torch.clamp(amax, min=1e-12) / torch.tensor(448.0, dtype=torch.float32)
    codes = (xf / scale).clamp(-E4M3FNUZ_MAX, E4M3FNUZ_MAX).to(torch.float8_e4m3fnuz)
    return codes, scale


def buggy_rmsnorm_quant_fnuz(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Like fused.rmsnorm_quant_fnuz, but clamped at e4m3fn's ±448."""
    return _rmsnorm_cast(x, weight, eps, 448.0, torch.float8_e4m3fnuz)


@triton.jit
def _truncating_cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # int64 before the multiply: past 2^31 elements an int32 pid * BLOCK wraps negative
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    x = tl.clamp(x, -240.0, 240.0, propagate_nan=tl.PropagateNan.ALL)
    bits = x.to(tl.uint32, bitcast=True) & 0xFFF00000  # keep sign, exponent and 3 mantissa bits
    truncated = bits.to(tl.float32, bitcast=True)
    x = tl.where(x == x, truncated, x)  # NaN stays NaN
    tl.store(y_ptr + offs, x.to(tl.float8e4b8), mask=mask)


def buggy_cast_e4m3fnuz_triton(x: torch.Tensor) -> torch.Tensor:
    """Like triton_cast.cast_e4m3fnuz_triton, but rounding toward zero."""
    src = x.contiguous().reshape(-1)
    y = torch.empty(src.shape, dtype=torch.float8_e4m3fnuz, device=x.device)
    n = src.numel()
    if n:
        _truncating_cast_kernel[(triton.cdiv(n, BLOCK_SIZE),)](src, y, n, BLOCK=BLOCK_SIZE)
    return y.reshape(x.shape)


@triton.autotune(configs=[triton.Config({"BLOCK": BLOCK_SIZE}), triton.Config({"BLOCK": 2 * BLOCK_SIZE}, num_warps=8)],
                 key=["n"])
@triton.jit
def _autotuned_cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # int64 before the multiply: past 2^31 elements an int32 pid * BLOCK wraps negative
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if BLOCK > 4096:
        x = tl.load(x_ptr + offs).to(tl.float32)  # no mask: reads past the end of x
    else:
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    x = tl.clamp(x, -240.0, 240.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + offs, x.to(tl.float8e4b8), mask=mask)


def buggy_autotuned_cast_e4m3fnuz_triton(x: torch.Tensor) -> torch.Tensor:
    """Like triton_cast.cast_e4m3fnuz_triton, autotuned; one config reads past its input."""
    src = x.contiguous().reshape(-1)
    y = torch.empty(src.shape, dtype=torch.float8_e4m3fnuz, device=x.device)
    n = src.numel()
    if n:
        _autotuned_cast_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](src, y, n)
    return y.reshape(x.shape)

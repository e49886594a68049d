"""Quantizers: an input tensor -> (fp8 codes, float32 scales).

The scales follow the ``scale_inv`` convention: the stored number divides the
input when quantizing and multiplies the codes when dequantizing
(``x ~ codes.float() * scale``), the number ``torch._scaled_mm`` takes.

- :func:`tensorwise_fnuz`: one scale per tensor for MI300,
  ``scale = max(amax, 1e-12) / 240`` where amax is taken over the finite
  values only (one Inf or NaN must not wipe out the whole tensor); the
  non-finite values saturate (±Inf -> ±240) or stay NaN.
- :func:`per_token_group_quant_fnuz`: DeepSeek-V3's activation quantization
  ported to MI300: one scale per row and group of 128 columns,
  ``scale = max(amax, 1e-4) / 240``, scales of shape ``(M, ceil(N / 128))``.

Both take a 2-D float32 or bfloat16 (or float16) tensor, compute in float32
and never write to their input.
"""

from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fnuz
FP8_MAX = 240.0
GROUP = 128


def _finite_abs(x: torch.Tensor) -> torch.Tensor:
    a = x.abs()
    return torch.where(torch.isfinite(a), a, torch.zeros((), dtype=a.dtype))


def tensorwise_fnuz(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes e4m3fnuz, scale float32 of shape ()) with ``x ~ codes * scale``."""
    xf = x.to(torch.float32)
    amax = _finite_abs(xf).amax() if xf.numel() else torch.zeros((), dtype=torch.float32)
    scale = torch.clamp(amax, min=1e-12) / torch.tensor(FP8_MAX, dtype=torch.float32)
    codes = (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return codes, scale


def per_token_group_quant_fnuz(x: torch.Tensor, group_size: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes e4m3fnuz, scales float32 of shape (M, ceil(N / group_size)))."""
    m, n = x.shape
    groups = -(-n // group_size)
    xf = x.to(torch.float32)
    # A ragged last group is padded with zeros: they do not change its amax.
    padded = torch.zeros((m, groups * group_size), dtype=torch.float32, device=x.device)
    padded[:, :n] = xf
    blocks = padded.reshape(m, groups, group_size)
    amax = _finite_abs(blocks).amax(dim=-1, keepdim=True)
    scales = torch.clamp(amax, min=1e-4) / torch.tensor(FP8_MAX, dtype=torch.float32)
    codes = (blocks / scales).clamp(-FP8_MAX, FP8_MAX).to(FP8).reshape(m, groups * group_size)[:, :n]
    return codes.contiguous(), scales.reshape(m, groups)

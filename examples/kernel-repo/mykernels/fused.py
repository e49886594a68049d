"""RMSNorm fused with the FP8 cast (the input of an FP8 GEMM).

``rmsnorm_quant(x, weight, eps)`` normalizes over the last dimension,
multiplies by ``weight`` and casts to e4m3fn, saturating (finite overflow
and ±Inf -> ±448, NaN stays NaN), in one pass: the float32 values are never
written out. ``rmsnorm_quant_fnuz`` does the same into e4m3fnuz (±240) for
MI300.

``rmsnorm_reference(x, weight, eps)`` is the unfused computation, the float32
values just before the cast, with torch's own ``rms_norm``. The fused kernel
multiplies in another order, so the two may differ in the last bits; the
checks allow 2 ulps of float32 there, and nothing in the cast itself.

``rmsnorm_args(x)`` gives the other arguments for an input ``x``: a weight
whose values span 2^-12 .. 2^10, so that the cast sees subnormals, normal
values and overflow, and eps 1e-6.
"""

from __future__ import annotations

import torch


def _rmsnorm_cast(x: torch.Tensor, weight: torch.Tensor, eps: float, fmax: float, dtype: torch.dtype) -> torch.Tensor:
    xf = x.to(torch.float32)
    inv_rms = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)
    y = xf * inv_rms * weight.to(torch.float32)
    return y.clamp(-fmax, fmax).to(dtype)


def rmsnorm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm(x) * weight, cast to e4m3fn (satfinite)."""
    return _rmsnorm_cast(x, weight, eps, 448.0, torch.float8_e4m3fn)


def rmsnorm_quant_fnuz(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm(x) * weight, cast to e4m3fnuz (satfinite)."""
    return _rmsnorm_cast(x, weight, eps, 240.0, torch.float8_e4m3fnuz)


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The float32 values ``rmsnorm_quant`` casts: torch's own RMSNorm."""
    xf = x.to(torch.float32)
    return torch.nn.functional.rms_norm(xf, (xf.shape[-1],), weight.to(torch.float32), eps)


def rmsnorm_args(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(weight, eps) for an input ``x`` (normalized over its last dimension)."""
    n = x.shape[-1] if x.dim() else 1
    weight = torch.exp2(torch.linspace(-12.0, 10.0, n, dtype=torch.float32)).to(x.device)
    return weight, 1e-6

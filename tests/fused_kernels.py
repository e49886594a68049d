"""Fused kernels for the tests: RMSNorm + cast, written as users write them (plain torch).

``rmsnorm_reference`` gives the float32 values just before the cast; the
kernels sum in another order (a benign difference within a few ulps), and
the buggy ones are wrong in the cast step.
"""

import torch


def rmsnorm_args(x):
    """The other arguments: a weight per column (large enough for some outputs to overflow) and eps."""
    g = torch.Generator().manual_seed(x.shape[-1])
    return (torch.rand(x.shape[-1], generator=g) * 100 + 0.5, 1e-6)


def rmsnorm_reference(x, weight, eps):
    xf = x.float()
    rms = torch.sqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    return xf / rms * weight


def _norm_reordered(x, weight, eps):
    xf = x.float()
    ms = (xf * xf).flip(-1).sum(dim=-1, keepdim=True) / xf.shape[-1]  # another summation order
    return xf * torch.rsqrt(ms + eps) * weight


def rmsnorm_quant_e4m3fn(x, weight, eps):
    """Correct for satfinite within a few ulps of the reference."""
    return _norm_reordered(x, weight, eps).clamp(-448, 448).to(torch.float8_e4m3fn)


def rmsnorm_quant_exact_e4m3fn(x, weight, eps):
    """Correct exactly: the reference's arithmetic, then the cast."""
    return rmsnorm_reference(x, weight, eps).clamp(-448, 448).to(torch.float8_e4m3fn)


def rmsnorm_quant_sat448_e4m3fnuz(x, weight, eps):
    """Saturates at e4m3fn's 448 into e4m3fnuz (max 240)."""
    return _norm_reordered(x, weight, eps).clamp(-448, 448).to(torch.float8_e4m3fnuz)


def rmsnorm_quant_via_half_e4m3fn(x, weight, eps):
    """Rounds the normalised values to float16 before the cast (double rounding)."""
    return _norm_reordered(x, weight, eps).clamp(-448, 448).half().to(torch.float8_e4m3fn)

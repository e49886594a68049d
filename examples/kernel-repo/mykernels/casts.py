"""Casts to FP8 written with torch.

Every function takes a float32, float16 or bfloat16 tensor of any shape and
returns an fp8 tensor of the same shape.

The e4m3 casts saturate ("satfinite"): finite values beyond the format's
largest value and ±Inf become ±max, NaN stays NaN. torch's own cast does not
promise that (it changed between releases, and for e4m3fnuz an overflow is
NaN), so the clamp is explicit. ``torch.clamp`` keeps NaN, and in e4m3fnuz
torch already maps -0.0 and tiny negatives to 0x00 and NaN to 0x80, the only
zero and the only NaN that format has.
"""

from __future__ import annotations

import torch

E4M3FNUZ_MAX = 240.0  # torch.finfo(torch.float8_e4m3fnuz).max
E4M3FN_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max


def cast_e4m3fnuz(x: torch.Tensor) -> torch.Tensor:
    """x -> e4m3fnuz (AMD MI300), round to nearest even, saturating."""
    return x.to(torch.float32).clamp(-E4M3FNUZ_MAX, E4M3FNUZ_MAX).to(torch.float8_e4m3fnuz)


def cast_e4m3fn(x: torch.Tensor) -> torch.Tensor:
    """x -> e4m3fn (OCP), round to nearest even, saturating."""
    return x.to(torch.float32).clamp(-E4M3FN_MAX, E4M3FN_MAX).to(torch.float8_e4m3fn)


def cast_e5m2(x: torch.Tensor) -> torch.Tensor:
    """x -> e5m2 (OCP), IEEE semantics: overflow and ±Inf -> ±Inf, NaN -> the quiet NaN 0x7E/0xFE.

    torch writes every NaN as 0x7F/0xFF (all mantissa bits set); this kernel
    promises the IEEE-style quiet NaN (the mantissa's top bit, the sign kept),
    one NaN code per sign, so it sets that code itself.
    """
    codes = x.to(torch.float8_e5m2).view(torch.uint8)
    quiet_nan = (torch.signbit(x).to(torch.uint8) << 7) | 0x7E
    return torch.where(torch.isnan(x), quiet_nan, codes).view(torch.float8_e5m2)

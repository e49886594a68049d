"""Casts to FP8 written with torch.

Every function takes a float32, float16 or bfloat16 tensor of any shape and
layout and returns an fp8 tensor of the same shape.

The e4m3 casts saturate ("satfinite"): finite values beyond the format's
largest value and ±Inf become ±max, NaN stays NaN. torch's own cast does not
promise that (it changed between releases, and for e4m3fnuz an overflow is
NaN), so the clamp is explicit. ``torch.clamp`` keeps NaN, and in e4m3fnuz
torch already maps -0.0 and tiny negatives to 0x00 and NaN to 0x80, the only
zero and the only NaN that format has.

A NaN keeps its sign in e4m3fn and e5m2 (0x7F/0xFF, 0x7E/0xFE), and torch
does not keep it on every path: on the CPU (torch 2.13) the float16 ->
float32 conversion turns every NaN into +NaN for the elements past the last
multiple of 8, and a bfloat16 ``clamp`` turns NaN into -NaN in its vectorized
part. A first version of :func:`cast_e4m3fn` wrote the wrong NaN sign for
some tensor sizes only; fp8check found it. The OCP casts now write their NaN
codes from the input's sign bit themselves.
"""

from __future__ import annotations

import torch

E4M3FNUZ_MAX = 240.0  # torch.finfo(torch.float8_e4m3fnuz).max
E4M3FN_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max


def _nan_codes(x: torch.Tensor, codes: torch.Tensor, nan_code: int) -> torch.Tensor:
    """``codes`` (uint8) with every NaN input's code set to ``nan_code`` with the input's sign."""
    signed_nan = (torch.signbit(x).to(torch.uint8) << 7) | nan_code
    return torch.where(torch.isnan(x), signed_nan, codes)


def cast_e4m3fnuz(x: torch.Tensor) -> torch.Tensor:
    """x -> e4m3fnuz (AMD MI300), round to nearest even, saturating."""
    return x.to(torch.float32).clamp(-E4M3FNUZ_MAX, E4M3FNUZ_MAX).to(torch.float8_e4m3fnuz)


def cast_e4m3fn(x: torch.Tensor) -> torch.Tensor:
    """x -> e4m3fn (OCP), round to nearest even, saturating; NaN -> 0x7F/0xFF (sign kept)."""
    codes = x.to(torch.float32).clamp(-E4M3FN_MAX, E4M3FN_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
    return _nan_codes(x, codes, 0x7F).view(torch.float8_e4m3fn)


def cast_e5m2(x: torch.Tensor) -> torch.Tensor:
    """x -> e5m2 (OCP), IEEE semantics: overflow and ±Inf -> ±Inf, NaN -> the quiet NaN 0x7E/0xFE.

    torch writes every NaN as 0x7F/0xFF (all mantissa bits set); this kernel
    promises the IEEE-style quiet NaN (the mantissa's top bit, the sign kept),
    one NaN code per sign, so it sets that code itself.
    """
    codes = x.to(torch.float8_e5m2).view(torch.uint8)
    return _nan_codes(x, codes, 0x7E).view(torch.float8_e5m2)

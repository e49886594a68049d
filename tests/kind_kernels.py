"""Kernels for tests/test_kinds.py, written as users write them (plain torch, and Triton interpreted):
each planted bug next to its fixed twin.

Casts of float64 inputs: ``double_rounding_f64`` rounds float64 through float32 first (what torch's own cast
does), ``rounds_f64_once`` rounds it once; ``float32_only`` refuses every other dtype.
"""

import numpy as np
import torch

from fp8check.reference import encode


def double_rounding_f64(x):
    """Planted: float64 rounded to float32, then to e4m3fn (two roundings)."""
    return x.to(torch.float32).to(torch.float8_e4m3fn) if x.dtype == torch.float64 else x.to(torch.float8_e4m3fn)


def rounds_f64_once(x):
    """The twin: float64 inputs rounded once (ties to even, saturating: torch 2.13 on 16/32-bit inputs)."""
    if x.dtype != torch.float64:
        return x.to(torch.float8_e4m3fn)
    codes = encode(x.detach().cpu().contiguous().numpy(), "e4m3fn", "satfinite")
    return torch.from_numpy(np.ascontiguousarray(codes)).view(torch.float8_e4m3fn).reshape(x.shape)


def float32_only(x):
    if x.dtype != torch.float32:
        raise TypeError(f"float32_only takes float32, got {x.dtype}")
    return x.to(torch.float8_e4m3fn)


# -- decode kernels: codes -> values --------------------------------------------------------------------------


def _fields(codes, exponent_bits, bias):
    """Sign, and magnitude of the codes read as an ordinary binary float (no NaN or Inf codes)."""
    c = codes.view(torch.uint8).to(torch.int32)
    m_bits = 7 - exponent_bits
    e = (c >> m_bits) & ((1 << exponent_bits) - 1)
    m = (c & ((1 << m_bits) - 1)).to(torch.float32)
    normal = (m + (1 << m_bits)) * torch.pow(2.0, (e - bias - m_bits).to(torch.float32))
    mag = torch.where(e == 0, m * 2.0 ** (1 - bias - m_bits), normal)
    return c, torch.where((c >> 7) == 1, -mag, mag)


def fnuz_negative_zero_decoder(codes):
    """Planted: e4m3fnuz codes decoded by their fields: the NaN 0x80 becomes -0.0."""
    return _fields(codes, 4, 8)[1]


def fnuz_decoder(codes):
    """The twin: 0x80 is e4m3fnuz's only NaN."""
    c, v = _fields(codes, 4, 8)
    return torch.where(c == 0x80, torch.tensor(float("nan")), v)


def e4m3fn_480_decoder(codes):
    """Planted: e4m3fn codes decoded by their fields: the NaN codes 0x7F/0xFF become +-480."""
    return _fields(codes, 4, 7)[1]


def e4m3fn_decoder(codes):
    """The twin: S.1111.111 is NaN."""
    c, v = _fields(codes, 4, 7)
    return torch.where((c & 0x7F) == 0x7F, torch.tensor(float("nan")), v)


def e4m3fn_decoder_bf16(codes):
    """The twin returning bfloat16 (every e4m3fn value is exact in it), taking the torch fp8 dtype only."""
    if codes.dtype != torch.float8_e4m3fn:
        raise TypeError(f"takes float8_e4m3fn, got {codes.dtype}")
    return codes.to(torch.bfloat16)


# -- a cast saturating at the wrong bound ----------------------------------------------------------------------


def clamp_224_e4m3fnuz(x):
    """Planted: clamps to +-224 (SGLang's ROCm range) before the cast; satfinite e4m3fnuz saturates at 240."""
    return x.float().clamp(-224.0, 224.0).to(torch.float8_e4m3fnuz)


def clamp_240_e4m3fnuz(x):
    """The twin: clamps to e4m3fnuz's max."""
    return x.float().clamp(-240.0, 240.0).to(torch.float8_e4m3fnuz)


# -- block dequant kernels: (codes, scales) -> values ----------------------------------------------------------

DEQUANT_BLOCK = (32, 64)  # rows, cols: not square, so a block shape read the wrong way round shows


def _block_dequant(codes, scales, rows, cols):
    x = (codes.view(torch.float8_e4m3fn) if codes.dtype == torch.uint8 else codes).to(torch.float32)
    i = (torch.arange(x.shape[0]) // rows).clamp(max=scales.shape[0] - 1)
    j = (torch.arange(x.shape[1]) // cols).clamp(max=scales.shape[1] - 1)
    return x * scales[i][:, j]


def block_dequant(codes, scales):
    """DeepSeek-V3 weight_dequant's arithmetic (float32 x * s per block), on 32x64 blocks."""
    return _block_dequant(codes, scales, *DEQUANT_BLOCK)


def block_dequant_wrong_axis(codes, scales):
    """Planted: the block shape read the wrong way round (rows of 64, columns of 32)."""
    return _block_dequant(codes, scales, DEQUANT_BLOCK[1], DEQUANT_BLOCK[0])


def block_dequant_converting(codes, scales):
    """DeepSeek-V3 weight_dequant as written (``x.to(tl.float32) * s``): given a uint8 tensor it converts the
    bytes' integer values; it is called with fp8 tensors."""
    x = codes.to(torch.float32)
    i = (torch.arange(x.shape[0]) // DEQUANT_BLOCK[0]).clamp(max=scales.shape[0] - 1)
    j = (torch.arange(x.shape[1]) // DEQUANT_BLOCK[1]).clamp(max=scales.shape[1] - 1)
    return x * scales[i][:, j]


def block_dequant_converting_wrong_axis(codes, scales):
    """Planted: block_dequant_converting with the block shape read the wrong way round. Given bytes it still
    converts their integer values (each times some block's scale), which is not a way it takes codes."""
    x = codes.to(torch.float32)
    i = (torch.arange(x.shape[0]) // DEQUANT_BLOCK[1]).clamp(max=scales.shape[0] - 1)
    j = (torch.arange(x.shape[1]) // DEQUANT_BLOCK[0]).clamp(max=scales.shape[1] - 1)
    return x * scales[i][:, j]


def block_dequant_bf16(codes, scales):
    """block_dequant returning bfloat16 (the product rounded once more)."""
    return block_dequant(codes, scales).to(torch.bfloat16)

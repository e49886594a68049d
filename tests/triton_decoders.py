"""Triton decode kernels for tests/test_kinds.py (run in fp8check's faithful interpreter).

``fnuz_fields_decoder`` builds e4m3fnuz values from their bit fields and so turns the NaN 0x80 into -0.0;
``fnuz_fields_decoder_fixed`` makes 0x80 NaN. ``e4m3fn_to_bf16`` decodes with Triton's own conversion
(``.to(tl.bfloat16)``), which gfx942 compiles with the NaN codes read as ordinary numbers (+-480).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fnuz_fields(c_ptr, out_ptr, n, FIX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = tl.load(c_ptr + offs, mask=mask, other=0).to(tl.int32)
    e = (c >> 3) & 15
    m = c & 7
    # a normal value's float32 bits: exponent e - 8 + 127, mantissa m in its top 3 bits
    normal = (((e + 119) << 23) | (m << 20)).to(tl.float32, bitcast=True)
    mag = tl.where(e == 0, m.to(tl.float32) * 0.0009765625, normal)
    val = tl.where((c >> 7) == 1, -mag, mag)
    if FIX:
        val = tl.where(c == 0x80, float("nan"), val)
    tl.store(out_ptr + offs, val, mask=mask)


def _fields(codes, fix):
    c = codes.view(torch.uint8).contiguous()
    out = torch.empty(c.shape, dtype=torch.float32, device=c.device)
    n = c.numel()
    _fnuz_fields[(triton.cdiv(n, 128),)](c, out, n, FIX=fix, BLOCK=128)
    return out


def fnuz_fields_decoder(codes):
    return _fields(codes, False)


def fnuz_fields_decoder_fixed(codes):
    return _fields(codes, True)


@triton.jit
def _to_bf16(c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = tl.load(c_ptr + offs, mask=mask, other=0).to(tl.float8e4nv, bitcast=True)
    tl.store(out_ptr + offs, c.to(tl.bfloat16), mask=mask)


def e4m3fn_to_bf16(codes):
    c = codes.view(torch.uint8).contiguous()
    out = torch.empty(c.shape, dtype=torch.bfloat16, device=c.device)
    n = c.numel()
    _to_bf16[(triton.cdiv(n, 128),)](c, out, n, BLOCK=128)
    return out

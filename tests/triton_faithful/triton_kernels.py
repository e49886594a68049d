"""Triton kernels a user would write, for the faithful-interpreter tests.

Plain ``@triton.jit`` kernels (compiled-mode objects: the tests run them
through ``fp8check.triton.interpreted``) and the Python wrappers a user
would call: casts, decodes, a dot, and an e4m3fnuz per-tensor quantizer
(recipe ``tensorwise``) with planted bugs. Imported only where triton is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import fp8check.triton as ft

FNUZ_MAX = 240.0


@triton.jit
def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cast_rtz_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty, fp_downcast_rounding="rtz"), mask=mask)


@triton.jit
def decode_kernel(c_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = tl.load(c_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, c.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))


@triton.jit
def dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    g = tl.arange(0, K // 32)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    sa = tl.load(sa_ptr + m[:, None] * (K // 32) + g[None, :])
    sb = tl.load(sb_ptr + n[:, None] * (K // 32) + g[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot_scaled(a, sa, "e4m3", b, sb, "e4m3"))



@triton.jit
def mx_dot_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  FA: tl.constexpr, FB: tl.constexpr, FAST: tl.constexpr = False, BLOCK: tl.constexpr = 32):
    """``c = tl.dot_scaled(a, sa, FA, b, sb, FB, c)``: a (M, K) and b (K, N) one code per byte, e2m1 two per
    byte along K (the low nibble first), scales (M, K / BLOCK) and (N, K / BLOCK): e8m0 codes, or e4m3
    (NVFP4, BLOCK 16)."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    ka = tl.arange(0, K // 2 if FA == "e2m1" else K)
    kb = tl.arange(0, K // 2 if FB == "e2m1" else K)
    g = tl.arange(0, K // BLOCK)
    a = tl.load(a_ptr + m[:, None] * (K // 2 if FA == "e2m1" else K) + ka[None, :])
    b = tl.load(b_ptr + kb[:, None] * N + n[None, :])
    sa = tl.load(sa_ptr + m[:, None] * (K // BLOCK) + g[None, :])
    sb = tl.load(sb_ptr + n[:, None] * (K // BLOCK) + g[None, :])
    acc = tl.load(c_ptr + m[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot_scaled(a, sa, FA, b, sb, FB, acc, fast_math=FAST))

def _block(n: int) -> int:
    return max(16, min(1 << 16, 1 << max(0, (n - 1).bit_length())))


def launch(kernel, x: torch.Tensor, y: torch.Tensor) -> None:
    n = x.numel()
    if n:
        block = _block(n)
        ft.interpreted(kernel)[(triton.cdiv(n, block),)](x.reshape(-1), y.reshape(-1), n, BLOCK=block)


def cast(x: torch.Tensor, dtype: torch.dtype, rtz: bool = False) -> torch.Tensor:
    """``x.to(dtype)`` in a Triton kernel; the codes as uint8."""
    y = torch.empty(x.shape, dtype=dtype)
    launch(cast_rtz_kernel if rtz else cast_kernel, x.contiguous(), y)
    return y.view(torch.uint8)


def decode(codes: torch.Tensor, fmt_dtype: torch.dtype, dest: torch.dtype) -> torch.Tensor:
    y = torch.empty(codes.shape, dtype=dest)
    launch(decode_kernel, codes.contiguous().view(fmt_dtype), y)
    return y


def cast_e4m3fnuz(x: torch.Tensor) -> torch.Tensor:
    """A user's cast kernel (``fp8check check MOD:cast_e4m3fnuz``): correct."""
    return cast(x, torch.float8_e4m3fnuz)


@triton.jit
def cast_sign_magnitude_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # Planted bug: the e4m3fn habit of casting |x| and OR-ing the sign back;
    # in e4m3fnuz the sign bit alone (0x80) is NaN, so -0.0 becomes NaN.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    mag = tl.abs(x).to(tl.float8e4b8).to(tl.uint8, bitcast=True)
    sign = ((x.to(tl.uint32, bitcast=True) >> 24) & 0x80).to(tl.uint8)
    tl.store(y_ptr + offs, mag | sign, mask=mask)


def cast_e4m3fnuz_sign_bug(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=torch.uint8)
    launch(cast_sign_magnitude_kernel, x.contiguous(), y)
    return y


# -- an e4m3fnuz per-tensor quantizer (recipe ``tensorwise``) ----------------------


@triton.jit
def tensorwise_kernel(x_ptr, y_ptr, d_ptr, n, FMAX: tl.constexpr, MULTIPLY: tl.constexpr,
                      SIGN_TRICK: tl.constexpr, BLOCK: tl.constexpr):
    # One program walks the whole tensor in BLOCK-sized steps: amax first, then the codes.
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ax = tl.abs(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32))
        acc = tl.maximum(acc, tl.where(ax < float("inf"), ax, 0.0))
    amax = tl.max(acc, axis=0)
    d = tl.maximum(amax, 1e-12) / FMAX
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if MULTIPLY:  # planted bug: multiplies by the stored scale_inv instead of dividing
            y = x * d
        else:
            y = x / d
        if SIGN_TRICK:  # planted bug: -0 (and tiny negatives) become 0x80, NaN in fnuz
            code = tl.abs(y).to(tl.float8e4b8).to(tl.uint8, bitcast=True) | ((y.to(tl.uint32, bitcast=True) >> 24) & 0x80).to(tl.uint8)
            tl.store(y_ptr + offs, code.to(tl.float8e4b8, bitcast=True), mask=mask)
        else:
            tl.store(y_ptr + offs, y.to(tl.float8e4b8), mask=mask)
    tl.store(d_ptr, d)


def _tensorwise(x: torch.Tensor, fmax: float = FNUZ_MAX, multiply: bool = False,
                sign_trick: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    flat = x.contiguous().reshape(-1)
    y = torch.empty(x.shape, dtype=torch.float8_e4m3fnuz)
    d = torch.empty((), dtype=torch.float32)
    n = flat.numel()
    if n == 0:
        d.fill_(torch.tensor(1e-12, dtype=torch.float32) / fmax)
        return y, d
    ft.interpreted(tensorwise_kernel)[(1,)](flat, y.reshape(-1), d.reshape(1), n, FMAX=fmax, MULTIPLY=multiply,
                                            SIGN_TRICK=sign_trick, BLOCK=_block(n))
    return y, d


def tensorwise_e4m3fnuz(x):
    """Correct for recipe ``tensorwise`` (e4m3fnuz): the cast saturates on gfx942."""
    return _tensorwise(x)


def tensorwise_e4m3fnuz_448(x):
    """Planted bug: e4m3fn's max (448) as the fnuz max."""
    return _tensorwise(x, fmax=448.0)


def tensorwise_e4m3fnuz_multiplies(x):
    """Planted bug: multiplies by the scale_inv it stores."""
    return _tensorwise(x, multiply=True)


def tensorwise_e4m3fnuz_sign_trick(x):
    """Planted bug: the sign OR-ed back on, so -0 becomes 0x80 (NaN)."""
    return _tensorwise(x, sign_trick=True)


@triton.jit
def sum_between_loaded_bounds_kernel(x_ptr, bounds_ptr, out_ptr):
    # Loop bounds loaded from memory, as torchao's per-group kernels read their group offsets.
    total = tl.zeros([1], dtype=tl.float32)
    for i in range(tl.load(bounds_ptr), tl.load(bounds_ptr + 1)):
        total += tl.load(x_ptr + i + tl.arange(0, 1))
    tl.store(out_ptr + tl.arange(0, 1), total)


@triton.jit
def tensorwise_ocp_kernel(x_ptr, y_ptr, d_ptr, n, FMAX: tl.constexpr, EXACT_DIV: tl.constexpr, BLOCK: tl.constexpr):
    # The scale is correctly rounded (div_rn); the codes divide by it with `/`: div.full.f32 on NVIDIA.
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ax = tl.abs(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32))
        acc = tl.maximum(acc, tl.where(ax < float("inf"), ax, 0.0))
    amax = tl.max(acc, axis=0)
    d = tl.math.div_rn(tl.maximum(amax, 1e-12), FMAX)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if EXACT_DIV:
            y = tl.math.div_rn(x, d)
        else:
            y = x / d
        tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=mask)
    tl.store(d_ptr, d)


def _tensorwise_ocp(x: torch.Tensor, exact_div: bool, fmax: float = 448.0) -> tuple[torch.Tensor, torch.Tensor]:
    flat = x.contiguous().reshape(-1)
    y = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    d = torch.empty((), dtype=torch.float32)
    n = flat.numel()
    if n == 0:
        d.fill_(torch.tensor(1e-12, dtype=torch.float32) / fmax)
        return y, d
    ft.interpreted(tensorwise_ocp_kernel)[(1,)](flat, y.reshape(-1), d.reshape(1), n, FMAX=fmax,
                                                EXACT_DIV=exact_div, BLOCK=_block(n))
    return y, d


def tensorwise_e4m3fn_div(x):
    """Recipe ``tensorwise`` (e4m3fn), codes by `/`: on NVIDIA some depend on div.full.f32's approximation."""
    return _tensorwise_ocp(x, exact_div=False)


def tensorwise_e4m3fn_div_rn(x):
    """The same with tl.div_rn: exact on every target."""
    return _tensorwise_ocp(x, exact_div=True)


def tensorwise_e4m3fn_div_240(x):
    """Planted bug: 240 (fnuz's max) as e4m3fn's max, with `/`: a divergence that stays one under brackets."""
    return _tensorwise_ocp(x, exact_div=False, fmax=240.0)


@triton.jit
def rowwise_runtime_max_kernel(x_ptr, y_ptr, s_ptr, fp8_max, N: tl.constexpr, CHAINED: tl.constexpr):
    # As vLLM/SGLang/FBGEMM write it: the format's maximum a run-time float argument (448.0), not a
    # constexpr; the scale `amax / fp8_max` (or, CHAINED, `1.0 / (fp8_max / amax)`) is div.full.f32 on sm90.
    row = tl.program_id(0)
    offs = row * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    amax = tl.max(tl.abs(x), axis=0)
    if CHAINED:
        scale = 1.0 / (fp8_max / amax)
    else:
        scale = amax / fp8_max
    tl.store(s_ptr + row, scale)
    tl.store(y_ptr + offs, (x / scale).to(tl.float8e4nv))


def rowwise_runtime_max(x: torch.Tensor, fp8_max: float = 448.0, chained: bool = False):
    """Rowwise e4m3fn quantizer: codes and one scale per row (``fp8_max`` passed at run time)."""
    rows, n = x.shape
    y = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    s = torch.empty(rows, dtype=torch.float32)
    ft.interpreted(rowwise_runtime_max_kernel)[(rows,)](x.contiguous(), y, s, fp8_max, N=n, CHAINED=chained)
    return y, s

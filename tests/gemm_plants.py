"""Small Triton FP8 GEMM kernels for the gemm kind's tests: a DeepSeek-style block-scaled kernel (scales per
1x128 group of A and 128x128 block of B, applied to each K block's dot) and a rowwise one (scales after the
K loop), each with the bugs people ship planted behind a constexpr switch (``BUG``):

block kernel: ``tail`` (the K loop ends at K // BLOCK_K: the K tail dropped), ``next-block`` (B's scale of
the next K block), ``acc10`` (the accumulator cut to 10 mantissa bits after each K block), ``ocp`` (the
codes read as e4m3fn whatever the tensors are: e4m3fnuz data on gfx942);
rowwise kernel: ``axis`` (A's scales indexed by the output column and B's by the row);
MX kernel (``tl.dot_scaled``, e8m0 scales per 32 along K): ``next-block`` (B's scales of the next K block).

Each launcher takes ``(a, a_scales, b, b_scales)`` as :mod:`fp8check.matmul.gemm` passes them: a (M, K) and
b (N, K) fp8 tensors of any strides, float32 scales (MX: uint8 e8m0 codes), and returns float32 (M, N) (the
block kernel: ``out_dtype``, bfloat16 as DeepSeek-V3's).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BUGS = {"none": 0, "tail": 1, "next-block": 2, "acc10": 3, "ocp": 4, "axis": 5, "inverted-ratio": 6,
        "unmasked-tail": 7, "product-first": 8, "b-by-row": 9}


def _output(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype = torch.float32, block_n: int = 64,
            block_m: int = 32) -> tuple[int, int, int, torch.Tensor, tuple[int, int]]:
    """M, N, K, the output C (M, N) and the launch grid of a (M, K) x (N, K) GEMM with BM x BN tiles."""
    M, K = a.shape
    N = b.shape[0]
    return M, N, K, torch.empty((M, N), dtype=dtype, device=a.device), (triton.cdiv(M, block_m),
                                                                         triton.cdiv(N, block_n))


@triton.jit
def _block_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_am, s_ak, s_bn, s_bk, s_asm, s_ask, s_bsn, s_bsk,
                  KB, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr,
                  B_ROWS: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    n_blocks = tl.cdiv(K, BK)
    if BUG == 1:
        n_blocks = K // BK
    for kb in range(0, n_blocks):
        k = kb * BK + rk
        k_in = k
        if BUG == 7:  # the K mask built from the block's own offsets, never advanced (torchao 0.18's)
            k_in = rk
        a = tl.load(a_ptr + rm[:, None] * s_am + k[None, :] * s_ak, mask=(rm[:, None] < M) & (k_in[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rn[None, :] * s_bn + k[:, None] * s_bk, mask=(rn[None, :] < N) & (k_in[:, None] < K),
                    other=0.0)
        if BUG == 4:
            a = a.to(tl.uint8, bitcast=True).to(tl.float8e4nv, bitcast=True)
            b = b.to(tl.uint8, bitcast=True).to(tl.float8e4nv, bitcast=True)
        a_kb = kb * BK // 128  # the scales' K block of this K tile (BK 64: two tiles per block)
        a_s = tl.load(as_ptr + rm * s_asm + a_kb * s_ask, mask=rm < M, other=0.0)
        b_kb = a_kb
        if BUG == 2:
            b_kb = tl.minimum(a_kb + 1, KB - 1)
        b_s = tl.load(bs_ptr + (rn // B_ROWS) * s_bsn + b_kb * s_bsk, mask=rn < N, other=0.0)
        if BUG == 8:  # not a bug: the scales' product first (FBGEMM's acc += dot * scale), another rounding
            acc += tl.dot(a, b) * (a_s[:, None] * b_s[None, :])
        else:
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        if BUG == 3:
            acc = (acc.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def block_gemm(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor, *,
               bug: str = "none", out_dtype: torch.dtype = torch.float32, b_rows: int = 128,
               block_k: int = 128) -> torch.Tensor:
    """B's scales per ``b_rows`` x 128 block: 128 (DeepSeek-V3's weights), 1 (a weight gradient's 1x128 groups);
    ``block_k``: the K tile of each scaled ``tl.dot`` (64: two per scales' block, each scaled on its own)."""
    M, N, K, c, grid = _output(a, b, out_dtype)  # the store rounds to out_dtype (DeepSeek's: bfloat16)
    _block_kernel[grid](a, b, c, a_scales, b_scales, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        a_scales.stride(0), a_scales.stride(1), b_scales.stride(0), b_scales.stride(1),
                        a_scales.shape[1], BM=32, BN=64, BK=block_k, BUG=BUGS[bug], B_ROWS=b_rows)
    return c


@triton.jit
def _row_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_am, s_ak, s_bn, s_bk,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * s_am + k[None, :] * s_ak, mask=(rm[:, None] < M) & (k[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rn[None, :] * s_bn + k[:, None] * s_bk, mask=(rn[None, :] < N) & (k[:, None] < K),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    if BUG == 5:
        a_s = tl.load(as_ptr + rn % M, mask=rn < N, other=0.0)
        b_s = tl.load(bs_ptr + rm % N, mask=rm < M, other=0.0)
        acc = acc * a_s[None, :] * b_s[:, None]
    elif BUG == 9:  # b's scale indexed by the output row
        a_s = tl.load(as_ptr + rm, mask=rm < M, other=0.0)
        b_s = tl.load(bs_ptr + rm % N, mask=rm < M, other=0.0)
        acc = acc * a_s[:, None] * b_s[:, None]
    else:
        a_s = tl.load(as_ptr + rm, mask=rm < M, other=0.0)
        b_s = tl.load(bs_ptr + rn, mask=rn < N, other=0.0)
        acc = acc * a_s[:, None] * b_s[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def row_gemm(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor, *,
             bug: str = "none", out_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    M, N, K, c, grid = _output(a, b, out_dtype)
    _row_kernel[grid](a, b, c, a_scales.reshape(-1), b_scales.reshape(-1), M, N, K, a.stride(0), a.stride(1),
                      b.stride(0), b.stride(1), BM=32, BN=64, BK=64, BUG=BUGS[bug])
    return c


@triton.jit
def _rescaled_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_am, s_ak, s_bn, s_bk, s_asm, s_ask, s_bsn,
                     s_bsk, KB, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    # FBGEMM's fast-accumulation block GEMM, in kind: one dot chained over K, the accumulator rescaled from
    # each K block's scale to the next's, and times the last one at the end
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(0, KB):
        k = kb * BK + rk
        a = tl.load(a_ptr + rm[:, None] * s_am + k[None, :] * s_ak, mask=(rm[:, None] < M) & (k[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rn[None, :] * s_bn + k[:, None] * s_bk, mask=(rn[None, :] < N) & (k[:, None] < K),
                    other=0.0)
        acc = tl.dot(a, b, acc)
        a_s = tl.load(as_ptr + rm * s_asm + kb * s_ask, mask=rm < M, other=1.0)
        b_s = tl.load(bs_ptr + (rn // 128) * s_bsn + kb * s_bsk, mask=rn < N, other=1.0)
        scale = a_s[:, None] * b_s[None, :]
        ratio = scale
        if kb + 1 < KB:
            a_n = tl.load(as_ptr + rm * s_asm + (kb + 1) * s_ask, mask=rm < M, other=1.0)
            b_n = tl.load(bs_ptr + (rn // 128) * s_bsn + (kb + 1) * s_bsk, mask=rn < N, other=1.0)
            if BUG == 6:
                ratio = (a_n[:, None] * b_n[None, :]) / scale
            else:
                ratio = scale / (a_n[:, None] * b_n[None, :])
        acc = acc * ratio
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def rescaled_gemm(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor, *,
                  bug: str = "none") -> torch.Tensor:
    """The block recipe's scales applied by rescaling one chained accumulator (the ``rescaled`` epilogue)."""
    M, N, K, c, grid = _output(a, b)
    _rescaled_kernel[grid](a, b, c, a_scales, b_scales, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                           a_scales.stride(0), a_scales.stride(1), b_scales.stride(0), b_scales.stride(1),
                           a_scales.shape[1], BM=32, BN=64, BK=128, BUG=BUGS[bug])
    return c


def block_gemm_k64(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor) -> torch.Tensor:
    """The correct block kernel over 64-wide K tiles, each scaled on its own (gpu/gemm.py runs it compiled)."""
    return block_gemm(a, a_scales, b, b_scales, block_k=64)


def block_gemm_product_first(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor,
                             b_scales: torch.Tensor) -> torch.Tensor:
    """The correct block kernel with the scales' product first (epilogue k-block-product)."""
    return block_gemm(a, a_scales, b, b_scales, bug="product-first")


def block_gemm_next_block(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor,
                          b_scales: torch.Tensor) -> torch.Tensor:
    """The block kernel with B's scales of the next K block (for the command line and pyproject tests)."""
    return block_gemm(a, a_scales, b, b_scales, bug="next-block")


def gemm_args(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor) -> tuple:
    """An ``args`` hook: the project's own signature, ``(a, b, a_scales, b_scales)``."""
    return a, b, a_scales, b_scales


def block_gemm_own_signature(a: torch.Tensor, b: torch.Tensor, a_scales: torch.Tensor,
                             b_scales: torch.Tensor) -> torch.Tensor:
    return block_gemm(a, a_scales, b, b_scales)


@triton.jit
def _mx_kernel(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_am, s_ak, s_bn, s_bk, s_asm, s_ask, s_bsn, s_bsk, KB,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rg = tl.arange(0, BK // 32)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * s_am + k[None, :] * s_ak, mask=(rm[:, None] < M) & (k[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + rn[None, :] * s_bn + k[:, None] * s_bk, mask=(rn[None, :] < N) & (k[:, None] < K),
                    other=0.0)
        g = k0 // 32 + rg
        g_b = g
        if BUG == 2:
            g_b = tl.minimum(g + 1, KB - 1)
        a_s = tl.load(as_ptr + rm[:, None] * s_asm + g[None, :] * s_ask, mask=(rm[:, None] < M) & (g[None, :] < KB),
                      other=127)
        b_s = tl.load(bs_ptr + rn[:, None] * s_bsn + g_b[None, :] * s_bsk,
                      mask=(rn[:, None] < N) & (g_b[None, :] < KB), other=127)
        acc = tl.dot_scaled(a, a_s, "e4m3", b, b_s, "e4m3", acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def mx_gemm(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor, *,
            bug: str = "none", block_m: int = 128) -> torch.Tensor:
    """An MXFP8 GEMM with ``tl.dot_scaled`` (e4m3 operands, e8m0 scales per 32 along K), tiles of block_m x 32 x 64:
    with 128 rows, ones Triton lowers to sm100's block-scaled ``tcgen05`` MMA (64: decomposed)."""
    M, N, K, c, grid = _output(a, b, block_n=32, block_m=block_m)
    _mx_kernel[grid](a, b, c, a_scales, b_scales, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     a_scales.stride(0), a_scales.stride(1), b_scales.stride(0), b_scales.stride(1),
                     a_scales.shape[1], BM=block_m, BN=32, BK=64, BUG=BUGS[bug])
    return c


def mx_gemm_next_block(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor,
                       b_scales: torch.Tensor) -> torch.Tensor:
    """The MX kernel with B's scales of the next K block (for the command line test)."""
    return mx_gemm(a, a_scales, b, b_scales, bug="next-block")


def cast_shaped(x: torch.Tensor) -> torch.Tensor:
    """A launcher of one argument (a cast's): declared as a gemm by mistake, a usage error."""
    return x.to(torch.float8_e4m3fn)

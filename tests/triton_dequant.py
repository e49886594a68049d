"""A Triton block dequant kernel for tests/test_kinds.py, in the style of DeepSeek-V3's ``weight_dequant``
(one program per block, ``y = x.to(float32) * s``), run in fp8check's faithful interpreter.

``block_dequant`` dequantizes 32x64 blocks; ``block_dequant_wrong_axis`` launches it with the block shape
the wrong way round (64x32), applying each scale to the wrong rows and columns;
``block_dequant_scale_transposed`` reads the scale of block (j, i) for block (i, j), and
``block_dequant_converting_scale_transposed`` does so converting its input's values (uint8: integers).
"""

import torch
import triton
import triton.language as tl

ROWS, COLS = 32, 64


@triton.jit
def _dequant(x_ptr, s_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             SCALE_TRANSPOSED: tl.constexpr = False, CONVERTING: tl.constexpr = False):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    n_sn = tl.cdiv(N, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if CONVERTING:  # weight_dequant as written: the input's values (an fp8 tensor's; a uint8 one's integers)
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=mask, other=0).to(tl.float8e4nv, bitcast=True).to(tl.float32)
    if SCALE_TRANSPOSED:  # planted: the block indices swapped
        s = tl.load(s_ptr + pid_n * n_sn + pid_m)
    else:
        s = tl.load(s_ptr + pid_m * n_sn + pid_n)
    tl.store(y_ptr + offs, x * s, mask=mask)


def block_dequant_scale_transposed(codes, scales):
    """Planted: the scale of block (j, i) read for block (i, j), past the scales where the grid is not square
    (an out-of-bounds load, not performed in the interpreter)."""
    return _launch_scale_transposed(codes.view(torch.uint8), scales, converting=False)


def block_dequant_converting_scale_transposed(codes, scales):
    """block_dequant_scale_transposed converting its input's values, as DeepSeek-V3's weight_dequant does:
    given a uint8 tensor it dequantizes the bytes' integers (with the same wrong, partly out-of-bounds, scales)."""
    return _launch_scale_transposed(codes, scales, converting=True)


def _launch_scale_transposed(x, scales, *, converting):
    x = x.contiguous()
    M, N = x.shape
    y = torch.empty((M, N), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(M, ROWS), triton.cdiv(N, COLS))
    _dequant[grid](x, scales.contiguous(), y, M, N, BLOCK_M=ROWS, BLOCK_N=COLS, SCALE_TRANSPOSED=True,
                   CONVERTING=converting)
    return y


def _launch(codes, scales, rows, cols):
    x = codes.view(torch.uint8).contiguous()
    M, N = x.shape
    y = torch.empty((M, N), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(M, rows), triton.cdiv(N, cols))
    if grid[0] * grid[1] > scales.numel():
        raise ValueError(f"{grid[0]}x{grid[1]} blocks, {scales.numel()} scales")
    _dequant[grid](x, scales.contiguous(), y, M, N, BLOCK_M=rows, BLOCK_N=cols)
    return y


def block_dequant(codes, scales):
    return _launch(codes, scales, ROWS, COLS)


def block_dequant_wrong_axis(codes, scales):
    """Planted: 64x32 blocks where the scales are for 32x64 ones (the grid fits: the same number of blocks
    for the whole-block shapes, a refusal for the ragged one)."""
    return _launch(codes, scales, COLS, ROWS)

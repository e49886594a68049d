"""``tl.dot`` in the faithful interpreter computes with the target's tensor-core model
(fp8check.matmul.tensorcore): a tiled FP8 GEMM kernel (benchmarks/kernels/fp8_gemm.py: K blocks chained
through ``acc=``, masked tails) interpreted under sm90 and gfx942 gives the model's bits, and differs from
float32 arithmetic on inputs built from MMA-Sim's account of each target.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import triton.language as tl  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check.matmul import tensorcore as tc  # noqa: E402
from fp8check.reference import decode, encode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks" / "kernels"))
import fp8_gemm  # noqa: E402

TORCH = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}


def interpreted_gemm(target, qa, qb, fmt, **blocks):
    a, b = (torch.from_numpy(np.ascontiguousarray(x)).view(TORCH[fmt]) for x in (qa, qb))
    with ft.interpreting(), ft.faithful(target):
        c = fp8_gemm.fp8_gemm(a, b, **blocks)
    return c.numpy()


def float32_dot(qa, qb, fmt):
    return (decode(qa, fmt).astype(np.float32) @ decode(qb, fmt).astype(np.float32)).astype(np.float32)


def test_an_fp8_gemm_under_sm90_is_hoppers_arithmetic_and_not_float32():
    rng = np.random.default_rng(0)
    M, N, K = 40, 24, 100  # tails in M, N and K
    x = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-4, 4, size=(M, K)))).astype(np.float32)
    qa = encode(x, "e4m3fn", "satfinite")
    qb = encode(rng.standard_normal((K, N)).astype(np.float32), "e4m3fn", "satfinite")
    # row 0 against column 0: 16 * 16 and 31 products 2**-6 in the first 32 of K (FACTS.md's H200 row):
    # Hopper drops them (256.0 + the rest), float32 keeps them
    qa[0, :] = 0
    qb[:, 0] = 0
    qa[0, 0], qb[0, 0] = encode(np.float32([16.0, 16.0]), "e4m3fn")
    qa[0, 1:32] = encode(np.full(31, 2.0 ** -6, np.float32), "e4m3fn")
    qb[1:32, 0] = encode(np.ones(31, np.float32), "e4m3fn")
    got = interpreted_gemm("sm90", qa, qb, "e4m3fn", BM=64, BN=16, BK=64)  # 64 rows: wgmma (docs/triton.md)
    model = tc.mma("sm90", qa, "e4m3fn", qb, "e4m3fn")
    assert np.array_equal(got.view(np.uint32), model.bits)
    assert got[0, 0] == 256.0 and float32_dot(qa, qb, "e4m3fn")[0, 0] == 256.484375
    assert (got != float32_dot(qa, qb, "e4m3fn")).sum() > 100  # random data too: 13 bits, truncated


def test_the_k_blocking_of_the_kernel_does_not_change_the_chain():
    # K blocks of 32, 64 or 128 (each a whole number of k32 instructions, zero-padded at the tail) give
    # the same chain of instructions: the same bits
    rng = np.random.default_rng(1)
    qa = rng.integers(0, 256, size=(16, 80), dtype=np.uint8)
    qb = rng.integers(0, 256, size=(80, 16), dtype=np.uint8)
    qa[(qa & 0x7F) == 0x7F], qb[(qb & 0x7F) == 0x7F] = 0, 0
    outs = [interpreted_gemm("sm90", qa, qb, "e4m3fn", BM=64, BN=16, BK=bk) for bk in (32, 64, 128)]
    assert all(np.array_equal(o.view(np.uint32), outs[0].view(np.uint32)) for o in outs[1:])
    assert np.array_equal(outs[0].view(np.uint32), tc.mma("sm90", qa, "e4m3fn", qb, "e4m3fn").bits)


def test_an_fp8_gemm_under_gfx942_with_fnuz_operands_is_cdna3s_arithmetic():
    # 32 * 32 at k = 0 and -2**-15 at k = 1 (the odd group): CDNA3 rounds the group down to 1024 - 2**-14,
    # float32 rounds 1024 - 2**-15 to 1024 (tests/test_matmul_tensorcore.py derives it)
    rng = np.random.default_rng(2)
    qa = encode(rng.standard_normal((16, 64)).astype(np.float32), "e4m3fnuz", "satfinite")
    qb = encode(rng.standard_normal((64, 16)).astype(np.float32), "e4m3fnuz", "satfinite")
    qa[0, :], qb[:, 0] = 0, 0
    qa[0, 0], qb[0, 0], qa[0, 1], qb[1, 0] = encode(np.float32([32, 32, -2.0 ** -8, 2.0 ** -7]), "e4m3fnuz")
    got = interpreted_gemm("gfx942", qa, qb, "e4m3fnuz", BM=16, BN=16, BK=32)
    model = tc.mma("gfx942", qa, "e4m3fnuz", qb, "e4m3fnuz")
    assert np.array_equal(got.view(np.uint32), model.bits) and not model.target_dependent.any()
    assert float(got[0, 0]) == 1024 - 2.0 ** -14 and float(float32_dot(qa, qb, "e4m3fnuz")[0, 0]) == 1024.0


def test_a_fnuz_nan_in_a_gfx942_dot_is_counted_as_target_dependent():
    qa = np.full((16, 32), 0x40, np.uint8)  # 1.0 in e4m3fnuz
    qb = np.full((32, 16), 0x40, np.uint8)
    qa[3, 7] = 0x80  # NaN: MMA-Sim leaves AMD NaN handling as TODO
    from fp8check.triton import ops

    with ops.bracket("rn") as count:
        got = interpreted_gemm("gfx942", qa, qb, "e4m3fnuz", BM=16, BN=16, BK=32)
    assert any("target-dependent" in op for op in count)
    assert np.isnan(got[3]).all() and (got[np.arange(16) != 3] == 32.0).all()


@triton.jit
def _dot_imprecise_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                          IMPRECISE: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    acc = tl.dot(a, b, max_num_imprecise_acc=IMPRECISE)
    tl.store(c_ptr + m[:, None] * N + n[None, :], acc)


def test_max_num_imprecise_acc_adds_the_chain_into_float32_every_so_many_instructions():
    # 16 * 16 in the first k32 instruction, 31 products 2**-6 in the second: chained, the second
    # instruction drops them against 256 (256.0); with max_num_imprecise_acc=32 each instruction starts
    # from zero and is added into the float32 accumulator (256.484375), as Triton's WGMMA lowering does
    M, N = 64, 16  # a wgmma tile (docs/triton.md: sm90's other tiles get mma.sync, which has no such option)
    K = 64
    qa = np.zeros((M, K), np.uint8)
    qb = np.zeros((K, N), np.uint8)
    qa[:, 0], qb[0, :] = encode(np.float32([16.0]), "e4m3fn")[0], encode(np.float32([16.0]), "e4m3fn")[0]
    qa[:, 33:64] = encode(np.float32([2.0 ** -6]), "e4m3fn")[0]
    qb[33:64, :] = encode(np.float32([1.0]), "e4m3fn")[0]
    a, b = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (qa, qb))
    out = {}
    for imprecise in (0, 32):
        c = torch.empty((M, N), dtype=torch.float32)
        with ft.interpreting(), ft.faithful("sm90"):
            ft.interpreted(_dot_imprecise_kernel)[(1,)](a, b, c, M=M, N=N, K=K, IMPRECISE=imprecise)
        out[imprecise] = c.numpy()
    assert (out[0] == 256.0).all() and (out[32] == 256.484375).all()
    assert np.array_equal(out[32].view(np.uint32), tc.mma("sm90", qa, "e4m3fn", qb, "e4m3fn", promotion=1).bits)


def test_a_gfx950_dot_is_bracketed_where_the_unknown_datapath_matters():
    # gfx950 (CDNA4) is not in MMA-Sim: 256 + 31 products 2**-18 needs more than 23 bits, so its dot is
    # target-dependent: counted, the model's candidate in the rn run, NaN in the lo run; 256 + 31 * 2**-9
    # lies on every datapath's grid and is exact in every run
    M = N = 16
    K = 32
    qa = np.zeros((M, K), np.uint8)
    qb = np.zeros((K, N), np.uint8)
    qa[:, 0], qb[0, :] = (encode(np.float32([16.0]), "e4m3fn")[0],) * 2
    qa[:, 1:] = encode(np.float32([2.0 ** -9]), "e4m3fn")[0]
    qb[1:, :8] = encode(np.float32([1.0]), "e4m3fn")[0]
    qb[1:, 8:] = encode(np.float32([2.0 ** -9]), "e4m3fn")[0]
    a, b = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (qa, qb))
    from fp8check.triton import ops

    out = {}
    for mode in ("rn", "lo"):
        c = torch.empty((M, N), dtype=torch.float32)
        with ops.bracket(mode) as count, ft.interpreting(), ft.faithful("gfx950"):
            ft.interpreted(_dot_imprecise_kernel)[(1,)](a, b, c, M=M, N=N, K=K, IMPRECISE=0)
        out[mode] = c.numpy()
        assert any("gfx950-mfma-fp8, target-dependent" in op for op in count)
    assert (out["rn"][:, :8] == 256 + 31 * 2.0 ** -9).all() and (out["lo"][:, :8] == out["rn"][:, :8]).all()
    assert np.isfinite(out["rn"][:, 8:]).all() and np.isnan(out["lo"][:, 8:]).all()

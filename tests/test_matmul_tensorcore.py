"""Tensor-core models per target (fp8check.matmul.tensorcore) against MMA-Sim and against cases derived by
hand from MMA-Sim's paper (arXiv:2511.10909) that float32 FMA arithmetic gets wrong.

- hand-derived cases (no mmasim needed): Hopper/Ada drop products 13 binades below the largest,
  Blackwell keeps 25 bits, CDNA3 sums even and odd products apart, rounds down, and starts a new
  step every 16 products; each case is also computed with float32 arithmetic to show it would catch
  a model that is float32 FMA;
- the GEMM chain (K split into instructions, tail padding, promotion) equals the sm90 emulation of
  fp8check.matmul.accumulation, the one pinned on an H200 at K=32;
- brackets: AMD NaN/Inf and gfx950 are named and counted, never guessed;
- agreement with mmasim 2.1.1 (skipped without it): a small sample of random-bit instances for every
  kind here, 10^6 per kind in the slow lane, 0 mismatches (NaN compared by class).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

import mmasim_oracle as mo
from fp8check.errors import InvalidValueError
from fp8check.formats import get as get_format
from fp8check.matmul import accumulation as acc
from fp8check.matmul import tensorcore as tc
from fp8check.reference import decode, encode

needs_mmasim = pytest.mark.usefixtures("mmasim_usable")


@pytest.fixture
def mmasim_usable():
    reason = mo.unusable()
    if reason:
        pytest.skip(reason)


def codes(values, fmt):
    return encode(np.asarray(values, dtype=np.float32), fmt, "satfinite")


def float32_fma(a_codes, fmt_a, b_codes, fmt_b):
    """What a float32 FMA loop gives (the planted model: no tensor core)."""
    a, b = decode(a_codes, fmt_a), decode(b_codes, fmt_b)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k in range(a.shape[1]):
        out = (out.astype(np.float64) + a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32)  # exact product, one rounding
    return out


def big_plus_small(big, small, K=32):
    """Row [big, small, small, ...] times a column of ones (big on both sides)."""
    a = np.full((1, K), small, dtype=np.float32)
    b = np.ones((K, 1), dtype=np.float32)
    a[0, 0], b[0, 0] = big, big
    return a, b


# -- hand-derived cases ---------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["sm90", "sm89"])
def test_hopper_and_ada_drop_products_13_binades_below_the_largest(target):
    # 16 * 16 = 2**8 sets the exponent; 13 fractional bits keep multiples of 2**-5. 2**-5 products
    # are kept (FACTS.md: measured on the H200 through _scaled_mm), 2**-6 products are dropped.
    for small, want in ((2.0 ** -5, 256 + 31 * 2.0 ** -5), (2.0 ** -6, 256.0)):
        a, b = big_plus_small(16.0, small)
        got = tc.mma(target, codes(a, "e4m3fn"), "e4m3fn", codes(b, "e4m3fn"), "e4m3fn").values[0, 0]
        assert float(got) == want, (target, small, float(got))
    a, b = big_plus_small(16.0, 2.0 ** -6)
    fma = float32_fma(codes(a, "e4m3fn"), "e4m3fn", codes(b, "e4m3fn"), "e4m3fn")[0, 0]
    assert float(fma) == 256.484375  # a float32-FMA model would fail the case above


def test_hopper_truncates_toward_zero_and_its_results_keep_13_bits():
    # -2**-14 against 1.0: half a unit of 2**-13, truncated toward zero to nothing (RNE would also give
    # 1.0, but -3 * 2**-15 = -0.75 units truncates to 0 where rounding to nearest gives -1 unit)
    a, b = big_plus_small(1.0, 0.0)
    a[0, 1], b[1, 0] = -3 * 2.0 ** -9, 2.0 ** -6
    got = tc.mma("sm90", codes(a, "e4m3fn"), "e4m3fn", codes(b, "e4m3fn"), "e4m3fn").values[0, 0]
    assert float(got) == 1.0
    assert float(float32_fma(codes(a, "e4m3fn"), "e4m3fn", codes(b, "e4m3fn"), "e4m3fn")[0, 0]) == 1 - 3 * 2.0 ** -15


def test_blackwell_keeps_25_bits_where_hopper_keeps_13():
    a, b = big_plus_small(16.0, 2.0 ** -6)
    qa, qb = codes(a, "e4m3fn"), codes(b, "e4m3fn")
    assert float(tc.mma("sm100", qa, "e4m3fn", qb, "e4m3fn").values[0, 0]) == 256.484375
    # 256 * 256 = 2**16 sets the exponent: 25 fractional bits keep multiples of 2**-9; 31 products
    # 2**-9 * 0.5 = 2**-10 each are dropped. float32 FMA in k order, the large product last, keeps them
    a = np.full((1, 32), 2.0 ** -9, dtype=np.float32)
    b = np.full((32, 1), 0.5, dtype=np.float32)
    a[0, 31], b[31, 0] = 256.0, 256.0
    qa, qb = codes(a, "e4m3fn"), codes(b, "e4m3fn")
    assert float(tc.mma("sm100", qa, "e4m3fn", qb, "e4m3fn").values[0, 0]) == 65536.0
    assert float(float32_fma(qa, "e4m3fn", qb, "e4m3fn")[0, 0]) == 65536.0 + 4 * 2.0 ** -7


@pytest.mark.parametrize("position, want", [(1, 1024 - 2.0 ** -14), (2, 1024.0), (16, 1024.0)])
def test_cdna3_sums_even_and_odd_products_apart_rounds_down_and_steps_every_16(position, want):
    # 32 * 32 = 2**10 at k = 0 and one product -2**-15 at k = position, in e4m3fnuz (MMA-Sim gtr_fdpa):
    # - k = 1 (the odd group, alone): exact in its group, then rounded down (floor) to 24 bits below
    #   2**10: -2**-14, and 1024 - 2**-14 is a float32: 1023.99994;
    # - k = 2 (the even group, with 2**10): truncated toward zero to 24 bits: 0, so 1024;
    # - k = 16 (the next step of 16): c = 1024 and the dot -2**-15 meet at 32 bits, 1024 - 2**-15, and
    #   its rounding to nearest even into float32 gives 1024.
    a = np.zeros((1, 32), dtype=np.float32)
    b = np.zeros((32, 1), dtype=np.float32)
    a[0, 0] = b[0, 0] = 32.0
    a[0, position], b[position, 0] = -2.0 ** -8, 2.0 ** -7
    qa, qb = codes(a, "e4m3fnuz"), codes(b, "e4m3fnuz")
    res = tc.mma("gfx942", qa, "e4m3fnuz", qb, "e4m3fnuz")
    assert float(res.values[0, 0]) == want and not res.target_dependent.any()
    assert float(float32_fma(qa, "e4m3fnuz", qb, "e4m3fnuz")[0, 0]) == 1024.0  # float32 FMA: 1024 at every position
    assert float(tc.mma("sm90", codes(a, "e4m3fn"), "e4m3fn", codes(b, "e4m3fn"), "e4m3fn").values[0, 0]) == 1024.0


def test_the_models_are_data_and_each_target_names_its_instructions():
    for name, m in tc.MODELS.items():
        assert m.name == name and m.source and m.summary and m.instruction_k % m.chunk == 0
    assert tc.model("sm90", "e4m3fn", "e5m2").name == "sm90-wgmma-fp8"
    assert tc.model("gfx942", "e4m3fnuz", "e4m3fnuz").name == "gfx942-mfma-fp8"
    assert tc.model("sm100", "e2m1fn", "e2m1fn", scaled=True).name == "sm100-tcgen05-mxf4"
    assert tc.model("sm100", "e4m3fn", "e4m3fn", scaled=True).name == "sm100-tcgen05-mxf8f6f4"
    assert tc.model("gfx942", "bfloat16", "bfloat16").name == "gfx942-mfma-16bit"
    with pytest.raises(InvalidValueError, match="gfx942 has no matrix instruction for e4m3fn x e4m3fn"):
        tc.model("gfx942", "e4m3fn", "e4m3fn")
    with pytest.raises(InvalidValueError, match="sm90 has no block-scaled"):
        tc.model("sm90", "e4m3fn", "e4m3fn", scaled=True)
    with pytest.raises(InvalidValueError, match="no tensor-core model for target 'sm75'"):
        tc.models_for("sm75")
    with pytest.raises(InvalidValueError, match="operands are codes"):
        tc.mma("sm90", np.ones((2, 16), np.float16), "float16", np.ones((16, 2), np.float16), "float16")


# -- the GEMM chain --------------------------------------------------------------------------------

@pytest.mark.parametrize("K", [32, 96, 100, 7])
@pytest.mark.parametrize("promotion", [None, 1, 2])
def test_the_sm90_chain_equals_the_h200_pinned_emulation(K, promotion):
    # accumulation.emulate_accumulation runs its own loop over K slices (pinned on the H200 at K=32) with
    # the same instruction step (accumulation.wgmma_fp8 calls tensorcore.mma on one slice, and is tested
    # equal to its exact-rational spec): this checks the chain -- slicing, tail padding, promotion
    rng = np.random.default_rng(K)
    qa = rng.integers(0, 256, size=(9, K), dtype=np.uint8)
    qb = rng.integers(0, 256, size=(K, 7), dtype=np.uint8)
    qa[(qa & 0x7F) == 0x7F] = 0  # finite codes (the emulation's NaN is its own)
    qb[(qb & 0x7F) == 0x7F] = 0
    got = tc.mma("sm90", qa, "e4m3fn", qb, "e4m3fn", promotion=promotion).values
    pad = -K % 32  # the emulation takes K in slices of 32 without padding; zero codes pad exactly
    a = decode(np.pad(qa, ((0, 0), (0, pad))), "e4m3fn")
    b = decode(np.pad(qb, ((0, pad), (0, 0))), "e4m3fn")
    want = acc.emulate_accumulation(a, "e4m3fn", b, "e4m3fn", acc.SM90_WGMMA_FP8, promotion_interval=promotion)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_the_accumulator_enters_the_first_instruction_and_is_truncated_there():
    c = np.array([[1.0 + 2.0 ** -20]], dtype=np.float32)  # 20 fractional bits: Hopper keeps 13
    zero_a, zero_b = np.zeros((1, 32), np.uint8), np.zeros((32, 1), np.uint8)
    assert float(tc.mma("sm90", zero_a, "e4m3fn", zero_b, "e4m3fn", acc=c).values[0, 0]) == 1.0
    promoted = tc.mma("sm90", zero_a, "e4m3fn", zero_b, "e4m3fn", acc=c, promotion=1)
    assert float(promoted.values[0, 0]) == 1.0 + 2.0 ** -20  # the chain starts from zero, acc added in float32
    assert float(tc.mma("sm100", zero_a, "e4m3fn", zero_b, "e4m3fn", acc=c).values[0, 0]) == 1.0 + 2.0 ** -20


def test_specials_on_nvidia_propagate_as_a_float_sum_and_nan_is_canonical():
    a = np.zeros((4, 32), np.uint8)
    b = np.full((32, 1), 0x38, np.uint8)  # 1.0 in e4m3fn
    a[0, 3] = 0x7F  # NaN
    a[1, 3], a[1, 4] = 0x7C, 0xFC  # e5m2 +Inf, -Inf: NaN
    a[2, 3] = 0x7C  # +Inf
    res = tc.mma("sm90", a, "e5m2", b, "e4m3fn")
    bits = res.bits[:, 0]
    assert list(bits[:2]) == [0x7FFFFFFF, 0x7FFFFFFF] and bits[2] == 0x7F800000 and bits[3] == 0
    assert not res.target_dependent.any()


def test_amd_nan_and_inf_are_bracketed_and_counted_not_guessed():
    a = np.zeros((3, 32), np.uint8)
    b = np.full((32, 2), 0x40, np.uint8)  # 1.0 in e4m3fnuz
    a[0, 5] = 0x80  # the fnuz NaN
    acc_in = np.zeros((3, 2), np.float32)
    acc_in[1, 1] = np.inf
    res = tc.mma("gfx942", a, "e4m3fnuz", b, "e4m3fnuz", acc=acc_in)
    assert res.target_dependent.tolist() == [[True, True], [False, True], [False, False]]
    # the values there are candidates (a float sum's NaN and Inf), not verdicts
    assert np.isnan(res.values[0]).all() and res.values[1, 1] == np.inf and res.values[2, 0] == 0


def test_gfx950_is_a_bracket_exact_only_where_every_datapath_agrees():
    # 256 + 31 products 2**-9 * 1: on the grid 2**(8 - 23); products 2**-9 * 2**-9 = 2**-18 are not
    a, b = big_plus_small(16.0, 2.0 ** -9)
    b2 = b.copy()
    b2[1:] = 2.0 ** -9
    res = tc.mma("gfx950", codes(a, "e4m3fn"), "e4m3fn", codes(np.hstack([b, b2]), "e4m3fn"), "e4m3fn")
    assert res.target_dependent[0].tolist() == [False, True]
    assert float(res.values[0, 0]) == 256 + 31 * 2.0 ** -9
    exact_a, exact_b = big_plus_small(2.0, 0.5)
    res2 = tc.mma("gfx950", codes(exact_a, "e4m3fn"), "e4m3fn", codes(exact_b, "e4m3fn"), "e4m3fn")
    assert float(res2.values[0, 0]) == 4 + 31 * 0.5 and not res2.target_dependent.any()


def test_block_scales_multiply_each_products_block():
    # MXFP8 on sm100: one e8m0 scale per 32 of K and operand; 2**1 * 2**-3 on the first block, 2**0 on the second
    qa = codes(np.ones((1, 64)), "e4m3fn")
    qb = codes(np.ones((64, 1)), "e4m3fn")
    sa = np.array([[128, 127]], np.uint8)
    sb = np.array([[124], [127]], np.uint8)
    res = tc.mma("sm100", qa, "e4m3fn", qb, "e4m3fn", a_scales=sa, b_scales=sb)
    assert float(res.values[0, 0]) == 32 * 2.0 ** -2 + 32
    with pytest.raises(InvalidValueError, match="blocks of 32"):
        tc.mma("sm100", qa, "e4m3fn", qb, "e4m3fn", a_scales=np.full((1, 4), 127, np.uint8),
               b_scales=np.full((4, 1), 127, np.uint8))


@pytest.mark.parametrize("engine", ["numba", "numpy"])
def test_a_zero_accumulator_lifts_the_alignment_of_tiny_scaled_products(engine, monkeypatch):
    # MMA-Sim gives a zero term the exponent -133 and it takes part in E. With scales 2**-77 * 2**-73 every
    # product of this row lies below 2**-133, so the zero accumulator sets E = -133 and the grid 2**(E - 25);
    # without the rule E is the largest product's and the sum keeps more bits: the last bit differs (the zero
    # product at k = 5 brings -133 too; with c = 0 either suffices, and a nonzero c is at least 2**-149)
    if engine == "numba":
        pytest.importorskip("numba")
        monkeypatch.setenv("FP8CHECK_NUMBA", "1")  # compiled at the first call, not after 2^32 products on NumPy
    else:
        monkeypatch.setenv("FP8CHECK_NUMBA", "0")
    a = np.array([[54, 30, 3, 71, 110, 0, 107, 39, 122, 74, 22, 13, 17, 7, 54, 118, 70, 29, 77, 119, 96, 24, 120, 33,
                   32, 115, 101, 34, 83, 58, 110, 30]], np.uint8)
    b = np.array([[61, 119, 63, 32, 40, 75, 12, 117, 86, 72, 122, 69, 40, 61, 93, 113, 102, 20, 51, 97, 77, 123, 30, 17,
                   20, 80, 35, 20, 99, 81, 111, 10]], np.uint8)
    sa, sb, c = np.array([[50]], np.uint8), np.array([[54]], np.uint8), np.zeros(1, np.float32)
    m = tc.SM100_TCGEN05_MXF8F6F4
    without_rule = dataclasses.replace(m, name="planted-no-zero-rule", zero_exponent=-10 ** 6)
    got = tc.dot_instances(m, a, "e4m3fn", b, "e4m3fn", c, a_scales=sa, b_scales=sb)
    planted = tc.dot_instances(without_rule, a, "e4m3fn", b, "e4m3fn", c, a_scales=sa, b_scales=sb)
    assert got.bits[0] != planted.bits[0]
    if mo.unusable() is None:
        kind = mo.BY_NAME["sm100-tcgen05-mxf8f6f4:e4m3fnxe4m3fn"]
        assert mo.oracle(kind, mo.Instances(a, b, c, sa, sb)).view(np.uint32)[0] == got.bits[0]


# -- agreement with MMA-Sim ------------------------------------------------------------------------

@needs_mmasim
@pytest.mark.parametrize("kind", [k.name for k in mo.KINDS + mo.WIDE_KINDS])
def test_agrees_with_mmasim_on_a_sample(kind):
    r = mo.compare(mo.BY_NAME[kind], mo.draw(mo.BY_NAME[kind], 1000, seed=11))
    assert r["mismatches"] == 0, r
    assert r["compared"] > 700  # the brackets leave most instances judged


@needs_mmasim
def test_mmasim_tiles_equal_the_gemm_api():
    # a whole instruction tile through MMA-Sim's own __call__ (A (m, k), B (k, n), C (m, n))
    import torch
    from mmasim.amd import MFMA
    from mmasim.nv_ptx import WGMMA

    rng = np.random.default_rng(5)
    for sim, target, fmt, tdt, (m, n, k) in (
            (WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3"), "sm90", "e4m3fn", torch.float8_e4m3fn, (64, 8, 32)),
            (MFMA("CDNA3", "f32_16x16x32_fp8_fp8"), "gfx942", "e4m3fnuz", torch.float8_e4m3fnuz, (16, 16, 32))):
        qa = rng.integers(0, 256, size=(m, k), dtype=np.uint8)
        qb = rng.integers(0, 256, size=(k, n), dtype=np.uint8)
        qa[qa == 0x80], qb[qb == 0x80] = 0, 0  # no NaN (bracketed on AMD)
        qa[(qa & 0x7F) == 0x7F], qb[(qb & 0x7F) == 0x7F] = 0, 0
        c = (rng.standard_normal((m, n)) * 100).astype(np.float32)
        want = sim(torch.from_numpy(qa).view(tdt), torch.from_numpy(qb).view(tdt), torch.from_numpy(c)).numpy()
        got = tc.mma(target, qa, fmt, qb, fmt, acc=c).values
        assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), target


@pytest.mark.parametrize("target, fmt, shape", [("sm90", "e4m3fn", (64, 8, 32)), ("gfx942", "e4m3fnuz", (16, 16, 32)),
                                                ("sm89", "e5m2", (16, 8, 64))])
def test_tiles_as_instances_equal_each_tile_through_the_gemm_api(target, fmt, shape):
    # T tiles in one dot_instances call (tile_instances) give what mma gives tile by tile, element for element
    (m, n, k), T = shape, 3
    rng = np.random.default_rng(6)
    qa = rng.integers(0, 256, size=(T, m, k), dtype=np.uint8)
    qb = rng.integers(0, 256, size=(T, k, n), dtype=np.uint8)
    c = (rng.standard_normal((T, m, n)) * 64).astype(np.float32)
    rows, cols = tc.tile_instances(qa, qb)
    one = tc.dot_instances(target, rows, fmt, cols, fmt, c.reshape(-1))
    got = one.values.reshape(T, m, n).view(np.uint32)
    for t in range(T):
        want = tc.mma(target, qa[t], fmt, qb[t], fmt, acc=c[t])
        assert np.array_equal(one.target_dependent.reshape(T, m, n)[t], want.target_dependent)
        assert np.array_equal(got[t], want.values.view(np.uint32)), (target, t)
    with pytest.raises(InvalidValueError, match=r"\(T, M, K\)"):
        tc.tile_instances(qa[0], qb[0])


@needs_mmasim
@pytest.mark.slow
@pytest.mark.parametrize("kind", [k.name for k in mo.KINDS])
def test_agrees_with_mmasim_on_a_million_random_bit_instances(kind, monkeypatch):
    # at least 10^6 instances compared bit for bit (the AMD brackets leave some out: more are drawn), on the
    # compiled engine where numba is installed (a long run's: this run alone would stay on NumPy, tested equal)
    monkeypatch.setenv("FP8CHECK_NUMBA", "1")
    total = {"instances": 0, "compared": 0, "target_dependent": 0, "mismatches": 0}
    part = 0
    while total["compared"] < 1_000_000:
        r = mo.compare(mo.BY_NAME[kind], mo.draw(mo.BY_NAME[kind], 250_000, seed=1000 + part))
        for key in total:
            total[key] += r[key]
        assert r["mismatches"] == 0, r
        part += 1
    assert total["compared"] + total["target_dependent"] == total["instances"]
    print(kind, total)


def test_a_planted_float32_model_fails_the_hand_cases():
    # the hand cases above would catch a model that is float32 FMA: replace the Hopper step with a plain
    # float32 sum and watch the 13-bit case change
    planted = dataclasses.replace(tc.SM90_WGMMA_FP8, name="planted-wide", fraction_bits=40, result_bits=23)
    a, b = big_plus_small(16.0, 2.0 ** -6)
    got = tc.mma(planted, codes(a, "e4m3fn"), "e4m3fn", codes(b, "e4m3fn"), "e4m3fn").values[0, 0]
    assert float(got) == 256.484375 != 256.0


# -- the compiled engine (numba) against the NumPy engine ---------------------------------------------

EDGE_C = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                   0x7FC00000, 0x3F800000, 0xB3800000, 0x0DA24260, 0x72000000], dtype=np.uint32)  # float32 bits


def edge_instances(k: mo.Kind) -> mo.Instances:
    """Rows at the ends of every range: zero, the largest and smallest codes of both signs, one large product
    among tiny ones (the truncation and rounding grids), NaN/Inf codes; each against every accumulator of
    EDGE_C (zeros, subnormals, the largest float32, Inf, NaN, values far above and below the products) and,
    for scaled kinds, against the extreme scale codes."""
    def rows(fmt):
        f = get_format(fmt)
        top, sign = f.max_code, f.sign_mask
        patterns = [[0], [top], [top | sign], [1], [1 | sign], [top, 1], [1 | sign, top], [top, top | sign],
                    [top, 1, 1 | sign, 2], [f.code_count - 1], [sign]]
        return np.array([np.resize(p, k.k) for p in patterns], dtype=np.uint8)

    ra, rb = rows(k.a_fmt), rows(k.b_fmt)
    ia, ib, ic = np.meshgrid(np.arange(len(ra)), np.arange(len(rb)), np.arange(len(EDGE_C)), indexing="ij")
    ia, ib, ic = ia.ravel(), ib.ravel(), ic.ravel()
    sa = sb = None
    if k.scale_fmt:
        codes = (0, 1, 127, 254, 255) if k.scale_fmt == "e8m0fnu" else (0, 1, 0x38, 0x7E, 0x7F, 0xB8)
        kb = k.k // k.block
        sa = np.resize(np.array(codes, np.uint8), (len(ia), kb))
        sb = np.resize(np.array(codes[::-1], np.uint8), (len(ia), kb))
    return mo.Instances(ra[ia], rb[ib], EDGE_C[ic].view(np.float32), sa, sb)


def engine_runs(k: mo.Kind, inst: mo.Instances) -> list[tc.MMAResult]:
    """dot_instances on the instances and on the edge rows; a 40 x 72 GEMM of the instances' first rows from their
    accumulators and an 11 x 121 GEMM of the edge rows (every pattern of a against every pattern of b, each with
    the edge accumulators): 64 columns a block in the compiled GEMM lanes, the rest element by element; and
    (unscaled kinds) a K tail of two instructions with promotion."""
    target = k.model.split("-")[0]
    a, b = inst.a[:40], inst.b[:40]
    edge = edge_instances(k)
    m = tc.MODELS[k.model]
    out = [mo.ours(k, inst), mo.ours(k, edge)]
    for x, y, c, step in ((inst, inst, np.resize(inst.c, (40, 72)), (1, 1)), (edge, edge, None, (154, 14))):
        rows, cols = slice(0, 40 * step[0], step[0]), slice(0, 121 * step[1], step[1])
        ga, gb = x.a[rows][:40], y.b[cols][:121 if c is None else 72]
        if c is None:
            c = np.resize(EDGE_C, (len(ga), len(gb))).view(np.float32)
        scales = {} if k.scale_fmt is None else {"a_scales": x.sa[rows][:len(ga)], "b_scales": y.sb[cols][:len(gb)].T,
                                                 "scale_fmt": k.scale_fmt}
        out.append(tc.mma(m, ga, k.a_fmt, gb.T, k.b_fmt, acc=c, **scales))
    if k.scale_fmt is None:
        tail = np.hstack([a, b])[:, :-5]  # K = 2 k - 5: a padded tail
        out.append(tc.mma(m, tail, k.a_fmt, np.hstack([b, a])[:, :-5].T, k.b_fmt, acc=inst.c[:40], promotion=1))
    return out


def assert_engines_agree(k: mo.Kind, inst: mo.Instances, monkeypatch) -> None:
    monkeypatch.setenv("FP8CHECK_NUMBA", "1")  # the compiled engine from the first call
    compiled = engine_runs(k, inst)
    assert tc._compiled_step() is not None
    monkeypatch.setenv("FP8CHECK_NUMBA", "0")
    assert tc._compiled_step() is None
    plain = engine_runs(k, inst)
    monkeypatch.delenv("FP8CHECK_NUMBA")
    for x, y in zip(compiled, plain):
        assert np.array_equal(x.bits, y.bits), np.flatnonzero(x.bits != y.bits)[:5]
        assert np.array_equal(x.target_dependent, y.target_dependent)


@pytest.mark.parametrize("kind", [k.name for k in mo.KINDS])
def test_the_compiled_engine_equals_the_numpy_engine(kind, monkeypatch):
    # numba runs every FP8/FP6/FP4 kind as one fused pass over the K chain (fp8check.matmul._compiled);
    # FP8CHECK_NUMBA=0 runs the NumPy steps: the same bits and brackets, on random bits and on the edge rows
    pytest.importorskip("numba")
    k = mo.BY_NAME[kind]
    assert_engines_agree(k, mo.draw(k, 4000, seed=21), monkeypatch)


@pytest.mark.parametrize("kind", ["sm89-mma-fp8:e4m3fnxe4m3fn", "gfx942-mfma-fp8:e4m3fnuzxe4m3fnuz",
                                  "sm100-tcgen05-mxf8f6f4:e4m3fnxe4m3fn", "sm100-tcgen05-nvf4"])
def test_a_call_spread_over_threads_gives_the_same_bits(kind, monkeypatch):
    # a large call runs its output rows in spans on every core (fp8check.reference.fast.parallel): here every
    # call, on three threads, against the NumPy engine (paired instances with their scales, a GEMM, a K tail)
    pytest.importorskip("numba")
    monkeypatch.setattr(tc, "_THREADS_FROM", 0)
    monkeypatch.setattr(tc.fast, "PARALLEL_MIN", 0)
    monkeypatch.setenv("FP8CHECK_THREADS", "3")
    spans = []
    real = tc.fast.parallel
    monkeypatch.setattr(tc.fast, "parallel", lambda n, fn: real(n, lambda lo, hi: (spans.append(hi - lo), fn(lo, hi))))
    k = mo.BY_NAME[kind]
    assert_engines_agree(k, mo.draw(k, 8000, seed=23), monkeypatch)
    assert len(spans) > 3  # the instances went in spans


def each_kinds_own_kernel_equals_the_numpy_engine(kind, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(tc, "_SPECIALISE_FROM", 0)  # every call through the kernel compiled for its kind
    k = mo.BY_NAME[kind]
    assert_engines_agree(k, mo.draw(k, 2000, seed=22), monkeypatch)


def test_read_only_and_writable_operands_share_one_compilation(monkeypatch):
    # numba types a read-only array apart from a writable one: every input is handed over read-only, so a cached
    # (read-only) operand after a fresh one is no second compilation (each cost about a minute)
    pytest.importorskip("numba")
    monkeypatch.setenv("FP8CHECK_NUMBA", "1")
    compiled = tc._compiled_step()

    def compilations() -> int:
        return len(compiled.chain.signatures) + sum(len(k.signatures) for k in compiled._SPECIALISED.values())

    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 0x70, (8, 64), dtype=np.uint8), rng.integers(0, 0x70, (64, 8), dtype=np.uint8)
    want = tc.mma("sm90", a, "e4m3fn", b, "e4m3fn").values.view(np.uint32)
    made = compilations()
    a.flags.writeable = b.flags.writeable = False
    got = tc.mma("sm90", a, "e4m3fn", b, "e4m3fn").values.view(np.uint32)
    assert np.array_equal(got, want)
    assert compilations() == made


def test_the_kernel_compiled_for_a_kind_equals_the_numpy_engine(monkeypatch):
    # a large call runs a kernel compiled for its kind (layouts and model as constants); one kind here
    # (a compilation takes seconds), every kind in the slow lane
    each_kinds_own_kernel_equals_the_numpy_engine("sm90-wgmma-fp8:e4m3fnxe5m2", monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("kind", [k.name for k in mo.KINDS])
def test_each_kinds_own_kernel_equals_the_numpy_engine(kind, monkeypatch):
    each_kinds_own_kernel_equals_the_numpy_engine(kind, monkeypatch)


_FRESH_PROCESS = r"""
import os
import numpy as np
from fp8check.matmul import _compiled, tensorcore as tc
assert _compiled.cached() is False, "the cache folder is not empty"
rng = np.random.default_rng(3)
a, b = rng.integers(0, 256, (64, 256), dtype=np.uint8), rng.integers(0, 256, (256, 64), dtype=np.uint8)
plain = tc.mma("sm90", a, "e4m3fn", b, "e4m3fn", acc=None)  # 2**20 products: the NumPy steps, nothing compiled
assert not _compiled.made(), "compiled for a small first call"
assert not tc._compiled_now(_compiled, 1 << 22)
tc._modelled = tc.COMPILED_AFTER  # a long run's worth modelled on NumPy: the next call compiles
assert tc._compiled_now(_compiled, 1)
tc._modelled = 0
os.environ["FP8CHECK_NUMBA"] = "1"
assert tc._compiled_now(_compiled, 1)
print("ok")
"""


def test_a_fresh_process_models_on_numpy_until_a_compilation_pays(tmp_path):
    # numba's first compilation costs about 70 s on two cores and the NumPy steps model ~10^8 products a
    # second: with nothing on disk (an empty NUMBA_CACHE_DIR) a check, a test or a docs example stays on NumPy
    pytest.importorskip("numba")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    env.pop("FP8CHECK_NUMBA", None)
    r = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("fmt,bad", [("e2m1fn", 17), ("e4m3fn", 300), ("e4m3fn", -1)])
def test_a_code_outside_its_format_is_one_clear_error(fmt, bad):
    # e2m1 codes are 0..15 (one per byte), FP8's 0..255: the compiled kernels decline such a code and the NumPy
    # steps name it (they indexed their decoding tables with it); int8 views of FP8 bytes stay valid
    rng = np.random.default_rng(7)
    scaled = fmt == "e2m1fn"
    k = 64 if scaled else 32
    a = rng.integers(0, 16 if scaled else 256, size=(8, k)).astype(np.int16)
    b = rng.integers(0, 16 if scaled else 256, size=(8, k)).astype(np.int16)
    a[3, 5] = bad
    kw = dict(a_scales=np.full((8, k // 16), 0x38, np.uint8), b_scales=np.full((8, k // 16), 0x38, np.uint8),
              scale_fmt="e4m3fn") if scaled else {}
    target = "sm100" if scaled else "sm90"
    with pytest.raises(InvalidValueError, match=f"codes lie in 0..{15 if scaled else 255}, got {bad}"):
        tc.dot_instances(target, a, fmt, b, fmt, np.zeros(8, np.float32), **kw)
    if not scaled:
        a[3, 5] = 0x81
        want = tc.dot_instances(target, a.astype(np.uint8), fmt, b, fmt, np.zeros(8, np.float32)).values
        got = tc.dot_instances(target, a.astype(np.uint8).view(np.int8), fmt, b, fmt, np.zeros(8, np.float32)).values
        assert (want.view(np.uint32) == got.view(np.uint32)).all()


def test_e2m1_group_sums_agree_in_every_vector_form():
    # an NVFP4/MXFP4 step's four group sums of 16 e2m1 products, their nonzero mask and the outside-the-format flag
    # (fp8check.matmul._compiled._e2m1_ir) come from generic vector IR or, on x86, from byte shuffles and
    # multiply-adds of 256 or 512 bits: each form this CPU runs against NumPy, on every pair of byte codes
    numba = pytest.importorskip("numba")
    from numba.core import types
    from numba.extending import intrinsic

    from fp8check.matmul import _compiled

    def sums(width: int):
        @intrinsic
        def row(typingctx, pa, pb, dst):
            def codegen(context, builder, signature, args):
                return _compiled._e2m1_row_ir(builder, *args, width)
            return types.int64(types.uint64, types.uint64, types.uint64), codegen

        @numba.njit
        def run(a, b, out, outside):
            for r in range(a.shape[0]):
                outside[r] = row(np.uint64(a.ctypes.data + r * 64), np.uint64(b.ctypes.data + r * 64),
                                 np.uint64(out.ctypes.data + r * 16))
        return run

    rng = np.random.default_rng(9)
    pairs = rng.permutation(1 << 16)  # every (a, b) byte pair once, in random rows of 64
    inside_codes = rng.integers(0, 16, (2, 4096, 64), dtype=np.uint8)  # and rows of codes inside the format only
    a = np.concatenate([(pairs >> 8).astype(np.uint8).reshape(-1, 64), inside_codes[0]])
    b = np.concatenate([(pairs & 0xFF).astype(np.uint8).reshape(-1, 64), inside_codes[1]])
    for n, (side, other) in enumerate(((a, b), (b, a))):  # rows inside the format but for one code (each of 16..255
        rows, at = 4096 + 240 * n + np.arange(240), rng.integers(0, 64, 240)  # once a side), a zero against it
        side[rows, at], other[rows, at] = np.arange(16, 256), 0
    mag = np.array([0, 1, 2, 3, 4, 6, 8, 12], np.int64)
    va = np.where(a & 8, -1, 1) * mag[a & 7]
    vb = np.where(b & 8, -1, 1) * mag[b & 7]
    want_sums = (va * vb).reshape(-1, 4, 16).sum(axis=2)
    want_nonzero = np.packbits(((va != 0) & (vb != 0)).reshape(-1, 4, 16), axis=2, bitorder="little")
    want_outside = ((a | b) > 15).any(axis=1)
    widths = [0] + [w for w in (256, 512) if w <= _compiled._x86_bytes(numba.core.registry.cpu_target.target_context)]
    for width in widths:
        out, outside = np.zeros((len(a), 8), np.int16), np.zeros(len(a), np.int64)
        sums(width)(a, b, out, outside)
        inside = ~want_outside
        assert np.array_equal(outside != 0, want_outside), width
        assert inside.sum() == 4096 - 480
        assert np.array_equal(out[inside, :4], want_sums[inside]), width
        assert np.array_equal(out[inside, 4:].view(np.uint8).reshape(-1, 4, 2), want_nonzero[inside]), width

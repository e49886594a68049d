"""The faithful interpreter's float ops (fp8check.triton.ops), per target.

Every expectation here is derived from the instruction's semantics, not from
the code's output: the PTX ISA (``max.f32``: the non-NaN operand wins and
+0.0 > -0.0; ``min.xorsign.abs.f32``; ``fma.rn``: one rounding; NaN results
are the canonical 0x7FFFFFFF), AMD's ISA (``v_med3_f32``: ``v_min3_f32`` when
any operand is NaN; IEEE NaN propagation, the default NaN 0x7FC00000), what
Triton's backends emit for each target and version (read from the PTX and
AMDGCN of the 3.6.0, 3.8.0 and 3.9.0 wheels: docs/triton.md), worked by hand
in the comments. Kernels run in Triton's interpreter under each target; the
same kernels without the patch show what the stock interpreter does
instead."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import triton  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check.triton import ops, targets  # noqa: E402

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)

import op_kernels as ok  # noqa: E402  (tests/triton_faithful is on sys.path under pytest)

VERSION = triton.__version__.split("+")[0]
NAN, NEG_NAN, SNAN = 0x7FC00000, 0xFFC00000, 0x7F800001
CANONICAL, DEFAULT_NAN, X86_NAN = 0x7FFFFFFF, 0x7FC00000, 0xFFC00000
P448, M448 = 0x43E00000, 0xC3E00000
PZ, NZ = 0x00000000, 0x80000000
INF, NINF = 0x7F800000, 0xFF800000
ONE = 0x3F800000


def bits(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32).view(np.uint32)


def u32(*patterns: int) -> np.ndarray:
    return np.array(patterns, dtype=np.uint32)


def run(target: str | None, op: str, a=None, b=None, c=None, **kw) -> np.ndarray:
    """``op`` of op_kernels in the interpreter, under ``target`` (None: the stock interpreter)."""
    if target is None:
        return ok.run_one(op, a, b, c, launch=ft.interpreted, **kw)
    with ft.faithful(target):
        return ok.run_one(op, a, b, c, launch=ft.interpreted, **kw)


def hexes(x: np.ndarray) -> list[str]:
    return [f"0x{int(v):08X}" for v in np.asarray(x).reshape(-1)]


def assert_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert hexes(actual) == hexes(expected)


def is_nan32(x: np.ndarray) -> np.ndarray:
    return np.isnan(np.asarray(x, dtype=np.uint32).view(np.float32))


# -- min / max ------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_maximum_and_minimum_let_the_non_nan_operand_win(target):
    # max.f32 (PTX) and v_max_f32 on quieted operands (AMD IEEE mode): a NaN operand loses, either side,
    # signalling or not; both NaN give a NaN
    a = u32(NAN, ONE, NEG_NAN, SNAN, NAN)
    b = u32(ONE, NAN, ONE, ONE, NEG_NAN)
    for op in ("maximum", "minimum"):
        out = run(target, op, a, b)
        assert_bits(out[:4], u32(ONE, ONE, ONE, ONE))
        assert is_nan32(out[4:]).all()


def test_maximum_and_minimum_order_signed_zeros_on_sm90():
    # PTX max.f32/min.f32 (SASS FMNMX): "+0.0 > -0.0"
    a, b = u32(PZ, NZ, NZ, PZ), u32(NZ, PZ, NZ, PZ)
    assert_bits(run("sm90", "maximum", a, b), u32(PZ, PZ, NZ, PZ))
    assert_bits(run("sm90", "minimum", a, b), u32(NZ, NZ, NZ, PZ))


def test_signed_zeros_are_bracketed_on_amd():
    # llvm.maxnum/minnum (LLVM LangRef): +0 and -0 compare equal, either may be returned: the bracket's
    # lo mode takes -0, hi +0, so the result is target-dependent
    a, b = u32(PZ, NZ), u32(NZ, PZ)
    with ft.faithful("gfx942"):
        with ops.bracket("lo") as count:
            lo = ok.run_one("maximum", a, b, launch=ft.interpreted)
        with ops.bracket("hi"):
            hi = ok.run_one("maximum", a, b, launch=ft.interpreted)
    assert_bits(lo, u32(NZ, NZ))
    assert_bits(hi, u32(PZ, PZ))
    assert count.get("signed_zero")


@pytest.mark.parametrize("target, nan", [("sm90", CANONICAL), ("gfx942", DEFAULT_NAN)])
def test_propagate_nan_all_gives_the_targets_nan(target, nan):
    # max.NaN.f32: "the canonical NaN"; llvm.maximum on AMD: a select of the quiet NaN 0x7FC00000
    out = run(target, "maximum_nan", u32(NAN, ONE, ONE), u32(ONE, NEG_NAN, 0x40000000))
    assert_bits(out, u32(nan, nan, 0x40000000))


# -- clamp ----------------------------------------------------------------------------


@pytest.mark.parametrize("nan, want", [(NAN, P448), (SNAN, P448), (NEG_NAN, M448), (0xFFFFFFFF, M448)])
def test_clamp_with_symmetric_constant_bounds_is_xorsign_on_sm90(nan, want):
    # min.xorsign.abs.f32 x, 448 (PTX ISA): xorsign = sign(x) ^ sign(448) read before .abs; min(|NaN|, 448)
    # = 448 (the non-NaN operand); the sign is set on every non-NaN result: +NaN -> +448, -NaN -> -448
    # (the H200's op table: a = 0xFFC00000 and 0xFFFFFFFF stored 0xC3E00000). Otherwise min(|x|, 448) with
    # x's sign.
    out = run("sm90", "clamp_const", np.concatenate([u32(nan), bits(-500.0, 500.0, -0.0, 3.0)]))
    assert_bits(out, np.concatenate([u32(want), bits(-448.0, 448.0, -0.0, 3.0)]))


def test_xorsign_clamp_applies_the_sign_rule_to_a_nan_operand():
    # the H200's op table, tl.clamp(a, -|b|, |b|): a = -NaN, b = 0 -> -0 (0x80000000); a = -NaN, b = 1 -> -1;
    # a = -1, b = NaN -> |a| with sign(a) ^ sign(|b|) = -1; a = 3, b = -NaN (|b| = +NaN) -> 3
    x = u32(NEG_NAN, NEG_NAN, 0xBF800000, 0x40400000).view(np.float32)
    hi = np.abs(u32(PZ, ONE, NAN, NEG_NAN).view(np.float32))
    out = ops.xorsign_clamp(x, hi, propagate_nan=False, nan="canonical_nvidia")
    assert_bits(out.view(np.uint32), u32(NZ, 0xBF800000, 0xBF800000, 0x40400000))
    assert_bits(run("sm90", "clamp_neg_abs", u32(NEG_NAN, NEG_NAN), u32(PZ, ONE)), u32(NZ, 0xBF800000))


def test_min_of_max_of_nan_is_the_lower_bound_on_sm90():
    # max.f32(NaN, -448) = -448 (NaN loses), min.f32(-448, 448) = -448: 0xFE, as the H200 stored
    assert_bits(run("sm90", "minmax_const", u32(NAN, NEG_NAN)), u32(M448, M448))


def test_clamp_of_nan_with_propagate_nan_all():
    # sm90: min.NaN.xorsign.abs.f32 -> the canonical NaN; gfx942 (3.8/3.9): v_med3 then select(x != x, x):
    # x's own NaN; (3.6): llvm.maximum/minimum, expanded with a select of the quiet NaN 0x7FC00000
    assert_bits(run("sm90", "clamp_const_nan", u32(NEG_NAN)), u32(CANONICAL))
    assert_bits(run("gfx942", "clamp_const_nan", u32(NEG_NAN)), u32(DEFAULT_NAN if VERSION == "3.6.0" else NEG_NAN))


def test_where_keeps_the_nan_it_selects():
    # selp / v_cndmask move bits: tl.where(x != x, x, clamp(x)) stores x's NaN
    for target in ("sm90", "gfx942"):
        assert_bits(run(target, "where_nan", u32(NEG_NAN, NAN)), u32(NEG_NAN, NAN))


def test_a_bfloat16_clamp_is_xorsign_too_on_sm90():
    # 3.8/3.9: min.xorsign.abs.bf16; 3.6: widened, min.xorsign.abs.f32: bf16(a) (cvt.rn.bf16.f32) makes every
    # NaN the positive 0x7FFF, so NaN of either sign -> +448 (the H200's op table); AMD: max then min (its
    # v_med3 lowering takes f16/f32 only): NaN -> -448
    assert_bits(run("sm90", "bf16_clamp", u32(NAN, NEG_NAN)), u32(P448, P448))
    assert_bits(run("gfx942", "bf16_clamp", u32(NAN, NEG_NAN)), u32(M448, M448))


def test_clamp_bounds_built_at_run_time_are_not_the_pattern():
    # tl.clamp(a, lo, h) with lo and h two arguments: isClipPattern cannot see lo == -h, so max.f32 then
    # min.f32: NaN -> lo = -448
    assert_bits(run("sm90", "clamp_args", u32(NAN)), u32(M448))


def test_clamp_with_a_negated_scalar_depends_on_the_triton_version():
    # tl.clamp(a, -h, h), h a float argument: Triton 3.8/3.9 negate with negf and splat both (the
    # splat(negf(s)), splat(s) case of isClipPattern): min.xorsign.abs, NaN -> +448. Triton 3.6 negates
    # as (0 - h) before the splat, which it does not match: max then min, NaN -> -448.
    want = M448 if VERSION == "3.6.0" else P448
    assert_bits(run("sm90", "clamp_neg_arg", u32(NAN)), u32(want))


def test_clamp_with_a_negated_tensor_is_the_pattern_in_every_version():
    # tl.clamp(a, -tl.abs(b), tl.abs(b)): negf(t) (3.8/3.9) or 0 - t (3.6) of the same value: xorsign
    assert_bits(run("sm90", "clamp_neg_abs", u32(NAN), bits(448.0)), u32(P448))


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_clamp_of_nan_is_the_lower_bound_on_amd(target):
    # v_med3_f32 with a NaN operand is v_min3_f32: min(NaN, -448, 448) = -448 in IEEE mode (3.8/3.9);
    # 3.6's v_max_f32 then v_min_f32 gives the same -448
    for op in ("clamp_const", "clamp_neg_arg", "clamp_args"):
        assert_bits(run(target, op, u32(NAN, NEG_NAN)), u32(M448, M448))


def test_med3_is_a_median_where_min_of_max_is_not():
    # bounds the wrong way round (lo = 1 > hi = -1), x = 0: median 0; min(max(0, 1), -1) = -1
    x, lo, hi = np.float32([0.0]), np.float32([1.0]), np.float32([-1.0])
    assert ops.med3(x, lo, hi)[0] == 0.0
    assert ops.clamp(x, lo, hi, rule="minmax", propagate_nan=False, zeros="ordered", nan="quiet")[0] == -1.0
    # a NaN x: the smallest of the bounds
    assert ops.med3(np.float32([np.nan]), np.float32([-448.0]), np.float32([448.0]))[0] == -448.0


def test_the_stock_interpreter_does_not_clamp_nan_as_sm90_does():
    # its clamp is NumPy's (np.fmax/np.fmin: NaN -> -448 in 3.9; np.clip: NaN stays NaN in 3.6): never the +448
    # that sm90's min.xorsign.abs stores
    assert hexes(run(None, "clamp_const", u32(NAN))) != hexes(u32(P448))
    assert is_nan32(run(None, "clamp_const_nan", u32(NAN))).all()


# -- fma contraction ------------------------------------------------------------------

# a = b = 1 + 2^-12, c = -(1 + 2^-11): a*b = 1 + 2^-11 + 2^-24 exactly. Rounded to float32 (ulp 2^-23 at 1)
# the 2^-24 is a tie, to even: 1 + 2^-11, and adding c gives 0. Fused, one rounding: 2^-24.
A = B = 1 + 2.0 ** -12
C = -(1 + 2.0 ** -11)


@pytest.mark.parametrize("target", ["sm90", "gfx942", "gfx950"])
def test_a_times_b_plus_c_is_fused(target):
    # enable_fp_fusion (on by default) -> LLVM fuses fmul + fadd: fma.rn.f32 / v_fma_f32
    assert_bits(run(target, "fma_contract", bits(A), bits(B), bits(C)), bits(2.0 ** -24))
    assert_bits(run(target, "fms_contract", bits(A), bits(B), bits(-C)), bits(2.0 ** -24))
    assert_bits(run(target, "fnms_contract", bits(A), bits(B), bits(-C)), bits(-(2.0 ** -24)))


def test_without_fp_fusion_the_product_is_rounded(monkeypatch):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert_bits(run("sm90", "fma_contract", bits(A), bits(B), bits(C)), bits(0.0))


def test_the_stock_interpreter_rounds_the_product():
    assert_bits(run(None, "fma_contract", bits(A), bits(B), bits(C)), bits(0.0))


# bfloat16 (8 significant bits): a = b = 1 + 2^-7, c = -(1 + 2^-6). a*b = 1 + 2^-6 + 2^-14; rounded to
# bfloat16 (ulp 2^-7 at 1) that is 1 + 2^-6, and adding c gives 0. One rounding (fma.rn.bf16): 2^-14.
BA = BB = 1 + 2.0 ** -7
BC = -(1 + 2.0 ** -6)


def test_bfloat16_a_times_b_plus_c_is_one_fma_on_sm90():
    # LLVM NVPTX has fma.rn.bf16 on sm90: the PTX of Triton 3.6/3.8/3.9 is one fma.rn.bf16
    assert_bits(run("sm90", "bf16_fma", bits(BA), bits(BB), bits(BC)), bits(2.0 ** -14))


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_bfloat16_a_times_b_plus_c_rounds_twice_on_amd(target):
    # Triton's AMD backend multiplies bfloat16 in float32 and rounds to bfloat16 (EmitDualBF16ElementwiseOp)
    # before the add: no fma to form
    assert_bits(run(target, "bf16_fma", bits(BA), bits(BB), bits(BC)), bits(0.0))


def test_tl_fma_is_one_rounding_everywhere():
    for target in ("sm90", "gfx942"):
        assert_bits(run(target, "tl_fma", bits(A), bits(B), bits(C)), bits(2.0 ** -24))


def test_two_products_fuse_the_first_on_sm90_and_either_on_amd():
    # a*b + b*c with a = 1 + 2^-12, b = 1 + 2^-12, c = C / b rounded: on sm90 the DAG combiner fuses the
    # first product (its PTX: mul.f32 then fma.rn.f32); on AMD some elements are packed (v_pk_mul_f32 +
    # v_add_f32: nothing fused), so the three results bracket it
    a, b = bits(A), bits(B)
    c = (np.float32(C) / np.float32(B)).astype(np.float32).view(np.uint32).reshape(1)
    x, y = np.float64(A), np.float64(np.float32(B))
    bc = np.float32(np.float32(B) * c.view(np.float32)[0])
    first_fused = np.float32(x * y + np.float64(bc))  # exact in float64: 24-bit factors
    assert_bits(run("sm90", "fma_two_products", a, b, c), np.array([first_fused]).view(np.uint32))
    with ft.faithful("gfx942"):
        runs = ops.bracketed_runs(lambda: ok.run_one("fma_two_products", a, b, c, launch=ft.interpreted))
    assert len(runs) == 3
    lo, hi = (r.view(np.float32)[0] for r in runs[1:])
    plain = np.float32(np.float32(A * B) + bc)
    assert lo <= min(first_fused, plain) and hi >= max(first_fused, plain)


# -- NaNs of arithmetic -----------------------------------------------------------------


@pytest.mark.parametrize("op, a, b", [("add", INF, NINF), ("sub", INF, INF), ("mul", PZ, INF)])
def test_invalid_operations_write_the_targets_nan(op, a, b):
    # NVIDIA: every NaN result is the canonical 0x7FFFFFFF; AMD (IEEE): the default NaN 0x7FC00000;
    # x86 (the stock interpreter's NumPy): 0xFFC00000, a negative NaN that keeps its sign into e4m3fn on AMD
    assert_bits(run("sm90", op, u32(a), u32(b)), u32(CANONICAL))
    assert_bits(run("gfx942", op, u32(a), u32(b)), u32(DEFAULT_NAN))
    assert_bits(run(None, op, u32(a), u32(b)), u32(X86_NAN))


def test_a_nan_operand_propagates_quieted_on_amd_and_canonical_on_nvidia():
    # IEEE 754 6.2.3: the result is a NaN operand's payload, made quiet (0x7F800001 -> 0x7FC00001)
    assert_bits(run("gfx942", "add", u32(SNAN, NEG_NAN), u32(ONE, ONE)), u32(0x7FC00001, NEG_NAN))
    assert_bits(run("sm90", "add", u32(SNAN, NEG_NAN), u32(ONE, ONE)), u32(CANONICAL, CANONICAL))


def test_canonical_nans_helper():
    x = np.array([np.inf], np.float32) - np.array([np.inf], np.float32)
    assert_bits(ops.canonical_nans(x, "canonical").view(np.uint32), u32(CANONICAL))
    assert_bits(ops.canonical_nans(x, "propagate", [np.float32([np.inf])]).view(np.uint32), u32(DEFAULT_NAN))


# -- division -----------------------------------------------------------------------


def test_division_by_448_is_the_product_with_its_reciprocal_on_sm90():
    # 0.56640625 / 448: correctly rounded 0x3AA5B6DB; 0.56640625 * fl(1/448) = 0x3AA5B6DC. On the H200
    # `a / 448.0` equalled a * fl(1/448) on all 2^20 inputs (div.full.f32 in 3.6; 3.9 emits
    # div.approx.f32 1.0, 448 and mul.f32), while AMD's fdiv is correctly rounded.
    x = bits(0.56640625)
    assert_bits(run("sm90", "div_const", x), u32(0x3AA5B6DC))
    assert_bits(run("gfx942", "div_const", x), u32(0x3AA5B6DB))
    assert_bits(run("sm90", "div_rn", x, bits(448.0)), u32(0x3AA5B6DB))


def test_division_of_loaded_values_on_sm90_is_the_product_with_the_hardware_reciprocal(partial_reciprocals):
    # div.full.f32 is MUFU.RCP then one FMUL (the SASS; fp8check.triton.nvidia_approx): the H200 measured the
    # reciprocal of the mantissas 1.5 (3) and 1.75 (7), both fl(1/m): 1/3 and 10/7 are exact, one run.
    # 127's reciprocal was not measured: bracketed, its ends the products with fl(1/127) one ulp either way,
    # the rn run the correctly rounded quotient (between them).
    a, b = bits(1.0, 10.0), bits(3.0, 7.0)
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one("div", a, b, launch=ft.interpreted))
    assert len(runs) == 1
    assert_bits(runs[0], (np.float32([1.0, 10.0]) * (np.float32(1) / np.float32([3.0, 7.0]))).view(np.uint32))
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one("div", bits(100.0), bits(127.0), launch=ft.interpreted))
    r = np.float32(1) / np.float32(127)
    lo, hi = np.float32(100) * np.nextafter(r, np.float32(0)), np.float32(100) * np.nextafter(r, np.float32(1))
    assert len(runs) == 3
    assert [hexes(x)[0] for x in runs] == [hexes(np.float32(e).view(np.uint32))[0]
                                           for e in (np.float32(100) / np.float32(127), lo, hi)]
    with ft.faithful("gfx942"):
        assert len(ops.bracketed_runs(lambda: ok.run_one("div", a, b, launch=ft.interpreted))) == 1


def test_division_by_any_constant_is_the_product_with_its_rounded_reciprocal_on_sm90():
    # ptxas folds x / C (div.full.f32 in 3.6 and 3.8, div.approx.f32 1.0, C + mul.f32 in 3.9) into
    # FMUL x, fl(1/C) (the SASS): exact, one run; the H200 gave it for C = 448, 240, 224, 57344, 6 and 3
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one("div_c3", bits(1.0, 5.0), launch=ft.interpreted))
    assert len(runs) == 1
    assert_bits(runs[0], (np.float32([1.0, 5.0]) * (np.float32(1.0) / np.float32(3.0))).view(np.uint32))


@pytest.mark.parametrize("target", ["sm90", "sm100", "gfx942"])
def test_the_interpreters_division_is_the_references(target, partial_reciprocals):
    # ops.divide_f32 is the one per-target run-time division: the interpreter's fdiv and the GEMM references
    # (the rescaled epilogue's ratios) take it, so a kernel's quotient and its reference's agree in every
    # bracket mode. Mantissas whose sm90 reciprocal is unknown (the partial table) and sm100's bounded
    # div.full.f32 are bracketed: their lo and hi ends differ from rn somewhere.
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(512) * 100).astype(np.float32)
    y = (rng.standard_normal(512) * 3).astype(np.float32)
    y[:4] = (0.0, -0.0, np.inf, np.nan)
    ends = {}
    for mode in ops.BRACKET_MODES:
        want, known = ops.divide_f32(x, y, target, end=mode)
        with ft.faithful(target), ops.bracket(mode):
            got = ok.run_one("div", x.view(np.uint32), y.view(np.uint32), launch=ft.interpreted)
        assert_bits(got, want.view(np.uint32))
        ends[mode] = want.view(np.uint32)
    with np.errstate(all="ignore"):
        ieee = x / y
    nan = np.isnan(ieee)
    assert (np.isnan(ends["rn"].view(np.float32)) == nan).all()
    assert known.all() == (target == "gfx942")
    if target != "sm90":  # sm90's known quotients are its reciprocals' products, not the correctly rounded ones
        assert_bits(ends["rn"][~nan], ieee.view(np.uint32)[~nan])
    if target != "gfx942":
        assert (ends["lo"] != ends["hi"]).any() and (ends["lo"][known] == ends["hi"][known]).all()


# -- square roots, exp, log ---------------------------------------------------------------

TINY = 2.0 ** -140  # a float32 subnormal


def test_sqrt_flushes_subnormal_inputs_where_the_instruction_is_ftz():
    # sqrt.approx.ftz.f32 (sm90) and v_sqrt_f32 (AMD, Triton's ftz lowering): a subnormal reads as 0;
    # sqrt_rn (sqrt.rn.f32, llvm.sqrt) is correctly rounded: 2^-70
    for target in ("sm90", "gfx942"):
        assert_bits(run(target, "sqrt", bits(TINY)), bits(0.0))
        assert_bits(run(target, "sqrt_rn", bits(TINY)), bits(2.0 ** -70))
        assert_bits(run(target, "rsqrt", bits(TINY)), u32(INF))


def test_exp2_flushes_subnormal_results_and_exp_does_not():
    # ex2.approx.ftz.f32 / v_exp_f32: 2^-130 is subnormal, written as +0; tl.exp is x*log2(e) then
    # ex2.approx.f32 (no ftz) / llvm.exp2.f32 (denormals scaled): exp(-130 ln 2) stays subnormal
    for target in ("sm90", "gfx942"):
        assert_bits(run(target, "exp2", bits(-130.0)), bits(0.0))
        assert run(target, "exp", bits(-130.0 * np.log(2.0))).view(np.float32)[0] > 0
        assert_bits(run(target, "exp2", bits(3.0)), bits(8.0))  # the correctly rounded result in rn mode


def test_log2_of_a_subnormal_is_not_flushed():
    # sm90: libdevice __nv_log2f, even with Triton's nvvm-reflect-ftz, scales |x| < 2^-126 by 2^23 (setp.lt.f32,
    # mul.f32) before its polynomial: log2(2^-140) = -140, log2(2^-149) = -149 (the H200's op table:
    # a = 0x00000001 stored 0xC3150000); AMD: llvm.log2.f32 scales denormals before v_log_f32: -140. Zero: -Inf
    for target in ("sm90", "gfx942"):
        assert_bits(run(target, "log2", bits(TINY, 2.0 ** -149, 0.0)), np.concatenate([bits(-140.0, -149.0), u32(NINF)]))


def test_log_of_a_subnormal_is_bracketed_around_its_true_value_on_sm90():
    # __nv_logf scales a subnormal as __nv_log2f does: log(2^-149) = -149 ln 2 = -103.2789...; the H200
    # stored 0xC2CE8ED0 for it and 0xC2AEAC50 for 0x807FFFFF (|x| just below 2^-126): within the 1-ulp bracket
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one("log", u32(0x00000001, 0x807FFFFF), launch=ft.interpreted))
    rn, lo, hi = (r.view(np.float32) for r in runs)
    assert_bits(runs[0], bits(-149 * np.log(2.0), np.log(float(np.float32(u32(0x007FFFFF).view(np.float32)[0])))))
    h200 = u32(0xC2CE8ED0, 0xC2AEAC50).view(np.float32)
    assert (lo <= h200).all() and (h200 <= hi).all() and np.isfinite(lo).all()


def test_approximate_functions_are_bracketed_by_their_documented_bound():
    with ft.faithful("sm100"):  # sm90's MUFU.SQRT is measured (exact); sm100's is not
        runs = ops.bracketed_runs(lambda: ok.run_one("sqrt", bits(2.0), launch=ft.interpreted))
    lo, rn, hi = (r.view(np.float32)[0] for r in (runs[1], runs[0], runs[2]))
    assert rn == np.float32(np.sqrt(2.0))
    exact = np.sqrt(2.0)
    assert lo < rn < hi
    assert exact - lo <= exact * 2.0 ** -23 and hi - exact <= exact * 2.0 ** -23  # sqrt.approx: 2^-23 relative


# -- reductions -------------------------------------------------------------------------


def test_tl_max_ignores_nan_and_orders_zeros_on_sm90():
    row = np.arange(1, 17, dtype=np.float32)
    row[3] = np.nan
    assert_bits(run("sm90", "max", row=row), bits(16.0))
    zeros = np.resize(np.float32([0.0, -0.0]), 16)
    assert_bits(run("sm90", "max", row=zeros), bits(0.0))
    assert_bits(run("sm90", "min", row=zeros), bits(-0.0))
    assert is_nan32(run("sm90", "max", row=np.full(16, np.nan, np.float32))).all()


def _arg_runs(op: str, row: np.ndarray) -> list[int]:
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one(op, row=row, launch=ft.interpreted))
    return [int(r[0]) for r in runs]


def test_argmin_of_a_row_with_nan_follows_the_reduction_tree():
    # _argmin_combine(v1, i1, v2, i2) keeps the left operand iff v1 < v2 or (v1 == v2 and i1 < i2): a NaN on
    # either side gives the right one. Row 1..16 with NaN at 8 (the H200's op table stored index 1):
    # shuffle tree (lo; lane l takes combine(own, lane l ^ N), N = 8, 4, 2, 1): lane 0: (1,0) vs (NaN,8) ->
    # (NaN,8); vs lane 4 (5,4) -> (5,4); vs lane 2 (3,2) -> (3,2); vs lane 1 (2,1) -> (2,1): index 1.
    # In-thread fold (hi): (8,7) vs (NaN,8) -> (NaN,8); vs (10,9) -> (10,9), which stays: index 9.
    # rn: NaN ignored: index 0
    row = np.arange(1, 17, dtype=np.float32)
    row[8] = np.nan
    assert _arg_runs("argmin", row) == [0, 1, 9]


def test_argmax_of_a_row_ending_in_nan_is_the_nan_in_both_trees():
    # row 1..15, NaN at 15 (the H200 stored 15): shuffle: lane 7 takes (NaN,15) from lane 15, lane 3 from
    # lane 7, lane 1 from lane 3, and lane 0's (15,14) vs (NaN,15) -> (NaN,15); fold: the NaN comes last
    row = np.arange(1, 17, dtype=np.float32)
    row[15] = np.nan
    assert _arg_runs("argmax", row) == [14, 15, 15]
    # no NaN: the combine is a total order, every tree gives the leftmost maximum and nothing is rerun
    assert _arg_runs("argmax", np.resize(np.float32([1.0, 3.0]), 16)) == [1]


def test_argmin_trees_reduce_the_given_axis_of_a_block():
    # the same row as above, as column 1 of a 16x3 block reduced along axis 0 (columns 0 and 2 hold no NaN:
    # the leftmost minimum in every run), and along axis 1 of its transpose
    col = np.arange(1, 17, dtype=np.float32)
    col[8] = np.nan
    block = np.stack([np.arange(16, 0, -1, dtype=np.float32), col, np.ones(16, np.float32)], axis=1)
    for mode, want in (("rn", [15, 0, 0]), ("lo", [15, 1, 0]), ("hi", [15, 9, 0])):
        with ops.bracket(mode):
            _, idx0 = ops.argminmax(block, 0, False, maximum=False)
            _, idx1 = ops.argminmax(block.T.copy(), 1, True, maximum=False)
        assert idx0.tolist() == want and idx1.reshape(-1).tolist() == want, mode


def test_tl_max_ignores_a_signalling_nan():
    # max.f32 ignores every NaN, signalling or quiet: the row the H200 reduced to 0x7AA8C0B8 (NumPy's
    # np.nanmax returns 0x79F8CE49 for it, the signalling 0x7FB395CE beside it)
    row = u32(0xD98F9A13, 0x43758FC2, 0x7AA8C0B8, 0x0BAD92E1, 0xB71E3206, 0x7FB395CE, 0x40842DD1, 0x044B2088,
              0xE1FAC2E6, 0x2BF59F33, 0xB8952568, 0xBE7373B3, 0x02B12CEB, 0x12F2CC2A, 0x79F8CE49, 0x56EEC1DF)
    assert_bits(run("sm90", "max", row=row), u32(0x7AA8C0B8))
    assert_bits(run("sm90", "min", row=row), u32(0xE1FAC2E6))


def test_maximum_ignores_a_signalling_nan_wherever_it_sits():
    # max.f32(sNaN, b) = b (the H200's op table: a = 0x7F800001, b = 1.0 -> 1.0). NumPy's np.fmax returns
    # NaN for a signalling NaN in its scalar tail (C's fmaxf), b in its SIMD body: 17 elements put one in
    # the tail
    a = np.full(17, SNAN, np.uint32).view(np.float32)
    b = np.arange(17, dtype=np.float32)
    for maximum in (True, False):
        out = ops.minmax(a, b, maximum=maximum, propagate_nan=False, zeros="ordered", nan="canonical_nvidia")
        assert_bits(out.view(np.uint32), b.view(np.uint32))


# -- bfloat16 and integer casts -----------------------------------------------------------


@pytest.mark.parametrize("target, want", [("sm90", 16908288), ("gfx942", 16777216)])
def test_int_to_bfloat16_rounds_once_on_sm90_and_twice_on_amd(target, want):
    # 2^24 + 2^16 + 1: cvt.rn.bf16.s32 rounds it once, to 2^24 + 2^17 (above the tie at 2^24 + 2^16);
    # AMD's sitofp to float32 first gives 2^24 + 2^16 (a tie in float32, to even), then the bfloat16 tie
    # goes to even: 2^24
    out = run(target, "i32_to_bf16", ints=np.array([2 ** 24 + 2 ** 16 + 1], np.int32))
    assert out.view(np.float32)[0] == want


def test_int_to_bfloat16_in_the_stock_interpreter_is_garbage():
    out = run(None, "i32_to_bf16", ints=np.array([5], np.int32))
    assert out.view(np.float32)[0] != 5.0


@pytest.mark.parametrize("target, nan", [("sm90", 0x7FFF0000), ("gfx942", 0x7FFF0000)])
def test_a_bfloat16_nan_result_is_the_targets_nan(target, nan):
    # add.bf16 writes the canonical 0x7FFF; gfx942's software RNE writes 0x7FFF for any NaN
    assert_bits(run(target, "bf16_add", u32(INF), u32(NINF)), u32(nan))


def test_bfloat16_arithmetic_is_on_values_not_bits():
    # 1.5 + 2.25 = 3.75 exactly in bfloat16; the stock interpreter adds the uint16 patterns
    assert_bits(run("sm90", "bf16_add", bits(1.5), bits(2.25)), bits(3.75))
    assert_bits(run("gfx942", "bf16_mul", bits(1.5), bits(2.25)), bits(3.375))


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_float_to_int_truncates_saturates_and_maps_nan_to_zero(target):
    # cvt.rzi.s32.f32 / v_cvt_i32_f32: toward zero, out-of-range saturates, NaN -> 0
    out = run(target, "f32_to_i32", bits(2.9, -2.9, 3e9, -3e9, np.inf, np.nan))
    assert list(out.view(np.int32)) == [2, -2, 2 ** 31 - 1, -(2 ** 31), 2 ** 31 - 1, 0]


# -- the rules as data ----------------------------------------------------------------


def test_every_op_rule_names_its_sources():
    for name in ("sm90", "gfx942", "gfx950"):
        rules = targets.get(name).ops
        assert rules is not None and rules.sources
        assert all(s in targets.OP_SOURCES for s in rules.sources)
        assert all("@" in targets.OP_SOURCES[s] for s in rules.sources if s.startswith("triton-"))


def test_the_version_differences_are_applied():
    assert "splat_negf" not in targets.for_triton(targets.get("sm90"), "3.6.0").ops.clip_patterns
    assert "splat_negf" in targets.for_triton(targets.get("sm90"), "3.8.0").ops.clip_patterns
    assert targets.for_triton(targets.get("gfx942"), "3.6.0").ops.clamp == "minmax"
    assert targets.for_triton(targets.get("gfx942"), "3.9.0").ops.clamp == "med3"


# -- target-dependent outputs through fp8check's own checks ------------------------------

import triton_kernels as tk  # noqa: E402

QUANT = dict(max_examples=8, seed=0, dtypes=("float32",), thorough=False)


def test_codes_that_depend_on_div_full_are_target_dependent_not_divergences(partial_reciprocals):
    from fp8check.quantizers.conformance import check_quantizer

    with ft.faithful("sm90"):
        result = check_quantizer(tk.tensorwise_e4m3fn_div, "tensorwise", fmt="e4m3fn", **QUANT)
    assert result.passed, (result.categories, result.divergences[:2])
    assert result.target_dependent > 0
    assert result.target_dependent_examples and result.target_dependent_examples[0].category == "target_dependent"
    assert "fdiv" in result.extra["target_dependent_ops"]
    from fp8check.results import CheckResult
    again = CheckResult.from_dict(result.to_dict())  # JSON round trip
    assert again.target_dependent == result.target_dependent
    assert again.target_dependent_examples == result.target_dependent_examples
    from fp8check.terminal.divergences import result_text
    assert "target-dependent:" in result_text(result)


@pytest.mark.slow  # two quantizer checks in the interpreter
def test_the_same_quantizer_is_exact_where_division_is_correctly_rounded():
    from fp8check.quantizers.conformance import check_quantizer

    with ft.faithful("sm90"):
        exact = check_quantizer(tk.tensorwise_e4m3fn_div_rn, "tensorwise", fmt="e4m3fn", **QUANT)
    with ft.faithful("gfx950"):
        amd = check_quantizer(tk.tensorwise_e4m3fn_div, "tensorwise", fmt="e4m3fn", **QUANT)
    for result in (exact, amd):
        assert result.passed and result.target_dependent == 0, (result.categories, result.target_dependent)


@pytest.mark.slow  # a quantizer check in the interpreter, three runs
def test_a_wrong_quantizer_still_diverges_under_brackets():
    from fp8check.quantizers.conformance import check_quantizer

    with ft.faithful("sm90"):
        result = check_quantizer(tk.tensorwise_e4m3fn_div_240, "tensorwise", fmt="e4m3fn", **QUANT)
    assert not result.passed and result.categories["scale"] > 0

"""FP4/FP6 quantizers (MXFP4, MXFP6, NVFP4): the reference against independent oracles, the packed layouts,
and the check naming each planted bug (tests/fp4_mutants.py) while its fixed twin conforms."""

import math

import ml_dtypes
import numpy as np
import pytest

from fp8check import formats, quantizers
from fp8check.errors import InvalidValueError, KernelError
from fp8check.quantizers import pack_codes, unpack_codes
from fp8check.quantizers.conformance import check_quantizer, reference_kernel
from fp8check.quantizers.declared import declared_recipe
from fp8check.quantizers.packing import swap_pairs

import fp4_mutants

torch = pytest.importorskip("torch")

MXFP4 = quantizers.get("mx-e8m0-floor", "e2m1fn").replace(packed="low-first")
FAST = dict(max_examples=10, thorough=False)  # the edge cases and drawn inputs; planted bugs show there
THOROUGH = dict(max_examples=10)  # and the harness calls (non-contiguous, odd shapes, 2^22 elements twice)
ML_DTYPES = {"e2m1fn": ml_dtypes.float4_e2m1fn, "e2m3fn": ml_dtypes.float6_e2m3fn, "e3m2fn": ml_dtypes.float6_e3m2fn}


def _blocks_of_normal_values(rng, rows=6, cols=96, spread=40):
    """Ordinary inputs: every block a random magnitude, no Inf/NaN, a few exact zeros and -0."""
    x = rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-spread, spread, size=(rows, cols // 32)).repeat(32, 1))
    x = x.astype(np.float32)
    x[0, 5], x[1, 7] = 0.0, -0.0
    return x


# -- the reference against independent oracles -------------------------------------------------


@pytest.mark.parametrize("fmt", ["e2m1fn", "e2m3fn", "e3m2fn"])
@pytest.mark.parametrize("rule", ["floor", "ceil"])
def test_mx_reference_equals_an_oracle_of_python_ints_and_ml_dtypes(fmt, rule):
    """OCP MX v1.0 6.3: X = 2^(floor(log2 amax) - emax) (ceil for the round-up variant), elements x / X cast
    RNE with saturation; the oracle takes log2 from math.frexp of float64 and casts with ml_dtypes."""
    f = formats.get(fmt)
    r = quantizers.get(f"mx-e8m0-{rule}", fmt)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = _blocks_of_normal_values(rng)
        q = quantizers.quantize(x, r)
        blocks = x.reshape(x.shape[0], -1, 32).astype(np.float64)
        amax = np.abs(blocks).max(-1)
        for (i, b), a in np.ndenumerate(amax):
            m, e = math.frexp(a)  # a = m * 2^e, m in [0.5, 1)
            log2 = e - 1 if rule == "floor" or m == 0.5 else e
            k = max(log2 - f.emax, -127) if a else -127
            assert q.scales[i, b] == 2.0 ** k
            want = (blocks[i, b] / 2.0 ** k).astype(np.float32).astype(ML_DTYPES[fmt]).view(np.uint8)
            assert q.codes[i, 32 * b:32 * b + 32].tolist() == want.tolist(), (i, b)


def test_nvfp4_ct_reference_equals_the_formula_in_torch():
    """compressed-tensors' arithmetic written again with torch ops (2688 / amax as torch computes a float
    over a tensor), the e4m3 rounding by torch's cast and the e2m1 one by ml_dtypes."""
    r = quantizers.get("nvfp4-ct")
    rng = np.random.default_rng(5)
    for trial in range(20):
        x = (rng.standard_normal((4, 64)) * np.exp2(rng.integers(-30, 30, size=(4, 1)))).astype(np.float32)
        x[0, :16] = 0.0  # an all-zero block: scale 0 -> 0.125
        t = torch.from_numpy(x)
        g = torch.nan_to_num(2688.0 / t.abs().max().clamp(min=torch.finfo(torch.float32).tiny), nan=1.0,
                             posinf=1.0)
        s = (g * (t.reshape(4, 4, 16).abs().amax(-1) / 6.0)).clamp(-448, 448).to(torch.float8_e4m3fn).float()
        s = torch.where(s == 0, torch.tensor(0.125), s)
        y = t.reshape(4, 4, 16) / (s / g).unsqueeze(-1)
        codes = y.reshape(4, 64).numpy().astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
        q = quantizers.quantize(x, r)
        assert np.float32(g) == quantizers.global_scale(x, r), trial
        assert q.scales.tobytes() == s.numpy().tobytes(), trial
        assert q.codes.tolist() == codes.tolist(), trial


def test_nvfp4_ct_global_scale_of_a_zero_or_nan_tensor_is_one_of_an_inf_tensor_zero():
    """nan_to_num(2688 * (1 / amax)): an all-zero tensor (2688 / tiny overflows) and NaN give 1, Inf gives 0."""
    r = quantizers.get("nvfp4-ct")
    for v, g in ((0.0, 1.0), (np.nan, 1.0), (np.inf, 0.0)):
        x = np.zeros((1, 16), np.float32)
        x[0, 3] = v
        assert quantizers.global_scale(x, r) == np.float32(g), v


@pytest.mark.parametrize("name", ["nvfp4-torchao", "nvfp4-torchao-single"])
def test_nvfp4_torchao_reference_equals_torchao(name):
    """torchao 0.18's nvfp4_quantize is a test subject and conforms bit for bit, Inf and NaN included."""
    pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

    def kernel(x):
        if name == "nvfp4-torchao-single":
            s, d = nvfp4_quantize(x.contiguous(), 16, None)
            return d, s
        g = per_tensor_amax_to_scale(torch.max(torch.abs(x)))
        s, d = nvfp4_quantize(x.contiguous(), 16, g)
        return d, s, g

    result = check_quantizer(kernel, name, **THOROUGH)
    assert result.passed, result.divergences[:2]


@pytest.mark.parametrize("fmt, dtype", [("e2m1fn", "float4_e2m1fn_x2"), ("e2m3fn", "fp6_e2m3"), ("e3m2fn", "fp6_e3m2")])
def test_torchao_to_mx_fp4_fp6_matches_the_reference_but_for_its_known_defects(fmt, dtype):
    """torchao 0.18's to_mx (FLOOR) for the FP4/FP6 elements: every divergence is one of the two it has for FP8
    (tests/test_recipes_torchao.py): a block whose scale clamps to 2^-127 divided by 2^-126, a block holding
    Inf given a finite scale."""
    pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    elem = getattr(torch, dtype, dtype)

    def kernel(x):
        scale, data = to_mx(x.contiguous(), elem, 32, ScaleCalculationMode.FLOOR)
        return data, scale

    r = quantizers.get("mx-e8m0-floor", fmt).replace(packed="low-first" if fmt == "e2m1fn" else None)
    result = check_quantizer(kernel, r, **FAST)
    assert result.categories["scale"] == 0
    for d in result.divergences:
        assert d.category in ("codes", "nonfinite"), d
        if d.category == "codes":
            assert "scale 5.877471754111438e-39" in d.detail  # 2**-127
        else:
            assert d.input_value in ("inf", "-inf")


def test_dequantize_two_level_needs_and_uses_the_per_tensor_scale():
    x = np.array([[3.0, -1.5] + [0.0] * 14], np.float32)
    for name in ("nvfp4-torchao", "nvfp4-ct"):
        r = quantizers.get(name)
        q = quantizers.quantize(x, r)
        with pytest.raises(InvalidValueError, match="per-tensor scale"):
            quantizers.dequantize(q.codes, q.scales, r)
        values = quantizers.dequantize(q.codes, q.scales, r, per_tensor=quantizers.global_scale(x, r))
        assert values[0, :2].tolist() == pytest.approx([3.0, -1.5], rel=2 ** -3)


# -- packing ------------------------------------------------------------------------------------


def test_packing_round_trips_and_matches_torchao_pack_uint4():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 16, size=(5, 34), dtype=np.uint8)
    for order in ("low-first", "high-first"):
        assert unpack_codes(pack_codes(codes, order), order).tolist() == codes.tolist()
    assert pack_codes(codes, "high-first").tolist() == pack_codes(swap_pairs(codes), "low-first").tolist()
    assert pack_codes(np.array([[0x1, 0x2]], np.uint8), "low-first").tolist() == [[0x21]]
    kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")
    assert kernels.pack_uint4(torch.from_numpy(codes)).numpy().tolist() == pack_codes(codes, "low-first").tolist()


def test_packing_refuses_odd_rows_and_wide_codes():
    with pytest.raises(InvalidValueError, match="even length"):
        pack_codes(np.zeros((2, 3), np.uint8), "low-first")
    with pytest.raises(InvalidValueError, match="wider than 4 bits"):
        pack_codes(np.full((1, 2), 0x10, np.uint8), "low-first")
    with pytest.raises(InvalidValueError, match="packed order"):
        unpack_codes(np.zeros((1, 1), np.uint8), "middle-first")


# -- recipes ------------------------------------------------------------------------------------


def test_recipe_declares_packing_and_fp4_formats_and_refuses_what_does_not_fit():
    r = declared_recipe("my-mxfp4", {"base": "mx-e8m0-rceil", "format": "e2m1fn", "packed": "high-first"})
    assert (r.format.name, r.packed, r.scale_dtype) == ("e2m1fn", "high-first", "e8m0")
    assert "e2m1fn packed high-first" in r.summary() and r.to_dict()["packed"] == "high-first"
    with pytest.raises(InvalidValueError, match="codes are 8 bits"):
        quantizers.get("tensorwise").replace(packed="low-first")
    with pytest.raises(InvalidValueError, match="fp8, fp6 or fp4 element format"):
        quantizers.get("tensorwise", "e8m0fnu")
    with pytest.raises(InvalidValueError, match="two-level"):
        quantizers.get("nvfp4-ct").replace(format="e4m3fn", packed=None)
    with pytest.raises(InvalidValueError, match="packed"):
        declared_recipe("bad", {"base": "nvfp4-ct", "packed": "sideways"})


def test_a_packed_recipe_refuses_unpacked_codes_in_one_line():
    def unpacked(x):
        codes, scales = fp4_mutants.mxfp4(x)
        return unpack_codes(codes.numpy(), "low-first"), scales

    with pytest.raises(KernelError, match="packs two codes per byte"):
        check_quantizer(unpacked, MXFP4, **FAST)


def test_an_unpacked_recipe_refuses_bytes_that_are_no_code():
    def packed(x):
        return fp4_mutants.mxfp4(x)

    with pytest.raises(KernelError, match="not a e2m1fn code.*packed = "):
        check_quantizer(lambda x: (torch.full(x.shape, 0x21, dtype=torch.uint8), packed(x)[1]),
                        MXFP4.replace(packed=None), **FAST)


# -- planted bugs and their fixed twins -----------------------------------------------------------


@pytest.mark.parametrize("recipe", [MXFP4, quantizers.get("nvfp4-ct"), quantizers.get("nvfp4-torchao"),
                                    quantizers.get("mx-e8m0-floor", "e3m2fn")], ids=lambda r: r.name)
def test_the_reference_as_a_kernel_conforms(recipe):
    assert check_quantizer(reference_kernel(recipe), recipe, **FAST).passed


def test_mxfp4_fixed_twin_conforms():
    result = check_quantizer(fp4_mutants.mxfp4, MXFP4, **THOROUGH)
    assert result.passed, result.divergences[:2]


def test_mxfp4_e8m0_one_step_low_is_a_scale_divergence_with_its_block():
    result = check_quantizer(fp4_mutants.mxfp4_scale_one_step_low, MXFP4, **FAST)
    assert not result.passed and result.categories["scale"] > 0
    assert result.categories["codes"] == 0  # the codes are judged under the scale the recipe gives
    d = next(d for d in result.divergences if d.category == "scale")
    assert float(d.actual_value) == float(d.expected_value) / 2  # one e8m0 step low
    assert "scale of block rows" in d.detail and "amax" in d.detail


def test_mxfp4_rounding_ties_away_is_a_codes_divergence_that_names_the_tie():
    result = check_quantizer(fp4_mutants.mxfp4_ties_away, MXFP4, **FAST)
    assert not result.passed and result.categories["codes"] > 0 and result.categories["scale"] == 0
    listed = [d for d in result.divergences if d.category == "codes"]
    # every listed one is a tie the kernel rounds away (the recipe rounds it to even), and says so
    assert all("it is a tie, halfway between" in d.detail and "the kernel rounds it away from zero" in d.detail
               for d in listed), [d.detail for d in listed[:3]]


def test_nvfp4_fixed_twin_conforms():
    result = check_quantizer(fp4_mutants.nvfp4, "nvfp4-ct", **THOROUGH)
    assert result.passed, result.divergences[:2]


def test_nvfp4_global_scale_applied_twice_is_a_codes_divergence_with_its_element():
    result = check_quantizer(fp4_mutants.nvfp4_global_twice, "nvfp4-ct", **FAST)
    assert not result.passed and result.categories["codes"] > 0 and result.categories["scale"] == 0
    d = next(d for d in result.divergences if d.category == "codes")
    assert d.expected_hex != d.actual_hex and d.input_hex != "-"
    assert "x[" in d.detail and "correctly rounded code" in d.detail


def test_packed_nibble_order_swap_is_named_as_such():
    result = check_quantizer(fp4_mutants.mxfp4_high_first, MXFP4, **FAST)
    assert not result.passed and result.categories["codes"] > 0 and result.categories["scale"] == 0
    d = next(d for d in result.divergences if d.category == "codes")
    assert "nibble order swapped: the kernel packs high-first" in d.detail
    # declared high-first, the same kernel conforms
    assert check_quantizer(fp4_mutants.mxfp4_high_first, MXFP4.replace(packed="high-first"), **FAST).passed


def test_a_two_level_kernel_returning_two_outputs_is_told_what_to_return():
    with pytest.raises(KernelError, match=r"\(codes, block scales, per-tensor scale\)"):
        check_quantizer(lambda x: fp4_mutants.nvfp4(x)[:2], "nvfp4-ct", **FAST)


def test_a_wrong_global_scale_is_a_scale_divergence_of_the_global():
    def kernel(x):
        codes, s, g = fp4_mutants.nvfp4(x)
        return codes, s, 1.0 / g  # the reciprocal stored

    result = check_quantizer(kernel, "nvfp4-ct", **FAST)
    assert any("per-tensor (global) scale" in d.detail for d in result.divergences if d.category == "scale")


# -- messages (issue 32, item 5) ------------------------------------------------------------------


def test_a_reciprocal_storing_recipe_names_the_targets_of_a_wrong_maximum():
    """fbgemm-rowwise on e4m3fnuz stores 1 / (240 / amax); a kernel using e4m3fn's 448 is told '240' vs '448'
    (the implied target was computed in the applied scale's convention: amax * amax / 448, meaningless)."""

    def kernel(x):
        a = x.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-12)
        scale = 448.0 / a
        return (x.float() * scale).clamp(-240, 240).to(torch.float8_e4m3fnuz), 1.0 / scale

    result = check_quantizer(kernel, "fbgemm-rowwise", fmt="e4m3fnuz", max_examples=5, thorough=False)
    d = next(d for d in result.divergences if d.category == "scale")
    assert "the recipe maps amax to 240, the kernel to 448 (e4m3fn's max)" in d.detail, d.detail


@pytest.mark.parametrize("fmt, actual", [("e5m2fnuz", 0x80), ("e5m2", 0x7F), ("e5m2", 0x7C), ("e4m3fn", 0x7F)])
def test_an_input_that_rounds_to_max_made_nan_or_inf_is_overflow(fmt, actual):
    """57344 -> NaN was 'other' and 57344 -> Inf (e5m2) 'rounding': the kernel's overflow bound is wrong."""
    from fp8check.casts.engine import classify
    from fp8check.reference import encode

    f = formats.get(fmt)
    x = np.array([f.max, -f.max if actual != 0x80 else f.max], np.float32)
    expected = encode(x, fmt, "satfinite")
    got = np.array([actual, actual | (f.sign_mask if actual != 0x80 else 0)])
    assert list(classify(x.view(np.uint32), expected, got, "float32", fmt, "satfinite")) == ["overflow", "overflow"]
    one = np.array([1.0], np.float32)  # a value far from max made NaN or Inf stays 'other'
    assert list(classify(one.view(np.uint32), encode(one, fmt, "satfinite"), np.array([actual]), "float32", fmt,
                         "satfinite")) == ["other"]


def test_packed_codes_as_torch_float4_e2m1fn_x2_are_read_as_declared():
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")

    def kernel(x):
        codes, scales = fp4_mutants.mxfp4(x)
        return codes.view(torch.float4_e2m1fn_x2), scales

    assert check_quantizer(kernel, MXFP4, **FAST).passed
    with pytest.raises(KernelError, match="float4_e2m1fn_x2 codes; recipe .* one per byte"):
        check_quantizer(kernel, MXFP4.replace(packed=None), **FAST)

"""The recipe data and the reference quantizer (fp8check.quantizers)."""

import math

import ml_dtypes
import numpy as np
import pytest

import fp8check
from fp8check import formats, quantizers
from fp8check.errors import FP8CheckError, InvalidValueError
from fp8check.quantizers import scaling

torch = pytest.importorskip("torch")


def test_every_named_recipe_is_valid_for_every_fp8_format_it_can_target():
    assert len(quantizers.names()) >= 20
    for name in quantizers.names():
        r = quantizers.get(name)
        assert r.summary()
        if name.startswith("nvfp4"):  # NVFP4 recipes are e2m1fn and packed, nothing else
            assert r.name == name and r.format is formats.E2M1FN and r.packed == "low-first"
            continue
        assert r.name == name and r.format is formats.E4M3FN
        for fmt in formats.FP8_FORMATS:
            assert quantizers.get(name, fmt).format is fmt


def test_target_follows_the_format_unless_given():
    assert quantizers.get("tensorwise").amax_target == 448.0
    assert quantizers.get("tensorwise", "e4m3fnuz").amax_target == 240.0
    assert quantizers.get("tensorwise", "e5m2fnuz").amax_target == 57344.0
    assert quantizers.get("tensorwise", "e4m3fnuz").replace(target=224.0).amax_target == 224.0


@pytest.mark.parametrize("bad", [
    dict(convention="multiply"),
    dict(rule="mx-round"),
    dict(scale_dtype="e8m0"),  # e8m0 holds powers of two only
    dict(eps=0.0),
    dict(target=float("inf")),
    dict(format="e8m0fnu"),
])
def test_bad_recipes_are_refused_with_a_message(bad):
    with pytest.raises(FP8CheckError) as info:
        quantizers.get("tensorwise").replace(**bad)
    assert str(info.value)


def test_unknown_recipe_names_the_known_ones():
    with pytest.raises(quantizers.UnknownRecipeError, match="block-128x128"):
        quantizers.get("blockwise-128")


def test_recipes_are_frozen_and_hashable():
    r = quantizers.get("rowwise")
    with pytest.raises(Exception):
        r.eps = 1.0  # type: ignore[misc]
    assert {r: 1}[quantizers.get("rowwise")] == 1


# -- the reference against real implementations -----------------------------------


def test_reference_equals_torchao_float8_scaling_on_random_data():
    tao = pytest.importorskip("torchao.float8.float8_utils")
    from torchao.float8.config import ScalingGranularity

    rng = np.random.default_rng(1)
    x = torch.from_numpy((rng.standard_normal((64, 256)) * 3).astype(np.float32))
    for dtype, fmt in ((torch.float8_e4m3fn, "e4m3fn"), (torch.float8_e4m3fnuz, "e4m3fnuz"), (torch.float8_e5m2, "e5m2")):
        s = tao.tensor_to_scale(x, dtype, scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=-1)
        q = tao.to_fp8_saturated(x * s, dtype)
        ref = quantizers.quantize(x, quantizers.get("torchao-rowwise", fmt))
        assert np.array_equal(s.numpy(), ref.scales)
        assert np.array_equal(q.view(torch.uint8).numpy(), ref.codes)


def test_reference_equals_torchao_to_mx_on_ordinary_blocks():
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    rng = np.random.default_rng(2)
    x = torch.from_numpy((rng.standard_normal((32, 128)) * 10).astype(np.float32))
    for mode, name in (("FLOOR", "mx-e8m0-floor"), ("CEIL", "mx-e8m0-ceil"), ("RCEIL", "mx-e8m0-rceil")):
        scale, data = mx.to_mx(x, torch.float8_e4m3fn, 32, ScaleCalculationMode[mode])
        ref = quantizers.quantize(x, quantizers.get(name))
        assert np.array_equal(quantizers.e8m0_codes(ref.scales), scale.view(torch.uint8).numpy()), mode
        assert np.array_equal(data.view(torch.uint8).numpy(), ref.codes), mode


# -- exact scale rules --------------------------------------------------------------


def test_power_of_two_rounding_uses_the_exact_exponent_not_a_float32_log2():
    # float32 log2(16 * (1 - 2**-24)) rounds to 4.0: a log2-based floor gives 16, the exact rule 8.
    q = np.float32(16.0) * np.float32(1 - 2.0 ** -24)
    assert float(torch.log2(torch.tensor(q))) == 4.0  # the trap is real
    r = quantizers.get("torchao-tensorwise-pow2")
    amax = np.float32(448.0) / q  # 448/amax rounds back to q
    s = quantizers.scales_from_amax(np.array(amax, np.float32), r)
    assert float(s) == 8.0


def test_mx_floor_and_ceil_and_the_e8m0_clamp():
    floor, ceil = quantizers.get("mx-e8m0-floor"), quantizers.get("mx-e8m0-ceil")
    amax = np.array([448.0, 449.0, 256.0, 2.0 ** -119, 2.0 ** -130, 0.0, np.inf, np.nan], np.float32)
    f = quantizers.scales_from_amax(amax, floor)
    c = quantizers.scales_from_amax(amax, ceil)
    assert f[:3].tolist() == [1.0, 1.0, 1.0] and c[:3].tolist() == [2.0, 2.0, 1.0]
    assert f[3] == 2.0 ** -127 and f[4] == 2.0 ** -127 and f[5] == 2.0 ** -127  # clamped at the bottom
    assert np.isnan(f[6]) and np.isnan(f[7])  # OCP reference: non-finite block -> NaN scale
    assert quantizers.e8m0_codes(f).tolist() == [127, 127, 127, 0, 0, 0, 255, 255]


def test_eps_clamp_and_its_precision():
    r64 = quantizers.get("torchao-tensorwise")  # float64: 448 / 1e-12
    r32 = r64.replace(scale_precision="float32")  # float32: 448 / float32(1e-12)
    s64 = float(quantizers.scales_from_amax(np.array(0.0, np.float32), r64))
    s32 = float(quantizers.scales_from_amax(np.array(0.0, np.float32), r32))
    assert s64 == float(np.float32(448.0 / 1e-12))
    assert s32 == float(np.float32(448.0) / np.float32(1e-12))
    no_eps = r64.replace(eps=None)
    assert math.isinf(float(quantizers.scales_from_amax(np.array(0.0, np.float32), no_eps)))


def test_scale_stored_in_float16_overflows_and_bfloat16_rounds():
    r = quantizers.get("tensorwise").replace(convention="scale", scale_dtype="float16")
    s = quantizers.scales_from_amax(np.array([1e-3, 1.0], np.float32), r)
    assert math.isinf(s[0]) and s[1] == 448.0  # 448 / 1e-3 = 448000 > 65504
    b = quantizers.scales_from_amax(np.array([3.0], np.float32), quantizers.get("rowwise-bf16-scale"))
    exact = np.float32(3.0) / np.float32(448.0)
    assert b[0] == float(np.array(exact).astype(ml_dtypes.bfloat16)) and b[0] != exact


def test_deepseek_weight_scale_inv_is_multiplied_at_dequant():
    # A 128x128 block with amax 896: scale_inv = 896/448 = 2, so the code of 896 is 448 and
    # dequantizing multiplies: 448 * 2 = 896 (dividing would give 224).
    r = quantizers.get("block-128x128")
    x = np.zeros((200, 300), np.float32)  # ragged: 2 x 3 blocks, the last ones partial
    x[0, 0] = 896.0
    x[150, 290] = -3.0
    q = quantizers.quantize(x, r)
    assert q.scales.shape == (2, 3)
    assert q.scales[0, 0] == 2.0 and q.scales[1, 2] == np.float32(3.0) / np.float32(448.0)
    assert fp8check.decode(q.codes[0, 0], "e4m3fn") == 448.0
    d = quantizers.dequantize(q.codes, q.scales, r)
    assert d[0, 0] == 896.0 and d[150, 290] == -448.0 * np.float64(q.scales[1, 2])  # exact product


def test_groups_split_the_columns_and_empty_groups_get_the_zero_amax_scale():
    r = quantizers.get("group-rowwise")
    x = np.arange(1, 25, dtype=np.float32).reshape(3, 8)
    offsets = np.array([0, 3, 3, 8])
    q = quantizers.quantize(x, r, offsets=offsets)
    assert q.scales.shape == (4, 3)
    eps_scale = np.float32(1e-12) / np.float32(448)
    assert np.all(q.scales[0] == eps_scale) and np.all(q.scales[2] == eps_scale)  # empty groups
    assert q.scales[1, 0] == np.float32(3) / np.float32(448) and q.scales[3, 2] == np.float32(24) / np.float32(448)
    with pytest.raises(InvalidValueError, match="last equal to 8"):
        quantizers.quantize(x, r, offsets=[3, 5])


def test_nonfinite_declared_behaviour():
    x = np.array([[np.inf, 1.0, -2.0, 0.5]], np.float32)
    nan = formats.E4M3FN.is_nan
    ieee = quantizers.quantize(x, quantizers.get("torchao-tensorwise"))  # scale = 448/inf = 0
    assert float(ieee.scales) == 0.0
    assert nan(int(ieee.codes[0, 0]))  # inf * 0
    assert ieee.codes[0, 1:].tolist() == [0x00, 0x80, 0x00]  # every finite value zeroed
    x[0, 3] = np.nan
    assert np.isnan(float(quantizers.quantize(x, quantizers.get("torchao-tensorwise")).scales))
    finite = quantizers.quantize(x, quantizers.get("tensorwise"))  # amax over the finite values: 2
    assert float(finite.scales) == np.float32(2.0) / np.float32(448.0)
    assert finite.codes[0, :3].tolist() == [0x7E, 0x76, 0xFE]  # Inf saturates to 448; 1 -> 224; -2 -> -448
    assert nan(int(finite.codes[0, 3]))


# -- fn -> fnuz conversion ----------------------------------------------------------


@pytest.mark.parametrize("src", ["e4m3fn", "e5m2"])
def test_fn_to_fnuz_conversion_keeps_every_value(src):
    codes = np.arange(256, dtype=np.uint8)
    scales = np.array([0.75], np.float32)
    conv = quantizers.convert_fn_to_fnuz(codes, scales, source=src)
    fnuz = scaling.FNUZ_COUNTERPART[formats.get(src)]
    before = fp8check.decode(codes, src) * np.float64(scales[0])
    after = fp8check.decode(conv.codes, fnuz) * np.float64(conv.scales[0])
    finite = np.isfinite(before)
    assert np.array_equal(before[finite], after[finite])  # -0 becomes +0, equal as values
    assert np.all(np.isnan(after[~finite]))  # NaN (and e5m2 Inf) become the fnuz NaN
    assert conv.negative_zeros == 1 and conv.codes[0x80] == 0x00
    assert conv.nan_codes == (2 if src == "e4m3fn" else 6) and conv.inf_codes == (0 if src == "e4m3fn" else 2)


def test_the_known_converter_turns_fn_nan_into_240():
    """The widely copied converter: bytes viewed as int8, -128 set to 0, scale x 2."""
    weight = torch.tensor([0x7F, 0xFF, 0x80, 0x38], dtype=torch.uint8).view(torch.float8_e4m3fn)
    as_int8 = weight.view(torch.int8).clone()
    as_int8[as_int8 == -128] = 0
    converted = as_int8.view(torch.float8_e4m3fnuz)
    values = converted.float().tolist()
    assert values[:2] == [240.0, -240.0]  # fn NaN became finite: the hazard
    ours = quantizers.convert_fn_to_fnuz(weight, np.float32(1.0))
    assert all(formats.E4M3FNUZ.is_nan(int(c)) for c in ours.codes[:2])


def test_scale_doubling_overflow_is_reported():
    conv = quantizers.convert_fn_to_fnuz(np.array([0x38], np.uint8), np.array([3.0e38], np.float32))
    assert conv.scale_overflows == 1


def test_summary_puts_the_scale_precision_next_to_the_formula_it_qualifies():
    # The precision used to follow the zero-scale clause ("a zero scale stored as 1 (float32, ...)").
    assert quantizers.get("transformers-fp8-weight").summary() == (
        "block 128x128, scale_inv = amax/448 (float32, stored float32), a zero scale stored as 1, "
        "e4m3fn satfinite, non-finite ieee")

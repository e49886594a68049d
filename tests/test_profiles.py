"""Profiles as data: validation, per-format overrides, lookup by name."""

import dataclasses

import pytest

from fp8check import formats, profiles
from fp8check.errors import FP8CheckError, InvalidValueError, UnknownProfileError, UnsupportedFormatError
from fp8check.profiles import Profile


@pytest.mark.parametrize("field, value", [
    ("rounding", "rnd"), ("overflow", "saturate"), ("infinity", "max"), ("nan", "signalling"),
    ("nan_without_code", "nan"), ("subnormals", "daz"), ("intermediate", "float8"),
    ("unsigned_negative", "abs"), ("unsigned_zero", "zero"),
])
def test_a_bad_rule_is_rejected_naming_field_value_and_choices(field, value):
    with pytest.raises(InvalidValueError) as info:
        Profile(name="mine", **{field: value})
    message = str(info.value)
    assert "'mine'" in message and field in message and repr(value) in message
    assert isinstance(info.value, FP8CheckError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("bits", [0, 25, -1])
def test_stochastic_rounding_needs_between_1_and_24_bits(bits):
    with pytest.raises(InvalidValueError, match=f"got {bits}"):
        Profile(name="sr", rounding="stochastic", stochastic_bits=bits)
    assert Profile(name="sr", rounding="stochastic", stochastic_bits=12).stochastic_bits == 12


def test_overrides_are_validated_when_the_profile_is_built():
    with pytest.raises(InvalidValueError, match="cannot override 'name'"):
        Profile(name="p", overrides=(("e5m2", (("name", "x"),)),))
    with pytest.raises(InvalidValueError, match="nan='bogus'"):
        profiles.IEEE.with_overrides("e5m2", nan="bogus")
    with pytest.raises(FP8CheckError, match="unknown format 'e9m9'"):
        Profile(name="p", overrides=(("e9m9", (("nan", "quiet"),)),))


def test_resolve_folds_the_overrides_of_that_format_only():
    torch212 = profiles.TORCH_2_12
    e4m3fn = torch212.resolve("e4m3fn")
    assert (e4m3fn.overflow, e4m3fn.infinity, e4m3fn.nan) == ("satfinite", "satfinite", "quiet")
    e5m2 = torch212.resolve(formats.E5M2)
    assert (e5m2.overflow, e5m2.infinity, e5m2.nan) == ("nonsat", "nonsat", "all_ones")
    fnuz = torch212.resolve("float8_e4m3fnuz")
    assert fnuz is torch212  # no override for e4m3fnuz: the profile as is
    assert profiles.TORCH_2_11.resolve("e4m3fn").overflow == "nonsat"
    assert profiles.IEEE.resolve("e4m3fn") is profiles.IEEE


def test_with_overrides_replaces_an_earlier_override_of_the_same_format():
    p = profiles.IEEE.with_overrides("e5m2", nan="all_ones").with_overrides("e5m2", overflow="satfinite")
    assert p.resolve("e5m2").nan == "quiet" and p.resolve("e5m2").overflow == "satfinite"
    assert len(p.overrides) == 1


def test_a_profile_that_does_not_define_a_format_says_which_it_defines():
    with pytest.raises(UnsupportedFormatError) as info:
        profiles.TRITON_SM90.resolve("e4m3fnuz")
    assert "'triton-sm90'" in str(info.value) and "e4m3fnuz" in str(info.value)
    assert "e4m3fn, e5m2" in str(info.value)
    assert not profiles.TORCH_2_12.supports("e2m1fn") and profiles.IEEE.supports("e2m1fn")


def test_formats_given_as_a_set_become_a_frozenset():
    p = Profile(name="p", formats={"e4m3fn"})
    assert p.formats == frozenset({"e4m3fn"}) and hash(p)


def test_names_and_get():
    assert profiles.names() == ("ieee", "satfinite", "rtz", "ml_dtypes-0.6", "ml_dtypes-0.7", "torch-2.11",
                                "torch-2.12", "triton-sm90", "triton-interpreter", "triton-sm90-rtz",
                                "triton-gfx942", "triton-gfx950", "triton-amd-rtz", "ocp-mx")
    for name in profiles.names():
        assert profiles.get(name).name == name
    assert profiles.get("ML-DTYPES-0.7") is profiles.ML_DTYPES_0_7
    assert profiles.get(" TORCH-2.12 ") is profiles.TORCH_2_12
    assert profiles.get("default") is profiles.IEEE
    p = dataclasses.replace(profiles.IEEE, name="mine")
    assert profiles.get(p) is p


@pytest.mark.parametrize("bad", ["torch", "ieee754", "", None, 3])
def test_unknown_profile_is_a_clear_typed_error(bad):
    with pytest.raises(UnknownProfileError) as info:
        profiles.get(bad)
    message = str(info.value)
    assert repr(bad) in message and all(n in message for n in profiles.names())
    assert isinstance(info.value, LookupError)


def test_the_unversioned_ml_dtypes_name_says_which_versions_exist():
    with pytest.raises(UnknownProfileError, match="ml_dtypes-0.6 .* or ml_dtypes-0.7"):
        profiles.get("ml_dtypes")


def test_summary_states_the_rules():
    assert profiles.IEEE.summary() == "RNE, non-saturating, ±Inf → Inf/NaN, NaN quiet"
    assert profiles.TORCH_2_12.summary(formats.E4M3FN) == "RNE, satfinite, ±Inf → ±max, NaN quiet, via float32"
    assert profiles.TORCH_2_12.summary(formats.E5M2) == "RNE, non-saturating, ±Inf → ±Inf, NaN all_ones, via float32"
    assert profiles.IEEE.summary(formats.E4M3FNUZ) == "RNE, non-saturating, ±Inf → NaN, NaN 0x80"
    assert profiles.ML_DTYPES_0_6.summary(formats.E2M1FN) == "RNE, non-saturating, ±Inf → ±max, NaN → ∓0, via float32"
    assert profiles.ML_DTYPES_0_7.summary(formats.E2M1FN) == "RNE, non-saturating, ±Inf → ±max, NaN → ∓0"
    assert profiles.OCP_MX.summary(formats.E2M3FN) == "RNE, satfinite, ±Inf → ±max, NaN → ±max"
    assert profiles.RTZ.summary(formats.E5M2) == "RTZ, finite overflow → ±max, ±Inf → ±Inf, NaN quiet"
    sr = Profile(name="sr", rounding="stochastic", stochastic_bits=8, subnormals="flush")
    assert sr.summary() == "STOCHASTIC/8b, non-saturating, ±Inf → Inf/NaN, NaN quiet, flush subnormals"


def test_profiles_are_frozen_data():
    with pytest.raises(dataclasses.FrozenInstanceError):
        profiles.IEEE.rounding = "rtz"  # type: ignore[misc]
    assert dataclasses.replace(profiles.IEEE, name="x", rounding="rtz").rounding == "rtz"

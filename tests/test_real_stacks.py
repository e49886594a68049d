"""The reference against the real stacks installed here: ml_dtypes and torch.

- ``ieee`` equals ml_dtypes on every 16-bit input and a float32 sample for
  the four fp8 formats (NaN by class): ml_dtypes is exact RNE from those.
- Each real-stack profile is pinned to its stack bit for bit, NaN codes
  included, from float16, bfloat16, float32 and float64 (whose double
  rounding through float32 the profiles model).
- Decoding every code agrees with both stacks.

Known upstream bugs are strict xfails naming the upstream issue, so the
suite notices a fix.
"""

import dataclasses

import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles

from core_oracles import (all_16bit, e8m0_subnormal_round_up, first_differences, ml_dtypes_codes, ml_dtypes_decode,
                          random_float32,
                          random_float64, same_code, same_value, torch_codes, torch_decode)

SOURCES = ["float16", "bfloat16", "float32", "float64"]
TORCH_FORMATS = [f for f in formats.ALL_FORMATS if f.torch_name]


def inputs(source, fmt):
    if source in ("float16", "bfloat16"):
        return all_16bit(source)
    if source == "float32":
        return random_float32(1 << 20, 17, fmt)
    return random_float64(1 << 18, 19, fmt)


E8M0_BUG = ("ml_dtypes 0.6 and torch round float32 subnormals in (2**-127, 1.5 * 2**-127) up to "
            "e8m0fnu 0x01 (2**-126) instead of 0x00 (2**-127, the nearer): the RNE guard bit is "
            "taken as if the subnormal were normal; no upstream issue found in the ml_dtypes or "
            "pytorch trackers (pytorch/pytorch#146414 defines the cast as RNE)")


def compare_codes(x, ours, theirs, fmt, *, by_class: bool, skip=None):
    same = same_code(ours, theirs, fmt) if by_class else ours == theirs
    if skip is not None:
        same |= skip
    assert same.all(), f"{int((~same).sum())} differ: " + "; ".join(first_differences(x, ours, theirs, ~same))


# -- ieee against ml_dtypes -----------------------------------------------

@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("fmt", formats.FP8_FORMATS, ids=str)
def test_ieee_equals_ml_dtypes(source, fmt):
    x = inputs(source, fmt)
    compare_codes(x, fp8check.encode(x, fmt, "ieee"), ml_dtypes_codes(x, fmt), fmt, by_class=True)


# -- the ml_dtypes profile pinned to ml_dtypes -----------------------------

@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_ml_dtypes_profile_is_ml_dtypes_bit_for_bit(source, fmt):
    x = inputs(source, fmt)
    skip = e8m0_subnormal_round_up(x) if fmt is formats.E8M0FNU else None
    compare_codes(x, fp8check.encode(x, fmt, "ml_dtypes"), ml_dtypes_codes(x, fmt), fmt, by_class=False,
                  skip=skip)


@pytest.mark.xfail(strict=True, reason=E8M0_BUG)
@pytest.mark.parametrize("source", ["bfloat16", "float32", "float64"])
def test_ml_dtypes_rounds_e8m0fnu_from_subnormals_to_nearest(source):
    x = inputs(source, formats.E8M0FNU)
    if source == "float32":  # every subnormal, not a sample
        x = np.arange(0, 1 << 23, dtype=np.uint32).view(np.float32)
    x = x[e8m0_subnormal_round_up(x)]
    assert x.size
    compare_codes(x, fp8check.encode(x, "e8m0fnu", "ieee"), ml_dtypes_codes(x, formats.E8M0FNU),
                  formats.E8M0FNU, by_class=False)


@pytest.mark.xfail(strict=True, reason="ml_dtypes casts float64 to its float types through float32 "
                   "(double rounding); fix proposed in jax-ml/ml_dtypes#401 (open)")
@pytest.mark.parametrize("fmt", formats.FP8_FORMATS, ids=str)
def test_ml_dtypes_rounds_float64_once(fmt):
    x = inputs("float64", fmt)
    compare_codes(x, fp8check.encode(x, fmt, "ieee"), ml_dtypes_codes(x, fmt), fmt, by_class=True)


def test_ieee_and_ml_dtypes_differ_on_float64_exactly_by_the_double_rounding():
    # Where they differ, ml_dtypes' code is what rounding float32(x) gives.
    for fmt in formats.FP8_FORMATS:
        x = inputs("float64", fmt)
        ieee = fp8check.encode(x, fmt, "ieee")
        ml = ml_dtypes_codes(x, fmt)
        via32 = fp8check.encode(x.astype(np.float32), fmt, "ieee")
        differ = ~same_code(ieee, ml, fmt)
        assert differ.sum() > 100  # the sample sits on the traps
        assert same_code(ml, via32, fmt).all()


# -- the torch profile pinned to the installed torch -----------------------

def torch_profile():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)  # one thread per pytest-xdist worker
    return profiles.for_torch(torch.__version__)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=str)
def test_torch_profile_is_the_installed_torch_bit_for_bit(source, fmt):
    # torch-2.12 where torch >= 2.12 (CI: 2.13), torch-2.11 below (the
    # GPU machine: 2.11). NaN codes are pinned separately below.
    profile = torch_profile()
    x = inputs(source, fmt)
    ours, theirs = fp8check.encode(x, fmt, profile), torch_codes(x, fmt)
    skip = e8m0_subnormal_round_up(x) if fmt is formats.E8M0FNU else None
    compare_codes(x, ours, theirs, fmt, by_class=True, skip=skip)


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=str)
def test_torch_nan_codes_are_the_profile_s(fmt):
    profile = torch_profile()
    x = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF],
                 dtype=np.uint32).view(np.float32)
    compare_codes(x, fp8check.encode(x, fmt, profile), torch_codes(x, fmt), fmt, by_class=False)


@pytest.mark.xfail(strict=True, reason=E8M0_BUG)
@pytest.mark.parametrize("source", ["bfloat16", "float32", "float64"])
def test_torch_rounds_e8m0fnu_from_subnormals_to_nearest(source):
    profile = torch_profile()
    x = inputs(source, formats.E8M0FNU)
    x = x[e8m0_subnormal_round_up(x)]
    compare_codes(x, fp8check.encode(x, "e8m0fnu", profile), torch_codes(x, formats.E8M0FNU),
                  formats.E8M0FNU, by_class=False)


@pytest.mark.xfail(strict=True, reason="torch casts float64 to float8 through float32 (double "
                   "rounding: the c10 Float8 types convert from float); no upstream pytorch issue found")
@pytest.mark.parametrize("fmt", formats.FP8_FORMATS, ids=str)
def test_torch_rounds_float64_once(fmt):
    profile = torch_profile()
    x = inputs("float64", fmt)
    exact = fp8check.encode(x, fmt, dataclasses.replace(profile.resolve(fmt), intermediate=None))
    compare_codes(x, exact, torch_codes(x, fmt), fmt, by_class=True)


def test_the_e4m3fn_saturation_that_separates_torch_2_11_from_2_12():
    # 464 is the overflow tie, which ties-to-even sends down to 448 (0x7E,
    # even mantissa); just above it, at -1000 and at Inf 2.12 saturates and
    # 2.11 gives NaN.
    x = np.array([464, 464.00003, -1000, np.inf, -np.inf], np.float32)
    assert fp8check.encode(x, "e4m3fn", "torch-2.12").tolist() == [0x7E, 0x7E, 0xFE, 0x7E, 0xFE]
    assert fp8check.encode(x, "e4m3fn", "torch-2.11").tolist() == [0x7E, 0x7F, 0xFF, 0x7F, 0xFF]
    profile = torch_profile()
    assert torch_codes(x, formats.E4M3FN).tolist() == fp8check.encode(x, "e4m3fn", profile).tolist()


# -- decode ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_decode_of_every_code_equals_ml_dtypes(fmt):
    ours, theirs = fp8check.decode(np.arange(fmt.code_count), fmt), ml_dtypes_decode(fmt)
    assert same_value(ours, theirs).all(), [hex(c) for c in np.flatnonzero(~same_value(ours, theirs))]


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=str)
def test_decode_of_every_code_equals_torch(fmt):
    pytest.importorskip("torch")
    ours, theirs = fp8check.decode(np.arange(fmt.code_count), fmt), torch_decode(fmt)
    assert same_value(ours, theirs).all(), [hex(c) for c in np.flatnonzero(~same_value(ours, theirs))]


@pytest.mark.parametrize("fmt, code", [("e4m3fnuz", 0x80), ("e5m2fnuz", 0x80), ("e8m0fnu", 0xFF)])
def test_torch_decodes_these_nans_to_a_signalling_float32_nan(fmt, code):
    torch = pytest.importorskip("torch")
    f = formats.get(fmt)
    value = torch.tensor([code], dtype=torch.uint8).view(getattr(torch, f.torch_name)).float()
    assert value.view(torch.int32).item() == 0x7F800001

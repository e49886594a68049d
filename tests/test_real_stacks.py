"""The reference against the real stacks installed here: ml_dtypes and torch.

What each stack does is versioned data in the stack registry
(:mod:`fp8check.stacks`): these tests pin the installed release to the
observation covering it, and skip, naming what is unpinned, where none does.

- ``ieee`` equals ml_dtypes on every 16-bit input and a float32 sample for
  the four fp8 formats (NaN by class): ml_dtypes is exact RNE from those.
- Each stack's profile is pinned to the stack bit for bit, NaN codes
  included, from float16, bfloat16, float32 and float64.
- Decoding every code agrees with both stacks.

Known upstream bugs of the installed release are strict xfails naming the
upstream issue, so the suite notices a fix; a bug the registry says a
release fixed is tested as fixed.
"""

import dataclasses

import numpy as np
import pytest

import fp8check
from fp8check import formats

from core_oracles import (all_16bit, e8m0_subnormal_round_up, first_differences, installed_observation, known_mask,
                          ml_dtypes_codes, ml_dtypes_decode, pinned, random_float32, random_float64, same_code,
                          same_value, torch_codes, torch_decode)

SOURCES = ["float16", "bfloat16", "float32", "float64"]
TORCH_FORMATS = [f for f in formats.ALL_FORMATS if f.torch_name]


def inputs(source, fmt):
    if source in ("float16", "bfloat16"):
        return all_16bit(source)
    if source == "float32":
        return random_float32(1 << 20, 17, fmt)
    return random_float64(1 << 18, 19, fmt)


def compare_codes(x, ours, theirs, fmt, *, by_class: bool, skip=None):
    same = same_code(ours, theirs, fmt) if by_class else ours == theirs
    if skip is not None:
        same |= skip
    assert same.all(), f"{int((~same).sum())} differ: " + "; ".join(first_differences(x, ours, theirs, ~same))


def known_bug(stack: str, kind: str, fmt_name: str, source: str, device: str = "cpu"):
    """Strict xfail marks for a known upstream bug of the installed ``stack`` (none where it is fixed or unpinned)."""
    obs = installed_observation(stack, device=device)
    if obs is None:
        return []
    fmt = formats.get(fmt_name)
    reasons = [k.reason for k in obs.known if k.applies(fmt, source, kind)]
    return [pytest.mark.xfail(strict=True, reason="; ".join(reasons))] if reasons else []


def by_format(stack, kind, source, fmts):
    return [pytest.param(f, marks=known_bug(stack, kind, f.name, source), id=f.name) for f in fmts]


# -- ieee against ml_dtypes -----------------------------------------------

@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("fmt", formats.FP8_FORMATS, ids=str)
def test_ieee_equals_ml_dtypes(source, fmt):
    pinned("ml_dtypes")
    x = inputs(source, fmt)
    compare_codes(x, fp8check.encode(x, fmt, "ieee"), ml_dtypes_codes(x, fmt), fmt, by_class=True)


# -- the ml_dtypes profile pinned to ml_dtypes -----------------------------

@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_ml_dtypes_profile_is_ml_dtypes_bit_for_bit(source, fmt):
    obs = pinned("ml_dtypes")
    x = inputs(source, fmt)
    compare_codes(x, fp8check.encode(x, fmt, obs.profile), ml_dtypes_codes(x, fmt), fmt, by_class=False,
                  skip=known_mask(obs, x, fmt))


@pytest.mark.parametrize("fmt", by_format("ml_dtypes", "cast", "bfloat16", [formats.E8M0FNU]))
@pytest.mark.parametrize("source", ["bfloat16", "float32", "float64"])
def test_ml_dtypes_rounds_e8m0fnu_from_subnormals_to_nearest(source, fmt):
    pinned("ml_dtypes")
    x = inputs(source, fmt)
    if source == "float32":  # every subnormal, not a sample
        x = np.arange(0, 1 << 23, dtype=np.uint32).view(np.float32)
    x = x[e8m0_subnormal_round_up(x)]
    assert x.size
    compare_codes(x, fp8check.encode(x, fmt, "ieee"), ml_dtypes_codes(x, fmt), fmt, by_class=False)


@pytest.mark.parametrize("fmt", by_format("ml_dtypes", "exact", "float64", formats.FP8_FORMATS))
def test_ml_dtypes_rounds_float64_once(fmt):
    pinned("ml_dtypes")
    x = inputs("float64", fmt)
    compare_codes(x, fp8check.encode(x, fmt, "ieee"), ml_dtypes_codes(x, fmt), fmt, by_class=True)


def test_where_ml_dtypes_double_rounds_float64_its_codes_are_those_of_float32_x():
    # The registry's model of the bug: ml_dtypes' code for x is the code of
    # float32(x). Where the installed release rounds once, ml_dtypes is ieee.
    obs = pinned("ml_dtypes")
    for fmt in formats.FP8_FORMATS:
        x = inputs("float64", fmt)
        ml = ml_dtypes_codes(x, fmt)
        if obs.profile.resolve(fmt).intermediate == "float32":
            ieee = fp8check.encode(x, fmt, "ieee")
            assert (~same_code(ieee, ml, fmt)).sum() > 100  # the sample sits on the traps
            assert same_code(ml, fp8check.encode(x.astype(np.float32), fmt, "ieee"), fmt).all()
        else:
            assert same_code(ml, fp8check.encode(x, fmt, "ieee"), fmt).all()


# -- the torch profile pinned to the installed torch -----------------------

def torch_observation():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)  # one thread per pytest-xdist worker
    return pinned("torch")


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=str)
def test_torch_profile_is_the_installed_torch_bit_for_bit(source, fmt):
    # NaN codes are pinned separately below.
    obs = torch_observation()
    x = inputs(source, fmt)
    ours, theirs = fp8check.encode(x, fmt, obs.profile), torch_codes(x, fmt)
    compare_codes(x, ours, theirs, fmt, by_class=True, skip=known_mask(obs, x, fmt))


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=str)
def test_torch_nan_codes_are_the_profile_s(fmt):
    obs = torch_observation()
    x = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF],
                 dtype=np.uint32).view(np.float32)
    compare_codes(x, fp8check.encode(x, fmt, obs.profile), torch_codes(x, fmt), fmt, by_class=False)


@pytest.mark.parametrize("fmt", by_format("torch", "cast", "bfloat16", [formats.E8M0FNU]))
@pytest.mark.parametrize("source", ["bfloat16", "float32", "float64"])
def test_torch_rounds_e8m0fnu_from_subnormals_to_nearest(source, fmt):
    obs = torch_observation()
    x = inputs(source, fmt)
    x = x[e8m0_subnormal_round_up(x)]
    compare_codes(x, fp8check.encode(x, fmt, obs.profile), torch_codes(x, fmt), fmt, by_class=False)


@pytest.mark.parametrize("fmt", by_format("torch", "exact", "float64", formats.FP8_FORMATS))
def test_torch_rounds_float64_once(fmt):
    obs = torch_observation()
    x = inputs("float64", fmt)
    exact = fp8check.encode(x, fmt, dataclasses.replace(obs.profile.resolve(fmt), intermediate=None))
    compare_codes(x, exact, torch_codes(x, fmt), fmt, by_class=True)


def test_the_e4m3fn_saturation_that_separates_torch_2_11_from_2_12():
    # 464 is the overflow tie, which ties-to-even sends down to 448 (0x7E,
    # even mantissa); just above it, at -1000 and at Inf 2.12 saturates and
    # 2.11 gives NaN.
    x = np.array([464, 464.00003, -1000, np.inf, -np.inf], np.float32)
    assert fp8check.encode(x, "e4m3fn", "torch-2.12").tolist() == [0x7E, 0x7E, 0xFE, 0x7E, 0xFE]
    assert fp8check.encode(x, "e4m3fn", "torch-2.11").tolist() == [0x7E, 0x7F, 0xFF, 0x7F, 0xFF]
    obs = torch_observation()
    assert torch_codes(x, formats.E4M3FN).tolist() == fp8check.encode(x, "e4m3fn", obs.profile).tolist()


# -- decode ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_decode_of_every_code_equals_ml_dtypes(fmt):
    pinned("ml_dtypes")
    ours, theirs = fp8check.decode(np.arange(fmt.code_count), fmt), ml_dtypes_decode(fmt)
    assert same_value(ours, theirs).all(), [hex(c) for c in np.flatnonzero(~same_value(ours, theirs))]


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=str)
def test_decode_of_every_code_equals_torch(fmt):
    torch_observation()
    ours, theirs = fp8check.decode(np.arange(fmt.code_count), fmt), torch_decode(fmt)
    assert same_value(ours, theirs).all(), [hex(c) for c in np.flatnonzero(~same_value(ours, theirs))]


@pytest.mark.parametrize("fmt, code", [("e4m3fnuz", 0x80), ("e5m2fnuz", 0x80), ("e8m0fnu", 0xFF)])
def test_torch_decodes_these_nans_to_a_signalling_float32_nan(fmt, code):
    torch_observation()
    import torch

    f = formats.get(fmt)
    value = torch.tensor([code], dtype=torch.uint8).view(getattr(torch, f.torch_name)).float()
    assert value.view(torch.int32).item() == 0x7F800001

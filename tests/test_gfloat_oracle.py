"""gfloat 0.5.2 as the independent oracle where ml_dtypes' semantics differ:
satfinite, rtz, rna, stochastic (our rule is gfloat's StochasticFastest),
ocp-mx and triton-sm90, for every format gfloat can describe (the fnuz
formats are built from their definition: gfloat 0.5.2 has none).

gfloat rounds, so it decides rounding and finite overflow; what ±Inf, NaN,
zero and negatives into e8m0fnu become is applied from the profile (see
``core_oracles.gfloat_values``). Two disagreements are expected, both in
e8m0fnu, and each is asserted to be exactly the set of inputs it explains.
"""

import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles
from fp8check.profiles import Profile

from core_oracles import all_16bit, e8m0_expected_differences, first_differences, gfloat_format, \
    gfloat_values, random_float32, random_float64, same_value

pytest.importorskip("gfloat")

RNA = Profile(name="rna", rounding="rna")
RNA_SAT = Profile(name="rna-satfinite", rounding="rna", overflow="satfinite", infinity="satfinite")
RTZ_FLUSH = Profile(name="rtz-flush", rounding="rtz", subnormals="flush")
PROFILES = [profiles.IEEE, profiles.SATFINITE, profiles.RTZ, profiles.OCP_MX, profiles.TRITON_SM90,
            profiles.TORCH_2_11, profiles.TORCH_2_12, profiles.ML_DTYPES_0_6, profiles.ML_DTYPES_0_7,
            profiles.TRITON_INTERPRETER, RNA, RNA_SAT, RTZ_FLUSH]
PAIRS = [pytest.param(f, p, id=f"{f.name}-{p.name}") for p in PROFILES for f in formats.ALL_FORMATS
         if p.supports(f)]


def compare(x, fmt, profile, random=None):
    ours = fp8check.decode(fp8check.encode(x, fmt, profile, random_bits=random), fmt)
    theirs = gfloat_values(x, fmt, profile, random)
    same = same_value(ours, theirs)
    if fmt is formats.E8M0FNU:
        same |= e8m0_expected_differences(x, ours, theirs, profile)
    assert same.all(), f"{int((~same).sum())} differ: " + "; ".join(first_differences(x, ours, theirs, ~same))


@pytest.mark.parametrize("source", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_every_16bit_input_equals_gfloat(source, fmt, profile):
    compare(all_16bit(source), fmt, profile)


@pytest.mark.slow
@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_float32_sample_equals_gfloat(fmt, profile):
    compare(random_float32(1 << 17, 23, fmt), fmt, profile)


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_ieee_float64_near_ties_equals_gfloat(fmt):
    # gfloat rounds a float64 exactly: the oracle for fp8check's single rounding.
    compare(random_float64(1 << 16, 29, fmt), fmt, profiles.IEEE)


STOCHASTIC_BITS = (1, 4, 8, 13)


@pytest.mark.slow
@pytest.mark.parametrize("bits", STOCHASTIC_BITS)
@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_stochastic_rounding_is_gfloats_stochastic_fastest(fmt, bits):
    # On 16-bit and float32 inputs gfloat's float64 arithmetic is exact.
    profile = Profile(name=f"sr{bits}", rounding="stochastic", stochastic_bits=bits)
    rng = np.random.default_rng(bits)
    for x in (all_16bit("float16"), all_16bit("bfloat16"), random_float32(1 << 16, bits, fmt)):
        compare(x, fmt, profile, rng.integers(0, 1 << bits, x.size))


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_every_code_decodes_as_gfloat_decodes_it(fmt):
    from gfloat import decode_float

    fi = gfloat_format(fmt)
    theirs = np.array([decode_float(fi, c).fval for c in range(fmt.code_count)], dtype=np.float64)
    assert same_value(fp8check.decode(np.arange(fmt.code_count), fmt), theirs).all()


def test_gfloat_fnuz_formats_built_here_have_the_fnuz_facts():
    for fmt in (formats.E4M3FNUZ, formats.E5M2FNUZ):
        fi = gfloat_format(fmt)
        assert (fi.max, fi.num_nans, fi.code_of_nan, fi.has_nz) == (fmt.max, 1, 0x80, False)


def test_the_e8m0_differences_are_real():
    # Without the two exemptions the e8m0fnu comparison would fail: both
    # causes occur among the 16-bit inputs.
    x = all_16bit("bfloat16")
    ours = fp8check.decode(fp8check.encode(x, "e8m0fnu"), "e8m0fnu")
    theirs = gfloat_values(x, formats.E8M0FNU, profiles.IEEE)
    differ = ~same_value(ours, theirs)
    assert differ.sum() > 100
    assert (differ == e8m0_expected_differences(x, ours, theirs, profiles.IEEE)).all()

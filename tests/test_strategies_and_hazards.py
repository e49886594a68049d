"""The strategies (Hypothesis API style) and the exact hazard sets they draw from."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis.errors import InvalidArgument

import fp8check
from fp8check import formats, hazards, inputs, profiles
from fp8check import strategies as fst

FAST = settings(max_examples=50, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def bits_of(value, dtype="float32"):
    b = inputs.exact_bits(value, dtype)
    assert b is not None, value
    return b


# -- hazard sets: exact, and they contain what their names promise ----------

def test_overflow_set_holds_max_the_tie_and_just_past_it():
    b = set(int(x) for x in hazards.hazard_bits("e4m3fn", "float32", "overflow"))
    for v in (448.0, 464.0, -464.0, 480.0):
        assert bits_of(v) in b, v
    assert bits_of(464.0) + 1 in b and bits_of(464.0) - 1 in b  # just past and just below the tie
    assert 0x7F7FFFFF in b  # float32's own largest finite value


def test_rounding_ties_are_exact_midpoints():
    # At an exact midpoint round-to-nearest-even and round-ties-away disagree
    # exactly when the lower neighbour is odd; rtz and rna disagree always.
    rna = profiles.Profile(name="rna", rounding="rna")
    for fmt in formats.FP8_FORMATS:
        mids = []
        values = hazards.positive_values(fmt)
        for lo, hi in zip(values, values[1:]):
            b = inputs.exact_bits((lo + hi) / 2, "float32")
            mids.append(b)
        table = set(int(x) for x in hazards.hazard_bits(fmt, "float32", "rounding_ties"))
        assert set(mids) <= table
        x = inputs.from_bits(np.array(mids, dtype=np.uint32), "float32")
        assert (fp8check.encode(x, fmt, "rtz") != fp8check.encode(x, fmt, rna)).all()


def test_signed_zero_set_has_both_zeros_and_the_tie_to_zero():
    b = set(int(x) for x in hazards.hazard_bits("e4m3fnuz", "float32", "signed_zero"))
    half = Fraction(formats.E4M3FNUZ.smallest_subnormal) / 2
    assert {0x00000000, 0x80000000, 0x80000001, bits_of(-float(half))} <= b
    # The tie rounds to zero, one ulp above it rounds away from zero.
    x = inputs.from_bits(np.array([bits_of(-float(half)), bits_of(-float(half)) + 1], dtype=np.uint32), "float32")
    assert list(fp8check.encode(x, "e4m3fnuz")) == [0x00, 0x81]


def test_input_subnormal_set_reaches_e5m2_subnormals_from_float16():
    b = hazards.hazard_bits("e5m2", "float16", "input_subnormal")
    values = inputs.from_bits(b, "float16").astype(np.float64)
    assert 2.0**-16 in values  # e5m2's smallest subnormal is a float16 subnormal
    assert (np.abs(values[values != 0]) < 2.0**-14).any()


def test_a_set_the_dtype_cannot_reach_is_empty():
    assert hazards.hazard_bits("e8m0fnu", "float16", "subnormal").size == 0
    with pytest.raises(ValueError, match="unknown hazard"):
        hazards.hazard_bits("e4m3fn", "float32", "nope")


def test_mantissa_carry_set_straddles_powers_of_two():
    b = hazards.hazard_bits("e4m3fn", "float32", "mantissa_carry")
    v = inputs.from_bits(b, "float32").astype(np.float64)
    assert 1.9375 in v and 0x3FFFFFFF in set(int(x) for x in b)  # midpoint below 2, largest float32 below 2


# -- strategies: validation ---------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: fst.codes("e4m3fn", allow_infinity=True),
    lambda: fst.codes("e2m1fn", allow_nan=True),
    lambda: fst.codes("e8m0fnu", allow_negative=True),
    lambda: fst.codes("e8m0fnu", allow_subnormal=True),
    lambda: fst.codes("e9m9"),
    lambda: fst.codes("e4m3fn", allow_nan="yes"),
    lambda: fst.cast_input_bits("e4m3fn", hazards=["nan"], allow_nan=False),
    lambda: fst.cast_input_bits("e4m3fn", hazards=["infinity"], allow_infinity=False),
    lambda: fst.cast_input_bits("e4m3fn", hazards=[]),
    lambda: fst.cast_input_bits("e4m3fn", hazards=["rounding"]),
    lambda: fst.cast_input_bits("e4m3fn", hazards="nan"),
    lambda: fst.cast_input_bits("e4m3fn", dtype="int8"),
    lambda: fst.cast_input_bits("e8m0fnu", dtype="float16", hazards=["subnormal"]),
    lambda: fst.cast_input_arrays("e4m3fn", min_size=5, max_size=2),
    lambda: fst.cast_input_arrays("e4m3fn", max_size=-1),
])
def test_impossible_combinations_raise_invalid_argument(call):
    with pytest.raises(InvalidArgument):
        call()


# -- strategies: what they generate -------------------------------------------

@FAST
@given(fst.codes("e4m3fnuz", allow_nan=False, allow_negative=False))
def test_codes_respect_their_options(code):
    assert code != 0x80 and code < 0x80


@FAST
@given(fst.codes("e5m2", allow_infinity=False, allow_subnormal=False))
def test_codes_leave_out_infinities_and_subnormals(code):
    fmt = formats.E5M2
    assert not fmt.is_inf(code)
    assert not (0 < code & fmt.magnitude_mask < 4)


@FAST
@given(fst.cast_inputs("e4m3fn", dtype="bfloat16", allow_nan=False, allow_infinity=False))
def test_cast_inputs_are_scalars_of_the_dtype_and_respect_flags(x):
    assert x.dtype.name == "bfloat16"
    assert math.isfinite(float(x))


@FAST
@given(fst.cast_input_arrays("e5m2fnuz", dtype="float16", min_size=3, max_size=7))
def test_cast_input_arrays_have_the_dtype_and_size(x):
    assert x.dtype == np.float16 and 3 <= x.size <= 7


@pytest.mark.slow  # many Hypothesis draws
def test_every_hazard_is_reachable_by_the_default_strategy():
    # find() searches the default strategy: each named hazard value comes up.
    s = fst.cast_input_bits("e4m3fnuz")
    targets = {
        "overflow tie": bits_of(248.0),
        "negative NaN": None,
        "-0.0": 0x80000000,
        "float32 smallest subnormal": 0x00000001,
        "midpoint 1.0625": bits_of(1.0625),
    }
    for name, want in targets.items():
        if want is None:
            found = find(s, lambda b: (b & 0x7FFFFFFF) > 0x7F800000 and b >> 31 == 1,
                         settings=settings(database=None, max_examples=5000))
            assert found >> 31 == 1, name
        else:
            assert find(s, lambda b, w=want: b == w, settings=settings(database=None, max_examples=20000)) == want, name


def test_nan_hazards_have_both_signs_and_several_payloads():
    b = hazards.hazard_bits("e4m3fn", "float32", "nan")
    assert inputs.is_nan_bits(b, "float32").all()
    assert {int(x) >> 31 for x in b} == {0, 1}
    assert len({int(x) & 0x7FFFFF for x in b}) >= 8

"""Hypothesis properties of the reference itself, under every named profile
and variants: monotonic, sign-symmetric where the format is, idempotent on
decoded codes, rtz never increases a magnitude, satfinite never makes NaN
of a finite input, and fnuz never produces 0x80 from a non-NaN input."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fp8check
from fp8check import formats, profiles
from fp8check.profiles import Profile

SR = Profile(name="sr6", rounding="stochastic", stochastic_bits=6)
PROFILES = list(profiles.PROFILES.values()) + [
    Profile(name="rna", rounding="rna"),
    Profile(name="flush", subnormals="flush"),
    Profile(name="via-float16", intermediate="float16"),
    Profile(name="rtz-flush", rounding="rtz", subnormals="flush", overflow="satfinite"),
    SR,
]
DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
          "float64": np.float64}
WIDTH = {"float16": 16, "bfloat16": 32, "float32": 32, "float64": 64}

settings.register_profile("core", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
CORE = settings.get_profile("core")


@st.composite
def cases(draw, *, profile_list=PROFILES, format_list=formats.ALL_FORMATS):
    fmt = draw(st.sampled_from(format_list))
    profile = draw(st.sampled_from([p for p in profile_list if p.supports(fmt)]))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    return fmt, profile, dtype


def values(dtype: str, **kwargs):
    """Floats of ``dtype`` (bfloat16 drawn as float32 and rounded)."""
    drawn = st.floats(width=WIDTH[dtype], **kwargs).map(lambda v: np.asarray(v, DTYPES[dtype]))
    if kwargs.get("allow_infinity") is False:
        # Rounding a float32 near its max to bfloat16 can overflow to Inf.
        drawn = drawn.filter(lambda x: bool(np.isfinite(float(x))))
    return drawn


def encode_one(x, fmt, profile, r=0):
    random = np.array([r]) if profile.rounding == "stochastic" else None
    return int(fp8check.encode(np.reshape(x, 1), fmt, profile, random_bits=random)[0])


def value_of(code, fmt):
    return float(fp8check.decode([code], fmt)[0])


@CORE
@given(data=st.data(), case=cases())
def test_monotonic(data, case):
    fmt, profile, dtype = case
    # e8m0fnu keeps no sign: draw non-negative inputs for it.
    lo = 0.0 if not fmt.signed else None
    x = data.draw(values(dtype, allow_nan=False, min_value=lo))
    y = data.draw(values(dtype, allow_nan=False, min_value=lo))
    x, y = sorted((x, y), key=float)
    r = data.draw(st.integers(0, (1 << profile.stochastic_bits) - 1)) if profile is SR else 0
    vx, vy = value_of(encode_one(x, fmt, profile, r), fmt), value_of(encode_one(y, fmt, profile, r), fmt)
    assume(not (np.isnan(vx) or np.isnan(vy)))  # overflow to NaN has no order
    assert vx <= vy, (float(x), float(y), vx, vy)


@CORE
@given(data=st.data(), case=cases(format_list=[f for f in formats.ALL_FORMATS if f.signed]))
def test_sign_symmetric(data, case):
    fmt, profile, dtype = case
    x = data.draw(values(dtype))
    r = data.draw(st.integers(0, (1 << profile.stochastic_bits) - 1)) if profile is SR else 0
    positive, negative = encode_one(abs(x), fmt, profile, r), encode_one(-abs(x), fmt, profile, r)
    if fmt.is_nan(positive) and profile.resolve(fmt).nan.endswith("_positive"):
        # This profile's NaN has no sign (compiled Triton: +0x7F for every NaN).
        assert negative == positive
    elif fmt.has_negative_zero or (not fmt.is_nan(positive) and positive != 0):
        # Negation flips the sign bit (fp4/fp6 NaN under ml_dtypes: -0 <-> +0).
        assert negative == positive ^ fmt.sign_mask
    else:
        # fnuz: zero has no sign and the one NaN none either.
        assert negative == positive


@CORE
@given(case=cases(profile_list=[p for p in PROFILES if p.subnormals == "keep"]))
def test_idempotent_on_every_decoded_code(case):
    fmt, profile, dtype = case
    codes = np.array([c for c in range(fmt.code_count) if not fmt.is_nan(c)])
    if profile.resolve(fmt).infinity != "nonsat":
        codes = codes[[not fmt.is_inf(int(c)) for c in codes]]
    x = fp8check.decode(codes, fmt)
    # The codes whose values the input type (and the profile's intermediate
    # type, if any) hold exactly.
    with np.errstate(over="ignore"):
        representable = np.isinf(x) | (x.astype(DTYPES[dtype]).astype(np.float64) == x)
        inter = profile.resolve(fmt).intermediate
        if inter is not None:
            representable &= np.isinf(x) | (x.astype(DTYPES[inter]).astype(np.float64) == x)
    x, codes = x[representable], codes[representable]
    random = np.zeros(x.size, int) if profile.rounding == "stochastic" else None
    got = fp8check.encode(x.astype(DTYPES[dtype]), fmt, profile, random_bits=random)
    assert np.array_equal(got, codes), [(hex(c), hex(g)) for c, g in zip(codes, got) if c != g][:5]


RTZ = [p for p in PROFILES if p.rounding == "rtz"]


@CORE
@given(data=st.data(), case=cases(profile_list=RTZ))
def test_rtz_never_increases_a_magnitude(data, case):
    fmt, profile, dtype = case
    x = data.draw(values(dtype, allow_nan=False, allow_infinity=False))
    if not fmt.signed:
        # e8m0fnu holds nothing below 2**-127 and no zero or negatives.
        assume(float(x) >= fmt.smallest_normal)
    v = value_of(encode_one(x, fmt, profile), fmt)
    assert not np.isnan(v), float(x)
    assert abs(v) <= abs(float(x))


SATURATING = [p for p in PROFILES if p.overflow == "satfinite"]


@CORE
@given(data=st.data(), case=cases(profile_list=SATURATING))
def test_satfinite_never_makes_nan_of_a_finite_input(data, case):
    fmt, profile, dtype = case
    p = profile.resolve(fmt)
    x = data.draw(values(dtype, allow_nan=False, allow_infinity=False))
    if not fmt.signed and (p.unsigned_zero == "nan" or p.unsigned_negative == "nan"):
        assume(float(x) > 0)  # this profile makes NaN of zero or negatives into e8m0fnu
    assert not fmt.is_nan(encode_one(x, fmt, profile))


@CORE
@given(data=st.data(), case=cases(format_list=[formats.E4M3FNUZ, formats.E5M2FNUZ]))
def test_fnuz_never_produces_0x80_from_a_non_nan_input(data, case):
    fmt, profile, dtype = case
    x = data.draw(values(dtype, allow_nan=False))
    r = data.draw(st.integers(0, (1 << profile.stochastic_bits) - 1)) if profile is SR else 0
    code = encode_one(x, fmt, profile, r)
    p = profile.resolve(fmt)
    if code == 0x80:
        # 0x80 is the fnuz NaN: only a non-saturating overflow may give it.
        if np.isinf(float(x)):
            assert p.infinity != "satfinite"
        else:
            assert abs(float(x)) > fmt.max and p.overflow == "nonsat" and p.rounding != "rtz"


def test_fnuz_zeros_and_tiny_negatives_become_0x00_under_every_profile():
    tiny = np.array([-0.0, -1e-30, -2.0**-149, -1e-6], np.float32)
    for fmt in (formats.E4M3FNUZ, formats.E5M2FNUZ):
        for profile in [p for p in PROFILES if p.supports(fmt)]:
            random = np.zeros(tiny.size, int) if profile.rounding == "stochastic" else None
            assert fp8check.encode(tiny, fmt, profile, random_bits=random).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("profile", RTZ, ids=lambda p: p.name)
def test_rtz_overflow_gives_max_not_inf(profile):
    # IEEE 754 7.4: round toward zero never overflows to Inf.
    x = np.array([1e6, -1e6, np.inf], np.float32)
    assert fp8check.encode(x, "e5m2", profile).tolist()[:2] == [0x7B, 0xFB]
    if profile.supports("e4m3fn"):
        assert fp8check.encode(x, "e4m3fn", profile).tolist()[:2] == [0x7E, 0xFE]

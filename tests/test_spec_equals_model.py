"""The scalar spec and the vectorised model agree bit for bit.

Exhaustively on every float16 and bfloat16 input for every format and
profile (the named ones and variants that exercise every rule the named
ones leave unused), and on samples of float32 and float64 inputs, the
curated edge cases, and stochastic rounding with random bits.
"""

import dataclasses
import zlib

import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles
from fp8check.profiles import Profile
from fp8check.reference import model_encode, spec
from fp8check.reference.edges import EDGE_SOURCES, edge_cases

from core_oracles import all_16bit, bits_of, first_differences, random_float32, random_float64

# Variants that use the rules no named profile uses (rna, flush, 16-bit
# intermediates, positive NaN, Inf to NaN, fp4/fp6 NaN to max, ...).
VARIANTS = (
    Profile(name="rna", rounding="rna"),
    Profile(name="flush", subnormals="flush"),
    Profile(name="via-float16", intermediate="float16"),
    Profile(name="via-bfloat16-sat", intermediate="bfloat16", overflow="satfinite"),
    Profile(name="nan-positive-inf-nan", nan="quiet_positive", infinity="nan", nan_without_code="max"),
    Profile(name="rtz-sat-all-ones", rounding="rtz", overflow="satfinite", infinity="satfinite",
            nan="all_ones", unsigned_negative="magnitude", unsigned_zero="min"),
    Profile(name="rtz-flush-via-float32", rounding="rtz", subnormals="flush", intermediate="float32",
            nan_without_code="flipped_zero"),
)
NAMED = tuple(profiles.PROFILES.values())


def _pairs(profile_list, slow=False):
    marks = [pytest.mark.slow] if slow else []
    return [pytest.param(f, p, id=f"{f.name}-{p.name}", marks=marks)
            for p in profile_list for f in formats.ALL_FORMATS if p.supports(f)]


def spec_codes(x: np.ndarray, fmt, profile, random=None) -> np.ndarray:
    source = fp8check.reference.source_name(x)
    bits = bits_of(x).tolist()
    rnd = [0] * len(bits) if random is None else np.asarray(random).tolist()
    return np.array([spec.encode_bits(b, source, fmt, profile, random=r) for b, r in zip(bits, rnd)],
                    dtype=np.uint8)


def assert_same(x, expected, actual, what):
    bad = expected != actual
    assert not bad.any(), f"{what}: {int(bad.sum())} differ, e.g. " + "; ".join(
        first_differences(x, actual, expected, bad))


def check(x, fmt, profile, random=None):
    expected = spec_codes(x, fmt, profile, random)
    assert_same(x, expected, model_encode(x, fmt, profile, random_bits=random), "model")
    assert_same(x, expected, fp8check.encode(x, fmt, profile, random_bits=random), "encode")


@pytest.mark.slow  # the scalar spec runs once per input: CI's slow lane runs it (`pytest -m slow`)
@pytest.mark.exhaustive
@pytest.mark.parametrize("source", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt, profile", _pairs(NAMED))
def test_every_16bit_input_named_profiles(source, fmt, profile):
    check(all_16bit(source), fmt, profile)


@pytest.mark.parametrize("source", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt, profile", _pairs(NAMED))
def test_16bit_sample_named_profiles(source, fmt, profile):
    # The default run's share of the exhaustive comparison above: every
    # exponent and sign (the top 8 bits), each with 1/64 of the low bits
    # (the slow lane compares every input).
    x = all_16bit(source)
    rng = np.random.default_rng(zlib.crc32(f"{source}/{fmt.name}/{profile.name}".encode()))
    low = rng.permutation(256)[:4]
    pick = (np.arange(256)[:, None] * 256 + low[None, :]).reshape(-1)
    check(x[pick], fmt, profile)


@pytest.mark.parametrize("source", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt, profile", _pairs(VARIANTS, slow=True))  # the default lane: named profiles
def test_16bit_sample_variant_profiles(source, fmt, profile):
    # A quarter of the inputs: the variants add rules, not input classes.
    rng = np.random.default_rng(7)
    check(all_16bit(source)[rng.permutation(1 << 16)[:1 << 14]], fmt, profile)


@pytest.mark.slow  # the default lane: the 16-bit samples and the curated edge cases
@pytest.mark.parametrize("fmt, profile", _pairs(NAMED + VARIANTS))
def test_float32_sample(fmt, profile):
    n = 5000 if profile in NAMED else 2000
    check(random_float32(n, seed=zlib.crc32(f"{fmt.name}/{profile.name}".encode()), fmt=fmt), fmt, profile)


@pytest.mark.slow
@pytest.mark.parametrize("fmt, profile", _pairs(NAMED + VARIANTS))
def test_float64_sample_near_ties(fmt, profile):
    check(random_float64(2000, seed=zlib.crc32(f"{profile.name}/{fmt.name}/64".encode()), fmt=fmt), fmt, profile)


@pytest.mark.parametrize("source", EDGE_SOURCES)
@pytest.mark.parametrize("fmt, profile", _pairs(NAMED + VARIANTS))
def test_curated_edge_cases(source, fmt, profile):
    dtype = {"float32": np.uint32, "float64": np.uint64}[source]
    bits = np.array([c.bits for c in edge_cases(fmt, source)], dtype=dtype)
    check(bits.view(source), fmt, profile)


STOCHASTIC = [Profile(name=f"sr{n}", rounding="stochastic", stochastic_bits=n) for n in (1, 3, 8, 24)]
STOCHASTIC.append(Profile(name="sr8-satfinite", rounding="stochastic", stochastic_bits=8,
                          overflow="satfinite", subnormals="flush"))


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("fmt, profile", _pairs(STOCHASTIC[2:3]))
def test_stochastic_rounding_every_float16_input_with_random_bits(fmt, profile):
    rng = np.random.default_rng(profile.stochastic_bits)
    x = all_16bit("float16")
    random = rng.integers(0, 1 << profile.stochastic_bits, x.size)
    # The extreme draws decide exact ties and the smallest fractions.
    random[:: 7] = 0
    random[1:: 7] = (1 << profile.stochastic_bits) - 1
    check(x, fmt, profile, random)


@pytest.mark.parametrize("fmt, profile", _pairs(STOCHASTIC[:1]) + _pairs(STOCHASTIC[1:], slow=True))
def test_stochastic_rounding_samples_with_random_bits(fmt, profile):
    rng = np.random.default_rng(11)
    sixteen = all_16bit("float16")[rng.permutation(1 << 16)[:6000]]
    for x in (sixteen, random_float32(4000, 3, fmt), random_float64(3000, 4, fmt)):
        check(x, fmt, profile, rng.integers(0, 1 << profile.stochastic_bits, x.size))


def test_the_variants_differ_from_every_named_profile():
    # Otherwise they would test nothing new.
    for v in VARIANTS:
        assert all(dataclasses.replace(v, name=p.name, description="") != dataclasses.replace(
            p, description="") for p in NAMED)


def test_float64_is_encoded_exactly_not_through_float32():
    # The example: 1.0625 plus about 2**-30 lies just above the tie
    # between 0x38 (1.0) and 0x39 (1.125); rounding to float32 first lands
    # on the tie, which ties-to-even sends down to 0x38.
    x = np.array([0x3FF1000000440000], dtype=np.uint64).view(np.float64)
    assert spec_codes(x, formats.E4M3FN, profiles.IEEE)[0] == 0x39
    assert fp8check.encode(x, "e4m3fn")[0] == 0x39
    assert fp8check.encode(x, "e4m3fn", "ml_dtypes-0.6")[0] == 0x38
    assert fp8check.encode(x, "e4m3fn", "ml_dtypes-0.7")[0] == 0x39

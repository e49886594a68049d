"""The encode/decode API: the model on torch tensors equals the model on
NumPy arrays, the table fast paths equal the model, decode equals the spec,
and bad input is a typed error."""

import ml_dtypes
import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles
from fp8check.errors import FP8CheckError, InvalidValueError, UnsupportedDtypeError, UnsupportedFormatError
from fp8check.profiles import Profile
from fp8check.reference import decode_table, encode_table, model_encode, spec

from core_oracles import all_16bit, bits_of, first_differences, random_float32, random_float64, torch_tensor

torch = pytest.importorskip("torch")
# Small tensors: one intra-op thread per pytest-xdist worker is fastest, and
# spinning OpenMP threads of two workers on two cores slow each other 5x.
torch.set_num_threads(1)

PROFILES = list(profiles.PROFILES.values()) + [
    Profile(name="rna-flush", rounding="rna", subnormals="flush"),
    Profile(name="via-bfloat16", intermediate="bfloat16"),
]
PAIRS = [pytest.param(f, p, id=f"{f.name}-{p.name}") for p in PROFILES for f in formats.ALL_FORMATS
         if p.supports(f)]
SR = Profile(name="sr8", rounding="stochastic", stochastic_bits=8)


def inputs(source: str, fmt) -> np.ndarray:
    if source in ("float16", "bfloat16"):
        return all_16bit(source)
    if source == "float32":
        return random_float32(1 << 16, 5, fmt)
    return random_float64(1 << 14, 6, fmt)


def assert_codes_equal(x, expected, actual):
    expected, actual = np.asarray(expected), np.asarray(actual)
    bad = expected != actual
    assert not bad.any(), "; ".join(first_differences(x, actual, expected, bad))


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32", pytest.param("float64", marks=pytest.mark.slow)])
@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_model_on_torch_cpu_tensors_equals_model_on_numpy(source, fmt, profile):
    x = inputs(source, fmt)
    on_numpy = model_encode(x, fmt, profile)
    on_torch = model_encode(torch_tensor(x), fmt, profile)
    assert on_torch.dtype == torch.uint8
    assert_codes_equal(x, on_numpy, on_torch.numpy())


@pytest.mark.parametrize("source", ["float16", "float32", "float64"])
@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_stochastic_model_on_torch_equals_numpy(source, fmt):
    x = inputs(source, fmt)
    r = np.random.default_rng(3).integers(0, 256, x.size)
    on_numpy = model_encode(x, fmt, SR, random_bits=r)
    on_torch = model_encode(torch_tensor(x), fmt, SR, random_bits=torch.from_numpy(r))
    assert_codes_equal(x, on_numpy, on_torch.numpy())
    assert_codes_equal(x, on_numpy, fp8check.encode_tensor(torch_tensor(x), fmt, SR, random_bits=r).numpy())


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_table_fast_paths_equal_the_direct_model(source, fmt, profile):
    x = inputs(source, fmt)
    if source == "float32":
        # Every float32 whose upper half is a tie of the format, with a zero
        # and a non-zero lower half: the sticky bit the table keeps.
        upper = np.arange(1 << 16, dtype=np.uint32) << 16
        x = np.concatenate([x, upper.view(np.float32), (upper | 1).view(np.float32),
                            (upper | 0x8000).view(np.float32)])
    direct = model_encode(x, fmt, profile)
    assert_codes_equal(x, direct, fp8check.encode(x, fmt, profile))
    assert_codes_equal(x, direct, fp8check.encode_tensor(torch_tensor(x), fmt, profile).numpy())
    assert_codes_equal(x, direct, fp8check.encode(torch_tensor(x), fmt, profile))


def test_encode_table_shapes_and_the_sticky_bit():
    t16 = encode_table("float16", "e4m3fn")
    t32 = encode_table("float32", "e4m3fn")
    assert t16.shape == (1 << 16,) and t32.shape == (1 << 17,) and t16.dtype == t32.dtype == np.uint8
    # float32 0x3F880000 (1.0625) is the tie between 0x38 and 0x39.
    assert t32[0x3F88 * 2] == 0x38 and t32[0x3F88 * 2 + 1] == 0x39
    assert fp8check.encode(np.array([0x3F880000, 0x3F880001], np.uint32).view(np.float32), "e4m3fn").tolist() \
        == [0x38, 0x39]


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_decode_table_equals_the_spec_on_every_code(fmt):
    ours = decode_table(fmt)
    expected = np.array([spec.decode_code(c, fmt) for c in range(fmt.code_count)])
    same = (ours.view(np.uint64) == expected.view(np.uint64)) | (np.isnan(ours) & np.isnan(expected))
    assert same.all(), [hex(c) for c in np.flatnonzero(~same)]
    assert not ours.flags.writeable


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_decode_accepts_codes_fp8_arrays_and_tensors(fmt):
    codes = np.arange(fmt.code_count, dtype=np.uint8)
    expected = decode_table(fmt)
    for given in (codes, codes.astype(np.int64), codes.tolist(), torch.from_numpy(codes),
                  codes.view(getattr(ml_dtypes, fmt.ml_dtypes_name))):
        got = fp8check.decode(given, fmt)
        assert got.dtype == np.float64
        assert (got.view(np.uint64) == expected.view(np.uint64)).all() or np.array_equal(got, expected, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(expected))
    if fmt.torch_name:
        tensor = torch.from_numpy(codes).view(getattr(torch, fmt.torch_name))
        assert np.array_equal(fp8check.decode(tensor, fmt), expected, equal_nan=True)


def test_decode_keeps_the_shape_and_rejects_bad_codes():
    assert fp8check.decode(np.zeros((2, 3), np.uint8), "e4m3fn").shape == (2, 3)
    with pytest.raises(InvalidValueError, match=r"\[0, 16\).*\[0, 16\]"):
        fp8check.decode([0, 16], "e2m1fn")
    with pytest.raises(InvalidValueError, match="-1"):
        fp8check.decode(np.array([-1]), "e4m3fn")
    with pytest.raises(UnsupportedDtypeError, match="float32"):
        fp8check.decode(np.zeros(3, np.float32), "e4m3fn")


def test_encode_keeps_the_shape_and_takes_python_floats_as_float64():
    x = np.linspace(-500, 500, 24, dtype=np.float32).reshape(2, 3, 4)
    assert fp8check.encode(x, "e4m3fn").shape == (2, 3, 4)
    assert fp8check.encode([1.0625 + 2**-30], "e4m3fn").tolist() == [0x39]  # exact from float64
    assert fp8check.encode(np.float32(1.0), "e4m3fn").shape == ()
    assert fp8check.encode(np.zeros(0, np.float16), "e5m2").shape == (0,)


@pytest.mark.parametrize("bad", [np.zeros(3, np.int32), np.zeros(3, np.complex64),
                                 np.zeros(3, np.uint8).view(ml_dtypes.float8_e4m3fn)])
def test_encode_rejects_unsupported_dtypes(bad):
    with pytest.raises(UnsupportedDtypeError, match="float16, bfloat16, float32, float64"):
        fp8check.encode(bad, "e4m3fn")


def test_encode_rejects_unsupported_torch_dtypes():
    with pytest.raises(UnsupportedDtypeError, match="int32"):
        fp8check.encode(torch.zeros(3, dtype=torch.int32), "e4m3fn")


def test_encode_rejects_a_format_the_profile_does_not_define():
    with pytest.raises(UnsupportedFormatError, match="triton-sm90"):
        fp8check.encode(np.zeros(3, np.float32), "e4m3fnuz", "triton-sm90")


def test_random_bits_are_checked():
    x = np.ones(4, np.float32)
    with pytest.raises(InvalidValueError, match="pass random_bits"):
        fp8check.encode(x, "e4m3fn", SR)
    with pytest.raises(InvalidValueError, match="only for stochastic"):
        fp8check.encode(x, "e4m3fn", "ieee", random_bits=np.zeros(4, int))
    with pytest.raises(InvalidValueError, match="shape"):
        fp8check.encode(x, "e4m3fn", SR, random_bits=np.zeros(3, int))
    with pytest.raises(InvalidValueError, match=r"\[0, 256\]"):
        fp8check.encode(x, "e4m3fn", SR, random_bits=np.array([0, 1, 2, 256]))
    with pytest.raises(InvalidValueError, match=r"\[-1, 0\]"):
        fp8check.encode_tensor(torch.ones(2), "e4m3fn", SR, random_bits=torch.tensor([0, -1]))


def test_errors_of_the_api_are_fp8check_errors():
    for call in (lambda: fp8check.encode(np.zeros(1, np.float32), "e9m9"),
                 lambda: fp8check.encode(np.zeros(1, np.float32), "e4m3fn", "nope"),
                 lambda: fp8check.decode([300], "e4m3fn")):
        with pytest.raises(FP8CheckError):
            call()


def test_encode_tensor_returns_a_uint8_tensor_on_the_input_device():
    x = torch.linspace(-3, 3, 10, dtype=torch.bfloat16)
    out = fp8check.encode_tensor(x, "e4m3fnuz")
    assert out.dtype == torch.uint8 and out.device == x.device and out.shape == x.shape
    assert out.tolist() == fp8check.encode(x, "e4m3fnuz").tolist()


def test_a_noncontiguous_tensor_and_array_encode_like_their_copies():
    x = torch.randn(64, 64).t()
    assert np.array_equal(fp8check.encode(x, "e5m2"), fp8check.encode(x.contiguous(), "e5m2"))
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)[:, ::3]
    assert np.array_equal(fp8check.encode(a, "e5m2"), fp8check.encode(a.copy(), "e5m2"))
    assert bits_of(a.copy()).shape == a.shape


@pytest.mark.parametrize("src, dst", [("e4m3fn", "e4m3fnuz"), ("e5m2", "e5m2fnuz")])
def test_fn_to_fnuz_conversion_table_keeps_every_byte_but_negative_zero_and_non_finite(src, dst):
    # A byte means half its fn value in fnuz, so at twice the scale every
    # byte stays, except -0 (fnuz has none) and NaN/Inf (fnuz's only NaN is 0x80).
    table = fp8check.reference.conversion_table(src, dst, 2.0)
    f = formats.get(src)
    expected = np.arange(256, dtype=np.uint8)
    expected[0x80] = 0x00
    for c in range(256):
        if f.is_nan(c) or f.is_inf(c):
            expected[c] = 0x80
    assert np.array_equal(table, expected), np.flatnonzero(table != expected)

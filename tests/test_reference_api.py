"""The encode/decode API: the model on torch tensors equals the model on
NumPy arrays, the table fast paths equal the model, decode equals the spec,
and bad input is a typed error."""

import contextlib
import os

import ml_dtypes
import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles
from fp8check.errors import FP8CheckError, InvalidValueError, UnsupportedDtypeError, UnsupportedFormatError
from fp8check.profiles import Profile
from fp8check.reference import decode_table, encode_table, fast, model_encode, spec

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


# The engines of the fast path (fast.engine): numba's compiled loops when installed, and NumPy.
ENGINES = ["numpy"] + (["numba"] if fast.compiled() is not None else [])


@contextlib.contextmanager
def engine_of(name: str):
    """Large lookups on ``name`` within the block (the engine is read on every call)."""
    before = os.environ.get("FP8CHECK_NUMBA")
    os.environ["FP8CHECK_NUMBA"] = "0" if name == "numpy" else "1"
    try:
        assert fast.engine().split()[0] == name
        yield
    finally:
        if before is None:
            del os.environ["FP8CHECK_NUMBA"]
        else:
            os.environ["FP8CHECK_NUMBA"] = before


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


def every_upper_half(source: str, lower_parts: int, seed: int = 0) -> np.ndarray:
    """float32 (float64) inputs: every upper 16 bits, each with a zero lower part, lower part 1, the
    lower part's top bit alone, and ``lower_parts - 3`` random non-zero lower parts (the sticky bit
    the table keeps: every tie of a format is among the upper halves)."""
    unsigned, shift = {"float32": (np.uint32, 16), "float64": (np.uint64, 48)}[source]
    upper = np.arange(1 << 16, dtype=unsigned) << unsigned(shift)
    rng = np.random.default_rng(seed)
    low = [np.full(upper.size, v, unsigned) for v in (0, 1, 1 << (shift - 1))]
    low += [rng.integers(1, 1 << shift, upper.size, dtype=np.uint64).astype(unsigned) for _ in range(lower_parts - 3)]
    return np.concatenate([upper | v for v in low]).view(source)


def assert_fast_paths_equal_the_model(x, fmt, profile):
    direct = model_encode(x, fmt, profile)
    engines = ENGINES if fp8check.reference._uses_table(fp8check.reference.source_name(x), fmt, profile) \
        else ENGINES[:1]  # the model itself, whatever the engine
    for engine in engines:
        with engine_of(engine):
            assert_codes_equal(x, direct, fp8check.encode(x, fmt, profile))
            assert_codes_equal(x, direct, fp8check.encode(torch_tensor(x), fmt, profile))
    assert_codes_equal(x, direct, fp8check.encode_tensor(torch_tensor(x), fmt, profile).numpy())


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_table_fast_paths_equal_the_direct_model(source, fmt, profile):
    x = inputs(source, fmt)
    if source in ("float32", "float64"):
        x = np.concatenate([x, every_upper_half(source, 3)])
    assert_fast_paths_equal_the_model(x, fmt, profile)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["float32", "float64"])
@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_table_fast_paths_equal_the_model_on_every_upper_half_with_many_lower_parts(source, fmt, profile):
    assert_fast_paths_equal_the_model(every_upper_half(source, 16, seed=len(PAIRS)), fmt, profile)


@pytest.mark.parametrize("engine", ENGINES)
def test_large_decodes_equal_the_table_on_every_engine(engine):
    # Large enough for the compiled loops and for two threads; uint8 and the other index types.
    codes = np.random.default_rng(5).integers(0, 256, 1 << 18, dtype=np.uint8)
    codes[:256] = np.arange(256)
    for fmt in (formats.E4M3FN, formats.E5M2FNUZ, formats.E2M1FN):
        c = (codes.astype(np.int64) % fmt.code_count).astype(np.uint8)
        expected = decode_table(fmt)[c.astype(np.intp)]
        with engine_of(engine):
            for given in (c, c.astype(np.uint16), c.astype(np.int64)):
                got = fp8check.decode(given, fmt)
                assert got.view(np.uint64).tobytes() == expected.view(np.uint64).tobytes()


# Starts: 0, unaligned, a tie of e4m3fn (1.0625, 0x3F88xxxx: the exact lower half rounds down, the rest
# up), +Inf then NaN (0x7F800000, 0x7F80xxxx), the sign bit, and a run ending at the last pattern.
@pytest.mark.parametrize("first", [0, 5, 0xFFFF, 0x3F87FFF0, 0x7F7FFFF0, 0x7FFF8001, 0xFFFF0000 - 0x30000])
def test_the_sweeps_run_by_run_comparison_finds_every_mismatch(first):
    # fast.sweep32_mismatches compares a run of consecutive patterns with one
    # code per upper half: against encode + compare, with mismatches planted
    # at every kind of position (a zero lower half, run ends, the block's
    # ends), unaligned starts, the sign bit and the last pattern, 2**32 - 1.
    m = min(0x30000 + 77, (1 << 32) - first)
    bits = (np.arange(m, dtype=np.uint64) + first).astype(np.uint32)
    fmt, profile = formats.E4M3FN, profiles.get("torch-2.12")
    expected = fp8check.encode(bits.view(np.float32), fmt, profile)
    actual = expected.copy()
    zero_lower = np.flatnonzero((bits & 0xFFFF) == 0)
    plant = np.unique(np.concatenate([[0, 1, m - 1], zero_lower, zero_lower - 1, zero_lower + 1,
                                      np.arange(3, m, 997)]).clip(0, m - 1))
    actual[plant] ^= 0x01
    sticky, exact = fp8check.reference._split_tables("float32", fmt, profile)
    for cap in (m, 5):
        where, codes = np.zeros(cap, np.int64), np.zeros(cap, np.uint8)
        n = fast.sweep32_mismatches(first, actual, sticky, exact, where, codes)
        assert n == plant.size
        k = min(cap, n)
        assert where[:k].tolist() == plant[:k].tolist() and codes[:k].tolist() == expected[plant[:k]].tolist()
    assert fast.sweep32_mismatches(first, expected, sticky, exact, where, codes) == 0


def test_parallel_spans_cover_every_value_once_and_a_span_error_is_raised():
    n = fast.BLOCK * 37 + 5
    seen = np.zeros(n, np.int64)
    fast.parallel(n, lambda lo, hi: seen[lo:hi].__iadd__(1), workers=3)
    assert (seen == 1).all()

    def fails_past_the_middle(lo: int, hi: int) -> None:
        if lo > n // 2:
            raise ZeroDivisionError(f"span {lo}")

    with pytest.raises(ZeroDivisionError, match="span"):
        fast.parallel(n, fails_past_the_middle, workers=3)


def test_threads_are_the_cores_shared_among_pytest_xdist_workers(monkeypatch):
    import os

    monkeypatch.delenv("FP8CHECK_THREADS", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    cores = fast.threads()
    assert cores == len(os.sched_getaffinity(0))
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert fast.threads() == max(1, cores // 2)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1000")
    assert fast.threads() == 1
    monkeypatch.setenv("FP8CHECK_THREADS", "5")
    assert fast.threads() == 5


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


def test_the_documented_module_paths_work_after_a_bare_import_fp8check():
    # docs/recipes.md writes fp8check.quantizers.declared_recipe(...), .names(), .get(...): after `import fp8check`
    # alone (a fresh interpreter: here the test session has imported the submodule already) it was an AttributeError
    import subprocess
    import sys

    code = ("import fp8check\n"
            "r = fp8check.quantizers.declared_recipe('mine', base='rowwise', apply='multiply-reciprocal')\n"
            "assert 'rowwise' in fp8check.quantizers.names() and fp8check.quantizers.get('rowwise').eps == 1e-12\n"
            "print(r.apply)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "multiply-reciprocal", run.stderr

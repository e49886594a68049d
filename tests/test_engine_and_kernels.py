"""The check engine (classification, ordering, counts) and the kernel adapters,
with the facts about real stacks that the suite relies on pinned here."""

import numpy as np
import pytest

import fp8check
from fp8check import formats, inputs, profiles, stacks
from fp8check.casts import adapters, engine
from fp8check.casts.adapters import KernelCallError, KernelLoadError, KernelOutputError

from core_oracles import pinned

torch = pytest.importorskip("torch")


def f32(*values):
    return np.array(values, dtype=np.float32).view(np.uint32)


def classify(values, actual, fmt="e4m3fnuz", profile="ieee"):
    bits = f32(*values)
    expected = fp8check.encode(inputs.from_bits(bits, "float32"), fmt, profile)
    return list(engine.classify(bits, expected, np.array(actual, dtype=np.uint8), "float32", fmt, profile))


def test_categories_follow_the_contract():
    nan = float("nan")
    assert classify([nan], [0x7F]) == ["nan"]
    assert classify([float("inf")], [0x7F]) == ["infinity"]
    assert classify([-0.0], [0x80]) == ["signed_zero"]          # fnuz 0x80 is NaN
    assert classify([-1e-6], [0x80]) == ["signed_zero"]         # a tiny negative
    assert classify([300.0], [0x7F]) == ["overflow"]
    assert classify([2.0**-9], [0x00]) == ["subnormal"]         # flushed
    assert classify([1.0625], [0x41]) == ["rounding"]           # the other neighbour
    assert classify([1.9375], [0x40]) == ["other"]              # 1.0: not a neighbour (carry lost)
    assert classify([-0.0], [0x00], fmt="e4m3fn") == ["signed_zero"]


def test_divergences_are_unique_counted_exactly_and_simplest_first():
    rec = engine.Divergences(fmt=formats.E4M3FNUZ, profile=profiles.IEEE, input_dtype="float32")
    bits = f32(1.0625001, 1.0625001, 3.0 + 2**-20, -0.0, 300.0, 1.3125)
    expected = fp8check.encode(inputs.from_bits(bits, "float32"), "e4m3fnuz")
    actual = expected.copy()
    actual[[0, 1, 2, 5]] ^= 1  # rounding-like flips
    actual[3] = 0x80
    actual[4] = 0x7F
    rec.add(bits, expected, actual)
    rec.add(bits[:1], expected[:1], actual[:1])  # the same input again: counted once
    assert len(rec) == 5
    assert rec.counts() == {"rounding": 3, "signed_zero": 1, "overflow": 1}
    listed = rec.to_list(None)
    # round robin: the simplest of each category before the second of any
    assert [d.category for d in listed[:3]] == ["rounding", "overflow", "signed_zero"]
    assert listed[0].input_value == "1.3125"  # fewest mantissa bits set
    assert listed[2].input_hex == "0x80000000"


def test_run_check_of_a_conforming_stack(tmp_path):
    k = adapters.get_kernel("ml_dtypes")
    result, rec = engine.run_check(k, "e5m2", input_dtype="bfloat16", max_examples=10)
    assert result.passed and result.categories == {} and len(rec) == 0
    assert result.checked >= 65536 and result.profile == k.claims.name


def test_decode_check_compares_nan_by_class_and_keeps_negative_zero():
    class Decoder:
        def decode(self, codes, fmt):
            out = fp8check.decode(codes, fmt).astype(np.float32)
            out[0x80] = 0.0  # a decoder that loses -0
            return out

    n, wrong = engine.decode_check(Decoder(), "e4m3fn")
    assert n == 256 and [(d.input_hex, d.category) for d in wrong] == [("0x80", "signed_zero")]


# -- facts about the real stacks (FACTS.md), where the registry pins them -----

def cast(name, values, fmt, dtype="float32"):
    x = np.array(values, dtype=inputs.numpy_dtype(dtype))
    return [int(c) for c in adapters.get_kernel(name).cast(x, formats.get(fmt))]


def test_builtin_adapters_claim_what_the_registry_says():
    for name, stack in (("torch-cpu", "torch"), ("ml_dtypes", "ml_dtypes")):
        k = adapters.get_kernel(name)
        obs = stacks.lookup(stack)
        if obs is None:
            assert k.unpinned and k.observation is None and "not pinned" in k.unpinned
        else:
            assert k.claims is obs.profile and k.known == obs.known and k.unpinned is None


def test_torch_2_12_plus_saturates_e4m3fn_but_not_fnuz():
    obs = pinned("torch")
    if obs.profile is not profiles.TORCH_2_12:
        pytest.skip(f"the installed torch follows {obs.profile.name}")
    assert cast("torch-cpu", [500.0, float("inf"), -float("inf")], "e4m3fn") == [0x7E, 0x7E, 0xFE]
    assert cast("torch-cpu", [500.0], "e4m3fnuz") == [0x80]
    assert cast("torch-cpu", [float("nan")], "e5m2") == [0x7F]  # e5m2 NaN is all ones in torch


def test_ml_dtypes_does_not_saturate_and_fnuz_zero_is_unsigned():
    pinned("ml_dtypes")
    assert cast("ml_dtypes", [500.0, -0.0, -1e-9], "e4m3fnuz") == [0x80, 0x00, 0x00]
    assert cast("ml_dtypes", [float("nan")], "e5m2") == [0x7E]


@pytest.mark.parametrize("name, stack", [("torch-cpu", "torch"), ("ml_dtypes", "ml_dtypes")])
def test_e8m0_float32_subnormals_round_as_the_registry_says(name, stack):
    obs = pinned(stack)
    x = [2.0**-127 * 1.25]  # nearer 2^-127 (0x00) than 2^-126 (0x01)
    assert fp8check.encode(np.array(x, dtype=np.float32), "e8m0fnu")[0] == 0x00
    rounds_up = stacks.E8M0_SUBNORMAL in obs.known
    assert cast(name, x, "e8m0fnu") == ([0x01] if rounds_up else [0x00])


@pytest.mark.parametrize("name, stack", [("torch-cpu", "torch"), ("ml_dtypes", "ml_dtypes")])
def test_float64_is_rounded_through_float32_where_the_registry_says(name, stack):
    obs = pinned(stack)
    x = np.array([0x3FF1000000440000], dtype=np.uint64).view(np.float64)  # just above 1.0625
    assert fp8check.encode(x, "e4m3fn")[0] == 0x39
    double = any(k.kind == "exact" for k in obs.known)
    assert double == (obs.profile.resolve("e4m3fn").intermediate == "float32")
    assert cast(name, x, "e4m3fn", "float64") == ([0x38] if double else [0x39])


def test_triton_interpreter_fp8_casts_are_broken_as_upstream_reports():
    pytest.importorskip("triton")
    pinned("triton-interpreter")
    name = "triton-interpreter"
    assert cast(name, [1.0625], "e4m3fn") == [0x39]     # the tie rounds away (RNE: 0x38)
    assert cast(name, [1.9375], "e4m3fn") == [0x38]     # the carry is lost: 1.0 (RNE: 2.0)
    assert cast(name, [500.0], "e4m3fn") == [0x78]      # overflow keeps mantissa bits: 256
    codes = cast(name, [-0.0, -1e-6], "e4m3fnuz")
    assert 0x80 not in codes                            # fnuz never yields 0x80
    k = adapters.get_kernel(name)
    assert k.decode(np.array([0x80], dtype=np.uint8), formats.E4M3FNUZ)[0] == 0.0  # NaN decoded as -0.0
    assert np.signbit(k.decode(np.array([0x80], dtype=np.uint8), formats.E4M3FNUZ)[0])


def test_triton_cuda_reports_fnuz_unsupported_without_compiling():
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        with pytest.raises(KernelLoadError, match="CUDA"):
            adapters.get_kernel("triton-cuda")
        return
    k = adapters.get_kernel("triton-cuda")
    if torch.version.hip is None:
        assert not k.supports("e4m3fnuz") and "NVIDIA" in k.unsupported_reason("e4m3fnuz")


# -- user kernels ------------------------------------------------------------

def test_user_kernel_from_module_and_from_file(tmp_path):
    k = adapters.load_user_kernel("fp8_mutants:correct_e4m3fnuz")
    assert cast_with(k, [1.0, -0.0]) == [0x40, 0x00]
    path = tmp_path / "my_cast.py"
    path.write_text("import torch\ndef cast(x):\n    return x.to(torch.float8_e4m3fnuz).view(torch.uint8).numpy()\n")
    k2 = adapters.load_user_kernel(f"{path}:cast")
    assert cast_with(k2, [1.0, 500.0]) == [0x40, 0x80]


def cast_with(k, values):
    return [int(c) for c in k.cast(np.array(values, dtype=np.float32), formats.E4M3FNUZ)]


@pytest.mark.parametrize("spec, error, match", [
    ("no_such_module_xyz:f", KernelLoadError, "No module named"),
    ("fp8_mutants:nothere", KernelLoadError, "has no 'nothere'"),
    ("fp8_mutants:not_callable", KernelLoadError, "not callable"),
    ("justaname", KernelLoadError, "MODULE:FUNCTION"),
])
def test_user_kernel_load_errors_are_typed_one_line(spec, error, match):
    with pytest.raises(error, match=match) as info:
        adapters.load_user_kernel(spec)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name, error", [
    ("raises", KernelCallError),
    ("returns_float", KernelOutputError),
    ("returns_wrong_shape", KernelOutputError),
    ("returns_wrong_fp8_type", KernelOutputError),
])
def test_user_kernel_call_errors_are_typed_one_line(name, error):
    k = adapters.load_user_kernel(f"fp8_mutants:{name}")
    with pytest.raises(error) as info:
        k.cast(np.array([1.0, 2.0], dtype=np.float32), formats.E4M3FNUZ)
    assert "\n" not in str(info.value)

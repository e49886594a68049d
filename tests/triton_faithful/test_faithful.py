"""The faithful Triton interpreter (fp8check.triton): Triton kernels run in
Triton's interpreter give, for each target, the codes and values of the
target's table — checked against fp8check's reference directly, on every
16-bit input, the float32 sweep and all 256 codes — and user kernels with
planted bugs are caught with the right category.

Where triton is missing or its version is not one the patch was tested
with, everything here skips (the refusal itself is tested with a faked
version)."""

from __future__ import annotations

import importlib.util
import math

import ml_dtypes
import numpy as np
import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check import formats, inputs, reference  # noqa: E402
from fp8check.triton import targets  # noqa: E402

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)

import triton_kernels as tk  # noqa: E402  (tests/triton_faithful is on sys.path under pytest)

TORCH = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
         "e4m3fnuz": torch.float8_e4m3fnuz, "e5m2fnuz": torch.float8_e5m2fnuz}
SRC = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
pytest_plugins = ["pytester"]
HAS_DOT_SCALED = hasattr(__import__("triton.runtime.interpreter").runtime.interpreter, "_mxfp_value_handle_to_float32")


def T(name: str) -> targets.Target:
    """The target as this Triton compiles it."""
    return targets.for_triton(targets.get(name), triton.__version__)


def _inputs(source: str) -> tuple[np.ndarray, torch.Tensor]:
    bits = inputs.sweep_bits(source)
    arr = inputs.from_bits(bits, source)
    if source == "bfloat16":
        t = torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(arr))
    return arr, t


def _expected(arr: np.ndarray, source: str, fmt: str, entry: targets.Downcast) -> np.ndarray:
    """The reference, computed here without the patch's own code path."""
    if entry.bits == "f16_upper_byte":
        return (arr.view(np.uint16) >> 8).astype(np.uint8)
    codes = reference.encode(arr, fmt, entry.profile)
    if entry.bits == "f32_rtz_f16_upper_byte":
        b = arr.view(np.uint32)
        nan = (b & 0x7FFFFFFF) > 0x7F800000
        codes[nan] = (((b[nan] >> 24) & 0x80) | 0x7E | ((b[nan] >> 21) & 1)).astype(np.uint8)
    return codes


DOWNCASTS = [(t, s, f, r) for t in targets.TARGETS for s in targets.SOURCES for f in targets.FP8 for r in ("rtne", "rtz")
             if T(t).downcast(s, f, r).supported]


@pytest.mark.parametrize("target,source,fmt,rounding", DOWNCASTS)
def test_downcast_equals_the_reference_on_every_input(target, source, fmt, rounding):
    entry = T(target).downcast(source, fmt, rounding)
    arr, x = _inputs(source)
    with ft.faithful(target):
        got = tk.cast(x, TORCH[fmt], rtz=rounding == "rtz").numpy()
    want = _expected(arr, source, fmt, entry)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} of {got.size} differ; first input {arr.view(inputs.bits_dtype(source))[bad[0]]:#x}: "
                           f"got {got[bad[0]]:#04x}, want {want[bad[0]]:#04x}")


def test_the_unpatched_interpreter_fails_the_same_comparison():
    # The comparison above can fail: without the patch Triton's own
    # conversions (triton-lang/triton#8322) diverge on the same inputs.
    arr, x = _inputs("float16")
    got = tk.cast(x, torch.float8_e4m3fn).numpy()
    want = reference.encode(arr, "e4m3fn", targets.TRITON_SM90)
    assert (got != want).sum() > 1000


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_bfloat16_widens_exactly_where_the_unpatched_interpreter_loses_subnormals(target):
    # Every target widens bfloat16 to float32 with a 16-bit shift; Triton's
    # interpreter sends it through _convert_float, which gets subnormals
    # wrong (0x0001 = 9.18e-41 -> 0). A quantizer reading bfloat16 input
    # would report a wrong scale for a block of subnormals.
    bits = np.arange(1 << 16, dtype=np.uint32)
    x = torch.from_numpy(bits.astype(np.uint16).view(np.int16)).view(torch.bfloat16)
    want = (bits << 16).view(np.float32)
    y = torch.empty(x.shape, dtype=torch.float32)
    with ft.faithful(target):
        tk.launch(tk.decode_kernel, x, y)
    got = y.numpy()
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{(~same).sum()} bfloat16 values widened wrongly, e.g. 0x{int(bits[~same][0]):04x}"
    y2 = torch.empty(x.shape, dtype=torch.float32)
    tk.launch(tk.decode_kernel, x, y2)  # unpatched: the interpreter's own conversion
    assert y2.numpy()[1] != want[1]  # 0x0001


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_float32_narrows_to_bfloat16_to_nearest_even_where_the_interpreter_truncates(target):
    # The float16 sweep widened to float32 and a float32 sample with every low-half pattern
    # of a few high halves: ties, carries into the exponent and into Inf, subnormals.
    rng = np.random.default_rng(0)
    hi = np.array([0x0000, 0x0001, 0x007F, 0x3F80, 0x3F81, 0x477F, 0x7F7F, 0x8000, 0xBF80, 0xFF7F], np.uint32)
    low = np.concatenate([np.arange(0, 1 << 16, 97, dtype=np.uint32), [0x7FFF, 0x8000, 0x8001, 0xFFFF]])
    bits = ((hi[:, None] << 16) | low[None, :]).reshape(-1)
    bits = np.concatenate([bits, rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)])
    x = bits.view(np.float32)
    want = x.astype(ml_dtypes.bfloat16).view(np.uint16)  # ml_dtypes: RNE
    y = torch.empty(x.shape, dtype=torch.bfloat16)
    with ft.faithful(target):
        tk.launch(tk.decode_kernel, torch.from_numpy(x.copy()), y)
    got = y.view(torch.int16).numpy().view(np.uint16)
    finite = ~np.isnan(x)
    assert np.array_equal(got[finite], want[finite])
    assert np.all((got[~finite] & 0x7F80) == 0x7F80) and np.all(got[~finite] & 0x7F)  # NaN stays NaN
    y2 = torch.empty(x.shape, dtype=torch.bfloat16)
    tk.launch(tk.decode_kernel, torch.from_numpy(x.copy()), y2)  # unpatched: truncation
    assert (y2.view(torch.int16).numpy().view(np.uint16)[finite] != want[finite]).sum() > 1000


UPCASTS = [(t, f, d) for t in targets.TARGETS for f in targets.FP8 for d in targets.DESTINATIONS
           if T(t).upcast(f, d).supported]


def _value_bits(values: np.ndarray, dest: str) -> np.ndarray:
    """NaN by class (all NaN to one pattern), -0 distinct."""
    if dest == "bfloat16":
        f32 = values.astype(np.float32)
    else:
        f32 = values.astype(np.float32)
    b = f32.view(np.uint32).copy()
    b[np.isnan(f32)] = 0x7FC00000
    return b


@pytest.mark.parametrize("target,fmt,dest", UPCASTS)
def test_upcast_equals_decode_on_all_256_codes(target, fmt, dest):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    with ft.faithful(target):
        got = tk.decode(codes, TORCH[fmt], SRC[dest]).float().numpy()
    want = reference.decode(codes.numpy(), fmt)
    specials = T(target).upcast(fmt, dest).specials
    if specials == "fnuz_nan_negative_zero":  # triton-lang/triton#10745 (before 3.9.0)
        want[0x80] = -0.0
    elif specials == "as_e5m2":  # before triton-lang/triton#10458
        want = reference.decode(codes.numpy(), "e5m2")
    elif specials == "finite":
        # the bit-trick lowerings read the all-ones exponent as an ordinary binade
        f = formats.get(fmt)
        for c in range(256):
            if f.is_nan(c) or f.is_inf(c):
                e, m = (c >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1), c & f.mantissa_mask
                want[c] = (-1) ** (c >> 7) * (1 + m / 2 ** f.mantissa_bits) * 2.0 ** (e - f.bias)
    assert np.array_equal(_value_bits(got, dest), _value_bits(want, dest))


def test_the_finite_specials_are_what_the_tables_say():
    # e5m2 +Inf decodes to 65536 in bfloat16 on sm90 (mul.rn.bf16x2 by 2^112),
    # e4m3fn NaN to 480 on gfx942 (OcpF8ToBf16SW), exact elsewhere.
    codes = torch.tensor([0x7C, 0xFC, 0x7F], dtype=torch.uint8)
    with ft.faithful("sm90"):
        assert tk.decode(codes, torch.float8_e5m2, torch.bfloat16).float().tolist()[:2] == [65536.0, -65536.0]
        assert math.isinf(tk.decode(codes, torch.float8_e5m2, torch.float16).float()[0])
    with ft.faithful("gfx942"):
        assert tk.decode(codes, torch.float8_e4m3fn, torch.bfloat16).float()[2] == 480.0
    with ft.faithful("gfx950"):
        assert math.isnan(tk.decode(codes, torch.float8_e4m3fn, torch.bfloat16).float()[2])


def test_fnuz_nan_decodes_to_nan_under_gfx942_and_not_without_the_patch():
    codes = torch.tensor([0x80], dtype=torch.uint8)
    with ft.faithful("gfx942"):
        assert math.isnan(tk.decode(codes, torch.float8_e4m3fnuz, torch.float32)[0])
    try:
        unpatched = float(tk.decode(codes, torch.float8_e4m3fnuz, torch.float32)[0])
    except Exception:  # Triton 3.6's own interpreter cannot build the fnuz types
        unpatched = 0.0
    assert not math.isnan(unpatched)  # triton-lang/triton#8322: 0x80 -> -0.0


@pytest.mark.parametrize("target", list(targets.TARGETS))
def test_fp8_to_fp8_is_refused_as_the_compiler_refuses_it(target):
    fmts = sorted(T(target).formats)
    src, dst = fmts[0], fmts[1]
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(TORCH[src])
    with ft.faithful(target), pytest.raises(ft.UnsupportedConversionError, match="fp8 to fp8"):
        tk.cast(codes, TORCH[dst])
    with ft.faithful(target, strict=False):
        got = tk.cast(codes, TORCH[dst]).numpy()
    with np.errstate(invalid="ignore"):
        want = reference.encode(reference.decode(np.arange(256, dtype=np.uint8), src), dst, targets.get(target).profile)
    assert np.array_equal(got, want)


def test_rtz_where_triton_does_not_lower_it_is_refused():
    x = torch.tensor([1.0, 2.5], dtype=torch.float32)
    with ft.faithful("sm90"), pytest.raises(ft.UnsupportedConversionError, match="rtz"):
        tk.cast(x, torch.float8_e4m3fn, rtz=True)
    with ft.faithful("gfx942"), pytest.raises(ft.UnsupportedConversionError, match="rtz"):
        tk.cast(x.to(torch.bfloat16), torch.float8_e5m2, rtz=True)


def test_fnuz_types_are_refused_for_nvidia_targets():
    with ft.faithful("sm90"), pytest.raises(ft.UnsupportedConversionError, match="e4m3fnuz"):
        tk.cast(torch.ones(4), torch.float8_e4m3fnuz)


def test_float16_to_e5m2fnuz_rtz_is_the_amd_upper_byte():
    # What compiled Triton emits for gfx942/gfx950 (the OCP truncation applied
    # to a type with bias 16): 1.0 becomes 0x3C, which e5m2fnuz reads as 0.5.
    x = torch.tensor([1.0], dtype=torch.float16)
    if not T("gfx942").downcast("float16", "e5m2fnuz", "rtz").supported:  # Triton 3.6 does not compile it
        with ft.faithful("gfx942"), pytest.raises(ft.UnsupportedConversionError):
            tk.cast(x, torch.float8_e5m2fnuz, rtz=True)
        return
    with ft.faithful("gfx942"):
        code = tk.cast(x, torch.float8_e5m2fnuz, rtz=True)
    assert int(code[0]) == 0x3C and reference.decode(np.array([0x3C], np.uint8), "e5m2fnuz")[0] == 0.5


# -- tl.dot and tl.dot_scaled --------------------------------------------------------


def _fp8_operand(rng, shape, fmt, lo=-3, hi=3):
    # values whose float32 products and sums of 16 are exact
    f = formats.get(fmt)
    v = rng.choice([-1.0, 1.0], size=shape) * (1 + rng.integers(0, 1 << f.mantissa_bits, size=shape)
                                                  / (1 << f.mantissa_bits)) * np.exp2(rng.integers(lo, hi, size=shape))
    return reference.encode(v, fmt, "ieee")


@pytest.mark.parametrize("target,fmt", [("sm90", "e4m3fn"), ("sm90", "e5m2"), ("gfx942", "e4m3fnuz"),
                                        ("gfx942", "e5m2fnuz"), ("gfx950", "e4m3fn")])
def test_dot_with_fp8_operands_is_the_targets_tensor_core_arithmetic(target, fmt):
    # tl.dot follows the target's matrix instruction (fp8check.matmul.tensorcore, checked against MMA-Sim in
    # tests/test_matmul_tensorcore.py): exact where its bits suffice, Hopper's 13 bits where they do not
    from fp8check.matmul import tensorcore

    rng = np.random.default_rng(0)
    M = 64 if target == "sm90" else 16  # sm90: a wgmma tile (smaller ones get mma.sync fp16: test_gemm_kind.py)
    N = K = 16
    a, b = _fp8_operand(rng, (M, K), fmt), _fp8_operand(rng, (K, N), fmt)
    exact = reference.decode(a, fmt) @ reference.decode(b, fmt)
    at, bt = (torch.from_numpy(c).view(TORCH[fmt]) for c in (a, b))
    c = torch.empty((M, N), dtype=torch.float32)
    with ft.faithful(target):
        ft.interpreted(tk.dot_kernel)[(1,)](at, bt, c, M=M, N=N, K=K)
    model = tensorcore.mma(target, a, fmt, b, fmt)
    assert np.array_equal(c.numpy().view(np.uint32), model.bits)
    differs = int((c.numpy().astype(np.float64) != exact).sum())
    assert differs > 0 if target == "sm90" else differs == 0  # 2**-6..2**6 products: more than 13 bits apart


def test_dot_propagates_inf_and_nan_operands_where_the_unpatched_interpreter_does_not():
    M = N = K = 16
    c = torch.empty((M, N), dtype=torch.float32)
    a = np.full((M, K), 0x3C, np.uint8)  # 1.0 in e5m2
    a[0, 0], a[1, 0] = 0x7C, 0x7F  # +Inf, NaN
    b = np.full((K, N), 0x3C, np.uint8)
    at, bt = (torch.from_numpy(x).view(torch.float8_e5m2) for x in (a, b))
    with ft.faithful("sm90"):
        ft.interpreted(tk.dot_kernel)[(1,)](at, bt, c, M=M, N=N, K=K)
    assert math.isinf(c[0, 0]) and math.isnan(c[1, 0]) and c[2, 0] == 16.0
    a = np.full((M, K), 0x38, np.uint8)  # 1.0 in e4m3fn
    a[0, 0] = 0x7F  # NaN
    at, bt = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (a, a.T.copy()))
    with ft.faithful("sm90"):
        ft.interpreted(tk.dot_kernel)[(1,)](at, bt, c, M=M, N=N, K=K)
    assert math.isnan(c[0, 0]) and c[1, 1] == 16.0
    ft.interpreted(tk.dot_kernel)[(1,)](at, bt, c, M=M, N=N, K=K)
    assert math.isfinite(c[0, 0])  # triton-lang/triton#8322: NaN decoded finite


@pytest.mark.skipif(not HAS_DOT_SCALED, reason="this Triton's interpreter has no dot_scaled")
def test_dot_scaled_with_e4m3_operands_is_exact():
    rng = np.random.default_rng(1)
    M = N = 16
    K = 64
    a, b = _fp8_operand(rng, (M, K), "e4m3fn"), _fp8_operand(rng, (K, N), "e4m3fn")
    a[0, 0] = 0x7F  # NaN operand
    sa = rng.integers(125, 130, size=(M, K // 32)).astype(np.uint8)
    sb = rng.integers(125, 130, size=(N, K // 32)).astype(np.uint8)
    av = reference.decode(a, "e4m3fn") * np.repeat(np.exp2(sa.astype(np.float64) - 127), 32, axis=1)
    bv = reference.decode(b, "e4m3fn") * np.repeat(np.exp2(sb.astype(np.float64) - 127), 32, axis=1).T
    with np.errstate(invalid="ignore"):
        exact = av @ bv
    c = torch.empty((M, N), dtype=torch.float32)
    args = [torch.from_numpy(a).view(torch.float8_e4m3fn), torch.from_numpy(sa),
            torch.from_numpy(b).view(torch.float8_e4m3fn), torch.from_numpy(sb), c]
    with ft.faithful("sm90"):
        ft.interpreted(tk.dot_scaled_kernel)[(1,)](*args, M=M, N=N, K=K)
    got = c.numpy().astype(np.float64)
    assert np.isnan(got[0]).all() and np.array_equal(got[1:], exact[1:])


# -- user kernels through fp8check's own checks ---------------------------------------


def _cast_kernel(fn, profile):
    from fp8check.casts.adapters.user import user_kernel

    return user_kernel(f"{tk.__file__}:{fn}", profile=profile, input_dtypes=("float32", "float16", "bfloat16"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_correct_e4m3fnuz_cast_kernel_conforms_under_gfx942(dtype):
    from fp8check.casts.engine import run_check

    with ft.faithful("gfx942"):
        result, _ = run_check(_cast_kernel("cast_e4m3fnuz", targets.TRITON_GFX942), "e4m3fnuz",
                              input_dtype=dtype, max_examples=50)
    assert result.passed, result.categories


@pytest.mark.slow  # a whole check in the interpreter
def test_a_sign_magnitude_cast_kernel_is_caught_as_signed_zero():
    from fp8check.casts.engine import run_check

    with ft.faithful("gfx942"):
        result, _ = run_check(_cast_kernel("cast_e4m3fnuz_sign_bug", targets.TRITON_GFX942), "e4m3fnuz",
                              max_examples=50)
    assert not result.passed
    assert result.categories.get("signed_zero", 0) > 0, result.categories


QUANT_FAST = dict(max_examples=15, seed=0, dtypes=("float32",))


def test_a_correct_e4m3fnuz_quantizer_conforms_under_gfx942():
    from fp8check.quantizers.conformance import check_quantizer

    with ft.faithful("gfx942"):
        result = check_quantizer(tk.tensorwise_e4m3fnuz, "tensorwise", fmt="e4m3fnuz", **QUANT_FAST)
    assert result.passed, (result.categories, result.divergences[:2])


def test_the_same_quantizer_diverges_under_gfx950_where_fnuz_inf_becomes_nan():
    # gfx950 emulates fnuz in software: ±Inf -> NaN, where the recipe (and
    # gfx942's clamping hardware) give ±max.
    from fp8check.quantizers.conformance import check_quantizer

    with ft.faithful("gfx950"):
        result = check_quantizer(tk.tensorwise_e4m3fnuz, "tensorwise", fmt="e4m3fnuz", **QUANT_FAST)
    assert not result.passed and result.categories["nonfinite"] + result.categories["codes"] > 0


@pytest.mark.slow  # whole quantizer checks in the interpreter
@pytest.mark.parametrize("kernel,category", [("tensorwise_e4m3fnuz_448", "scale"),
                                             ("tensorwise_e4m3fnuz_multiplies", "codes"),
                                             ("tensorwise_e4m3fnuz_sign_trick", "codes")])
def test_planted_quantizer_bugs_are_caught_with_their_category(kernel, category):
    from fp8check.quantizers.conformance import check_quantizer

    with ft.faithful("gfx942"):
        result = check_quantizer(getattr(tk, kernel), "tensorwise", fmt="e4m3fnuz", **QUANT_FAST)
    assert not result.passed
    assert result.categories[category] > 0, result.categories


# -- the patch's life cycle -------------------------------------------------------------


def _hooks():
    import triton.runtime.interpreter as interp

    return (interp.InterpreterBuilder.__dict__["create_fp_to_fp"], interp.InterpreterBuilder.__dict__["create_dot"],
            getattr(interp, "_mxfp_value_handle_to_float32", None), getattr(interp, "_patch_lang_core", None))


def test_the_patch_is_gone_after_the_block_even_on_error():
    before = _hooks()
    with ft.faithful("gfx942"):
        assert ft.is_patched() and ft.active_target().name == "gfx942"
        assert _hooks() != before
        with ft.faithful("sm90"):
            assert ft.active_target().name == "sm90"
        assert ft.active_target().name == "gfx942"
    assert _hooks() == before and not ft.is_patched() and ft.active_target() is None
    with pytest.raises(ZeroDivisionError):
        with ft.faithful("gfx950"):
            1 / 0
    assert _hooks() == before and not ft.is_patched()


def test_interpreter_mode_is_restored_after_an_interpreted_launch(monkeypatch):
    from triton.runtime.jit import JITFunction

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    call, run = JITFunction.__call__, JITFunction.run
    tk.cast(torch.ones(4), torch.float8_e4m3fn)
    assert JITFunction.__call__ is call and JITFunction.run is run
    assert not ft.interpreter_active()


def test_triton_language_is_restored_after_a_launch_that_calls_device_functions():
    """Triton's interpreter patches triton.language for each device-function call (tl.max here) and never
    restores it: compiling a kernel afterwards in the same process failed ("'block_argument' object has no
    attribute 'dtype'", seen on an H200). The launch leaves triton.language as it found it."""
    import triton.language as tl

    objects = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype]
    before = [dict(vars(o)) for o in objects]
    tk.tensorwise_e4m3fnuz(torch.linspace(-3, 3, 50))  # tl.max: a device-function call
    changed = [name for o, b in zip(objects, before) for name, v in vars(o).items()
               if b.get(name) is not v and not isinstance(v, type(tl))]
    assert changed == []


@pytest.mark.parametrize("target,table,noted", [("sm90", "partial", True), ("sm90", "shipped", False),
                                                ("gfx942", "shipped", False)])
def test_float32_division_is_noted_where_the_target_divides_approximately(target, table, noted, monkeypatch):
    """NVIDIA targets compile float32 ``/`` to div.full.f32 (within 2 ulp, triton-lang/triton#10661): where the
    reciprocal of a divisor is not in the table, a check says so. With the shipped table (every mantissa
    measured) sm90's division is exact; AMD's lowering is correctly rounded: nothing to say."""
    if table == "partial":
        from reciprocals import partial_reciprocal_table

        from fp8check.triton import nvidia_approx

        partial = partial_reciprocal_table()
        monkeypatch.setattr(nvidia_approx, "reciprocal_table", lambda: partial)
    x = torch.linspace(-3, 3, 50)
    with ft.watch() as w, ft.faithful(target, strict=False):
        ft.interpreted(tk.tensorwise_kernel)[(1,)](x, torch.empty(50, dtype=torch.float8_e4m3fnuz), torch.empty(1),
                                                   50, FMAX=240.0, MULTIPLY=False, SIGN_TRICK=False, BLOCK=64)
    assert bool(w.division_note) is noted
    if noted:
        assert "div.full.f32" in w.division_note and "tl.div_rn" in w.division_note
    # sm90 with every reciprocal known: exact, yet not a correctly rounded division (a failed check says so)
    known = target == "sm90" and table == "shipped"
    assert bool(w.known_division_note) is known
    if known:
        assert "div.full.f32" in w.known_division_note and "tl.div_rn" in w.known_division_note
    with ft.watch() as w, ft.faithful(target, strict=False):  # the multiplying variant divides once, for the scale
        ft.interpreted(tk.tensorwise_kernel)[(1,)](x, torch.empty(50, dtype=torch.float8_e4m3fnuz), torch.empty(1),
                                                   50, FMAX=240.0, MULTIPLY=True, SIGN_TRICK=False, BLOCK=64)
    # by the constexpr 240, which ptxas folds to a multiply by fl(1/240) on sm90: exact, nothing to note
    assert w.approximate_divisions == 0 and w.division_note is None


def test_a_loop_over_loaded_bounds_runs_on_every_supported_triton():
    """Triton 3.6's interpreter turned a loaded scalar into a loop bound with int() of a 1-element array,
    which NumPy >= 2.4 refuses: torchao's per-group kernels failed under it (seen on the H200)."""
    x = torch.arange(10, dtype=torch.float32)
    out = torch.zeros(1)
    with ft.faithful("sm90"):
        ft.interpreted(tk.sum_between_loaded_bounds_kernel)[(1,)](x, torch.tensor([2, 5], dtype=torch.int32), out)
    assert out.item() == 2 + 3 + 4


def test_a_kernel_whose_module_holds_a_numpy_array_runs():
    # fp8check's patching of a kernel's globals compared each with triton.language by ==: a module-level NumPy
    # table made that ambiguous, and every kernel of such a module failed with a ValueError of the check's own
    import table_kernels

    codes = torch.arange(16, dtype=torch.uint8)
    with ft.faithful("sm90"):
        got = table_kernels.decode_e2m1(codes, launch=ft.interpreted)
    want = np.concatenate([table_kernels.E2M1_MAGNITUDES, -table_kernels.E2M1_MAGNITUDES])
    assert np.array_equal(got.numpy().view(np.uint32), want.view(np.uint32))  # -0 distinct: code 8 is -0.0


def test_an_unsupported_triton_version_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(triton, "__version__", "3.7.1")
    with pytest.raises(ft.TritonVersionError) as info:
        with ft.faithful("gfx942"):
            pass
    msg = str(info.value)
    assert "\n" not in msg and "3.7.1" in msg and all(v in msg for v in ft.SUPPORTED_TRITON_VERSIONS)
    assert not ft.is_patched()


def test_an_unknown_target_is_refused_naming_the_known_ones():
    with pytest.raises(ft.UnknownTargetError, match="gfx942"):
        with ft.faithful("gfx90a"):
            pass


def test_an_unpatched_interpreter_run_is_seen(monkeypatch):
    x = torch.tensor([1.0, 300.0])
    with ft.watch() as w:
        tk.cast(x, torch.float8_e4m3fn)
    assert w.unpatched_conversions == 1 and w.warning == ft.UNPATCHED_WARNING
    assert "triton-lang/triton#8322" in w.warning and "--triton-target" in w.warning
    with ft.watch() as w, ft.faithful("sm90"):
        tk.cast(x, torch.float8_e4m3fn)
    assert w.unpatched_conversions == 0 and w.faithful_conversions == 1 and w.warning is None
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert ft.interpreter_active() and ft.uses_unpatched_interpreter(tk.cast_kernel)
    with ft.faithful("sm90"):
        assert not ft.uses_unpatched_interpreter(tk.cast_kernel)
    monkeypatch.delenv("TRITON_INTERPRET")
    assert ft.uses_unpatched_interpreter(ft.interpreted(tk.cast_kernel))
    assert not ft.uses_unpatched_interpreter(tk.cast_kernel)


def test_the_fixture_helper_makes_a_pytest_fixture(pytester):
    pytester.makeconftest(
        "from fp8check.triton import faithful_fixture\n"
        "mi300 = faithful_fixture('gfx942')\n")
    pytester.makepyfile(
        "import fp8check.triton as ft\n"
        "def test_it(mi300):\n"
        "    assert mi300.name == 'gfx942' and ft.is_patched()\n"
        "def test_after():\n"
        "    assert not ft.is_patched()\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)


_PLAIN_TRITON_QUANTIZER = """
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def tensorwise(x):
    y = x.to(torch.float32).contiguous()
    _scale_kernel[(1,)](y, y.numel(), BLOCK=1024)
    s = y.abs().amax().clamp(min=1e-12) / 240.0
    return (y / s).clamp(-240.0, 240.0).to(torch.float8_e4m3fnuz), s
"""


@pytest.mark.parametrize("command", ["check", "gate"])
def test_a_triton_quantizer_without_a_target_is_told_how_to_run_it_on_a_cpu(tmp_path, capsys, command):
    # From a new user's wheel trial: a Triton quantizer checked or gated without --triton-target got Triton's
    # "0 active drivers ([]). There should only be one." alone (the cast kind's hint did not reach the others)
    from fp8check.cli import main

    (tmp_path / "plain_quant.py").write_text(_PLAIN_TRITON_QUANTIZER)
    kernel = f"{tmp_path / 'plain_quant.py'}:tensorwise"
    argv = (["check", kernel, "--kind", "quantize", "--recipe", "tensorwise", "--format", "e4m3fnuz"]
            if command == "check" else
            ["gate", "assert_close(rtol=1e-2, atol=1e-2)", "--recipe", "tensorwise", "--format", "e4m3fnuz",
             "--kernel", kernel])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "active drivers" in err and len(err.splitlines()) == 1, err
    assert ("with --triton-target sm90, gfx942" if command == "check" else
            "`fp8check check ... --triton-target sm90` checks it") in err, err


def test_a_declared_triton_quantizer_without_a_target_is_told_how_to_declare_one(tmp_path):
    # the pytest suite's failure for the same kernel declared in a pyproject.toml without triton-target said
    # only "0 active drivers" (the command line's hint named a flag the declaration does not have)
    from fp8check.declaration_reader import quantizer_kernel
    from fp8check.loader import load_callable
    from fp8check.suite import DeclaredTarget

    (tmp_path / "plain_quant_decl.py").write_text(_PLAIN_TRITON_QUANTIZER)
    fn = load_callable(f"{tmp_path / 'plain_quant_decl.py'}:tensorwise")
    with pytest.raises(pytest.fail.Exception) as failed:
        DeclaredTarget(quantizer_kernel(fn, recipe="tensorwise", format="e4m3fnuz")).check(max_examples=1)
    msg = str(failed.value)
    assert "active drivers" in msg and 'triton-target = "sm90"' in msg, msg
    # one message: not Triton's error above it again under "During handling of the above exception"
    assert failed.value.__context__ is None, failed.value.__context__

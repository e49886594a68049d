"""``tl.dot_scaled`` in the faithful interpreter: each target's arithmetic (fp8check.matmul.dot_scaled), bit for bit.

The references here are built apart from the interpreter's code path: sm100's native lowering is the
tensor-core model (``tensorcore.mma`` with the block scales: MMA-Sim's ``tcgen05`` kinds, checked against
``mmasim`` in tests/test_matmul_tensorcore.py); the decomposition is the operands scaled in float64 and
rounded to bfloat16 by ml_dtypes (NVIDIA's ``mul.bf16``: to nearest even) or cut to their upper 16 bits (AMD),
then the target's bfloat16 tensor-core model. Each test shows the float32 sum the stock interpreter computes
giving other bits on the same input, so that a float32 ``tl.dot_scaled`` fails it.
"""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check import reference  # noqa: E402
from fp8check.errors import InvalidValueError  # noqa: E402
from fp8check.matmul import dot_scaled as ds  # noqa: E402
from fp8check.matmul import tensorcore as tc  # noqa: E402
from fp8check.quantizers.packing import pack_codes  # noqa: E402

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)
if not hasattr(__import__("triton.runtime.interpreter").runtime.interpreter, "_mxfp_value_handle_to_float32"):
    pytest.skip("this Triton's interpreter has no dot_scaled (3.6)", allow_module_level=True)

import triton_kernels as tk  # noqa: E402  (tests/triton_faithful is on sys.path under pytest)


def _scaled(codes: np.ndarray, fmt: str, scales: np.ndarray, k_axis: int) -> np.ndarray:
    """float64 values of ``codes`` times 2^(s - 127) per block of 32 along ``k_axis`` (code 0: 2^-127, the
    bfloat16 subnormal Triton 3.9 makes of it; 255: NaN)."""
    s = np.repeat(scales.astype(np.float64), 32, axis=k_axis)
    factor = np.where(s == 255, np.nan, np.exp2(np.maximum(s, 0) - 127))
    with np.errstate(invalid="ignore"):
        return reference.decode(codes, fmt).astype(np.float64) * factor


def _bf16_rne(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)  # exact in float32 here


def _bf16_cut(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # 2^128 for a scale code 255, replaced by the NaN select
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    """bfloat16 bits equal, NaN by class."""
    nan_x, nan_y = (((v & 0x7F80) == 0x7F80) & ((v & 0x7F) != 0) for v in (x, y))
    return bool(np.array_equal(nan_x, nan_y) and np.array_equal(x[~nan_x], y[~nan_y]))


def _inputs(rng: np.random.Generator, M: int, N: int, K: int, fmt: str) -> tuple[np.ndarray, ...]:
    """Codes of every finite value, scales over 2^-8..2^6, an accumulator of mixed magnitudes: sums whose
    truncation and float32 rounding disagree; row 0 of A scaled by code 0 (2^-127) into an accumulator of
    zeros: operands rounded into bfloat16 subnormals (to nearest even on NVIDIA, truncated on AMD)."""
    values = reference.decode(np.arange(16 if fmt == "e2m1fn" else 256, dtype=np.uint8), fmt)
    finite = np.flatnonzero(np.isfinite(values)).astype(np.uint8)
    a, b = rng.choice(finite, size=(M, K)), rng.choice(finite, size=(K, N))
    sa = rng.integers(119, 134, size=(M, K // 32)).astype(np.uint8)
    sb = rng.integers(119, 134, size=(N, K // 32)).astype(np.uint8)
    acc = (rng.standard_normal((M, N)) * np.exp2(rng.integers(-8, 8, (M, N)))).astype(np.float32)
    sa[0], acc[0] = 0, 0
    return a, sa, b, sb, acc


def _packed(codes: np.ndarray, axis: int) -> np.ndarray:
    """e2m1 codes two per byte along ``axis``, the low nibble first (tl.dot_scaled's packing)."""
    packed = pack_codes(codes if axis == 1 else codes.T, "low-first")
    return np.ascontiguousarray(packed if axis == 1 else packed.T)


def _run(target: str | None, fmt: str, a, sa, b, sb, acc, fast: bool = False) -> np.ndarray:
    """The kernel interpreted (under ``target``'s faithful block, or the stock interpreter for None)."""
    M, K = a.shape
    N = b.shape[1]
    name = {"e4m3fn": "e4m3", "e5m2": "e5m2", "e2m1fn": "e2m1"}[fmt]
    if fmt == "e2m1fn":
        ta, tb = torch.from_numpy(_packed(a, 1)), torch.from_numpy(_packed(b, 0))
    else:
        dt = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]
        ta, tb = torch.from_numpy(a).view(dt), torch.from_numpy(b).view(dt)
    c = torch.from_numpy(acc.copy())
    args = (ta, torch.from_numpy(sa), tb, torch.from_numpy(sb), c)
    if target is None:
        ft.interpreted(tk.mx_dot_kernel)[(1,)](*args, M=M, N=N, K=K, FA=name, FB=name, FAST=fast)
    else:
        with ft.faithful(target):
            ft.interpreted(tk.mx_dot_kernel)[(1,)](*args, M=M, N=N, K=K, FA=name, FB=name, FAST=fast)
    return c.numpy().view(np.uint32)


# target, tile (M, N, K), the lowering Triton 3.9 gives it (ScaledBlockedToMMAv5: M >= 128 and N >= 16)
CASES = [("sm100", (128, 16, 64), "native"), ("sm100", (64, 16, 64), "decomposed"),
         ("sm90", (64, 16, 64), "decomposed"), ("gfx942", (32, 16, 64), "decomposed")]


@pytest.mark.parametrize("fmt", ["e4m3fn", "e2m1fn"])
@pytest.mark.parametrize("target,shape,how", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_dot_scaled_is_the_targets_arithmetic_bit_for_bit(target, shape, how, fmt):
    M, N, K = shape
    a, sa, b, sb, acc = _inputs(np.random.default_rng(M + K), M, N, K, fmt)
    assert ds.lowering(target, M, N, K, fmt, fmt, True) == how
    got = _run(target, fmt, a, sa, b, sb, acc)
    if how == "native":
        want = tc.mma(target, a, fmt, b, fmt, acc=acc, a_scales=sa, b_scales=sb.T)
        assert want.model.name == ("sm100-tcgen05-mxf4" if fmt == "e2m1fn" else "sm100-tcgen05-mxf8f6f4")
    else:
        cut = _bf16_cut if target.startswith("gfx") else _bf16_rne
        ua, ub = cut(_scaled(a, fmt, sa, 1)), cut(_scaled(b, fmt, sb.T, 0))
        want = tc.mma(target, ua, "bfloat16", ub, "bfloat16", acc=acc)
    assert not want.target_dependent.any()
    assert np.array_equal(got, want.bits), f"{int((got != want.bits).sum())} of {got.size} elements differ"
    # the stock interpreter's float32 sum gives other bits on the same input: the comparison can fail
    stock = _run(None, fmt, a, sa, b, sb, acc)
    assert (stock != want.bits).sum() > 0.05 * got.size


@pytest.mark.parametrize("target,how", [("sm100", "native"), ("sm90", "decomposed")])
def test_nvfp4_with_e4m3_scales_per_16_is_the_targets_arithmetic(target, how):
    # sm100: tcgen05 kind::mxf4nvf4.block16 (MMA-Sim's grouped model, the scales read as ue4m3); sm90: the
    # e4m3 scales upcast to bfloat16 (tt.fp_to_fp), each e2m1 element times its scale rounded to bfloat16
    rng = np.random.default_rng(7)
    M, N, K = 128, 16, 64
    a, _, b, _, acc = _inputs(rng, M, N, K, "e2m1fn")
    sa = rng.integers(0x20, 0x48, size=(M, K // 16)).astype(np.uint8)
    sb = rng.integers(0x20, 0x48, size=(N, K // 16)).astype(np.uint8)
    c = torch.from_numpy(acc.copy())
    e4m3 = torch.float8_e4m3fn
    with ft.faithful(target):
        ft.interpreted(tk.mx_dot_kernel)[(1,)](torch.from_numpy(_packed(a, 1)), torch.from_numpy(sa).view(e4m3),
                                               torch.from_numpy(_packed(b, 0)), torch.from_numpy(sb).view(e4m3), c,
                                               M=M, N=N, K=K, FA="e2m1", FB="e2m1", BLOCK=16)
    got = c.numpy().view(np.uint32)
    if how == "native":
        want = tc.mma(target, a, "e2m1fn", b, "e2m1fn", acc=acc, a_scales=sa, b_scales=sb.T, scale_fmt="e4m3fn")
    else:
        va = reference.decode(a, "e2m1fn") * np.repeat(reference.decode(sa, "e4m3fn"), 16, axis=1)
        vb = reference.decode(b, "e2m1fn") * np.repeat(reference.decode(sb, "e4m3fn"), 16, axis=1).T
        want = tc.mma(target, _bf16_rne(va), "bfloat16", _bf16_rne(vb), "bfloat16", acc=acc)
    assert np.array_equal(got, want.bits), f"{int((got != want.bits).sum())} of {got.size} elements differ"


def test_the_upcast_rounds_scales_and_specials_as_each_target_compiles_them():
    # rows: scale codes 0 (2^-127), 127, 255 (NaN), 100; columns: e4m3 1.875 * 2^-6 (at 2^-127: 1.875 bfloat16
    # subnormal units, 2 rounded to nearest even, 1 truncated), the NaN code 0x7F, 1.0, the smallest subnormal
    codes = np.tile(np.array([0x0F, 0x7F, 0x38, 0x01] * 8, np.uint8), (4, 1))
    scales = np.array([[0], [127], [255], [100]], np.uint8)
    v = _scaled(codes, "e4m3fn", scales, 1)
    nvidia = ds.upcast("sm90", codes, "e4m3fn", scales)
    assert _same(nvidia, _bf16_rne(v))
    assert nvidia[0, 0] == 0x0002 and nvidia[0, 3] == 0x0000  # 1.875 -> 2 units; 2^-136 -> +0
    amd = ds.upcast("gfx942", codes, "e4m3fn", scales)
    # AMD: the e4m3 NaN code decoded as 480 (shift and multiply by 2^120 under nnan), the product truncated,
    # 0x7FC0 where the scale code is 255
    v_amd = np.where(codes == 0x7F, 480.0, reference.decode(codes, "e4m3fn")) * np.exp2(
        np.maximum(scales.astype(np.float64), 0) - 127)
    want = np.where(scales == 255, np.uint16(0x7FC0), _bf16_cut(v_amd))
    assert _same(amd, want) and amd[0, 0] == 0x0001 and amd[1, 1] == 0x43F0  # 480.0
    assert not np.array_equal(nvidia, amd)
    # e5m2: NVIDIA decodes Inf through mul.rn.bf16x2 by 2^112 (65536), AMD's scaled upcast keeps it
    inf = np.full((1, 32), 0x7C, np.uint8)
    one = np.full((1, 1), 127, np.uint8)
    assert ds.upcast("sm100", inf, "e5m2", one)[0, 0] == 0x4780  # 65536.0
    assert ds.upcast("gfx942", inf, "e5m2", one)[0, 0] == 0x7F80  # +Inf
    # fast_math: NVIDIA's scale code 255 stays +Inf (no fma), AMD's fma still makes it NaN
    fast = ds.upcast("sm90", codes, "e4m3fn", scales, fast_math=True)
    assert fast[2, 0] == 0x7F80 and _same(fast[2, 1:2], np.array([0x7FC0], np.uint16))
    assert _same(ds.upcast("gfx942", codes, "e4m3fn", scales, fast_math=True), amd)


def test_a_nan_scale_makes_its_rows_nan_and_gfx950_is_bracketed():
    rng = np.random.default_rng(3)
    a, sa, b, sb, acc = _inputs(rng, 128, 16, 64, "e4m3fn")
    sa[5, 1] = 255
    for target in ("sm100", "sm90"):
        got = _run(target, "e4m3fn", a, sa, b, sb, acc).view(np.float32)
        assert np.isnan(got[5]).all() and not np.isnan(np.delete(got, 5, axis=0)).any()
    # fast_math on NVIDIA's decomposition: no fma, the scale stays +Inf: row 5 is +-Inf (or NaN where +Inf and
    # -Inf products meet); the native tcgen05 MMA reads code 255 as NaN whatever fast_math says
    a[5, 32:] = 0x38  # 1.0: every product of the block has the sign of B's element
    b[32:, :] = np.where(np.arange(16) % 2, 0x38, 0xB8)[None, :]  # +1 and -1 columns
    fast = _run("sm90", "e4m3fn", a, sa, b, sb, acc, fast=True).view(np.float32)
    assert np.array_equal(fast[5], np.where(np.arange(16) % 2, np.inf, -np.inf).astype(np.float32))
    assert np.isnan(_run("sm100", "e4m3fn", a, sa, b, sb, acc, fast=True).view(np.float32)[5]).all()
    from fp8check.triton import ops

    with ops.bracket("lo") as count:
        got = _run("gfx950", "e4m3fn", a, sa, b, sb, acc).view(np.float32)
    assert count and all("target-dependent" in k for k in count), count
    assert np.isnan(got).any()  # the lo run: bracketed elements NaN


def test_fp16_operands_stay_with_the_float32_path_and_bad_shapes_are_refused():
    with pytest.raises(InvalidValueError, match="fp16"):
        ds.dot_scaled("sm90", np.zeros((2, 32), np.uint16), "float16", np.zeros((32, 2), np.uint8), "e4m3fn")
    with pytest.raises(InvalidValueError, match="scale blocks"):
        ds.dot_scaled("sm90", np.zeros((2, 48), np.uint8), "e4m3fn", np.zeros((48, 2), np.uint8), "e4m3fn",
                      a_scales=np.zeros((2, 2), np.uint8), b_scales=np.zeros((2, 2), np.uint8))


def test_gfx950s_native_scaled_mfma_is_a_bracket_exact_only_where_every_datapath_agrees():
    ones = np.full((32, 64), 0x38, np.uint8)  # 1.0
    scales = np.full((32, 2), 127, np.uint8)
    assert ds.lowering("gfx950", 32, 32, 64, "e4m3fn", "e4m3fn", True) == "native"
    r = ds.dot_scaled("gfx950", ones, "e4m3fn", ones.T.copy(), "e4m3fn", a_scales=scales, b_scales=scales)
    assert r.model.name == "gfx950-mfma-scale-f8f6f4" and r.model.status == "bracketed"
    assert not r.target_dependent.any() and (r.values == 64).all()  # every term on the grid: any datapath gives 64
    a, sa, b, sb, acc = _inputs(np.random.default_rng(4), 32, 32, 64, "e4m3fn")
    r = ds.dot_scaled("gfx950", a, "e4m3fn", b, "e4m3fn", a_scales=sa, b_scales=sb, acc=acc)
    assert r.target_dependent.any()


def test_scales_fp8check_has_no_model_of_are_refused_in_one_line_not_summed_in_float32():
    # e4m3 scales (NVFP4's) on e4m3 elements at a tile sm100 takes natively: no tcgen05 kind takes them
    rng = np.random.default_rng(6)
    a, _, b, _, acc = _inputs(rng, 128, 16, 64, "e4m3fn")
    s = torch.full((128, 2), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)  # 1.0
    c = torch.from_numpy(acc.copy())
    args = (torch.from_numpy(a).view(torch.float8_e4m3fn), s, torch.from_numpy(b).view(torch.float8_e4m3fn),
            s[:16], c)
    with ft.faithful("sm100"), pytest.raises(ft.UnsupportedConversionError, match="e4m3fn scales on sm100"):
        ft.interpreted(tk.mx_dot_kernel)[(1,)](*args, M=128, N=16, K=64, FA="e4m3", FB="e4m3")

"""The faithful interpreter divides as sm90 does (fp8check.triton.nvidia_approx wired into its ``/``).

A quantizer whose scale is ``amax / fp8_max`` with ``fp8_max`` a run-time float (448.0), as vLLM, SGLang
and FBGEMM pass it: on the H200 that scale is ``fl(amax * fl(1/448))`` in every group measured (FACTS
2026-12-05), so the interpreter must give exactly that, in every bracket run (not target-dependent).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check.triton import nvidia_approx as na, ops  # noqa: E402

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)

import op_kernels as ok  # noqa: E402
import triton_kernels as tk  # noqa: E402

F = np.float32
# row maxima whose scale differs from the correctly rounded quotient (FACTS 2026-12-02, docs/zoo.md), and others
AMAX = np.array([0.56640625, 253952.0, 1.0, 3.0, 1e-3, 7.25, 100.5, 12345.678], F)


def _rows(amax: np.ndarray, n: int = 32, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (amax.size, n)).astype(F) * amax[:, None]
    x[:, 3] = amax  # the row's maximum, exactly
    return torch.from_numpy(np.clip(x, -amax[:, None], amax[:, None]))


def _scales(target: str, x: torch.Tensor, **kw) -> list[np.ndarray]:
    with ft.faithful(target):
        return [s.numpy().view(np.uint32) for _, s in ops.bracketed_runs(lambda: tk.rowwise_runtime_max(x.clone(), **kw))]


def test_a_run_time_division_by_448_gives_exact_scales_on_sm90():
    runs = _scales("sm90", _rows(AMAX))
    want = (AMAX * (F(1) / F(448))).view(np.uint32)
    ieee = (AMAX / F(448)).view(np.uint32)
    assert (want != ieee).sum() >= 2  # the inputs tell the two apart
    for scales in runs:  # one run, or three that agree: not target-dependent
        assert [f"{v:08X}" for v in scales] == [f"{v:08X}" for v in want]


def test_the_codes_divide_by_the_run_time_scale_within_its_bracket():
    x = _rows(AMAX)
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: tk.rowwise_runtime_max(x.clone()))
    assert len(runs) in (1, 3)
    # every code is the cast of fl(x' * r) for a reciprocal r of the scale within 1 ulp: rn/lo/hi bracket them
    codes = np.stack([y.view(torch.uint8).numpy() for y, _ in runs])
    assert (codes == codes[0]).mean() > 0.9


def test_a_correctly_rounded_quotient_would_be_caught():
    # what the interpreter computed before: fl(amax / 448) for a loaded divisor
    got = _scales("sm90", _rows(AMAX))[0]
    assert (got != (AMAX / F(448)).view(np.uint32)).sum() >= 2


def test_amd_divides_correctly_rounded():
    for scales in _scales("gfx942", _rows(AMAX), fp8_max=240.0):
        assert [f"{v:08X}" for v in scales] == [f"{v:08X}" for v in (AMAX / F(240)).view(np.uint32)]


def test_a_chained_division_is_exact_with_the_measured_table():
    # every mantissa's reciprocal measured: 1.0 / (448 / amax) is one run for any amax
    amax = np.array([0.7071, 3.3, 1.0], F)
    runs = _scales("sm90", _rows(amax), chained=True)
    inner = F(448) * _rcp(amax)
    assert len(runs) == 1 and [f"{v:08X}" for v in runs[0]] == [f"{v:08X}" for v in (F(1) * _rcp(inner)).view(np.uint32)]


def _rcp(b):
    return na.mufu_rcp(np.asarray(b, F))[0].astype(F)


def test_a_chained_division_follows_the_same_model(partial_reciprocals):
    # 1.0 / (448 / amax): two div.full.f32; exact where both reciprocals are known (amax a power of two:
    # 448 / 2^k = 1.75 * 2^(8-k), whose reciprocal mantissa the table has), bracketed otherwise
    amax = np.array([1.0, 4.0, 0.5, 1024.0], F)
    runs = _scales("sm90", _rows(amax), chained=True)  # three runs: the codes' x / scale stays bracketed
    inner = F(448) * (F(1) / amax)  # fl(448 * rcp(amax)), exact
    want = F(1) * (F(1) / inner)
    for scales in runs:
        assert [f"{v:08X}" for v in scales] == [f"{v:08X}" for v in want.view(np.uint32)]
    other = _scales("sm90", _rows(np.array([0.7071, 3.3], F)), chained=True)
    assert len(other) == 3 and (other[1] != other[2]).all()  # amax's reciprocal is not known: bracketed


@pytest.mark.parametrize("op", ["sqrt", "rsqrt"])
def test_square_roots_are_exact_on_sm90_for_every_input_and_bracketed_where_not_measured(op):
    # MUFU.SQRT/RSQ measured for every float32 on the H200 (the root tables): one run on sm90, whatever the
    # input; sm100 runs the same instruction, not measured: bracketed
    x = np.array([2.0, 3.0, 0.1, 1e-30, 7e37, 2.0 ** -130, 0.0, -1.0, np.inf], F).view(np.uint32)
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one(op, x, launch=ft.interpreted))
    assert len(runs) == 1
    want = na.mufu_root(op, np.abs(x.view(F)))  # the op kernel takes the root of |a|
    assert [f"{b:08X}" for b in runs[0]] == [f"{b:08X}" for b in want.view(np.uint32)]
    with ft.faithful("sm100"):
        assert len(ops.bracketed_runs(lambda: ok.run_one(op, x[:1], launch=ft.interpreted))) == 3


@pytest.mark.parametrize("op, exact_inputs, other", [
    ("exp2", (3.0, -2.0, 0.0, -130.0), 0.5),
    ("log2", (8.0, 0.5, 2.0 ** -149), 3.0)])
def test_approximate_functions_are_exact_on_the_inputs_whose_result_is_known(op, exact_inputs, other):
    # ex2 of an integer, log2 of 2^k: measured on the H200, one run, not target-dependent
    x = np.array(exact_inputs, F).view(np.uint32)
    with ft.faithful("sm90"):
        runs = ops.bracketed_runs(lambda: ok.run_one(op, x, launch=ft.interpreted))
        assert len(runs) == 1
        assert len(ops.bracketed_runs(lambda: ok.run_one(op, np.array([other], F).view(np.uint32),
                                                          launch=ft.interpreted))) == 3
    v = np.array(exact_inputs, np.float64)
    f = {"exp2": np.exp2, "sqrt": np.sqrt, "rsqrt": lambda w: 1 / np.sqrt(w), "log2": np.log2}[op]
    want = f(v).astype(F)
    if op == "exp2":
        want = np.where(np.abs(want) < F(2.0 ** -126), F(0), want).astype(F)  # ftz: 2^-130 -> 0
    assert [f"{b:08X}" for b in runs[0]] == [f"{b:08X}" for b in want.view(np.uint32)]

"""torchao 0.18's real scaling code under check_quantizer.

What conforms is asserted; what diverges is ``xfail(strict=True)`` with the
upstream issue (or a note that none was found), so the suite notices a fix.
The Triton per-group kernels run in the Triton interpreter in a child
process (the interpreter must be switched on before triton is imported).
"""

import json
from pathlib import Path
import os
import subprocess
import sys

import pytest

from fp8check import quantizers
from fp8check.quantizers import adapters
from fp8check.quantizers.conformance import check_quantizer

pytest.importorskip("torchao")
torch = pytest.importorskip("torch")

FAST = dict(max_examples=25)
NO_ISSUE = "no upstream issue found (searched pytorch/ao issues and PRs)"


@pytest.mark.parametrize("fmt", ["e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"])
def test_torchao_tensorwise_conforms_and_one_inf_zeroes_the_tensor(fmt):
    result = check_quantizer(adapters.torchao_tensorwise(fmt), "torchao-tensorwise", fmt=fmt, **FAST)
    assert result.passed, result.divergences[:2]
    worst = result.extra["blast_radius"]["worst_case"]
    assert (worst["lost"], worst["finite"]) == (65535, 65535)  # the H200 observation, on the CPU


@pytest.mark.parametrize("dim, name", [(-1, "torchao-rowwise"), (0, "torchao-colwise")])
def test_torchao_axiswise_conforms(dim, name):
    result = check_quantizer(adapters.torchao_axiswise(dim=dim), name, **FAST)
    assert result.passed, result.divergences[:2]
    assert result.extra["blast_radius"]["finite_values_lost"] > 0  # a row/column with Inf is lost


def test_torchao_against_the_robust_recipe_is_a_nonfinite_divergence():
    result = check_quantizer(adapters.torchao_tensorwise(), quantizers.get("torchao-tensorwise").replace(nonfinite="finite"),
                             **FAST)
    assert result.categories["nonfinite"] > 0 and result.categories["scale"] == result.categories["codes"] == 0


@pytest.mark.xfail(strict=True, reason="torchao 0.18 round_scales_to_power_of_2 takes floor(log2(scale)) in float32: "
                   "a scale just below 2**k (k >= 3 or k <= -2) rounds up to 2**k; " + NO_ISSUE)
@pytest.mark.parametrize("factory", [lambda: adapters.torchao_tensorwise(pow2=True),
                                     lambda: adapters.torchao_axiswise(dim=-1, pow2=True)], ids=["tensorwise", "rowwise"])
def test_torchao_power_of_two_scales_round_down(factory):
    kernel = factory()
    name = "torchao-tensorwise-pow2" if "tensorwise" in kernel.__name__ else "torchao-rowwise-pow2"
    result = check_quantizer(kernel, name, **FAST)
    assert result.categories["scale"] == 0, [d.detail for d in result.divergences if d.category == "scale"][:2]


def test_torchao_power_of_two_divergence_is_the_float32_log2():
    result = check_quantizer(adapters.torchao_tensorwise(pow2=True), "torchao-tensorwise-pow2", **FAST)
    d = next(d for d in result.divergences if d.category == "scale")
    assert float(d.actual_value) == 2 * float(d.expected_value)  # rounded up, not down


@pytest.mark.parametrize("mode", [pytest.param("floor", marks=pytest.mark.slow), pytest.param("ceil", marks=pytest.mark.slow),
                                  "rceil"])
def test_torchao_to_mx_matches_ordinary_blocks(mode):
    r = quantizers.get(f"mx-e8m0-{mode}")
    result = check_quantizer(adapters.torchao_to_mx(mode=mode), r, **FAST)
    # Everything that diverges is a block with amax below 2**-118, or holding Inf/NaN, or (rceil) a
    # scale one ulp past a power of two.
    for d in result.divergences:
        if d.category == "codes":
            assert "scale 5.877471754111438e-39" in d.detail  # 2**-127
        elif d.category == "scale":
            assert mode == "rceil"


@pytest.mark.xfail(strict=True, reason="torchao 0.18 to_mx divides blocks whose e8m0 scale is 2**-127 by 2**-126 "
                   "(F32_MIN_NORMAL clamp; the source comment cites pytorch/pytorch#125557), so tiny blocks dequantize "
                   "to half their value; RCEIL multiplies such blocks by 1.0 instead of 2**127")
@pytest.mark.parametrize("mode", [pytest.param("floor", marks=pytest.mark.slow), pytest.param("ceil", marks=pytest.mark.slow),
                                  "rceil"])
def test_torchao_to_mx_tiny_blocks(mode):
    result = check_quantizer(adapters.torchao_to_mx(mode=mode), f"mx-e8m0-{mode}", **FAST)
    assert result.categories["codes"] == 0


@pytest.mark.xfail(strict=True, reason="torchao 0.18 to_mx gives a block holding Inf the scale 2**120 (exponent field "
                   "of Inf minus emax) and clamps Inf to 448, where the OCP MX reference makes the scale NaN; " + NO_ISSUE)
def test_torchao_to_mx_inf_block_has_a_nan_scale():
    result = check_quantizer(adapters.torchao_to_mx(mode="floor"), "mx-e8m0-floor", **FAST)
    assert result.categories["nonfinite"] == 0


@pytest.mark.xfail(strict=True, reason="torchao 0.18 RCEIL takes ceil(log2(amax/max)) in float32: amax one ulp above "
                   "max * 2**k (k >= 4 or k <= -5) gets scale 2**k instead of 2**(k+1); " + NO_ISSUE)
def test_torchao_to_mx_rceil_rounds_up():
    result = check_quantizer(adapters.torchao_to_mx(mode="rceil"), "mx-e8m0-rceil", **FAST)
    assert result.categories["scale"] == 0


# An investigation script outside the package (run from the GPU runner too).
PROBE = Path(__file__).resolve().parents[1] / "gpu" / "torchao_triton_probe.py"


# -- the Triton per-group kernels, interpreted ---------------------------------------------


@pytest.fixture(scope="module")
def probe():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(PROBE), "--max-examples", "10"],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"probe failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def test_probe_refuses_an_unknown_input_set_in_one_line():
    proc = subprocess.run([sys.executable, str(PROBE), "--kinds", "aligned,bogus"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: unknown --kinds bogus (known: aligned, unaligned, large-group, pow2, full)"]


@pytest.mark.slow  # torchao's per-group Triton kernels in the interpreter: a minute and more
def test_triton_per_group_scales_conform_on_aligned_shapes(probe):
    for which in ("rowwise", "colwise"):
        entry = probe[f"{which}/aligned"]
        assert entry["categories"]["scale"] == 0 and entry["bytes_past_end"] == 0, entry
        assert entry["checked"] > 10_000


@pytest.mark.xfail(strict=True, reason="torchao 0.18 jagged kernels mask the scale store with "
                   "tl.arange(0, BLOCK_SIZE) < M instead of the row offsets: when M is not a multiple of BLOCK_SIZE the "
                   "last row block overwrites the next group's first scales and writes past the buffer; " + NO_ISSUE)
@pytest.mark.slow  # torchao's per-group Triton kernels in the interpreter
@pytest.mark.parametrize("which", ["rowwise", "colwise"])
def test_triton_per_group_scales_on_unaligned_shapes(probe, which):
    entry = probe[f"{which}/unaligned"]
    assert entry["bytes_past_end"] == 0 and entry["categories"]["scale"] == 0, entry


@pytest.mark.slow  # the torchao probe: its Triton kernels in the interpreter
def test_triton_per_group_unaligned_overrun_is_measured(probe):
    entry = probe["rowwise/unaligned"]
    assert entry["bytes_past_end"] > 0 and entry["categories"]["scale"] > 0
    assert "447999985582080.0" == entry["first"]["scale"]["actual_value"]  # 448/eps from a row that does not exist


@pytest.mark.slow  # the torchao probe: its Triton kernels in the interpreter
@pytest.mark.xfail(strict=True, reason="torchao 0.18 triton_fp8_per_group_colwise_scales sizes its fused one-pass "
                   "kernel from ceil(rows/groups), so rows of a group larger than that are neither in the amax nor "
                   "written; " + NO_ISSUE)
def test_triton_colwise_fused_kernel_covers_large_groups(probe):
    assert probe["colwise/large-group"]["categories"]["scale"] == 0


@pytest.mark.slow  # the torchao probe: its Triton kernels in the interpreter
@pytest.mark.xfail(strict=True, reason="torchao 0.18 triton_fp8_per_group_rowwise_scales writes element (r, c) to "
                   "out[r + c] (STRIDE_OUTPUT_ROW=1): pytorch/ao#4900")
def test_triton_rowwise_codes(probe):
    assert probe["rowwise/aligned"]["categories"]["codes"] == 0


@pytest.mark.slow  # the torchao probe: its Triton kernels in the interpreter
@pytest.mark.xfail(strict=True, reason="the Triton 3.9 interpreter's fp8 casts round ties away and lose mantissa "
                   "carries (triton-lang/triton#11897, #8322), so interpreted codes differ from RNE")
def test_triton_colwise_codes_in_the_interpreter(probe):
    assert probe["colwise/aligned"]["categories"]["codes"] == 0


@pytest.mark.slow  # the torchao probe: its Triton kernels in the interpreter
@pytest.mark.xfail(strict=True, reason="torchao 0.18 jagged kernels round scales to powers of two with "
                   "exp2(floor(log2(s))) in float32 (as round_scales_to_power_of_2); " + NO_ISSUE)
@pytest.mark.parametrize("which", ["rowwise", "colwise"])
def test_triton_power_of_two_scales(probe, which):
    assert probe[f"{which}-pow2/pow2"]["categories"]["scale"] == 0

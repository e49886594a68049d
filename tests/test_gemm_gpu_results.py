"""The GPU run of verbatim FP8 GEMMs (gpu/gemm.py, a part of gpu/run_all.sh): compiled on an H100/H200 against
fp8check's faithful sm90 interpreter on the same codes and scales. Skips until gpu/results/gemm.json is
committed from such a run."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "gpu" / "results"


# gemm.json: the run the K-order rule was made from; the rerun, at a later commit, got other autotuner configs;
# the torchao run: its two blockwise training GEMMs (K rounded up to 128, as declared) beside the control;
# the rescaled run: the planted kernel of the rescaled epilogue (its ratios through sm90's div.full.f32); the
# k64/product run: 64-wide K tiles of 128-wide scale blocks each scaled on its own, and the scales' product first;
# the f24c7c9 run: DeepSeek-V3's and torchao's verbatim GEMMs at a later commit (no control: a shorter call); the
# f8839d0 runs: every verbatim GEMM with the faithful side's tl.dot tiles through the compiled column lanes
@pytest.mark.parametrize("name,verbatim,control", [("gemm.json", 4, "planted_block_gemm"),
                                                   ("gemm-h100-rerun-9a3f802.json", 4, "planted_block_gemm"),
                                                   ("gemm-h100-torchao.json", 2, "planted_block_gemm"),
                                                   ("gemm-h200-rescaled.json", 0, "planted_rescaled_gemm"),
                                                   ("gemm-h100-k64-product.json", 0, "planted_block_gemm_k64"),
                                                   ("gemm-h100-f24c7c9.json", 3, None),
                                                   ("gemm-h100-3fe930e.json", 4, None),
                                                   ("gemm-h100-sglang-3fe930e.json", 2, None),
                                                   ("gemm-h100-f8839d0.json", 4, "planted_block_gemm"),
                                                   ("gemm-h100-sglang-f8839d0.json", 2, None)])
def test_compiled_gemms_equal_the_faithful_interpreter_bit_for_bit(name, verbatim, control):
    results = HERE / name
    if not results.exists():
        pytest.skip(f"gpu/results/{name} not committed yet (run gpu/run_all.sh gemm on a CUDA machine)")
    data = json.loads(results.read_text())
    assert "H100" in data["device"] or "H200" in data["device"], data["device"]
    ran = [k for k in data["kernels"] if "skipped" not in k and k["elements"]]
    assert control is None or any(k["kernel"] == control for k in ran), "the control kernel did not run"
    assert len([k for k in ran if not k["kernel"].startswith("planted")]) >= verbatim, "too few verbatim GEMMs ran"
    for k in ran:
        assert k["compiled_vs_faithful"] == 0, (k["kernel"], k["cases"])
        assert k["compiled_vs_reference"] == 0, (k["kernel"], k["cases"])
        for case in k["cases"]:
            if "error" in case:  # the project's own import hiccup, or a feature this Triton's interpreter lacks
                assert case["error"].startswith(("ZooUnavailable", "TritonFeatureError")), case
                continue
            # the instruction matters: the reference under sm90's other tl.dot instruction differs
            (other, differ), = case["compiled_vs_other_instruction"].items()
            assert differ > 0, (k["kernel"], case["case"], other)
    # a kernel that did not run says why in one line: tl.dot_scaled under 3.6's interpreter, or its project not
    # carried in that call (SGLang's tree is carried in a call of its own: the -sglang- files)
    for k in data["kernels"]:
        if "skipped" not in k and not k["elements"]:
            assert all(c["error"].startswith(("TritonFeatureError", "ZooUnavailable")) for c in k["cases"]), k["kernel"]


def test_the_gpu_run_takes_the_examples_sm90_gemms_with_their_declared_k():
    # gpu/gemm.py reads examples/real-kernels' table (declared_kernels.py): every sm90 GEMM there runs compiled,
    # its K rounded up as declared (torchao's 128), and no gfx942 one
    script = runpy.run_path(str(HERE.parents[0] / "gemm.py"))
    kernels = script["KERNELS"]
    assert {"deepseek_fp8_gemm_sm90", "sglang_scaled_mm_sm90", "torchao_blockwise_gemm_sm90"} <= set(kernels)
    assert not [n for n in kernels if n.endswith("gfx942")]
    assert kernels["torchao_blockwise_gemm_1x128_128x1_sm90"][1:] == ("block-1x128-1x128", None, 128)
    assert kernels["deepseek_fp8_gemm_sm90"][3] == 1 and kernels["planted_rescaled_gemm"][2] == "rescaled"

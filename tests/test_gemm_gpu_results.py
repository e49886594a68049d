"""The GPU run of verbatim FP8 GEMMs (gpu/gemm.py, a part of gpu/run_all.sh): compiled on an H100/H200 against
fp8check's faithful sm90 interpreter on the same codes and scales. Skips until gpu/results/gemm.json is
committed from such a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "gpu" / "results" / "gemm.json"


def test_compiled_gemms_equal_the_faithful_interpreter_bit_for_bit():
    if not RESULTS.exists():
        pytest.skip("gpu/results/gemm.json not committed yet (run gpu/run_all.sh gemm on a CUDA machine)")
    data = json.loads(RESULTS.read_text())
    ran = [k for k in data["kernels"] if "skipped" not in k]
    assert any(k["kernel"] == "planted_block_gemm" for k in ran), "the control kernel did not run"
    for k in ran:
        assert k["elements"] > 0, k
        assert k["compiled_vs_faithful"] == 0, (k["kernel"], k["cases"])
        assert k["compiled_vs_reference"] == 0, (k["kernel"], k["cases"])

"""One ``tl.dot`` per program compiled on an H100/H200 (gpu/mma_tiles.py, a part of gpu/run_all.sh) against the
tensor-core models: the stored counts, and the stored output bits of the first tiles recomputed here from the
regenerated inputs. The GPU part skips until gpu/results/mma-tiles.json is committed from such a run; the
script's plumbing runs on a CPU (the faithful interpreter standing in for the GPU)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "gpu" / "results" / "mma-tiles.json"
BITS = ROOT / "gpu" / "results" / "mma-tiles.npz"
sys.path.insert(0, str(ROOT / "gpu"))

import mma_tiles  # noqa: E402


@pytest.fixture(scope="module")
def stored() -> dict:
    if not RESULTS.exists():
        pytest.skip("gpu/results/mma-tiles.json not committed yet (run gpu/run_all.sh mma-tiles on a CUDA machine)")
    return json.loads(RESULTS.read_text())


def test_the_tiles_ran_on_a_hopper_gpu_with_each_instruction_kind(stored):
    assert stored["provenance"]["device"] == "cuda" and "H" in stored["provenance"]["gpu"]
    rows = {r["config"]: r for r in stored["configs"]}
    assert set(rows) == set(mma_tiles.CONFIGS), "a configuration did not run"
    for name, r in rows.items():
        if name in mma_tiles.REFUSED:  # Triton's frontend refuses it on the GPU, as its source says
            assert r["error"].startswith("CompilationError"), r
            continue
        assert "error" not in r, r
        assert r["elements"] >= 1 << 20
        word = "wgmma.mma_async" if name.startswith("wgmma") else "mma.sync"
        assert any(i.startswith(word) for i in r["instructions"]), (name, r["instructions"])


def test_every_tile_element_is_the_models(stored):
    off = {r["config"]: (r["mismatches"], r["examples"][:3]) for r in stored["configs"] if r.get("mismatches")}
    assert sum(r.get("elements", 0) for r in stored["configs"]) >= 10 << 20
    assert not off, off


def test_the_stored_bits_are_the_models_recomputed_here(stored):
    drawn = {r["config"]: r["tiles"] for r in stored["configs"] if "tiles" in r}
    with np.load(BITS) as z:
        for name, got in z.items():
            tiles = got.shape[0]
            fmt = mma_tiles.CONFIGS[name][0]
            a, b, c = mma_tiles.tile_inputs(name, drawn[name], seed=stored["seed"])  # as the run drew them
            want, _ = mma_tiles.model_outputs(name, a[:tiles], b[:tiles], c[:tiles])
            assert not mma_tiles._compare(got, want).any(), name
            # and a model one fractional bit short is not (the comparison can fail)
            if name == "mma16-float16-k16":
                from dataclasses import replace

                from fp8check.matmul import tensorcore

                short = replace(tensorcore.SM90_MMA_16, fraction_bits=24)
                rows, cols = tensorcore.tile_instances(a[:tiles], b[:tiles])
                res = tensorcore.dot_instances(short, rows, fmt, cols, fmt, c[:tiles].reshape(-1).view(np.float32))
                assert mma_tiles._compare(got, res.values.view(np.uint32).reshape(got.shape)).any()


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="the faithful interpreter needs triton")
def test_the_script_runs_on_a_cpu_with_the_interpreter_standing_in(tmp_path):
    assert mma_tiles.main(["--interpret", "--elements", "1024", "--out", str(tmp_path),
                           "--config", "mma16-e4m3fn-k32", "--config", "wgmma-e4m3fn-k32"]) == 0
    report = json.loads((tmp_path / "mma-tiles.json").read_text())
    rows = {r["config"]: r for r in report["configs"]}
    assert rows["mma16-e4m3fn-k32"]["model"] == "sm90-mma-16bit"
    assert rows["wgmma-e4m3fn-k32"]["model"] == "sm90-wgmma-fp8"
    assert all(r["mismatches"] == 0 and r["elements"] >= 1024 for r in rows.values())
    with np.load(tmp_path / "mma-tiles.npz") as z:
        assert set(z.files) == set(rows)


def test_the_comparison_takes_nan_by_class_and_minus_zero_apart():
    nan_a, nan_b = np.uint32(0x7FFFFFFF), np.uint32(0xFFC00000)
    got = np.array([nan_a, 0x80000000, 0x3F800000], np.uint32)
    want = np.array([nan_b, 0x00000000, 0x3F800000], np.uint32)
    assert mma_tiles._compare(got, want).tolist() == [False, True, False]

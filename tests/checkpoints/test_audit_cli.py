"""The command line: exit codes, the JSON contract, parallel modes agree."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from checkpoint_builders import codes, fp8, plant, quantize, save_st, write_json
from fp8check.checkpoints import AuditOptions, audit
from fp8check.terminal.progress import RichProgress
from fp8check.cli import main


@pytest.fixture
def files(tmp_path):
    q, s = quantize(torch.randn(64, 128), "e4m3fn", "rowwise")
    clean = save_st(tmp_path / "clean" / "m.safetensors", {"l.weight": q, "l.weight_scale": s})
    nan = save_st(tmp_path / "nan" / "m.safetensors", {"l.weight": fp8(plant(codes((8, 8)), 0x7F, 1)),
                                                       "l.weight_scale": torch.tensor(1.0)})
    warn = save_st(tmp_path / "warn" / "m.safetensors", {"l.weight": fp8(codes((8, 8)))})
    # SCALE_MISSING is a warning only where the config says the model was saved in FP8 (without it: an error)
    write_json(tmp_path / "warn" / "config.json", {"torch_dtype": "float8_e4m3fn"})
    return {"clean": clean, "nan": nan, "warn": warn}


def test_exit_codes(files, capsys):
    assert main(["audit", files["clean"], "-q"]) == 0
    assert main(["audit", files["nan"], "-q"]) == 1
    assert main(["audit", files["warn"], "-q"]) == 0
    assert main(["audit", files["warn"], "-q", "--fail-on", "warning"]) == 1
    assert main(["audit", files["clean"], files["nan"], "-q"]) == 1
    for bad in (["--target", "mi999"], ["--jobs", "0"], ["--bytes-format", "e8m0"], ["--fail-on", "info"]):
        try:
            rc = main(["audit", files["clean"], "-q", *bad])
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code
        assert rc == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_json_contract(files, tmp_path):
    out = tmp_path / "r.json"
    assert main(["audit", files["nan"], "--json", str(out), "-q", "--target", "mi300,h100"]) == 1
    r = json.loads(out.read_text())
    assert {"files", "summary", "tensors", "portability", "finding_codes", "environment"} <= set(r)
    assert {"tensors", "fp8_tensors", "errors", "warnings"} <= set(r["summary"])
    assert r["summary"]["errors"] == 1 and r["summary"]["fp8_tensors"] == 1
    t = [t for t in r["tensors"] if t["name"] == "l.weight"][0]
    assert {"name", "file", "dtype", "format", "shape", "scale", "findings", "stats"} <= set(t)
    assert t["findings"][0] == {"code": "NAN_CODES", "severity": "error", "count": 1,
                                "message": "1 of 64 codes is NaN in e4m3fn"}
    # the rest: values beyond ±240 that a plain cast to e4m3fnuz makes NaN (torch's own cast, counted), info
    fn = torch.from_numpy(np.ascontiguousarray(plant(codes((8, 8)), 0x7F, 1))).view(torch.float8_e4m3fn)
    made_nan = int(torch.isnan(fn.to(torch.float8_e4m3fnuz).float()).sum() - torch.isnan(fn.float()).sum())
    assert [(f["code"], f["severity"], f["count"]) for f in t["findings"][1:]] == [
        ("FNUZ_PLAIN_CAST", "info", made_nan)] and made_nan > 0
    assert len(t["stats"]["histogram"]) == 256
    assert [p["target"] for p in r["portability"]] == ["mi300", "h100"]
    assert set(r["finding_codes"]["NAN_CODES"]) == {"severity", "title", "rule"}


def test_json_to_stdout_and_quiet_stderr(files):
    proc = subprocess.run([sys.executable, "-m", "fp8check", "audit", files["clean"], "--json", "-"],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["summary"]["fp8_tensors"] == 1
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal


def test_terminal_output_names_findings_and_verdicts(files, capsys):
    assert main(["audit", files["nan"], "--target", "mi300"]) == 1
    out = capsys.readouterr().out
    assert "NAN_CODES" in out and "l.weight" in out and "runs after conversion" in out
    assert "the conversion keeps it NaN" in out and "exit 1" in out  # one NaN code: "it", not "them"


def test_progress_bar_runs(files, capsys):
    r = audit([files["clean"]], AuditOptions(jobs=1), RichProgress(enabled=True))
    assert r.summary.fp8_tensors == 1


def test_parallel_modes_and_chunking_agree(tmp_path):
    paths = []
    for i in range(3):
        c = plant(codes((512, 300), seed=i), 0x7F, i + 1)
        paths.append(save_st(tmp_path / f"s{i}.safetensors", {"w.weight": fp8(c), "w.weight_scale": torch.ones(512, 1)}))

    def hists(**kw):
        r = audit(paths, AuditOptions(**kw)).to_dict()
        return [(t["file"], t["stats"]["histogram"]) for t in r["tensors"] if t["stats"]]

    base = hists(jobs=1)
    assert hists(jobs=2, chunk_bytes=4096) == base  # many chunks on two threads
    # one spawned worker for the three files: each worker pays torch's import (about 3 CPU seconds here)
    assert hists(jobs=1, parallel="processes") == base
    # and the histogram itself against numpy
    for path, h in base:
        from safetensors import safe_open

        with safe_open(path, "pt") as f:
            b = f.get_tensor("w.weight").view(torch.uint8).numpy()
        assert h == np.bincount(b.reshape(-1), minlength=256).tolist()

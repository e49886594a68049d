"""Issue 32: the input dtypes a cast accepts, checked by default; decode and dequant kernels as declared kinds.

Every planted bug (tests/kind_kernels.py) is watched failing here, and its fixed twin conforming.
"""

import json
import sys
from pathlib import Path

import pytest

from fp8check import cli

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

_QUICK = ["--max-examples", "5"]


def _check(argv, tmp_path, name="r.json"):
    out = tmp_path / name
    code = cli.main(["check", *argv, *_QUICK, "--json", str(out)])
    doc = json.loads(out.read_text())
    return code, doc.get("checks", [doc])


def test_a_cast_rounding_float64_twice_is_caught_by_default(tmp_path, capsys):
    code, checks = _check(["kind_kernels:double_rounding_f64", "--format", "e4m3fn", "--profile", "satfinite"], tmp_path)
    assert code == cli.EXIT_DIVERGED
    assert [c["input_dtype"] for c in checks] == ["float32", "float16", "bfloat16", "float64"]
    f64 = checks[3]
    assert not f64["passed"] and f64["categories"].get("rounding", 0) > 0
    assert all(c["passed"] for c in checks[:3])
    assert "--input-dtype float64" in f64["command"]


def test_its_twin_rounding_float64_once_conforms_by_default(tmp_path, capsys):
    code, checks = _check(["kind_kernels:rounds_f64_once", "--format", "e4m3fn", "--profile", "satfinite"], tmp_path)
    assert code == cli.EXIT_OK
    assert [c["input_dtype"] for c in checks] == ["float32", "float16", "bfloat16", "float64"]


def test_the_verdict_line_names_the_input_dtypes_not_checked(tmp_path, capsys):
    code, checks = _check(["kind_kernels:float32_only", "--format", "e4m3fn", "--profile", "satfinite"], tmp_path)
    assert code == cli.EXIT_OK and [c["input_dtype"] for c in checks] == ["float32"]
    verdict = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("CONFORMS"))
    for d in ("float16", "bfloat16", "float64"):
        assert f"({d} not checked: the kernel refuses {d} inputs)" in verdict, verdict


def test_a_builtin_adapter_names_float64_as_not_checked(capsys):
    assert cli.main(["check", "ml_dtypes", "--format", "e4m3fnuz", "--max-examples", "0"]) == cli.EXIT_OK
    verdicts = [line for line in capsys.readouterr().out.splitlines() if line.startswith("CONFORMS")]
    assert verdicts and all("(float64 not checked: give --input-dtype float64)" in v for v in verdicts), verdicts

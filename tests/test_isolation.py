"""Crash isolation (issue 21, item 4): ``isolate = true`` / ``--isolate`` checks a kernel in a child process,
so a kernel that segfaults or aborts (here through ctypes: a read of address 0, libc's abort) becomes a
``crashed`` finding with the inputs of its last call, and the pytest run, its JSON and its HTML report survive.
Also the declaration keys the example repository of real quantizers uses: ``requires`` (skip with the reason
when a package is absent) and ``known-divergence`` (a strict xfail that fails outright on any other category)."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest_plugins = ["pytester"]

import fp8check.suite  # noqa: E402,F401  (pytester's in-process runs share the outer session's modules)
import jinja2  # noqa: E402,F401  (imported here: pytester unloads what its in-process run imports, and the report needs it)
from fp8check.cli import main  # noqa: E402
from fp8check.declarations import cast_kernel, quantizer_kernel, run_declaration  # noqa: E402

CRASHY = '''
import ctypes
import torch


def _cast(x):
    return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)


def segfaults(x):
    if x.numel() == 4099:  # one of the calls the harness makes (a prime size)
        ctypes.string_at(0)  # reads address 0: SIGSEGV inside C code
    return _cast(x)


def aborts(x):
    if x.numel() == 4099:
        ctypes.CDLL(None).abort()  # libc abort(): SIGABRT
    return _cast(x)


def fine(x):
    return _cast(x)
'''


@pytest.fixture
def crashy(tmp_path, monkeypatch):
    (tmp_path / "crashy.py").write_text(CRASHY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("kernel, sig", [("segfaults", signal.SIGSEGV), ("aborts", signal.SIGABRT)])
def test_a_crash_is_a_finding_with_the_last_inputs(crashy, kernel, sig):
    decl = cast_kernel(f"crashy:{kernel}", format="e4m3fn", profile="satfinite", input_dtypes=("bfloat16",),
                       isolate=True)
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert not r.passed and r.categories == {"crashed": 1}
    crash = r.extra["crash"]
    assert crash["returncode"] == -sig and sig.name in crash["how"]
    d = r.divergences[0]
    assert d.category == "crashed" and "bfloat16 (4099,)" in d.detail and "first values" in d.detail
    saved = np.load(d.condition.removeprefix("inputs saved in "))
    assert saved["arg0"].size == 4099 and int(saved["__call__"]) == crash["call"]
    assert r.command.endswith("--isolate --max-examples 0 --seed 0")


def test_an_isolated_check_that_does_not_crash_gives_the_usual_result(crashy):
    decl = cast_kernel("crashy:fine", format="e4m3fn", profile="satfinite", input_dtypes=("bfloat16",),
                       isolate=True)
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert r.passed and r.checked == 1 << 16 and any("child process" in n for n in r.extra["notes"])


def test_cli_isolate(crashy, capsys):
    code = main(["check", "crashy:segfaults", "--format", "e4m3fn", "--profile", "satfinite", "--input-dtype",
                 "bfloat16", "--isolate", "--max-examples", "0", "--json", "r.json"])
    out = capsys.readouterr().out
    assert code == 1 and "CRASHED" in out and "SIGSEGV" in out and "reproduce: fp8check check crashy:segfaults" in out
    assert json.loads((crashy / "r.json").read_text())["categories"] == {"crashed": 1}


def test_an_unpicklable_kernel_cannot_be_isolated_and_says_why():
    from fp8check.errors import InvalidValueError

    decl = cast_kernel(lambda x: x, format="e4m3fn", isolate=True, name="anon")
    with pytest.raises(InvalidValueError, match="importable by name"):
        run_declaration(decl, input_dtype="bfloat16", max_examples=0)


PYPROJECT = '''
[tool.fp8check]

[[tool.fp8check.cast]]
name = "segfaults"
kernel = "crashy:segfaults"
format = "e4m3fn"
profile = "satfinite"
input-dtypes = ["bfloat16"]
isolate = true

[[tool.fp8check.cast]]
name = "fine"
kernel = "crashy:fine"
format = "e4m3fn"
profile = "satfinite"
input-dtypes = ["bfloat16"]
isolate = true

[[tool.fp8check.quantizer]]
name = "needs_a_package"
kernel = "crashy:fine"
recipe = "rowwise"
requires = ["no_such_package_here"]

[[tool.fp8check.quantizer]]
name = "known_codes"
kernel = "recip:quant"
recipe = "rowwise"
known-divergence = {categories = ["codes"], reason = "multiplies by a reciprocal (planted)"}

[[tool.fp8check.quantizer]]
name = "known_codes_but_scale_wrong"
kernel = "recip:quant"
recipe = "rowwise"
format = "e4m3fnuz"
known-divergence = {categories = ["scale"], reason = "planted: the codes divergence is not this one"}
'''

RECIP = '''
from fp8check import quantizers
from fp8check.quantizers.adapters import torch_quantizer

quant = torch_quantizer(quantizers.get("rowwise").replace(apply="multiply-reciprocal"))
'''


def test_in_pytest_the_crash_fails_one_test_and_the_run_and_report_survive(pytester):
    (pytester.path / "crashy.py").write_text(CRASHY)
    (pytester.path / "recip.py").write_text(RECIP)
    (pytester.path / "pyproject.toml").write_text(PYPROJECT)
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "real_callers or recipe", "--fp8check-json",
                                "out.json", "--fp8check-report", "out.html", "-rsx")
    reports = [r for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    outcome = {r.nodeid.split("[")[1].split("-")[0].rstrip("]"): r.outcome for r in reports}
    assert outcome["segfaults"] == "failed" and outcome["fine"] == "passed"
    assert outcome["known_codes"] == "skipped"  # xfailed (strict): its divergence is the declared one
    assert outcome["known_codes_but_scale_wrong"] == "failed"  # a divergence outside the declared category
    text = result.stdout.str()
    assert "CRASHED" in text and "SIGSEGV" in text
    assert "needs no_such_package_here, which cannot be imported here" in text
    assert "diverges beyond its known divergence" in text
    checks = json.loads((pytester.path / "out.json").read_text())["checks"]
    assert any(c["categories"].get("crashed") == 1 for c in checks)
    assert "segfaults" in (pytester.path / "out.html").read_text()

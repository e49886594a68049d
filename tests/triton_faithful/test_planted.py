"""Planted kernel faults, checked as a kernel author checks them: one pytest session, and the CLI.

``planted/`` is a repository that declares, in its ``pyproject.toml``, Triton kernels with one fault
each (``planted/planted_kernels.py``: a false ``tl.assume``, a launcher stride bug that writes past its
output on a row-padded input, an uninitialised read, a write-write race, one bad config of three in an
autotuned kernel) and two correct autotuned kernels (sm90 and gfx942). One pytest session in a copy of
it (a subprocess, with fp8check's plugin as installed) runs every declared kernel's check to the end
and writes its JSON and HTML report; each fault is a finding of its own category naming the kernel line
marked ``# FAULT: <kind>`` (and the config); every config of the autotuned kernels is checked and has
its verdict in the JSON and the report. ``fp8check check`` does the same from the command line.

The session is slow (minutes: every declared check runs the whole harness once per config in the
interpreter); the CLI test, on float16 inputs, takes seconds."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import triton  # noqa: E402

import fp8check.triton as ft  # noqa: E402

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)

slow = pytest.mark.slow  # the session: minutes
pytest_plugins = ["pytester"]

PLANTED = Path(__file__).resolve().parent / "planted"
SOURCE = (PLANTED / "planted_kernels.py").read_text()
WIDE = "BLOCK=2048, num_warps=8"  # the bad config of autotuned_cast


def fault_line(mark: str) -> str:
    """``planted_kernels.py:LINE`` of the one line whose comment is ``# FAULT: `` + ``mark``."""
    hits = [i + 1 for i, line in enumerate(SOURCE.splitlines()) if line.rstrip().endswith(f"# FAULT: {mark}")]
    assert len(hits) == 1, (mark, hits)
    return f"planted_kernels.py:{hits[0]}"


WIDE_LINE = fault_line("out_of_bounds (BLOCK=2048: the low half's mask)")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One pytest run of every declared check of the planted repository: its output, JSON and HTML."""
    repo = tmp_path_factory.mktemp("planted-repo")
    for name in ("planted_kernels.py", "pyproject.toml"):
        shutil.copy(PLANTED / name, repo / name)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-k", "test_declared",
                          "--fp8check-json", "results.json", "--fp8check-report", "report.html"],
                         cwd=repo, capture_output=True, text=True, timeout=3000)
    checks = {}
    if (repo / "results.json").exists():
        checks = {c["kernel"]: c for c in json.loads((repo / "results.json").read_text())["checks"]}
    html = (repo / "report.html").read_text() if (repo / "report.html").exists() else ""
    return {"out": out, "checks": checks, "html": html}


def faults_of(check: dict) -> list[dict]:
    return check["extra"].get("kernel_faults", [])


@slow
def test_the_session_runs_to_the_end_with_its_report(session):
    out = session["out"]
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]  # tests failed; nothing crashed
    summary = out.stdout.strip().splitlines()[-1]
    assert re.search(r"\b5 failed, 2 passed\b", summary), summary
    assert sorted(session["checks"]) == ["assume_cast", "autotuned_cast", "good_autotuned_cast",
                                         "good_autotuned_cast_fnuz", "racy_tensorwise", "stride_cast", "uninit_cast"]
    assert session["html"].startswith("<!DOCTYPE html>") and "Kernel faults" in session["html"]


@slow
@pytest.mark.parametrize("kernel,kind", [("assume_cast", "false_hint"), ("stride_cast", "out_of_bounds"),
                                         ("uninit_cast", "uninitialised"), ("racy_tensorwise", "race")])
def test_each_planted_fault_is_a_finding_naming_its_line(session, kernel, kind):
    check = session["checks"][kernel]
    assert not check["passed"] and check["categories"].get(kind, 0) > 0
    sites = {f["site"] for f in faults_of(check) if f["kind"] == kind}
    assert sites == {fault_line(kind)}
    f = next(f for f in faults_of(check) if f["kind"] == kind)
    assert f["kernel"].startswith("_") and len(f["program"]) == 3 and f["message"]
    if kind != "false_hint":
        assert f["buffer"] and f["offsets"]
    assert fault_line(kind) in session["html"]
    # the terminal output names it too (the test's failure message is fp8check check's text)
    assert fault_line(kind) in session["out"].stdout


@slow
def test_a_false_assume_names_the_program_and_the_values(session):
    (f,) = [f for f in faults_of(session["checks"]["assume_cast"]) if f["kind"] == "false_hint"]
    assert f["program"] == [0, 0, 0] and "tl.assume(pid > 0)" in f["detail"] and "pid=0" in f["detail"]


@slow
def test_the_stride_bug_writes_nothing_past_the_output_and_is_also_a_race(session):
    """On a row-padded input the rows overlap (a race) and the last ones lie past the output."""
    check = session["checks"]["stride_cast"]
    oob = [f for f in faults_of(check) if f["kind"] == "out_of_bounds"]
    assert oob and all("not performed" in f["detail"] and f["buffer"] == "y_ptr" for f in oob)
    race = [f for f in faults_of(check) if f["kind"] == "race"]
    assert race and {f["site"] for f in race} == {fault_line("out_of_bounds")}


@slow
def test_one_bad_config_among_good_ones_is_named(session):
    check = session["checks"]["autotuned_cast"]
    configs = check["extra"]["triton_configs"]
    assert [c["config"] for c in configs] == ["BLOCK=256", "BLOCK=512", WIDE]
    assert [c["passed"] for c in configs] == [True, True, False]
    assert set(configs[2]["categories"]) == {"out_of_bounds"}
    assert {(f["kind"], f["site"], f["config"]) for f in faults_of(check)} == {
        ("out_of_bounds", WIDE_LINE, WIDE)}
    assert WIDE in session["html"] and f"[config {WIDE}]" in session["out"].stdout


@slow
@pytest.mark.parametrize("kernel", ["good_autotuned_cast", "good_autotuned_cast_fnuz"])
def test_a_correct_autotuned_kernel_conforms_in_every_config(session, kernel):
    check = session["checks"][kernel]
    assert check["passed"] and not faults_of(check)
    configs = check["extra"]["triton_configs"]
    assert [c["config"].split(" (")[0] for c in configs] == ["BLOCK=256", "BLOCK=512", "BLOCK=4096"]
    assert all(c["passed"] for c in configs)
    assert "pruned away for some calls" in configs[2]["config"]  # small inputs run a smaller config


def test_the_cli_reports_a_fault_with_its_line_and_config(tmp_path):
    for name in ("planted_kernels.py", "pyproject.toml"):
        shutil.copy(PLANTED / name, tmp_path / name)
    out = subprocess.run(["fp8check", "check", "planted_kernels:autotuned_cast", "--format", "e4m3fn",
                          "--profile", "triton-sm90", "--triton-target", "sm90", "--input-dtype", "float16",
                          "--max-examples", "0", "--max-numel", "8192", "--json", "cli.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert f"{WIDE_LINE}: program" in out.stdout
    assert f"[config {WIDE}]" in out.stdout and "BLOCK=256: conforms" in out.stdout
    check = json.loads((tmp_path / "cli.json").read_text())  # one check: the result itself
    assert [c["passed"] for c in check["extra"]["triton_configs"]] == [True, True, False]

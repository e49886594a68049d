"""Verbatim public Triton FP8 kernels through ``pytest -m ocp`` / ``-m fnuz``, as a repository using them would.

``examples/real-kernels`` declares AMD aiter's, FBGEMM's, SGLang's,
transformers' (DeepSeek's) and torchao's Triton FP8 kernels under ``sm90`` and
``gfx942``; this test copies it out of the tree and runs ``pytest -m ocp`` and
``pytest -m fnuz`` there for each project whose unpacked packages are in
``$FP8CHECK_ZOO_SITE`` (a folder made by
``examples/real-kernels/fetch-packages.sh``; a project missing there is a
skip naming it), and for torchao, installed as a test dependency. Asserted from the run's JUnit XML and ``--fp8check-json``:
the run ends (no crash, exit 0: every finding is a strict xfail), every
declared kernel of the project was checked, and each kernel's findings are
exactly the categories docs/zoo.md explains for it (``EXPECTED`` in the
example's conftest.py): a new finding or a vanished one fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_kernel_repo import _junit, _token

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "real-kernels"
SITE = "FP8CHECK_ZOO_SITE"
PROJECTS = ("aiter", "fbgemm", "sglang", "transformers", "vllm", "deepseek", "torchao")
INSTALLED = ("torchao",)  # a test dependency pip installs (CI's lanes have it), not a folder of $FP8CHECK_ZOO_SITE


def _example() -> object:
    spec = importlib.util.spec_from_file_location("real_kernels_conftest", EXAMPLE / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_every_declared_kernel_has_its_findings_written_down() -> None:
    conf = _example()
    assert set(conf.EXPECTED) == set(conf.KERNELS)
    for name, cats in conf.EXPECTED.items():
        assert (name in conf.known()) == bool(cats), name
        assert conf.failing_tests(name) and all(t.startswith("test_") for t in conf.failing_tests(name)), name
    assert set(conf.FAILS) <= set(conf.KERNELS)
    assert {n.split("_")[0] for n in conf.KERNELS} == set(PROJECTS)
    triton_kernels = {(spec[0], k) for spec in conf.KERNELS.values() for k in spec[6]}
    assert len(triton_kernels) >= 10, triton_kernels  # the Proof of issue 20: at least 10, from at least 5 projects
    gemms = {(spec[0], k) for spec in conf.KERNELS.values() if spec[1] == "gemm" for k in spec[6]}
    assert len(gemms) >= 6 and len({n.split("_")[0] for n, s in conf.KERNELS.items() if s[1] == "gemm"}) >= 4, gemms
    assert set(conf.GEMM_KEYS) == {n for n, s in conf.KERNELS.items() if s[1] == "gemm"}  # issue 34, item 4


@pytest.mark.slow
@pytest.mark.parametrize("project", PROJECTS)
def test_verbatim_kernels_reach_their_documented_verdicts(project: str, tmp_path: Path) -> None:
    site = os.environ.get(SITE, "")
    where = Path(site) / project if site else None
    if project in INSTALLED:
        if importlib.util.find_spec(project) is None:
            pytest.skip(f"{project} is not installed")
        where = None
    elif where is None or not where.is_dir():
        pytest.skip(f"{project}: set {SITE} to a folder made by examples/real-kernels/fetch-packages.sh "
                    f"(it has no {project}/ folder)")
    conf = _example()
    repo = tmp_path / "real-kernels"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis", "*.json", "*.xml"))
    mine = {n: spec for n, spec in conf.KERNELS.items() if n.startswith(project + "_")}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(p) for p in (where, ROOT) if p is not None]))
    for marker, formats in (("ocp", ("e4m3fn", "e5m2")), ("fnuz", ("e4m3fnuz", "e5m2fnuz"))):
        wanted = {n for n, spec in mine.items() if spec[4] in formats}
        if not wanted:
            continue
        out, xml = repo / f"{marker}.json", repo / f"{marker}.xml"
        proc = subprocess.run([sys.executable, "-m", "pytest", "-m", marker, "-k", project, "-p", "no:cacheprovider",
                               "--fp8check-json", str(out), "--junitxml", str(xml)], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=3 * 3600)
        tail = (proc.stdout + proc.stderr)[-4000:]
        assert proc.returncode == 0, f"pytest -m {marker} -k {project} exited {proc.returncode}:\n{tail}"
        tests, messages = _junit(xml)
        assert not [t for t, o in tests.items() if o == "failed"], messages
        checks = json.loads(out.read_text())["checks"]
        for name in sorted(wanted):
            token = _token(name)
            assert any(token.search(t) for t in tests), f"{name}: no test ran\n{tail}"
            found: set[str] = set()
            for c in checks:
                if token.search(str(c.get("kernel", ""))):
                    found |= {k for k, n in (c.get("categories") or {}).items() if n}
            assert found == set(conf.EXPECTED[name]), (name, sorted(found), sorted(conf.EXPECTED[name]))

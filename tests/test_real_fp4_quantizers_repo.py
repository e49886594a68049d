"""examples/real-fp4-quantizers, checked as its author checks it: fp8check's wheel in a fresh venv (the fixture of
tests/test_kernel_repo.py), ``python -m pytest -m ocp`` in a copy of the repository outside the source tree.

The repository declares six FP4 quantizers (MXFP4, NVFP4) of three projects (torchao, compressed-tensors, NVIDIA
ModelOpt), each with a recipe read from its own source (cited in its pyproject.toml), imported at test time from
the projects' PyPI wheels. torchao comes from this environment; compressed-tensors and ModelOpt from the folder
``$FP8CHECK_FP4_SITE`` (``pip install --target DIR --no-deps``, README.md), put on the run's PYTHONPATH; a
quantizer whose package is absent skips naming the module. Asserted: each conforms, or diverges only by its
declared, documented defect (a strict xfail that a divergence of any other category turns into a failure).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fp8check import quantizers
from fp8check.quantizers import declared_recipes

pytest.importorskip("torch", reason="the quantizers are torch code")
from test_kernel_repo import env  # noqa: E402,F401  (the session's wheel venv)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "real-fp4-quantizers"
SITE = "FP8CHECK_FP4_SITE"
PROJECTS = {"torchao": "torchao", "ct_": "compressed-tensors", "modelopt": "nvidia-modelopt"}
CONFORMING = ("torchao_nvfp4",)


def _tool() -> tuple[str, dict]:
    tomllib = pytest.importorskip("tomllib")
    text = (EXAMPLE / "pyproject.toml").read_text()
    return text, tomllib.loads(text)["tool"]["fp8check"]


def test_the_repository_declares_six_fp4_quantizers_of_three_projects_each_with_a_cited_recipe():
    text, tool = _tool()
    declared = {q["name"]: q for q in tool["quantizer"]}
    assert len({q["kernel"] for q in declared.values()}) == 6
    assert {p for p in PROJECTS if any(n.startswith(p) for n in declared)} == set(PROJECTS)
    recipes = declared_recipes(tool["recipe"])
    for name, q in declared.items():
        r = recipes[q["recipe"]]
        assert r.format.name == "e2m1fn" and r.packed == "low-first", name
        assert r.scale_dtype == ("e4m3fn" if "nvfp4" in name else "e8m0"), name
    for recipe in tool["recipe"]:  # each cites the file and version it was read from
        head = text.split(f"[tool.fp8check.recipe.{recipe}]")[0].rstrip().splitlines()[-1]
        assert head.startswith("#"), recipe
    # the NVFP4 variants are fp8check's built-in recipes, one per source
    assert {recipes[q["recipe"]].rule for q in declared.values() if "nvfp4" in q["name"]} == {
        "nvfp4-torchao", "nvfp4-ct", "nvfp4-modelopt"}
    assert all(quantizers.get(n).two_level for n in ("nvfp4-torchao", "nvfp4-ct", "nvfp4-modelopt"))


@pytest.mark.slow
def test_pytest_m_ocp_from_the_wheel_conforms_or_diverges_only_by_documented_defects(env, tmp_path_factory):
    from test_kernel_repo import _token, pytest_in

    site = os.environ.get(SITE, "")

    class WithSite:  # the venv, with the packages' folder on PYTHONPATH
        python = env.python

        @staticmethod
        def environ():
            e = env.environ()
            if site:
                e["PYTHONPATH"] = site
            return e

    repo = tmp_path_factory.mktemp("real-fp4-quantizers") / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    result = pytest_in(WithSite, repo, "-m", "ocp", "-rsx")
    print(f"\npytest -m ocp in examples/real-fp4-quantizers: {result.seconds:.0f} s wall, exit {result.returncode}")
    _, tool = _tool()
    declared = {q["name"]: q for q in tool["quantizer"]}
    outcomes = {}
    for name in declared:
        tests = {t: o for t, o in result.tests.items() if _token(name).search(t)}
        assert len(tests) == 1, (name, tests, result.output[-3000:])
        outcomes[name] = next(iter(tests.values()))
    assert "failed" not in outcomes.values(), result.output[-5000:]
    checks = {c["kernel"]: c for c in result.checks}  # a quantizer whose package is absent is skipped unchecked
    assert "torchao_nvfp4" in checks and "torchao_mxfp4_floor" in checks  # torchao is in this environment
    if os.environ.get(SITE):
        assert set(checks) == set(declared), sorted(set(declared) - set(checks))
    for name, check in checks.items():
        found = {c for c, n in check["categories"].items() if n}
        known = set(declared[name].get("known-divergence", {}).get("categories", ()))
        assert found <= known, (name, found, known)  # nothing beyond the documented defect
        assert bool(found) == bool(known), (name, found)  # and the defect is still there
    for name in CONFORMING:
        assert outcomes[name] == "passed" and checks[name]["passed"], name
    print("not checked (package absent):", sorted(set(declared) - set(checks)))

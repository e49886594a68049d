"""examples/real-quantizers, checked as its author checks it: fp8check's wheel in a fresh venv (the fixture of
tests/test_kernel_repo.py), ``python -m pytest`` in a copy of the repository outside the source tree.

The repository declares nine real FP8 quantizers of four packages (FBGEMM, torchao, compressed-tensors,
transformers), each with a recipe read from its own source (cited in its pyproject.toml), imported from the
packages' PyPI wheels at test time; a quantizer whose package is absent skips naming the module (README.md says
how each package is made importable on a CPU). Asserted: each conforms, or diverges only by its declared,
documented defect (a strict xfail that a divergence of any other category turns into a failure): no false
alarm; the torchao quantizer held to a reciprocal-multiply recipe is told it is the exact side; the
``reproduce:`` lines run from the repository and give the same verdict.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the quantizers are torch code")
import test_kernel_repo  # noqa: E402
from test_kernel_repo import ROOT, Env, _token, env, pytest_in  # noqa: E402,F401  (env: the session's wheel venv)

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "real-quantizers"
PACKAGES = {"fbgemm": "FBGEMM", "torchao": "torchao", "ct_": "compressed-tensors", "transformers": "transformers"}
# The quantizers whose declared recipe is exactly what they do (no known divergence).
CONFORMING = ("fbgemm_row_torch", "torchao_training_tensorwise", "torchao_training_rowwise")


def _declared() -> dict[str, dict]:
    tomllib = pytest.importorskip("tomllib")

    tool = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["fp8check"]
    return {q["name"]: q for q in tool["quantizer"]}


def test_the_repository_declares_eight_quantizers_of_four_packages_each_with_a_cited_recipe():
    tomllib = pytest.importorskip("tomllib")
    text = (EXAMPLE / "pyproject.toml").read_text()
    tool = tomllib.loads(text)["tool"]["fp8check"]
    quantizers = _declared()
    kernels = {q["kernel"] for q in quantizers.values()}
    assert len(kernels) >= 8
    assert {p for p, _ in PACKAGES.items() if any(n.startswith(p) for n in quantizers)} == set(PACKAGES)
    for name, q in quantizers.items():
        assert q["recipe"] in tool["recipe"], name  # its own recipe, declared here
    for recipe, table in tool["recipe"].items():  # each cites the file and version it was read from, or
        head = text.split(f"[tool.fp8check.recipe.{recipe}]")[0].rstrip().splitlines()[-1]  # derives from one
        assert head.startswith("#") or table.get("base") in tool["recipe"], recipe


@pytest.fixture(scope="module")
def run(env: Env, tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("real-quantizers") / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    import importlib.util

    workers = ["-n", "2"] if importlib.util.find_spec("xdist") else []
    saved, test_kernel_repo.TIMEOUT = test_kernel_repo.TIMEOUT, 1800  # nine checks, two interpreted
    try:
        result = pytest_in(env, repo, "-k", "recipe", "-rsx", *workers)
    finally:
        test_kernel_repo.TIMEOUT = saved
    print(f"\npytest -k recipe in examples/real-quantizers: {result.seconds:.0f} s wall, exit {result.returncode}")
    return repo, result


def test_each_quantizer_conforms_or_diverges_only_by_its_documented_defect(run):
    repo, result = run
    declared = _declared()
    outcomes = {}
    for name, q in declared.items():
        tests = {t: o for t, o in result.tests.items() if _token(name).search(t)}
        assert len(tests) == 1, (name, tests, result.describe())
        outcomes[name] = next(iter(tests.values()))
    # No failure anywhere: a false alarm, or a divergence outside a declared defect, would be one.
    assert "failed" not in outcomes.values(), {n: result.messages.get(t, "")[:3000]
                                               for t in result.tests for n in declared if _token(n).search(t)
                                               and result.tests[t] == "failed"}
    ran = {n for n in declared if n not in _skipped(result, n)}
    assert {n for n in ran if outcomes[n] == "passed"} == {n for n in ran if "known-divergence" not in declared[n]}
    for name in CONFORMING:
        if name in ran:
            assert outcomes[name] == "passed", name
    print("skipped (package absent):", sorted(set(declared) - ran))


def _skipped(result, name: str) -> set[str]:
    return {name} if "needs " in result.output and f"{name} needs" in result.output else set()


def test_the_kernel_more_exact_than_its_recipe_is_told_so(run):
    repo, result = run
    if _skipped(result, "torchao_per_row_vs_reciprocal"):
        pytest.skip("torchao is not installed")
    check = next(c for c in result.checks if c["kernel"] == "torchao_per_row_vs_reciprocal")
    ex = check["extra"]["exactness"]
    assert ex["kernel_exact"] > 0 and ex["recipe_exact"] == 0, ex
    assert any("more exact than its declared recipe" in n for n in check["extra"]["notes"])
    assert any("the kernel is exact here; the recipe rounds twice" in d["detail"] for d in check["divergences"])


def test_the_reproduce_lines_run_from_the_repository(env: Env, run):
    repo, result = run
    for name, code in (("torchao_training_rowwise", 0), ("torchao_per_row_vs_reciprocal", 1)):
        if _skipped(result, name):
            continue
        check = next(c for c in result.checks if c["kernel"] == name)
        argv = check["command"].split()
        assert argv[:2] == ["fp8check", "check"] and "--recipe" in argv, check["command"]
        argv[argv.index("--max-examples") + 1] = "5"
        proc = subprocess.run([str(env.python), "-m", "fp8check", *argv[1:]], cwd=repo, env=env.environ(),
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == code, (check["command"], proc.stdout[-3000:], proc.stderr[-3000:])
        if code:
            assert "the kernel is exact here; the recipe rounds twice" in proc.stdout

"""A training team's repository (``examples/training-repo``) checked as its authors check it: ``pytest -m training``.

fp8check's wheel, built from this source tree and installed into a fresh venv outside it (the
``env`` fixture of ``test_kernel_repo``: only the wheel's fp8check is importable there), runs the
models the repository declares in ``[[tool.fp8check.training]]``: fp8check's tiny decoder at the
repository's shape (a CONFIG.json), with the loss gates, and the repository's own model, data and
Float8LinearConfig. Asserted from the JUnit XML: exactly the declared models and formats are
tested (``-m training``, ``-m "training and fnuz"``), the correct ones pass, the planted bug
(``buggy_mlp``: grad_output cast to e4m3 where tensorwise declares e5m2) fails with ``format``,
and the repository's own tests do not run under ``-m training``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchao")

from test_kernel_repo import env, pytest_in, _print_time  # noqa: E402,F401 -- the wheel in a fresh venv

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "training-repo"
STEPS = {"tiny-e4m3fn", "tiny-e4m3fnuz", "mlp-e4m3fn", "mlp-e4m3fnuz", "buggy_mlp-e4m3fnuz"}
LOSS = {"tiny-loss"}


def _copy(tmp_path: Path) -> Path:
    repo = tmp_path / "training-repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "out.json",
                                                                 "junit.xml"))
    return repo


def _ids(run, test: str) -> dict[str, str]:
    return {t.split("[", 1)[1].rstrip("]"): o for t, o in run.tests.items() if f"::{test}[" in t}


def test_pytest_m_training_in_the_example_repository(env, tmp_path):
    repo = _copy(tmp_path)
    run = pytest_in(env, repo, "-m", "training")
    _print_time("pytest -m training in examples/training-repo", run)
    steps, loss = _ids(run, "test_training_step_conforms"), _ids(run, "test_training_loss_passes_the_gates")
    assert set(steps) == STEPS and set(loss) == LOSS, run.describe()
    assert not [t for t in run.tests if t.startswith("tests.")], "the repository's own tests ran under -m training"
    assert run.returncode == 1, run.describe()  # the planted bug fails
    assert {k for k, o in steps.items() if o == "failed"} == {"buggy_mlp-e4m3fnuz"}, run.describe()
    assert loss == {"tiny-loss": "passed"}, run.describe()
    message = next(m for t, m in run.messages.items() if "buggy_mlp" in t)
    assert "[format]" in message and "declares e5m2fnuz for grad_output" in message, message[-3000:]


def test_training_and_fnuz_selects_the_mi300_runs(env, tmp_path):
    repo = _copy(tmp_path)
    run = pytest_in(env, repo, "-m", "training and fnuz", "-k", "not buggy and not loss")
    assert run.returncode == 0, run.describe()
    assert set(_ids(run, "test_training_step_conforms")) == {"tiny-e4m3fnuz", "mlp-e4m3fnuz"}, run.describe()


def test_a_repository_declaring_no_model_gets_no_training_tests(env, tmp_path):
    repo = _copy(tmp_path)
    text = (repo / "pyproject.toml").read_text()
    (repo / "pyproject.toml").write_text(text[: text.index("[[tool.fp8check.training]]")])
    run = pytest_in(env, repo)
    assert run.returncode == 0, run.describe()
    assert set(run.tests) == {"tests.test_model::test_the_model_maps_inputs_to_class_logits"}, run.describe()


def test_a_bad_declaration_is_one_usage_error(env, tmp_path):
    repo = _copy(tmp_path)
    with (repo / "pyproject.toml").open("a") as f:
        f.write('\n[[tool.fp8check.training]]\nname = "bad"\nmodel = "mymodel.model:build"\nrecipe = "rowwise"\n')
    run = pytest_in(env, repo, "-m", "training")
    assert run.returncode == 4, run.describe()  # pytest's usage error
    assert "fp8check: [[tool.fp8check.training]] 'bad': a model given as MODULE:FUNC needs 'batches'" in run.output, \
        run.describe()

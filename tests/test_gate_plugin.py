"""A kernel repository whose gate is a loose ``assert_close``: ``pytest -m gate`` lists what it lets through.

The repository (written to a temporary directory, run through pytester) declares two gates in
``[[tool.fp8check.gate]]``: its own loose tolerance and an exact comparison. The loose one fails with
the table of the FP8 defects it accepts and fp8check's replacement assertion; the exact one passes;
the repository's own tests do not run under ``-m gate``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

# Import once in the outer session (pytester's in-process runs unload modules they import first).
import hypothesis  # noqa: E402,F401
import fp8check  # noqa: E402,F401
import fp8check.gates  # noqa: E402,F401
import fp8check.gates.declared  # noqa: E402,F401
import fp8check.suite  # noqa: E402,F401
import fp8check.suite.gates  # noqa: E402,F401
import fp8check.terminal.gates  # noqa: E402,F401

TOLERANCES = '''
import torch


def loose_close(actual, expected):
    # written for float16 kernels, loosened until FP8 passed
    torch.testing.assert_close(actual, expected, rtol=5e-2, atol=5e-2)


def exact(actual, expected):
    a, e = actual.float(), expected.float()
    assert torch.equal(torch.isnan(a), torch.isnan(e)) and torch.equal(a.nan_to_num(), e.nan_to_num())
'''

PYPROJECT = '''
[tool.pytest.ini_options]
addopts = "--import-mode=importlib"

[[tool.fp8check.gate]]
name = "loose"
gate = "tolerances:loose_close"
recipe = "block-1x128"
shape = "64x256"
inputs = 1
defects = ["scale-4.5%", "zeros", "scale-x2"]
max-examples = 5

[[tool.fp8check.gate]]
name = "exact"
gate = "tolerances:exact"
recipe = "block-1x128"
shape = "64x256"
dtype = "float32"
inputs = 1
defects = ["scale-4.5%", "zeros"]
max-examples = 5
'''


@pytest.fixture
def repo(pytester):
    (pytester.path / "tolerances.py").write_text(TOLERANCES)
    (pytester.path / "pyproject.toml").write_text(PYPROJECT)
    pytester.makepyfile(test_own="def test_own_kernel_works():\n    assert True\n")
    return pytester


def test_pytest_m_gate_lists_what_the_loose_gate_lets_through(repo):
    result = repo.runpytest("-p", "no:cacheprovider", "-m", "gate", "-v")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_own_kernel_works" not in out  # the repository's own tests are not gates
    assert "test_gate_lets_no_fp8_defect_through[loose] FAILED" in out
    assert "test_gate_lets_no_fp8_defect_through[exact] PASSED" in out
    # the table of the failing gate: the 4.5 % scale error goes through, zeros and x2 do not
    assert "the gate tolerances:loose_close lets FP8 defects through that fp8check rejects" in out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 5}
    assert "ACCEPTED" in lines["scale-4.5%"] and "rejects" in lines["scale-4.5%"]
    assert "rejected" in lines["zeros"] and "rejected" in lines["scale-x2"]
    assert "fp8check.assert_conforms(report)" in out
    assert ("or: fp8check gate tolerances:loose_close --recipe block-1x128 --shape 64x256 --expected reference "
            "--inputs 1 --seed 0 --max-examples 5 --defects scale-4.5%,zeros,scale-x2") in out


def test_a_bad_gate_declaration_is_a_usage_error(pytester):
    (pytester.path / "pyproject.toml").write_text('[[tool.fp8check.gate]]\ngate = "tolerances:x"\nrecipe = "nope"\n')
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown recipe 'nope'" in result.stderr.str()


def test_a_repository_declaring_no_gate_gets_no_gate_test(pytester):
    pytester.makepyfile(test_own="def test_own():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "gate")
    result.assert_outcomes(deselected=1)

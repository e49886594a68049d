"""The suite's power: every planted bug (tests/fp8_mutants.py) is caught with the
right category by ``fp8check check`` and by the pytest properties; the correct
controls pass both (no false alarms)."""

import json
from pathlib import Path

import pytest

from fp8check import cli

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

try:  # pytester's in-process runs unload modules first imported inside them, and
    import triton  # noqa: F401  Triton's native extension cannot be loaded twice
except ImportError:
    pass

ROOT = Path(__file__).resolve().parents[1]

# mutant, format, claimed profile, categories that must appear, categories allowed,
# the named property that must fail.
MUTANTS = [
    ("round_toward_zero_e4m3fnuz", "e4m3fnuz", "ieee", {"rounding"}, {"rounding", "subnormal", "overflow"},
     "test_rounding_ties"),
    ("round_ties_away_e4m3fnuz", "e4m3fnuz", "ieee", {"rounding"}, {"rounding", "subnormal"},
     "test_rounding_ties"),
    ("saturate_at_448_e4m3fnuz", "e4m3fnuz", "satfinite", {"overflow", "infinity"}, {"overflow", "infinity"},
     "test_overflow_policy"),
    ("negative_zero_to_0x80_e4m3fnuz", "e4m3fnuz", "ieee", {"signed_zero"}, {"signed_zero"},
     "test_fnuz_zero_and_tiny_negatives_never_0x80"),
    ("flush_subnormals_e4m3fnuz", "e4m3fnuz", "ieee", {"subnormal"}, {"subnormal"}, "test_subnormals"),
    ("double_round_via_float16_e4m3fnuz", "e4m3fnuz", "ieee", {"rounding"}, {"rounding", "subnormal", "overflow"},
     "test_rounding_ties"),
    ("inf_to_max_e5m2", "e5m2", "torch-2.12", {"infinity"}, {"infinity"}, "test_infinity_handling"),
]
CONTROLS = [
    ("correct_e4m3fnuz", "e4m3fnuz", "ieee"),
    ("saturate_at_240_e4m3fnuz", "e4m3fnuz", "satfinite"),
    ("correct_e5m2", "e5m2", "torch-2.12"),
]


# The mutants and controls are torch casts, which round float64 through float32 (checked by default since
# issue 32: tests/test_kinds.py); their bugs are in the 16- and 32-bit inputs.
_NOT_FLOAT64 = "float32,float16,bfloat16"
_QUICK = {"round_toward_zero_e4m3fnuz", "saturate_at_448_e4m3fnuz", "negative_zero_to_0x80_e4m3fnuz", "inf_to_max_e5m2"}


@pytest.mark.parametrize("mutant, fmt, profile, must, allowed, prop",
                         [pytest.param(*m, id=m[0], marks=[] if m[0] in _QUICK else [pytest.mark.slow]) for m in MUTANTS])
def test_check_catches_each_mutant_with_the_right_category(mutant, fmt, profile, must, allowed, prop, tmp_path, capsys):
    out = tmp_path / "result.json"
    code = cli.main(["check", f"fp8_mutants:{mutant}", "--format", fmt, "--profile", profile,
                     "--max-examples", "30", "--json", str(out), "--input-dtype", _NOT_FLOAT64])
    assert code == cli.EXIT_DIVERGED
    checks = json.loads(out.read_text())["checks"]  # one per input dtype
    found = {c for r in checks for c in r["categories"]}
    assert must <= found <= allowed, found
    assert any(not r["passed"] and r["divergences"] for r in checks)
    # the terminal names each category with its count
    text = capsys.readouterr().out
    for r in checks:
        for cat, n in r["categories"].items():
            assert f"{cat}" in text and f"{n:,}" in text


@pytest.mark.slow
def test_check_shows_the_simplest_reproducer_first(tmp_path):
    out = tmp_path / "r.json"
    cli.main(["check", "fp8_mutants:negative_zero_to_0x80_e4m3fnuz", "--format", "e4m3fnuz", "--input-dtype", "float32", "--max-examples", "0",
              "--json", str(out)])
    first = json.loads(out.read_text())["divergences"][0]
    assert (first["input_hex"], first["expected_hex"], first["actual_hex"]) == ("0x80000000", "0x00", "0x80")
    out2 = tmp_path / "r2.json"
    cli.main(["check", "fp8_mutants:inf_to_max_e5m2", "--format", "e5m2", "--profile", "torch-2.12",
              "--input-dtype", "float32", "--max-examples", "0", "--json", str(out2)])
    first = json.loads(out2.read_text())["divergences"][0]
    assert (first["input_hex"], first["expected_hex"], first["actual_hex"]) == ("0x7f800000", "0x7c", "0x7b")


@pytest.mark.parametrize("control, fmt, profile", CONTROLS, ids=[c[0] for c in CONTROLS])
def test_check_passes_the_correct_controls(control, fmt, profile):
    assert cli.main(["check", f"fp8_mutants:{control}", "--format", fmt, "--profile", profile,
                     "--max-examples", "30", "--input-dtype", _NOT_FLOAT64]) == cli.EXIT_OK


def _suite(pytester):
    """A kernel author's repository: the mutants; the plugin brings the shipped property suite."""
    (pytester.path / "fp8_mutants.py").write_text((ROOT / "tests" / "fp8_mutants.py").read_text())
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\nxfail_strict = true\n")


@pytest.mark.slow
@pytest.mark.parametrize("mutant, fmt, profile, must, allowed, prop", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_properties_catch_each_mutant_through_the_plugin(pytester, mutant, fmt, profile, must, allowed, prop):
    _suite(pytester)
    result = pytester.runpytest(
        "--fp8check-kernel", f"fp8_mutants:{mutant}", "--fp8check-format", fmt,
        "--fp8check-profile", profile, "--fp8check-input-dtype", "float32", "--fp8check-json", "found.json",
        "-k", "not float64 and not decode and not known_upstream and not real_callers",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1
    failed = {r.nodeid.split("::")[1].split("[")[0] for r in result.reprec.getreports("pytest_runtest_logreport")
              if r.when == "call" and r.failed}
    assert prop in failed, failed
    checks = json.loads((pytester.path / "found.json").read_text())["checks"]
    assert len(checks) == 1
    found = set(checks[0]["categories"])
    assert must <= found <= allowed, found


@pytest.mark.slow
@pytest.mark.parametrize("control, fmt, profile", CONTROLS, ids=[c[0] for c in CONTROLS])
def test_properties_pass_the_correct_controls(pytester, control, fmt, profile):
    _suite(pytester)
    result = pytester.runpytest(
        "--fp8check-kernel", f"fp8_mutants:{control}", "--fp8check-format", fmt,
        "--fp8check-profile", profile, "-k", "not known_upstream",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) >= 20, outcomes

"""``fp8check survey``: this machine's casts against the reference."""

import pytest

from fp8check import profiles
from fp8check.cli import main
from fp8check.results import load_results


def survey_rows(out):
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 7:
            rows.append(cells)
    return rows


def test_survey_matches_every_claimed_profile_but_the_known_bugs(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "survey.json"
    code = main(["survey", "--sample", "4096", "-f", "e4m3fn", "-f", "e8m0fnu", "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = survey_rows(out)
    stacks = {r[0].split()[0] for r in rows}
    assert stacks == {"ml_dtypes", "torch"}
    assert len(rows) == 8 * (3 if torch.cuda.is_available() else 2)  # 2 formats x 4 inputs per stack
    by_case = {(r[0].split()[0], r[1], r[2]): r for r in rows}
    assert by_case[("ml_dtypes", "e4m3fn", "float16")][5] == "matches"
    assert "known (e8m0fnu subnormal round-up)" in by_case[("ml_dtypes", "e8m0fnu", "bfloat16")][5]
    assert "double rounding via float32" in by_case[("ml_dtypes", "e4m3fn", "float64")][6]
    if profiles.for_torch(torch.__version__).name == "torch-2.12":
        assert "saturated" in by_case[("torch", "e4m3fn", "float32")][6]
    env, checks = load_results(path)
    assert len(checks) == len(rows) and all(c.passed for c in checks)
    assert "ml_dtypes" in env


def test_survey_exits_1_when_a_stack_diverges_from_its_claim(capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    if profiles.for_torch(torch.__version__).name != "torch-2.12":
        pytest.skip("the planted claim below is wrong only for a torch that saturates e4m3fn")
    # Plant a wrong claim: torch >= 2.12 saturates e4m3fn, ieee does not.
    monkeypatch.setattr(profiles, "for_torch", lambda version: profiles.IEEE)
    assert main(["survey", "--sample", "4096", "-f", "e4m3fn"]) == 1
    out = capsys.readouterr().out
    assert "DIVERGE" in out and "diverge from the profiles their stacks claim" in out

"""``fp8check bench`` runs (its timings are printed, never asserted)."""

import os

import pytest

from fp8check.cli import main
from fp8check.reference import fast

ENGINES = ["numpy"] + (["numba"] if fast.compiled() is not None else [])


def rows(out: str) -> dict[str, list[str]]:
    """The table's rows by case: [unit, fp8check, ml_dtypes, torch, ml_dtypes / fp8check, torch / fp8check]."""
    found = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 7:
            found[cells[0]] = cells[1:]
    return found


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fmt, cases", [("e4m3fn", "encode,decode,sweep"), ("e5m2fnuz", "encode,decode"),
                                        ("e2m1fn", "encode,decode")])
def test_bench_runs_every_case_on_a_small_size(capsys, monkeypatch, fmt, cases, engine):
    monkeypatch.delenv("FP8CHECK_NUMBA", raising=False)
    monkeypatch.delenv("FP8CHECK_THREADS", raising=False)
    clock = "cpu" if engine == "numpy" else "wall"
    assert main(["bench", "--size", "4096", "--repeat", "1", "--format", fmt, "--cases", cases,
                 "--sweep-limit", "0x180000", "--engine", engine, "--clock", clock]) == 0
    out = capsys.readouterr().out
    found = rows(out)
    expected = ["encode from float32", "encode from float16", "encode from bfloat16", "encode from float64",
                "decode to float64"] + (["sweep of 1,572,864 float32"] if "sweep" in cases else [])
    assert list(found) == expected
    for case in expected:
        unit, ours, ml, torch_cell, ml_ratio, torch_ratio = found[case]
        assert unit == ("s" if case.startswith("sweep") else "ns/value")
        assert float(ours) > 0 and float(ml) > 0 and ml_ratio.endswith("x")
        assert torch_ratio.endswith("x") or (fmt == "e2m1fn" and torch_cell == torch_ratio == "-")
    assert "4,096 values" in out and f"engine {engine}" in out and "cores" in out and f"{clock} clock" in out
    assert "FP8CHECK_NUMBA" not in os.environ and "FP8CHECK_THREADS" not in os.environ  # left as it was


@pytest.mark.slow  # the whole default check of torch-cpu
def test_bench_times_the_default_check(capsys):
    assert main(["bench", "--cases", "check"]) == 0
    ours, ml, torch_cell = rows(capsys.readouterr().out)["default check torch-cpu"][1:4]
    assert float(ours) > float(torch_cell) > 0 and float(ml) > 0


@pytest.mark.parametrize("argv, message", [
    (["bench", "--size", "0"], "must be at least 1"),
    (["bench", "--size", "x"], "not an integer"),
    (["bench", "--format", "e9m9"], "unknown format 'e9m9'"),
    (["bench", "--format", "e4m3fnuz", "--profile", "triton-sm90"], "does not define e4m3fnuz"),
    (["bench", "--cases", "encode,nope"], "unknown case 'nope'"),
    (["bench", "--sweep-limit", "0"], "must be at least 1"),
    (["bench", "--sweep-limit", "0x100000001"], "there are 2^32 float32 patterns"),
    (["bench", "--format", "e2m1fn", "--cases", "sweep"], "need torch with e2m1fn"),
])
def test_bench_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1

"""``fp8check bench`` runs (its timings are printed, never asserted)."""

import pytest

from fp8check.cli import main


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2fnuz", "e2m1fn"])
def test_bench_runs_every_case_on_a_small_size(capsys, fmt):
    assert main(["bench", "--size", "4096", "--repeat", "1", "--format", fmt]) == 0
    out = capsys.readouterr().out
    for case in ("encode from float32", "encode from float16", "encode from bfloat16", "decode to float64"):
        line = next(line for line in out.splitlines() if case in line)
        cells = [c.strip() for c in line.split("│")]
        assert float(cells[1]) > 0 and float(cells[2]) > 0 and cells[4].endswith("x")
    assert "4,096 values" in out


@pytest.mark.parametrize("argv, message", [
    (["bench", "--size", "0"], "must be at least 1"),
    (["bench", "--size", "x"], "not an integer"),
    (["bench", "--format", "e9m9"], "unknown format 'e9m9'"),
    (["bench", "--format", "e4m3fnuz", "--profile", "triton-sm90"], "does not define e4m3fnuz"),
])
def test_bench_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1

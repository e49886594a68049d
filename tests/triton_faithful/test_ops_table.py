"""The op table (gpu/results/ops-table.json.gz, written on an H200 by ``bash gpu/run_all.sh ops-table``):
every op a quantizer or fused kernel uses, compiled for sm90, against the faithful interpreter run here on
CI's Triton with the rules of the Triton that compiled the table. Every compiled result must be the
faithful ``rn`` result (NaN by class), or, where the op's result is bracketed, inside the bracket the
``rn``/``lo``/``hi`` runs span. Skips, saying why, while the table is not committed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import triton  # noqa: E402

import fp8check.triton as ft  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "gpu" / "results" / "ops-table.json.gz"
sys.path.insert(0, str(ROOT / "gpu"))

import ops_table  # noqa: E402

VERSION = triton.__version__.split("+")[0]
if VERSION not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)


@pytest.fixture(scope="module")
def table() -> dict:
    if not TABLE.exists():
        pytest.skip(f"{TABLE.relative_to(ROOT)} is not committed yet: run `bash gpu/run_all.sh ops-table` on an "
                    f"H200 and commit $OUT/ops-table.json.gz there")
    report = ops_table.read(TABLE)
    if "faithful_here" not in next(iter(report["ops"].values()), {}) and not any(
            "compiled" in v for v in report["ops"].values()):
        pytest.skip("the committed op table has no compiled side (written without CUDA)")
    return report


@pytest.fixture(scope="module")
def faithful(table: dict) -> dict:
    """op -> {rn, lo, hi}: rn for every op; lo and hi only for the ops whose compiled results differ from rn."""
    import op_kernels as ok
    from fp8check.triton import ops

    data = ops_table.inputs_of(table)
    target = ops_table.faithful_target(table["target"], table["triton"])
    runs: dict[str, dict[str, np.ndarray]] = {}
    with ft.faithful(target):
        with ops.bracket("rn"):
            for op, bits in ok.run(data, "cpu", ft.interpreted).items():
                runs[op] = {"rn": bits}
        differ = [op for op, row in table["ops"].items() if "compiled" in row and op in runs
                  and not np.array_equal(ops_table.unpack(row["compiled"]), runs[op]["rn"])]
        for mode in ("lo", "hi"):
            with ops.bracket(mode):
                for op, bits in (ok.run(data, "cpu", ft.interpreted, ops=differ).items() if differ else ()):
                    runs[op][mode] = bits
    for row in runs.values():
        row.setdefault("lo", row["rn"])
        row.setdefault("hi", row["rn"])
    return {"runs": runs, "data": data}


def test_the_table_was_compiled_for_sm90_on_a_gpu(table):
    assert table["target"] == "sm90"
    assert table.get("capability") == [9, 0], table.get("device")
    assert table["triton"] in ft.SUPPORTED_TRITON_VERSIONS


def test_every_op_of_the_kernels_is_in_the_table(table):
    import op_kernels as ok

    missing = [op for op in {**ok.ELEMENTWISE, **ok.REDUCTIONS, **ok.INT_CASTS} if "compiled" not in table["ops"].get(op, {})]
    assert not missing, f"ops without a compiled result (did not compile, or added after the table): {missing}"


def test_every_compiled_result_is_the_faithful_one_or_inside_its_bracket(table, faithful):
    failures = []
    for op, row in table["ops"].items():
        if "compiled" not in row or op not in faithful["runs"]:
            continue
        if op in ops_table.FRONTEND_DEPENDENT and VERSION != table["triton"]:
            continue  # compiled by another frontend version than this interpreter's
        cmp = ops_table.compare(op, ops_table.unpack(row["compiled"]), faithful["runs"][op], faithful["data"])
        if cmp["outside"]:
            failures.append(f"{op} ({row['what']}; {' '.join(row.get('ptx', []))}): {cmp['outside']} of "
                            f"{cmp['checked']} outside, e.g. {[e for e in cmp['examples'] if not e['inside']][:2]}")
    assert not failures, "\n".join(failures)


def test_an_op_the_interpreter_gets_wrong_is_caught(table, faithful):
    # the comparison itself can fail: the stock interpreter's clamp (NaN -> NaN via np.clip with ALL, and
    # NaN -> lo with NONE) is not what sm90's min.xorsign.abs stores
    row = table["ops"]["clamp_const"]
    compiled = ops_table.unpack(row["compiled"])
    wrong = dict(faithful["runs"]["clamp_const"])
    nan_a = np.isnan(faithful["data"]["a"].view(np.float32))
    wrong = {k: np.where(nan_a, np.float32(-448.0).view(np.uint32), v) for k, v in wrong.items()}
    assert ops_table.compare("clamp_const", compiled, wrong, faithful["data"])["outside"] > 0


# -- the script itself, without a GPU ------------------------------------------------------


def _data(n: int = 3) -> dict:
    import op_kernels as ok

    rows = np.tile(np.arange(1, ok.ROW + 1, dtype=np.float32), (1, 1))
    rows[0, 3] = np.nan
    z = np.zeros(n, np.uint32)
    return {"a": z, "b": z, "c": z, "ints": z, "rows": rows.view(np.uint32).reshape(-1)}


def test_compare_counts_identical_bracketed_and_outside_results():
    f = lambda *v: np.array(v, np.float32).view(np.uint32)  # noqa: E731
    rn, lo, hi = f(1.0, 2.0, np.nan), f(1.0, 1.5, np.nan), f(1.0, 3.0, np.nan)
    cmp = ops_table.compare("div", f(1.0, 2.5, -np.nan), {"rn": rn, "lo": lo, "hi": hi}, _data())
    assert (cmp["checked"], cmp["identical"], cmp["identical_bits"], cmp["outside"]) == (3, 2, 1, 0)
    cmp = ops_table.compare("div", f(1.0, 3.5, 0.0), {"rn": rn, "lo": lo, "hi": hi}, _data())
    assert cmp["outside"] == 2 and [e["inside"] for e in cmp["examples"]] == [False, False]


def test_compare_takes_only_the_modelled_indices_of_an_argmax_row_with_nan():
    # the row of _data() holds its NaN at 3: an index is inside when one of the three runs gave it, and
    # pointing at the NaN is not enough (the reduction orders are modelled, not guessed)
    idx = lambda v: np.array([v], np.uint32)  # noqa: E731
    runs = {"rn": idx(15), "lo": idx(15), "hi": idx(9)}
    assert ops_table.compare("argmax", idx(9), runs, _data())["outside"] == 0
    assert ops_table.compare("argmax", idx(3), runs, _data())["outside"] == 1
    assert ops_table.compare("argmax", idx(7), runs, _data())["outside"] == 1


@pytest.mark.slow  # every op interpreted three times
def test_the_op_table_script_runs_without_a_gpu(tmp_path, partial_reciprocals):
    # with a reciprocal table lacking most mantissas, so that `a / b` has brackets to show (the shipped
    # table knows every mantissa: sm90's division is exact)
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would compile and run on it (gpu/run_all.sh ops-table)")
    out = tmp_path / "t.json.gz"
    assert ops_table.main(["--json", str(out)]) == 0
    report = ops_table.read(out)
    assert "faithful_error" not in report
    assert report["ops"]["div"]["faithful_bracket_wide"] > 0 and not report["ops"]["div_rn"]["faithful_bracket_wide"]

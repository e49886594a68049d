"""The per-tensor rows of an audit: spooled as their JSON lines, read back exactly; histograms shared
between tensors without one tensor's statistics leaking into another's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from fp8check import formats  # noqa: E402
from fp8check.checkpoints import AuditOptions, audit  # noqa: E402
from fp8check.checkpoints import audit_result as ar  # noqa: E402
from fp8check.checkpoints.stats import code_stats  # noqa: E402

from checkpoint_builders import codes, fp8, save_st, tensor_of  # noqa: E402


def _checkpoint(tmp_path):
    """Tensors whose rows hold every kind of value: a NaN and an Inf scale element, a dequantization
    bound that overflows to Inf, unpaired and missing scales, a non-FP8 tensor, an empty one."""
    w = codes((8, 16), seed=3)
    t = {
        "a.weight": fp8(w), "a.weight_scale": torch.tensor([1.0, float("nan"), float("inf")] + [0.5] * 5).reshape(8, 1),
        "b.weight": fp8(w), "b.weight_scale": torch.full((8, 1), 1e308, dtype=torch.float64),  # x 448: Inf
        "c.weight": fp8(w),  # the same codes as a and b, no scale
        "d.weight": fp8(codes((4, 4), seed=4)), "d.scale": torch.ones(4, 1),  # a scale no convention pairs
        "e.bias": torch.zeros(3, dtype=torch.bfloat16),
        "f.weight": fp8(codes((0, 16), seed=5)),
    }
    return save_st(tmp_path / "rows.safetensors", t)


def _audit(path, keep):
    result = audit([str(path)], AuditOptions(jobs=1))
    rows = ar.TensorRows(keep=keep)
    for row in result.tensors:
        rows.append(row)
    return result, rows


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a float64 scale near its max: no NumPy overflow warning
def test_spooled_rows_read_back_exactly(tmp_path):
    result, spooled = _audit(_checkpoint(tmp_path), keep=0)
    try:
        assert spooled._spool is not None  # every row went through the spool file
        kept = list(result.tensors)  # the same rows, held in memory (fewer than the audit keeps)
        lines = list(spooled.json_lines())
        assert lines == [ar._row_json(r) for r in kept]
        assert lines == list(result.tensors.json_lines())
        for line, row in zip(lines, kept):
            assert json.loads(line) == json.loads(json.dumps(ar.json_ready(row.to_dict())))
        back = list(spooled)
        assert [ar._row_json(r) for r in back] == lines  # from_dict inverts to_dict, non-finite floats too
        a = next(r for r in back if r.name == "a.weight")
        assert a.scale.stats.nonfinite == 2 and a.scale.stats.absmax == 1.0
        b = next(r for r in back if r.name == "b.weight")
        assert b.stats.dequant_absmax_bound == float("inf")
        assert b.scale.stats.factor_exact == {"2": False, "0.5": True}  # 2e308 is past float64
        assert [r.name for r in spooled.get([3, 0])] == [kept[3].name, kept[0].name]
        assert [b.name for b in spooled.briefs()] == [r.name for r in kept]
        assert [b.severity for b in spooled.briefs()] == [r.severity for r in kept]
    finally:
        result.close()
        spooled.close()


def test_a_shared_histogram_keeps_each_tensors_own_statistics(tmp_path, run_audit):
    # a, b and c hold the same codes: one histogram, counted once; only the scaled ones get a
    # dequantization bound, each its own
    r = run_audit(_checkpoint(tmp_path))
    a, b, c = (tensor_of(r, n)["stats"] for n in ("a.weight", "b.weight", "c.weight"))
    assert a["histogram"] == b["histogram"] == c["histogram"]
    assert c["dequant_absmax_bound"] is None and c["dequant_overflow"] is None
    assert a["dequant_absmax_bound"] == a["max_abs"] * 1.0
    assert b["dequant_absmax_bound"] == "inf"  # strict JSON: non-finite floats as strings
    assert b["dequant_overflow"] > 0 and a["dequant_overflow"] == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 255), max_size=256), st.integers(1, 2**62))
def test_histogram_json_is_what_json_writes(used, top):
    hist = np.zeros(256, dtype=np.int64)
    rng = np.random.default_rng(len(used))
    hist[used] = rng.integers(1, top, size=len(used), endpoint=True)
    cs = code_stats(hist, formats.E4M3FN)
    assert cs.histogram_json() == json.dumps(hist.tolist(), separators=(",", ":"))

"""Target-dependent outputs (fp8check.brackets): what the comparison counts, how a result carries them,
and how the terminal, the JSON and the HTML report show them. No Triton needed (the three runs are given
here; tests/triton_faithful/test_ops.py has them made by the faithful interpreter)."""

from __future__ import annotations

import numpy as np
import pytest

from fp8check import brackets
from fp8check.results import CheckResult, Divergence


def test_an_element_is_target_dependent_when_the_runs_differ_and_one_gives_the_reference():
    expected = np.array([1, 2, 3, 4, 5], np.uint8)
    rn = np.array([1, 2, 9, 9, 9], np.uint8)  # 0, 1: right; 2: wrong in rn only; 3: wrong everywhere; 4: wrong, runs agree
    lo = np.array([1, 7, 3, 8, 9], np.uint8)
    hi = np.array([1, 2, 9, 9, 9], np.uint8)
    actual, dependent = brackets.resolve(expected, [rn, lo, hi])
    assert dependent.tolist() == [False, True, True, False, False]
    assert actual.tolist() == [1, 2, 3, 9, 9]  # dependent ones compare as the reference's; the others as rn


def test_one_run_means_nothing_is_target_dependent():
    actual, dependent = brackets.resolve(np.array([1.0]), [np.array([2.0])])
    assert actual.tolist() == [2.0] and not dependent.any()


def test_float_outputs_compare_nan_by_class_and_zeros_by_sign():
    expected = np.array([np.nan, 0.0, 1.0])
    rn = np.array([np.nan, -0.0, 1.0])
    lo = np.array([-np.nan, 0.0, 1.0])
    _, dependent = brackets.resolve(expected, [rn, lo, rn])
    assert dependent.tolist() == [False, True, False]


def test_the_tally_counts_each_key_once_and_keeps_one_example_per_input():
    tally = brackets.Tally()

    def example(i: int) -> Divergence:
        return Divergence(category="target_dependent", input_hex=f"0x{i % 2:02x}", expected_hex="0x00",
                          actual_hex="0x01")

    tally.add(np.array([10, 11, 10, 12]), example, np.array([True, True, True, False]), ("fdiv",))
    tally.add(np.array([11, 13]), example, np.array([True, True]), ("sqrt",))
    assert tally.count == 3 and tally.ops == {"fdiv", "sqrt"}
    assert [e.input_hex for e in tally.examples] == ["0x00", "0x01"]


@pytest.fixture
def counting_runner():
    """A runner standing in for the faithful interpreter: three runs, each told its mode."""
    calls = []

    def runner(call):
        outs = []
        for mode in ("rn", "lo", "hi"):
            calls.append(mode)
            outs.append(call())
        return outs, ("fdiv",)

    saved = brackets._RUNNER
    brackets.set_runner(runner)
    yield calls
    brackets.set_runner(saved)


def test_every_run_gets_the_input_as_it_was_before_the_first(counting_runner):
    x = np.array([1.0, 2.0])

    def kernel(v):
        out = v.copy()
        v += 100.0  # a kernel writing its input
        return out

    outs, names = brackets.runs_on(kernel, x)
    assert [o.tolist() for o in outs] == [[1.0, 2.0]] * 3 and names == ("fdiv",)
    assert counting_runner == ["rn", "lo", "hi"]


def _result() -> CheckResult:
    r = CheckResult(kernel="k", format="e4m3fn", profile="satfinite", passed=True, checked=10, kind="quantize",
                    extra={"recipe": {"name": "tensorwise"}, "recipe_summary": "s", "cases": 1})
    tally = brackets.Tally()
    tally.add(np.array([0x3F800000]), lambda i: Divergence(
        category="target_dependent", input_hex="3F800000", expected_hex="38", actual_hex="38", input_value="1.0",
        detail="correctly rounded fdiv: 38, low end 37, high end 38"), np.array([True]), ("fdiv",))
    tally.apply(r)
    return r


def test_a_result_carries_them_through_json_and_says_so():
    r = _result()
    again = CheckResult.from_dict(r.to_dict())
    assert again.target_dependent == 1 and again.target_dependent_examples == r.target_dependent_examples
    assert again.extra["target_dependent_ops"] == "fdiv"
    assert str(r).endswith("1 target-dependent)")
    assert r.passed  # not a failure


def test_the_terminal_and_the_html_report_show_them():
    from fp8check.report import divergence_report
    from fp8check.report.documents import source_from_results
    from fp8check.terminal.divergences import result_text

    r = _result()
    text = result_text(r)
    assert "target-dependent: 1 output" in text and "fdiv" in text and "low end 37" in text
    html = divergence_report([source_from_results("r.json", {"checks": [r.to_dict()]})])
    assert 'id="target-dependent"' in html and "low end 37" in html and "1 target-dependent output" in html
    plain = CheckResult(kernel="k", format="e4m3fn", profile="satfinite", passed=True, checked=1)
    assert "target-dependent" not in result_text(plain)
    assert 'id="target-dependent"' not in divergence_report([source_from_results("p.json", plain.to_dict())])

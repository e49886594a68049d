"""fp8check gate: the public gates as their sources compute them, the defect family, the measurement,
the command line and the report.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from fp8check import gates, quantizers
from fp8check.cli import main
from fp8check.errors import InvalidValueError
from fp8check.gates.defects import applies, previous_batch
from fp8check.gates.measure import _differs
from fp8check.gates.public import GateCallError
from fp8check.quantizers.scaling import quantize


# -- the public gates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("delta, accepted", [(0.04, True), (0.045, True), (0.05, False)])
def test_deepgemm_calc_diff_of_a_uniform_scale_error(delta, accepted):
    # calc_diff(x, (1+d) x) = 1 - 2(1+d) / (1 + (1+d)^2) = d^2 / (2 + 2d + d^2): below 1e-3 up to d = 4.58%
    x = torch.randn(64, 64, dtype=torch.float64)
    expected_diff = delta ** 2 / (2 + 2 * delta + delta ** 2)
    assert (expected_diff < 1e-3) is accepted
    assert gates.public_gate("deepgemm")(x * (1 + delta), x) is accepted


@pytest.mark.parametrize("wrong, accepted", [(0, True), (50, True), (51, False)])
def test_aiter_lets_five_percent_of_elements_through(wrong, accepted):
    expected = torch.ones(1000)
    actual = expected.clone()
    actual[:wrong] = -7.0
    assert gates.public_gate("aiter")(actual, expected) is accepted


def test_kernelbench_tolerance_follows_the_dtype():
    e = torch.full((100,), 3.0)
    assert gates.public_gate("kernelbench")(e * (1 + 5e-3), e) is False  # float32: 1e-4
    assert gates.public_gate("kernelbench")((e * (1 + 5e-3)).bfloat16(), e.bfloat16()) is True  # bfloat16: 1e-2


def test_sqnr_thresholds():
    expected = torch.ones(10_000, dtype=torch.float64)
    # noise of norm ||e|| * 10^(-21/20): SQNR 21 dB
    actual = expected + torch.full_like(expected, 10 ** (-21 / 20))
    assert gates.public_gate("torchao-sqnr-18")(actual, expected)
    assert gates.public_gate("torchao-sqnr-20")(actual, expected)
    assert not gates.public_gate("torchao-sqnr-25")(actual, expected)


def test_gate_names_and_parameters():
    g = gates.public_gate("assert_close(rtol=1e-2, atol=1e-3)")
    assert dict(g.params) == {"rtol": 1e-2, "atol": 1e-3} and g.name == "assert_close(rtol=0.01, atol=0.001)"
    for bad, message in (("nope", "unknown gate"), ("deepgemm(t=abc)", "KEY=NUMBER"),
                         ("assert_close(foo=1)", "takes rtol, atol")):
        with pytest.raises(InvalidValueError, match=message):
            gates.public_gate(bad)


def test_what_a_gate_returning_or_raising_means():
    x = torch.zeros(3)
    assert gates.gate_accepts(lambda a, e: None, x, x) == (True, "")
    assert gates.gate_accepts(lambda a, e: False, x, x) == (False, "returned False")
    assert gates.gate_accepts(lambda a, e: torch.equal(a, e), x, x)[0] is True

    def raises(a, e):
        raise AssertionError("not close\nmore lines")

    assert gates.gate_accepts(raises, x, x) == (False, "not close")
    with pytest.raises(GateCallError, match="returned float"):
        gates.gate_accepts(lambda a, e: 0.5, x, x)


# -- the defect family ------------------------------------------------------------------------------

RECIPES = ("rowwise", "block-1x128", "block-128x128", "mx-e8m0-floor", "deepseek-ue8m0")
INPUT_DEPENDENT = ("saturation-to-nan", "nan-to-max", "sign-flip-0.1%", "scale-shifted", "scale-transposed",
                   "stale-scale")


def _mutant(d, recipe, x, magnitude=None):
    q = quantize(x, recipe)
    before = previous_batch(d, x, magnitude)
    return q, gates.mutate(d, x, recipe, q, magnitude=magnitude,
                           previous=None if before is None else quantize(before, recipe))


def test_the_family_is_data_one_row_per_defect():
    names = [d.name for d in gates.DEFECTS]
    assert len(names) == len(set(names)) == 16
    with pytest.raises(Exception):
        gates.DEFECTS[0].magnitude = 3.0  # frozen


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 16), m=st.integers(2, 300), k=st.integers(2, 300),
       recipe_name=st.sampled_from(RECIPES), name=st.sampled_from(INPUT_DEPENDENT))
def test_the_exposing_inputs_expose_each_input_dependent_defect(seed, m, k, recipe_name, name):
    recipe = quantizers.get(recipe_name)
    d = gates.defect(name)
    if applies(d, recipe):
        return
    x = gates.exposing_input(d, recipe, (m, k), seed)
    scales = np.asarray(quantize(x, recipe).scales)
    if name == "scale-shifted" and scales.size < 2 or name == "scale-transposed" and min(scales.shape) < 2:
        return  # one scale (or one row of them) has no layout to get wrong
    if name == "saturation-to-nan" and recipe.nonfinite != "finite" and recipe.rule != "mx-floor":
        return  # nothing saturates under an IEEE amax rounded up
    q, bad = _mutant(d, recipe, x, magnitude=2.0 if name == "stale-scale" else None)
    assert _differs(bad, q), f"{name} is not present on its exposing input under {recipe_name}"


@pytest.mark.parametrize("name", ["scale-4.5%", "zero-block", "stale-scale"])
def test_fp8check_rejects_a_mutated_kernel_and_accepts_the_correct_one(name):
    from fp8check.quantizers.conformance import check_quantizer, reference_kernel

    recipe = quantizers.get("block-1x128")
    assert check_quantizer(reference_kernel(recipe), recipe, max_examples=5).passed
    # a stale scale shows when two calls of one shape follow each other with other data: the check makes such
    # a pair itself, so the smallest setting rejects it
    assert gates.fp8check_rejects(gates.defect(name), recipe, max_examples=1 if name == "stale-scale" else 5)


@pytest.mark.slow
@pytest.mark.parametrize("recipe_name", ["tensorwise", "rowwise", "block-128x128", "mx-e8m0-floor"])
def test_fp8check_rejects_every_mutated_kernel(recipe_name):
    recipe = quantizers.get(recipe_name)
    for d in gates.DEFECTS:
        if applies(d, recipe) or not _differs(*_mutant(d, recipe, gates.exposing_input(d, recipe, (256, 512), 1))):
            continue
        assert gates.fp8check_rejects(d, recipe), d.name


# -- the measurement -------------------------------------------------------------------------------


def _bits_equal(actual, expected):
    """A gate that compares bits (NaN by class): rejects every defect that changes a value."""
    a, e = actual.float(), expected.float()
    return bool(torch.equal(torch.isnan(a), torch.isnan(e)) and torch.equal(torch.nan_to_num(a), torch.nan_to_num(e)))


SMALL = dict(views=gates.parse_views("64x256", ["32x48x256"]), inputs=1, check=False)


def test_a_bitwise_gate_lets_nothing_through_and_a_loose_one_lets_scale_errors_through():
    # float32: a one-ulp scale error is below bfloat16's resolution, a bitwise bfloat16 test cannot see it
    report = gates.measure_gates([_bits_equal, "assert_close(rtol=0.1, atol=0.1)"], recipe="block-1x128",
                                 dtype="float32", **SMALL)
    exact, loose = report.verdicts
    assert exact.rate()[0] == 0 and all(o.status in ("rejected", "n/a") for o in exact.outcomes)
    accepted = {o.defect.name for o in loose.outcomes if o.status == "accepted"}
    assert {"scale-1ulp", "scale-4.5%", "fn-fnuz-max"} <= accepted
    assert "zeros" not in accepted and "scale-x2" not in accepted
    four_five = next(o for o in loose.outcomes if o.defect.name == "scale-4.5%" and o.view.startswith("dequant"))
    assert four_five.largest_accepted == 0.1  # the sweep's largest value under rtol 0.1 (+ bfloat16 rounding)


def test_the_escapes_need_fp8check_to_reject():
    report = gates.measure_gates(["deepgemm"], recipe="block-1x128", defects=[gates.defect("scale-4.5%")],
                                 views=gates.parse_views("64x256"), inputs=1, max_examples=5)
    (verdict,) = report.verdicts
    assert report.fp8check == {"scale-4.5%": "rejected"}
    assert [o.defect.name for o in verdict.escapes] == ["scale-4.5%"] and not report.passed
    assert "fp8check.check_quantizer(my_quantizer, recipe='block-1x128'" in report.replacement
    assert "fp8check.assert_conforms(report)" in report.replacement


def test_a_conforming_kernel_gives_the_correct_output(tmp_path, monkeypatch):
    (tmp_path / "kern_gate.py").write_text(
        "import torch\nfrom fp8check import quantizers\n"
        "R = quantizers.get('rowwise')\n"
        "def good(x):\n    q = quantizers.quantize(x.float(), R)\n"
        "    return torch.from_numpy(q.codes), torch.from_numpy(q.scales)\n"
        "def bad(x):\n    c, s = good(x)\n    return c, s * 1.01\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    kw = dict(recipe="rowwise", defects=[gates.defect("zeros")], views=gates.parse_views("16x64"), inputs=1,
              max_examples=3, check=False)
    assert gates.measure_gates(["deepgemm"], kernel="kern_gate:good", **kw).kernel_conforms is True
    assert gates.measure_gates(["deepgemm"], kernel="kern_gate:bad", **kw).kernel_conforms is False


# -- the command line and the report ------------------------------------------------------------------

FAST = ["--recipe", "block-1x128", "--shape", "64x256", "--inputs", "1", "--max-examples", "3"]


def test_cli_exit_1_lists_the_escapes_and_writes_json_and_html(tmp_path, capsys):
    out_json, out_html = tmp_path / "g.json", tmp_path / "g.html"
    rc = main(["gate", "deepgemm", *FAST, "--defects", "scale-4.5%,zeros", "--gemm", "32x48x256",
               "--json", str(out_json), "--html", str(out_html)])
    text = capsys.readouterr().out
    assert rc == 1
    assert "ESCAPES" in text and "scale-4.5%" in text and "fp8check.assert_conforms(report)" in text
    doc = json.loads(out_json.read_text())
    assert doc["kind"] == "gate" and doc["fp8check"] == {"scale-4.5%": "rejected", "zeros": "rejected"}
    rows = {(o["defect"], o["view"]): o["status"] for o in doc["gates"][0]["outcomes"]}
    assert rows[("scale-4.5%", "dequant 64x256")] == "accepted" and rows[("zeros", "gemm 32x48x256")] == "rejected"
    html = out_html.read_text()
    assert "DeepGEMM calc_diff" in html and "lets defects through" in html and "scale-4.5%" in html
    assert "http://" not in html and "https://" not in html  # self-contained
    summary = html.split('id="fp8check-summary">')[1].split("</script>")[0]
    assert json.loads(summary)["kind"] == "gate"


def test_cli_exit_0_when_the_gate_rejects_every_defect(tmp_path, capsys, monkeypatch):
    (tmp_path / "mygates.py").write_text(
        "import torch\n"
        "def exact(actual, expected):\n"
        "    a, e = actual.float(), expected.float()\n"
        "    assert torch.equal(torch.isnan(a), torch.isnan(e)) and torch.equal(a.nan_to_num(), e.nan_to_num())\n")
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "mygates:exact", *FAST, "--defects", "scale-1ulp,zero-row", "--dtype", "float32"]) == 0
    assert "lets through 0 of 2" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["gate", "nope", "--recipe", "rowwise"], "unknown gate 'nope'"),
    (["gate", "deepgemm", "--recipe", "no-such"], "unknown recipe"),
    (["gate", "deepgemm", "--recipe", "rowwise", "--shape", "12"], "expected MxK"),
    (["gate", "deepgemm", "--recipe", "rowwise", "--defects", "bogus"], "unknown defect 'bogus'"),
    (["gate", "nomodule_here:fn", "--recipe", "rowwise"], "cannot import kernel"),
    (["gate", "deepgemm", "--recipe", "group-rowwise"], "grouped"),
    (["gate", "deepgemm", "--recipe", "nvfp4-torchao"], "measures FP8 recipes"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_documented_magnitudes_are_what_the_mutations_do():
    recipe = quantizers.get("tensorwise")
    x = gates.exposing_input(None, recipe, (8, 64), 0)
    q = quantize(x, recipe)
    for name, factor in (("scale-x2", 2.0), ("scale-half", 0.5), ("scale-4.5%", 1.045)):
        bad = gates.mutate(gates.defect(name), x, recipe, q)
        assert math.isclose(float(bad.scales) / float(q.scales), factor, rel_tol=1e-6)
        assert np.array_equal(bad.codes, q.codes)
    ulp = gates.mutate(gates.defect("scale-1ulp"), x, recipe, q)
    assert float(ulp.scales) == float(np.nextafter(np.float32(q.scales), np.float32(np.inf)))
    flipped = gates.mutate(gates.defect("sign-flip-0.1%"), x, recipe, q)
    assert np.count_nonzero(flipped.codes != q.codes) == max(1, round(np.count_nonzero(q.codes & 0x7F) * 1e-3))


@pytest.fixture(scope="module")
def gate_page(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate-page")
    assert main(["gate", "deepgemm", "assert_close", *FAST, "--defects", "scale-4.5%,zeros,nan-to-max",
                 "--gemm", "32x48x256", "--json", str(d / "g.json"), "--html", str(d / "gate.html")]) == 1
    return d / "gate.html"


def test_the_gate_page_is_self_contained_and_shows_each_gate(gate_page):
    from report_support import external_references, parse

    tree = parse(gate_page.read_text())
    assert external_references(tree) == []
    assert len(tree.xpath("//section[contains(@class, 'gate')]")) == 2
    rows = tree.xpath("//table[@id='gate-table-1']/tbody/tr")
    assert len(rows) == 6  # 3 defects x 2 views
    assert {r.get("data-status") for r in rows} == {"accepted", "rejected", "blind"}
    assert tree.xpath("//section[@id='verdict' and contains(@class, 'v-fail')]")


@pytest.mark.slow
def test_the_gate_page_renders_in_chromium(gate_page, tmp_path):
    from report_support import chromium, parse, run_chromium

    if chromium() is None:
        pytest.skip("no chromium on PATH")
    opened = run_chromium(gate_page, tmp_path)
    assert opened.console == [] and opened.page_requests == []
    dom = parse(opened.dom)
    assert "js" in dom.get("class").split()
    assert len(dom.xpath("//table[@id='gate-table-2']/tbody/tr")) == 6


def test_fp8check_report_renders_a_saved_gate_json_as_the_gate_page(gate_page, tmp_path, capsys):
    saved = gate_page.parent / "g.json"
    assert main(["report", str(saved), "-o", str(tmp_path / "again.html")]) == 0
    from report_support import parse

    again, first = parse((tmp_path / "again.html").read_text()), parse(gate_page.read_text())
    for tree in (again, first):
        assert len(tree.xpath("//section[contains(@class, 'gate')]")) == 2
    assert [r.get("data-status") for r in again.xpath("//table[@id='gate-table-1']/tbody/tr")] == \
        [r.get("data-status") for r in first.xpath("//table[@id='gate-table-1']/tbody/tr")]
    capsys.readouterr()
    assert main(["report", str(saved), str(saved), "-o", str(tmp_path / "two.html")]) == 2
    assert "one gate JSON file" in capsys.readouterr().err

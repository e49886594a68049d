"""Issue 32: the input dtypes a cast accepts, checked by default; decode and dequant kernels as declared kinds.

Every planted bug (tests/kind_kernels.py) is watched failing here, and its fixed twin conforming.
"""

import json
import sys
from pathlib import Path

import pytest

import fp8check
from fp8check import cli
from fp8check.errors import KernelCallError

pytest_plugins = ["pytester"]
try:  # pytester's in-process runs unload modules first imported inside them; Triton's cannot be loaded twice
    import triton  # noqa: F401
except ImportError:
    pass
import fp8check.casts.decoding  # noqa: E402,F401  (imported in this session: in-process runs share one copy)
import fp8check.suite  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

_QUICK = ["--max-examples", "5"]


def _check(argv, tmp_path, name="r.json"):
    out = tmp_path / name
    code = cli.main(["check", *argv, *_QUICK, "--json", str(out)])
    doc = json.loads(out.read_text())
    return code, doc.get("checks", [doc])


def test_a_cast_rounding_float64_twice_is_caught_by_default(tmp_path, capsys):
    code, checks = _check(["kind_kernels:double_rounding_f64", "--format", "e4m3fn", "--profile", "satfinite"],
                          tmp_path)
    assert code == cli.EXIT_DIVERGED
    assert [c["input_dtype"] for c in checks] == ["float32", "float16", "bfloat16", "float64"]
    f64 = checks[3]
    assert not f64["passed"] and f64["categories"].get("rounding", 0) > 0
    assert all(c["passed"] for c in checks[:3])
    assert "--input-dtype float64" in f64["command"]
    # the divergences are named for what they are: the input rounded to float32 first
    assert any("rounded to float32 first (double rounding" in n for n in f64["extra"]["notes"])
    assert "note: every float64 divergence listed is the satfinite cast of the input rounded to float32 first" \
        in capsys.readouterr().out


def test_a_float64_divergence_of_another_cause_is_not_called_double_rounding(tmp_path):
    # clamping at 224 (not 240) diverges from float64 inputs too, but not as a float32 intermediate would
    code, checks = _check(["kind_kernels:clamp_224_e4m3fnuz", "--format", "e4m3fnuz", "--profile", "satfinite",
                           "--input-dtype", "float64"], tmp_path)
    assert code == cli.EXIT_DIVERGED
    assert not any("double rounding" in n for n in checks[0]["extra"].get("notes", []))


def test_its_twin_rounding_float64_once_conforms_by_default(tmp_path, capsys):
    code, checks = _check(["kind_kernels:rounds_f64_once", "--format", "e4m3fn", "--profile", "satfinite"], tmp_path)
    assert code == cli.EXIT_OK
    assert [c["input_dtype"] for c in checks] == ["float32", "float16", "bfloat16", "float64"]


def test_the_verdict_line_names_the_input_dtypes_not_checked(tmp_path, capsys):
    code, checks = _check(["kind_kernels:float32_only", "--format", "e4m3fn", "--profile", "satfinite"], tmp_path)
    assert code == cli.EXIT_OK and [c["input_dtype"] for c in checks] == ["float32"]
    verdict = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("CONFORMS"))
    for d in ("float16", "bfloat16", "float64"):
        assert f"({d} not checked: the kernel refuses {d} inputs)" in verdict, verdict


def test_a_builtin_adapter_names_float64_as_not_checked(capsys):
    assert cli.main(["check", "ml_dtypes", "--format", "e4m3fnuz", "--max-examples", "0"]) == cli.EXIT_OK
    verdicts = [line for line in capsys.readouterr().out.splitlines() if line.startswith("CONFORMS")]
    assert verdicts and all("(float64 not checked: give --input-dtype float64)" in v for v in verdicts), verdicts


# -- decode kernels ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("planted, twin, fmt, code, wrong", [
    ("fnuz_negative_zero_decoder", "fnuz_decoder", "e4m3fnuz", "0x80", "-0.0"),
    ("e4m3fn_480_decoder", "e4m3fn_decoder", "e4m3fn", "0x7f", "480.0"),
])
def test_a_torch_decoder_with_a_nan_code_wrong_diverges_and_its_twin_conforms(planted, twin, fmt, code, wrong,
                                                                               tmp_path, capsys):
    c, (r,) = _check([f"kind_kernels:{planted}", "--kind", "decode", "--format", fmt], tmp_path)
    assert c == cli.EXIT_DIVERGED and r["kind"] == "decode" and r["checked"] == 512  # uint8 and the fp8 dtype
    assert set(r["categories"]) == {"nan"}
    assert {(d["input_hex"], d["actual_value"]) for d in r["divergences"]} >= {(code, wrong)}
    assert {d["condition"] for d in r["divergences"]} == {f"{fmt} codes as uint8", f"codes as torch.float8_{fmt}"}
    out = capsys.readouterr().out
    assert f"code {code}" in out
    assert f"reproduce: fp8check check kind_kernels:{planted} --kind decode --format {fmt}" in out
    c, (r,) = _check([f"kind_kernels:{twin}", "--kind", "decode", "--format", fmt], tmp_path, "twin.json")
    assert c == cli.EXIT_OK and r["passed"] and r["checked"] == 512


def test_a_decode_check_prints_each_category_with_its_codes(tmp_path, capsys):
    # e4m3fnuz codes read as e4m3fn: 508 values off by their bias and the NaN code 0x80 as -0.0; the NaN line
    # must show, not only the first eight subnormals
    c, (r,) = _check(["kind_kernels:e4m3fn_decoder", "--kind", "decode", "--format", "e4m3fnuz"], tmp_path)
    assert c == cli.EXIT_DIVERGED and r["categories"]["nan"] == 2 and r["categories"]["subnormal"] == 28
    out = capsys.readouterr().out
    lines = out.splitlines()
    nan = next(i for i, line in enumerate(lines) if line.split()[:3] == ["nan", "2", "codes"])
    assert lines[nan + 1].split()[:4] == ["code", "0x80", "[1", "0000"] and "(expected nan)" in lines[nan + 1]


def test_a_decoder_is_called_the_ways_it_takes_codes_and_returns_its_declared_dtype(tmp_path, capsys):
    c, (r,) = _check(["kind_kernels:e4m3fn_decoder_bf16", "--kind", "decode", "--format", "e4m3fn"], tmp_path)
    assert c == cli.EXIT_OK and r["input_dtype"] == "float8_e4m3fn" and r["extra"]["output_dtype"] == "bfloat16"
    assert r["refusals"] and "codes as uint8" in r["refusals"][0]["condition"]
    # a declared output dtype it does not return: one line, exit 2
    assert cli.main(["check", "kind_kernels:e4m3fn_decoder_bf16", "--kind", "decode", "--format", "e4m3fn",
                     "--output-dtype", "float16"]) == 2
    assert "returned bfloat16 values, declared float16" in capsys.readouterr().err


def test_a_triton_decoder_turning_fnuz_nan_into_negative_zero_diverges_in_the_faithful_interpreter():
    pytest.importorskip("triton")
    import triton_decoders as td

    report = fp8check.check_decode(td.fnuz_fields_decoder, format="e4m3fnuz", code_dtypes="uint8",
                                   triton_target="gfx942")
    (r,) = report.results
    assert not r.passed and [(d.category, d.input_hex, d.actual_value) for d in r.divergences] == \
        [("nan", "0x80", "-0.0")]
    assert "--triton-target gfx942" in r.command
    fixed = fp8check.check_decode(td.fnuz_fields_decoder_fixed, format="e4m3fnuz", code_dtypes="uint8",
                                  triton_target="gfx942")
    assert fixed.passed and fixed.results[0].checked == 256


def test_a_triton_decode_to_bfloat16_is_judged_under_each_target_s_upcast():
    """gfx942 compiles e4m3fn -> bfloat16 with the NaN codes read as numbers (+-480); sm90 keeps NaN."""
    pytest.importorskip("triton")
    import triton_decoders as td

    gfx = fp8check.check_decode(td.e4m3fn_to_bf16, format="e4m3fn", code_dtypes="uint8", triton_target="gfx942")
    (r,) = gfx.results
    assert {(d.input_hex, d.actual_value) for d in r.divergences} == {("0x7f", "480.0"), ("0xff", "-480.0")}
    assert any("gfx942 compiles e4m3fn -> bfloat16" in n for n in r.extra["notes"])
    assert fp8check.check_decode(td.e4m3fn_to_bf16, format="e4m3fn", code_dtypes="uint8",
                                 triton_target="sm90").passed


DECODE_PYPROJECT = """
[[tool.fp8check.dequant]]
kernel = "kind_kernels:block_dequant_wrong_axis"
format = "e4m3fnuz"
block = [32, 64]
code-dtypes = ["fp8"]

[[tool.fp8check.dequant]]
kernel = "kind_kernels:block_dequant"
format = "e4m3fn"
block = [32, 64]
apply = "multiply"

[[tool.fp8check.decode]]
kernel = "kind_kernels:fnuz_negative_zero_decoder"
format = "e4m3fnuz"

[[tool.fp8check.decode]]
kernel = "kind_kernels:fnuz_decoder"
format = "e4m3fnuz"
code-dtypes = ["uint8"]

[[tool.fp8check.decode]]
kernel = "kind_kernels:e4m3fn_decoder"
format = "e4m3fn"
output-dtype = "float32"
"""


def test_pytest_m_fnuz_picks_up_the_declared_decoders_and_dequant_kernels(pytester):
    (pytester.path / "kind_kernels.py").write_text((ROOT / "tests" / "kind_kernels.py").read_text())
    pytester.makepyprojecttoml(DECODE_PYPROJECT)
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "fnuz", "-k", "decoder_decodes or dequant_kernel",
                                "--fp8check-json", "out.json")
    reports = [r for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    assert {r.nodeid.rsplit("[", 1)[1] for r in reports if r.failed} == {"fnuz_negative_zero_decoder]",
                                                                        "block_dequant_wrong_axis]"}
    assert {r.nodeid.rsplit("[", 1)[1] for r in reports if r.passed} == {"fnuz_decoder]"}  # -m fnuz: not e4m3fn
    text = "\n".join(r.longreprtext for r in reports if r.failed)
    assert "code 0x80" in text and "--kind decode --format e4m3fnuz" in text
    assert "the kernel applied the scale of block" in text
    assert "--kind dequant --format e4m3fnuz --block 32x64 --apply multiply --code-dtype fp8" in text
    checks = json.loads((pytester.path / "out.json").read_text())["checks"]
    assert {(c["kernel"], c["kind"], c["passed"]) for c in checks} == {
        ("fnuz_negative_zero_decoder", "decode", False), ("fnuz_decoder", "decode", True),
        ("block_dequant_wrong_axis", "dequant", False)}
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "ocp", "-k", "dequant_kernel")
    result.assert_outcomes(passed=1)


# -- item 5: saturation at the wrong bound is 'overflow' ---------------------------------------------------------


def test_an_input_rounding_to_max_made_a_smaller_code_is_overflow():
    """236 and 240 -> 224 in e4m3fnuz were 'rounding' and 'other': the kernel saturates at a wrong bound."""
    import numpy as np

    from fp8check.casts.engine import classify
    from fp8check.reference import encode

    x = np.array([236.0, 240.0, -236.0, 1000.0], np.float32)
    expected = encode(x, "e4m3fnuz", "satfinite")
    at_224 = encode(np.array([224.0, 224.0, -224.0, 224.0], np.float32), "e4m3fnuz", "satfinite")
    assert list(classify(x.view(np.uint32), expected, at_224, "float32", "e4m3fnuz", "satfinite")) == ["overflow"] * 4
    one = np.array([1.0625], np.float32)  # below max, a rounding neighbour stays 'rounding'
    lower = encode(np.array([1.0], np.float32), "e4m3fnuz", "satfinite")
    assert list(classify(one.view(np.uint32), encode(one, "e4m3fnuz", "ieee"), lower, "float32", "e4m3fnuz",
                         "ieee")) == ["rounding"]


def test_a_cast_clamping_at_224_diverges_by_overflow_and_its_twin_conforms(tmp_path):
    argv = ["--format", "e4m3fnuz", "--profile", "satfinite", "--input-dtype", "bfloat16"]
    code, (r,) = _check(["kind_kernels:clamp_224_e4m3fnuz", *argv], tmp_path)
    assert code == cli.EXIT_DIVERGED and "rounding" not in r["categories"] and "other" not in r["categories"]
    assert r["categories"]["overflow"] > 0
    code, (r,) = _check(["kind_kernels:clamp_240_e4m3fnuz", *argv], tmp_path, "twin.json")
    assert code == cli.EXIT_OK


# -- block dequant kernels --------------------------------------------------------------------------------------


def test_a_block_dequant_on_the_wrong_axis_diverges_by_scale_and_its_twin_conforms(tmp_path, capsys):
    argv = ["--kind", "dequant", "--format", "e4m3fn", "--block", "32x64"]
    code, (r,) = _check(["kind_kernels:block_dequant_wrong_axis", *argv], tmp_path)
    assert code == cli.EXIT_DIVERGED and r["kind"] == "dequant" and set(r["categories"]) == {"scale"}
    first = r["divergences"][0]
    assert first["detail"] == ("element (0, 32) of 64x192, whole blocks, block (0, 0) of 32x64; the kernel applied "
                               "the scale of block (0, 1)")
    assert first["input_hex"].startswith("0x") and "in block (0, 0), scale" in first["input_value"]
    out = capsys.readouterr().out
    assert "reproduce: fp8check check kind_kernels:block_dequant_wrong_axis --kind dequant --format e4m3fn " \
           "--block 32x64 --apply multiply" in out
    code, (r,) = _check(["kind_kernels:block_dequant", *argv], tmp_path, "twin.json")
    assert code == cli.EXIT_OK and r["checked"] == 2 * (64 * 192 + 65 * 131)  # uint8 and the fp8 dtype
    # the same kernel declared to divide by its scale: every scale that is no power of two shows it
    code, (r,) = _check(["kind_kernels:block_dequant", *argv, "--apply", "divide"], tmp_path, "divide.json")
    assert code == cli.EXIT_DIVERGED and set(r["categories"]) == {"scale"}
    assert "times the scale (multiply), not divide" in r["divergences"][0]["detail"]


def test_an_fp8_dequant_kernel_given_bytes_is_not_judged_on_their_integer_values(tmp_path):
    # DeepSeek's weight_dequant converts its input's values: a uint8 tensor's bytes become integers. Not a way
    # it takes codes (no false alarm); the fp8 way is judged, and declared uint8 codes are judged as declared
    argv = ["kind_kernels:block_dequant_converting", "--kind", "dequant", "--format", "e4m3fn", "--block", "32x64"]
    code, (r,) = _check(argv, tmp_path)
    assert code == cli.EXIT_OK and r["extra"]["code_dtypes"] == ["fp8"], r["categories"]
    assert r["checked"] == 64 * 192 + 65 * 131
    assert any("integer values" in f["error"] and not f["declared"] for f in r["refusals"])
    code, (r,) = _check([*argv, "--code-dtype", "uint8"], tmp_path, "declared.json")
    assert code == cli.EXIT_DIVERGED and r["categories"]


def test_an_fp8_dequant_kernel_given_bytes_with_a_wrong_block_axis_is_judged_by_its_fp8_way_only(tmp_path, capsys):
    # the same kernel with a bug of its own: its uint8 outputs are still integers times (other blocks') scales,
    # so that way stays a refusal, and the bug is shown as what it is (scale), not hidden behind 'other'
    argv = ["kind_kernels:block_dequant_converting_wrong_axis", "--kind", "dequant", "--format", "e4m3fn",
            "--block", "32x64"]
    code, (r,) = _check(argv, tmp_path)
    assert code == cli.EXIT_DIVERGED and r["extra"]["code_dtypes"] == ["fp8"], r["extra"]["code_dtypes"]
    assert set(r["categories"]) == {"scale"}, r["categories"]
    assert any("integer values" in f["error"] and not f["declared"] for f in r["refusals"])
    assert "the kernel applied the scale of block (0, 1)" in capsys.readouterr().out


def test_a_dequant_to_bfloat16_is_judged_after_the_float32_product_is_rounded_to_it():
    report = fp8check.check_dequant("kind_kernels:block_dequant_bf16", format="e4m3fn", block=(32, 64))
    assert report.passed and report.results[0].extra["output_dtype"] == "bfloat16"
    with pytest.raises(KernelCallError, match="returned bfloat16 values, declared float32$"):
        fp8check.check_dequant("kind_kernels:block_dequant_bf16", format="e4m3fn", block=(32, 64),
                               output_dtype="float32")


def test_a_triton_block_dequant_with_the_block_shape_transposed_diverges_in_the_faithful_interpreter():
    pytest.importorskip("triton")
    import triton_dequant as tq

    kw = {"format": "e4m3fn", "block": (tq.ROWS, tq.COLS), "code_dtypes": "uint8", "triton_target": "sm90"}
    bad = fp8check.check_dequant(tq.block_dequant_wrong_axis, **kw)
    (r,) = bad.results
    assert not r.passed and set(r.categories) == {"scale"}
    assert "the kernel applied the scale of block" in r.divergences[0].detail
    assert fp8check.check_dequant(tq.block_dequant, **kw).passed


def test_a_dequant_failure_prints_each_category_s_elements_and_its_faults_once():
    # a Triton dequant reading the scale of block (j, i): scale divergences, and out-of-bounds loads of the
    # scales (not performed: 'other' values) where the grid is not square. Each category shows its own
    # elements, and a fault is printed as a fault (with its kernel line), not as an element of no code
    pytest.importorskip("triton")
    import triton_dequant as tq

    from fp8check.terminal.divergences import result_text

    report = fp8check.check_dequant(tq.block_dequant_scale_transposed, format="e4m3fn", block=(tq.ROWS, tq.COLS),
                                    code_dtypes="uint8", triton_target="sm90")
    (r,) = report.results
    assert {"scale", "out_of_bounds"} <= set(r.categories), r.categories
    lines = result_text(r).splitlines()
    assert not [line for line in lines if "code - =" in line], lines
    assert [line for line in lines if line.lstrip().startswith("out_of_bounds")] == [
        line for line in lines if "lanes (kernel fault)" in line or "lane (kernel fault)" in line]
    shown = {line.split()[0] for line in lines if " code 0x" in line}
    assert shown == set(r.categories) - {"out_of_bounds"}, (shown, lines)


def test_a_triton_dequant_reading_bytes_as_integers_with_out_of_bounds_scales_is_judged_by_its_fp8_way():
    # weight_dequant as written, with its scale index transposed: part of its scales are loaded out of bounds
    # (no value at all), in both ways of calling it. Its uint8 way still reads the bytes as integers wherever
    # its fp8 way applies some block's scale, so that way is not judged (it was: ~1,300 'nan' and 'signed_zero'
    # elements of integers nobody passes)
    pytest.importorskip("triton")
    import triton_dequant as tq

    report = fp8check.check_dequant(tq.block_dequant_converting_scale_transposed, format="e4m3fn",
                                    block=(tq.ROWS, tq.COLS), triton_target="sm90")
    (r,) = report.results
    assert r.extra["code_dtypes"] == ["fp8"], (r.extra["code_dtypes"], r.categories)
    assert {"scale", "out_of_bounds"} <= set(r.categories) and "signed_zero" not in r.categories, r.categories
    assert any("integer values" in f.error and not f.declared for f in r.refusals)


def test_a_dequant_check_lists_elements_of_every_category_under_its_cap(tmp_path):
    # the listing was the first N elements in row order: with the scales of a row's first blocks wrong, the
    # block whose scale is read out of bounds ('other') had a count and no element to show
    pytest.importorskip("triton")
    code, (r,) = _check(["triton_dequant:block_dequant_scale_transposed", "--kind", "dequant", "--format", "e4m3fn",
                         "--block", "32x64", "--code-dtype", "uint8", "--triton-target", "sm90", "--max-listed", "10"],
                        tmp_path)
    assert code == cli.EXIT_DIVERGED and {"scale", "other"} <= set(r["categories"]), r["categories"]
    listed = {d["category"] for d in r["divergences"]}
    assert set(r["categories"]) - {"out_of_bounds"} <= listed, (listed, r["categories"])
    assert all(sum(d["category"] == c for d in r["divergences"]) <= 10 for c in listed)


def test_a_kernel_fault_s_card_in_the_html_report_is_the_fault_not_an_empty_element(tmp_path):
    # the reproducer card of a fault category showed 'input - float32 = / expected - = / actual - =': a fault
    # has no input, expected or actual value; its card is its kernel line, as the table of faults below it
    pytest.importorskip("triton")
    from report_support import parse, text

    out = tmp_path / "r.html"
    assert cli.main(["check", "triton_dequant:block_dequant_scale_transposed", "--kind", "dequant", "--format",
                     "e4m3fn", "--block", "32x64", "--code-dtype", "uint8", "--triton-target", "sm90",
                     "--html", str(out)]) == cli.EXIT_DIVERGED
    tree = parse(out.read_text())
    (card,) = tree.xpath("//div[@class='card'][@data-category='out_of_bounds']")
    assert not card.xpath(".//tr[@data-row='expected']") and "loads outside the tensor" in text(card), text(card)
    assert tree.xpath("//h3[text()='Kernel faults']")  # the table the card points to
    (scale,) = tree.xpath("//div[@class='card'][@data-category='scale']")
    assert scale.xpath(".//tr[@data-row='expected']")  # an element's card keeps its values


def test_a_quantizer_s_verdict_names_the_input_dtypes_its_check_does_not_draw(capsys):
    assert cli.main(["check", "quantizer_mutants:tensorwise_e4m3fn", "--kind", "quantize", "--recipe", "tensorwise",
                     "--max-examples", "2"]) == cli.EXIT_OK
    verdict = next(line for line in capsys.readouterr().out.splitlines() if "CONFORMS" in line)
    assert "(float16 not checked: fp8check draws quantizer inputs of float32 and bfloat16 only)" in verdict
    assert "(float64 not checked:" in verdict


def test_a_declared_cast_without_float64_says_so_in_its_verdict(capsys):
    assert cli.main(["check", "kind_kernels:rounds_f64_once", "--format", "e4m3fn", "--profile", "satfinite",
                     "--input-dtype", "bfloat16", "--max-examples", "2"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "CONFORMS: every output equals the reference bit for bit (float64 not checked: add float64 to " \
           "input-dtypes (--input-dtype) to check it)" in out


def test_html_reports_of_decode_and_dequant_checks(tmp_path):
    for argv in (["kind_kernels:fnuz_negative_zero_decoder", "--kind", "decode", "--format", "e4m3fnuz"],
                 ["kind_kernels:block_dequant_wrong_axis", "--kind", "dequant", "--format", "e4m3fn", "--block",
                  "32x64", "--code-dtype", "uint8"]):
        out = tmp_path / "r.html"
        assert cli.main(["check", *argv, "--html", str(out)]) == cli.EXIT_DIVERGED
        html = out.read_text()
        assert "fp8check check " + argv[0] in html and argv[2] in html
        assert ("0x80" in html) if "decode" in argv else ("the kernel applied the scale of block (0, 1)" in html)


def test_an_isolated_decode_check_hands_the_child_both_ways_of_taking_codes(tmp_path):
    """The child's record of the last call describes an fp8 tensor too (torch has no isfinite for fp8 dtypes:
    that call was a refusal before)."""
    code, (r,) = _check(["kind_kernels:fnuz_negative_zero_decoder", "--kind", "decode", "--format", "e4m3fnuz",
                         "--isolate"], tmp_path)
    assert code == cli.EXIT_DIVERGED and not r["refusals"] and r["checked"] == 512


@pytest.mark.gpu
def test_gpu_compiled_triton_decodes_as_its_target_table_says():
    """On a CUDA device, Triton's own e4m3fn -> bfloat16 compiled for the GPU: sm90 keeps NaN (the table's
    `exact`), so the check conforms; the interpreted gfx942 run above says where AMD differs. Not run without
    a CUDA device."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (none found)")
    import triton_decoders as td

    report = fp8check.check_decode(td.e4m3fn_to_bf16, format="e4m3fn", code_dtypes="uint8", device="cuda")
    assert report.passed, str(report)


@pytest.mark.parametrize("argv, message", [
    (["--kind", "decode"], "--kind decode needs --format FMT"),
    (["--kind", "decode", "--format", "e4m3fn", "--code-dtype", "int8"], "code dtype 'int8': use uint8 or fp8"),
    (["--kind", "dequant", "--format", "e4m3fn", "--block", "0x4"], "block = '0x4': give [rows, cols]"),
    (["--format", "e4m3fn", "--block", "2x2"], "--block is for --kind dequant"),
    (["--format", "e4m3fn", "--output-dtype", "float16"], "--code-dtype and --output-dtype are for --kind decode"),
])
def test_bad_decode_and_dequant_arguments_are_one_line_and_exit_2(argv, message, capsys):
    assert cli.main(["check", "kind_kernels:fnuz_decoder", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("kind, entry, message", [
    ("cast", {"block": [2, 2]}, "'block' is for dequant kernels"),
    ("quantizer", {"recipe": "tensorwise", "output-dtype": "float16"}, "'code-dtypes' and 'output-dtype' are for"),
    ("dequant", {"apply": "round"}, "apply = 'round': a dequant kernel applies its scale by"),
    ("dequant", {"scale": 2.0}, "'scale' is for static-scale quantizers"),
    ("decode", {"code-dtypes": ["fp16"]}, "code dtype 'fp16'"),
])
def test_bad_decode_and_dequant_tables_name_the_key(kind, entry, message):
    from fp8check.declarations import from_table
    from fp8check.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        from_table(kind, {"kernel": "kind_kernels:fnuz_decoder", "format": "e4m3fn", **entry})


def test_a_dequant_divergence_another_block_s_scale_explains_names_it_when_a_direction_gives_the_same_values():
    # From a new user's Triton weight_dequant whose scale row stride was N // 128 (not ceil): block (1, 0) read
    # block (0, 2)'s scale 8.0 where its own is 0.12494885; 1/0.12494885 = 8.0033 gives the same bfloat16 values,
    # and the detail said only "divided by the scale (divide), not multiply". The kernel's arithmetic is real:
    # each code's value times the other block's scale in float32, rounded to bfloat16.
    import numpy as np

    from fp8check import formats, reference
    from fp8check.quantizers import dequant

    fmt = formats.E4M3FN
    scales = np.array([[0.5, 2.0, 8.0], [0.12494885, 4.0, 0.25]], dtype=np.float32)
    codes = np.arange(0x08, 0x78, dtype=np.uint8)  # positive normal codes, all in block (1, 0)
    values = reference.decode(codes, fmt).astype(np.float32)
    where = (np.ones(codes.size, np.int64), np.zeros(codes.size, np.int64))
    own = np.full(codes.size, scales[1, 0], dtype=np.float32)
    bf16 = lambda v: dequant._to_dtype_bits(v.astype(np.float32), "bfloat16")  # noqa: E731
    expected, actual = bf16(values * own), bf16(values * scales[0, 2])
    wrong = expected != actual
    assert wrong.sum() > 50 and (bf16(values / own) == actual).all()  # the ambiguity is real
    cats, why = dequant._categories(values[wrong], codes[wrong], own[wrong], (where[0][wrong], where[1][wrong]),
                                    expected[wrong], actual[wrong], scales, "multiply", "bfloat16", fmt)
    assert set(cats) == {"scale"}
    assert all("the kernel applied the scale of block (0, 2)" in w for w in why), why[0]

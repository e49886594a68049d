"""HTML reports rendered from real results: the Triton interpreter's casts (thousands of real
divergences), torch held to another version's profile, planted kernel changes; checked through
a real HTML parser (lxml) and by reading the map images' pixels."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fp8check import cli, formats, inputs, reference
from fp8check.terminal import format_bytes
from fp8check.errors import InvalidValueError
from fp8check.report import Source, comparison_report, divergence_report, graphics, load_source
from fp8check.results import MAP16_ORDER, CheckResult, Divergence, InputMap16

from report_support import card_bits, external_references, has_class, parse, png_from_data_uri, text

pytest.importorskip("torch")

try:  # pytester's in-process runs unload modules first imported inside them, and
    import triton  # noqa: F401  Triton's native extension cannot be loaded twice
except ImportError:
    pass

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def triton_f16(tmp_path_factory):
    """The Triton interpreter's e4m3fn cast of every float16 (a known upstream bug: ~22k divergences),
    every divergence listed in the JSON, the report written by ``check --html``."""
    pytest.importorskip("triton")
    d = tmp_path_factory.mktemp("triton")
    code = cli.main(["check", "triton-interpreter", "--format", "e4m3fn", "--input-dtype", "float16",
                     "--max-examples", "20", "--max-listed", "0", "--json", str(d / "r.json"),
                     "--html", str(d / "r.html")])
    assert code == cli.EXIT_DIVERGED
    return json.loads((d / "r.json").read_text()), (d / "r.json"), (d / "r.html")


def _categories_in_row(row, columns):
    out = {}
    for name, cell in zip(columns, row.xpath("./td")):
        if name in MAP16_ORDER[1:-1]:
            t = text(cell)
            out[name] = 0 if t == "·" else int(t.replace(",", ""))
    return out


def _ulps_by_ml_dtypes(fmt_name: str, expected: int, actual: int) -> float | None:
    """The error in ulps of the expected code, computed from ml_dtypes' own decoding and finfo."""
    dtype = getattr(ml_dtypes, f"float8_{fmt_name}")
    e, a = (float(np.array([c], dtype=np.uint8).view(dtype).astype(np.float64)[0]) for c in (expected, actual))
    if not (math.isfinite(e) and math.isfinite(a)):
        return None
    info = ml_dtypes.finfo(dtype)
    exponent = max(math.floor(math.log2(abs(e))) if e else info.minexp, info.minexp)
    return (a - e) / 2.0 ** (exponent - info.nmant)


# -- the per-input map in the results ------------------------------------------------------


def test_results_carry_what_happened_to_every_16_bit_input(triton_f16):
    doc, _, _ = triton_f16
    m = InputMap16.from_dict(doc["extra"]["map16"])
    assert m.checked == 1 << 16 and m.input_dtype == "float16"
    counts = m.counts()
    assert counts.pop("match") == (1 << 16) - sum(doc["categories"].values())
    assert counts == doc["categories"]
    # the kernel's real codes and the reference's, for every input
    from fp8check.casts.adapters import get_kernel

    x = inputs.from_bits(np.arange(1 << 16), "float16")
    actual = np.asarray(get_kernel("triton-interpreter").cast(x, formats.E4M3FN)).astype(np.uint8)
    assert np.array_equal(m.actual, actual)
    from fp8check.casts.adapters import get_kernel as _k

    profile = _k("triton-interpreter").profile_for(formats.E4M3FN)
    assert np.array_equal(m.expected, reference.encode(x, formats.E4M3FN, profile))
    # every listed divergence (all of them: --max-listed 0) sits in the map under its category
    assert len(doc["divergences"]) == sum(doc["categories"].values())
    for d in doc["divergences"]:
        i = int(d["input_hex"], 16)
        assert m.order[m.category[i]] == d["category"]
        assert (m.expected[i], m.actual[i]) == (int(d["expected_hex"], 16), int(d["actual_hex"], 16))
    # a few kilobytes, not 3 x 64 KiB
    assert sum(len(doc["extra"]["map16"][k]) for k in ("category", "expected", "actual")) < 16_000


@pytest.mark.parametrize("bad", [
    {},
    {"order": list(MAP16_ORDER), "input_dtype": "float16", "category": "not base64!", "expected": "", "actual": ""},
    {"order": ["match"], "input_dtype": "float16", "category": "", "expected": "", "actual": ""},
])
def test_a_malformed_map_is_a_typed_error(bad):
    with pytest.raises(InvalidValueError, match="malformed map16"):
        InputMap16.from_dict(bad)


def test_a_map_that_inflates_beyond_65536_bytes_is_refused():
    import base64
    import zlib

    good = InputMap16.empty("float16").to_dict()
    good["category"] = base64.b64encode(zlib.compress(bytes(1 << 24))).decode()  # 16 MiB of zeros
    with pytest.raises(InvalidValueError, match="malformed map16"):
        InputMap16.from_dict(good)


@pytest.mark.slow  # a pytest run on two workers and a check
def test_the_map_survives_the_plugin_under_xdist_and_equals_the_engines(pytester, tmp_path):
    """Several properties (hazards, Hypothesis, the sweep) on two workers fill one map: the same as
    ``fp8check check``'s single exhaustive run of the same kernel."""
    # A kernel repository: no test files of its own, the suite comes from the installed package.
    (pytester.path / "fp8_mutants.py").write_text((ROOT / "tests" / "fp8_mutants.py").read_text())
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    result = pytester.runpytest_subprocess(
        "--fp8check-kernel", "fp8_mutants:round_toward_zero_e4m3fnuz", "--fp8check-format", "e4m3fnuz",
        "--fp8check-input-dtype", "float16", "-p", "no:cacheprovider", "-n", "2",
        "-k", "not float64 and not known_upstream and not hypothesis", "--fp8check-json", "r.json",
        "--fp8check-report", "r.html")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert any("wrote the HTML report of 1 checks" in line for line in result.outlines)
    doc = json.loads((pytester.path / "r.json").read_text())
    (check,) = doc["checks"]
    plugin_map = InputMap16.from_dict(check["extra"]["map16"])
    out = tmp_path / "engine.json"
    assert cli.main(["check", "fp8_mutants:round_toward_zero_e4m3fnuz", "--format", "e4m3fnuz", "--input-dtype",
                     "float16", "--max-examples", "0", "--json", str(out)]) == cli.EXIT_DIVERGED
    engine_map = InputMap16.from_dict(json.loads(out.read_text())["extra"]["map16"])
    for field in ("category", "expected", "actual"):
        assert np.array_equal(getattr(plugin_map, field), getattr(engine_map, field)), field
    assert check["extra"]["profile_summary"].startswith("RNE")
    # the HTML written by the plugin shows the same check
    tree = parse((pytester.path / "r.html").read_text())
    rows = tree.xpath("//table[@id='summary-table']/tbody/tr")
    assert len(rows) == 1 and "round_toward_zero_e4m3fnuz" in text(rows[0])


# -- the divergence report ------------------------------------------------------------------


def test_divergence_report_of_the_triton_interpreter(triton_f16):
    doc, _, html_path = triton_f16
    html = html_path.read_text()
    tree = parse(html)
    assert external_references(tree) == []
    # verdict: diverges, every divergence a known upstream bug
    (verdict,) = tree.xpath("//section[@id='verdict']")
    assert "v-known" in verdict.get("class") and "DIVERGES" in text(verdict)
    assert f"{sum(doc['categories'].values()):,} divergent inputs" in text(verdict)
    # the summary table: one row with the exact counts
    columns = [text(th) for th in tree.xpath("//table[@id='summary-table']/thead/tr/th")]
    (row,) = tree.xpath("//table[@id='summary-table']/tbody/tr")
    assert {k: v for k, v in _categories_in_row(row, columns).items() if v} == doc["categories"]
    assert "triton-interpreter" in text(row) and "e4m3fn" in text(row) and "float16" in text(row)
    # one card per category: the simplest reproducer (the JSON lists the simplest first)
    cards = tree.xpath(f"//div[{has_class('card')}]")
    assert [c.get("data-category") for c in cards] == [k for k in MAP16_ORDER if k in doc["categories"]]
    for card in cards:
        cat = card.get("data-category")
        d = next(x for x in doc["divergences"] if x["category"] == cat)
        assert text(card.xpath(".//tr[@data-row='input']//span[@class='hex']")[0]) == d["input_hex"]
        e, a = int(d["expected_hex"], 16), int(d["actual_hex"], 16)
        assert card_bits(card, "input-bits")[0] == format(int(d["input_hex"], 16), "016b")
        assert card_bits(card, "expected") == (format(e, "08b"), format(e ^ a, "08b"))
        assert card_bits(card, "actual") == (format(a, "08b"), format(e ^ a, "08b"))
        # sign | exponent | mantissa: 1 | 4 | 3 bits for e4m3fn
        groups = card.xpath(f".//tr[@data-row='expected']//span[{has_class('f')}]")
        assert [len(g.xpath(f".//span[{has_class('b')}]")) for g in groups] == [1, 4, 3]
        err_text = text(card.xpath(".//tr[@data-row='error']/td")[0])
        want = _ulps_by_ml_dtypes("e4m3fn", e, a)
        if want is None:
            assert err_text.startswith("no finite error")
        else:
            got = float(re.match(r"([+-]?[\d.]+) ulp", err_text).group(1))
            assert got == pytest.approx(want, abs=1e-9)
        (explain,) = card.xpath(".//pre[@data-command='explain']")
        assert text(explain) == (f"fp8check explain {d['input_hex']} --format e4m3fn --input-dtype float16 "
                                 "--profile triton-interpreter")
    (cmd,) = tree.xpath("//pre[@data-command='check']")
    assert text(cmd) == doc["command"] and "--seed 0" in text(cmd)
    # the map: one pixel per float16 input, coloured by category; matches transparent
    (image,) = tree.xpath("//svg[contains(@class, 'map')]//image")
    pixels = png_from_data_uri(image.get("href"))
    assert pixels.shape == (256, 256, 4)
    flat = pixels.reshape(-1, 4)
    for cat, n in doc["categories"].items():
        rgb = graphics.CATEGORY_RGB[cat]
        assert int(((flat[:, :3] == rgb).all(axis=1) & (flat[:, 3] == 255)).sum()) == n, cat
    assert int((flat[:, 3] == 0).sum()) == (1 << 16) - sum(doc["categories"].values())
    for d in doc["divergences"][::97]:
        i = int(d["input_hex"], 16)
        assert tuple(flat[i, :3]) == graphics.CATEGORY_RGB[d["category"]]
    assert flat[0x3C00, 3] == 0  # 1.0 is exact: the interpreter keeps it
    # the error plot: one path per category
    paths = tree.xpath("//svg[contains(@class, 'plot')]//path")
    assert {p.get("class").split()[-1] for p in paths} == {f"c-{k}" for k in doc["categories"]}
    # listed divergences: capped in the page, counted in full
    rows = tree.xpath("//table[@id='check-0-rows']/tbody/tr")
    assert len(rows) == 200
    assert [r.get("data-category") for r in rows] == [d["category"] for d in doc["divergences"][:200]]
    # the embedded summary: JSON that parses, with the same counts
    (summary,) = tree.xpath("//script[@id='fp8check-summary']")
    data = json.loads(summary.text)
    assert data["verdict"] == "known" and data["checks"][0]["categories"] == doc["categories"]
    # profiles and environment
    assert "triton-interpreter" in text(tree.xpath("//section[@id='profiles']")[0])
    env = text(tree.xpath("//section[@id='environment']")[0])
    assert doc["environment"]["torch"] in env and doc["environment"]["triton"] in env


def test_a_report_of_every_divergence_stays_small(triton_f16, tmp_path, capsys):
    """22,246 divergences, all listed in the JSON: the page lists 200 and keeps every count exact."""
    doc, json_path, _ = triton_f16
    out = tmp_path / "all.html"
    assert cli.main(["report", str(json_path), "-o", str(out)]) == cli.EXIT_OK
    size = out.stat().st_size
    assert sum(doc["categories"].values()) > 10_000 and len(doc["divergences"]) > 10_000
    assert size < 400_000, size
    assert f"({format_bytes(size)})" in capsys.readouterr().out


@pytest.mark.slow  # a float32 check diverging on 1.4 million inputs
def test_float32_checks_plot_their_listed_reproducers(tmp_path):
    """torch 2.13 held to torch 2.11's profile: e4m3fn overflow saturates instead of giving NaN."""
    out = tmp_path / "t.json"
    assert cli.main(["check", "torch-cpu", "--format", "e4m3fn", "--profile", "torch-2.11", "--max-examples", "10",
                     "--input-dtype", "float32", "--json", str(out), "--html", str(tmp_path / "t.html")]) == cli.EXIT_DIVERGED
    doc = json.loads(out.read_text())
    assert set(doc["categories"]) == {"overflow", "infinity"} and "map16" not in doc["extra"]
    tree = parse((tmp_path / "t.html").read_text())
    assert "v-fail" in tree.xpath("//section[@id='verdict']")[0].get("class")
    assert not tree.xpath("//svg[contains(@class, 'map')]")
    (caption,) = tree.xpath("//figure[@class='errorplot']/figcaption")
    assert f"the {len(doc['divergences'])} listed reproducers of {sum(doc['categories'].values()):,}" in text(caption)
    card = tree.xpath("//div[@data-category='overflow']")[0]
    d = next(x for x in doc["divergences"] if x["category"] == "overflow")
    assert card_bits(card, "input-bits")[0] == format(int(d["input_hex"], 16), "032b")
    (explain,) = card.xpath(".//pre[@data-command='explain']")
    assert text(explain).endswith("--input-dtype float32 --profile torch-2.11")


def test_the_commands_in_a_report_reproduce_what_it_shows(tmp_path, capsys):
    """Copy-paste the card's explain command and the check command: the same code, the same counts."""
    out = tmp_path / "t.json"
    assert cli.main(["check", "torch-cpu", "--format", "e4m3fn", "--profile", "torch-2.11", "--input-dtype",
                     "bfloat16", "--max-examples", "0", "--json", str(out), "--html", str(tmp_path / "t.html")]) == 1
    doc = json.loads(out.read_text())
    tree = parse((tmp_path / "t.html").read_text())
    capsys.readouterr()
    for card in tree.xpath(f"//div[{has_class('card')}]"):
        argv = shlex.split(text(card.xpath(".//pre[@data-command='explain']")[0]))
        assert argv[:2] == ["fp8check", "explain"]
        assert cli.main(argv[1:]) == cli.EXIT_OK
        shown = capsys.readouterr().out
        expected = text(card.xpath(".//tr[@data-row='expected']//span[@class='hex']")[0])
        (row,) = [line for line in shown.splitlines() if line.strip().startswith("torch-2.11")]
        assert expected in row
    argv = shlex.split(text(tree.xpath("//pre[@data-command='check']")[0]))
    again = tmp_path / "again.json"
    assert cli.main(argv[1:] + ["--json", str(again)]) == cli.EXIT_DIVERGED
    assert json.loads(again.read_text())["categories"] == doc["categories"]


def test_several_results_files_are_merged(triton_f16, tmp_path):
    _, json_path, _ = triton_f16
    other = tmp_path / "ml.json"
    assert cli.main(["check", "ml_dtypes", "--format", "e4m3fnuz", "--input-dtype", "bfloat16", "--max-examples", "0",
                     "--json", str(other)]) == cli.EXIT_OK
    out = tmp_path / "merged.html"
    assert cli.main(["report", str(json_path), str(other), "-o", str(out)]) == cli.EXIT_OK
    tree = parse(out.read_text())
    rows = tree.xpath("//table[@id='summary-table']/tbody/tr")
    assert [r.get("data-status") for r in rows] == ["known", "conforms"]
    assert other.name in text(rows[1])  # the source column (its base name)
    # only the diverging check gets a section
    assert len(tree.xpath(f"//section[{has_class('check')}]")) == 1


# -- comparison ------------------------------------------------------------------------------

BEFORE = "import torch\n\ndef cast(x):\n    return x.clamp(-240.0, 240.0).to(torch.float8_e4m3fnuz)\n"
AFTER = ("import torch\n\ndef cast(x):\n    # the e4m3fn maximum on an fnuz target\n"
         "    return x.clamp(-448.0, 448.0).to(torch.float8_e4m3fnuz)\n")


def _run_kernel_version(tmp_path, monkeypatch, name, source, dtype="float16"):
    d = tmp_path / name
    d.mkdir()
    (d / "mycast.py").write_text(source)
    monkeypatch.chdir(d)
    code = cli.main(["check", "mycast.py:cast", "--format", "e4m3fnuz", "--profile", "satfinite", "--input-dtype", dtype,
                     "--max-examples", "0", "--json", "r.json"])
    return code, d / "r.json"


def test_compare_before_and_after_a_kernel_change(tmp_path, monkeypatch):
    code_a, a = _run_kernel_version(tmp_path, monkeypatch, "before", BEFORE)
    code_b, b = _run_kernel_version(tmp_path, monkeypatch, "after", AFTER)
    assert (code_a, code_b) == (cli.EXIT_OK, cli.EXIT_DIVERGED)
    doc_b = json.loads(b.read_text())
    out = tmp_path / "diff.html"
    assert cli.main(["report", str(a), str(b), "--compare", "-o", str(out)]) == cli.EXIT_OK
    tree = parse(out.read_text())
    verdict = tree.xpath("//section[@id='verdict']")[0]
    assert "v-fail" in verdict.get("class") and "REGRESSED" in text(verdict) and "1 check newly diverges" in text(verdict)
    (row,) = tree.xpath("//table[@id='changes-table']/tbody/tr")
    assert row.get("data-change") == "newly_fails"
    total = sum(doc_b["categories"].values())
    assert f"+{total:,}" in text(row)
    # appeared inputs: exact, from both maps; every one of them in the difference map
    (section,) = tree.xpath("//section[@id='change-0']")
    assert f"appeared {total:,}" in text(section) and "disappeared 0" in text(section)
    pixels = png_from_data_uri(section.xpath(".//svg[contains(@class, 'map')]//image")[0].get("href")).reshape(-1, 4)
    appeared = (pixels[:, :3] == graphics.CATEGORY_RGB["appeared"]).all(axis=1) & (pixels[:, 3] == 255)
    m = InputMap16.from_dict(doc_b["extra"]["map16"])
    assert np.array_equal(np.flatnonzero(appeared), np.flatnonzero(m.category != 0))
    # the listed examples are the simplest appeared inputs: 256.0 (0x5c00) first
    first = section.xpath(f".//table[{has_class('examples')}]/tbody/tr")[0]
    assert "0x5c00" in text(first) and "256.0" in text(first)


def test_compare_torch_held_to_2_11_and_to_2_12(tmp_path):
    """The same torch cast judged by two profiles: the check matches by kernel, the profile change shows."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cli.main(["check", "torch-cpu", "--format", "e4m3fn", "--profile", "torch-2.11", "--input-dtype", "bfloat16",
                     "--max-examples", "0", "--json", str(a)]) == cli.EXIT_DIVERGED
    assert cli.main(["check", "torch-cpu", "--format", "e4m3fn", "--profile", "torch-2.12", "--input-dtype", "bfloat16",
                     "--max-examples", "0", "--json", str(b)]) == cli.EXIT_OK
    tree = parse(comparison_report(load_source(a), load_source(b)))
    (row,) = tree.xpath("//table[@id='changes-table']/tbody/tr")
    assert row.get("data-change") == "newly_passes"
    assert "torch-2.11 → torch-2.12" in text(row)
    assert "NO REGRESSION" in text(tree.xpath("//section[@id='verdict']")[0])


# -- escaping -------------------------------------------------------------------------------

HOSTILE = '<script>alert("k")</script>\'" onmouseover="alert(1)</style><b>x</b>&amp;'


def _hostile_checks():
    div = Divergence(category="scale", input_hex="0x7f800000", expected_hex="0x3f800000", actual_hex="0x00000000",
                     input_dtype="float32", input_value=HOSTILE, expected_value="1.0", actual_value=HOSTILE,
                     detail=f"block {HOSTILE}")
    quant = CheckResult(kernel=f"mod{HOSTILE}:q", format="e4m3fn", profile=HOSTILE, passed=False, checked=5,
                        categories={"scale": 1}, divergences=[div], kind="quantize", command=f"fp8check {HOSTILE}",
                        expected_failure=HOSTILE, extra={"note": HOSTILE, "profile_summary": HOSTILE})
    cast_div = Divergence(category="rounding", input_hex="0x3c40", expected_hex="0x38", actual_hex="0x39",
                          input_dtype="float16", input_value="1.0625", expected_value="1.0", actual_value="1.125")
    m = InputMap16.empty("float16")
    m.record(np.arange(1 << 16), np.zeros(1 << 16), np.zeros(1 << 16), np.zeros(1 << 16))
    m.record([0x3C40], [0x38], [0x39], [MAP16_ORDER.index("rounding")])
    cast = CheckResult(kernel=f"k{HOSTILE}", format="e4m3fn", profile="ieee", passed=False, checked=65536,
                       categories={"rounding": 1}, divergences=[cast_div], input_dtype="float16",
                       extra={"map16": m.to_dict(), "profile_description": HOSTILE})
    return [quant, cast]


def _strings(data) -> str:
    """Every string in a JSON value, joined."""
    if isinstance(data, dict):
        return "\n".join(_strings(k) + "\n" + _strings(v) for k, v in data.items())
    if isinstance(data, list):
        return "\n".join(_strings(v) for v in data)
    return data if isinstance(data, str) else ""


def _assert_inert(html: str) -> None:
    tree = parse(html)
    scripts = tree.xpath("//script")
    assert [s.get("type") for s in scripts] == ["application/json", None]  # ours only
    assert len(tree.xpath("//style")) == 1 and not tree.xpath("//b")
    for el in tree.iter():
        if isinstance(el.tag, str):
            assert not any(a.lower().startswith("on") for a in el.attrib), (el.tag, dict(el.attrib))
    raw = scripts[0].text
    assert not set("<>&") & set(raw)  # escaped as \u003c, \u003e, \u0026
    assert HOSTILE in _strings(json.loads(raw))
    assert HOSTILE in tree.text_content()  # shown as text
    assert external_references(tree) == []


def test_names_and_metadata_are_rendered_as_text_never_as_markup():
    env = {HOSTILE: HOSTILE, "torch": "2.13"}
    html = divergence_report([Source(name=HOSTILE, environment=env, checks=_hostile_checks())])
    _assert_inert(html)
    tree = parse(html)
    assert any(HOSTILE in text(h) for h in tree.xpath("//h2"))
    assert any(HOSTILE in text(t) for t in tree.xpath("//svg/title"))  # the map's title names the kernel
    a = Source(name=HOSTILE, environment=env, checks=_hostile_checks())
    b = Source(name="b" + HOSTILE, environment={}, checks=[])
    _assert_inert(comparison_report(a, b))


def test_the_inertness_check_sees_injected_markup():
    """The escaping test can fail: a page that lets a name through as markup is caught."""
    html = divergence_report([Source(name="x", environment={}, checks=_hostile_checks())])
    broken = html.replace("<h2>", f"<h2>{HOSTILE}", 1)
    with pytest.raises(AssertionError):
        _assert_inert(broken)


# -- the command line ----------------------------------------------------------------------


def _one_line_error(capsys, argv, message):
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "not JSON"),
    (b"\xff\xfe\x00", "not JSON"),
    ("[1, 2]", "not fp8check results, an audit or a gate report"),
    ('{"hello": 1}', "not fp8check results, an audit or a gate report"),
    ('{"checks": [{"kernel": "k"}]}', "missing format, profile, passed, checked"),
    ('{"checks": {"a": 1}}', "'checks' is not a list"),
    ('{"kernel": "k", "format": "e4m3fn", "profile": "ieee", "passed": false, "checked": 1, '
     '"divergences": [{"category": "bogus", "input_hex": "0x1", "expected_hex": "0x1", "actual_hex": "0x2"}]}',
     "unknown divergence category"),
    ('{"kernel": "k", "format": "e4m3fn", "profile": "ieee", "passed": false, "checked": 1, '
     '"extra": {"map16": {"order": []}}}', "malformed map16"),
])
def test_bad_report_inputs_are_one_line_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "in.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    _one_line_error(capsys, ["report", str(path), "-o", str(tmp_path / "o.html")], message)
    assert not (tmp_path / "o.html").exists()


def test_report_usage_errors(tmp_path, capsys, triton_f16):
    _, good, _ = triton_f16
    _one_line_error(capsys, ["report", str(tmp_path), "-o", str(tmp_path / "o.html")], "is a directory")
    _one_line_error(capsys, ["report", str(good), "--compare", "-o", str(tmp_path / "o.html")], "exactly two")
    _one_line_error(capsys, ["report", str(good), str(good), str(good), "--compare", "-o", "o.html"], "exactly two")
    _one_line_error(capsys, ["report", str(good), "-o", str(tmp_path / "no" / "such" / "dir.html")], "cannot write")
    _one_line_error(capsys, ["report", "-o", "x.html"], "the following arguments are required")
    audit = tmp_path / "audit.json"
    audit.write_text('{"fp8check_audit": 1, "tensors": [], "summary": {}}')
    _one_line_error(capsys, ["report", str(good), str(audit), "-o", str(tmp_path / "o.html")], "cannot mix")

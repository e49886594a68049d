"""The audit report, rendered from a real audit of a checkpoint written by torch and safetensors
(planted NaN codes, a missing scale on clipped weights, a truncated file, names and metadata that look
like markup), checked through lxml against the audit's JSON and the tensors written."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from fp8check import cli
from fp8check.report import audit_report, source_from_audit

from report_support import (HOSTILE_META, HOSTILE_TENSOR, NAN_PLANTED, build_checkpoint, external_references,
                            has_class, parse, text)

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    written = build_checkpoint(d / "ckpt")
    code = cli.main(["audit", str(d / "ckpt"), "--target", "mi300", "--json", str(d / "a.json"),
                     "--html", str(d / "a.html"), "-q", "--jobs", "1"])
    assert code == cli.EXIT_USAGE  # the truncated file: exit 2, the rest still audited and reported
    return written, json.loads((d / "a.json").read_text()), d / "a.json", d / "a.html"


def _bars(svg) -> int:
    """Bars drawn in a histogram: one "V height h width" step per nonzero bin."""
    return sum(len(re.findall(r"V[\d.]+h", p.get("d"))) for p in svg.xpath(".//path"))


def test_the_audit_json_carries_a_fine_scale_distribution(audited):
    written, doc, _, _ = audited
    for name, (_, scale) in written.items():
        if scale is None:
            continue
        (t,) = [t for t in doc["tensors"] if t["name"] == name]
        fine = t["scale"]["stats"]["log2_histogram_fine"]
        assert fine["bins_per_octave"] == 8
        bins = np.floor(8 * np.log2(scale.astype(np.float64).reshape(-1))).astype(int)
        want = np.bincount(bins - bins.min())
        assert fine["min_bin"] == bins.min() and fine["counts"] == want.tolist()


def test_audit_report_structure(audited):
    written, doc, _, html_path = audited
    tree = parse(html_path.read_text())
    assert external_references(tree) == []
    (verdict,) = tree.xpath("//section[@id='verdict']")
    # a file could not be read: no verdict, said first (as the terminal says it)
    assert "v-fail" in verdict.get("class") and text(verdict).startswith("VERDICT UNKNOWN 1 file could not be read")
    s = doc["summary"]
    assert f"{s['errors']} errors, {s['warnings']} warning" + ("s" if s['warnings'] != 1 else "") in text(verdict)
    assert "1 file could not be read safely" in text(verdict)
    # portability: a file was not read, so no verdict; the reason first, then what was read (mi300 cannot run
    # the clipped tensor without a scale), the reasons and the command
    (card,) = tree.xpath("//div[@data-target='mi300']")
    assert card.get("data-verdict") == doc["portability"][0]["verdict"] == "unknown"
    assert "unknown" in text(card.xpath(f".//span[{has_class('badge')}]")[0])
    assert doc["portability"][0]["reasons"][:2] == ["1 file could not be read", "of what was read: cannot run"]
    for reason in doc["portability"][0]["reasons"]:
        assert " ".join(reason.split()) in text(card)
    assert text(card.xpath(".//pre[@data-command='convert']")[0]) == "fp8check convert SRC DST --to e4m3fnuz"
    assert HOSTILE_TENSOR in text(card)
    # the tensor table: every tensor, its findings and statistics as in the JSON
    rows = tree.xpath("//table[@id='tensor-table']/tbody/tr")
    assert len(rows) == len(doc["tensors"])
    header = [text(th) for th in tree.xpath("//table[@id='tensor-table']/thead/tr/th")]
    by_name = {text(r.xpath("./td")[header.index("tensor")]).replace(" ", ""): r for r in rows}
    for t in doc["tensors"]:
        row = by_name[t["name"].replace(" ", "")]
        assert row.get("data-severity") == (t["severity"] or "none") and row.get("data-role") == t["role"]
        cells = row.xpath("./td")
        shown = {b.text_content(): b.getparent().text_content().split()[-1]
                 for b in cells[header.index("findings")].xpath(f".//span[{has_class('badge')}]")}
        assert shown == {f["code"]: f"{f['count']:,}" for f in t["findings"]}
        if t["role"] == "fp8":
            assert text(cells[header.index("codes")]) == str(t["stats"]["codes_used"])
            assert text(cells[header.index("NaN")]) == f"{t['stats']['nan']:,}"
    nan_row = by_name["model.layers.0.mlp.down_proj.weight"]
    assert text(nan_row.xpath("./td")[header.index("NaN")]) == str(NAN_PLANTED)
    # one detail per FP8 tensor: a 256-code histogram with one bar per code used, independently counted
    details = tree.xpath(f"//div[{has_class('tensor-detail')}]")
    assert sorted(d.get("data-tensor") for d in details) == sorted(written)
    for d in details:
        name = d.get("data-tensor")
        codes, scale = written[name]
        (hist,) = d.xpath(".//figure[@class='codehist']/svg")
        assert _bars(hist) == len(np.unique(codes))
        nan_bars = hist.xpath(".//path[@class='h-nan']")
        assert bool(nan_bars) == (name == "model.layers.0.mlp.down_proj.weight")
        scale_figs = d.xpath(".//figure[@class='scalehist']/svg")
        if scale is None:
            assert not scale_figs and "no scale" in text(d)
        else:
            bins = np.floor(8 * np.log2(scale.astype(np.float64).reshape(-1))).astype(int)
            if np.unique(bins).size > 1:
                assert _bars(scale_figs[0]) == np.unique(bins).size
    # the unreadable file is listed with its error
    file_rows = tree.xpath("//section[@id='files']//tbody/tr")
    bad = [r for r in file_rows if "extra.safetensors" in text(r)]
    assert len(bad) == 1 and "error" in text(bad[0])
    assert HOSTILE_META in text(tree.xpath("//section[@id='files']")[0])


def test_audit_report_keeps_untrusted_text_inert(audited):
    _, doc, _, html_path = audited
    tree = parse(html_path.read_text())
    scripts = tree.xpath("//script")
    assert [s.get("type") for s in scripts] == ["application/json", None]
    assert len(tree.xpath("//style")) == 1 and not tree.xpath("//b")
    for el in tree.iter():
        if isinstance(el.tag, str):
            assert not any(a.lower().startswith("on") for a in el.attrib)
    raw = scripts[0].text
    assert not set("<>&") & set(raw)
    assert any(t["name"] == HOSTILE_TENSOR for t in json.loads(raw)["tensors"])
    assert any(text(h).startswith(HOSTILE_TENSOR) for h in tree.xpath("//h3"))


def test_report_command_renders_a_saved_audit_and_caps_rows(audited, tmp_path):
    _, doc, json_path, _ = audited
    out = tmp_path / "r.html"
    assert cli.main(["report", str(json_path), str(json_path), "-o", str(out), "--max-rows", "3"]) == cli.EXIT_OK
    tree = parse(out.read_text())
    assert len(tree.xpath("//table[@id='tensor-table']/tbody/tr")) == 3
    assert f"the first 3 of {2 * len(doc['tensors'])}" in text(tree.xpath("//section[@id='tensors']")[0])
    assert len(tree.xpath("//div[@data-target='mi300']")) == 2  # one verdict per merged audit


def test_an_audit_json_with_missing_fields_still_renders():
    doc = {"fp8check_audit": 1, "summary": {"errors": 0}, "tensors": [
        {"name": "w", "role": "fp8", "format": "e4m3fn", "stats": {"histogram": [1] * 256}},
        {"name": "x", "stats": "not a dict"}, "not a tensor"]}
    tree = parse(audit_report([source_from_audit("hand-made.json", doc)]))
    assert len(tree.xpath("//table[@id='tensor-table']/tbody/tr")) == 2
    assert _bars(tree.xpath("//figure[@class='codehist']/svg")[0]) == 256


def test_the_code_histogram_is_in_value_order():
    """e4m3fn: −448 (0xFE) first, −0 (0x80) just before +0 (0x00), 448 (0x7E), then the NaNs."""
    from fp8check import formats, reference
    from fp8check.report.audit_view import code_order

    order, classes, ticks = code_order("e4m3fn")
    assert int(order[0]) == 0xFE and int(order[253]) == 0x7E and {int(order[254]), int(order[255])} == {0x7F, 0xFF}
    zero = list(order).index(0x00)
    assert int(order[zero - 1]) == 0x80 and classes[zero - 1] == "h-negzero" and classes[zero] == "h-zero"
    values = np.asarray(reference.decode_table(formats.E4M3FN))[order[:254]]
    assert np.all(np.diff(values) >= 0)
    assert [label for _, label in ticks] == ["−448", "−1", "0", "1", "448"]
    assert math.isnan(float(reference.decode_table(formats.E4M3FN)[0x7F]))
    assert re.fullmatch(r"h-\w+", classes[0])

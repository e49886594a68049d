"""Every kind of report opened in a real headless Chromium (Debian's ``chromium``): it renders
(non-blank screenshots in the light and the dark theme), its script runs without a console
message, sorting and filtering work, it prints, and it asks the network for nothing.

Skipped when no ``chromium`` is installed, unless FP8CHECK_REQUIRE_BROWSER=1 (CI sets it: there
the browser tests must run). FP8CHECK_SCREENSHOTS=DIR keeps the screenshots for a person to look at.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from fp8check import cli

from report_support import build_checkpoint, chromium, has_class, load_png, parse, run_chromium

pytest.importorskip("torch")

# Chromium renders every kind of report: minutes on 2 cores, so CI's slow lane
# (`pytest -m slow`, with FP8CHECK_REQUIRE_BROWSER=1) runs them.
pytestmark = pytest.mark.slow

if chromium() is None:
    if os.environ.get("FP8CHECK_REQUIRE_BROWSER") == "1":
        raise RuntimeError("FP8CHECK_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install -y chromium)")
    pytest.skip("no chromium on PATH: the browser tests need Debian's chromium package "
                "(apt-get install -y chromium); CI installs it", allow_module_level=True)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """(name -> HTML path) of real reports: divergences, merged results, a comparison, a clean run."""
    pytest.importorskip("triton")
    d = tmp_path_factory.mktemp("pages")
    run = lambda *argv: cli.main([str(a) for a in argv])  # noqa: E731
    assert run("check", "triton-interpreter", "--format", "e4m3fn", "--input-dtype", "float16", "--max-examples", 20,
               "--json", d / "triton.json", "--html", d / "divergence.html") == cli.EXIT_DIVERGED
    assert run("check", "torch-cpu", "--format", "e4m3fn", "--profile", "torch-2.11", "--input-dtype", "bfloat16",
               "--max-examples", 0, "--json", d / "t211.json") == cli.EXIT_DIVERGED
    assert run("check", "torch-cpu", "--format", "e4m3fn", "--profile", "torch-2.12", "--input-dtype", "bfloat16",
               "--max-examples", 0, "--json", d / "t212.json") == cli.EXIT_OK
    assert run("report", d / "triton.json", d / "t211.json", d / "t212.json", "-o", d / "merged.html") == 0
    assert run("report", d / "t211.json", d / "t212.json", "--compare", "-o", d / "compare.html") == 0
    assert run("report", d / "t212.json", "-o", d / "clean.html") == 0
    build_checkpoint(d / "ckpt")
    assert run("audit", d / "ckpt", "--target", "mi300", "--html", d / "audit.html", "-q", "--jobs", 1) == 2
    if importlib.util.find_spec("torchao") is not None:  # fp8check train needs torchao
        assert run("train", "--steps", 2, "--formats", "bf16,e4m3fn", "--html", d / "training.html") == cli.EXIT_OK
        # two processes (torchrun, gloo): FSDP2 with torchao's float8 all-gather, one step
        assert run("train", "--nproc", 2, "--parallel", "fsdp-float8", "--formats", "e4m3fnuz", "--steps", 2,
                   "--html", d / "training-distributed.html") == cli.EXIT_OK
    return {name: d / f"{name}.html" for name in EXPECTED if (d / f"{name}.html").is_file()}


# what each page must show once rendered: (xpath, minimum count)
EXPECTED = {
    "divergence": [("//section[@id='verdict']", 1), ("//table[@id='summary-table']/tbody/tr", 1),
                   (f"//div[{has_class('card')}]", 6), ("//svg[contains(@class, 'map')]", 1),
                   ("//svg[contains(@class, 'plot')]", 1), ("//table[@id='check-0-rows']/tbody/tr", 100)],
    "merged": [("//table[@id='summary-table']/tbody/tr", 3), (f"//section[{has_class('check')}]", 2),
               ("//svg[contains(@class, 'map')]", 2)],
    "compare": [("//table[@id='changes-table']/tbody/tr", 1), ("//svg[contains(@class, 'map')]", 1)],
    "clean": [("//section[@id='verdict' and contains(@class, 'v-pass')]", 1)],
    "audit": [("//div[@data-target='mi300']", 1), ("//table[@id='tensor-table']/tbody/tr", 5),
              ("//figure[@class='codehist']/svg", 3), ("//figure[@class='scalehist']/svg", 1)],
    "training": [("//section[@id='verdict' and contains(@class, 'v-pass')]", 1),
                 ("//section[@id='loss']//svg/polyline[@data-format]", 2), ("//table[@id='gates']/tbody/tr", 3),
                 ("//table[contains(@class, 'heatmap')]/tbody/tr", 2)],
    "training-distributed": [("//section[@id='verdict' and contains(@class, 'v-pass')]", 1),
                             ("//section[@id='distributed']//tbody/tr[@class='pass']", 1),
                             ("//section[@id='distributed']//svg/polyline[@data-run]", 3)],
}
VERDICT_RGB = {  # the verdict banner's border colour in the light theme
    "divergence": (0x9A, 0x67, 0x00), "merged": (0xCF, 0x22, 0x2E), "compare": (0x1A, 0x7F, 0x37),
    "clean": (0x1A, 0x7F, 0x37), "audit": (0xCF, 0x22, 0x2E), "training": (0x1A, 0x7F, 0x37),
    "training-distributed": (0x1A, 0x7F, 0x37),
}


def _shots_dir() -> Path | None:
    d = os.environ.get("FP8CHECK_SCREENSHOTS")
    if d:
        Path(d).mkdir(parents=True, exist_ok=True)
        return Path(d)
    return None


@pytest.mark.parametrize("name", list(EXPECTED))
def test_report_renders_in_chromium(pages, name, tmp_path):
    if name not in pages:
        pytest.skip(f"no {name} page here (fp8check train needs torchao)")
    page = pages[name]
    opened = run_chromium(page, tmp_path)
    assert opened.console == [], opened.console
    assert opened.page_requests == []
    dom = parse(opened.dom)
    assert "js" in dom.get("class").split()  # our script ran to its first line at least
    for xpath, n in EXPECTED[name]:
        assert len(dom.xpath(xpath)) >= n, (xpath, len(dom.xpath(xpath)))
    for theme in ("light", "dark"):
        shot = tmp_path / f"{name}-{theme}.png"
        run = run_chromium(page, tmp_path, screenshot=shot, dark=theme == "dark", size=(1280, 2000))
        assert run.console == [] and run.page_requests == []
        px = load_png(shot)
        if _shots_dir() is not None:
            shutil.copy(shot, _shots_dir() / shot.name)
        background = px[4, 4]
        luminance = float(background @ np.array([0.299, 0.587, 0.114]))
        assert (luminance > 230) if theme == "light" else (luminance < 40), (theme, background)
        differs = np.abs(px - background).sum(axis=2) > 60
        assert differs.mean() > 0.01, f"{name} {theme}: the page looks blank"
        packed = (px[..., 0] << 16) | (px[..., 1] << 8) | px[..., 2]
        assert len(np.unique(packed)) > 200  # text, tables and pictures, not a flat fill
        if theme == "light":
            near = np.abs(px - np.array(VERDICT_RGB[name])).sum(axis=2) < 40
            assert near.sum() > 500, f"{name}: no verdict banner of the expected colour"
        else:  # light text on the dark background
            assert (px.mean(axis=2) > 200).sum() > 2000


HARNESS = """
<script>
(function () {
  var out = {};
  var table = document.getElementById("summary-table");
  var th = Array.prototype.filter.call(table.tHead.rows[0].cells, function (c) {
    return c.textContent.trim().indexOf("divergent") === 0; })[0];
  var col = Array.prototype.indexOf.call(th.parentNode.cells, th);
  function column() { return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
    return r.cells[col].textContent.trim(); }); }
  th.click(); out.ascending = column(); out.sort1 = th.getAttribute("aria-sort");
  th.click(); out.descending = column(); out.sort2 = th.getAttribute("aria-sort");
  var box = document.querySelector("input[data-filter-for='summary-table']");
  box.value = "bfloat16"; box.dispatchEvent(new Event("input"));
  out.visible = Array.prototype.filter.call(table.tBodies[0].rows, function (r) {
    return !r.classList.contains("hidden"); }).length;
  out.counter = document.querySelector("[data-count-for='summary-table']").textContent;
  var sel = document.querySelector("select[data-filter-for='summary-table']");
  box.value = ""; sel.value = "conforms"; sel.dispatchEvent(new Event("change"));
  out.conforming = Array.prototype.filter.call(table.tBodies[0].rows, function (r) {
    return !r.classList.contains("hidden"); }).length;
  document.body.setAttribute("data-harness", JSON.stringify(out));
}());
</script>
"""


def test_tables_sort_and_filter_in_the_browser(pages, tmp_path):
    html = pages["merged"].read_text()
    page = tmp_path / "harness.html"
    page.write_text(html.replace("</body>", HARNESS + "</body>"))
    opened = run_chromium(page, tmp_path)
    assert opened.console == []
    result = json.loads(parse(opened.dom).xpath("//body")[0].get("data-harness"))
    numbers = lambda xs: [int(x.replace(",", "")) for x in xs]  # noqa: E731
    assert numbers(result["ascending"]) == sorted(numbers(result["ascending"]))
    assert numbers(result["descending"]) == sorted(numbers(result["ascending"]), reverse=True)
    assert (result["sort1"], result["sort2"]) == ("ascending", "descending")
    assert result["visible"] == 2 and result["counter"] == "2 of 3 rows"  # the two bfloat16 checks
    assert result["conforming"] == 1


AUDIT_HARNESS = """
<script>
(function () {
  var sel = document.querySelector("select[data-filter-for='tensor-table'][data-attr='severity']");
  sel.value = "error"; sel.dispatchEvent(new Event("change"));
  var rows = document.getElementById("tensor-table").tBodies[0].rows;
  var names = Array.prototype.filter.call(rows, function (r) { return !r.classList.contains("hidden"); })
    .map(function (r) { return r.cells[1].textContent.trim(); });
  document.body.setAttribute("data-harness", JSON.stringify(names));
}());
</script>
"""


def test_audit_tensors_filter_by_severity_in_the_browser(pages, tmp_path):
    page = tmp_path / "audit-harness.html"
    page.write_text(pages["audit"].read_text().replace("</body>", AUDIT_HARNESS + "</body>"))
    opened = run_chromium(page, tmp_path)
    assert opened.console == []
    shown = json.loads(parse(opened.dom).xpath("//body")[0].get("data-harness"))
    rows = parse(pages["audit"].read_text()).xpath("//table[@id='tensor-table']/tbody/tr[@data-severity='error']")
    assert len(shown) == len(rows) >= 2
    assert any("<script>" in name for name in shown)  # the markup-like name, as text


def test_reports_are_complete_without_javascript(pages, tmp_path):
    """Scripts off, the page as served: every row there, nothing hidden; it renders, without the filters."""
    dom = parse(pages["merged"].read_text())
    assert "no-js" in dom.get("class").split()
    rows = dom.xpath("//table[@id='summary-table']/tbody/tr")
    assert len(rows) == 3 and not [r for r in rows if "hidden" in (r.get("class") or "")]
    # (Chromium's headless screenshots need scripting on: the page loses its own script instead.)
    html = pages["merged"].read_text()
    start = html.rindex("<script>")
    stripped = tmp_path / "no-js.html"
    stripped.write_text(html[:start] + html[html.index("</script>", start) + len("</script>"):])
    shots = {}
    for name, page in (("no-js", stripped), ("js", pages["merged"])):
        shots[name] = tmp_path / f"{name}.png"
        opened = run_chromium(page, tmp_path, screenshot=shots[name], size=(1280, 900))
        assert opened.console == []
    without, with_js = load_png(shots["no-js"]), load_png(shots["js"])
    assert (np.abs(without - without[4, 4]).sum(axis=2) > 60).mean() > 0.02
    assert (np.abs(without - with_js).sum(axis=2) > 60).any()  # the filter controls appear only with the script


def test_reports_print(pages, tmp_path):
    pdf = tmp_path / "divergence.pdf"
    run = run_chromium(pages["divergence"], tmp_path, pdf=pdf)
    assert run.console == []
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page\b", data)) >= 3


def test_the_browser_checks_see_errors_and_requests(tmp_path):
    """The detectors above can fail: a script error and a remote image are both reported."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><p>x</p><img src="http://example.invalid/x.png">'
                    "<script>undefinedFunction();</script></body></html>")
    run = run_chromium(page, tmp_path)
    assert any("undefinedFunction" in line for line in run.console)
    assert run.page_requests == ["http://example.invalid/x.png"]

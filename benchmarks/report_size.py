"""How big a report gets and how fast it renders and opens, on real divergences.

    python benchmarks/report_size.py [--out DIR] [--formats e4m3fn,e4m3fnuz,e5m2,e5m2fnuz]

Checks the Triton interpreter's casts (a known upstream bug: hundreds of
thousands of divergent inputs) for each fp8 format from float16, bfloat16
and float32, as the pytest plugin would (up to 1,000 reproducers listed per
check, every count exact), then prints, against peers measured in the same
run: the HTML's size against the results JSON's, the render time against
reading the JSON, and the time headless Chromium takes to open the report
against an empty page.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def _chromium_seconds(page: Path, workdir: Path) -> float | None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={workdir / ('p' + str(time.monotonic_ns()))}", "--dump-dom", page.resolve().as_uri()]
    start = time.perf_counter()
    subprocess.run(args, capture_output=True, timeout=300, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="keep the JSON and HTML here (default: a temporary folder)")
    parser.add_argument("--formats", default="e4m3fn,e4m3fnuz,e5m2,e5m2fnuz")
    parser.add_argument("--audit-tensors", type=int, default=500,
                        help="FP8 tensors (each with a rowwise scale) of the generated checkpoint audited (0: skip)")
    args = parser.parse_args()

    from fp8check.casts import engine, report
    from fp8check.casts.adapters import get_kernel
    from fp8check.results import dump_results, environment

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="fp8check-report-"))
    out.mkdir(parents=True, exist_ok=True)
    kernel = get_kernel("triton-interpreter")
    checks = []
    start = time.perf_counter()
    for fmt in args.formats.split(","):
        for dtype in ("float16", "bfloat16", "float32"):
            result, _ = engine.run_check(kernel, fmt, input_dtype=dtype, max_examples=20, seed=0, cap=1000)
            checks.append(result)
    check_s = time.perf_counter() - start
    results = out / "results.json"
    dump_results(results, checks, environment())
    divergences = sum(sum(c.categories.values()) for c in checks)
    listed = sum(len(c.divergences) for c in checks)

    start = time.perf_counter()
    report.load_source(results)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    html = report.report_from_files([results])
    render_s = time.perf_counter() - start
    page = out / "report.html"
    size = report.write_html(page, html)
    empty = out / "empty.html"
    empty.write_text("<!DOCTYPE html><title>empty</title><p>empty</p>")

    print(f"{len(checks)} checks of the Triton interpreter ({check_s:.1f} s): {divergences:,} divergent inputs, "
          f"{listed:,} listed in the JSON")
    print(f"results JSON {results.stat().st_size / 2**20:6.2f} MiB; HTML {size / 2**20:6.2f} MiB "
          f"({size / results.stat().st_size:.2f}x the JSON)")
    print(f"read the JSON {load_s:.2f} s; read and render the HTML {render_s:.2f} s ({render_s / load_s:.1f}x)")
    page_s = _chromium_seconds(page, out)
    empty_s = _chromium_seconds(empty, out)
    if page_s is None or empty_s is None:
        print("chromium not found: opening time not measured")
    else:
        print(f"headless chromium opens the report in {page_s:.2f} s, an empty page in {empty_s:.2f} s "
              f"({page_s / empty_s:.2f}x)")
    if args.audit_tensors > 0:
        _audit(out, args.audit_tensors, empty_s)
    print(f"files in {out}")


def _audit(out: Path, n: int, empty_s: float | None) -> None:
    import json

    import torch
    from safetensors.torch import save_file

    from fp8check import report
    from fp8check.checkpoints import AuditOptions, audit

    g = torch.Generator().manual_seed(0)
    tensors = {}
    for k in range(n):
        w = torch.randn(128, 128, generator=g) * 0.02
        s = w.abs().amax(dim=1, keepdim=True) / 448
        tensors[f"model.layers.{k // 5}.proj{k % 5}.weight"] = (w / s).to(torch.float8_e4m3fn)
        tensors[f"model.layers.{k // 5}.proj{k % 5}.weight_scale"] = s.float()
    ckpt = out / "checkpoint"
    ckpt.mkdir(exist_ok=True)
    save_file(tensors, str(ckpt / "model.safetensors"))
    doc = audit([str(ckpt)], AuditOptions())
    from fp8check.outputs import json_ready, write_json

    path = out / "audit.json"
    write_json(path, json_ready(doc))
    start = time.perf_counter()
    json.loads(path.read_text())
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    html = report.report_from_files([path])
    render_s = time.perf_counter() - start
    page = out / "audit.html"
    size = report.write_html(page, html)
    print(f"audit of {n} FP8 tensors and {n} scales: JSON {path.stat().st_size / 2**20:.2f} MiB, "
          f"HTML {size / 2**20:.2f} MiB ({size / path.stat().st_size:.2f}x); render {render_s:.2f} s "
          f"(reading the JSON {load_s:.2f} s)")
    page_s = _chromium_seconds(page, out)
    if page_s is not None and empty_s:
        print(f"headless chromium opens the audit report in {page_s:.2f} s ({page_s / empty_s:.2f}x an empty page)")


if __name__ == "__main__":
    main()

"""GPU run of fp8check.training: torchao's real float8 kernels on a CUDA device against the CPU emulation.

    PYTHONPATH=. python gpu/training.py [--device cuda] [--steps 50] --out DIR

1. Step conformance on the device (rowwise and tensorwise, e4m3fn): every cast of every GEMM
   operand that torchao's real kernels make, compared bit for bit with fp8check's recipe reference,
   every FP8 GEMM (``torch._scaled_mm``) against the derived matmul bound.
2. Loss parity: the tiny decoder trained ``--steps`` steps in BF16 and FP8 e4m3fn on the device,
   the anchors' gates, and the per-step loss difference against the shipped CPU-emulated golden of
   the same format (``fp8check/training/goldens/cpu-emulated-*.json``).
3. The device's golden file (``<platform>.json``, e.g. ``h200-e4m3fn.json``) written into DIR, to
   be committed under ``fp8check/training/goldens/``.

``--device cpu`` runs the same on the CPU (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    (out / "goldens").mkdir(parents=True, exist_ok=True)

    import torch

    from fp8check import training
    from fp8check.outputs import write_json
    from fp8check.training.goldens import compare_golden, golden_document, golden_path, load_golden

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    cfg = training.TINY_LLAMA
    report = training.TrainingReport()
    for recipe in ("rowwise", "tensorwise"):
        t0 = time.time()
        s = training.check_step(cfg, recipe=recipe, fmt="e4m3fn", steps=2, seed=0, device=args.device)
        report.step.append(s)
        cats = ", ".join(f"{k} {v}" for k, v in s.categories.items() if v) or "none"
        print(f"step {recipe} e4m3fn on {args.device}: {len(s.casts)} casts, {len(s.gemms)} GEMMs, "
              f"{'conform' if s.passed else 'DIVERGE'} (flagged: {cats}) in {time.time() - t0:.1f} s", flush=True)
        for c in s.casts:
            if not c.passed:
                print("   ", json.dumps(c.to_json())[:300])
    t0 = time.time()
    report.parity = training.loss_parity(cfg, formats=("bf16", "e4m3fn"), recipe="rowwise", steps=args.steps, seed=0,
                                         device=args.device)
    print(f"loss parity, {args.steps} steps, bf16 and e4m3fn on {args.device}: {time.time() - t0:.1f} s")
    for g in report.parity.gates:
        print(f"{'pass' if g.passed else 'FAIL'}  {g.name}: {g.value:.6g} (gate {g.threshold:g}; {g.source})")
    for fmt, run in report.parity.runs.items():
        platform = training.platform_key(fmt, args.device)
        write_json(golden_path(platform, out / "goldens"),
                   golden_document(run, cfg, platform=platform, seed=0, device=args.device))
        cpu = golden_path(f"cpu-emulated-{fmt}")
        if cpu.is_file():
            doc = load_golden(cpu)
            cmp = compare_golden(doc, run, device=args.device, prefix=True)
            report.goldens.append(cmp.to_json())
            golden = [float.fromhex(h) for h in doc["losses_hex"]]
            rel = [abs(a - b) / abs(b) for a, b in zip(run.losses, golden) if b and math.isfinite(a)]
            print(f"{fmt} on {platform} vs {cpu.name}: {cmp.mode}; first differing step {cmp.first_difference}; "
                  f"per-step relative difference max {max(rel):.3e}, mean {sum(rel) / len(rel):.3e}, "
                  f"last {rel[-1]:.3e} ({'pass' if cmp.passed else 'FAIL'})")
    write_json(out / "training.json", report.to_json())
    from fp8check.report import write_html
    from fp8check.report.training_view import training_report

    write_html(out / "training.html", training_report(report.to_json()), what="--html")
    print("passed" if report.passed else "FAILED")
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

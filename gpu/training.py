"""GPU run of fp8check.training: torchao's real float8 kernels on a CUDA device against the CPU emulation.

    PYTHONPATH=. python gpu/training.py [--device cuda] [--steps 50] --out DIR

1. Step conformance on the device (rowwise and tensorwise, e4m3fn): every cast of every GEMM
   operand that torchao's real kernels make, compared bit for bit with fp8check's recipe reference;
   every FP8 GEMM (``torch._scaled_mm``) against the derived float32-accumulation bound. The H200's
   FP8 GEMMs do not accumulate at float32 grade at small K (FACTS.md; the strict xfails in
   tests/test_recipes_matmul.py), so GEMM-bound findings are printed with their largest ratio and
   do not fail this script; a cast that diverges does.
2. Casts against the CPU emulation: the first step captured on the device and on the CPU, same
   weights and batch; per (layer, operand) whether codes and scales are the same bytes, and the first
   that differ (after the first GEMM output differs, the operands downstream may too).
3. Loss parity: the tiny decoder trained ``--steps`` steps in BF16 and FP8 e4m3fn on the device, the
   anchors' gates, and the per-step loss difference against the shipped CPU-emulated golden of the
   same format (``fp8check/training/goldens/cpu-emulated-*.json``).
4. The device's golden files (``<platform>.json``: ``h200-e4m3fn.json``, ``h200-bf16.json``) written
   into DIR/goldens, to be committed under ``fp8check/training/goldens/`` (tests/training compares
   ``h200-e4m3fn`` with the CPU emulation, and bit for bit on the H200 itself).

Each section runs on its own: one that fails prints its traceback and the others still run.
``--device cpu`` runs the same on the CPU (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _section(name: str, failures: list[str]):
    class Section:
        def __enter__(self) -> None:
            self.t0 = time.time()
            print(f"-- {name}", flush=True)

        def __exit__(self, kind, exc, tb) -> bool:
            if exc is not None:
                traceback.print_exception(kind, exc, tb)
                failures.append(f"{name}: {type(exc).__name__}: {exc}")
            print(f"-- {name}: {'FAILED to run' if exc else 'done'} in {time.time() - self.t0:.1f} s", flush=True)
            return True

    return Section()


def _casts_against_cpu(cfg, device: str) -> dict:
    """Step 0's casts on ``device`` and on the CPU: the same bytes per (layer, operand)?"""
    from fp8check import training

    caps = {}
    for where in (device, "cpu"):
        _, caps[where] = training.train(cfg, "e4m3fn", recipe="rowwise", steps=1, seed=0, device=where,
                                        capture_steps=1, digests=False)
    same, differ = 0, []
    for a, b in zip(caps[device].casts, caps["cpu"].casts):
        assert (a.layer, a.operand) == (b.layer, b.operand), ((a.layer, a.operand), (b.layer, b.operand))
        equal = a.codes.tobytes() == b.codes.tobytes() and a.scale.tobytes() == b.scale.tobytes()
        same += equal
        if not equal:
            differ.append({"layer": a.layer, "operand": a.operand,
                           "codes_differ": int((a.codes != b.codes).sum()) if a.codes.shape == b.codes.shape else -1,
                           "scales_differ": int((a.scale.view("u4") != b.scale.view("u4")).sum())
                           if a.scale.shape == b.scale.shape else -1,
                           "hp_differ": int((a.hp.view("u4") != b.hp.view("u4")).sum())
                           if a.hp.shape == b.hp.shape else -1})
    return {"casts": len(caps["cpu"].casts), "identical": same, "first_differing": differ[:12],
            "differing": len(differ)}


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
    from fp8check.terminal.training import flagged_lines, gate_line, golden_line, step_line
    from fp8check.training.goldens import compare_golden, golden_document, golden_path, load_golden

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    import torchao

    print(f"torch {torch.__version__}, torchao {torchao.__version__}, device "
          f"{torch.cuda.get_device_name(0) if args.device.startswith('cuda') else 'cpu'}", flush=True)
    cfg = training.TINY_LLAMA
    report = training.TrainingReport()
    failures: list[str] = []
    cast_divergence = False

    for recipe in ("rowwise", "tensorwise"):
        with _section(f"step conformance {recipe} e4m3fn on {args.device}", failures):
            s = training.check_step(cfg, recipe=recipe, fmt="e4m3fn", steps=2, seed=0, device=args.device)
            report.step.append(s)
            print(step_line(s))
            for line in flagged_lines(s, limit=12):
                print(line)
            for gemm in ("output", "grad_input", "grad_weight"):
                rows = [g for g in s.gemms if g.gemm == gemm]
                if rows:
                    models = "/".join(sorted({g.accumulation for g in rows}))
                    print(f"   {gemm}: {sum(not g.passed for g in rows)} of {len(rows)} GEMMs past the {models} bound, "
                          f"largest error {max(g.max_ratio for g in rows):.3g} x the bound, "
                          f"K {sorted({g.K for g in rows})}")
            cast_divergence |= any(not c.passed for c in s.casts)

    with _section(f"step 0 casts on {args.device} against the CPU emulation", failures):
        cmp_casts = _casts_against_cpu(cfg, args.device)
        print(f"{cmp_casts['identical']} of {cmp_casts['casts']} casts the same bytes on {args.device} and the CPU "
              f"(rowwise e4m3fn, step 0); {cmp_casts['differing']} differ")
        for d in cmp_casts["first_differing"]:
            print("   ", json.dumps(d))
        write_json(out / "casts-vs-cpu.json", cmp_casts)

    with _section(f"loss parity, {args.steps} steps, bf16 and e4m3fn on {args.device}", failures):
        report.parity = training.loss_parity(cfg, formats=("bf16", "e4m3fn"), recipe="rowwise", steps=args.steps,
                                             seed=0, device=args.device)
        for g in report.parity.gates:
            print(gate_line(g))
        for fmt, run in report.parity.runs.items():
            platform = training.platform_key(fmt, args.device)
            path = golden_path(platform, out / "goldens")
            write_json(path, golden_document(run, cfg, platform=platform, seed=0, device=args.device))
            print(f"wrote {path}")
            cpu = golden_path(f"cpu-emulated-{fmt}")
            if cpu.is_file():
                doc = load_golden(cpu)
                cmp = compare_golden(doc, run, device=args.device, prefix=True)
                report.goldens.append(cmp.to_json())
                rel = [abs(a - b) / abs(b) for a, b in zip(run.losses, doc["_losses"]) if b and math.isfinite(a)]
                print(golden_line(cmp))
                print(f"   {fmt} on {platform} vs {cpu.name}: per-step relative difference max {max(rel):.3e}, "
                      f"mean {sum(rel) / len(rel):.3e}, last {rel[-1]:.3e}")

    with _section("report", failures):
        write_json(out / "training.json", report.to_json())
        from fp8check.report import write_html
        from fp8check.report.training_view import training_report

        write_html(out / "training.html", training_report(report.to_json()), what="--html")
    print("cast divergence: " + ("YES" if cast_divergence else "none"))
    for f in failures:
        print("section failed:", f)
    return 1 if (cast_divergence or failures) else 0


if __name__ == "__main__":
    raise SystemExit(main())

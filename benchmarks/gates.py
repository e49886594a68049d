"""How many FP8 defects the public test gates let through, measured beside fp8check's own check.

    python benchmarks/gates.py [--out benchmarks/results/gates] [--inputs 2] [--seed 0]

For each of nine quantizer recipes (tensorwise e4m3fn and e4m3fnuz, rowwise, block 1x128,
block 128x128, MX e8m0 floor, DeepSeek ue8m0, torchao rowwise pow2, vLLM per-token) every defect of the family that can occur under
the recipe makes one mutated kernel (the recipe's reference with the defect). Each mutated
kernel is measured in three views: its dequantized 256x512 output, and the output of two GEMMs
(128x256x512 and 64x512x1024, a plain float64 product of the dequantized operands) with it as
the first operand. Every public gate of fp8check.gates judges every mutant in every view;
fp8check's own check (check_quantizer) judges every mutated kernel and every correct one.

Writes OUT.json (every table) and OUT.md (the summary docs/gates.md quotes) and prints the
summary. Exit 1 if fp8check's check misses a mutated kernel or rejects a correct one.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's fp8check, not an installed one

RECIPES = (("tensorwise", None), ("tensorwise", "e4m3fnuz"), ("rowwise", None), ("block-1x128", None),
           ("block-128x128", None), ("mx-e8m0-floor", None), ("deepseek-ue8m0", None), ("torchao-rowwise-pow2", None),
           ("vllm-per-token", None))
DEQUANT = "256x512"
GEMMS = ("128x256x512", "64x512x1024")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/gates")
    ap.add_argument("--inputs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-examples", type=int, default=20)
    ap.add_argument("--expected", choices=("reference", "input"), default="reference",
                    help="compare against the correct output (default) or the unquantized input (or its GEMM)")
    ap.add_argument("--recipes", default=None, help="comma-separated subset of the recipes (labels as printed)")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    import fp8check
    from fp8check import gates, quantizers
    from fp8check.quantizers.conformance import check_quantizer, reference_kernel

    started = time.time()
    views = gates.parse_views(DEQUANT, GEMMS)
    names = list(gates.PUBLIC_GATES)
    reports, correct = [], {}
    for name, fmt in RECIPES:
        recipe = quantizers.get(name, fmt)
        label = f"{name}" + (f" ({fmt})" if fmt else "")
        if args.recipes and label not in args.recipes.split(","):
            continue
        t = time.time()
        correct[label] = check_quantizer(reference_kernel(recipe), recipe, max_examples=args.max_examples,
                                         seed=args.seed).passed
        report = gates.measure_gates(names, recipe=recipe, views=views, inputs=args.inputs, seed=args.seed,
                                     max_examples=args.max_examples, expected=args.expected)
        reports.append((label, report))
        print(f"{label}: {sum(v != 'n/a' for v in report.fp8check.values())} mutated kernels, "
              f"{time.time() - t:.0f} s", file=sys.stderr, flush=True)

    kernels = [(label, d, v) for label, rep in reports for d, v in rep.fp8check.items() if v != "n/a"]
    missed = [f"{label}/{d}" for label, d, v in kernels if v != "rejected"]
    # per gate and view: accepted / judged over the mutated kernels
    rates: dict[str, dict[str, list[int]]] = {g: {} for g in names}
    per_defect: dict[str, dict[str, list[int]]] = {}
    largest: dict[str, dict[str, float]] = {g: {} for g in names}
    for label, rep in reports:
        for verdict in rep.verdicts:
            for o in verdict.outcomes:
                if o.status == "n/a":
                    continue
                kind = o.view.split()[0]
                cell = rates[verdict.gate].setdefault(kind, [0, 0])
                cell[0] += o.status == "accepted"
                cell[1] += 1
                row = per_defect.setdefault(o.defect.name, {}).setdefault(verdict.gate, [0, 0])
                row[0] += o.status == "accepted"
                row[1] += 1
                if o.defect.sweep and o.largest_accepted is not None:
                    largest[verdict.gate][o.defect.name] = max(largest[verdict.gate].get(o.defect.name, 0.0),
                                                               o.largest_accepted)
    doc = {
        "fp8check": fp8check.__version__, "torch": torch.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "machine": platform.machine(), "seconds": round(time.time() - started),
        "recipes": [label for label, _ in reports], "views": [v.name for v in views], "inputs": args.inputs,
        "seed": args.seed, "expected": args.expected, "mutated_kernels": len(kernels), "fp8check_rejected": len(kernels) - len(missed),
        "fp8check_missed": missed, "correct_kernels": correct,
        "rates": rates, "per_defect": per_defect, "largest_accepted": largest,
        "reports": {label: compact(rep.to_json()) for label, rep in reports},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(dumps(doc))
    md = summary(doc, names)  # from the document alone: `summary(json.load(...), names)` re-renders it
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0 if not missed and all(correct.values()) else 1


ROW_KEYS = ("defect", "view", "status", "accepted_on", "judged", "largest_accepted", "fp8check")


def dumps(doc: dict) -> str:
    """Indented JSON with every innermost list (an outcome row, a count pair) on one line."""
    import re

    text = json.dumps(doc, indent=1, allow_nan=False)
    return re.sub(r"\[\n\s+([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]",
                  text) + "\n"


def compact(report: dict) -> dict:
    """A gate report's JSON without what every row repeats (descriptions, notes): one list per outcome."""
    return {"recipe": report["recipe"], "format": report["format"], "recipe_summary": report["recipe_summary"],
            "fp8check": report["fp8check"], "row_keys": list(ROW_KEYS),
            "gates": [{"gate": g["gate"], "source": g["source"], "accepted": g["accepted"], "judged": g["judged"],
                       "escapes": g["escapes"], "rows": [[o[k] for k in ROW_KEYS] for o in g["outcomes"]]}
                      for g in report["gates"]]}


def _cell(c: list[int] | None) -> str:
    return "-" if not c or not c[1] else f"{c[0]}/{c[1]}"


def _pct(c: list[int] | None) -> str:
    return "-" if not c or not c[1] else f"{100 * c[0] / c[1]:.0f}%"


def summary(doc: dict, names: list[str]) -> str:
    from fp8check.gates import DEFECTS

    n, rej = doc["mutated_kernels"], doc["fp8check_rejected"]
    lines = [f"# fp8check gate: the public gates on the FP8 defect family",
             "",
             f"{n} mutated kernels ({len(DEFECTS)} defects over {len(doc['recipes'])} recipes: "
             f"{', '.join(doc['recipes'])}; a defect that cannot occur under a recipe is left out), each judged "
             f"in {len(doc['views'])} views ({', '.join(doc['views'])}), {doc['inputs']} seeded inputs per defect "
             f"and view, compared in bfloat16 against the "
             f"{'correct output' if doc['expected'] == 'reference' else 'unquantized input (or its GEMM)'}. "
             f"fp8check's own check rejects "
             f"{rej} of {n} mutated kernels and accepts {sum(doc['correct_kernels'].values())} of "
             f"{len(doc['correct_kernels'])} correct ones. torch {doc['torch']}, numpy {doc['numpy']}, "
             f"{doc['seconds']} s.",
             "",
             "Acceptance rate (defects let through / defects present), per view:",
             "",
             "| gate | dequantized | GEMM | all |",
             "| --- | ---: | ---: | ---: |"]
    for g in names:
        r = doc["rates"][g]
        total = [sum(c[0] for c in r.values()), sum(c[1] for c in r.values())]
        lines.append(f"| {g} | {_pct(r.get('dequant'))} ({_cell(r.get('dequant'))}) | {_pct(r.get('gemm'))} "
                     f"({_cell(r.get('gemm'))}) | {_pct(total)} |")
    blind = {g: sum(row[2] == "blind" for r in doc["reports"].values() for v in r["gates"] if v["gate"] == g
                    for row in v["rows"]) for g in names}
    cells: dict[tuple[str, str], list[int]] = {}  # (defect, gate) -> [accepted, present, blind]
    for r in doc["reports"].values():
        for v in r["gates"]:
            for row in v["rows"]:
                if row[2] != "n/a":
                    c = cells.setdefault((row[0], v["gate"]), [0, 0, 0])
                    c[0] += row[2] == "accepted"
                    c[1] += 1
                    c[2] += row[2] == "blind"
    blind = {g: sum(c[2] for (_, gate), c in cells.items() if gate == g) for g in names}
    lines += ["| fp8check check_quantizer | 0% | 0% | 0% |", "",
              "Rows where the gate fails the correct output of the same inputs too (blind: NaN never equals NaN), "
              "counted as not accepted: " + ", ".join(f"{g} {blind[g]}" for g in names) + ".", "",
              "Per defect (accepted / present, over recipes and views; b: of which blind):", "",
              "| defect | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for d in DEFECTS:
        row = []
        for g in names:
            c = cells.get((d.name, g))
            row.append("-" if not c else f"{c[0]}/{c[1]}" + (f" ({c[2]} b)" if c[2] else ""))
        lines.append(f"| {d.name} | " + " | ".join(row) + " |")
    swept = [d for d in DEFECTS if d.sweep]
    lines += ["", "Largest magnitude accepted (any recipe, any view):", "",
              "| gate | " + " | ".join(d.name for d in swept) + " |", "| --- |" + " ---: |" * len(swept)]
    for g in names:
        cells = []
        for d in swept:
            v = doc["largest_accepted"][g].get(d.name)
            cells.append("none" if v is None else d.magnitude_text(v))
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

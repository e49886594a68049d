"""The zoo on a CUDA machine: every installed zoo entry in its GPU modes (compiled Triton, torch on cuda).

    PYTHONPATH=.:<unpacked wheels> python gpu/zoo.py --json zoo-gpu.json [--max-examples 5]

Prints a table and writes the results as JSON. Carry (pure Python, in .whl/):
compressed-tensors 0.19.0, transformers 4.57.6 (act_quant's Triton kernel),
gemlite 0.6.0.post2 (sdist: build a wheel with `pip wheel --no-deps`), and
their small dependencies -- see docs/zoo.md for the pip download line and sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default="zoo-gpu.json")
    p.add_argument("--max-examples", type=int, default=5)
    p.add_argument("--budget", type=float, default=170.0, help="seconds; stop starting entries after this")
    p.add_argument("--entry", action="append", default=[], help="only this entry id (repeatable)")
    args = p.parse_args(argv)
    import torch

    from fp8check import zoo
    from fp8check.results import environment

    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.time()
    rows = []
    for entry in zoo.installed():
        if args.entry and entry.id not in args.entry:
            continue
        for mode in entry.modes_for(device):
            if time.time() - started > args.budget:
                rows.append({"id": entry.id, "mode": mode, "status": "skipped: time budget"})
                continue
            r = zoo.run_entry(entry, mode=mode, device=device, max_examples=args.max_examples)
            d = r.to_dict()
            rows.append(d)
            print(f"{entry.id:40} {mode:14} {r.version or '-':10} {r.verdict:28} {d['categories']} {r.detail[:80]}",
                  flush=True)
            if r.status == "diverges":  # beyond the entry's known issues: what the check printed, to reduce
                for check in r.checks:
                    if not check.passed:
                        print("\n".join("    " + line for line in str(check).splitlines()[:40]), flush=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump({"environment": environment(), "device": device, "results": rows}, f, indent=1, default=str)
    print(f"wrote {len(rows)} rows to {args.json} in {time.time() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The zoo's verbatim Triton kernels under the faithful sm90 interpreter, on a CPU: what stays bracketed.

    PYTHONPATH=.:<unpacked packages> python gpu/zoo_brackets.py --json brackets.json [--max-examples 5]

For every zoo entry with a ``faithful:sm90`` mode whose package is importable
(examples/real-kernels/fetch-packages.sh unpacks them), runs the entry's check
as ``fp8check survey --zoo`` does (seed 0) and prints, per entry, the codes
and scales reported as target-dependent (they depend on where an unspecified
instruction lands), the bracketed ops that made them, and the categories of
divergence. Run it before and after a change to the interpreter's op models
(fp8check.triton.ops, nvidia_approx) to count what the change made exact.
No GPU needed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default="", help="write the rows here")
    p.add_argument("--max-examples", type=int, default=5)
    p.add_argument("--entry", action="append", default=[], help="only this entry id (repeatable)")
    args = p.parse_args(argv)
    from fp8check import zoo

    rows = []
    for entry in zoo.installed():
        if "faithful:sm90" not in entry.modes or (args.entry and entry.id not in args.entry):
            continue
        started = time.time()
        result = zoo.run_entry(entry, mode="faithful:sm90", max_examples=args.max_examples, seed=0)
        ops = sorted({op.strip() for c in result.checks for op in c.extra.get("target_dependent_ops", "").split(",")
                      if op.strip()})
        row = {"id": entry.id, "version": result.version, "status": result.status, "checked": result.checked,
               "target_dependent": sum(c.target_dependent for c in result.checks), "bracketed_ops": ops,
               "categories": result.categories, "seconds": round(time.time() - started, 1)}
        rows.append(row)
        print(f"{row['id']:45} {row['status']:10} target-dependent {row['target_dependent']:8,} "
              f"{' '.join(ops) or '-':18} {row['categories']} ({row['seconds']} s)", flush=True)
    print(f"total target-dependent: {sum(r['target_dependent'] for r in rows):,} in {len(rows)} entries")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

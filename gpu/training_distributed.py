"""GPU run of fp8check.training.distributed: FSDP2 and tensor parallelism over NCCL on 2 GPUs.

    PYTHONPATH=. python gpu/training_distributed.py --out DIR [--nproc 2] [--steps 10]

The same code CI runs on the CPU with gloo (tests/training/test_distributed.py), here with NCCL and
torchao's real FP8 kernels (``torch._scaled_mm``): for each mode -- ``fsdp`` (weights all-gathered in
high precision), ``fsdp-float8`` (torchao's float8 all-gather: each rank casts its shard with the
all-reduced amax), ``fsdp-float8-precompute`` (``precompute_float8_dynamic_scale_for_fsdp``) and
``tp`` (Float8ColwiseParallel/Float8RowwiseParallel MLPs) -- ``torchrun`` runs ``--steps`` steps on
``--nproc`` GPUs; every cast of every shard is checked bit for bit against the whole tensor's
reference, and every rank's loss against the single-device run on GPU 0 (FSDP: bit for bit, as
torchao's own FSDP2 test asserts for float8 all-gather on and off; tp: within 0.25 %). Then the
planted bug of the CPU proof (each rank's amax from its own shard) once, which must be caught.

Writes DIR/distributed.json and DIR/distributed.html (the training page). Needs 2 GPUs; skips with
a message on fewer. Exit 1 when a mode fails or the planted bug is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    if args.device == "cuda" and torch.cuda.device_count() < args.nproc:
        print(f"skipped: {args.nproc} GPUs needed, {torch.cuda.device_count()} here")
        return 0
    from fp8check import training
    from fp8check.outputs import write_json
    from fp8check.report import write_html
    from fp8check.report.training_view import training_report
    from fp8check.terminal.training import distributed_lines, flagged_lines
    from fp8check.training.distributed import MODES, check_distributed

    # The planted bug (tests/training/fp8check_plants.py) where torchrun's ranks import it (PYTHONPATH is
    # inherited).
    plants = str(Path(__file__).resolve().parent.parent / "tests" / "training")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [plants, os.environ.get("PYTHONPATH")]))
    report = training.TrainingReport()
    failed = []
    for mode in MODES:
        t0 = time.time()
        try:
            d = check_distributed(mode=mode, nproc=args.nproc, steps=args.steps, device=args.device)
        except Exception:
            traceback.print_exc()
            failed.append(mode)
            continue
        report.distributed.append(d)
        print("\n".join(distributed_lines(d)) + f"  ({time.time() - t0:.0f} s)", flush=True)
        print("\n".join(flagged_lines(d, limit=6)))
        print(f"   losses rank 0: {[float(x).hex() for x in d.rank_losses[0]]}")
        print(f"   single device: {[float(x).hex() for x in d.reference[0]]}")
        if not d.passed:
            failed.append(mode)
    t0 = time.time()
    try:
        bug = check_distributed(mode="fsdp-float8", nproc=args.nproc, steps=1, device=args.device,
                                worker_init="fp8check_plants:amax_before_all_reduce")
        caught = bug.categories["amax-before-all-reduce"]
        print(f"planted amax-before-all-reduce (fsdp-float8): {caught} shard casts flagged "
              f"({'caught' if caught and not bug.passed else 'MISSED'}; {time.time() - t0:.0f} s)")
        if not caught:
            failed.append("planted bug missed")
    except Exception:
        traceback.print_exc()
        failed.append("planted bug run")
    doc = report.to_json()
    write_json(out / "distributed.json", doc)
    write_html(out / "distributed.html", training_report(doc), what="--html")
    print("passed" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

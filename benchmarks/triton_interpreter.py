"""The faithful Triton interpreter's speed against Triton's stock interpreter, in one run.

    python benchmarks/triton_interpreter.py [--max-examples 20] [--rows 1024] [--out FILE]

Subject: ``benchmarks/kernels/rowwise512.py``, a rowwise FP8 quantizer that
reads each row 512 columns at a time (one program per row). Two measurements,
each for three interpreters:

- ``stock``: Triton's own interpreter (``TRITON_INTERPRET=1``; its FP8
  casts are wrong, only its speed is of interest);
- ``faithful, one program at a time``: fp8check's faithful interpreter as it
  was before batching (``FP8CHECK_TRITON_BATCH=0``: Triton's program loop);
- ``faithful, batched``: the same with :mod:`fp8check.triton.batched`.

1. one kernel launch on a ``rows x 2048`` float32 tensor (interpretation
   alone), best of two, in a fresh process per interpreter;
2. one whole ``fp8check check ... --kind quantize --recipe rowwise
   --triton-target sm90`` in a fresh process per interpreter (the stock one
   without ``--triton-target``; all three under ``TRITON_INTERPRET=1``, so
   the harness draws the same inputs for each): wall time and the child's
   CPU time.

The two faithful runs must agree byte for byte (the launch's outputs; the
check's JSON results less timings): the benchmark fails otherwise. Ratios
are against the stock interpreter measured in the same run; on a shared
machine the CPU-time ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNEL = os.path.join(HERE, "kernels", "rowwise512.py") + ":rowwise"


def launch_once(rows: int, mode: str) -> tuple[float, str]:
    """One launch in a fresh process (the stock interpreter needs TRITON_INTERPRET=1 before triton is
    imported): (best time of two, sha256 of the outputs)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if mode == "stock":
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-launch", mode, "--rows", str(rows)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} launch failed:\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["seconds"], data["sha256"]


def _child_launch(rows: int, mode: str) -> None:
    import hashlib

    import torch

    sys.path.insert(0, os.path.join(HERE, "kernels"))
    import rowwise512

    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 2048, generator=g) * 3
    best, digest = float("inf"), ""
    for _ in range(2):
        t = time.perf_counter()
        if mode == "stock":
            y, s = rowwise512.rowwise(x)  # TRITON_INTERPRET=1: Triton's own interpreter, nothing of fp8check
        else:
            import fp8check.triton as ft
            from fp8check.triton import batched

            with ft.interpreting(), ft.faithful("sm90"):
                if mode == "faithful-sequential":
                    with batched.sequential():
                        y, s = rowwise512.rowwise(x)
                else:
                    y, s = rowwise512.rowwise(x)
        best = min(best, time.perf_counter() - t)
        digest = hashlib.sha256(y.view(torch.uint8).numpy().tobytes() + s.numpy().tobytes()).hexdigest()
    print(json.dumps({"seconds": best, "sha256": digest}))


def check_once(mode: str, max_examples: int, json_path: str) -> tuple[float, float, str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "fp8check", "check", KERNEL, "--kind", "quantize", "--recipe", "rowwise",
           "--format", "e4m3fn", "--max-examples", str(max_examples), "--json", json_path]
    env["TRITON_INTERPRET"] = "1"  # all three: the harness sizes its large call for an interpreter alike
    if mode != "stock":
        cmd += ["--triton-target", "sm90"]
        env["FP8CHECK_TRITON_BATCH"] = "0" if mode == "faithful-sequential" else "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{mode}: fp8check check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    verdict = next((line for line in proc.stdout.splitlines() if line.startswith("checked ")), "?")
    return wall, cpu, verdict


def _results_without_timings(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if not any(w in k for w in ("time", "seconds", "elapsed",
                                                                                   "environment", "created"))}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return json.dumps(strip(data), sort_keys=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-examples", type=int, default=20)
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--child-launch", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_launch:
        _child_launch(args.rows, args.child_launch)
        return 0
    import torch
    import triton

    from fp8check.outputs import write_text

    modes = ("stock", "faithful-sequential", "faithful-batched")
    lines = [f"# benchmarks/triton_interpreter.py, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"# {platform.node()}: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
             f"(shared with other work), Python {platform.python_version()}, torch {torch.__version__}, "
             f"Triton {triton.__version__}", ""]

    lines.append(f"1. one launch on {args.rows} x 2048 float32 (best of 2, a fresh process each)")
    launch = {m: launch_once(args.rows, m) for m in modes}
    if launch["faithful-sequential"][1] != launch["faithful-batched"][1]:
        raise SystemExit("the batched launch's outputs differ from the program-by-program launch's")
    for m in modes:
        t = launch[m][0]
        lines.append(f"   {m:22} {t:8.2f} s   stock/this {launch['stock'][0] / t:6.1f}x   "
                     f"one-by-one/this {launch['faithful-sequential'][0] / t:6.1f}x")

    lines += ["", f"2. one `fp8check check --kind quantize --recipe rowwise` (--max-examples {args.max_examples}), "
                  "a fresh process each"]
    with tempfile.TemporaryDirectory() as tmp:
        check = {m: check_once(m, args.max_examples, os.path.join(tmp, f"{m}.json")) for m in modes}
        same = _results_without_timings(os.path.join(tmp, "faithful-sequential.json")) == \
            _results_without_timings(os.path.join(tmp, "faithful-batched.json"))
    if not same:
        raise SystemExit("the batched check's results differ from the program-by-program check's")
    for m in modes:
        wall, cpu, verdict = check[m]
        lines.append(f"   {m:22} wall {wall:7.1f} s  cpu {cpu:7.1f} s   stock/this: wall {check['stock'][0] / wall:5.1f}x "
                     f"cpu {check['stock'][1] / cpu:5.1f}x   one-by-one/this: wall "
                     f"{check['faithful-sequential'][0] / wall:5.1f}x cpu {check['faithful-sequential'][1] / cpu:5.1f}x")
        lines.append(f"   {'':22} {verdict}")
    lines.append("")
    lines.append("faithful batched and one program at a time: identical launch outputs and identical check results")
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_text(args.out, text + "\n", "--out")
    return 0


if __name__ == "__main__":
    sys.exit(main())

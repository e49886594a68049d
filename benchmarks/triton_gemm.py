"""A 512 x 512 x 512 FP8 GEMM Triton kernel interpreted under sm90 against Triton's stock interpreter, in one run.

    python benchmarks/triton_gemm.py [--size 512] [--blocks 64,64,64] [--out FILE]

Subject: ``benchmarks/kernels/fp8_gemm.py`` (the matmul tutorial's tiled kernel on e4m3fn operands, a
float32 accumulator chained through ``tl.dot(a, b, acc)``). One launch per interpreter, each in a fresh
process, best of two:

- ``stock``: Triton's own interpreter (``TRITON_INTERPRET=1``): fp8 operands decoded by its own
  converter, float32 ``np.matmul`` (not Hopper's arithmetic: only its speed is of interest);
- ``faithful sm90``: ``fp8check.triton.interpreting()`` + ``faithful("sm90")``: every ``tl.dot`` as
  Hopper's wgmma computes it (fp8check.matmul.tensorcore), programs batched.

The faithful output is checked bit for bit against ``tensorcore.mma("sm90", A, B)`` on the whole
matrices (the benchmark fails otherwise), and the number of elements where it differs from the stock
interpreter's float32 result is printed. Ratio: faithful time / stock time, measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _operands(size: int):
    import numpy as np

    rng = np.random.default_rng(0)
    # finite e4m3fn codes of both signs, all binades
    qa = rng.integers(0, 0x7F, size=(size, size), dtype=np.uint8) | (rng.integers(0, 2, (size, size), np.uint8) << 7)
    qb = rng.integers(0, 0x7F, size=(size, size), dtype=np.uint8) | (rng.integers(0, 2, (size, size), np.uint8) << 7)
    return qa, qb


def _child(mode: str, size: int, blocks: tuple[int, int, int], out: str) -> None:
    import numpy as np
    import torch

    sys.path.insert(0, os.path.join(HERE, "kernels"))
    import fp8_gemm

    qa, qb = _operands(size)
    a, b = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (qa, qb))
    best, c = float("inf"), None
    for _ in range(2):
        t = time.perf_counter()
        if mode == "stock":
            c = fp8_gemm.fp8_gemm(a, b, *blocks)  # TRITON_INTERPRET=1: nothing of fp8check
        else:
            import fp8check.triton as ft

            with ft.interpreting(), ft.faithful("sm90"):
                c = fp8_gemm.fp8_gemm(a, b, *blocks)
        best = min(best, time.perf_counter() - t)
    np.save(out, c.numpy())
    engine = "numpy"
    if mode != "stock":  # which tensor-core engine ran: compiled only with a compilation on disk or asked for
        from fp8check.matmul.tensorcore import _compiled_step

        compiled = _compiled_step()
        if compiled is not None and compiled.made():
            engine = "numba"
    print(json.dumps({"seconds": best, "engine": engine}))


def run(mode: str, size: int, blocks: tuple[int, int, int], out: str) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if mode == "stock":
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--size", str(size),
           "--blocks", ",".join(map(str, blocks)), "--child-out", out]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stdout}\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    ENGINES[mode] = result["engine"]
    return result["seconds"]


ENGINES: dict[str, str] = {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--blocks", default="64,64,64", help="BM,BN,BK")
    p.add_argument("--out", help="also write the lines to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    blocks = tuple(int(x) for x in args.blocks.split(","))
    if args.child:
        _child(args.child, args.size, blocks, args.child_out)
        return 0
    import tempfile

    import numpy as np
    import triton

    sys.path.insert(0, ROOT)
    from fp8check.matmul import tensorcore
    from fp8check.matmul.tensorcore import _compiled_step
    from fp8check.outputs import write_text

    with tempfile.TemporaryDirectory() as tmp:
        times = {m: run(m, args.size, blocks, os.path.join(tmp, f"{m}.npy")) for m in ("stock", "faithful")}
        stock, faithful = (np.load(os.path.join(tmp, f"{m}.npy")) for m in ("stock", "faithful"))
    qa, qb = _operands(args.size)
    model = tensorcore.mma("sm90", qa, "e4m3fn", qb, "e4m3fn")
    if not np.array_equal(faithful.view(np.uint32), model.bits):
        raise SystemExit("the faithful interpreter's GEMM differs from tensorcore.mma('sm90', ...)")
    n = args.size
    lines = [f"# benchmarks/triton_gemm.py, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores (load "
             f"{os.getloadavg()[0]:.1f}), Triton {triton.__version__}, numpy {np.__version__}, tensor-core engine: "
             f"{ENGINES['faithful']} (numba {'installed' if _compiled_step() else 'absent'})",
             f"{n}x{n}x{n} e4m3fn GEMM, blocks {args.blocks}, one launch (best of 2, a fresh process each):",
             f"  stock interpreter      {times['stock']:7.2f} s",
             f"  faithful sm90          {times['faithful']:7.2f} s   faithful/stock {times['faithful'] / times['stock']:5.2f}x",
             f"  faithful == tensorcore.mma('sm90') bit for bit; differs from the stock float32 result in "
             f"{int((faithful.view(np.uint32) != stock.view(np.uint32)).sum())} of {n * n} elements"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_text(args.out, text + "\n", "--out")
    return 0


if __name__ == "__main__":
    sys.exit(main())

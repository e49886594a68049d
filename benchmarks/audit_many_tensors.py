"""Memory and time of ``fp8check audit`` on a checkpoint of very many small tensors.

    python benchmarks/audit_many_tensors.py [--tensors 100000 [20000 ...]] [--dir DIR] [--keep]

For each tensor count N, writes one valid safetensors file holding N e4m3fn
tensors ``layers.{i}.weight`` of shape [16, 10] (160 bytes each: 16 MB for
N = 100,000, the file of issue 13; ``--scales`` gives each a float32 per-row
``weight_scale`` too, as in a real checkpoint), and runs in a fresh process each:

- ``python -c "import torch"``: the idle interpreter with torch (the floor);
- ``fp8check audit FILE --json OUT -q`` (the full JSON report);
- ``fp8check audit FILE -q`` (no JSON: the exit code only);
- ``fp8check audit FILE`` (the terminal report, to a pipe);
- ``fp8check audit FILE --html OUT -q`` (the HTML report, at most 2,000 rows).

Each child's wall time, CPU time and peak resident set (``ru_maxrss`` from
``wait4`` of that child alone) are printed, with the peak over the idle
torch interpreter's and the extra bytes per tensor. Memory that does not
grow with the number of tensors shows as a flat "over idle" column across
the tensor counts; what does grow (the header's own entries, which the
audit must hold to pair scales) shows as bytes per tensor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

SHAPE = (16, 10)


def generate(path: str, n: int, scales: bool) -> int:
    """Write the safetensors file (header by hand: no tensor is ever held); its size in bytes."""
    rng = np.random.default_rng(0)
    nbytes = SHAPE[0] * SHAPE[1]
    sbytes = SHAPE[0] * 4
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    pos = 0
    for i in range(n):
        header[f"layers.{i}.weight"] = {"dtype": "F8_E4M3", "shape": list(SHAPE), "data_offsets": [pos, pos + nbytes]}
        pos += nbytes
        if scales:
            header[f"layers.{i}.weight_scale"] = {"dtype": "F32", "shape": [SHAPE[0], 1],
                                                  "data_offsets": [pos, pos + sbytes]}
            pos += sbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    codes = rng.integers(0, 0x7E, size=nbytes * 4096, dtype=np.uint8)  # finite e4m3fn codes, no NaN
    scale = np.full(SHAPE[0], 2.0 ** -6, dtype=np.float32).tobytes()
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for i in range(n):
            j = (i * 7919) % 4096
            f.write(codes[j * nbytes:(j + 1) * nbytes].tobytes())
            if scales:
                f.write(scale)
    return os.path.getsize(path)


def measure(argv: list[str]) -> dict[str, float]:
    """Run ``argv`` in a fresh process: wall and CPU seconds, peak RSS in MB, exit code."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    # drain the pipes while waiting: a full pipe would block the child
    import threading

    sink: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, s=s: sink.__setitem__(k, s.read()))
               for k, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    for t in readers:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "rc": proc.returncode, "stdout_bytes": len(sink.get("out", b"")), "stderr": sink.get("err", b"")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tensors", type=int, nargs="+", default=[100_000], metavar="N",
                        help="FP8 tensor counts to measure")
    parser.add_argument("--scales", action="store_true", help="give every FP8 tensor a per-row float32 scale")
    parser.add_argument("--dir", help="where to write the checkpoints (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args(argv)
    work = args.dir or tempfile.mkdtemp(prefix="fp8check-many-")
    os.makedirs(work, exist_ok=True)
    py = sys.executable
    idle = measure([py, "-c", "import torch"])
    print(f"idle `python -c 'import torch'`: {idle['wall']:.1f} s, peak RSS {idle['rss_mb']:.0f} MB")
    print(f"{'tensors':>8} {'file MB':>8} {'mode':<18} {'exit':>4} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} "
          f"{'x idle':>7} {'over idle MB':>12} {'B/tensor':>9} {'output MB':>9}")
    ok = True
    try:
        for n in args.tensors:
            path = os.path.join(work, f"many-{n}.safetensors")
            size = generate(path, n, args.scales)
            total = n * (2 if args.scales else 1)
            out_json = os.path.join(work, f"many-{n}.json")
            out_html = os.path.join(work, f"many-{n}.html")
            modes = {
                "--json OUT -q": ([py, "-m", "fp8check", "audit", path, "--json", out_json, "-q"], out_json),
                "-q": ([py, "-m", "fp8check", "audit", path, "-q"], None),
                "terminal": ([py, "-m", "fp8check", "audit", path], None),
                "--html OUT -q": ([py, "-m", "fp8check", "audit", path, "--html", out_html, "-q"], out_html),
            }
            for mode, (cmd, output) in modes.items():
                r = measure(cmd)
                if r["rc"] not in (0, 1):
                    ok = False
                    print(f"  {mode}: exit {r['rc']}: {r['stderr'].decode(errors='replace')[-500:]}")
                over = r["rss_mb"] - idle["rss_mb"]
                out_mb = (os.path.getsize(output) if output else r["stdout_bytes"]) / 1e6
                print(f"{n:>8} {size / 1e6:>8.1f} {mode:<18} {r['rc']:>4} {r['wall']:>7.1f} {r['cpu']:>7.1f} "
                      f"{r['rss_mb']:>8.0f} {r['rss_mb'] / idle['rss_mb']:>7.2f} {over:>12.0f} "
                      f"{over * 1e6 / total:>9.0f} {out_mb:>9.1f}", flush=True)
            if not args.keep:
                for p in (path, out_json, out_html):
                    if os.path.exists(p):
                        os.unlink(p)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print("B/tensor: peak RSS over the idle interpreter's, per tensor of the file (FP8 and scale tensors)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

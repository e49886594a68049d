"""Audit throughput against a raw read of the same files, and peak memory.

    python benchmarks/audit_throughput.py [--size-gb 4] [--shards 8] [--jobs 2] [--dir DIR] [--keep]

Generates a DeepSeek-style sharded checkpoint (e4m3fn weights [7168, 2048]
with float32 128x128 ``weight_scale_inv``, an index, a config), then in one
run:

- raw read: every file read sequentially into one reusable buffer (what
  ``cat`` does), best of three;
- ``fp8check audit`` of the same directory in a fresh process per mode
  (threads with 1 and N workers, processes with N), timing the audit call
  and reading the child's peak resident set (``ru_maxrss``; the process mode
  also reports its workers' peak).

The page cache is warmed first, so both sides read from memory: this is the
hard comparison (from a cold disk the audit waits on the disk like the raw
read does). Prints one table; the goal is audit >= 70% of raw read speed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROWS, COLS = 7168, 2048  # one expert matrix of DeepSeek-V3 (14.7 MB in FP8)


def generate(directory: str, size_gb: float, shards: int) -> list[str]:
    from fp8check.checkpoints import safetensors_writer as writer

    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=64 << 20, dtype=np.uint8)
    pool[(pool & 0x7F) == 0x7F] ^= 1  # no NaN codes
    per_tensor = ROWS * COLS
    n_tensors = max(shards, int(size_gb * 1e9 // per_tensor))
    scale = np.full((-(-ROWS // 128), -(-COLS // 128)), 2.0 ** -8, dtype=np.float32)
    weight_map = {}
    files = []
    for s in range(shards):
        names = range(s, n_tensors, shards)
        outs = []
        for t in names:
            name = f"model.layers.{t}.mlp.experts.0.down_proj.weight"
            start = (t * 7919 * 4096) % (pool.size - per_tensor)
            data = pool[start:start + per_tensor]
            outs.append(writer.OutputTensor(name, "F8_E4M3", (ROWS, COLS), per_tensor,
                                            lambda d=data: [d[i:i + (16 << 20)] for i in range(0, d.size, 16 << 20)]))
            outs.append(writer.OutputTensor(name + "_scale_inv", "F32", scale.shape, scale.nbytes,
                                            lambda: [scale.tobytes()]))
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        path = os.path.join(directory, fname)
        writer.write(path, outs, {"format": "pt"})
        files.append(path)
        weight_map.update({o.name: fname for o in outs})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"torch_dtype": "bfloat16", "quantization_config": {
            "quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}, f)
    return files


def drop_cache(files: list[str]) -> None:
    """Evict the files' pages from the page cache (POSIX_FADV_DONTNEED: no root needed)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def raw_read(files: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of reading every file once."""
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    start, cpu = time.perf_counter(), _cpu()
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(view):
                pass
    return time.perf_counter() - start, _cpu() - cpu


CHILD = r"""
import json, resource, sys, time
import torch  # a fixed start-up cost (about a second), not part of the per-byte figures
from fp8check.checkpoints import AuditOptions, audit
def cpu():
    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))
start, cpu0 = time.perf_counter(), cpu()
report = audit([sys.argv[1]], AuditOptions(jobs=int(sys.argv[2]), parallel=sys.argv[3]))
seconds = time.perf_counter() - start
print(json.dumps({
    "seconds": seconds,
    "cpu_seconds": cpu() - cpu0,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "children_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    "fp8_tensors": report.summary.fp8_tensors,
    "bytes_read": report.summary.bytes_read,
    "errors": report.summary.errors,
}))
"""

IDLE = r"""
import json, resource
import torch, fp8check.checkpoints.audit
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gb", type=float, default=4.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--dir", help="where to write the checkpoint (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoint")
    args = ap.parse_args()

    directory = args.dir or tempfile.mkdtemp(prefix="fp8check-bench-")
    os.makedirs(directory, exist_ok=True)
    try:
        t0 = time.perf_counter()
        files = generate(directory, args.size_gb, args.shards)
        total = sum(os.path.getsize(f) for f in files)
        print(f"generated {len(files)} shards, {total / 1e9:.2f} GB in {time.perf_counter() - t0:.1f} s "
              f"({os.cpu_count()} CPUs)")
        idle = run_child(IDLE)
        modes = [("threads", 1), ("threads", args.jobs), ("processes", args.jobs)]
        for cache in ("cold", "warm"):
            def prepare() -> None:
                if cache == "cold":
                    drop_cache(files)
                else:
                    raw_read(files)

            raws = []
            for _ in range(3):
                prepare()
                raws.append(raw_read(files))
            raw, raw_cpu = min(raws)
            rows = [(f"raw read, sequential ({cache} cache)", raw, raw_cpu, None, None)]
            for parallel, jobs in modes:
                best = None
                for _ in range(3):
                    prepare()
                    r = run_child(CHILD, directory, str(jobs), parallel)
                    if best is None or r["seconds"] < best["seconds"]:
                        best = r
                assert best["errors"] == 0 and best["bytes_read"] >= total * 0.99, best
                rows.append((f"audit --parallel {parallel} --jobs {jobs}", best["seconds"], best["cpu_seconds"],
                             best["rss_mb"], best["children_rss_mb"] if parallel == "processes" else None))
            print(f"\n{cache + ' page cache':38s} {'seconds':>8s} {'GB/s':>6s} {'vs raw':>7s} {'CPU-s':>6s} "
                  f"{'GB/CPU-s':>9s} {'peak RSS MB':>12s} {'workers MB':>11s}")
            for name, secs, cpu, rss, child in rows:
                print(f"{name:38s} {secs:8.2f} {total / secs / 1e9:6.2f} {raw / secs:7.0%} {cpu:6.2f} "
                      f"{total / max(cpu, 1e-9) / 1e9:9.2f} {(f'{rss:.0f}' if rss else '-'):>12s} "
                      f"{(f'{child:.0f}' if child else '-'):>11s}")
        print(f"\nidle python + torch + fp8check: {idle['rss_mb']:.0f} MB RSS; largest tensor "
              f"{ROWS * COLS / 1e6:.1f} MB; checkpoint {total / 1e9:.2f} GB; load average "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} (other processes share these CPUs)")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

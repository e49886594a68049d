"""The op table: every float op a quantizer or fused kernel uses, x special values, compiled on the GPU.

    PYTHONPATH=. python gpu/ops_table.py --json gpu/results/ops-table.json

Compiles tests/triton_faithful/op_kernels.py for the GPU (sm90 on an H200),
runs every op on the table's inputs (every pair of 28 float32 specials: NaN
of both signs and a signalling one, +-Inf, +-0, subnormals, +-max, FP8
bounds, bfloat16 ties; 4,096 random triples; integers; reduction rows) and
records the result bits and the float instructions of each op's PTX. It
then runs the same kernels in the faithful interpreter for the GPU's target
on this machine's CPU (the installed Triton), in the three bracket modes,
and prints per op how many compiled results are identical to the faithful
``rn`` result and how many lie outside the [lo, hi] bracket.

tests/triton_faithful/test_ops_table.py reads the committed JSON and runs
the faithful side again on CI's Triton. Without CUDA only the faithful side
runs (a smoke run of the script).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "triton_faithful")]

import numpy as np  # noqa: E402

ENCODING = "zlib+base64, little-endian uint32"


def pack(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(a, dtype="<u4").tobytes(), 9)).decode()


def unpack(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<u4").copy()


def compare(op: str, compiled: np.ndarray, faithful: dict[str, np.ndarray]) -> dict[str, int]:
    """identical: compiled == faithful rn (NaN by class); outside: compiled outside [lo, hi] (or, for the
    index results, none of the three)."""
    import op_kernels as ok

    rn, lo, hi = faithful["rn"], faithful["lo"], faithful["hi"]
    if op in ("argmax", "argmin", "bf16_to_i32"):
        same = compiled == rn
        inside = same | (compiled == lo) | (compiled == hi)
    else:
        c, r, l_, h = (x.view(np.float32) for x in (compiled, rn, lo, hi))
        nan = np.isnan(c)
        same = np.where(nan, np.isnan(r), (compiled == rn))
        with np.errstate(invalid="ignore"):
            inside = np.where(nan, np.isnan(l_) & np.isnan(h),
                              ((l_ <= c) & (c <= h) & (np.signbit(c) == np.signbit(r)) | (compiled == rn)))
    del ok
    return {"checked": int(compiled.size), "identical": int(same.sum()), "outside": int((~inside).sum()),
            "bracket_wide": int((lo != hi).sum())}


def faithful_runs(data: dict[str, np.ndarray], target: str) -> dict[str, dict[str, np.ndarray]]:
    import op_kernels as ok

    import fp8check.triton as ft
    from fp8check.triton import ops

    runs: dict[str, dict[str, np.ndarray]] = {}
    with ft.faithful(target):
        for mode in ops.BRACKET_MODES:
            with ops.bracket(mode):
                runs[mode] = ok.run(data, "cpu", ft.interpreted)
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default="ops-table.json")
    p.add_argument("--target", default="sm90")
    args = p.parse_args(argv)
    import torch
    import triton

    import op_kernels as ok
    from fp8check.results import environment

    data = ok.inputs()
    report: dict = {"encoding": ENCODING, "target": args.target, "environment": environment(),
                    "triton": triton.__version__, "inputs": {k: pack(v.view(np.uint32)) for k, v in data.items()},
                    "ops": {}}
    started = time.time()
    compiled: dict[str, np.ndarray] = {}
    if torch.cuda.is_available():
        report["device"] = torch.cuda.get_device_name()
        report["capability"] = list(torch.cuda.get_device_capability())
        compiled = ok.run(data, "cuda")
        ptx = ok.run.ptx
        for op, bits in compiled.items():
            report["ops"][op] = {"what": {**ok.ELEMENTWISE, **ok.REDUCTIONS, **ok.INT_CASTS}[op],
                                 "compiled": pack(bits), "ptx": ptx.get(op, [])}
        print(f"compiled {len(compiled)} ops in {time.time() - started:.1f} s", flush=True)
    else:
        print("no CUDA: compiled side skipped", flush=True)
    t0 = time.time()
    try:
        runs = faithful_runs(data, args.target)
    except Exception as exc:  # the table is worth keeping without the faithful side
        report["faithful_error"] = f"{type(exc).__name__}: {exc}"
        runs = {}
        print("faithful side failed:", report["faithful_error"], flush=True)
    print(f"faithful {args.target} (3 modes) in {time.time() - t0:.1f} s", flush=True)
    for op in compiled:
        if runs:
            row = compare(op, compiled[op], {m: runs[m][op] for m in runs})
            report["ops"][op]["faithful_here"] = row
            flag = "IDENTICAL" if row["identical"] == row["checked"] else (
                "BRACKETED" if row["outside"] == 0 else f"OUTSIDE {row['outside']}")
            print(f"{op:18} {row['checked']:6} identical {row['identical']:6} {flag:14} "
                  f"{' '.join(report['ops'][op]['ptx'])[:90]}", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json} in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

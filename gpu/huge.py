"""The huge calls on a CUDA device (issue 21, item 6): a Triton cast whose offsets are int32
(``tl.program_id(0) * BLOCK``) must fail fp8check's default GPU check, the same kernel with int64 offsets
must conform, and so must a torch rowwise quantizer.

    PYTHONPATH=. python gpu/huge.py [--json out.json]

Each check is ``fp8check.declarations.run_declaration`` on ``device = "cuda"`` with nothing else asked for:
the call past 2^31 elements and the one with more than 65,535 rows are made by default when the device has
room (about 26 GB for bfloat16 inputs). Prints one line per kernel and its notes; exits 0 when the planted
kernel diverges (past 2^31) and the others conform, 1 otherwise, 2 without a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BLOCK = 4096


@triton.jit
def _cast_int32_offsets(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # int32: wraps past 2^31 elements
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.where(x != x, x, tl.clamp(x, -448.0, 448.0))  # NaN stays NaN (tl.clamp(NaN) is +-448 on sm90)
    tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=mask)


@triton.jit
def _cast_int64_offsets(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.where(x != x, x, tl.clamp(x, -448.0, 448.0))  # NaN stays NaN (tl.clamp(NaN) is +-448 on sm90)
    tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=mask)


def _launch(kernel):
    def cast(x):
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        n = x.numel()
        kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y

    return cast


cast_int32_offsets = _launch(_cast_int32_offsets)
cast_int64_offsets = _launch(_cast_int64_offsets)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 2
    from fp8check import quantizers
    from fp8check.declarations import cast_kernel, quantizer_kernel, run_declaration
    from fp8check.quantizers.adapters import torch_quantizer

    rowwise = torch_quantizer(quantizers.get("rowwise"))
    checks = [  # the planted kernel last: a wild store past 2^31 could leave the CUDA context unusable
        ("cast_int64_offsets", cast_kernel(cast_int64_offsets, format="e4m3fn", profile="triton-sm90",
                                           device="cuda", input_dtypes=("bfloat16",)), True),
        ("torch rowwise", quantizer_kernel(rowwise, recipe="rowwise", device="cuda", name="rowwise"), True),
        ("cast_int32_offsets", cast_kernel(cast_int32_offsets, format="e4m3fn", profile="triton-sm90",
                                           device="cuda", input_dtypes=("bfloat16",)), False),
    ]
    report, ok = {}, True
    for name, decl, should_pass in checks:
        t = time.time()
        try:
            r = run_declaration(decl, input_dtype="bfloat16", max_examples=5, seed=0)
        except Exception as exc:  # report and go on
            print(f"{name}: error {type(exc).__name__}: {str(exc)[:300]}")
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
            ok = False
            continue
        huge = [d.condition for d in r.divergences if "huge" in d.condition]
        print(f"{name}: {'CONFORMS' if r.passed else 'DIVERGES'} {dict((k, v) for k, v in r.categories.items() if v)} "
              f"({time.time() - t:.0f} s)")
        for note in r.extra.get("notes", []):
            print(f"  note: {note}")
        for c in huge[:2]:
            print(f"  {c}")
        made = r.extra.get("calls")
        report[name] = {"passed": r.passed, "categories": r.categories, "huge": huge[:4],
                        "notes": r.extra.get("notes", []), "calls": made, "seconds": round(time.time() - t, 1)}
        right = r.passed == should_pass and (should_pass or any("past 2^31" in c for c in huge))
        ok &= right and not any("no huge calls" in n or "was not made" in n for n in r.extra.get("notes", []))
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print("huge calls:", "as expected" if ok else "NOT as expected")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

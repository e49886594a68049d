"""The huge calls on a CUDA device (issue 21, item 6): a Triton cast whose offsets are int32
(``tl.program_id(0) * BLOCK``) must fail fp8check's default GPU check, the same kernel with int64 offsets
must conform, and so must a torch rowwise quantizer.

    PYTHONPATH=. python gpu/huge.py [--json out.json]

Each check is ``fp8check.declarations.run_declaration`` on ``device = "cuda"`` with nothing else asked for:
the call past 2^31 elements and the one with more than 65,535 rows are made by default when the device has
room (about 26 GB for bfloat16 inputs). Past 2^31 the int32 offsets wrap negative: the planted kernel may
write wrong codes or read outside every allocation (on the H200 with torch 2.11 and Triton 3.6: an illegal
memory access). Either is the finding: wrong codes, or a fault of the device attributed to the huge call
(fp8check.device_faults). The planted kernel is checked last and under ``isolate`` (a child process), so a
fault cannot take the other checks' CUDA context down. Prints one line per kernel and its notes; exits 0
when the planted kernel fails past 2^31 and the others conform, 1 otherwise, 2 without a CUDA device.
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


def as_expected(r, should_pass: bool) -> bool:
    """Whether a check's result is what this script expects: the huge calls made, and either a conforming
    result, or a failed one whose finding is past 2^31 elements (wrong codes there, or a fault of the device
    in that call)."""
    if any("no huge calls" in n or "was not made" in n for n in r.extra.get("notes", [])):
        return False
    if should_pass:
        return r.passed
    past = [d for d in r.divergences if "huge input" in d.condition and "past 2^31" in d.condition]
    return not r.passed and bool(past)


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
    checks = [  # the planted kernel last and in a child process: a fault leaves a CUDA context unusable
        ("cast_int64_offsets", cast_kernel(cast_int64_offsets, format="e4m3fn", profile="triton-sm90",
                                           device="cuda", input_dtypes=("bfloat16",)), True),
        ("torch rowwise", quantizer_kernel(rowwise, recipe="rowwise", device="cuda", name="rowwise"), True),
        # By name: the child process imports it (this file runs as __main__).
        ("cast_int32_offsets", cast_kernel("gpu.huge:cast_int32_offsets", format="e4m3fn", profile="triton-sm90",
                                           device="cuda", input_dtypes=("bfloat16",), isolate=True), False),
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
        fault = r.extra.get("device_fault")
        if fault:
            print(f"  device fault ({fault['category']}): {fault['error']} in the call on {fault['call']}")
        made = r.extra.get("calls")
        report[name] = {"passed": r.passed, "categories": r.categories, "huge": huge[:4],
                        "notes": r.extra.get("notes", []), "calls": made, "device_fault": fault,
                        "seconds": round(time.time() - t, 1)}
        ok &= as_expected(r, should_pass)
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print("huge calls:", "as expected" if ok else "NOT as expected")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

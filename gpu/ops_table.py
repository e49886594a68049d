"""The op table: every float op a quantizer or fused kernel uses, x special values, compiled vs faithful.

    PYTHONPATH=. python gpu/ops_table.py --json gpu/results/ops-table.json.gz     # on the H200 (sm90)
    PYTHONPATH=. python gpu/ops_table.py --json /tmp/t.json.gz --lowering sm90,gfx942,gfx950   # on a CPU

Compiles tests/triton_faithful/op_kernels.py for the GPU here (sm90 on an
H200), runs every op on the table's inputs (every pair of 28 float32
specials: NaN of both signs and a signalling one, +-Inf, +-0, subnormals,
+-max, FP8 bounds, bfloat16 ties; 4,096 random triples; integers; reduction
rows) and records the result bits and the float instructions of each op's
PTX. It then runs the same kernels in the faithful interpreter for the GPU's
target, as the installed Triton compiles (``rn``, ``lo``, ``hi``), and
compares: per op how many compiled results are identical to the ``rn`` run
(NaN by class; and bit for bit), and how many lie outside the bracket the
three runs span. Without CUDA the faithful side still runs (so a broken
faithful side shows on a CPU first), and ``--lowering`` compiles the kernels
for the named targets without a GPU and records their instructions.

tests/triton_faithful/test_ops_table.py reads the committed JSON and runs
the faithful side again on CI's Triton, as the table's Triton compiled.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "triton_faithful")]

import numpy as np  # noqa: E402

ENCODING = "zlib+base64, little-endian uint32"
INDEX_OPS = ("argmax", "argmin", "bf16_to_i32", "f32_to_i32")  # integer results
#: Ops whose compiled form depends on the Triton frontend's version, not only on the target's rules:
#: Triton 3.6 negates a float as 0 - x (+0 stays +0, NaN becomes the canonical NaN), 3.8+ with negf.
FRONTEND_DEPENDENT = {"neg": "Triton 3.6 compiles -x as 0 - x, 3.8 and 3.9 as neg",
                      "bf16_neg": "Triton 3.6 compiles -x as 0 - x, 3.8 and 3.9 as neg"}


def pack(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(a, dtype="<u4").tobytes(), 9)).decode()


def unpack(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<u4").copy()


def inputs_of(report: dict) -> dict[str, np.ndarray]:
    """The table's inputs as op_kernels.run takes them (reduction rows as a 2-D array)."""
    import op_kernels as ok

    data = {k: unpack(v) for k, v in report["inputs"].items()}
    data["rows"] = data["rows"].reshape(-1, ok.ROW)
    return data


def read(path: str | Path) -> dict:
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def write(path: str | Path, report: dict) -> None:
    text = (json.dumps(report, indent=1) + "\n").encode()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(gzip.compress(text, mtime=0) if str(path).endswith(".gz") else text)


def _operands(op: str, data: dict[str, np.ndarray], i: int) -> str:
    import op_kernels as ok

    if op in ok.REDUCTIONS:
        row = data["rows"].reshape(-1, ok.ROW)[i]
        return "row " + " ".join(f"{int(v):08X}" for v in row)
    if op in ok.INT_CASTS and op != "f32_to_i32":
        return f"int {int(data['ints'].view(np.int32)[i])}"
    return " ".join(f"{k}={int(data[k][i]):08X}" for k in "abc")


def compare(op: str, compiled: np.ndarray, faithful: dict[str, np.ndarray], data: dict[str, np.ndarray],
            examples: int = 8) -> dict:
    """identical: compiled == faithful rn (NaN by class); identical_bits: bit for bit; outside: compiled
    outside the bracket the rn/lo/hi runs span (for an index: none of the three; an argmax of a row holding
    NaN is one of the reduction orders the runs model, not any NaN's index)."""
    rn, lo, hi = faithful["rn"], faithful["lo"], faithful["hi"]
    if op in INDEX_OPS:
        same = compiled == rn
        inside = same | (compiled == lo) | (compiled == hi)
        same_bits = same
    else:
        c, r, l_, h = (x.view(np.float32) for x in (compiled, rn, lo, hi))
        nan = np.isnan(c)
        same_bits = compiled == rn
        same = np.where(nan, np.isnan(r), same_bits)
        with np.errstate(invalid="ignore"):
            low, high = np.minimum(np.minimum(l_, h), r), np.maximum(np.maximum(l_, h), r)
            inside = np.where(nan, np.isnan(l_) | np.isnan(h) | np.isnan(r),
                              same_bits | ((low <= c) & (c <= high) & ~((c == 0) & (low == 0) & (high == 0))))
    bad = np.flatnonzero(~same)
    return {"checked": int(compiled.size), "identical": int(same.sum()), "identical_bits": int(same_bits.sum()),
            "outside": int((~inside).sum()), "bracket_wide": int((lo != hi).sum()),
            "examples": [{"operands": _operands(op, data, int(i)), "compiled": f"{int(compiled[i]):08X}",
                          "rn": f"{int(rn[i]):08X}", "lo": f"{int(lo[i]):08X}", "hi": f"{int(hi[i]):08X}",
                          "inside": bool(inside[i])} for i in bad[:examples]]}


def faithful_target(target: str, triton_version: str):
    """The target as ``triton_version`` compiles it (a Target object: faithful() applies nothing more)."""
    from fp8check.triton import targets

    return targets.for_triton(targets.get(target), triton_version)


def faithful_runs(data: dict[str, np.ndarray], target: str, triton_version: str | None = None
                  ) -> dict[str, dict[str, np.ndarray]]:
    """op -> {rn, lo, hi} result bits of the faithful interpreter (the installed Triton's interpreter, with
    the rules of ``target`` as ``triton_version`` compiles it; default: the installed one)."""
    import op_kernels as ok
    import triton

    import fp8check.triton as ft
    from fp8check.triton import ops

    t = faithful_target(target, triton_version or triton.__version__)
    runs: dict[str, dict[str, np.ndarray]] = {}
    with ft.faithful(t):
        for mode in ops.BRACKET_MODES:
            with ops.bracket(mode):
                for op, bits in ok.run(data, "cpu", ft.interpreted).items():
                    runs.setdefault(op, {})[mode] = bits
    return runs


def lowering(targets_: list[str]) -> dict[str, dict[str, list[str]]]:
    """target -> op -> the float instructions Triton emits for it, compiled here without a GPU."""
    import op_kernels as ok
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig_e = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "h": "fp32",
             "lo": "fp32", "OP": "constexpr", "BLOCK": "constexpr"}
    sig_r = {"x_ptr": "*fp32", "out_ptr": "*fp32", "idx_ptr": "*i32", "OP": "constexpr", "ROW": "constexpr"}
    sig_i = {"i_ptr": "*i32", "a_ptr": "*fp32", "out_ptr": "*fp32", "iout_ptr": "*i32", "n": "i32",
             "OP": "constexpr", "BLOCK": "constexpr"}
    out: dict[str, dict[str, list[str]]] = {}
    for name in targets_:
        gpu = GPUTarget("cuda", int(name[2:]), 32) if name.startswith("sm") else GPUTarget("hip", name, 64)
        found: dict[str, list[str]] = {}
        for op in list(ok.ELEMENTWISE) + list(ok.REDUCTIONS) + list(ok.INT_CASTS):
            if op in ok.ELEMENTWISE:
                src = ASTSource(fn=ok.elementwise_kernel, signature=sig_e, constexprs={"OP": op, "BLOCK": 1024})
            elif op in ok.REDUCTIONS:
                src = ASTSource(fn=ok.reduce_kernel, signature=sig_r, constexprs={"OP": op, "ROW": ok.ROW})
            else:
                src = ASTSource(fn=ok.int_cast_kernel, signature=sig_i, constexprs={"OP": op, "BLOCK": 1024})
            try:
                asm = triton.compile(src, target=gpu).asm
                found[op] = ok.float_instructions(asm.get("ptx") or asm.get("amdgcn") or "")
            except Exception as exc:  # a compile failure is a row of the table
                found[op] = [f"does not compile: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"]
            print(f"{name:7} {op:18} {' '.join(found[op])[:110]}", flush=True)
        out[name] = found
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default="ops-table.json.gz", help="where to write the table (.gz: compressed)")
    p.add_argument("--target", default="sm90", help="the faithful target the GPU here is compared with")
    p.add_argument("--lowering", default="", help="comma-separated targets to compile for without a GPU "
                                                  "(sm90,gfx942,gfx950) and record the instructions of")
    args = p.parse_args(argv)
    import torch
    import triton

    import op_kernels as ok
    from fp8check.results import environment

    data = ok.inputs()
    version = triton.__version__.split("+")[0]
    report: dict = {"encoding": ENCODING, "target": args.target, "environment": environment(), "triton": version,
                    "inputs": {k: pack(v.view(np.uint32)) for k, v in data.items()}, "ops": {}}
    what = {**ok.ELEMENTWISE, **ok.REDUCTIONS, **ok.INT_CASTS}
    started = time.time()
    compiled: dict[str, np.ndarray] = {}
    if torch.cuda.is_available():
        report["device"] = torch.cuda.get_device_name()
        report["capability"] = list(torch.cuda.get_device_capability())
        compiled = ok.run(data, "cuda")
        for op, bits in compiled.items():
            report["ops"][op] = {"what": what[op], "compiled": pack(bits), "ptx": ok.run.ptx.get(op, [])}
        print(f"compiled {len(compiled)} ops on {report['device']} in {time.time() - started:.1f} s", flush=True)
    else:
        print("no CUDA here: the compiled side is skipped; the faithful side runs", flush=True)
    t0 = time.time()
    try:
        runs = faithful_runs(data, args.target)
    except Exception as exc:  # the compiled table is worth keeping without the faithful side
        report["faithful_error"] = f"{type(exc).__name__}: {exc}"
        runs = {}
        print("faithful side failed:", report["faithful_error"], flush=True)
    print(f"faithful {args.target} as Triton {version} compiles (rn, lo, hi) in {time.time() - t0:.1f} s", flush=True)
    worst = 0
    for op in what:
        row = report["ops"].setdefault(op, {"what": what[op]})
        if op in runs:
            row["faithful_bracket_wide"] = int((runs[op]["lo"] != runs[op]["hi"]).sum())
        if op in compiled and runs:
            cmp = compare(op, compiled[op], runs[op], data)
            row["faithful_here"] = cmp
            flag = ("IDENTICAL" if cmp["identical"] == cmp["checked"] else
                    "BRACKETED" if cmp["outside"] == 0 else f"OUTSIDE {cmp['outside']}")
            worst = max(worst, cmp["outside"])
            print(f"{op:18} {cmp['checked']:6} identical {cmp['identical']:6} (bits {cmp['identical_bits']:6}) "
                  f"{flag:14} {' '.join(row.get('ptx', []))[:80]}", flush=True)
    if args.lowering:
        report["lowering"] = {"triton": version, "targets": lowering([t for t in args.lowering.split(",") if t])}
    write(args.json, report)
    print(f"wrote {args.json} in {time.time() - started:.0f} s"
          + (f"; {worst} results outside their bracket in the worst op" if compiled and runs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

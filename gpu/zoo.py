"""The zoo on a CUDA machine: compiled Triton against fp8check's faithful sm90 interpreter, byte for byte.

    PYTHONPATH=.:<carried packages> python gpu/zoo.py --json zoo-gpu.json [--max-examples 5] [--no-check]

Two parts, for every zoo entry whose package is importable here:

1. **compare** (the zoo re-measured): every entry with both a
   ``faithful:sm90`` and a ``compiled`` mode runs its adapter both ways on the
   same fixed inputs (per dtype: random rows of several widths, a row of
   every special value (NaN of both signs, +-Inf, +-0, subnormals, the fp8
   bounds and ties), a zero row, a row holding one +Inf, the entry's known
   issues' own inputs), the compiled kernel on the GPU and the faithful
   interpreter on the CPU. Every code and scale byte is compared; a
   difference is listed with its input and both results (hex). This is
   what tells whether a ``faithful:sm90`` row of docs/zoo.md describes the
   GPU or only the interpreter.
2. **check**: every entry in its GPU modes (compiled Triton, torch on cuda)
   through its claimed recipe, as ``fp8check survey --zoo`` does on the CPU.

Prints a table and writes the results as JSON. Carry: see docs/zoo.md
("GPU"): the wheels in ``.whl/`` and the package trees ``gpu/zoo_carry.py``
builds in ``.whl/trees`` (``gpu/run_all.sh`` puts both on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def special_row() -> list[float]:
    nan = float("nan")
    inf = float("inf")
    return [nan, -nan, inf, -inf, 0.0, -0.0, 1e-45, -1e-45, 1.17549435e-38, 448.0, -448.0, 464.0, 480.0,
            240.0, 224.0, 57344.0, 1.0, -1.0, 0.5, 3.0625, 2.734375, 1.125, 0.56640625, 1e30, -1e30, 3.4e38]


def quantize_inputs(entry: Any, dtype: str) -> list[tuple[str, Any]]:
    """(name, float32 numpy array) pairs: what both modes get, in ``dtype``."""
    import numpy as np

    from fp8check.quantizers.cases import to_dtype

    rng = np.random.default_rng(2026)
    out = []
    for rows, cols, scale in ((4, 128, 1.0), (7, 256, 30.0), (33, 512, 1e-3), (16, 1024, 300.0), (3, 2048, 1.0)):
        out.append((f"randn {rows}x{cols} x{scale:g}", (rng.standard_normal((rows, cols)) * scale).astype(np.float32)))
    sp = np.array(special_row(), dtype=np.float32)
    width = 256
    specials = np.zeros((len(sp), width), dtype=np.float32)
    for i, v in enumerate(sp):  # each special value in its own row (and group), beside ordinary values
        specials[i] = rng.standard_normal(width).astype(np.float32)
        specials[i, i % width] = v
    out.append(("one special value per row", specials))
    out.append(("zero rows", np.zeros((3, 256), dtype=np.float32)))
    for known in entry.known:
        if known.example is not None:
            for case in known.example():
                out.append((f"known: {case.name}", np.asarray(case.x, dtype=np.float32)))
    return [(name, to_dtype(x, dtype)) for name, x in out]


def cast_inputs() -> list[tuple[str, Any]]:
    import numpy as np

    everything = np.arange(0, 1 << 16, dtype=np.uint32) << np.uint32(16)  # every bfloat16 value, as float32
    rng = np.random.default_rng(2026)
    rand = rng.integers(0, 1 << 32, size=1 << 16, dtype=np.uint64).astype(np.uint32)
    return [("every bfloat16 value", everything.view(np.float32).reshape(256, 256)),
            ("random float32 bits", rand.view(np.float32).reshape(256, 256)),
            ("specials", np.array(special_row(), dtype=np.float32).reshape(1, -1))]


def _bytes(t: Any) -> Any:
    import numpy as np
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype.is_floating_point and t.element_size() == 1:
        t = t.view(torch.uint8)
    return t.reshape(-1).view(torch.uint8).numpy().astype(np.uint8) if t.element_size() == 1 else t.reshape(-1)


def _same(a: Any, b: Any) -> tuple[int, list[int]]:
    """(differing elements, their first indices), bits compared (NaN payloads count)."""
    import numpy as np
    import torch

    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.shape != b.shape:
        return -1, []
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    x, y = a.view(width).reshape(-1).numpy(), b.view(width).reshape(-1).numpy()
    diff = np.flatnonzero(x != y)
    return int(diff.size), diff[:5].tolist()


def _bracket_ends(faithful: Any, xt: Any) -> list[tuple]:
    """The faithful kernel's outputs at the low and high end of the target's bounded instructions."""
    try:
        from fp8check.triton import ops
    except ImportError:
        return []
    out = []
    for mode in ("lo", "hi"):
        with ops.bracket(mode):
            got = faithful(xt.clone())
        out.append(got if isinstance(got, tuple) else (got,))
    return out


def _within(g: Any, c: Any, ends: list[Any]) -> int:
    """How many of the elements where compiled ``g`` differs from faithful ``c`` equal one of the bracket
    ends (codes) or lie between them (float scales): differences the target's documented bounds allow."""
    import numpy as np
    import torch

    g, c = g.detach().cpu().contiguous(), c.detach().cpu().contiguous()
    if not ends or g.shape != c.shape:
        return 0
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[g.element_size()]
    gb, cb = g.view(width).reshape(-1).numpy(), c.view(width).reshape(-1).numpy()
    diff = gb != cb
    ok = np.zeros(diff.shape, bool)
    if g.element_size() == 1 or not g.dtype.is_floating_point:
        for e in ends:
            ok |= gb == e.detach().cpu().contiguous().view(width).reshape(-1).numpy()
    else:
        gv = g.float().reshape(-1).numpy()
        lo, hi = (e.detach().cpu().float().reshape(-1).numpy() for e in ends[:2])
        ok = (gv >= np.minimum(lo, hi)) & (gv <= np.maximum(lo, hi))
    return int(np.count_nonzero(diff & ok))


def compare_entry(entry: Any, max_listed: int = 5, cpu_dry_run: Any = False) -> dict[str, Any]:
    """The entry's compiled kernel (cuda) against its faithful:sm90 one (cpu) on the same inputs.
    ``cpu_dry_run``: no GPU; the "compiled" side is the faithful interpreter run one program at a time
    (the plumbing checked on a CPU, and the batched interpreter against the stock program loop)."""
    import contextlib

    import torch

    from fp8check import zoo

    factory = zoo._factory(entry)
    row: dict[str, Any] = {"id": entry.id, "package": entry.package, "version": zoo.package_version(entry),
                           "inputs": 0, "elements": 0, "code_diffs": 0, "scale_diffs": 0, "examples": []}
    try:
        if cpu_dry_run:
            from fp8check.triton import batched

            one_by_one = factory(mode="faithful:sm90")

            def compiled(x: Any) -> Any:
                if cpu_dry_run == "lo":  # a stand-in GPU whose divisions land at the low end of their bound
                    from fp8check.triton import ops

                    with ops.bracket("lo"):
                        return one_by_one(x)
                with batched.sequential():
                    return one_by_one(x)
        else:
            compiled = factory(mode="compiled")
        faithful = factory(mode="faithful:sm90")
    except Exception as exc:  # an adapter that cannot be built here: say why, go on
        row["status"] = f"unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        return row
    sets = []
    if entry.kind == "cast":
        sets = [(name, x, "float32") for name, x in cast_inputs()]
    else:
        for dtype in entry.dtypes:
            sets += [(name, x, dtype) for name, x in quantize_inputs(entry, dtype)]
    for name, x, dtype in sets:
        xt = torch.from_numpy(x.copy())
        if dtype == "bfloat16":
            xt = xt.to(torch.bfloat16)  # exact: the values are bfloat16 values already
        try:
            got_gpu = compiled(xt if cpu_dry_run else xt.cuda())
            got_cpu = faithful(xt.clone())
        except Exception as exc:
            row["examples"].append({"input": f"{name} ({dtype})", "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        gpu = got_gpu if isinstance(got_gpu, tuple) else (got_gpu,)
        cpu = got_cpu if isinstance(got_cpu, tuple) else (got_cpu,)
        row["inputs"] += 1
        row["elements"] += int(xt.numel())
        ends = None
        for part, (g, c) in enumerate(zip(gpu, cpu)):
            n, first = _same(g, c)
            key = "code_diffs" if part == 0 else "scale_diffs"
            row[key] += max(n, 0)
            if n > 0:
                # where the target's unspecified instructions (div.full.f32, .approx) may land: the faithful run at
                # the low and high end of their documented bounds (fp8check.triton.ops.bracket)
                if ends is None and cpu_dry_run is not True:
                    ends = _bracket_ends(faithful, xt)
                explained = _within(g, c, [e[part] for e in ends] if ends else [])
                row["bracketed_" + key] = row.get("bracketed_" + key, 0) + explained
                row["unexplained_" + key] = row.get("unexplained_" + key, 0) + n - explained
            if n and len(row["examples"]) < max_listed:
                gb, cb = _bytes(g), _bytes(c)
                ex = {"input": f"{name} ({dtype})", "part": "codes" if part == 0 else "scales", "count": n}
                i = first[0]
                flat = xt.float().reshape(-1)
                ex["at"] = i
                if part == 0 and i < flat.numel():
                    ex["x"] = float(flat[i])
                ex["compiled"] = hex(int(gb[i])) if gb.dtype.itemsize == 1 else repr(gb[i].item())
                ex["faithful"] = hex(int(cb[i])) if cb.dtype.itemsize == 1 else repr(cb[i].item())
                if part == 1:
                    ex["compiled_bits"] = hex(int(g.detach().cpu().reshape(-1)[i].view(torch.int32)) & 0xFFFFFFFF)
                    ex["faithful_bits"] = hex(int(c.detach().cpu().reshape(-1)[i].view(torch.int32)) & 0xFFFFFFFF)
                row["examples"].append(ex)
            elif n < 0 and len(row["examples"]) < max_listed:
                row["examples"].append({"input": f"{name} ({dtype})", "part": "codes" if part == 0 else "scales",
                                        "shape": f"compiled {tuple(g.shape)} vs faithful {tuple(c.shape)}"})
    row["status"] = "identical" if not (row["code_diffs"] or row["scale_diffs"]) else "differs"
    return row


def main(argv: Any = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default="zoo-gpu.json")
    p.add_argument("--max-examples", type=int, default=5)
    p.add_argument("--budget", type=float, default=170.0, help="seconds; stop starting entries after this")
    p.add_argument("--entry", action="append", default=[], help="only this entry id (repeatable)")
    p.add_argument("--package", action="append", default=[], help="only this package's entries (repeatable)")
    p.add_argument("--no-check", action="store_true", help="only the compiled-vs-faithful comparison")
    p.add_argument("--no-compare", action="store_true", help="only the checks against the claims")
    p.add_argument("--cpu-dry-run", nargs="?", const=True, default=False, choices=[True, "lo"],
                   help="no GPU: compare the faithful interpreter batched against itself one program at a time "
                        "(checks this script's plumbing); =lo: against itself at the low end of every bounded "
                        "instruction (every difference must count as bracketed)")
    args = p.parse_args(argv)
    import torch

    from fp8check import zoo
    from fp8check.results import environment

    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.time()
    chosen = [e for e in zoo.installed() if (not args.entry or e.id in args.entry)
              and (not args.package or e.package in args.package)]
    compare, rows = [], []
    if not args.no_compare and (device == "cuda" or args.cpu_dry_run):
        print("== compiled sm90 against faithful:sm90, the same inputs (differing elements)", flush=True)
        for entry in chosen:
            if "compiled" not in entry.modes or "faithful:sm90" not in entry.modes:
                continue
            if time.time() - started > args.budget:
                compare.append({"id": entry.id, "status": "skipped: time budget"})
                continue
            t = time.time()
            r = compare_entry(entry, cpu_dry_run=args.cpu_dry_run)
            r["seconds"] = round(time.time() - t, 1)
            compare.append(r)
            print(f"{entry.id:45} {r.get('status', '?'):10} codes {r.get('code_diffs', 0):6} "
                  f"(unexplained {r.get('unexplained_code_diffs', 0)}) scales {r.get('scale_diffs', 0):5} "
                  f"(unexplained {r.get('unexplained_scale_diffs', 0)}) in {r.get('elements', 0):8} elements, "
                  f"{r['seconds']} s", flush=True)
            for ex in r.get("examples", []):
                print(f"    {ex}", flush=True)
    if not args.no_check:
        print("== each entry in its GPU modes against its claim", flush=True)
        for entry in chosen:
            for mode in entry.modes_for(device):
                if time.time() - started > args.budget:
                    rows.append({"id": entry.id, "mode": mode, "status": "skipped: time budget"})
                    continue
                r = zoo.run_entry(entry, mode=mode, device=device, max_examples=args.max_examples)
                d = r.to_dict()
                rows.append(d)
                print(f"{entry.id:45} {mode:14} {r.version or '-':10} {r.verdict:28} {d['categories']} "
                      f"{r.detail[:80]}", flush=True)
                if r.status == "diverges":  # beyond the entry's known issues: what the check printed, to reduce
                    for check in r.checks:
                        if not check.passed:
                            print("\n".join("    " + line for line in str(check).splitlines()[:40]), flush=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump({"environment": environment(), "device": device, "compare": compare, "results": rows}, f,
                  indent=1, default=str)
    print(f"wrote {len(compare)} comparisons and {len(rows)} checks to {args.json} in {time.time() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

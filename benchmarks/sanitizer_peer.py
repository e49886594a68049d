"""fp8check's memory-safe interpreter beside Triton-Sanitizer (triton-viz), on the same planted kernels.

    python benchmarks/sanitizer_peer.py --tool fp8check [--json OUT]
    PEER_VENV/bin/python benchmarks/sanitizer_peer.py --tool triton-viz [--json OUT]

Each tool runs the launchers of ``tests/triton_faithful/planted/planted_kernels.py`` (a false
``tl.assume``, a launcher stride bug on a row-padded input, an uninitialised read, a write-write race,
one bad autotune config among three, and a clean autotuned kernel) on the same fixed inputs, in one
process, and prints per kernel what it reported (kind, kernel line), whether the launcher returned, and
the wall time of the launches (after one warm-up launch of a small input, so that neither side's first
compile/rewrite counts). triton-viz is not a dependency of fp8check: install it in a throwaway venv
(``pip install triton-viz numpy torch``) and run this script with that venv's python, the source tree on
``PYTHONPATH`` is not needed for that side.

- ``fp8check``: ``fp8check.triton.interpreting()`` + ``faithful("sm90")`` + ``sanitizer.collect()``;
  an autotuned launcher is run once per config (``launch.each_config``), as a check runs it.
- ``fp8check-unchecked``: the same without the sanitizer installed (what the checks cost);
- ``stock``: Triton's own interpreter (``TRITON_INTERPRET=1``), nothing checked: the floor (an
  autotuned launcher is launched 3 times, once per config's worth of work; a multi-config autotuner
  needs a GPU driver there, so those rows raise);
- ``triton-viz``: ``triton.jit``/``triton.autotune`` patched as its ``triton-sanitizer`` command patches
  them, with ``Sanitizer(abort_on_error=False)`` so that one error does not end the run; its autotune
  support runs every config once while "benchmarking" the first call of each key.

Timings are wall seconds on whatever machine runs it (shared machines are noisy): compare the two
columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLANTED = HERE.parent / "tests" / "triton_faithful" / "planted"

# name, the inputs its launcher gets (shape, row padding of the storage)
CASES = [
    ("assume_cast", (4099,), 0),
    ("stride_cast", (65, 131), 3),  # a slice of a (65, 134) matrix: row stride 134
    ("uninit_cast", (4099,), 0),
    ("racy_tensorwise", (4099,), 0),
    ("autotuned_cast", (4099,), 0),
    ("good_autotuned_cast", (4099,), 0),
    ("stride_cast", (512, 1024), 0),  # contiguous: no fault; the time of a fault-free 512x1024 run
    ("uninit_cast", (1 << 20,), 0),  # 2 x 1,024 programs, one uninitialised element: the time of a larger run
]
CLEAN = {("good_autotuned_cast", (4099,), 0), ("stride_cast", (512, 1024), 0)}


def _call(fn, x, out_dtype: str):
    """``fn(x)``, with ``out_dtype`` where the launcher takes one (the casts)."""
    import inspect

    import torch

    if out_dtype != "fp8" and "out_dtype" in inspect.signature(fn).parameters:
        return fn(x, out_dtype=getattr(torch, out_dtype))
    return fn(x)


def _label(name: str, shape: tuple[int, ...], pad: int) -> str:
    return f"{name} {'x'.join(map(str, shape))}{' padded' if pad else ''}"


def _stock(names: list[str], out_dtype: str) -> dict:
    """Triton's own interpreter (TRITON_INTERPRET=1), no checks: the floor both tools add to."""
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(PLANTED))
    import planted_kernels as pk

    out = {}
    for name, shape, pad in CASES:
        if name not in names:
            continue
        fn = getattr(pk, name)
        name = _label(name, shape, pad)
        try:
            _call(fn, _input((16,), 0), out_dtype)
        except Exception:  # noqa: BLE001
            pass
        t0 = time.perf_counter()
        error = ""
        try:
            for _ in range(3 if "autotuned" in name else 1):  # as many launches as a run per config
                _call(fn, _input(shape, pad), out_dtype)
        except Exception as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {exc}"[:300]
        out[name] = {"seconds": time.perf_counter() - t0, "returned": not error, "error": error, "configs": 0,
                     "findings": []}
    return out


def _input(shape: tuple[int, ...], pad: int):
    import torch

    g = torch.Generator().manual_seed(0)
    if pad:
        wide = torch.randn(shape[0], shape[1] + pad, generator=g) * 3
        return wide[:, : shape[1]]
    return torch.randn(shape, generator=g) * 3


def _fp8check_unchecked(names: list[str], out_dtype: str) -> dict:
    """fp8check's faithful interpreter with the sanitizer not installed: what the checks cost."""
    from fp8check.triton import sanitizer

    sanitizer.install = sanitizer.uninstall = lambda: None
    return _fp8check(names, out_dtype, clean_only=True)  # a fault performed unchecked can crash the process


def _fp8check(names: list[str], out_dtype: str, clean_only: bool = False) -> dict:
    import fp8check.triton as ft
    from fp8check.triton import launch, sanitizer

    sys.path.insert(0, str(PLANTED))
    import planted_kernels as pk

    out = {}
    for name, shape, pad in CASES:
        if name not in names or (clean_only and (name, shape, pad) not in CLEAN):
            continue
        fn = getattr(pk, name)
        name = _label(name, shape, pad)
        with ft.interpreting(), ft.faithful("sm90"):
            _call(fn, _input((16,), 0), out_dtype)  # warm-up

        def once(fn=fn, shape=shape, pad=pad):
            with sanitizer.collect() as found, ft.interpreting(), ft.faithful("sm90"):
                _call(fn, _input(shape, pad), out_dtype)
            return found.faults

        t0 = time.perf_counter()
        error = ""
        try:
            runs = launch.each_config(once)
        except Exception as exc:  # noqa: BLE001 - what the tool does with the kernel is the measurement
            runs, error = [], f"{type(exc).__name__}: {exc}"[:300]
        seconds = time.perf_counter() - t0
        found = sorted({(f.kind, f.site, f.config) for _, faults in runs for f in faults})
        out[name] = {"seconds": seconds, "returned": not error, "error": error, "configs": len(runs),
                     "findings": [{"kind": k, "site": s, "config": c} for k, s, c in found]}
    return out


def _triton_viz(names: list[str], out_dtype: str) -> dict:
    import triton
    from triton_viz import trace
    from triton_viz.clients import Sanitizer
    from triton_viz.wrapper import create_patched_autotune, create_patched_jit

    clients = []

    def wrap(kernel):
        client = Sanitizer(abort_on_error=False)
        clients.append(client)
        return trace(client=client)(kernel)

    triton.jit = create_patched_jit(wrap)
    triton.language.jit = triton.jit
    triton.autotune = create_patched_autotune(wrap)
    import triton.runtime.interpreter as interp

    interp.jit = triton.jit
    sys.path.insert(0, str(PLANTED))
    import planted_kernels as pk

    out = {}
    for name, shape, pad in CASES:
        if name not in names:
            continue
        fn = getattr(pk, name)
        name = _label(name, shape, pad)
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                _call(fn, _input((16,), 0), out_dtype)  # warm-up
            except Exception:  # noqa: BLE001
                pass
        for c in clients:
            c.records.clear() if hasattr(c, "records") else None
        buf = io.StringIO()
        t0 = time.perf_counter()
        error = ""
        try:
            with contextlib.redirect_stdout(buf):
                _call(fn, _input(shape, pad), out_dtype)
        except BaseException as exc:  # noqa: BLE001 - SystemExit included: what the tool does is measured
            error = f"{type(exc).__name__}: {exc}"[:300]
            if os.environ.get("PEER_TRACEBACK"):
                import traceback

                traceback.print_exc()
        seconds = time.perf_counter() - t0
        found = set()
        for c in clients:
            for r in getattr(c, "records", []):
                tb = (getattr(r, "user_code_tracebacks", None) or [None])[-1]
                site = f"{Path(tb.filename).name}:{tb.lineno}" if tb is not None else "?"
                found.add(("out_of_bounds", site, ""))
        text = buf.getvalue()
        for m in re.finditer(r"(?i)(race|uninitiali[sz]ed|assum)", text):
            found.add((m.group(1).lower(), "?", ""))
        out[name] = {"seconds": seconds, "returned": not error, "error": error, "configs": 0,
                     "findings": [{"kind": k, "site": s, "config": c} for k, s, c in sorted(found)]}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tool", choices=("fp8check", "fp8check-unchecked", "triton-viz", "stock"), required=True)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--only", help="comma-separated kernel names")
    p.add_argument("--out-dtype", default="fp8", choices=("fp8", "float16", "float32"),
                   help="what the casts write (fp8: as declared; float16: no FP8 conversion in the kernels)")
    a = p.parse_args()
    names = a.only.split(",") if a.only else [c[0] for c in CASES]
    run = {"fp8check": _fp8check, "fp8check-unchecked": _fp8check_unchecked, "triton-viz": _triton_viz,
           "stock": _stock}[a.tool]
    results = run(names, a.out_dtype)
    for name, r in results.items():
        found = "; ".join(f"{f['kind']} {f['site']}" + (f" [{f['config']}]" if f["config"] else "")
                          for f in r["findings"]) or "nothing"
        status = "returned" if r["returned"] else f"raised {r['error'][:80]}"
        print(f"{a.tool:18} {a.out_dtype:7} {name:32} {r['seconds']:7.2f} s  {status}: {found}")
    if a.json:
        Path(a.json).write_text(json.dumps({"tool": a.tool, "out_dtype": a.out_dtype, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Pin the faithful Triton interpreter's ``sm90`` target on a CUDA GPU.

    PYTHONPATH=. python gpu/triton_faithful.py --json out/triton-faithful.json [--chunk-log2 28]

Compiles the same cast kernels for the GPU and compares bytes:

1. downcasts, compiled vs fp8check's reference under the sm90 target
   (``fp8check.triton.encode_for_target``'s profile, computed on the GPU by
   ``reference.encode_tensor``) on EVERY float32 input (2^32, in chunks),
   every float16 and bfloat16 input, for e4m3fn and e5m2 (RNE) and
   float32 -> e5m2 with ``fp_downcast_rounding="rtz"``;
2. the same kernels in the faithful interpreter (target sm90, on the CPU)
   vs compiled, directly, on the 16-bit sweeps and fp8check's float32 sweep
   set (``inputs.sweep_bits``);
3. upcasts of all 256 codes to float32/float16/bfloat16: compiled vs the
   faithful interpreter (NaN by class, -0 distinct);
4. quantizer kernels on the recipe inputs: fp8check's own Triton tensorwise
   quantizer and torchao's per-group Triton scale kernels (when torchao is
   importable), compiled vs faithful interpreter (the interpreted torchao
   run is a child process started with TRITON_INTERPRET=1).

Prints a table and writes JSON (to --json). Works with Triton 3.6, 3.8 and
3.9 (the versions the faithful interpreter supports). Without CUDA the
compiled parts are reported skipped (a smoke run of the script).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

REPORT: dict[str, Any] = {}
JSON_PATH: Path | None = None
TORCH_FMT = {"e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _save() -> None:
    if JSON_PATH is not None:
        JSON_PATH.parent.mkdir(parents=True, exist_ok=True)
        JSON_PATH.write_text(json.dumps(REPORT, indent=1, default=str) + "\n")


def _row(section: str, name: str, checked: int, differ: int, seconds: float, note: str = "") -> None:
    REPORT.setdefault(section, {})[name] = {"checked": checked, "differ": differ, "seconds": round(seconds, 2),
                                            "note": note}
    verdict = "IDENTICAL" if differ == 0 else f"DIFFER {differ:,}"
    print(f"{section:11} {name:34} {checked:>14,} {verdict:>16} {seconds:7.1f} s {note}", flush=True)
    _save()


def _kernels() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def cast_rtz_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty, fp_downcast_rounding="rtz"), mask=mask)

    @triton.jit
    def tensorwise_kernel(x_ptr, y_ptr, d_ptr, n, FMAX: tl.constexpr, BLOCK: tl.constexpr, RN: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        ax = tl.abs(x)
        amax = tl.max(tl.where(ax < float("inf"), ax, 0.0), axis=0)
        if RN:  # correctly rounded division
            d = tl.div_rn(tl.maximum(amax, 1e-12), FMAX)
            y = tl.div_rn(x, tl.full([BLOCK], 1.0, tl.float32) * d)
        else:  # `/`: div.full.f32 on NVIDIA (triton-lang/triton#10661)
            d = tl.maximum(amax, 1e-12) / FMAX
            y = x / d
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(d_ptr, d)

    return cast_kernel, cast_rtz_kernel, tensorwise_kernel


def _launch(kernel: Any, x: Any, y: Any, interpret: bool) -> None:
    import triton

    import fp8check.triton as ft

    n = x.numel()
    block = 1024 if not interpret else max(16, min(1 << 16, 1 << max(0, (n - 1).bit_length())))
    grid = (triton.cdiv(n, block),)
    if interpret:
        ft.interpreted(kernel)[grid](x.reshape(-1), y.reshape(-1), n, BLOCK=block)
    else:
        kernel[grid](x.reshape(-1), y.reshape(-1), n, BLOCK=block)


def downcasts_everywhere(chunk_log2: int) -> None:
    import torch

    import fp8check.triton as ft
    from fp8check import reference

    cast_kernel, cast_rtz_kernel, _ = _kernels()
    target = ft.targets.for_triton(ft.get_target("sm90"), ft.triton_version())
    cells = [(s, f, "rtne") for s in ("float32", "float16", "bfloat16") for f in ("e4m3fn", "e5m2")]
    cells.append(("float32", "e5m2", "rtz"))
    for source, fmt, rounding in cells:
        entry = target.downcast(source, fmt, rounding)
        kernel = cast_rtz_kernel if rounding == "rtz" else cast_kernel
        dtype = getattr(torch, TORCH_FMT[fmt])
        t0 = time.time()
        total, differ = 0, 0
        width = 32 if source == "float32" else 16
        step = 1 << min(chunk_log2, width)
        first = ""
        for start in range(0, 1 << width, step):
            bits = torch.arange(start, start + step, dtype=torch.int64, device="cuda")
            if width == 32:
                x = bits.to(torch.int32).view(torch.float32)
            else:
                x = bits.to(torch.int16).view(getattr(torch, source))
            y = torch.empty(x.shape, dtype=dtype, device="cuda")
            _launch(kernel, x, y, interpret=False)
            got = y.view(torch.uint8)
            want = reference.encode_tensor(x, fmt, entry.profile)
            bad = got != want
            n_bad = int(bad.sum())
            if n_bad and not first:
                i = int(torch.nonzero(bad)[0])
                first = f"first: input {int(bits[i]) & ((1 << width) - 1):#x} got {int(got[i]):#04x} want {int(want[i]):#04x}"
            differ += n_bad
            total += x.numel()
        torch.cuda.synchronize()
        _row("compiled", f"{source}->{fmt}/{rounding}", total, differ, time.time() - t0,
             f"vs reference under {entry.profile.name}; {first}")


def interpreter_vs_compiled() -> None:
    import torch

    import fp8check.triton as ft
    from fp8check import inputs

    cast_kernel, cast_rtz_kernel, _ = _kernels()
    cells = [(s, f, "rtne") for s in ("float32", "float16", "bfloat16") for f in ("e4m3fn", "e5m2")]
    cells.append(("float32", "e5m2", "rtz"))
    for source, fmt, rounding in cells:
        kernel = cast_rtz_kernel if rounding == "rtz" else cast_kernel
        dtype = getattr(torch, TORCH_FMT[fmt])
        t0 = time.time()
        bits = inputs.sweep_bits(source)
        arr = inputs.from_bits(bits, source)
        x = (torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16) if source == "bfloat16"
             else torch.from_numpy(np.ascontiguousarray(arr)))
        y = torch.empty(x.shape, dtype=dtype, device="cuda")
        _launch(kernel, x.cuda(), y, interpret=False)
        compiled = y.view(torch.uint8).cpu().numpy()
        yi = torch.empty(x.shape, dtype=dtype)
        with ft.faithful("sm90"):
            _launch(kernel, x, yi, interpret=True)
        interp = yi.view(torch.uint8).numpy()
        bad = np.flatnonzero(compiled != interp)
        note = "" if not bad.size else (f"first: input {int(bits[bad[0]]):#x} compiled {compiled[bad[0]]:#04x} "
                                        f"interpreted {interp[bad[0]]:#04x}")
        _row("interp", f"{source}->{fmt}/{rounding}", int(bits.size), int(bad.size), time.time() - t0, note)
    # upcasts: all 256 codes
    _, _, _ = _kernels()
    for fmt in ("e4m3fn", "e5m2"):
        for dest in ("float32", "float16", "bfloat16"):
            t0 = time.time()
            codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(getattr(torch, TORCH_FMT[fmt]))
            y = torch.empty(256, dtype=getattr(torch, dest), device="cuda")
            _launch(cast_kernel, codes.cuda(), y, interpret=False)
            yi = torch.empty(256, dtype=getattr(torch, dest))
            with ft.faithful("sm90"):
                _launch(cast_kernel, codes, yi, interpret=True)
            a, b = y.float().cpu().numpy(), yi.float().numpy()
            same = (np.isnan(a) & np.isnan(b)) | (a.view(np.uint32) == b.view(np.uint32))
            bad = np.flatnonzero(~same)
            note = "" if not bad.size else f"first: code {int(bad[0]):#04x} compiled {a[bad[0]]!r} interpreted {b[bad[0]]!r}"
            _row("upcast", f"{fmt}->{dest}", 256, int(bad.size), time.time() - t0, note)


def quantizers(max_examples: int) -> None:
    import torch
    import triton

    import fp8check.triton as ft
    from fp8check import quantizers
    from fp8check.quantizers.edge_cases import edge_cases

    _, _, tensorwise_kernel = _kernels()
    for (fmt, fmax), rn in ((f, rn) for f in (("e4m3fn", 448.0), ("e5m2", 57344.0)) for rn in (False, True)):
        recipe = quantizers.get("tensorwise", fmt)
        t0 = time.time()
        total, differ, note, noted = 0, 0, "", False
        for case in edge_cases(recipe)[:40]:
            x = torch.from_numpy(np.ascontiguousarray(case.x)).to(getattr(torch, case.dtype)).reshape(-1)
            n = x.numel()
            if n == 0:
                continue
            block = 1 << max(4, (n - 1).bit_length())
            outs = []
            for interpret in (False, True):
                y = torch.empty(n, dtype=getattr(torch, TORCH_FMT[fmt]), device="cpu" if interpret else "cuda")
                d = torch.empty(1, dtype=torch.float32, device=y.device)
                xi = x if interpret else x.cuda()
                if interpret:
                    with ft.watch() as w, ft.faithful("sm90"):
                        ft.interpreted(tensorwise_kernel)[(1,)](xi, y, d, n, FMAX=fmax, BLOCK=block, RN=rn)
                    noted = noted or bool(w.division_note)
                else:
                    tensorwise_kernel[(1,)](xi, y, d, n, FMAX=fmax, BLOCK=block, RN=rn)
                outs.append((y.view(torch.uint8).cpu().numpy(), d.cpu().numpy().view(np.uint32)))
            bad = int((outs[0][0] != outs[1][0]).sum()) + int((outs[0][1] != outs[1][1]).sum())
            if bad and not note:
                note = f"first case: {case.name}"
            differ += bad
            total += n + 1
        how = "tl.div_rn" if rn else "x / d"
        note = (note + "; " if note else "") + ("division noted" if noted else "no division note")
        _row("quantizer", f"tensorwise/{fmt} {how}", total, differ, time.time() - t0, note)
    del triton
    torchao_per_group(max_examples)


_CHILD = r"""
import os, sys, json, numpy as np
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "gpu")]
import torch
import fp8check.triton as ft
from fp8check.quantizers import adapters
from torchao_triton_probe import _cases
cases = json.loads(sys.argv[2])
out = {}
for which in ("rowwise", "colwise"):
    fn = getattr(adapters, f"torchao_triton_group_{which}")("e4m3fn", interpret=True)
    for kind in ("aligned", "unaligned"):
        for i, case in enumerate(_cases(kind, which, np.random.default_rng(0))):
            x = torch.from_numpy(np.ascontiguousarray(case.x)).to(getattr(torch, case.dtype))
            with ft.watch() as w, ft.faithful("sm90"):
                q, s = fn(x, torch.from_numpy(case.offsets.astype(np.int32)))
            out[f"{which}/{kind}/{i}"] = [q.view(torch.uint8).numpy().tolist(), s.float().numpy().view(np.uint32).tolist()]
            if w.division_note:
                out.setdefault("divisions_noted", []).append(which)
print(json.dumps(out))
"""


def torchao_per_group(max_examples: int) -> None:
    import torch

    from fp8check.quantizers import adapters
    from torchao_triton_probe import _cases

    t0 = time.time()
    try:
        adapters.load_torchao_jagged_kernels(interpret=False)
    except Exception as exc:
        print(f"quantizer   torchao per-group: skipped: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        REPORT.setdefault("quantizer", {})["torchao per-group"] = {"skipped": str(exc).splitlines()[0]}
        _save()
        return
    root = str(Path(__file__).resolve().parent.parent)
    child = subprocess.run([sys.executable, "-c", _CHILD, root, "[]"], capture_output=True, text=True, timeout=240,
                           env=dict(os.environ, TRITON_INTERPRET="1"))
    if child.returncode != 0:
        tail = (child.stderr.strip().splitlines() or ["?"])[-1]
        print(f"quantizer   torchao per-group: interpreted side failed: {tail}")
        REPORT.setdefault("quantizer", {})["torchao per-group"] = {"error": tail}
        _save()
        return
    interp = json.loads(child.stdout.strip().splitlines()[-1])
    for which in ("rowwise", "colwise"):
        fn = getattr(adapters, f"torchao_triton_group_{which}")("e4m3fn", interpret=False)
        noted = which in interp.get("divisions_noted", [])
        for kind in ("aligned", "unaligned"):  # a row each: the unaligned cases read and write out of bounds
            total, differ, note = 0, 0, ""
            for i, case in enumerate(_cases(kind, which, np.random.default_rng(0))):
                x = torch.from_numpy(np.ascontiguousarray(case.x)).to(getattr(torch, case.dtype)).cuda()
                q, s = fn(x, torch.from_numpy(case.offsets.astype(np.int32)).cuda())
                got_q = q.view(torch.uint8).cpu().numpy()
                got_s = s.float().cpu().numpy().view(np.uint32)
                want_q, want_s = interp[f"{which}/{kind}/{i}"]
                bad = int((got_q != np.array(want_q, dtype=np.uint8)).sum()) + int(
                    (got_s != np.array(want_s, dtype=np.uint32)).sum())
                if bad and not note:
                    note = f"first: case {i}"
                differ += bad
                total += got_q.size + got_s.size
            past = sum(sum(o["bytes_past_end"]) for o in fn.overruns)
            fn.overruns.clear()
            note = "; ".join(x for x in (note, f"{past} bytes written past its buffers" if past else "",
                                         "division noted" if noted else "no division note") if x)
            _row("quantizer", f"torchao per-group {which}/{kind}", total, differ, time.time() - t0, note)


def main(argv: list[str] | None = None) -> int:
    global JSON_PATH
    p = argparse.ArgumentParser(prog="python gpu/triton_faithful.py")
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--chunk-log2", type=int, default=28, help="float32 inputs per compiled launch: 2^N")
    p.add_argument("--max-examples", type=int, default=10)
    args = p.parse_args(argv)
    JSON_PATH = args.json
    try:
        import torch
        import triton

        import fp8check.triton as ft
    except Exception as exc:
        print(f"skipped: {type(exc).__name__}: {exc}")
        return 0
    REPORT["environment"] = {"torch": torch.__version__, "triton": triton.__version__,
                             "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    try:
        ft.check_triton_version()
    except ft.TritonVersionError as exc:
        print(f"skipped: {exc}")
        REPORT["skipped"] = str(exc)
        _save()
        return 0
    print(f"{'section':11} {'conversion':34} {'checked':>14} {'verdict':>16} {'time':>9}")
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (the compiled side needs one)")
        REPORT["skipped"] = "no CUDA device"
        _save()
        return 0
    for step in (lambda: downcasts_everywhere(args.chunk_log2), interpreter_vs_compiled,
                 lambda: quantizers(args.max_examples)):
        try:
            step()
        except Exception as exc:  # one broken section must not hide the others
            print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            REPORT.setdefault("errors", []).append(f"{type(exc).__name__}: {exc}")
            _save()
    rows = [r for sec in REPORT.values() if isinstance(sec, dict) for r in sec.values() if isinstance(r, dict)]
    differ = sum(r.get("differ", 0) for r in rows if "division noted" not in str(r.get("note", "")))
    noted = sum(r.get("differ", 0) for r in rows if "division noted" in str(r.get("note", "")))
    print(f"\n{'ALL IDENTICAL' if differ == 0 else f'{differ:,} bytes differ'}"
          + (f" ({noted:,} more where the interpreter noted float32 division it does not model)" if noted else ""))
    _save()
    return 0


if __name__ == "__main__":
    sys.exit(main())

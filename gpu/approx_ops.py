"""NVIDIA's approximate float32 instructions measured on the GPU here, against fp8check.triton.nvidia_approx.

    PYTHONPATH=. python gpu/approx_ops.py --out gpu/results               # on an H100/H200 (bash gpu/run_all.sh approx-ops)
    PYTHONPATH=. python gpu/approx_ops.py --sass                           # on a CPU: the SASS ptxas emits for sm_90
    PYTHONPATH=. python gpu/approx_ops.py --from-ops-table gpu/results/ops-table.json.gz \\
        --table fp8check/triton/data/sm90-rcp.npz                          # the shipped table from stored outputs
    PYTHONPATH=. python gpu/approx_ops.py --simulate --out sim --random 65536     # the plumbing, on a CPU

On the GPU (Triton inline PTX for the .approx instructions, Triton's own ``/``
and ``tl.log2`` for what kernels compile):

- ``rcp.approx.ftz.f32``: every mantissa at every exponent (2^31 inputs), the
  table per mantissa (its offset from ``fl(1/1.m)``) and every exponent checked
  against it (exponent independence) -> ``sm90-rcp.npz`` (dense, the package's
  format: copy it to fp8check/triton/data/ once its log says 0 mismatches);
- ``sqrt/rsqrt.approx.ftz.f32``: every mantissa at both exponent parities
  (tables) and every other exponent checked against them;
- ``ex2.approx.ftz.f32`` over every input with ``|x| < 128``, ``lg2.approx.ftz.f32``
  and ``tl.log2`` over every positive float: ulp histograms against float64
  rounded once, and the inputs nvidia_approx calls exact (integers, powers of
  two) checked one by one;
- ``a / b`` (div.full.f32) on ``--random`` pairs (default 2^30 > 10^9; random
  bits, moderate magnitudes, huge and tiny divisors, specials) against
  ``nvidia_approx.div_full_f32`` with the table just measured: mismatches
  counted with examples; ``x / C`` for constexpr C against ``divide_by_constant``.

Writes ``approx-ops.json`` (figures, provenance: GPU, driver, CUDA, Triton,
date), ``sm90-rcp.npz`` and ``approx-ops-tables.npz`` under ``--out``.
tests/triton_faithful/test_nvidia_approx.py reads approx-ops.json from
gpu/results when it is there.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "gpu")]

import numpy as np  # noqa: E402

from fp8check.triton import nvidia_approx as na  # noqa: E402

MANT = 1 << 23
CHUNK = 1 << 24
ASM = {"rcp": "rcp.approx.ftz.f32 $0, $1;", "sqrt": "sqrt.approx.ftz.f32 $0, $1;",
       "rsqrt": "rsqrt.approx.ftz.f32 $0, $1;", "ex2": "ex2.approx.ftz.f32 $0, $1;",
       "lg2": "lg2.approx.ftz.f32 $0, $1;"}
PTX_SNIPPETS = {
    "div.full.f32": "div.full.f32 %f2, %f1, %f3;", "div.approx.f32": "div.approx.f32 %f2, %f1, %f3;",
    "div.full.f32 by 448.0": "div.full.f32 %f2, %f1, 0f43E00000;",
    "div.approx.f32 1.0, 448.0 + mul": "div.approx.f32 %f2, 0f3F800000, 0f43E00000; mul.f32 %f2, %f2, %f1;",
    "rcp.approx.ftz.f32": "rcp.approx.ftz.f32 %f2, %f1;", "sqrt.approx.ftz.f32": "sqrt.approx.ftz.f32 %f2, %f1;",
    "rsqrt.approx.ftz.f32": "rsqrt.approx.ftz.f32 %f2, %f1;", "ex2.approx.ftz.f32": "ex2.approx.ftz.f32 %f2, %f1;",
    "lg2.approx.ftz.f32": "lg2.approx.ftz.f32 %f2, %f1;", "ex2.approx.f32": "ex2.approx.f32 %f2, %f1;",
}


# -- CPU: the SASS, and the table from stored outputs ---------------------------------------------------


def sass(snippets: dict[str, str] = PTX_SNIPPETS) -> dict[str, list[str]]:
    """The SASS the installed Triton's ptxas emits for sm_90 for each PTX snippet (no GPU needed)."""
    import tempfile

    import triton

    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ptxas = next((bin_dir / n for n in ("ptxas-blackwell", "ptxas") if (bin_dir / n).exists()), None)
    if ptxas is None or not (bin_dir / "nvdisasm").exists():
        raise SystemExit(f"error: no ptxas/nvdisasm in {bin_dir}")
    version = re.findall(r"release [\d.]+", subprocess.run([str(ptxas), "--version"], capture_output=True,
                                                          text=True).stdout)
    out: dict[str, list[str]] = {"ptxas": [f"{ptxas.name} {' '.join(version)}"]}
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in snippets.items():
            ptx = Path(tmp, "k.ptx")
            ptx.write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n"
                           "{ .reg .b64 %rd<4>; .reg .f32 %f<4>; ld.param.u64 %rd1, [p]; cvta.to.global.u64 %rd2, "
                           "%rd1; ld.global.f32 %f1, [%rd2]; ld.global.f32 %f3, [%rd2+4];\n " + body +
                           "\n st.global.f32 [%rd2], %f2; ret; }\n")
            cubin = Path(tmp, "k.cubin")
            subprocess.run([str(ptxas), "-arch=sm_90", str(ptx), "-o", str(cubin)], check=True)
            text = subprocess.run([str(bin_dir / "nvdisasm"), "-c", str(cubin)], capture_output=True,
                                  text=True).stdout
            out[name] = [re.sub(r"\s+", " ", ln.split("*/", 1)[1]).strip(" ;") for ln in text.splitlines()
                         if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)
                         and not re.search(r"\b(LDC|ULDC|LDG|STG|EXIT|BRA|NOP)\b", ln)]
    return out


def table_from_ops_table(path: str | Path, date: str = "") -> na.ReciprocalTable:
    """MUFU.RCP from the ``recip`` row (``1.0 / b``: div.full.f32 with a = 1, the quotient is the reciprocal)
    of a stored op table (gpu/ops_table.py) compiled on a GPU."""
    import ops_table

    report = ops_table.read(path)
    if "device" not in report or "recip" not in report["ops"] or "compiled" not in report["ops"]["recip"]:
        raise SystemExit(f"error: {path} has no compiled `1.0 / b` row (made without a GPU?)")
    divisors = ops_table.unpack(report["inputs"]["b"])
    reciprocals = ops_table.unpack(report["ops"]["recip"]["compiled"])
    env = report.get("environment", {})
    provenance = (f"{report['device']} (CUDA {env.get('cuda', '?')}, torch {env.get('torch', '?')}, driver not "
                  f"recorded), Triton {report.get('triton', '?')}{', ' + date if date else ''}: `1.0 / b` compiled to "
                  f"{' '.join(report['ops']['recip'].get('ptx', []))}, the in-range divisors of the op table "
                  f"({Path(path).name}, gpu/ops_table.py)")
    return na.table_from_measurements(divisors, reciprocals, provenance)


# -- the GPU side ---------------------------------------------------------------------------------------------


class Hardware:
    """The instructions as the GPU here executes them (Triton kernels), on uint32 bit patterns."""

    def __init__(self) -> None:
        import torch
        import triton
        import triton.language as tl

        self.torch = torch

        @triton.jit
        def unary(x_ptr, y_ptr, n, ASM: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            y = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
            tl.store(y_ptr + offs, y, mask=mask)

        @triton.jit
        def log2(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, tl.log2(tl.load(x_ptr + offs, mask=mask)), mask=mask)

        @triton.jit
        def divide(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask) / tl.load(b_ptr + offs, mask=mask), mask=mask)

        @triton.jit
        def divide_const(a_ptr, y_ptr, n, C: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask) / C, mask=mask)

        self.kernels = {"unary": unary, "log2": log2, "divide": divide, "divide_const": divide_const}
        self.ptx: dict[str, list[str]] = {}

    def _grid(self, n: int) -> tuple[int]:
        return ((n + 1023) // 1024,)

    def _note(self, name: str, compiled) -> None:
        if name not in self.ptx and compiled is not None:
            text = compiled.asm.get("ptx", "")
            self.ptx[name] = sorted({m.group(0) for m in re.finditer(
                r"\b(div|rcp|sqrt|rsqrt|ex2|lg2|mul|fma)\.[a-z0-9.]+", text)})

    def unary(self, op: str, bits):  # int32 torch tensor (float32 bits) on the GPU -> int32
        t = self.torch
        y = t.empty_like(bits)
        k = self.kernels["unary"][self._grid(bits.numel())](bits, y, bits.numel(), ASM=ASM[op], BLOCK=1024)
        self._note(op, k)
        return y

    def log2(self, bits):
        y = self.torch.empty_like(bits)
        k = self.kernels["log2"][self._grid(bits.numel())](bits.view(self.torch.float32), y.view(self.torch.float32),
                                                          bits.numel(), BLOCK=1024)
        self._note("tl.log2", k)
        return y

    def divide(self, a, b):
        f = self.torch.float32
        y = self.torch.empty_like(a)
        k = self.kernels["divide"][self._grid(a.numel())](a.view(f), b.view(f), y.view(f), a.numel(), BLOCK=1024)
        self._note("a / b", k)
        return y

    def divide_const(self, a, c: float):
        f = self.torch.float32
        y = self.torch.empty_like(a)
        k = self.kernels["divide_const"][self._grid(a.numel())](a.view(f), y.view(f), a.numel(), C=c, BLOCK=1024)
        self._note("a / C", k)
        return y


class Simulated:
    """A stand-in for the GPU on a CPU (NumPy, correctly rounded results and the model's division): runs the
    script's plumbing without CUDA; its figures mean nothing about any hardware."""

    def __init__(self) -> None:
        self.ptx = {"simulated": ["no GPU: correctly rounded NumPy results"]}
        self.table = na.ReciprocalTable(offsets=np.zeros(MANT, dtype=np.int8), provenance="simulated")

    def unary(self, op: str, bits: np.ndarray) -> np.ndarray:
        x = bits.view(np.float32).astype(np.float64)
        with np.errstate(all="ignore"):
            f = {"rcp": lambda v: 1.0 / v, "sqrt": np.sqrt, "rsqrt": lambda v: 1.0 / np.sqrt(v), "ex2": np.exp2,
                 "lg2": np.log2}[op]
            y = f(x).astype(np.float32)
        if op == "ex2":  # .ftz
            y = np.where(np.abs(y) < np.float32(2.0 ** -126), np.float32(0), y).astype(np.float32)
        return y.view(np.uint32)

    def log2(self, bits: np.ndarray) -> np.ndarray:
        return self.unary("lg2", bits)

    def divide(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return na.div_full_f32(a.view(np.float32), b.view(np.float32), self.table)[0].view(np.uint32)

    def divide_const(self, a: np.ndarray, c: float) -> np.ndarray:
        return na.divide_by_constant(a.view(np.float32), c, self.table)[0].view(np.uint32)


def _host(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.cpu().numpy().view(np.uint32)


def _device(x: np.ndarray, hw):
    return x if isinstance(hw, Simulated) else hw.torch.from_numpy(x.view(np.int32)).cuda()  # int32: the bits


def _binade(e: int, sign: int = 0) -> np.ndarray:
    return (np.uint32(sign << 31) | np.uint32(e << 23) | np.arange(MANT, dtype=np.uint32)).astype(np.uint32)


def _histogram(off: np.ndarray) -> dict[str, int]:
    vals, counts = np.unique(np.clip(off, -9, 9), return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(vals, counts)}


def _pipelined(jobs, check) -> list:
    """``check(*job)`` for every job on a thread pool (NumPy lets go of the GIL), while the jobs are made in
    this thread (the GPU calls); at most twice the workers in flight, for memory."""
    workers = max(1, (os.cpu_count() or 2) - 1)
    out, pending = [], collections.deque()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for job in jobs:
            pending.append(pool.submit(check, *job))
            if len(pending) > 2 * workers:
                out.append(pending.popleft().result())
        out.extend(f.result() for f in pending)
    return out


def _tally(results: list[tuple[int, int, list[str]]], **extra) -> dict:
    return {"checked": sum(r[0] for r in results), "mismatches": sum(r[1] for r in results),
            "examples": [e for r in results for e in r[2]][:16], **extra}


def measure_rcp(hw, exponents: range) -> tuple[na.ReciprocalTable, dict]:
    """The table from exponent 127 (1.m), and every exponent of both signs against the model with it."""
    base = _host(hw.unary("rcp", _device(_binade(127), hw)))
    off = base.astype(np.int64) - na.mantissa_reciprocal_bits(np.arange(MANT, dtype=np.uint32)).astype(np.int64)
    table = na.ReciprocalTable(offsets=np.clip(off, -127, 127).astype(np.int8), provenance="")

    def jobs():
        for sign in (0, 1):
            for e in exponents:
                x = _binade(e, sign)
                yield x, _host(hw.unary("rcp", _device(x, hw)))

    def check(x, got):
        want = na.mufu_rcp(x.view(np.float32), table)[0].view(np.uint32)
        bad = np.flatnonzero(got != want)
        return x.size, bad.size, [f"rcp({int(x[i]):08X}) = {int(got[i]):08X}, model {int(want[i]):08X}"
                                  for i in bad[:2]]

    return table, _tally(_pipelined(jobs(), check), offsets=_histogram(off),
                         beyond_bound=int((np.abs(off) > na.RCP_BOUND_ULPS).sum()),
                         correctly_rounded=float((off == 0).mean()))


def measure_root(hw, op: str, exponents: range) -> tuple[np.ndarray, dict]:
    """sqrt/rsqrt: tables at both exponent parities (1.m and 2 * 1.m); every exponent whose results stay
    normal against them, scaled (x * 4^k: the result times 2^k, or 2^-k for rsqrt)."""
    f = np.sqrt if op == "sqrt" else (lambda v: 1.0 / np.sqrt(v))
    tables, hist, bases = [], {}, {}
    for e0 in (127, 128):
        x = _binade(e0)
        got = _host(hw.unary(op, _device(x, hw)))
        ref = f(x.view(np.float32).astype(np.float64)).astype(np.float32).view(np.uint32)
        off = got.astype(np.int64) - ref.astype(np.int64)
        tables.append(np.clip(off, -127, 127).astype(np.int8))
        hist[f"2^{e0 - 127}"] = _histogram(off)
        bases[e0 % 2] = (e0, got.astype(np.int64))

    def jobs():
        for e in exponents:
            x = _binade(e)
            yield e, x, _host(hw.unary(op, _device(x, hw)))

    def check(e, x, got):
        e0, base = bases[e % 2]
        k = (e - e0) // 2
        want = base + ((k if op == "sqrt" else -k) << 23)
        stays = (want > 0x007FFFFF) & (want < 0x7F800000) & (e > 0)
        bad = np.flatnonzero(stays & (got.astype(np.int64) != want))
        return int(stays.sum()), bad.size, [f"{op}({int(x[i]):08X}) = {int(got[i]):08X}, scaled table "
                                            f"{int(want[i]):08X}" for i in bad[:2]]

    return np.stack(tables), _tally(_pipelined(jobs(), check), offsets=hist)


def measure_function(hw, op: str, inputs, exact_mask, reference, ftz_result: bool = False,
                     ftz_input: bool = False) -> dict:
    """An approximate function over the given inputs (one array at a time): ulp offsets from float64
    rounded once (``ftz_input``: of the input as a ``.ftz`` instruction reads it, a subnormal as zero of its
    sign), and the inputs nvidia_approx calls exact checked one by one."""

    def jobs():
        for x in inputs:
            yield x, _host(hw.log2(_device(x, hw)) if op == "tl.log2" else hw.unary(op, _device(x, hw)))

    def check(x, got):
        v = x.view(np.float32)
        if ftz_input:
            v = np.where(np.abs(v) < np.float32(2.0 ** -126), np.copysign(np.float32(0), v), v)
        with np.errstate(all="ignore"):
            ref = reference(v.astype(np.float64)).astype(np.float32)
        if ftz_result:  # .ftz: a subnormal result is written as zero of its sign
            ref = np.where(np.abs(ref) < np.float32(2.0 ** -126), np.copysign(np.float32(0), ref), ref)
        g = got.view(np.float32)
        finite = np.isfinite(ref) & np.isfinite(g)
        off = got.view(np.int32)[finite].astype(np.int64) - ref.view(np.int32)[finite].astype(np.int64)
        mask = exact_mask(x.view(np.float32))
        bad = np.flatnonzero(mask & ~(np.isnan(g) & np.isnan(ref)) & (got != ref.view(np.uint32)))
        return _histogram(off), int(mask.sum()), bad.size, [
            f"{op}({int(x[i]):08X}) = {int(got[i]):08X}, exact {int(ref.view(np.uint32)[i]):08X}" for i in bad[:4]]

    hist: dict[str, int] = {}
    claimed = wrong = 0
    examples: list[str] = []
    for h, c, w, ex in _pipelined(jobs(), check):
        for k, v in h.items():
            hist[k] = hist.get(k, 0) + v
        claimed, wrong, examples = claimed + c, wrong + w, examples + ex
    return {"offsets": hist, "claimed_exact": claimed, "claimed_exact_wrong": wrong, "examples": examples[:16],
            "reference": "ftz-input" if ftz_input else "input"}


def random_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Division operands: a quarter any bit pattern, half moderate magnitudes (e^-20..e^20, either sign),
    an eighth huge or tiny divisors (beyond 2^126, subnormal), an eighth specials and format maxima."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2 ** 32, size=n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2 ** 32, size=n, dtype=np.uint64).astype(np.uint32)
    q = n // 4
    mags = (np.exp(rng.uniform(-20, 20, size=(2, 2 * q))) * rng.choice([-1.0, 1.0], size=(2, 2 * q)))
    a[q:3 * q], b[q:3 * q] = (m.astype(np.float32).view(np.uint32) for m in mags)
    e = n // 8
    edge = rng.choice(np.array([0x7E800000, 0x7F000000, 0x00000000], dtype=np.uint32), size=e)
    b[3 * q:3 * q + e] = (edge | rng.integers(0, MANT, size=e, dtype=np.uint32)
                          | (rng.integers(0, 2, size=e, dtype=np.uint32) << np.uint32(31)))
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF, 0x00000001, 0x007FFFFF,
                         0x7F7FFFFF, 0x3F800000] + [np.float32(v).view(np.uint32) for v in na.FORMAT_MAXIMA.values()],
                        dtype=np.uint32)
    rest = n - 3 * q - e
    a[n - rest:] = np.where(rng.random(rest) < 0.3, rng.choice(specials, size=rest), a[n - rest:])
    b[n - rest:] = rng.choice(specials, size=rest)
    return a, b


def verify_division(hw, table: na.ReciprocalTable, n: int, seed: int) -> dict:
    """``a / b`` compiled (div.full.f32) on ``n`` random pairs, and ``x / C`` for constexpr C, against the
    model with ``table``."""

    def jobs():
        for start in range(0, n, CHUNK):
            a, b = random_pairs(min(CHUNK, n - start), seed + start)
            yield a, b, _host(hw.divide(_device(a, hw), _device(b, hw)))

    def check(a, b, got):
        q, known = na.div_full_f32(a.view(np.float32), b.view(np.float32), table)
        bad = np.flatnonzero(q.view(np.uint32) != got)
        return a.size, bad.size, [f"{int(a[i]):08X} / {int(b[i]):08X} = {int(got[i]):08X}, model "
                                  f"{int(q.view(np.uint32)[i]):08X}" for i in bad[:4]], int((~known).sum())

    results = _pipelined(jobs(), check)
    out = _tally([r[:3] for r in results], unknown_in_model=sum(r[3] for r in results))
    constants = sorted(set(na.FORMAT_MAXIMA.values()) | {3.0, 1.0 / 3, 0.1, 1e-30, 1e30, 2.0 ** 126, 2.0 ** 127})
    x, _ = random_pairs(1 << 20, seed - 1)
    const_bad = 0
    for c in constants:
        got = _host(hw.divide_const(_device(x, hw), c))
        want = na.divide_by_constant(x.view(np.float32), c, table)[0].view(np.uint32)
        bad = np.flatnonzero(got != want)
        const_bad += bad.size
        out["examples"] += [f"{int(x[i]):08X} / {c!r} (constexpr) = {int(got[i]):08X}, model {int(want[i]):08X}"
                            for i in bad[:2]]
    out.update(constants=constants, constant_inputs=int(x.size) * len(constants), constant_mismatches=const_bad)
    return out


def provenance(hw) -> dict:
    from fp8check.results import environment

    env = environment()
    driver = ""
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    return {"device": env.get("cuda_device", "simulated" if isinstance(hw, Simulated) else "?"), "driver": driver,
            "cuda": env.get("cuda", ""), "torch": env.get("torch", ""), "triton": env.get("triton", ""),
            "date": datetime.date.today().isoformat(), "environment": env}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="", help="folder for approx-ops.json, sm90-rcp.npz, approx-ops-tables.npz")
    p.add_argument("--random", type=int, default=1 << 30, help="random division pairs to verify (default 2^30)")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--sass", action="store_true", help="print the SASS of each instruction for sm_90 (no GPU)")
    p.add_argument("--from-ops-table", default="", help="a stored op table (gpu/ops_table.py) to read MUFU.RCP from")
    p.add_argument("--table", default="", help="where --from-ops-table writes the table (.npz)")
    p.add_argument("--date", default="", help="when the op table was measured (for the provenance)")
    p.add_argument("--simulate", action="store_true", help="no GPU: NumPy stands in for it (plumbing only)")
    args = p.parse_args(argv)
    if args.sass:
        for name, lines in sass().items():
            print(f"{name}:\n    " + "\n    ".join(lines))
        return 0
    if args.from_ops_table:
        if not args.table:
            p.error("--from-ops-table needs --table")
        table = table_from_ops_table(args.from_ops_table, args.date)
        na.write_table(table, args.table)
        print(f"wrote {args.table}: {table.known} mantissas known; {table.provenance}")
        return 0
    if not args.out:
        p.error("--out is needed")
    if args.simulate:
        hw: object = Simulated()
        exponents = range(125, 130)
    else:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA here: nothing measured (--simulate runs the plumbing on a CPU)")
            return 0
        hw = Hardware()
        exponents = range(0, 255)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    report: dict = {"provenance": provenance(hw), "random_pairs": args.random, "seed": args.seed}

    table, report["rcp"] = measure_rcp(hw, exponents)
    prov = report["provenance"]
    table = na.ReciprocalTable(offsets=table.offsets, provenance=(
        f"{prov['device']} (driver {prov['driver'] or '?'}, CUDA {prov['cuda']}), Triton {prov['triton']}, "
        f"{prov['date']}: rcp.approx.ftz.f32 of every mantissa (gpu/approx_ops.py)"))
    na.write_table(table, out / "sm90-rcp.npz")
    print(f"rcp: {report['rcp']['checked']} inputs, {report['rcp']['mismatches']} off the per-mantissa table "
          f"({time.time() - started:.0f} s)", flush=True)
    shipped = na.reciprocal_table()
    both = (shipped.offsets != na.UNKNOWN)
    report["rcp"]["shipped_table_known"] = int(both.sum())
    report["rcp"]["shipped_table_wrong"] = int((shipped.offsets[both] != table.offsets[both]).sum())
    print(f"rcp: the shipped table ({report['rcp']['shipped_table_known']} mantissas) differs from this GPU on "
          f"{report['rcp']['shipped_table_wrong']}", flush=True)

    roots = {}
    for op in ("sqrt", "rsqrt"):
        roots[op], report[op] = measure_root(hw, op, exponents)
        print(f"{op}: {report[op]['checked']} inputs, {report[op]['mismatches']} off the per-parity tables "
              f"({time.time() - started:.0f} s)", flush=True)
    np.savez_compressed(out / "approx-ops-tables.npz", sqrt=roots["sqrt"], rsqrt=roots["rsqrt"],
                        provenance=np.array(table.provenance.replace("rcp.approx.ftz.f32", "sqrt/rsqrt.approx.ftz.f32")))

    pow2 = np.concatenate([np.arange(1, 255, dtype=np.uint32) << 23, np.uint32(1) << np.arange(23, dtype=np.uint32)])
    ints = np.arange(-200, 201, dtype=np.float32).view(np.uint32)
    below_128 = [e for e in exponents if e < 134]  # |x| < 128: every input whose 2^x is finite and not 0

    def ex2_inputs():
        yield ints
        for e in below_128:
            for sign in (0, 1):
                yield _binade(e, sign)

    def positive():
        yield pow2
        for e in exponents:
            yield _binade(e)

    report["ex2"] = measure_function(hw, "ex2", ex2_inputs(), na.ex2_exact, np.exp2, ftz_result=True)
    report["lg2"] = measure_function(hw, "lg2", positive(), lambda x: np.zeros(x.shape, bool), np.log2)
    report["tl.log2"] = measure_function(hw, "tl.log2", positive(), na.lg2_exact, np.log2)
    report["sqrt_powers_of_two"] = measure_function(hw, "sqrt", [pow2], na.sqrt_exact, np.sqrt, ftz_input=True)
    report["rsqrt_powers_of_two"] = measure_function(hw, "rsqrt", [pow2], na.rsqrt_exact,
                                                     lambda v: 1.0 / np.sqrt(v), ftz_input=True)
    for op in ("ex2", "lg2", "tl.log2", "sqrt_powers_of_two", "rsqrt_powers_of_two"):
        r = report[op]
        print(f"{op}: offsets {r['offsets']}; claimed exact {r['claimed_exact']}, wrong {r['claimed_exact_wrong']}",
              flush=True)

    report["div_full"] = verify_division(hw, table, args.random, args.seed)
    d = report["div_full"]
    print(f"div.full.f32: {d['checked']} random pairs, {d['mismatches']} off the model "
          f"({d['unknown_in_model']} unknown to it); x / C: {d['constant_inputs']} inputs, "
          f"{d['constant_mismatches']} off ({time.time() - started:.0f} s)", flush=True)
    report["ptx"] = hw.ptx
    report["seconds"] = round(time.time() - started, 1)
    (out / "approx-ops.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out / 'approx-ops.json'} in {report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""fp8check's tensor-core models (fp8check.matmul.tensorcore) against MMA-Sim (mmasim 2.1.1), in one run.

    python benchmarks/mma_models.py [--instances 200000] [--tiles 200] [--gemm 256]

Needs ``pip install mmasim==2.1.1`` (the ``mmasim`` extra; not a dependency of fp8check). Three
measurements on the same inputs for both sides, each checked bit for bit (NaN by class, the
target-dependent elements of the AMD brackets left out) before its time counts:

1. ``instances``: random-bit dot products (one output element each: K codes per side, a float32
   accumulator, block scales) of every FP8 instruction kind, MMA-Sim through ``dpa`` on the whole
   batch (its fastest use: torch-vectorised over the batch), fp8check through ``dot_instances``;
2. ``tiles``: instruction tiles (wgmma m64n8k32, mfma 16x16x32), MMA-Sim called once per tile as its
   API is made (``op(A, B, C)``), fp8check once per tile (``mma``) and once for all tiles;
3. ``gemm``: one G x G x G FP8 GEMM (sm90), both sides given the whole matrices in one call.

Wall seconds, best of five calls for both sides, each side's first calls untimed (two; three where a call
takes milliseconds: numba's compilations, cached on disk after the first run, are not timed, and on our VMs
fp8check's first millisecond-long calls after one of MMA-Sim's half-second runs were up to 1.5x slower for
three or four calls, warming up memory), the two sides measured in turn twice and each side's best kept (a
burst of the shared machine's other work spoils one round, not the ratio; per-tile calls: once), on
whatever machine runs it: compare the columns of one run. Both sides start from the codes
(decoding is timed) and give every output element. Both sides get ``--threads`` (default one): MMA-Sim
as torch's threads, fp8check as ``FP8CHECK_THREADS`` (a call of 2**21 products or more runs its output rows
in spans on that many threads); fp8check's models are compiled by numba where it is
installed (``FP8CHECK_NUMBA=0``: NumPy only): one fused pass per output element over the K chain, a
call of 2**22 products or more through a kernel compiled for its instruction kind (and, once it exists,
every call of that kind: the tiles run the kernels the instances made).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]  # this checkout's fp8check, the oracle adapter

import mmasim_oracle as mo  # noqa: E402
from fp8check.matmul import tensorcore as tc  # noqa: E402

BENCH_KINDS = ("sm90-wgmma-fp8:e4m3fnxe4m3fn", "sm90-wgmma-fp8:e5m2xe4m3fn", "sm89-mma-fp8:e4m3fnxe4m3fn",
               "sm100-tcgen05-f8f6f4:e4m3fnxe4m3fn", "gfx942-mfma-fp8:e4m3fnuzxe4m3fnuz",
               "sm100-tcgen05-mxf8f6f4:e4m3fnxe4m3fn", "sm100-tcgen05-nvf4")


def best(fn, repeat=5):
    out = fn()  # untimed: numba's first call (a compilation where none is on disk), and each side's first calls
    if _seconds(fn) < 0.05:  # after the other side's warm the caches up (millisecond calls: three untimed)
        fn()
    t = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - start)
    return out, t


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(sim, ours, rounds=2):
    """MMA-Sim's and fp8check's best times on the same inputs, the two measured in turn ``rounds`` times (a burst
    of the shared machine's other work spoils one round, not the ratio), each side's best kept."""
    runs = [(best(sim), best(ours)) for _ in range(rounds)]
    return min((r[0] for r in runs), key=lambda x: x[1]), min((r[1] for r in runs), key=lambda x: x[1])


def same(want: np.ndarray, got: np.ndarray, judged: np.ndarray) -> int:
    ok = (np.isnan(want) & np.isnan(got)) | (want.view(np.uint32) == got.view(np.uint32))
    return int((judged & ~ok).sum())


def instances(n: int) -> list[str]:
    lines = []
    for name in BENCH_KINDS:
        kind = mo.BY_NAME[name]
        inst = mo.draw(kind, n, seed=3)
        (want, t_sim), (res, t_ours) = alternate(lambda: mo.oracle(kind, inst), lambda: mo.ours(kind, inst))
        bad = same(want, res.values, ~res.target_dependent)
        if bad:
            raise SystemExit(f"{name}: {bad} mismatches")
        lines.append(f"  {name:38s} mmasim {t_sim:7.3f} s   fp8check {t_ours:6.3f} s   {t_sim / t_ours:6.1f}x   "
                     f"({n} instances, {int(res.target_dependent.sum())} target-dependent)")
    return lines


def tiles(count: int) -> list[str]:
    import torch
    from mmasim.amd import MFMA
    from mmasim.nv_ptx import MMA, WGMMA, TCGen05MMA

    lines = []
    rng = np.random.default_rng(4)
    for target, fmt, tdt, sim, (m, n, k) in (
            ("sm90", "e4m3fn", torch.float8_e4m3fn, WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3"), (64, 8, 32)),
            ("sm89", "e4m3fn", torch.float8_e4m3fn, MMA("Ada Lovelace", "m16n8k32.f32.e4m3.e4m3.f32"), (16, 8, 32)),
            ("sm100", "e4m3fn", torch.float8_e4m3fn, TCGen05MMA("Blackwell", "m128n8k32.kind::f8f6f4.f32.e4m3.e4m3"),
             (128, 8, 32)),
            ("gfx942", "e4m3fnuz", torch.float8_e4m3fnuz, MFMA("CDNA3", "f32_16x16x32_fp8_fp8"), (16, 16, 32))):
        qa = rng.integers(0, 256, size=(count, m, k), dtype=np.uint8)
        qb = rng.integers(0, 256, size=(count, k, n), dtype=np.uint8)
        c = (rng.standard_normal((count, m, n)) * 64).astype(np.float32)
        ta, tb = torch.from_numpy(qa).view(tdt), torch.from_numpy(qb).view(tdt)
        tcc = torch.from_numpy(c)
        rows, cols = tc.tile_instances(qa, qb)  # all tiles in one call
        (want, t_sim), (one, t_one) = alternate(
            lambda: np.stack([sim(ta[i], tb[i], tcc[i]).numpy() for i in range(count)]),
            lambda: tc.dot_instances(target, rows, fmt, cols, fmt, c.reshape(-1)))
        got, t_each = best(lambda: [tc.mma(target, qa[i], fmt, qb[i], fmt, acc=c[i]) for i in range(count)])
        values = np.stack([g.values for g in got])
        judged = ~np.stack([g.target_dependent for g in got])
        bad = same(want, values, judged) + same(want.reshape(-1), one.values, ~one.target_dependent)
        if bad:
            raise SystemExit(f"{target} tiles: {bad} mismatches")
        lines.append(f"  {target} {m}x{n}x{k} x {count} tiles: mmasim per tile {t_sim:7.3f} s   fp8check per tile "
                     f"{t_each:6.3f} s ({t_sim / t_each:5.1f}x)   fp8check all tiles at once {t_one:6.3f} s "
                     f"({t_sim / t_one:6.1f}x)")
    return lines


def gemm(size: int) -> list[str]:
    import torch
    from mmasim.nv_ptx import WGMMA

    rng = np.random.default_rng(5)
    qa = rng.integers(0, 0x7E, size=(size, size), dtype=np.uint8)
    qb = rng.integers(0, 0x7E, size=(size, size), dtype=np.uint8)
    sim = WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3")
    ta, tb = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (qa, qb))
    (want, t_sim), (got, t_ours) = alternate(lambda: sim(ta, tb, torch.zeros(size, size)).numpy(),
                                             lambda: tc.mma("sm90", qa, "e4m3fn", qb, "e4m3fn"))
    if same(want, got.values, np.ones(want.shape, bool)):
        raise SystemExit("gemm: mismatches")
    return [f"  sm90 {size}x{size}x{size} GEMM: mmasim {t_sim:7.3f} s   fp8check {t_ours:6.3f} s   "
            f"{t_sim / t_ours:6.1f}x"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=200_000)
    ap.add_argument("--tiles", type=int, default=200)
    ap.add_argument("--gemm", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1, help="threads of both sides: torch's for MMA-Sim, "
                    "FP8CHECK_THREADS for fp8check (default 1)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.environ["FP8CHECK_THREADS"] = str(args.threads)
    # the compiled engine from the first call (unless FP8CHECK_NUMBA=0 asks for NumPy): a fresh process would
    # otherwise stay on NumPy for its first 2^32 products (tensorcore.COMPILED_AFTER)
    os.environ.setdefault("FP8CHECK_NUMBA", "1")
    from fp8check.matmul.tensorcore import _compiled_step

    print(f"fp8check tensor-core models vs mmasim 2.1.1; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads), fp8check "
          f"{os.environ['FP8CHECK_THREADS']} threads, "
          f"numpy {np.__version__}, fp8check engine {'numba' if _compiled_step() else 'numpy'}, "
          f"load {os.getloadavg()[0]:.1f}")
    print("instances (both sides one call over the batch):")
    for line in instances(args.instances):
        print(line, flush=True)
    print("instruction tiles:")
    for line in tiles(args.tiles):
        print(line, flush=True)
    print("whole GEMM:")
    for line in gemm(args.gemm):
        print(line, flush=True)


if __name__ == "__main__":
    main()

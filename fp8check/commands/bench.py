"""``fp8check bench``: the reference's speed against ml_dtypes and torch, in one run.

Times, on this machine and in the same run, fp8check, ml_dtypes and torch
side by side:

- encode of N values (16M by default) from float32, float16, bfloat16 and
  float64 (fp8check ``encode``, ml_dtypes ``astype``, torch ``.to()``), and
  decode of N codes to float64;
- the exhaustive float32 sweep (``fp8check sweep torch-cpu``; 2^32 patterns
  by default): the whole sweep, against torch's own casts of the same
  patterns alone and ml_dtypes' casts of them (what the kernel costs, and
  what a reference by ml_dtypes would);
- the default check (``fp8check check torch-cpu``: float32, float16 and
  bfloat16 in): the whole check, against the time of torch's casts inside it
  and of ml_dtypes on the same calls.

Array cases run in interleaved rounds (every contender once per round) and
keep each one's best, so a busy machine slows all of them alike; the sweep
and the check run once. Each encode and decode result is checked against
ml_dtypes, NaN by class, so a fast wrong answer cannot pass for a result.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable

_CASES = ("encode", "decode", "sweep", "check")
_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter  # the clock of this run (--clock)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench", help="time the reference's encode/decode, the sweep and the check against ml_dtypes and torch",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=_positive, default=1 << 24, help="values per encode/decode case (default 16M)")
    parser.add_argument("--format", "-f", default="e4m3fn", help="the target format (default e4m3fn)")
    parser.add_argument("--profile", "-p", default="ieee", help="the profile fp8check encodes with (encode cases)")
    parser.add_argument("--repeat", type=_positive, default=5, help="rounds of the array cases (best kept; default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=_cases, default=_CASES, metavar="LIST",
                        help=f"comma-separated cases to run (default all: {','.join(_CASES)})")
    parser.add_argument("--engine", choices=("numba", "numpy"), default=None,
                        help="the engine of fp8check's lookups (default numba where installed: a long run's)")
    parser.add_argument("--threads", type=_positive, default=None, metavar="N",
                        help="threads of fp8check and of torch (default: the cores this process may use); "
                        "--threads 1 compares per-core cost, steadier on a busy machine")
    parser.add_argument("--clock", choices=tuple(_CLOCKS), default="wall",
                        help="wall (default): elapsed time; cpu: CPU time of every thread of this process "
                        "(with --threads 1, per-core cost that other processes' load hardly moves)")
    parser.add_argument("--sweep-limit", type=_positive, default=1 << 32, metavar="N",
                        help="float32 patterns the sweep case covers, from 0 (default 2^32: all)")
    parser.set_defaults(run=run)


def _positive(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _cases(text: str) -> tuple[str, ...]:
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    unknown = [c for c in names if c not in _CASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown case {unknown[0] if unknown else text!r}; "
                                         f"the cases are {', '.join(_CASES)}")
    return names


def _rounds(contenders: dict[str, Callable[[], Any]], repeat: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Best seconds of each contender over ``repeat`` interleaved rounds (after one warm-up call each)."""
    results = {name: fn() for name, fn in contenders.items()}  # warm up: tables, compiled loops, allocations
    best = {name: float("inf") for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            start = _clock()
            results[name] = fn()
            best[name] = min(best[name], _clock() - start)
    return best, results


def machine() -> str:
    """The CPU model, core count and the flags that change FP8 paths (torch's and ours)."""
    import os
    import platform

    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    shown = [f for f in ("avx2", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile") if f in flags]
    return f"{model}, {cores} cores" + (f", {' '.join(shown)}" if shown else "")


def run(args: argparse.Namespace) -> int:
    import os

    saved = {k: os.environ.get(k) for k in ("FP8CHECK_NUMBA", "FP8CHECK_THREADS")}
    torch = sys.modules.get("torch")
    torch_threads = torch.get_num_threads() if torch is not None else None
    try:
        return _run(args)
    finally:  # a command run in-process (the tests, a notebook) leaves the environment as it was
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        torch = sys.modules.get("torch")
        if torch is not None and torch_threads is not None:
            torch.set_num_threads(torch_threads)


def _run(args: argparse.Namespace) -> int:
    import os

    global _clock
    _clock = _CLOCKS[args.clock]

    import ml_dtypes
    import numpy as np
    from rich.table import Table

    import fp8check
    from fp8check import formats, profiles
    from fp8check.casts.adapters import get_kernel
    from fp8check.cli import EXIT_OK
    from fp8check.errors import InvalidValueError
    from fp8check.reference import fast
    from fp8check.terminal import console as make_console

    fmt = formats.get(args.format)
    profile = profiles.get(args.profile)
    profile.resolve(fmt)
    if fmt.ml_dtypes_name is None:
        raise InvalidValueError(f"ml_dtypes has no {fmt.name}: nothing to compare with")
    ml_type = getattr(ml_dtypes, fmt.ml_dtypes_name)
    try:
        import torch
    except ImportError:
        torch = None
    torch_type = getattr(torch, fmt.torch_name, None) if torch is not None and fmt.torch_name else None
    if torch_type is None and any(c in args.cases for c in ("sweep", "check")):
        raise InvalidValueError(f"the sweep and check cases need torch with {fmt.name} "
                                "(leave them out: --cases encode,decode)")

    if args.sweep_limit > 1 << 32:
        raise InvalidValueError(f"--sweep-limit {args.sweep_limit:#x}: there are 2^32 float32 patterns")
    if args.engine == "numba" and fast.compiled() is None:
        raise InvalidValueError("--engine numba: numba is not installed (pip install 'fp8check[fast]')")
    # The bench measures one engine throughout (a process switches to numba after many lookups by itself).
    os.environ["FP8CHECK_NUMBA"] = "0" if args.engine == "numpy" else "1"
    if args.threads:
        os.environ["FP8CHECK_THREADS"] = str(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    n = args.size
    console = make_console(wide=True)
    load = f"load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "load average unknown"
    console.print(f"fp8check bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {machine()}; {load}; "
                  f"{args.clock} clock")
    console.print(f"{fmt.name}; fp8check {fp8check.__version__} (engine {fast.engine()}, {fast.threads()} threads, "
                  f"profile {profile.name}); ml_dtypes {ml_dtypes.__version__}"
                  + (f"; torch {torch.__version__} ({torch.get_num_threads()} threads, ATen CPU "
                     f"{torch.backends.cpu.get_cpu_capability()})" if torch else "; no torch"))
    table = Table(show_edge=False, header_style="bold")
    for column in ("case", "unit", "fp8check", "ml_dtypes", "torch", "ml_dtypes / fp8check", "torch / fp8check"):
        table.add_column(column, justify="left" if column in ("case", "unit") else "right")

    def row(case: str, unit: str, ours: float, ml: float | None, tq: float | None, scale: float = 1.0) -> None:
        def cell(v: float | None) -> str:
            return "-" if v is None else f"{v * scale:.3g}"

        def ratio(v: float | None) -> str:
            return "-" if v is None else f"{v / ours:.2f}x"

        table.add_row(case, unit, cell(ours), cell(ml), cell(tq), ratio(ml), ratio(tq))

    nan = np.array([fmt.is_nan(c) for c in range(fmt.code_count)])
    ml_claim = get_kernel("ml_dtypes").profile_for(fmt).resolve(fmt)

    def comparable(source: str) -> bool:
        """Whether ml_dtypes' codes must equal fp8check's under ``profile`` (its own profile, or ieee where
        this ml_dtypes rounds once: 0.6 rounds float64 through float32)."""
        if profile == ml_claim:
            return True
        return profile.name == "ieee" and (source != "float64" or ml_claim.intermediate in (None, "float64"))

    rng = np.random.default_rng(args.seed)
    if "encode" in args.cases:
        _encode_rows(fmt, profile, ml_type, torch_type, rng, n, args.repeat, nan, comparable, row)
    if "decode" in args.cases:
        _decode_rows(fmt, ml_type, torch_type, rng, n, args.repeat, row)
    if "sweep" in args.cases:
        ours, ml, tq = _sweep(fmt, ml_type, torch_type, args.sweep_limit)
        row(f"sweep of {args.sweep_limit:,} float32", "s", ours, ml, tq)
    if "check" in args.cases:
        ours, ml, tq = _check(fmt, ml_type)
        row("default check torch-cpu", "s", ours, ml, tq)
    console.print(table)
    for note in _notes(args.cases, n, args.repeat):
        console.print(note)
    return EXIT_OK


def _encode_rows(fmt: Any, profile: Any, ml_type: Any, torch_type: Any, rng: Any, n: int, repeat: int, nan: Any,
                 comparable: Callable[[str], bool], row: Callable[..., None]) -> None:
    """The encode case: from float32, float16, bfloat16 and float64, checked equal to ml_dtypes where comparable."""
    import ml_dtypes
    import numpy as np

    import fp8check

    # Values across the format's range, with zeros, subnormals and overflow.
    base = rng.standard_normal(n) * np.exp2(rng.integers(fmt.emin - 4, fmt.emax + 2, n))
    with np.errstate(over="ignore"):  # beyond float16's range: Inf, as intended
        inputs = {"float32": base.astype(np.float32), "float16": base.astype(np.float16),
                  "bfloat16": base.astype(ml_dtypes.bfloat16), "float64": base}
    for source, x in inputs.items():
        contenders: dict[str, Callable[[], Any]] = {
            "fp8check": lambda x=x: fp8check.encode(x, fmt, profile),
            "ml_dtypes": lambda x=x: x.astype(ml_type)}
        if torch_type is not None:
            import torch

            tx = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if source == "bfloat16" \
                else torch.from_numpy(x)
            contenders["torch"] = lambda tx=tx: tx.to(torch_type)
        best, results = _rounds(contenders, repeat)
        ours, ml = results["fp8check"], results["ml_dtypes"].view(np.uint8)
        agree = (ours == ml) | (nan[ours] & nan[ml])
        if comparable(source) and not agree.all():
            raise AssertionError(f"fp8check and ml_dtypes disagree on {int((~agree).sum())} {source} inputs")
        row(f"encode from {source}", "ns/value", best["fp8check"], best["ml_dtypes"], best.get("torch"), 1e9 / n)


def _decode_rows(fmt: Any, ml_type: Any, torch_type: Any, rng: Any, n: int, repeat: int,
                 row: Callable[..., None]) -> None:
    """The decode case: random codes to float64, checked equal to ml_dtypes."""
    import numpy as np

    import fp8check

    codes = rng.integers(0, fmt.code_count, n, dtype=np.uint8)
    fp8 = codes.view(ml_type)
    contenders = {"fp8check": lambda: fp8check.decode(codes, fmt), "ml_dtypes": lambda: fp8.astype(np.float64)}
    if torch_type is not None:
        import torch

        tc = torch.from_numpy(codes).view(torch_type)
        contenders["torch"] = lambda: tc.to(torch.float64)
    best, results = _rounds(contenders, repeat)
    ours, ml = results["fp8check"], results["ml_dtypes"]
    if not ((ours == ml) | (np.isnan(ours) & np.isnan(ml))).all():
        raise AssertionError("fp8check and ml_dtypes decode differently")
    row("decode to float64", "ns/value", best["fp8check"], best["ml_dtypes"], best.get("torch"), 1e9 / n)


def _notes(cases: tuple[str, ...], n: int, repeat: int) -> list[str]:
    notes = ["ratios above 1x: fp8check is faster."]
    if "encode" in cases or "decode" in cases:
        notes.append(f"encode/decode: {n:,} values, best of {repeat} interleaved rounds.")
    if "sweep" in cases:
        notes.append("sweep: fp8check is the whole `fp8check sweep torch-cpu` (torch's casts included); torch is "
                     "torch's casts of the same patterns alone, ml_dtypes its casts of them (the kernel's floor, "
                     "and a reference by ml_dtypes).")
    if "check" in cases:
        notes.append("check: fp8check is the whole default check (3 input dtypes); torch is the time of torch's "
                     "casts inside it, ml_dtypes its casts of the same calls.")
    return notes


def _blocks(start: int, stop: int, block: int, fn: Callable[[Any], Any]) -> None:
    """``fn(bits)`` over float32 patterns [start, stop) in uint32 blocks (one buffer)."""
    import numpy as np

    bits = np.empty(block, dtype=np.uint32)
    steps = np.arange(block, dtype=np.uint32)
    for lo in range(start, stop, block):
        m = min(block, stop - lo)
        np.add(steps[:m], np.uint32(lo), out=bits[:m])
        fn(bits[:m])


def _sweep(fmt: Any, ml_type: Any, torch_type: Any, limit: int) -> tuple[float, float, float]:
    """Seconds: the sweep of torch-cpu over [0, limit); torch's casts alone; ml_dtypes' casts (on every core)."""
    import numpy as np
    import torch

    from fp8check.casts.adapters import get_kernel
    from fp8check.casts.sweep import sweep

    kernel = get_kernel("torch-cpu", device="cpu")
    profile = kernel.profile_for(fmt)
    block = 1 << 20
    sweep(kernel, fmt, profile, 0, min(limit, block), device="cpu", chunk=block)  # warm up
    start = _clock()
    found = sweep(kernel, fmt, profile, 0, limit, device="cpu", chunk=block)
    ours = _clock() - start
    if found["diverged"]:
        raise AssertionError(f"torch-cpu diverges from {profile.name} on {found['diverged']} float32 inputs")

    # The peers in the sweep's arrangement: one thread per core over the same blocks, torch on one
    # intra-op thread in each, each thread with its own output buffer.
    def torch_span(lo: int, hi: int) -> None:
        out = torch.empty(block, dtype=torch_type)
        _blocks(lo, hi, block, lambda b: out[:b.size].copy_(torch.from_numpy(b.view(np.float32))))

    def ml_span(lo: int, hi: int) -> None:
        buf = np.empty(block, dtype=ml_type)
        with np.errstate(all="ignore"):
            _blocks(lo, hi, block, lambda b: np.copyto(buf[:b.size], b.view(np.float32), casting="unsafe"))

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tq = _on_every_core(torch_span, limit, block)
    finally:
        torch.set_num_threads(before)
    ml = _on_every_core(ml_span, limit, block)
    return ours, ml, tq


def _on_every_core(span: Callable[[int, int], None], limit: int, block: int) -> float:
    """Seconds to run ``span`` over [0, limit) split in whole blocks across one thread per core."""
    import threading

    from fp8check.reference import fast

    k = fast.threads()
    edges = [limit * i // k // block * block for i in range(k)] + [limit]
    start = _clock()
    threads = [threading.Thread(target=span, args=(edges[i], edges[i + 1])) for i in range(1, k)]
    for t in threads:
        t.start()
    span(edges[0], edges[1])
    for t in threads:
        t.join()
    return _clock() - start


def _check(fmt: Any, ml_type: Any) -> tuple[float, float, float]:
    """Seconds: the default check of torch-cpu (its three input dtypes); torch's casts in it; ml_dtypes on the same calls."""
    import dataclasses

    import ml_dtypes
    import numpy as np
    import torch

    from fp8check.casts import engine
    from fp8check.casts.adapters import get_kernel

    kernel = get_kernel("torch-cpu", device="cpu")
    spent = {"torch": 0.0, "ml_dtypes": 0.0}
    torch_cast = kernel.tensor_fn

    def timed(x: Any, f: Any) -> Any:
        start = _clock()
        out = torch_cast(x, f)
        middle = _clock()
        a = x.detach().cpu()
        a = a.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if a.dtype == torch.bfloat16 else a.numpy()
        with np.errstate(all="ignore"):
            a.astype(ml_type)
        spent["torch"] += middle - start
        spent["ml_dtypes"] += _clock() - middle
        return out

    timed_kernel = dataclasses.replace(kernel, tensor_fn=timed)
    start = _clock()
    for dtype in ("float32", "float16", "bfloat16"):
        result, _ = engine.run_check(timed_kernel, fmt, input_dtype=dtype)
        if not result.passed and not result.expected_failure:
            raise AssertionError(f"the default check of torch-cpu fails on {dtype}: {result}")
    ours = _clock() - start - spent["ml_dtypes"]
    return ours, spent["ml_dtypes"], spent["torch"]

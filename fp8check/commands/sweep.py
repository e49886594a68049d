"""``fp8check sweep``: every float32 input (2^32 of them), kernel vs reference.

On a GPU both sides run on the device: the kernel on CUDA tensors and the
reference through :func:`fp8check.reference.encode_tensor`, chunk by chunk,
so only the mismatches travel to the host. ``--start/--stop`` (or
``--limit``) sweep a range of bit patterns instead, e.g. on a CPU.
Exit 0 when every input matches, 1 when any diverges, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from fp8check.commands._shared import KERNEL_HELP

_KEEP = 1 << 24  # mismatching inputs kept for classification (counts stay exact)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="cast all 2^32 float32 inputs with a kernel and compare with the reference (GPU)",
        description="Exhaustive float32 sweep: every bit pattern (or the range --start..--stop) cast by KERNEL "
        "and by the reference, compared bit for bit on the device.",
    )
    p.add_argument("kernel", metavar="MODULE:FUNC", help=KERNEL_HELP)
    p.add_argument("--format", required=True, metavar="FMT")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="the profile the kernel claims (default: ieee; for a built-in adapter, what it claims)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where to sweep (default: cuda when available, else cpu)")
    p.add_argument("--start", default="0", metavar="BITS", help="first float32 bit pattern (decimal or 0x hex; default 0)")
    p.add_argument("--stop", default=None, metavar="BITS", help="one past the last pattern (default 2^32)")
    p.add_argument("--limit", default=None, metavar="N", help="sweep N patterns from --start (instead of --stop)")
    p.add_argument("--chunk", default="0x4000000", metavar="N",
                   help="patterns per chunk (default 2^26; the device needs about 20 bytes per pattern)")
    p.add_argument("--max-listed", type=int, default=100, metavar="N", help="reproducers listed in --json")
    p.add_argument("--json", metavar="PATH", help="write the result (CheckResult + environment) as JSON")
    p.set_defaults(run=run)


def _range(args: argparse.Namespace) -> tuple[int, int]:
    from fp8check.commands._shared import parse_int
    from fp8check.errors import InvalidValueError

    start = parse_int(args.start, "--start")
    if args.limit is not None and args.stop is not None:
        raise InvalidValueError("give --stop or --limit, not both")
    if args.limit is not None:
        stop = start + parse_int(args.limit, "--limit")
    else:
        stop = parse_int(args.stop, "--stop") if args.stop is not None else 1 << 32
    if not 0 <= start < stop <= 1 << 32:
        raise InvalidValueError(f"the range [{start:#x}, {stop:#x}) is empty or outside [0, 2^32)")
    return start, stop


def sweep(kernel: Any, fmt: Any, profile: Any, start: int, stop: int, *, device: str, chunk: int,
          progress: Any = None) -> dict[str, Any]:
    """Compare ``kernel`` with the reference on float32 patterns [start, stop).

    Returns counts, the kept mismatches (bits, expected, actual as NumPy
    arrays, at most 2^24) and timings.
    """
    import numpy as np
    import torch

    from fp8check import reference

    total = 0
    kept_bits, kept_exp, kept_act = [], [], []
    kept = 0
    t_kernel = t_ref = 0.0
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    began = time.perf_counter()
    lo = start
    while lo < stop:
        hi = min(stop, lo + chunk)
        if lo < 1 << 31 < hi:
            hi = 1 << 31  # keep a chunk on one side of the sign bit: int32 arange
        a, b = (lo, hi) if lo < 1 << 31 else (lo - (1 << 32), hi - (1 << 32))
        bits = torch.arange(a, b, dtype=torch.int32, device=device)
        x = bits.view(torch.float32)
        sync()
        t0 = time.perf_counter()
        actual = kernel.cast_tensor(x, fmt)
        sync()
        t1 = time.perf_counter()
        if device == "cpu":  # the NumPy tables are faster than torch ops on a CPU
            expected = torch.from_numpy(reference.encode(x.numpy(), fmt, profile))
        else:
            expected = reference.encode_tensor(x, fmt, profile)
        sync()
        t2 = time.perf_counter()
        t_kernel += t1 - t0
        t_ref += t2 - t1
        diff = actual != expected
        n = int(diff.sum())
        if n:
            total += n
            if kept < _KEEP:
                idx = torch.nonzero(diff).reshape(-1)[: _KEEP - kept]
                kept_bits.append(bits[idx].cpu().numpy().view(np.uint32))
                kept_exp.append(expected[idx].cpu().numpy())
                kept_act.append(actual[idx].cpu().numpy())
                kept += int(idx.numel())
        if progress is not None:
            progress(hi - start, stop - start, total)
        lo = hi
    elapsed = time.perf_counter() - began
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
    return {
        "checked": stop - start,
        "diverged": total,
        "bits": cat(kept_bits, np.uint32),
        "expected": cat(kept_exp, np.uint8),
        "actual": cat(kept_act, np.uint8),
        "seconds": elapsed,
        "kernel_seconds": t_kernel,
        "reference_seconds": t_ref,
    }


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from fp8check import engine, formats, profiles
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.commands._shared import console, load_kernel, parse_int, require_formats, write_json
    from fp8check.errors import InvalidValueError
    from fp8check.results import CheckResult, environment

    from fp8check.outputs import check_writable

    check_writable(args.json, "--json")  # before any work
    try:
        import torch
    except ImportError:
        raise InvalidValueError("fp8check sweep needs torch") from None
    start, stop = _range(args)
    chunk = parse_int(args.chunk, "--chunk")
    if chunk <= 0:
        raise InvalidValueError(f"--chunk {args.chunk}: must be positive")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise InvalidValueError("--device cuda: no CUDA device is available")
    fmt = formats.get(args.format)
    kernel = load_kernel(args.kernel, device, args.profile)
    require_formats(kernel, fmt)
    if kernel.tensor_fn is None:
        raise InvalidValueError(f"{kernel.name} cannot take torch tensors; sweep needs a tensor kernel")
    if kernel.device != device:
        raise InvalidValueError(f"{kernel.name} runs on {kernel.device}, not {device}")
    # A built-in adapter's own profile (e.g. triton-interpreter) is known by its name too.
    claimed = kernel.profile_for(fmt)
    profile = claimed if args.profile in (None, claimed.name) else profiles.get(args.profile)
    profile.resolve(fmt)

    out = console()
    out.print(Text.assemble(("fp8check sweep ", "bold"), (args.kernel, "bold cyan"),
                            f" → {fmt.name} under {profile.name} ({profile.summary(fmt)}) on {device}: "
                            f"float32 patterns [{start:#010x}, {stop:#010x}), {stop - start:,} inputs"))
    found = sweep(kernel, fmt, profile, start, stop, device=device, chunk=chunk)
    rec = engine.Divergences(fmt=fmt, profile=profile, input_dtype="float32")
    if found["bits"].size:
        rec.add(found["bits"], found["expected"], found["actual"])
    sampled = found["diverged"] > found["bits"].size
    result = CheckResult(
        kernel=args.kernel, format=fmt.name, profile=profile.name, passed=found["diverged"] == 0,
        checked=found["checked"], categories=rec.counts(),
        divergences=rec.to_list(args.max_listed if args.max_listed > 0 else None),
        kind="cast", input_dtype="float32", device=device,
        command=f"fp8check sweep {args.kernel} --format {fmt.name} --profile {profile.name} --device {device}"
                + (f" --start {start:#x} --stop {stop:#x}" if (start, stop) != (0, 1 << 32) else ""),
    )
    result.extra.update(
        diverged=found["diverged"], categories_from_first=int(found["bits"].size) if sampled else None,
        seconds=round(found["seconds"], 3), kernel_seconds=round(found["kernel_seconds"], 3),
        reference_seconds=round(found["reference_seconds"], 3),
        ns_per_input=round(1e9 * found["seconds"] / found["checked"], 3), profile_summary=profile.summary(fmt),
        range=[start, stop],
    )
    known = engine._known_reasons(kernel, fmt, "float32", rec)
    if known and not sampled:
        result.expected_failure = "; ".join(known)
    rate = found["checked"] / max(found["seconds"], 1e-9)
    out.print(f"{found['seconds']:.2f} s ({rate / 1e6:,.0f} M inputs/s; kernel {found['kernel_seconds']:.2f} s, "
              f"reference {found['reference_seconds']:.2f} s)")
    if result.passed:
        out.print(Text(f"CONFORMS on all {found['checked']:,} inputs", style="bold green"))
    else:
        note = f" (categories of the first {found['bits'].size:,})" if sampled else ""
        out.print(Text(f"DIVERGES on {found['diverged']:,} of {found['checked']:,} inputs{note}", style="bold red"))
        result.extra.setdefault("profile_summary", profile.summary(fmt))
        print_divergences(out, result, fmt)
    if args.json:
        data = result.to_dict()
        data["environment"] = environment()
        write_json(args.json, data)
    return EXIT_OK if result.passed else EXIT_DIVERGED


def print_divergences(out: Any, result: Any, fmt: Any) -> None:
    from rich.text import Text

    from fp8check import engine

    first: dict[str, Any] = {}
    for d in result.divergences:
        first.setdefault(d.category, d)
    for cat, n in result.categories.items():
        d = first.get(cat)
        out.print(Text.assemble((f"{cat:<11}", "bold"), f" {n:>14,}"))
        if d is not None:
            e, a = int(d.expected_hex, 16), int(d.actual_hex, 16)
            out.print(f"            smallest: {d.input_hex} = {d.input_value}: expected {d.expected_hex} "
                      f"[{engine.code_fields(e, fmt)}] = {d.expected_value}, actual {d.actual_hex} "
                      f"[{engine.code_fields(a, fmt)}] = {d.actual_value}")

"""``fp8check sweep``: every float32 input (2^32 of them), kernel vs reference.

On a GPU both sides run on the device: the kernel on CUDA tensors and the
reference through :func:`fp8check.reference.encode_tensor`, chunk by chunk,
so only the mismatches travel to the host. On the CPU a NumPy kernel
(``ml_dtypes``) is called through its own array path on the same bit
patterns. ``--start/--stop`` (or ``--limit``) sweep a range of bit patterns
instead.
Exit 0 when every input matches, 1 when any diverges, 2 for usage errors.
"""

from __future__ import annotations

import argparse
from typing import Any

from fp8check.commands._shared import KERNEL_HELP

def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="cast all 2^32 float32 inputs with a kernel and compare with the reference (GPU, or CPU)",
        description="Exhaustive float32 sweep: every bit pattern (or the range --start..--stop) cast by KERNEL "
        "and by the reference, compared bit for bit on the device. NumPy kernels (ml_dtypes) sweep on the CPU "
        "through their own array path.",
    )
    p.add_argument("kernel", metavar="MODULE:FUNC", help=KERNEL_HELP)
    p.add_argument("--format", required=True, metavar="FMT")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="the profile the kernel claims (default: ieee; for a built-in adapter, what it claims)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where to sweep (default: cuda when available and the kernel runs there, else cpu)")
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


def _numpy_tensor_path(kernel: Any) -> Any:
    """``kernel`` with a tensor path through its NumPy one (CPU tensors only: ``x.numpy()`` shares the memory)."""
    import dataclasses

    def through_numpy(x: Any, fmt: Any) -> Any:
        return kernel.cast(x.numpy(), fmt)

    return dataclasses.replace(kernel, tensor_fn=through_numpy)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from fp8check import formats, profiles
    from fp8check.casts.adapters import get_kernel
    from fp8check.casts.sweep import sweep_check
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.commands._shared import parse_int, require_formats
    from fp8check.errors import InvalidValueError
    from fp8check.outputs import check_writable, write_json
    from fp8check.results import environment
    from fp8check.terminal import console
    from fp8check.terminal.divergences import print_result

    check_writable(args.json, "--json")
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
    kernel = get_kernel(args.kernel, device=device, profile=args.profile or "ieee")
    require_formats(kernel, fmt)
    if args.device is None and kernel.device == "cpu":  # a CPU-only kernel sweeps where it runs
        device = "cpu"
    if kernel.device != device:
        raise InvalidValueError(f"{kernel.name} runs on {kernel.device}, not {device}")
    if kernel.tensor_fn is None:
        # a NumPy kernel (ml_dtypes): on the CPU its own array path sees the same bit patterns
        kernel = _numpy_tensor_path(kernel)
    # A built-in adapter's own profile is known by its name too.
    claimed = kernel.profile_for(fmt)
    profile = claimed if args.profile in (None, claimed.name) else profiles.get(args.profile)
    profile.resolve(fmt)

    out = console()
    out.print(Text.assemble(("fp8check sweep ", "bold"), (args.kernel, "bold cyan"),
                            f" → {fmt.name} under {profile.name} ({profile.summary(fmt)}) on {device}: "
                            f"float32 patterns [{start:#010x}, {stop:#010x}), {stop - start:,} inputs"))
    result = sweep_check(kernel, fmt, profile, start, stop, device=device, chunk=chunk,
                         cap=args.max_listed if args.max_listed > 0 else None, name=args.kernel)
    extra = result.extra
    rate = result.checked / max(extra["seconds"], 1e-9)
    out.print(f"{extra['seconds']:.2f} s ({rate / 1e6:,.0f} M inputs/s; kernel {extra['kernel_seconds']:.2f} s, "
              f"reference {extra['reference_seconds']:.2f} s)")
    if result.passed:
        out.print(Text(f"CONFORMS on all {result.checked:,} inputs", style="bold green"))
    else:
        sampled = extra["categories_from_first"]
        note = f" (categories of the first {sampled:,})" if sampled else ""
        out.print(Text(f"DIVERGES on {extra['diverged']:,} of {result.checked:,} inputs{note}", style="bold red"))
        print_result(result, out, header=False)
    if args.json:
        data = result.to_dict()
        data["environment"] = environment()
        write_json(args.json, data)
    return EXIT_OK if result.passed else EXIT_DIVERGED

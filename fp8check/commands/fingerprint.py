"""``fp8check fingerprint``: which profile does a kernel actually implement?"""

from __future__ import annotations

import argparse
from typing import Any

from fp8check.commands._shared import KERNEL_HELP


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "fingerprint",
        help="name the profile a cast kernel implements, or the nearest one and how it deviates",
        description="Run KERNEL over the exhaustive sweep of the input dtype and search profile variants "
        "(rounding x overflow x Inf x NaN code x subnormals x intermediate rounding) for the one that "
        "reproduces it bit for bit.",
    )
    p.add_argument("kernel", metavar="MODULE:FUNC", help=KERNEL_HELP)
    p.add_argument("--format", required=True, metavar="FMT")
    p.add_argument("--input-dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--json", metavar="PATH", help="write the fingerprint as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from fp8check import formats
    from fp8check.cli import EXIT_OK
    from fp8check.commands._shared import console, load_kernel, require_formats, write_json
    from fp8check.errors import InvalidValueError
    from fp8check.fingerprint import fingerprint
    from fp8check.kernels.user import check_callable
    from fp8check.results import environment

    from fp8check.outputs import check_writable

    check_writable(args.json, "--json")  # before any work
    fmt = formats.get(args.format)
    kernel = load_kernel(args.kernel, args.device, None)
    require_formats(kernel, fmt)
    if args.input_dtype not in kernel.input_dtypes:
        raise InvalidValueError(f"{kernel.name} does not take {args.input_dtype} inputs")
    check_callable(kernel, fmt, args.input_dtype)
    fp = fingerprint(kernel, fmt, args.input_dtype)
    out = console()
    out.print(Text.assemble(("fp8check fingerprint ", "bold"), (args.kernel, "bold cyan"),
                            f" → {fmt.name} ({args.input_dtype} in): {fp.checked:,} inputs"))
    style = "bold green" if fp.exact else ("bold yellow" if fp.unexplained == 0 else "bold red")
    out.print(Text(fp.text, style=style))
    out.print(f"best fit: {fp.best.summary(fmt)}")
    ranked = sorted(fp.named_mismatches.items(), key=lambda t: t[1])
    out.print("inputs differing from each named profile: " + ", ".join(f"{n} {m:,}" for n, m in ranked))
    if args.json:
        data = fp.to_dict()
        data["environment"] = environment()
        write_json(args.json, data)
    return EXIT_OK

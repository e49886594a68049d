"""``fp8check check``: the property suite outside pytest, for one kernel and format.

Exit 0 when the kernel conforms to the profile, 1 when it diverges, 2 for
a usage error or a kernel that cannot be imported or called.
"""

from __future__ import annotations

import argparse
from typing import Any

from fp8check.commands._shared import KERNEL_HELP


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check",
        help="check a cast (or quantize) kernel against the reference, bit for bit",
        description="Run the exhaustive 16-bit sweep of the input dtype, every hazard input and Hypothesis-drawn "
        "inputs through KERNEL and compare each output with the reference under the claimed profile.",
    )
    p.add_argument("kernel", metavar="MODULE:FUNC", help=KERNEL_HELP)
    p.add_argument("--format", required=True, metavar="FMT", help="the target format: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, ...")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="the profile the kernel claims (default: ieee; for a built-in adapter, what it claims)")
    p.add_argument("--kind", choices=("cast", "quantize"), default="cast",
                   help="cast (default): tensor -> codes; quantize: tensor -> (codes, scales) under --recipe")
    p.add_argument("--recipe", metavar="NAME", default=None, help="the scaling recipe (only with --kind quantize)")
    p.add_argument("--input-dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="the dtype of the tensors the kernel receives (default float32)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the input tensors live")
    p.add_argument("--max-examples", type=int, default=200, metavar="N",
                   help="Hypothesis examples on top of the sweep (default 200; 0: sweep and hazards only)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="Hypothesis seed (default 0: reproducible)")
    p.add_argument("--max-listed", type=int, default=100, metavar="N",
                   help="reproducers listed in --json (default 100, simplest of each category first; counts stay exact)")
    p.add_argument("--json", metavar="PATH", help="write the result (CheckResult + environment) as JSON")
    p.add_argument("--html", metavar="OUT", help="write a self-contained HTML divergence report")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.errors import FP8CheckError, InvalidValueError

    from fp8check.outputs import check_writable

    check_writable(args.json, "--json")  # before any work
    check_writable(getattr(args, "html", None), "--html")
    if args.kind == "quantize":
        if not args.recipe:
            raise InvalidValueError("--kind quantize needs --recipe NAME")
        try:
            from fp8check.recipes.check import run_quantize_check_cli
        except ModuleNotFoundError as exc:
            if exc.name in ("fp8check.recipes", "fp8check.recipes.check"):
                raise FP8CheckError(
                    "--kind quantize needs fp8check.recipes.check, which this installation does not have"
                ) from None
            raise
        return run_quantize_check_cli(args)
    if args.recipe:
        raise InvalidValueError("--recipe is only for --kind quantize")
    if args.max_examples < 0:
        raise InvalidValueError(f"--max-examples {args.max_examples}: must be >= 0")

    from fp8check import engine, formats, profiles
    from fp8check.commands._shared import load_kernel, require_formats
    from fp8check.kernels.user import check_callable

    fmt = formats.get(args.format)
    kernel = load_kernel(args.kernel, args.device, args.profile)
    require_formats(kernel, fmt)
    # A built-in adapter's own profile (e.g. triton-interpreter) is known by its name too.
    claimed = kernel.profile_for(fmt)
    profile = claimed if args.profile in (None, claimed.name) else profiles.get(args.profile)
    profile.resolve(fmt)
    if args.input_dtype not in kernel.input_dtypes:
        raise InvalidValueError(f"{kernel.name} does not take {args.input_dtype} inputs")
    check_callable(kernel, fmt, args.input_dtype)
    result, _ = engine.run_check(kernel, fmt, profile, input_dtype=args.input_dtype,
                                 max_examples=args.max_examples, seed=args.seed,
                                 cap=args.max_listed if args.max_listed > 0 else None)
    result.command = result.command.replace(f"check {kernel.name}", f"check {args.kernel}", 1)
    print_result(result, fmt)
    _write_outputs(args, result)
    return EXIT_OK if result.passed else EXIT_DIVERGED


def _write_outputs(args: argparse.Namespace, result: Any) -> None:
    from fp8check.commands._shared import write_json
    from fp8check.results import environment

    env = environment()
    if args.json:
        data = result.to_dict()
        data["environment"] = env
        write_json(args.json, data)
    if getattr(args, "html", None):
        from fp8check.report import Source, divergence_report, write_html

        write_html(args.html, divergence_report([Source(name=f"fp8check check {args.kernel}", environment=env,
                                                        checks=[result])]))


def print_result(result: Any, fmt: Any, console: Any = None) -> None:
    """The terminal view of one CheckResult: per category, the count and the simplest reproducer."""
    from rich.text import Text

    from fp8check import engine
    from fp8check.commands._shared import console as make_console

    out = console or make_console()
    summary = result.extra.get("profile_summary", "")
    out.print(Text.assemble(
        ("fp8check check ", "bold"), (result.kernel, "bold cyan"), f" → {result.format} ({result.input_dtype} in, ",
        f"{result.device}), profile {result.profile}: {summary}"))
    out.print(f"checked {result.checked:,} distinct inputs: the exhaustive {result.input_dtype} sweep, every "
              f"hazard input, Hypothesis examples (seed {result.seed})")
    if result.passed:
        out.print(Text("CONFORMS: every output equals the reference bit for bit", style="bold green"))
        return
    total = sum(result.categories.values())
    out.print(Text(f"DIVERGES: {total:,} inputs give a different code", style="bold red"))
    if result.expected_failure:
        out.print(Text(f"known upstream: {result.expected_failure}", style="yellow"))
    first = {}
    for d in result.divergences:
        first.setdefault(d.category, d)
    width = max(len(c) for c in result.categories)
    for cat, n in result.categories.items():
        d = first.get(cat)
        line = Text.assemble((f"{cat:<{width}}", "bold"), f"  {n:>12,} inputs")
        if d is None:
            out.print(line)
            continue
        e, a = int(d.expected_hex, 16), int(d.actual_hex, 16)
        line.append(f"   smallest: {d.input_dtype} {d.input_hex} = {d.input_value}")
        out.print(line)
        pad = " " * (width + 2)
        out.print(f"{pad}expected {d.expected_hex} [{engine.code_fields(e, fmt)}] = {d.expected_value}")
        out.print(Text(f"{pad}actual   {d.actual_hex} [{engine.code_fields(a, fmt)}] = {d.actual_value}", style="red"))
    out.print(f"reproduce: {result.command}")

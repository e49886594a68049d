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
    p.add_argument("--format", metavar="FMT",
                   help="the target format: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, ... (required for a cast; a quantizer's "
                   "recipe names its own unless this overrides it)")
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
    from fp8check.errors import InvalidValueError
    from fp8check.outputs import check_writable

    for path, option in ((args.json, "--json"), (args.html, "--html")):
        check_writable(path, option)
    if args.max_examples < 0:
        raise InvalidValueError(f"--max-examples {args.max_examples}: must be >= 0")
    if args.kind == "quantize":
        result = _quantize(args)
    elif args.recipe:
        raise InvalidValueError("--recipe is only for --kind quantize")
    else:
        result = _cast(args)
    from fp8check.terminal.divergences import print_result

    print_result(result)
    _write_outputs(args, result)
    return EXIT_OK if result.passed else EXIT_DIVERGED


def _cast(args: argparse.Namespace) -> Any:
    from fp8check import formats, profiles
    from fp8check.casts import engine
    from fp8check.casts.adapters import get_kernel
    from fp8check.casts.adapters.user import check_callable
    from fp8check.commands._shared import require_formats
    from fp8check.errors import InvalidValueError

    if not args.format:
        raise InvalidValueError("a cast check needs --format FMT (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, ...)")
    fmt = formats.get(args.format)
    kernel = get_kernel(args.kernel, device=args.device, profile=args.profile or "ieee")
    require_formats(kernel, fmt)
    # A built-in adapter's own profile is known by its name too.
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
    return result


def _quantize(args: argparse.Namespace) -> Any:
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable
    from fp8check.profiles import get as get_profile
    from fp8check.quantizers import get as get_recipe
    from fp8check.quantizers.conformance import check_quantizer

    if not args.recipe:
        raise InvalidValueError("--kind quantize needs --recipe NAME (see docs/recipes.md for the names)")
    recipe = get_recipe(args.recipe, args.format or None)
    if args.profile:
        get_profile(args.profile)
    kernel = load_callable(args.kernel)
    return check_quantizer(kernel, recipe, profile=args.profile or None, device=args.device,
                           max_examples=args.max_examples, seed=args.seed, kernel_name=args.kernel)


def _write_outputs(args: argparse.Namespace, result: Any) -> None:
    from fp8check.outputs import write_json
    from fp8check.results import environment

    env = environment()
    if args.json:
        data = result.to_dict()
        data["environment"] = env
        write_json(args.json, data)
    if args.html:
        from fp8check.report import Source, divergence_report, write_html

        what = " --kind quantize" if result.kind == "quantize" else ""
        write_html(args.html, divergence_report([Source(name=f"fp8check check {args.kernel}{what}", environment=env,
                                                        checks=[result])]))

"""``fp8check bench``: the reference's speed against ml_dtypes and torch.

Encodes N values (16M by default) from float32, float16 and bfloat16 and
decodes N codes, timing fp8check, ``ml_dtypes`` ``astype`` and torch
``.to()`` in the same run (best of ``--repeat``), and prints ns/value and
ratios. Each result is also checked against ml_dtypes, NaN by class, so a
fast wrong answer cannot pass for a benchmark result.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench", help="time the reference's encode/decode against ml_dtypes and torch",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    parser.add_argument("--size", type=_positive, default=1 << 24, help="values per case (default 16M)")
    parser.add_argument("--format", "-f", default="e4m3fn", help="the target format (default e4m3fn)")
    parser.add_argument("--profile", "-p", default="ieee", help="the profile fp8check encodes with")
    parser.add_argument("--repeat", type=_positive, default=3, help="timed runs per case (best kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(run=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    result = fn()  # warm up: tables, allocations
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def run(args: argparse.Namespace) -> int:
    import ml_dtypes
    import numpy as np
    from rich.table import Table

    import fp8check
    from fp8check import formats, profiles
    from fp8check.cli import EXIT_OK
    from fp8check.terminal import console as make_console
    from fp8check.errors import InvalidValueError

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

    n = args.size
    rng = np.random.default_rng(args.seed)
    # Values across the format's range, with zeros, subnormals and overflow.
    base = (rng.standard_normal(n) * np.exp2(rng.integers(fmt.emin - 4, fmt.emax + 2, n))).astype(np.float32)
    with np.errstate(over="ignore"):  # beyond float16's range: Inf, as intended
        inputs = {"float32": base, "float16": base.astype(np.float16),
                  "bfloat16": base.astype(ml_dtypes.bfloat16)}
    nan = np.array([fmt.is_nan(c) for c in range(fmt.code_count)])

    console = make_console(wide=True)
    console.print(f"fp8check bench: {n:,} values, {fmt.name}, fp8check profile {profile.name}, best of "
                  f"{args.repeat}; ml_dtypes {ml_dtypes.__version__}"
                  + (f", torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""))
    table = Table(show_edge=False, header_style="bold")
    for column in ("case", "fp8check ns/value", "ml_dtypes ns/value", "torch ns/value",
                   "ml_dtypes / fp8check", "torch / fp8check"):
        table.add_column(column, justify="left" if column == "case" else "right")

    def ns(seconds: float) -> float:
        return seconds / n * 1e9

    for source, x in inputs.items():
        ours_s, ours = _best(lambda: fp8check.encode(x, fmt, profile), args.repeat)
        ml_s, ml = _best(lambda: x.astype(ml_type), args.repeat)
        agree = (ours == ml.view(np.uint8)) | (nan[ours] & nan[ml.view(np.uint8)])
        if profile.name in ("ieee", "ml_dtypes-0.6", "ml_dtypes-0.7") and not agree.all():
            raise AssertionError(f"fp8check and ml_dtypes disagree on {int((~agree).sum())} {source} inputs")
        torch_s = None
        if torch_type is not None:
            tx = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if source == "bfloat16" \
                else torch.from_numpy(x)
            torch_s, _ = _best(lambda: tx.to(torch_type), args.repeat)
        table.add_row(f"encode from {source}", f"{ns(ours_s):.2f}", f"{ns(ml_s):.2f}",
                      "-" if torch_s is None else f"{ns(torch_s):.2f}", f"{ml_s / ours_s:.1f}x",
                      "-" if torch_s is None else f"{torch_s / ours_s:.2f}x")

    codes = rng.integers(0, fmt.code_count, n, dtype=np.uint8)
    ours_s, ours = _best(lambda: fp8check.decode(codes, fmt), args.repeat)
    fp8 = codes.view(ml_type)
    ml_s, ml = _best(lambda: fp8.astype(np.float64), args.repeat)
    if not ((ours == ml) | (np.isnan(ours) & np.isnan(ml))).all():
        raise AssertionError("fp8check and ml_dtypes decode differently")
    torch_s = None
    if torch_type is not None:
        tc = torch.from_numpy(codes).view(torch_type)
        torch_s, _ = _best(lambda: tc.to(torch.float64), args.repeat)
    table.add_row("decode to float64", f"{ns(ours_s):.2f}", f"{ns(ml_s):.2f}",
                  "-" if torch_s is None else f"{ns(torch_s):.2f}", f"{ml_s / ours_s:.1f}x",
                  "-" if torch_s is None else f"{torch_s / ours_s:.2f}x")
    console.print(table)
    console.print("ratios above 1x: fp8check is faster. Goals: float32 no slower than ml_dtypes, "
                  "float16/bfloat16 faster than ml_dtypes.")
    return EXIT_OK

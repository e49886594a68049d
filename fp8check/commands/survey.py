"""``fp8check survey``: every built-in adapter here, every format, against what it claims.

A survey: it exits 0 even where a stack diverges (that is what it reports),
and says so plainly. Exit 2 only for usage errors.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "survey",
        help="check every FP8 cast available here (torch, ml_dtypes, Triton) against what it claims",
        description="Run every built-in adapter available on this machine (torch CPU/CUDA, ml_dtypes, Triton "
        "interpreted or compiled) for every format it supports: the exhaustive float16 and bfloat16 sweeps, the "
        "float32 sweep with every hazard input and Hypothesis examples, every code decoded, and a fingerprint "
        "of what the cast really implements.",
    )
    p.add_argument("--kernel", action="append", metavar="NAME", default=None,
                   help="survey only this built-in adapter (repeatable)")
    p.add_argument("--format", action="append", metavar="FMT", default=None,
                   help="survey only this format (repeatable)")
    p.add_argument("--max-examples", type=int, default=50, metavar="N",
                   help="Hypothesis examples per float32 check (default 50)")
    p.add_argument("--seed", type=int, default=0, metavar="N")
    p.add_argument("--no-fingerprint", action="store_true", help="skip the fingerprints (faster)")
    p.add_argument("--json", metavar="PATH", help="write every check as an fp8check results file")
    p.set_defaults(run=run)


_DTYPES = ("float32", "float16", "bfloat16")


def survey(kernels: list[Any], formats: list[Any] | None, *, max_examples: int, seed: int,
           with_fingerprint: bool = True, progress: Any = None) -> list[dict[str, Any]]:
    """One row per (kernel, format): the checks of every input dtype, decode, fingerprint."""
    from fp8check.kernels import KernelError

    rows = []
    for kernel in kernels:
        for fmt in kernel.formats:
            if formats is not None and fmt not in formats:
                continue
            row: dict[str, Any] = {"kernel": kernel, "format": fmt, "checks": [], "unsupported": None}
            why = kernel.unsupported_reason(fmt)
            if why is not None:
                row["unsupported"] = why
                rows.append(row)
                continue
            started = time.perf_counter()
            try:
                _survey_row(row, kernel, fmt, max_examples=max_examples, seed=seed,
                            with_fingerprint=with_fingerprint)
            except KernelError as exc:
                # A stack that cannot cast this format at all (e.g. Triton
                # 3.6's interpreter and fnuz) is reported, not fatal.
                row.update(checks=[], unsupported=f"the kernel raised: {exc}")
            row["seconds"] = time.perf_counter() - started
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def _survey_row(row: dict[str, Any], kernel: Any, fmt: Any, *, max_examples: int, seed: int,
                with_fingerprint: bool) -> None:
    from fp8check import engine
    from fp8check.fingerprint import fingerprint

    for dtype in _DTYPES:
        if dtype not in kernel.input_dtypes:
            continue
        result, _ = engine.run_check(kernel, fmt, None, input_dtype=dtype,
                                     max_examples=max_examples if dtype == "float32" else 0, seed=seed)
        row["checks"].append(result)
    if kernel.decode_fn is not None:
        checked, wrong = engine.decode_check(kernel, fmt)
        row["decode"] = {"checked": checked, "wrong": len(wrong), "divergences": [d.to_dict() for d in wrong]}
    if with_fingerprint:
        row["fingerprint"] = fingerprint(kernel, fmt, "float32")
    for r in row["checks"]:
        if "decode" in row:
            r.extra["decode"] = row["decode"]
        if "fingerprint" in row:
            r.extra["fingerprint"] = row["fingerprint"].to_dict()


def verdict(row: dict[str, Any]) -> tuple[str, str]:
    """(text, style) of a row's verdict."""
    if row["unsupported"]:
        return "unsupported", "dim"
    diverged = [r for r in row["checks"] if not r.passed]
    if not diverged:
        decode_bad = row.get("decode", {}).get("wrong", 0)
        return ("conforms" if not decode_bad else "casts conform; decode differs"), ("green" if not decode_bad else "yellow")
    if all(r.expected_failure for r in diverged):
        return "diverges: known upstream bug", "yellow"
    return "DIVERGES", "bold red"


def run(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    from fp8check import formats, kernels
    from fp8check.cli import EXIT_OK
    from fp8check.commands._shared import console
    from fp8check.errors import InvalidValueError
    from fp8check.results import CAST_CATEGORIES, dump_results, environment

    from fp8check.outputs import check_writable

    check_writable(args.json, "--json")  # before any work
    out = console()
    names = args.kernel or list(kernels.builtin_names())
    chosen, missing = [], []
    for name in names:
        if name not in kernels.builtin_names():
            raise InvalidValueError(f"--kernel {name!r}: not a built-in adapter ({', '.join(kernels.builtin_names())})")
        try:
            chosen.append(kernels.get_kernel(name))
        except kernels.KernelLoadError as exc:
            missing.append((name, str(exc)))
    wanted = [formats.get(f) for f in args.format] if args.format else None
    env = environment()
    out.print(Text("fp8check survey", style="bold") + Text(
        "  " + ", ".join(f"{k} {env[k]}" for k in ("torch", "ml_dtypes", "triton", "numpy") if k in env)
        + (f", {env['cuda_device']}" if "cuda_device" in env else ", no CUDA device")))
    for name, why in missing:
        out.print(Text(f"  {name}: not available here ({why})", style="dim"))
    started = time.perf_counter()
    rows = survey(chosen, wanted, max_examples=args.max_examples, seed=args.seed,
                  with_fingerprint=not args.no_fingerprint,
                  progress=lambda r: out.print(Text(f"  surveyed {r['kernel'].name} {r['format'].name} "
                                                    f"({r.get('seconds', 0):.1f}s)", style="dim")))
    elapsed = time.perf_counter() - started

    table = Table(title="FP8 casts against the profile each claims (float32, float16 and bfloat16 inputs)")
    for col in ("kernel", "format", "claims", "verdict", "divergent inputs by category", "decode", "fingerprint (float32)"):
        table.add_column(col, overflow="fold")
    notes: list[str] = []
    for row in rows:
        text, style = verdict(row)
        if row["unsupported"]:
            table.add_row(row["kernel"].name, row["format"].name, "-", Text(text, style=style),
                          row["unsupported"], "-", "-")
            continue
        totals = {c: 0 for c in CAST_CATEGORIES}
        checked = 0
        for r in row["checks"]:
            checked += r.checked
            for c, n in r.categories.items():
                totals[c] += n
        cats = ", ".join(f"{c} {n:,}" for c, n in totals.items() if n) or f"none of {checked:,}"
        known = next((r.expected_failure for r in row["checks"] if r.expected_failure), "")
        if known:
            if known not in notes:
                notes.append(known)
            text += f" [{notes.index(known) + 1}]"
        decode = row.get("decode")
        decode_text = "-" if decode is None else ("ok" if not decode["wrong"] else f"{decode['wrong']}/{decode['checked']} codes")
        fp = row.get("fingerprint")
        table.add_row(row["kernel"].name, row["format"].name, row["kernel"].claims.name, Text(text, style=style),
                      cats, decode_text, fp.text if fp is not None else "-")
    out.print(table)
    for i, note in enumerate(notes, 1):
        out.print(Text(f"[{i}] {note}", style="yellow"))
    decode_notes = {k.reason for r in rows if not r["unsupported"] and r.get("decode", {}).get("wrong")
                    for k in r["kernel"].known_divergences(r["format"], None, "decode")}
    for note in sorted(decode_notes):
        out.print(Text(f"decode: {note}", style="yellow"))

    surveyed = [r for r in rows if not r["unsupported"]]
    diverging = [r for r in surveyed if any(not c.passed for c in r["checks"])]
    known_only = [r for r in diverging if all(c.expected_failure for c in r["checks"] if not c.passed)]
    if diverging:
        out.print(Text(
            f"{len(diverging)} of {len(surveyed)} kernel x format pairs DIVERGE from the profile they claim "
            f"({len(known_only)} of them only by known upstream bugs). This is a survey: exit code 0.",
            style="bold yellow"))
    else:
        out.print(Text(f"All {len(surveyed)} kernel x format pairs conform to what they claim.", style="bold green"))
    out.print(Text(f"{elapsed:.1f}s", style="dim"))
    if args.json:
        checks = [c for r in rows for c in r["checks"]]
        dump_results(args.json, checks, env)
        out.print(f"wrote {len(checks)} checks to {args.json}")
    return EXIT_OK

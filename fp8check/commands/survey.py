"""``fp8check survey``: every built-in adapter here, every format, against what it claims.

A survey: it exits 0 even where a stack diverges (that is what it reports),
and says so plainly. Exit 2 only for usage errors.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from fp8check.casts.survey import survey, verdict


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
    p.add_argument("--zoo", action="store_true",
                   help="survey the FP8 quantizers of installed third-party packages instead (fp8check.zoo)")
    p.add_argument("--entry", action="append", metavar="ID", default=None,
                   help="with --zoo: only this zoo entry (repeatable)")
    p.set_defaults(run=run)


def run_zoo(args: argparse.Namespace) -> int:
    """``fp8check survey --zoo``: every installed zoo entry, in each mode it runs in here; exit 0."""
    import json

    import torch
    from rich.table import Table
    from rich.text import Text

    from fp8check import zoo
    from fp8check.cli import EXIT_OK
    from fp8check.terminal import console
    from fp8check.results import environment

    out = console()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    chosen = [zoo.get(e) for e in args.entry] if args.entry else None
    if chosen is None:
        missing = [e for e in zoo.entries() if e not in zoo.installed()]
        for e in missing:
            out.print(Text(f"  {e.id}: {e.package} not installed here", style="dim"))
    results = zoo.survey(chosen, device=device, max_examples=args.max_examples, seed=args.seed,
                         progress=lambda r: out.print(Text(f"  {r.entry.id} [{r.mode}] {r.seconds:.0f}s", style="dim")))
    table = Table(title=f"FP8 quantizers of installed packages against what they claim ({device})")
    for col in ("entry", "version", "mode", "claims", "values", "verdict", "divergences", "upstream / reason"):
        table.add_column(col, overflow="fold")
    style = {"conforms": "green", "known": "yellow", "diverges": "bold red", "fixed?": "bold yellow"}
    for r in results:
        cats = ", ".join(f"{k} {n:,}" for k, n in r.categories.items()) or "-"
        why = "; ".join(dict.fromkeys(k.upstream for k in r.known)) if r.known else r.detail
        table.add_row(r.entry.id, r.version or "-", r.mode, r.entry.claims, f"{r.checked:,}",
                      Text(r.verdict, style=style.get(r.status, "dim")), cats, why or "-")
    out.print(table)
    out.print(Text("This is a survey: exit code 0.", style="dim"))
    if args.json:
        doc = {"environment": environment(), "results": [r.to_dict() for r in results]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, default=str)
        out.print(f"wrote {len(results)} zoo results to {args.json}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    if getattr(args, "zoo", False):
        return run_zoo(args)
    from rich.table import Table
    from rich.text import Text

    from fp8check import formats
    from fp8check.casts import adapters
    from fp8check.cli import EXIT_OK
    from fp8check.terminal import console
    from fp8check.errors import InvalidValueError
    from fp8check.results import CAST_CATEGORIES, dump_results, environment

    from fp8check.outputs import check_writable

    check_writable(args.json, "--json")  # before any work
    out = console()
    names = args.kernel or list(adapters.builtin_names())
    chosen, missing = [], []
    for name in names:
        if name not in adapters.builtin_names():
            raise InvalidValueError(f"--kernel {name!r}: not a built-in adapter ({', '.join(adapters.builtin_names())})")
        try:
            chosen.append(adapters.get_kernel(name))
        except adapters.KernelLoadError as exc:
            missing.append((name, str(exc)))
    wanted = [formats.get(f) for f in args.format] if args.format else None
    env = environment()
    out.print(Text("fp8check survey", style="bold") + Text(
        "  " + ", ".join(f"{k} {env[k]}" for k in ("torch", "ml_dtypes", "triton", "numpy") if k in env)
        + (f", {env['cuda_device']}" if "cuda_device" in env else ", no CUDA device")))
    for name, why in missing:
        out.print(Text(f"  {name}: not available here ({why})", style="dim"))
    if not chosen:
        raise InvalidValueError("nothing to survey: " + "; ".join(f"{name} is not available here ({why})"
                                                                   for name, why in missing))
    for kernel in chosen:  # which observation of the stack registry each adapter claims from
        if kernel.observation is not None:
            out.print(Text(f"  {kernel.name}: pinned by the stack registry as {kernel.observation.label}, "
                           f"profile {kernel.claims.name}", style="dim"))
            for line in kernel.observation.fixed:
                out.print(Text(f"    {line}", style="dim"))
        else:
            out.print(Text(f"  {kernel.name}: {kernel.unpinned}", style="yellow"))
    started = time.perf_counter()
    rows = survey(chosen, wanted, max_examples=args.max_examples, seed=args.seed,
                  with_fingerprint=not args.no_fingerprint or any(k.unpinned for k in chosen),
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
    unpinned = [r for r in surveyed if r["kernel"].unpinned]
    judged = [r for r in surveyed if not r["kernel"].unpinned]
    diverging = [r for r in judged if any(not c.passed for c in r["checks"])]
    known_only = [r for r in diverging if all(c.expected_failure for c in r["checks"] if not c.passed)]
    if not surveyed:
        out.print(Text("No kernel x format pair could be surveyed here (see the unsupported rows).",
                       style="bold yellow"))
    elif diverging:
        out.print(Text(
            f"{len(diverging)} of {len(judged)} pinned kernel x format pairs DIVERGE from the profile they claim "
            f"({len(known_only)} of them only by known upstream bugs). This is a survey: exit code 0.",
            style="bold yellow"))
    elif judged:
        text = "The 1 pinned kernel x format pair conforms to what it claims." if len(judged) == 1 else \
            f"All {len(judged)} pinned kernel x format pairs conform to what they claim."
        out.print(Text(text, style="bold green"))
    if unpinned:
        out.print(Text(f"{len(unpinned)} kernel x format pair{'s' if len(unpinned) != 1 else ''} come from releases "
                       "or platforms the stack registry does not pin: the fingerprints above say what they do "
                       "(a finding about this environment, not a verdict).", style="bold yellow"))
    out.print(Text(f"{elapsed:.1f}s", style="dim"))
    if args.json:
        checks = [c for r in rows for c in r["checks"]]
        dump_results(args.json, checks, env)
        out.print(f"wrote {len(checks)} {'check' if len(checks) == 1 else 'checks'} to {args.json}")
    return EXIT_OK

"""``fp8check audit``: what an FP8 checkpoint holds and whether it runs on a target.

Exit codes: 0 no finding reaches ``--fail-on``; 1 one does; 2 an input could
not be read safely (the rest is still audited and reported) or the usage is
wrong.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "audit",
        help="audit FP8 checkpoints: codes, scales, hazards, portability to a target",
        description="Audit FP8 checkpoints (.safetensors, torch .pt/.pth/.bin, sharded directories) without "
                    "executing anything from them.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="checkpoint files, directories or *.index.json")
    p.add_argument("--target", action="append", default=[], metavar="T",
                   help="a format (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, fnuz, ocp) or a device family "
                        "(mi300, mi325, mi350, mi355, h100, h200, b200, ...); repeatable or comma-separated")
    p.add_argument("--json", metavar="OUT", help="write the full report as JSON to OUT ('-' for stdout)")
    p.add_argument("--html", metavar="OUT", help="write a self-contained HTML audit report to OUT")
    p.add_argument("--fail-on", choices=("error", "warning"), default="error",
                   help="exit 1 when a finding of this severity or worse is found (default: error)")
    p.add_argument("--dequant-dtype", choices=("bfloat16", "float16", "float32"),
                   help="dtype weights are dequantized to (default: the config's torch_dtype, else bfloat16)")
    p.add_argument("--bytes-format", metavar="FMT",
                   help="read uint8/int8 tensors that have a scale as this FP8 format")
    p.add_argument("--jobs", type=int, metavar="N", help="parallel workers (default: CPU count, at most 32)")
    p.add_argument("--parallel", choices=("threads", "processes"), default="threads",
                   help="threads share one process (default, measured faster); processes audit one file each")
    p.add_argument("--all", action="store_true", help="list every FP8 tensor, not only those with findings")
    p.add_argument("--max-rows", type=int, default=50, metavar="N", help="rows of the tensor table (default 50)")
    p.add_argument("-v", "--verbose", action="store_true", help="show info findings, every shown finding's message (10 without -v) and every verdict "
                        "reason")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no table (exit code and --json only)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fp8check.checkpoints.audit import AuditOptions, audit
    from fp8check.errors import InvalidValueError
    from fp8check.outputs import check_writable, write_json
    from fp8check.terminal.checkpoints import plain, print_report
    from fp8check.terminal.progress import RichProgress

    check_writable(args.json, "--json")  # before any work: a typo must not cost a long audit
    check_writable(args.html, "--html")
    targets = tuple(t for raw in args.target for t in raw.split(",") if t.strip())
    if args.jobs is not None and args.jobs < 1:
        raise InvalidValueError(f"--jobs must be at least 1, got {args.jobs}")
    if args.max_rows < 0:
        raise InvalidValueError(f"--max-rows must be at least 0, got {args.max_rows}")
    options = AuditOptions(targets=targets, dequant_dtype=args.dequant_dtype, bytes_format=args.bytes_format,
                           jobs=args.jobs, parallel=args.parallel, fail_on=args.fail_on)
    progress = RichProgress(enabled=False if args.quiet else None)
    result = audit(args.paths, options, progress)
    try:
        for f in result.files:
            if f.status == "error":
                print(f"fp8check: error: {plain(f.path)}: {plain(f.error or '')}", file=sys.stderr)
        for ck in result.checkpoints:
            for problem in ck.config_problems:
                print(f"fp8check: error: {plain(problem)}", file=sys.stderr)
        if args.json:
            write_json(args.json, result.json_data(), "--json")
        if args.html:
            from fp8check.report import audit_report, source_from_audit, write_html

            name = " ".join(str(p) for p in args.paths)
            write_html(args.html, audit_report([source_from_audit(name, _bounded_document(result))]))
        if not args.quiet and args.json != "-":
            print_report(result, show_all=args.all, max_rows=args.max_rows, verbose=args.verbose)
        return int(result.exit_code)
    finally:
        result.close()


def _bounded_document(result: object, rows: int = 2000) -> dict:
    """The audit's JSON document for the HTML report with at most ``rows`` tensors (the worst first,
    as the report lists them): a checkpoint of any number of tensors renders in bounded memory."""
    import heapq

    from fp8check.outputs import json_ready

    rank = {"error": 0, "warning": 1, "info": 2}
    doc = json_ready(result._head())  # type: ignore[attr-defined]
    keyed = ((rank.get(b.severity or "", 3), b.role != "fp8", b.name, i)
             for i, b in enumerate(result.tensors.briefs()))  # type: ignore[attr-defined]
    kept = [k[3] for k in heapq.nsmallest(rows, keyed)]
    doc["tensors"] = [json_ready(t.to_dict()) for t in result.tensors.get(kept)]  # type: ignore[attr-defined]
    doc["tensors_omitted"] = len(result.tensors) - len(kept)  # type: ignore[attr-defined]
    return doc

"""``fp8check convert SRC DST --to e4m3fnuz``: exact fn <-> fnuz conversion, verified.

Exit codes: 0 every tensor of DST dequantizes to exactly SRC's values; 1 DST
was written but some tensors are not exact (each is named with the reason);
2 SRC cannot be read safely, or the usage is wrong.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert an FP8 checkpoint between e4m3fn and e4m3fnuz (or e5m2/e5m2fnuz) exactly, and verify it",
        description="Convert FP8 tensors to their fn/fnuz counterpart (codes remapped, scales rescaled exactly), "
                    "write safetensors (torch files holding torchao tensors: torch files again), the configs "
                    "rewritten to say what the tensors now are, and verify every dequantized value bit for bit. "
                    "Packed FP4 (NVFP4, MXFP4) and MX tensors are kept as they are.",
    )
    p.add_argument("src", metavar="SRC", help="a checkpoint file, directory or *.index.json")
    p.add_argument("dst", metavar="DST", help="an output *.safetensors file, or a directory (one shard per input file)")
    p.add_argument("--to", required=True, metavar="FMT",
                   help="e4m3fnuz, e4m3fn, e5m2fnuz, e5m2, or fnuz / ocp (every FP8 format to its counterpart)")
    p.add_argument("--activation-scales", choices=("scale", "keep"), default="scale",
                   help="multiply input/KV-cache scales by the same factor as serving stacks do (default) or keep them")
    p.add_argument("--json", metavar="OUT", help="write the conversion report as JSON")
    p.add_argument("--force", action="store_true", help="overwrite DST")
    p.add_argument("--jobs", type=int, metavar="N", help="parallel workers for the reading pass")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from fp8check.terminal import console as terminal_console

    from fp8check.checkpoints.convert import ConvertOptions, convert
    from fp8check.checkpoints.convert import check_destination
    from fp8check.outputs import check_writable, json_ready, write_json
    from fp8check.terminal.checkpoints import clean, plain
    from fp8check.terminal.progress import RichProgress

    check_writable(args.json, "--json")  # before any work
    check_destination(args.dst, force=args.force)
    options = ConvertOptions(to=args.to, activation_scales=args.activation_scales, force=args.force, jobs=args.jobs)
    report = convert(args.src, args.dst, options, RichProgress(enabled=False if args.quiet else None))
    for p in report["problems"]:
        print(f"fp8check: error: {plain(p['path'])}: {plain(p['error'])}", file=sys.stderr)
    if args.json:
        write_json(args.json, json_ready(report))
    s = report["summary"]
    if not args.quiet and not report["problems"]:
        console = terminal_console()
        changed = [t for t in report["tensors"] if t["action"] != "copied" or not t["exact"]]
        if changed:
            table = Table(title="converted tensors", title_justify="left", header_style="bold")
            for col in ("tensor", "action", "from", "to", "x scale", "-0 -> 0", "NaN kept", "verified"):
                table.add_column(col)
            for t in changed[:60]:
                table.add_row(clean(t["name"], 100), t["action"], t["from"] or "-", t["to"] or "-", f"{t['factor']:g}",
                              str(t.get("neg_zero_to_zero", "-")), str(t.get("nan_kept", "-")),
                              ("[green]exact[/]" + (f" ({clean(t['reason'], 200)})" if t["reason"] else "")) if t["exact"]
                              else f"[bold red]NOT EXACT[/] {clean(t['reason'], 200)}")
            console.print(table)
            if len(changed) > 60:
                console.print(f"  … {len(changed) - 60} more (see --json)")
        console.print(f"{s['converted']} converted, {s['scaled']} {'scale' if s['scaled'] == 1 else 'scales'} rescaled, "
                      f"{s['copied']} copied" + (f", {s['kept']} kept as they were" if s.get("kept") else "")
                      + (f", {', '.join(clean(c) for c in report['configs'])} rewritten" if report.get("configs") else "")
                      + (f", {len(report['files_copied'])} other files copied" if report.get("files_copied") else "")
                      + "; "
                      f"{clean(args.dst)} verified: "
                      + ("[bold green]every dequantized value equals the source[/]" if not s["not_exact"]
                         else f"[bold red]{s['not_exact']} {'tensor' if s['not_exact'] == 1 else 'tensors'} "
                              "not exact[/]"))
        if s.get("cast_back_rounded"):
            src_fmt = next(t["from"] for t in report["tensors"] if t.get("cast_back_rounded"))
            console.print(f"note: {s['cast_back_rounded']:,} values of DST are ones {src_fmt} cannot hold at the new "
                          f"scale (fnuz's bottom binade): a loader that casts the tensors into {src_fmt} parameters by "
                          "value (transformers' compressed-tensors integration does) rounds them; loaders that take "
                          "the stored dtype (transformers' fp8 dequantize, torchao) do not")
    carried = report.get("carried_errors") or []
    if carried:  # one line, whatever -q: the conversion fixes formats, not these
        codes = sorted({c["code"] for c in carried})
        first = carried[0]
        print(f"fp8check: warning: {plain(args.src)} has {len(carried)} error "
              f"{'finding' if len(carried) == 1 else 'findings'} that DST carries over unchanged ({', '.join(codes)}; "
              f"{plain(first['name'])}: {plain(first['message'], 300)}); fp8check audit SRC lists them", file=sys.stderr)
    for t in report["tensors"]:
        if not t["exact"]:
            print(f"fp8check: not exact: {plain(t['name'])}: {plain(t['reason'])}", file=sys.stderr)
    return int(s["exit_code"])

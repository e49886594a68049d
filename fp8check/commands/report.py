"""``fp8check report``: render saved results or audit JSON as one self-contained HTML file.

    fp8check report RESULTS.json [MORE.json ...] -o OUT.html
    fp8check report A.json B.json --compare -o diff.html

Results files (``--fp8check-json`` of the pytest plugin, ``fp8check check
--json``) are merged into one divergence report; audit files
(``fp8check audit --json``) into one audit report; a gate file (``fp8check
gate --json``) is rendered as the gate page; ``--compare`` shows what
changed from A to B. Exit 0 when the page is written, 2 for a file that is
missing, not JSON or not fp8check's.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="render saved results or audit JSON as a self-contained HTML report (or compare two runs)",
        description="Render one or more results files (fp8check check --json, pytest --fp8check-json) or audit "
        "files (fp8check audit --json), or one gate file (fp8check gate --json), as one self-contained HTML page; "
        "with --compare, what changed between "
        "two results files.",
    )
    p.add_argument("inputs", nargs="+", metavar="FILE.json",
                   help="results or audit JSON files (merged), or one gate JSON file")
    p.add_argument("-o", "--output", required=True, metavar="OUT.html", help="the HTML file to write")
    p.add_argument("--compare", action="store_true", help="compare exactly two results files: A (before) and B (after)")
    p.add_argument("--title", default=None, help="the page title (default: by kind of report)")
    p.add_argument("--max-rows", type=int, default=None, metavar="N",
                   help="rows listed per check (divergences) or tensors (audit) in the page; counts stay exact")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fp8check.cli import EXIT_OK
    from fp8check.errors import InvalidValueError
    from fp8check.report import report_from_files, write_html
    from fp8check.terminal import format_bytes

    from fp8check.outputs import check_writable

    check_writable(args.output, "-o")  # before any work
    if args.max_rows is not None and args.max_rows < 0:
        raise InvalidValueError(f"--max-rows {args.max_rows}: must be >= 0")
    html = report_from_files(args.inputs, compare=args.compare, title=args.title, max_rows=args.max_rows)
    size = write_html(args.output, html, what="-o")
    print(f"fp8check: wrote {args.output} ({format_bytes(size)})")
    return EXIT_OK

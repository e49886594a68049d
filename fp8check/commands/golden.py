"""``fp8check golden generate|verify [--dir DIR]``: the golden vectors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "golden", help="regenerate or verify the golden vectors",
        description="Regenerate the golden vectors from the reference, or verify them against "
                    "their SHA-256 manifest and the reference (exit 1 naming each file that differs).")
    parser.add_argument("action", choices=("generate", "verify"))
    parser.add_argument("--dir", type=Path, default=None,
                        help="the golden directory (default: golden/ of this checkout, else ./golden)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fp8check import golden
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.errors import InvalidValueError

    root = args.dir if args.dir is not None else golden.default_directory()
    if args.action == "generate":
        from fp8check.outputs import check_writable

        # before any work: the nearest existing directory of --dir must take new files
        existing = root
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        if not existing.is_dir():
            raise InvalidValueError(f"--dir {root}: cannot write: {existing} is not a directory")
        check_writable(existing / golden.MANIFEST, "--dir")
        try:
            written = golden.generate(root)
        except OSError as exc:
            raise InvalidValueError(f"{root}: cannot write the golden vectors: {exc.strerror or exc}") from None
        print(f"wrote {len(written)} files under {root} (manifest: {root / golden.MANIFEST})")
        return EXIT_OK
    if not root.is_dir():
        raise InvalidValueError(f"{root}: no such golden directory")
    problems = golden.verify(root)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"golden vectors under {root}: {len(problems)} problem(s)", file=sys.stderr)
        return EXIT_DIVERGED
    count = sum(1 for p in root.rglob("*") if p.suffix in (".csv", ".runs"))
    print(f"golden vectors under {root}: {count} files match the manifest and the reference")
    return EXIT_OK

"""The ``fp8check`` command line: a thin shell over the library.

Each subcommand lives in its own module under :mod:`fp8check.commands` with
``register(subparsers)`` and a ``run(args) -> int``; modules import their
heavy dependencies inside ``run`` so that ``fp8check --help`` stays fast.
Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from typing import Any, NoReturn, Sequence

from fp8check.errors import FP8CheckError

EXIT_OK = 0
EXIT_DIVERGED = 1  # a kernel diverged, an audit found a finding at --fail-on
EXIT_USAGE = 2  # bad input, an unreadable file, a kernel that cannot be called

# One module per subcommand; the order is the order of `fp8check --help`.
COMMANDS = (
    "survey",
    "check",
    "fingerprint",
    "sweep",
    "explain",
    "table",
    "golden",
    "bench",
    "audit",
    "convert",
    "report",
    "fuzz",
    "train",
    "gate",
)


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> ArgumentParser:
    from fp8check import __version__

    parser = ArgumentParser(prog="fp8check", description="Prove FP8 code numerically correct, bit for bit.")
    parser.add_argument("--version", action="version", version=f"fp8check {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMANDS:
        importlib.import_module(f"fp8check.commands.{name}").register(sub)
    return parser


# "-inf" and "-nan" are values (fp8check explain -inf ...), never options;
# argparse would take them for unknown options, so they get a leading space.
_SIGNED_SPECIALS = {"-inf", "-infinity", "-nan"}
# and so are negative numbers in any notation (-1e-3, -0x1p-9, -.5): argparse only knows -1 and -1.5
_NEGATIVE_NUMBER = __import__("re").compile(r"^-(\d|\.\d|0x)[\w.+-]*$")


@functools.lru_cache(maxsize=1)
def _parser() -> ArgumentParser:
    # built once per process: argparse builds a dozen subparsers in about 25 ms, which a caller of
    # main() in a loop (the checkpoint fuzzer runs thousands of audits in one process) pays each time
    return build_parser()


def _no_driver_hint(error: str, args: Any) -> str:
    """Triton's "0 active drivers" (a Triton kernel launched on a machine without a GPU), with what to do: every
    kind's kernel reaches it (a cast's, a quantizer's, a gate's)."""
    from fp8check.loader import no_driver_hint

    if hasattr(args, "triton_target"):
        return no_driver_hint(error, "run it in fp8check's faithful interpreter with --triton-target sm90, gfx942, ...")
    return no_driver_hint(error, "this command runs kernels as they are; `fp8check check ... --triton-target sm90` "
                                 "checks it in fp8check's faithful interpreter")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [f" {a}" if a.lower() in _SIGNED_SPECIALS or _NEGATIVE_NUMBER.match(a) else a for a in argv]
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except FP8CheckError as exc:
        print(f"fp8check: error: {_no_driver_hint(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("fp8check: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

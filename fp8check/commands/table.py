"""``fp8check table FMT``: every code of a format, its fields and value."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "table", help="print every code of a format with its bit fields and value",
        description="Print every code of a format: the code, its fields sign|exponent|mantissa, "
                    "its class, its exact value and the value as a hex float.")
    parser.add_argument("format", metavar="FMT", help="the format (e4m3fn, e4m3fnuz, e5m2, ...)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from fp8check import formats
    from fp8check.cli import EXIT_OK
    from fp8check.codes import bit_fields
    from fp8check.commands.explain import _show
    from fp8check.golden import code_label
    from fp8check.reference import spec
    from fp8check.terminal import console as make_console

    fmt = formats.get(args.format)
    console = make_console(wide=True)
    console.print(f"{fmt.name}: {fmt.description}")
    console.print(f"{int(fmt.signed)} sign, {fmt.exponent_bits} exponent, {fmt.mantissa_bits} mantissa bits, "
                  f"bias {fmt.bias}; NaN codes: {', '.join(f'{c:#04x}' for c in fmt.nan_codes) or 'none'}; "
                  f"Inf codes: {', '.join(f'{c:#04x}' for c in fmt.inf_codes) or 'none'}")
    table = Table(show_edge=False, header_style="bold")
    for column in ("code", "s|exp|man", "class", "value", "exact (hex float)"):
        table.add_column(column, no_wrap=True, justify="right" if column == "value" else "left")
    for code in range(fmt.code_count):
        value = spec.decode_code(code, fmt)
        table.add_row(f"{code:#04x}", bit_fields(code, fmt, "|"), code_label(code, fmt), _show(value),
                      "nan" if value != value else value.hex())
    console.print(table)
    return EXIT_OK

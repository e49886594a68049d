"""``fp8check explain VALUE --format FMT``: one value under every profile.

The calculator an FP8 kernel author keeps open: the input's exact value and
bit pattern, then per named profile the code it becomes, the code's bit
fields (sign | exponent | mantissa), its value, the neighbouring values of
the format, and what happened (exact, rounded away from zero at a tie, overflow to NaN,
saturated, ...).

VALUE is a decimal (``465``, ``-1e-3``), ``inf``, ``nan`` (either with a
sign), a hex float (``0x1.d1p8``) or hex bits (``0x43E88000``, ``0x3c00``)
whose width picks the input type (4 digits float16, 8 float32, 16 float64)
unless ``--input-dtype`` says otherwise (``bfloat16`` for 4-digit bits);
another width needs ``--input-dtype`` (``0x80`` is likelier an fp8 code:
``fp8check table FMT`` says what each code means).
"""

from __future__ import annotations

import argparse
import math
import re
from fractions import Fraction
from typing import Any

SOURCES = ("float16", "bfloat16", "float32", "float64")
_HEX_BITS = re.compile(r"0x[0-9a-f]+")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain", help="show the code of one value under every profile",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("value", metavar="VALUE",
                        help="a decimal, inf, nan, a hex float (0x1.8p3) or hex bits (0x43E88000, 0x3c00)")
    parser.add_argument("--format", "-f", required=True, help="the target format (e4m3fn, e4m3fnuz, ...)")
    parser.add_argument("--input-dtype", choices=SOURCES, default=None,
                        help="the input type (default: from the width of hex bits, else float32)")
    parser.add_argument("--profile", "-p", action="append", default=None,
                        help="a profile to show (repeatable; default: every named profile)")
    parser.set_defaults(run=run)


def parse_value(text: str, input_dtype: str | None, fmt_name: str = "") -> tuple[str, int, str]:
    """(source type, IEEE bit pattern, note on the conversion) for VALUE (``fmt_name``: the target format, named
    in the error for hex bits whose width is no input type's)."""
    from fp8check.errors import InvalidValueError
    from fp8check.formats import SOURCE_FORMATS
    from fp8check.reference import spec

    raw = text.strip().lower().replace("_", "")
    if _HEX_BITS.fullmatch(raw):
        digits = len(raw) - 2
        if input_dtype is None and digits not in (4, 8, 16):
            # 0x80 is likelier an fp8 code than float16 bits 0x0080: say how to ask for either
            raise InvalidValueError(
                f"{text!r} is {digits} hex digit{'s' if digits != 1 else ''}: "
                f"fp8check table {fmt_name or 'FORMAT'} lists what each code of the format means; as the bits of "
                "an input, give 4 (float16), 8 (float32) or 16 (float64) digits, or --input-dtype")
        source = input_dtype or ("float16" if digits <= 4 else "float32" if digits <= 8 else "float64")
        bits = int(raw, 16)
        width = SOURCE_FORMATS[source].bits
        if bits >> width:
            raise InvalidValueError(f"{text!r} has more than {width} bits, too many for {source}")
        return source, bits, "bits given"
    source = input_dtype or "float32"
    negative = raw.startswith("-")
    body = raw.lstrip("+-")
    magnitude: Any
    if body in ("inf", "infinity"):
        magnitude = math.inf
    elif body == "nan":
        magnitude = math.nan
    else:
        try:
            magnitude = Fraction(float.fromhex(body)) if body.startswith("0x") else Fraction(body)
        except (ValueError, ZeroDivisionError, OverflowError):
            raise InvalidValueError(
                f"cannot read {text!r} as a value: give a decimal (465, -1e-3), inf, nan, "
                f"a hex float (0x1.8p3) or hex bits (0x43E88000)") from None
    bits = spec.source_bits(negative, magnitude, source)
    if isinstance(magnitude, Fraction):
        held = spec.source_value(bits, SOURCE_FORMATS[source])[1]
        note = "exact" if held == magnitude else f"rounded to the nearest {source}"
    else:
        note = "exact"
    return source, bits, note


def _show(value: Any) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    value = float(value)
    if math.isinf(value):
        return "-Inf" if value < 0 else "Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    return f"{value:.10g}"


def _finite_values(fmt) -> list[tuple[Fraction, int]]:
    found = []
    for code in range(fmt.code_count):
        v = fmt.exact_value(code)
        if isinstance(v, Fraction) and not (v == 0 and code & fmt.sign_mask):
            found.append((v, code))
    return sorted(found)


def neighbours(code: int, fmt) -> str:
    """The finite values of ``fmt`` just below and above the value of ``code``."""
    from fp8check.reference import spec

    value = fmt.exact_value(code)
    if not isinstance(value, Fraction):
        return "-"
    values = _finite_values(fmt)
    below = [(v, c) for v, c in values if v < value]
    above = [(v, c) for v, c in values if v > value]
    low = f"{_show(spec.decode_code(below[-1][1], fmt))} ({below[-1][1]:#04x})" if below else "none"
    high = f"{_show(spec.decode_code(above[0][1], fmt))} ({above[0][1]:#04x})" if above else "none"
    return f"{low} < · < {high}"


def outcome(source: str, bits: int, code: int, fmt, profile) -> str:
    """What the profile did to the input, in a few words."""
    from fp8check.formats import SOURCE_FORMATS
    from fp8check.reference import spec

    p = profile.resolve(fmt)
    src = SOURCE_FORMATS[source]
    negative, magnitude = spec.source_value(bits, src)
    result = fmt.exact_value(code)
    if isinstance(magnitude, float) and math.isnan(magnitude):
        return "NaN → NaN" if fmt.is_nan(code) else "NaN → " + _show(spec.decode_code(code, fmt)) + " (no NaN code)"
    prefix = ""
    arriving = magnitude
    inter = SOURCE_FORMATS.get(p.intermediate or "")
    if inter is not None and isinstance(magnitude, Fraction) and magnitude != 0:
        rounded = spec.round_magnitude(magnitude, inter, "rne")
        arriving = math.inf if rounded > Fraction(inter.max) else rounded
        if arriving != magnitude:
            prefix = f"via {inter.name} {'-' if negative else ''}{_show(arriving)}; "
    if not fmt.signed and (negative or arriving == 0):
        what = "zero" if arriving == 0 else "negative"
        if fmt.is_nan(code):
            return prefix + f"{what} → NaN (unsigned, no zero)"
        return prefix + f"{what} → {_show(spec.decode_code(code, fmt))}"
    if arriving == math.inf:
        if fmt.is_nan(code):
            return prefix + "Inf → NaN"
        if fmt.is_inf(code):
            return prefix + "Inf → Inf"
        return prefix + "Inf → max (saturated)"
    if fmt.is_nan(code):
        return prefix + "overflow → NaN"
    if fmt.is_inf(code):
        return prefix + "overflow → Inf"
    assert isinstance(result, Fraction)
    magnitude_out = abs(result)
    if magnitude_out == arriving:
        if negative and arriving == 0 and not fmt.has_negative_zero:
            return prefix + "-0 → 0 (no -0 in the format)"
        return prefix + "exact"
    if arriving > Fraction(fmt.max) and magnitude_out == Fraction(fmt.max):
        return prefix + "beyond max → max"
    values = [v for v, _ in _finite_values(fmt) if v >= 0]
    below = max((v for v in values if v <= arriving), default=None)
    above = min((v for v in values if v >= arriving), default=None)
    tie = below is not None and above is not None and arriving * 2 == below + above
    if magnitude_out == 0:
        return prefix + ("flushed to zero" if p.subnormals == "flush" else "underflow → 0")
    if p.subnormals == "flush" and magnitude_out < arriving and below and below < Fraction(fmt.smallest_normal):
        return prefix + "flushed to zero"
    # magnitudes: -0.001 -> -0.00195 went away from zero, which "up" would misname for a negative value
    way = "away from zero" if magnitude_out > arriving else "toward zero"
    if tie and p.rounding in ("rne", "rna"):
        way += {"rne": "; tie: to even", "rna": "; tie: away"}[p.rounding]
    return prefix + f"rounded to a {'larger' if magnitude_out > arriving else 'smaller'} magnitude ({way})"


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from fp8check import formats, profiles
    from fp8check.cli import EXIT_OK
    from fp8check.formats import SOURCE_FORMATS
    from fp8check.codes import bit_fields
    from fp8check.reference import spec
    from fp8check.terminal import console

    fmt = formats.get(args.format)
    chosen = [profiles.get(name) for name in args.profile] if args.profile else list(profiles.PROFILES.values())
    source, bits, note = parse_value(args.value, args.input_dtype, fmt.name)
    src = SOURCE_FORMATS[source]
    negative, magnitude = spec.source_value(bits, src)
    if isinstance(magnitude, float) and math.isnan(magnitude):
        shown = f"{'-' if negative else ''}NaN, payload {bits & src.mantissa_mask:#x}"
    else:
        shown = _show(-float(magnitude) if negative else float(magnitude))
        if negative and magnitude == 0:
            shown = "-0"

    out = console(wide=True)
    out.print(f"input   {args.value.strip()} → {source} 0x{bits:0{src.bits // 4}x} = {shown} ({note})")
    out.print(f"format  {fmt.name}: {fmt.description}")
    out.print(f"        {int(fmt.signed)} sign, {fmt.exponent_bits} exponent, {fmt.mantissa_bits} mantissa "
                  f"bits, bias {fmt.bias}; max {_show(fmt.max)}, smallest normal {_show(fmt.smallest_normal)}, "
                  f"smallest subnormal {_show(fmt.smallest_subnormal)}")
    table = Table(show_edge=False, header_style="bold")
    for column in ("profile", "code", "s|exp|man", "value", "neighbours", "what happened", "rules"):
        table.add_column(column, no_wrap=column not in ("rules",))
    for profile in chosen:
        if not profile.supports(fmt):
            table.add_row(profile.name, "-", "-", "-", "-", f"does not define {fmt.name}", profile.description)
            continue
        code = spec.encode_bits(bits, source, fmt, profile)
        table.add_row(profile.name, f"{code:#04x}", bit_fields(code, fmt, "|"), _show(spec.decode_code(code, fmt)),
                      neighbours(code, fmt), outcome(source, bits, code, fmt, profile), profile.summary(fmt))
    out.print(table)
    return EXIT_OK

"""``fp8check explain`` and ``fp8check table`` through the CLI entry point."""

import pytest

from fp8check import formats, profiles
from fp8check.cli import main


def rows(out: str) -> dict[str, list[str]]:
    """The table rows of explain/table output, by their first cell."""
    found = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[0]:
            found[cells[0]] = cells[1:]
    return found


def explain(capsys, *argv):
    assert main(["explain", *argv]) == 0
    out = capsys.readouterr().out
    return out, rows(out)


def test_465_into_e4m3fn_overflows_or_saturates_by_profile(capsys):
    # 465 is past the overflow tie 464: NaN without saturation, 448 with it.
    out, table = explain(capsys, "465", "--format", "e4m3fn")
    assert "float32 0x43e88000 = 465 (exact)" in out
    assert set(table) == set(profiles.names())
    for name in ("ieee", "ml_dtypes-0.6", "ml_dtypes-0.7", "torch-2.11"):
        assert table[name][:3] == ["0x7f", "0|1111|111", "NaN"] and table[name][4] == "overflow → NaN"
    for name in ("satfinite", "rtz", "torch-2.12", "triton-sm90", "triton-interpreter", "ocp-mx"):
        assert table[name][:3] == ["0x7e", "0|1111|110", "448"], name
        assert table[name][3] == "416 (0x7d) < · < none"


def test_hex_bits_pick_the_input_type_by_width(capsys):
    out, table = explain(capsys, "0x43E88000", "-f", "e4m3fn", "-p", "ieee")
    assert "float32 0x43e88000 = 465" in out and table["ieee"][0] == "0x7f"
    out, table = explain(capsys, "0x3c00", "-f", "e4m3fn", "-p", "ieee")
    assert "float16 0x3c00 = 1" in out and table["ieee"][:3] == ["0x38", "0|0111|000", "1"]
    # As bfloat16 bits 0x3c00 is 2**-7: the e4m3fn subnormal 4 * 2**-9.
    out, table = explain(capsys, "0x3c00", "-f", "e4m3fn", "-p", "ieee", "--input-dtype", "bfloat16")
    assert "bfloat16 0x3c00 = 0.0078125" in out and table["ieee"][:3] == ["0x04", "0|0000|100", "0.0078125"]


def test_the_float64_double_rounding_is_explained(capsys):
    out, table = explain(capsys, "0x3FF1000000440000", "-f", "e4m3fn", "-p", "ieee", "-p", "ml_dtypes-0.6",
                         "-p", "ml_dtypes-0.7")
    assert "float64 0x3ff1000000440000" in out
    assert table["ieee"][0] == "0x39" and table["ieee"][4] == "rounded to a larger magnitude (away from zero)"
    assert table["ml_dtypes-0.6"][0] == "0x38"
    assert table["ml_dtypes-0.6"][4] == "via float32 1.0625; rounded to a smaller magnitude (toward zero; tie: to even)"
    assert table["ml_dtypes-0.7"][0] == "0x39"
    assert table["ml_dtypes-0.7"][4] == "rounded to a larger magnitude (away from zero)"


def test_a_tie_and_a_decimal_that_float32_cannot_hold(capsys):
    out, table = explain(capsys, "1.0625", "-f", "e4m3fn", "-p", "ieee", "-p", "rtz")
    assert table["ieee"][4] == "rounded to a smaller magnitude (toward zero; tie: to even)" and table["rtz"][4] == "rounded to a smaller magnitude (toward zero)"
    out, _ = explain(capsys, "0.1", "-f", "e5m2", "-p", "ieee")
    assert "float32 0x3dcccccd" in out and "rounded to the nearest float32" in out
    out, _ = explain(capsys, "0.1", "-f", "e5m2", "-p", "ieee", "--input-dtype", "float64")
    assert "float64 0x3fb999999999999a" in out


def test_fnuz_negative_zero_and_specials(capsys):
    _, table = explain(capsys, "-0.0", "-f", "e4m3fnuz")
    assert table["ieee"][0] == "0x00" and table["ieee"][4] == "-0 → 0 (no -0 in the format)"
    assert table["triton-sm90"][4] == "does not define e4m3fnuz"
    _, table = explain(capsys, "-inf", "-f", "e5m2", "-p", "ieee", "-p", "satfinite", "-p", "ocp-mx")
    assert [table[p][0] for p in ("ieee", "satfinite", "ocp-mx")] == ["0xfc", "0xfb", "0xfe"]
    assert table["ocp-mx"][4] == "Inf → NaN" and table["satfinite"][4] == "Inf → max (saturated)"
    out, table = explain(capsys, "-nan", "-f", "e2m1fn", "-p", "ml_dtypes-0.7")
    assert "-NaN, payload 0x400000" in out and table["ml_dtypes-0.7"][:3] == ["0x00", "0|00|0", "0"]


def test_e8m0_zero_and_profiles(capsys):
    _, table = explain(capsys, "0", "-f", "e8m0fnu", "-p", "ieee", "-p", "torch-2.12")
    assert table["ieee"][0] == "0xff" and table["torch-2.12"][0] == "0x00"
    assert table["ieee"][1] == "|11111111|"


@pytest.mark.parametrize("argv, message", [
    (["explain", "1", "--format", "e9m9"], "unknown format 'e9m9'; known formats: e4m3fn"),
    (["explain", "1", "-f", "e4m3fn", "-p", "torch"], "unknown profile 'torch'; known profiles: ieee"),
    (["explain", "12abc", "-f", "e4m3fn"], "cannot read '12abc' as a value"),
    (["explain", "0x1", "-f", "e4m3fn", "--input-dtype", "float8"], "invalid choice: 'float8'"),
    (["explain", "0x123456789", "-f", "e4m3fn", "--input-dtype", "float16"], "too many for float16"),
    # two hex digits read as an fp8 code: no input type has that width (it was explained as float16 0x0080)
    (["explain", "0x80", "-f", "e4m3fnuz"], "'0x80' is 2 hex digits: fp8check table e4m3fnuz"),
    (["explain", "1"], "the following arguments are required: --format"),
    (["table", "bogus"], "unknown format 'bogus'"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_table_prints_every_code(capsys, fmt):
    assert main(["table", fmt.name]) == 0
    table = rows(capsys.readouterr().out)
    codes = {k: v for k, v in table.items() if k.startswith("0x")}
    assert list(codes) == [f"{c:#04x}" for c in range(fmt.code_count)]
    for code in fmt.nan_codes:
        assert codes[f"{code:#04x}"][1:3] == ["nan", "NaN"]


def test_table_of_e4m3fnuz(capsys):
    assert main(["table", "float8_e4m3fnuz"]) == 0
    out = capsys.readouterr().out
    table = rows(out)
    assert table["0x7f"] == ["0|1111|111", "normal", "240", "0x1.e000000000000p+7"]
    assert table["0x80"][:3] == ["1|0000|000", "nan", "NaN"]
    assert table["0x00"][:3] == ["0|0000|000", "zero", "0"]
    assert table["0x01"][1:3] == ["subnormal", "0.0009765625"]
    assert "NaN codes: 0x80; Inf codes: none" in out

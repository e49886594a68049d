"""The committed golden vectors: intact, equal to the reference, agreed by an
independent oracle, and guarded by ``fp8check golden verify``."""

import csv
import importlib.util
import io
import shutil
from pathlib import Path

import numpy as np
import pytest

from fp8check import formats, golden, profiles
from fp8check.cli import main

from core_oracles import (SIXTEEN_BIT, e8m0_expected_differences, first_differences, gfloat_format, gfloat_values,
                          installed_observation, known_mask, ml_dtypes_codes, pinned, ml_dtypes_decode, same_code, same_value,
                          torch_codes, torch_decode)

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def read_csv(path: Path) -> list[dict]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def test_committed_vectors_verify(capsys):
    assert main(["golden", "verify", "--dir", str(GOLDEN)]) == 0
    assert "match the manifest and the reference" in capsys.readouterr().out


def test_generation_is_deterministic():
    assert golden.render() == golden.render()


def test_the_committed_set_is_complete_and_modest():
    files = golden.render()
    assert len([p for p in files if p.startswith("encode/")]) == 2 * sum(
        p.supports(f) for f in golden.ENCODE_FORMATS for p in profiles.PROFILES.values())
    assert sum(len(t) for t in files.values()) < 3_000_000


# -- verify catches every kind of change -----------------------------------

@pytest.fixture
def copy(tmp_path):
    target = tmp_path / "golden"
    shutil.copytree(GOLDEN, target)
    return target


def verify(path, capsys):
    code = main(["golden", "verify", "--dir", str(path)])
    return code, capsys.readouterr().err


def test_a_changed_vector_is_named(copy, capsys):
    runs = copy / "encode/e4m3fnuz/ieee.float16.runs"
    lines = runs.read_text().splitlines()
    start, code = lines[40].split()
    lines[40] = f"{start} {int(code, 16) ^ 1:#04x}"
    runs.write_text("\n".join(lines) + "\n")
    code, err = verify(copy, capsys)
    assert code == 1
    assert f"{runs}: its SHA-256 differs from the manifest" in err
    assert f"{runs}: differs from the reference: line 41: file {lines[40]!r}" in err


def test_a_changed_manifest_is_named(copy, capsys):
    manifest = copy / golden.MANIFEST
    lines = manifest.read_text().splitlines()
    lines[3] = "0" * 64 + lines[3][64:]
    manifest.write_text("\n".join(lines) + "\n")
    code, err = verify(copy, capsys)
    assert code == 1 and lines[3][66:] in err and "differs from the manifest" in err


def test_a_vector_and_manifest_changed_together_still_fail(copy, capsys):
    # Someone edits a code and "fixes" the digest: the reference disagrees.
    edges = copy / "edges/e5m2.csv"
    edges.write_text(edges.read_text().replace("0x7c,", "0x7b,", 1))
    import hashlib
    manifest = copy / golden.MANIFEST
    new = hashlib.sha256(edges.read_bytes()).hexdigest()
    manifest.write_text("".join(
        (f"{new}  edges/e5m2.csv\n" if line.endswith("  edges/e5m2.csv") else line + "\n")
        for line in manifest.read_text().splitlines()))
    code, err = verify(copy, capsys)
    assert code == 1 and f"{edges}: differs from the reference" in err


def test_missing_extra_and_unlisted_files_are_named(copy, capsys):
    (copy / "decode/e2m1fn.csv").unlink()
    (copy / "decode/e9m9.csv").write_text("code\n")
    code, err = verify(copy, capsys)
    assert code == 1
    assert f"{copy / 'decode/e2m1fn.csv'}: missing" in err
    assert f"{copy / 'decode/e9m9.csv'}: not a golden file the reference generates" in err


def test_verify_of_a_missing_directory_is_a_usage_error(tmp_path, capsys):
    assert main(["golden", "verify", "--dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "no such golden directory" in err and len(err.strip().splitlines()) == 1


def test_generate_then_verify_round_trips(tmp_path, capsys):
    assert main(["golden", "generate", "--dir", str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert verify(tmp_path, capsys)[0] == 0
    for path in GOLDEN.rglob("*.runs"):
        assert (tmp_path / path.relative_to(GOLDEN)).read_bytes() == path.read_bytes()


# -- decode vectors against ml_dtypes, torch and gfloat ------------------------

def decoded(fmt):
    rows = read_csv(GOLDEN / f"decode/{fmt.name}.csv")
    assert [int(r["code"], 16) for r in rows] == list(range(fmt.code_count))
    return np.array([float("nan") if r["value_hex"] == "nan" else float.fromhex(r["value_hex"])
                     for r in rows])


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_decode_vectors_agree_with_ml_dtypes_and_gfloat(fmt):
    values = decoded(fmt)
    if installed_observation("ml_dtypes") is not None:  # ml_dtypes as an oracle where the registry pins it
        assert same_value(values, ml_dtypes_decode(fmt)).all()
    pytest.importorskip("gfloat")
    from gfloat import decode_float
    fi = gfloat_format(fmt)
    assert same_value(values, [decode_float(fi, c).fval for c in range(fmt.code_count)]).all()
    assert all(float(r["value"]) == v or np.isnan(v) for r, v in
               zip(read_csv(GOLDEN / f"decode/{fmt.name}.csv"), values))


@pytest.mark.parametrize("fmt", [f for f in formats.ALL_FORMATS if f.torch_name], ids=str)
def test_decode_vectors_agree_with_torch(fmt):
    pytest.importorskip("torch")
    pinned("torch")
    assert same_value(decoded(fmt), torch_decode(fmt)).all()


# -- encode vectors and edge cases against the oracles -------------------------

def check_against_oracles(x, codes, fmt, profile):
    """Every oracle that applies to (fmt, profile) agrees with ``codes``,
    except where a known upstream bug or gfloat's e8m0 tie rule says why."""
    values = np.array([float("nan") if fmt.is_nan(int(c)) else float(fmt.exact_value(int(c))) for c in codes])
    values = np.where([bool(int(c) & fmt.sign_mask) and v == 0 for c, v in zip(codes, values)], -0.0, values)
    # gfloat: every profile (the rounding is gfloat's; special values the profile's).
    theirs = gfloat_values(x, fmt, profile)
    same = same_value(values, theirs)
    if fmt is formats.E8M0FNU:
        same |= e8m0_expected_differences(x, values, theirs, profile)
    assert same.all(), "gfloat: " + "; ".join(first_differences(x, values, theirs, ~same))
    # ml_dtypes, where the registry pins the installed release: exact codes
    # under its profile; ieee shares its semantics from 16-bit and float32
    # inputs (NaN by class).
    ml_obs = installed_observation("ml_dtypes")
    if ml_obs is not None and fmt.ml_dtypes_name:
        skip = known_mask(ml_obs, x, fmt)
        mine = profile.name == ml_obs.profile.name
        if mine or (profile.name == "ieee" and fmt.has_nan and x.dtype != np.float64):
            ml = ml_dtypes_codes(x, fmt)
            same = (codes == ml) if mine else same_code(codes, ml, fmt)
            assert (same | skip).all(), "ml_dtypes: " + "; ".join(first_differences(x, codes, ml, ~(same | skip)))
    # torch, where the registry pins the installed release: exact codes under its profile.
    torch_obs = installed_observation("torch") if importlib.util.find_spec("torch") else None
    if torch_obs is not None and fmt.torch_name and profile.name == torch_obs.profile.name:
        import torch

        torch.set_num_threads(1)
        t = torch_codes(x, fmt)
        skip = known_mask(torch_obs, x, fmt)
        assert ((codes == t) | skip).all(), "torch: " + "; ".join(first_differences(x, codes, t, codes != t))


def _default_lane_profiles() -> set[str]:
    """ieee and the profiles of the ml_dtypes and torch installed here (where the registry pins them):
    the default lane compares those with the real stacks; the others, gfloat-only, run in the slow lane."""
    names = {"ieee"}
    for stack in ("ml_dtypes", "torch"):
        if importlib.util.find_spec(stack):
            obs = installed_observation(stack)
            if obs is not None:
                names.add(obs.profile.name)
    return names


_DEFAULT_LANE = _default_lane_profiles()
ENCODE_FILES = [pytest.param(f, p, s, id=f"{f.name}-{p.name}-{s}",
                             marks=[] if p.name in _DEFAULT_LANE and (s == "float16" or p.name == "ieee")
                             else [pytest.mark.slow])
                for f in golden.ENCODE_FORMATS
                for p in profiles.PROFILES.values() if p.supports(f) for s in golden.SIXTEEN_BIT_SOURCES]


@pytest.mark.parametrize("fmt, profile, source", ENCODE_FILES)
def test_encode_vectors_agree_with_the_oracles(fmt, profile, source):
    pytest.importorskip("gfloat")
    codes = golden.read_runs((GOLDEN / f"encode/{fmt.name}/{profile.name}.{source}.runs").read_text())
    assert codes.size == 1 << 16
    x = np.arange(1 << 16, dtype=np.uint16).view(SIXTEEN_BIT[source])
    check_against_oracles(x, codes, fmt, profile)


@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_edge_vectors_agree_with_the_oracles(fmt):
    pytest.importorskip("gfloat")
    rows = read_csv(GOLDEN / f"edges/{fmt.name}.csv")
    assert all(r["note"] for r in rows)
    for source, dtype in (("float32", np.uint32), ("float64", np.uint64)):
        mine = [r for r in rows if r["source"] == source]
        x = np.array([int(r["input"], 16) for r in mine], dtype=dtype).view(source)
        for profile in profiles.PROFILES.values():
            column = [r[profile.name] for r in mine]
            if not profile.supports(fmt):
                assert set(column) == {"-"}
                continue
            check_against_oracles(x, np.array([int(c, 16) for c in column], dtype=np.uint8), fmt, profile)


def test_edge_vectors_show_the_double_rounding_that_ml_dtypes_0_6_does():
    # Where ieee and ml_dtypes-0.6 differ on float64 edge cases, the note says why.
    rows = [r for r in read_csv(GOLDEN / "edges/e4m3fn.csv") if r["source"] == "float64"]
    differ = [r for r in rows if r["ieee"] != r["ml_dtypes-0.6"] and r["ieee"] not in ("0x7f", "0xff")]
    assert differ and all("double rounding" in r["note"] for r in differ)

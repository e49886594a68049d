"""Golden vectors: the reference's answers written down, checksummed, verifiable.

Three kinds of file, all plain text (``golden/README.md`` documents them):

- ``decode/<format>.csv``: every code of the format and its exact value;
- ``encode/<format>/<profile>.<source>.runs``: all 65,536 float16 or bfloat16
  inputs encoded, for every 8-bit format and every named profile that
  defines it, as runs of inputs that share a code;
- ``edges/<format>.csv``: the curated float32/float64 edge cases
  (:mod:`fp8check.reference.edges`), one column per named profile, each row
  with a note.

``MANIFEST.sha256`` lists the SHA-256 of every file (``sha256sum -c``
reads it). :func:`generate` writes everything from the reference;
:func:`verify` checks the files against the manifest and against the
reference regenerated in memory, and says which file differs and where.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

import numpy as np

from fp8check import formats, profiles
from fp8check.codes import bit_fields, code_class
from fp8check.formats import Format
from fp8check.reference import encode, spec
from fp8check.reference.edges import EDGE_SOURCES, edge_cases

__all__ = ["generate", "verify", "render", "default_directory", "ENCODE_FORMATS", "MANIFEST",
           "read_runs", "code_label"]

MANIFEST = "MANIFEST.sha256"
# The 8-bit formats: fp4/fp6 appear in decode/ and edges/ only.
ENCODE_FORMATS: tuple[Format, ...] = formats.FP8_FORMATS + (formats.E8M0FNU,)
SIXTEEN_BIT_SOURCES = ("float16", "bfloat16")


def default_directory() -> Path:
    """``golden/`` of the source checkout this package runs from, else ./golden."""
    here = Path(__file__).resolve().parent.parent / "golden"
    return here if here.is_dir() else Path("golden")


# The decode files name the classes of fp8check.codes, Inf as "inf".
_CLASS_LABELS = {"infinity": "inf"}


def code_label(code: int, fmt: Format) -> str:
    """The class of ``code`` as the decode files and ``fp8check table`` write it."""
    c = code_class(code, fmt)
    return _CLASS_LABELS.get(c, c)


def _decode_csv(fmt: Format) -> str:
    out = io.StringIO()
    out.write(f"# fp8check golden vectors: every code of {fmt.name} and its exact value.\n"
              f"# {fmt.description}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["code", "bits", "class", "value_hex", "value"])
    for code in range(fmt.code_count):
        value = spec.decode_code(code, fmt)
        writer.writerow([f"{code:#04x}", bit_fields(code, fmt, "|"), code_label(code, fmt),
                         "nan" if value != value else value.hex(), repr(value)])
    return out.getvalue()


def _runs(codes: np.ndarray) -> list[tuple[int, int]]:
    starts = np.flatnonzero(np.diff(codes.astype(np.int16), prepend=-1) != 0)
    return [(int(i), int(codes[i])) for i in starts]


def _encode_runs(fmt: Format, profile: profiles.Profile, source: str) -> str:
    x = np.arange(1 << 16, dtype=np.uint16)
    codes = encode(x.view(np.float16) if source == "float16" else _bfloat16(x), fmt, profile)
    lines = [f"# fp8check golden vectors: every {source} input encoded to {fmt.name} under profile "
             f"{profile.name}.",
             f"# {profile.name}: {profile.summary(fmt)}.",
             "# Each line is 'first_input code': every input bit pattern from first_input up to the",
             "# next line's first_input (excluded; the last line runs to 0xffff) encodes to code."]
    lines += [f"{start:#06x} {code:#04x}" for start, code in _runs(codes)]
    return "\n".join(lines) + "\n"


def _bfloat16(bits: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return bits.view(ml_dtypes.bfloat16)


def read_runs(text: str) -> np.ndarray:
    """The 65,536 codes a ``.runs`` file describes."""
    starts, codes = [], []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        start, code = line.split()
        starts.append(int(start, 16))
        codes.append(int(code, 16))
    lengths = np.diff(starts + [1 << 16])
    return np.repeat(np.array(codes, dtype=np.uint8), lengths)


def _edges_csv(fmt: Format) -> str:
    named = list(profiles.PROFILES.values())
    out = io.StringIO()
    out.write(f"# fp8check golden vectors: curated edge cases of {fmt.name}, encoded under every "
              f"named profile ('-': the profile does not define {fmt.name}).\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["source", "input", "value"] + [p.name for p in named] + ["note"])
    for source in EDGE_SOURCES:
        cases = edge_cases(fmt, source)
        dtype = {"float32": np.uint32, "float64": np.uint64}[source]
        x = np.array([c.bits for c in cases], dtype=dtype).view(source)
        columns = [encode(x, fmt, p) if p.supports(fmt) else None for p in named]
        width = x.dtype.itemsize * 2
        for i, case in enumerate(cases):
            codes = ["-" if col is None else f"{int(col[i]):#04x}" for col in columns]
            writer.writerow([source, f"0x{case.bits:0{width}x}", repr(float(x[i]))] + codes + [case.note])
    return out.getvalue()


def render() -> dict[str, str]:
    """Every golden file's path (relative, '/'-separated) and text, from the reference."""
    files: dict[str, str] = {}
    for fmt in formats.ALL_FORMATS:
        files[f"decode/{fmt.name}.csv"] = _decode_csv(fmt)
        files[f"edges/{fmt.name}.csv"] = _edges_csv(fmt)
    for fmt in ENCODE_FORMATS:
        for profile in profiles.PROFILES.values():
            if profile.supports(fmt):
                for source in SIXTEEN_BIT_SOURCES:
                    files[f"encode/{fmt.name}/{profile.name}.{source}.runs"] = _encode_runs(fmt, profile, source)
    return dict(sorted(files.items()))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_text(files: dict[str, str]) -> str:
    return "".join(f"{_digest(text.encode())}  {path}\n" for path, text in files.items())


def generate(directory: str | Path) -> list[Path]:
    """Write every golden file and the manifest under ``directory``."""
    root = Path(directory)
    files = render()
    written = []
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())
        written.append(target)
    (root / MANIFEST).write_bytes(_manifest_text(files).encode())
    return written + [root / MANIFEST]


def _read_manifest(root: Path, problems: list[str]) -> dict[str, str]:
    entries: dict[str, str] = {}
    try:
        text = (root / MANIFEST).read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(f"{root / MANIFEST}: cannot read the manifest: {exc.strerror or exc}")
        return entries
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split("  ", 1)
        if len(parts) != 2 or len(parts[0]) != 64:
            problems.append(f"{root / MANIFEST}: line {number} is not '<sha256>  <path>': {line!r}")
            continue
        entries[parts[1]] = parts[0]
    return entries


def _first_difference(ours: str, theirs: str) -> str:
    a, b = ours.splitlines(), theirs.splitlines()
    for number, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"line {number}: file {x!r}, reference {y!r}"
    return f"the file has {len(a)} lines, the reference {len(b)}"


def verify(directory: str | Path) -> list[str]:
    """Check the golden files: each problem found, one line each (empty: all good).

    A file must match its manifest digest, the manifest must list exactly the
    files the reference generates, and each file must equal what the
    reference generates now.
    """
    root = Path(directory)
    problems: list[str] = []
    manifest = _read_manifest(root, problems)
    if not manifest and problems:
        return problems
    expected = render()
    for path, text in expected.items():
        target = root / path
        if path not in manifest:
            problems.append(f"{target}: not in the manifest")
        try:
            data = target.read_bytes()
        except OSError:
            problems.append(f"{target}: missing")
            continue
        if path in manifest and _digest(data) != manifest[path]:
            problems.append(f"{target}: its SHA-256 differs from the manifest (the file or the manifest changed)")
        if data != text.encode():
            problems.append(f"{target}: differs from the reference: "
                            f"{_first_difference(data.decode(errors='replace'), text)}")
        elif path in manifest and manifest[path] != _digest(text.encode()):
            problems.append(f"{root / MANIFEST}: the digest of {path} is not the reference's")
    for path in sorted(set(manifest) - set(expected)):
        problems.append(f"{root / MANIFEST}: lists {path}, which the reference does not generate")
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*")
               if p.is_file() and p.suffix in (".csv", ".runs")}
    for path in sorted(on_disk - set(expected)):
        problems.append(f"{root / path}: not a golden file the reference generates")
    return problems

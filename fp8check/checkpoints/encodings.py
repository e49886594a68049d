"""Scale encodings checked against the layout (issue 33, item 2): the dtype each layout writes per scale.

A loader allocates each scale parameter in the dtype its layout writes and copies the checkpoint's tensor into it
(vLLM's ``weight_loader``: ``param.data.copy_(loaded_weight)``, a numeric conversion between dtypes). So a scale
stored in another dtype is either converted exactly (float16/bfloat16 into float32: a warning, the scale was only
rounded when saved) or converted into another meaning (float scales into e8m0 bytes keep ``int(v)``; U8 bytes into
an e4m3fn parameter become the integers; U8 exponents into a float parameter become 0-255): an error, with the
values implied.
"""

from __future__ import annotations

import numpy as np

from fp8check import formats
from fp8check.checkpoints import findings, layouts, stats
from fp8check.checkpoints.records import Checkpoint, Record

E8M0 = layouts.SCALE_FORMAT_DTYPES["e8m0"]
FLOATS = ("float32", "bfloat16", "float16", "float64")


# dtypes a layout's loader also reads as its scale encoding: transformers' quantizer_finegrained_fp8.py reads a
# uint8 weight_scale_inv as ue8m0 exponents (layouts.py cites it), with or without scale_fmt "ue8m0" in the config
ALSO_READ = {"transformers-fp8": E8M0}


def expected_scale_dtypes(lay: layouts.Layout) -> tuple[str, ...]:
    """What the layout's producer writes for the block scale, and what its loader also reads as such."""
    return lay.scale_dtypes + ALSO_READ.get(lay.name, ())


def e4m3fn_of_integers(values: np.ndarray) -> np.ndarray:
    """What a copy of integer values into a float8_e4m3fn parameter holds (torch's cast, round to nearest even)."""
    import torch

    return torch.from_numpy(np.asarray(values, dtype=np.float32)).to(torch.float8_e4m3fn).to(torch.float64).numpy()


def _span(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return "no finite value"
    lo, hi = float(finite.min()), float(finite.max())
    return f"{lo:.4g}" if lo == hi else f"{lo:.4g} .. {hi:.4g}"


def _read(ck: Checkpoint, key: tuple[str, str], kind: str, kept: np.ndarray | None) -> np.ndarray:
    if kept is not None:
        return np.asarray(kept, dtype=np.float64).reshape(-1)
    return stats.scale_values(ck.readers[key[0]].tensor(key[1]), kind).reshape(-1)


def _bytes(ck: Checkpoint, key: tuple[str, str]) -> np.ndarray:
    return stats.as_bytes(ck.readers[key[0]].tensor(key[1])).numpy().astype(np.int64)


def scale_encoding_findings(ck: Checkpoint, rec: Record) -> list[findings.Finding]:
    """SCALE_ENCODING for the block scale (and NVFP4's per-tensor scale) of one data tensor of a known layout."""
    lay, sc = rec.layout, rec.scale
    out: list[findings.Finding] = []
    if lay is None or sc is None or sc.kind is None:
        return out
    stored = sc.entry.dtype
    want = expected_scale_dtypes(lay)
    if stored not in want:
        out.append(_mismatch(ck, sc.key, stored, want, lay, sc.values, sc.entry.numel))
    if lay.second_scale and rec.second_scale is not None:
        entry = ck.entry(rec.second_scale)
        if entry.dtype not in lay.second_scale_dtypes and stats.scale_kind(entry.dtype) is not None:
            out.append(_mismatch(ck, rec.second_scale, entry.dtype, lay.second_scale_dtypes, lay, None, entry.numel))
    return out


def _mismatch(ck: Checkpoint, key: tuple[str, str], stored: str, want: tuple[str, ...], lay: layouts.Layout,
              kept: np.ndarray | None, numel: int) -> findings.Finding:
    name = key[1]
    head = f"scale {name} is {stored} where {lay.name} writes {' or '.join(want)}"
    if want[0] in E8M0 and stored in FLOATS + ("float8_e4m3fn",):
        v = _read(ck, key, stored if stored in FLOATS else "float8_e4m3fn", kept)
        as_bytes = np.clip(np.trunc(np.nan_to_num(v, nan=255.0)), 0, 255)
        msg = (f"{head} (e8m0 exponent bytes): its values {_span(v)} copied into a loader's uint8 scale keep int(v), "
               f"scales 2^(int(v)-127) = {_span(np.exp2(as_bytes - 127))}")
        if np.all(np.isfinite(v)) and np.all(v == np.round(v)) and v.min() >= 0 and v.max() <= 255:
            msg += (f"; they are integers, e8m0 exponents stored as float values: meant as 2^(v-127) = "
                    f"{_span(np.exp2(v - 127))}, read as multipliers they scale the weights by {_span(v)}")
        return findings.make("SCALE_ENCODING", numel, msg)
    if want[0] == "float8_e4m3fn" and stored == "uint8":
        codes = _bytes(ck, key)
        meant = stats.code_values(formats.E4M3FN)[codes]
        copied = e4m3fn_of_integers(codes)
        usable = np.isfinite(meant) & (meant > 0)
        ratio = float(np.median(copied[usable] / meant[usable])) if usable.any() else float("nan")
        return findings.make("SCALE_ENCODING", numel, (
            f"{head}: the bytes read as the layout's e4m3fn codes are {_span(meant)} (how this audit reads them); a "
            f"loader copying U8 into its float8_e4m3fn parameter converts the integers: {_span(copied)} "
            f"(x{ratio:.3g} at the median)"))
    if stored == "uint8" and want[0] in FLOATS:
        codes = _bytes(ck, key)
        return findings.make("SCALE_ENCODING", numel, (
            f"{head}: e8m0 exponent bytes (2^(b-127) = {_span(np.exp2(codes - 127.0))}); a loader copying them "
            f"into its {want[0]} parameter gets the integers {_span(codes.astype(np.float64))} as scales"))
    if want[0] == "float8_e4m3fn" and stored in FLOATS:
        v = _read(ck, key, stored, kept)
        copied = e4m3fn_of_integers(v)
        lost = int(np.count_nonzero(~np.isfinite(copied) | ((copied == 0) & (v != 0))
                                    | (np.abs(v) > formats.E4M3FN.max)))
        return findings.make("SCALE_ENCODING", numel, (
            f"{head}: a loader's float8_e4m3fn parameter rounds {_span(v)} to {_span(copied)}"
            + (f"; {lost} become NaN, zero or saturate" if lost else "")), None if lost else findings.WARNING)
    if stored in FLOATS + E8M0 and want[0] in FLOATS:
        return findings.make("SCALE_ENCODING", numel, (
            f"{head}: a loader converts it exactly into {want[0]}; the scales were rounded to {stored} when saved"),
            findings.WARNING)
    return findings.make("SCALE_ENCODING", numel, f"{head}: a loader's copy changes what the values mean")

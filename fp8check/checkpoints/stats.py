"""Statistics of FP8 codes and of scales.

One pass over an FP8 tensor counts each of its 256 codes (``torch.bincount``
on the bytes, chunk by chunk, several chunks at once on threads: it releases
the GIL). Everything the findings need about the data is a function of those
256 counts and of the format (:mod:`fp8check.formats`,
:func:`fp8check.reference.decode_table`): NaN, Inf, zero, negative-zero,
subnormal and ±max counts, codes used, min and max. Only a possible
dequantization overflow under a non-tensorwise scale needs a second,
per-element pass, and only when the cheap bound (largest code x largest
scale) says it might happen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from fp8check import formats
from fp8check.formats import Format
from fp8check.reference import decode_table
from fp8check.checkpoints import dtypes
from fp8check.checkpoints import granularity
from fp8check.outputs import json_float, json_line

CHUNK_BYTES = 16 << 20  # one bincount task; also the unit of page release


@lru_cache(maxsize=None)
def code_values(fmt: Format) -> np.ndarray:
    """float64 value of every code, NaN for NaN codes, -0.0 for a negative zero."""
    return decode_table(fmt)


@lru_cache(maxsize=None)
def code_classes(fmt: Format) -> dict[str, np.ndarray]:
    """Boolean masks over the 256 codes: nan, inf, zero, neg_zero, subnormal, max, finite."""
    v = code_values(fmt)
    codes = np.arange(fmt.code_count)
    nan = np.array([fmt.is_nan(int(c)) for c in codes])
    inf = np.array([fmt.is_inf(int(c)) for c in codes])
    zero = (v == 0) & ~nan
    neg_zero = zero & np.signbit(v)
    finite = ~nan & ~inf
    sub = finite & ~zero & (np.abs(v) < fmt.smallest_normal) if fmt.has_subnormals else np.zeros_like(nan)
    maxed = finite & (np.abs(v) == fmt.max)
    return {"nan": nan, "inf": inf, "zero": zero, "neg_zero": neg_zero, "subnormal": sub, "max": maxed,
            "finite": finite}


def histogram(flat_bytes: Any, *, chunk: int = CHUNK_BYTES, release: Callable[[int, int], None] | None = None,
              prefetch: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Counts of the 256 byte values of a 1-D torch uint8 tensor, chunk by chunk.

    ``prefetch(address, nbytes)`` is called for the next chunk before the
    current one is counted; ``release(address, nbytes)`` after it is.
    """
    import torch

    total = np.zeros(256, dtype=np.int64)
    if flat_bytes.numel() == 0:
        return total
    parts = flat_bytes.split(chunk)
    if prefetch is not None:
        prefetch(parts[0].data_ptr(), parts[0].numel())
    for k, part in enumerate(parts):
        if prefetch is not None and k + 1 < len(parts):
            prefetch(parts[k + 1].data_ptr(), parts[k + 1].numel())
        total += torch.bincount(part, minlength=256).numpy()
        if release is not None:
            release(part.data_ptr(), part.numel())
    return total


def as_bytes(tensor: Any) -> Any:
    """A flat torch uint8 view of a one-byte tensor (a copy only if it is not contiguous)."""
    import torch

    t = tensor.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return t.reshape(-1)


# -- FP8 data -------------------------------------------------------------------


@dataclass
class CodeStats:
    """What the 256 code counts of an FP8 tensor say."""

    format: str
    numel: int
    histogram: np.ndarray  # 256 counts (int64)
    codes_used: int
    nan: int
    inf: int
    zeros: int
    neg_zeros: int
    subnormals: int
    saturated: int  # codes at ±max
    min: float | None  # smallest finite code value present
    max: float | None
    min_abs_nonzero: float | None
    max_abs: float | None
    dequant_overflow: int | None = None  # set when a scale is known
    dequant_absmax_bound: float | None = None  # largest |code| x largest |scale|

    @property
    def zero_share(self) -> float:
        return self.zeros / self.numel if self.numel else 0.0

    @property
    def subnormal_share(self) -> float:
        return self.subnormals / self.numel if self.numel else 0.0

    def to_dict(self, *, histogram: bool = True) -> dict[str, Any]:
        """The JSON form; ``histogram=False`` leaves out the 256 counts (see :meth:`histogram_json`)."""
        d = {k: getattr(self, k) for k in (
            "format", "numel", "codes_used", "nan", "inf", "zeros", "neg_zeros", "subnormals", "saturated",
            "min", "max", "min_abs_nonzero", "max_abs", "dequant_absmax_bound", "dequant_overflow")}
        d["zero_share"] = self.zero_share
        d["subnormal_share"] = self.subnormal_share
        if histogram:
            d["histogram"] = np.asarray(self.histogram, dtype=np.int64).tolist()
        return d

    def histogram_json(self) -> str:
        """The 256 counts as compact JSON, the text ``json.dumps`` gives. Formatting an int costs about
        0.1 us, so an audit of 100,000s of small tensors spent much of its time here: counts up to
        2^16 (every count of a tensor the audit reads in one go) are looked up as text instead."""
        hist = np.asarray(self.histogram, dtype=np.int64)
        top = hist.max()
        if top == 0:  # an empty tensor
            return _ZERO_COUNTS_JSON
        if top > _COUNT_TEXTS_MAX:
            return json_line(hist.tolist())
        return "[" + ",".join(_count_texts()[hist].tolist()) + "]"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CodeStats:
        """Read back from :meth:`to_dict`'s JSON form."""
        return cls(format=d["format"], numel=d["numel"], histogram=np.asarray(d["histogram"], dtype=np.int64),
                   codes_used=d["codes_used"], nan=d["nan"], inf=d["inf"], zeros=d["zeros"], neg_zeros=d["neg_zeros"],
                   subnormals=d["subnormals"], saturated=d["saturated"], min=json_float(d["min"]),
                   max=json_float(d["max"]), min_abs_nonzero=json_float(d["min_abs_nonzero"]),
                   max_abs=json_float(d["max_abs"]), dequant_overflow=d["dequant_overflow"],
                   dequant_absmax_bound=json_float(d["dequant_absmax_bound"]))


_COUNT_TEXTS_MAX = 1 << 16
_ZERO_COUNTS_JSON = "[" + ",".join(["0"] * 256) + "]"


@lru_cache(maxsize=None)
def _count_texts() -> np.ndarray:
    """The decimal texts of 0 .. 2^16, an object array indexed by count (built once, on first use: 4 MB)."""
    return np.array([str(n) for n in range(_COUNT_TEXTS_MAX + 1)], dtype=object)


@lru_cache(maxsize=None)
def _code_tables(fmt: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per format: the class masks as rows of one int64 matrix (all, nan, inf, zero, neg_zero, subnormal,
    max), the finite codes in ascending value order (-0 before +0: the smallest of a tensor holding
    both zeros is -0, the largest +0), their values, and the nonzero finite codes in ascending
    magnitude order with their magnitudes."""
    cls = code_classes(fmt)
    matrix = np.stack([np.ones(fmt.code_count, dtype=bool)] + [cls[k] for k in ("nan", "inf", "zero", "neg_zero", "subnormal",
                                                                   "max")]).astype(np.int64)
    v = code_values(fmt)
    fin = np.flatnonzero(cls["finite"])
    by_value = fin[np.lexsort((~np.signbit(v[fin]), v[fin]))]  # IEEE total order: -0 before +0
    nonzero = np.flatnonzero(cls["finite"] & ~cls["zero"])
    by_magnitude = nonzero[np.argsort(np.abs(v[nonzero]), kind="stable")]
    out = (matrix, by_value, v[by_value], by_magnitude, np.abs(v[by_magnitude]))
    for arr in out:
        arr.setflags(write=False)
    return out


def code_stats(hist: np.ndarray, fmt: Format) -> CodeStats:
    hist = np.asarray(hist, dtype=np.int64)
    matrix, by_value, values, by_magnitude, magnitudes = _code_tables(fmt)
    # one product for every count (the audit calls this once per tensor: NumPy's per-call cost counts)
    numel, nan, inf, zeros, neg_zeros, subnormals, saturated = (matrix @ hist).tolist()
    present = hist > 0
    fin = present[by_value].nonzero()[0]  # positions, in value order, of the finite codes present
    mags = present[by_magnitude].nonzero()[0]
    lo = float(values[fin[0]]) if fin.size else None
    hi = float(values[fin[-1]]) if fin.size else None
    return CodeStats(
        format=fmt.name,
        numel=numel,
        histogram=hist,
        codes_used=int(np.count_nonzero(present)),
        nan=nan,
        inf=inf,
        zeros=zeros,
        neg_zeros=neg_zeros,
        subnormals=subnormals,
        saturated=saturated,
        min=lo,
        max=hi,
        min_abs_nonzero=float(magnitudes[mags[0]]) if mags.size else None,
        max_abs=max(abs(lo), abs(hi)) if lo is not None and hi is not None else None,
    )


# -- scales ---------------------------------------------------------------------


_SMALLEST_NORMAL = {
    "float32": formats.FLOAT32.smallest_normal,
    "float16": formats.FLOAT16.smallest_normal,
    "bfloat16": formats.BFLOAT16.smallest_normal,
    "float64": formats.FLOAT64.smallest_normal,
    # e8m0 has no subnormals of its own, but 2^-127 is subnormal in the
    # float32 that kernels expand it to (and flushed to zero under FTZ).
    "e8m0": formats.FLOAT32.smallest_normal,
    "float8_e4m3fn": formats.E4M3FN.smallest_normal,
}


def scale_kind(dtype_name: str) -> str | None:
    """How a scale stored as ``dtype_name`` is read: a float type name,
    ``"e8m0"``, ``"float8_e4m3fn"``; None when no convention stores scales so."""
    if dtype_name in dtypes.FLOAT_SCALE_DTYPES:
        return dtype_name
    if dtype_name in (dtypes.E8M0_DTYPE, "uint8"):
        return "e8m0"
    if dtype_name == "float8_e4m3fn":
        return "float8_e4m3fn"
    return None


def scale_values(tensor: Any, kind: str) -> np.ndarray:
    """The exact float64 values of a scale tensor read as ``kind``."""
    import torch

    t = tensor.detach().contiguous()
    if kind == "e8m0":
        return code_values(formats.E8M0FNU)[t.view(torch.uint8).numpy().astype(np.intp)].reshape(tuple(t.shape))
    if kind == "float8_e4m3fn":
        return code_values(formats.E4M3FN)[t.view(torch.uint8).numpy().astype(np.intp)].reshape(tuple(t.shape))
    return t.to(torch.float64).numpy()


_NUMPY_SCALE_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64}


def factor_exact_mask(values: np.ndarray, kind: str, factor: float) -> np.ndarray:
    """Per element of a scale (``values``: its exact float64 values): whether value x ``factor`` (a power of
    two) is exact in the scale's own dtype. A non-finite element counts as exact (it stays what it is)."""
    if kind == "float8_e4m3fn":
        return np.zeros(np.shape(values), dtype=bool)  # e4m3 scales belong to NVFP4, which convert does not touch
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        scaled = values * factor  # exact in float64, unless a float64 scale overflows (then not exact)
        if kind == "e8m0":  # powers of two 2^-127 .. 2^127
            ok = (scaled >= 2.0 ** -127) & (scaled <= 2.0 ** 127)
        else:
            if kind == "bfloat16":
                import ml_dtypes

                dtype: Any = ml_dtypes.bfloat16
            else:
                dtype = _NUMPY_SCALE_DTYPES[kind]
            ok = (scaled.astype(dtype).astype(np.float64) == scaled) & np.isfinite(scaled)
    return ok | ~np.isfinite(values)


def _factors_exact(values: np.ndarray, kind: str) -> dict[str, bool]:
    """``{"2": ..., "0.5": ...}``: whether every element of the scale times that power of two is exact in its
    own dtype (see :func:`factor_exact_mask`)."""
    if kind == "float8_e4m3fn":
        return {"2": False, "0.5": False}
    return {f"{f:g}": bool(factor_exact_mask(values, kind, f).all()) for f in (2.0, 0.5)}


@dataclass
class ScaleStats:
    dtype: str
    kind: str  # how it was read: float32/float16/bfloat16/float64/e8m0/float8_e4m3fn
    shape: list[int]
    numel: int
    min: float | None
    max: float | None
    absmax: float | None  # largest finite |scale|
    nonfinite: int
    nonpositive: int
    subnormal: int
    absent_sentinel: int  # KV scales equal to -1 ("absent")
    not_pow2: int
    log2_min_exponent: int | None
    log2_counts: list[int] = field(default_factory=list)
    factor_exact: dict[str, bool] = field(default_factory=dict)  # "2" / "0.5" -> multiply exact
    # Eighth-octave bins (bin = floor(8 log2 s)): the distribution reports draw.
    log2_fine_min_bin: int | None = None
    log2_fine_counts: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype, "read_as": self.kind, "shape": self.shape, "numel": self.numel,
            "min": self.min, "max": self.max, "absmax": self.absmax, "nonfinite": self.nonfinite,
            "nonpositive": self.nonpositive, "subnormal": self.subnormal,
            "absent_sentinel": self.absent_sentinel, "not_pow2": self.not_pow2,
            "log2_histogram": {"min_exponent": self.log2_min_exponent, "counts": self.log2_counts},
            "log2_histogram_fine": {"bins_per_octave": LOG2_FINE_BINS, "min_bin": self.log2_fine_min_bin,
                                    "counts": self.log2_fine_counts},
            "factor_exact": self.factor_exact,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScaleStats:
        """Read back from :meth:`to_dict`'s JSON form."""
        coarse, fine = d["log2_histogram"], d["log2_histogram_fine"]
        return cls(dtype=d["dtype"], kind=d["read_as"], shape=list(d["shape"]), numel=d["numel"],
                   min=json_float(d["min"]), max=json_float(d["max"]), absmax=json_float(d["absmax"]),
                   nonfinite=d["nonfinite"], nonpositive=d["nonpositive"], subnormal=d["subnormal"],
                   absent_sentinel=d["absent_sentinel"], not_pow2=d["not_pow2"],
                   log2_min_exponent=coarse["min_exponent"], log2_counts=list(coarse["counts"]),
                   factor_exact=dict(d["factor_exact"]), log2_fine_min_bin=fine["min_bin"],
                   log2_fine_counts=list(fine["counts"]))


LOG2_FINE_BINS = 8
_EIGHTHS = np.exp2(np.arange(LOG2_FINE_BINS) / LOG2_FINE_BINS)  # 2^(j/8), the bin edges within a binade


def scale_stats(tensor: Any, dtype_name: str, kind: str, *, kv: bool = False) -> tuple[ScaleStats, np.ndarray]:
    """Statistics of a scale tensor, and its values (float64, original shape)."""
    values = scale_values(tensor, kind)
    flat = values.reshape(-1)
    finite = np.isfinite(flat)
    sentinel = (flat == -1.0) if kv else np.zeros(flat.shape, dtype=bool)
    nonpositive = finite & (flat <= 0) & ~sentinel
    positive = finite & (flat > 0)
    tiny = _SMALLEST_NORMAL.get(kind, 0.0)
    subnormal = finite & (flat != 0) & (np.abs(flat) < tiny)
    pos = flat[positive]
    mantissa, exponent = np.frexp(pos)
    not_pow2 = int(np.count_nonzero(mantissa != 0.5))
    if pos.size:
        e = exponent.astype(np.int64) - 1  # floor(log2 s), exact
        lo = int(e.min())
        counts = np.bincount(e - lo).tolist()
        # floor(8 log2 s): the binade, then which eighth of it the significand (in [1, 2)) lies in
        fine = e * LOG2_FINE_BINS + np.searchsorted(_EIGHTHS, mantissa * 2.0, side="right") - 1
        fine_lo = int(fine.min())
        fine_counts = np.bincount(fine - fine_lo).tolist()
    else:
        lo, counts, fine_lo, fine_counts = None, [], None, []
    fin_vals = flat[finite & ~sentinel]
    stats = ScaleStats(
        dtype=dtype_name, kind=kind, shape=list(values.shape), numel=int(flat.size),
        min=float(fin_vals.min()) if fin_vals.size else None,
        max=float(fin_vals.max()) if fin_vals.size else None,
        absmax=float(np.abs(fin_vals).max()) if fin_vals.size else None,
        nonfinite=int(np.count_nonzero(~finite)), nonpositive=int(np.count_nonzero(nonpositive)),
        subnormal=int(np.count_nonzero(subnormal)), absent_sentinel=int(np.count_nonzero(sentinel)),
        not_pow2=not_pow2, log2_min_exponent=lo, log2_counts=counts,
        log2_fine_min_bin=fine_lo, log2_fine_counts=fine_counts,
        factor_exact=_factors_exact(flat, kind),
    )
    return stats, values


# -- dequantization overflow ------------------------------------------------------


DEQUANT_DTYPES = {"bfloat16": formats.BFLOAT16, "float16": formats.FLOAT16, "float32": formats.FLOAT32}


def overflow_threshold(dtype_name: str) -> float:
    """The smallest magnitude that rounds to Inf in ``dtype_name`` (round to
    nearest even): its max plus half an ulp of the top binade."""
    f = DEQUANT_DTYPES[dtype_name]
    return f.max + math.ldexp(1.0, f.emax - f.mantissa_bits - 1)


def fp4_histogram(byte_hist: np.ndarray) -> np.ndarray:
    """The 16 e2m1 code counts of packed fp4 data from the 256 counts of its bytes (two codes per byte)."""
    b = np.arange(256)
    out = np.bincount(b & 0x0F, weights=byte_hist, minlength=16) + np.bincount(b >> 4, weights=byte_hist,
                                                                                minlength=16)
    return out.astype(np.int64)


def unpack_fp4(packed: Any) -> Any:
    """Packed e2m1 bytes (torch uint8, ``[..., n]``) as one code per byte ``[..., 2n]``, the element of
    even index in the low nibble (compressed-tensors, gpt-oss, torchao, Quark all pack so)."""
    import torch

    p = packed.contiguous().view(torch.uint8)
    return torch.stack((p & 0x0F, p >> 4), dim=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)


def dequant_overflow(flat_bytes: Any, fmt: Format, scale: np.ndarray, g: granularity.Granularity,
                     data_shape: tuple[int, ...], threshold: float, *, max_elems: int = 1 << 22) -> int:
    """How many elements have |code value x scale| >= threshold (exact, float64)."""
    absval = np.abs(code_values(fmt))
    absval = np.where(np.isfinite(absval), absval, 0.0)  # NaN/Inf codes are findings of their own
    scale3 = np.abs(granularity.normalise(scale, g, data_shape))
    _, o, i = granularity.data_dims(data_shape)
    rows = flat_bytes.numel() // max(i, 1)
    step = max(1, max_elems // max(i, 1))
    data = flat_bytes.numpy()
    count = 0
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        v = absval[data[r0 * i: r1 * i].reshape(r1 - r0, i)]
        s = granularity.expand_rows(scale3, g, data_shape, r0, r1)
        with np.errstate(over="ignore"):  # a product past float64's range is past the threshold too
            count += int(np.count_nonzero(v * s >= threshold))
    return count

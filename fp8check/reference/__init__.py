"""The bit-exact reference: ``encode`` and ``decode`` for every format and profile.

``encode(x, fmt, profile)`` gives the uint8 codes a conversion that honours
``profile`` must produce; ``decode(codes, fmt)`` gives their exact values as
float64. Both are backed by the vectorised model (:mod:`.model`), which is
tested equal to the scalar spec (:mod:`.spec`) on every 16-bit input.

Speed: a 16-bit input selects its code from a 65,536-entry table per format
and profile, built once by the model. A float32 input's code depends only on
its upper 16 bits and on whether any of the lower 16 is set (the rounding
point of every format here lies within the upper 16 bits: mantissa <= 6
bits), so a 131,072-entry table serves float32 too; likewise float64 with
its upper 16 bits (mantissa <= 3 bits). Stochastic rounding and profiles
that round through an intermediate type use the model directly. The lookups
run in cache-sized blocks on every core (:mod:`.fast`).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any

import numpy as np

from fp8check.errors import InvalidValueError, UnsupportedDtypeError
from fp8check.formats import SOURCE_FORMATS, Format, get as get_format
from fp8check.profiles import Profile, get as get_profile
from fp8check.reference import fast, model, spec

__all__ = ["encode", "decode", "encode_tensor", "model_encode", "decode_table", "encode_table", "conversion_table",
           "source_name", "spec", "model"]

_CHUNK = 1 << 18  # model chunk: bounds the int64 temporaries
SOURCE_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _torch() -> Any:
    return sys.modules.get("torch")


def _is_torch(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def source_name(x: Any) -> str:
    """The source type name of an input array (``"float32"``, ...), or raise."""
    dtype = x.dtype
    name = str(dtype).removeprefix("torch.")
    if name in SOURCE_DTYPES:
        return name
    raise UnsupportedDtypeError(
        f"cannot encode an array of dtype {name}; the reference takes {', '.join(SOURCE_DTYPES)}"
    )


def _bits_numpy(x: np.ndarray, source: str) -> np.ndarray:
    width = SOURCE_FORMATS[source].bits
    unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    return np.ascontiguousarray(x).view(unsigned)


def _bits_torch(x: Any, source: str) -> Any:
    torch = _torch()
    width = SOURCE_FORMATS[source].bits
    signed = {16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
    bits = x.contiguous().view(signed).to(torch.int64)
    return bits & ((1 << width) - 1) if width < 64 else bits


def _numpy_view(x: Any) -> np.ndarray:
    """A CPU tensor's data as a NumPy array of the same dtype (no copy)."""
    name = source_name(x)
    x = x.detach().contiguous()
    if name == "bfloat16":
        import ml_dtypes

        return x.view(_torch().int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def _xp(like: Any) -> Any:
    from array_api_compat import array_namespace

    return array_namespace(like)


@lru_cache(maxsize=None)
def _table16(source: str, fmt: Format, profile: Profile) -> np.ndarray:
    bits = np.arange(1 << 16, dtype=np.int64)
    return model.encode_bits(np, bits, source, fmt, profile).astype(np.uint8)


@lru_cache(maxsize=None)
def _table_wide(source: str, fmt: Format, profile: Profile) -> np.ndarray:
    # Entry i stands for every float32 (float64) with upper 16 bits i >> 1
    # and lower bits that are all zero (i even) or not (i odd).
    width = SOURCE_FORMATS[source].bits
    i = np.arange(1 << 17, dtype=np.uint64)
    bits = (((i >> np.uint64(1)) << np.uint64(width - 16)) | (i & np.uint64(1))).astype(np.int64)
    table = model.encode_bits(np, bits, source, fmt, profile).astype(np.uint8)
    table.setflags(write=False)
    return table


@lru_cache(maxsize=None)
def _split_tables(source: str, fmt: Format, profile: Profile) -> tuple[np.ndarray, np.ndarray]:
    """(sticky, exact): 65,536 codes each, by upper 16 bits, lower bits non-zero or zero."""
    table = _table_wide(source, fmt, profile)
    return np.ascontiguousarray(table[1::2]), np.ascontiguousarray(table[0::2])


# Mantissa bits a table on the upper 16 bits can round to: the round bit must lie there too.
_TABLE_MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 6, "float64": 3}


@lru_cache(maxsize=None)
def _uses_table(source: str, fmt: Format, profile: Profile) -> bool:
    p = profile.resolve(fmt)
    if p.rounding == "stochastic" or fmt.mantissa_bits > _TABLE_MANTISSA[source]:
        return False
    if source in ("float16", "bfloat16"):
        return True
    return p.intermediate in (None, source)


def encode_table(source: str, fmt: object, profile: object = "ieee") -> np.ndarray:
    """The table the fast path uses: 65,536 codes for a 16-bit source, or
    131,072 for float32 (index ``(bits >> 16) * 2 + (bits & 0xFFFF != 0)``)
    and float64 (``(bits >> 48) * 2 + (bits & (2**48 - 1) != 0)``)."""
    f, p = get_format(fmt), get_profile(profile)
    p.resolve(f)
    if source in ("float32", "float64"):
        return _table_wide(source, f, p)
    return _table16(source, f, p)


def _encode_numpy(x: np.ndarray, source: str, fmt: Format, profile: Profile,
                  random_bits: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
    bits = _bits_numpy(x, source).reshape(-1)
    out = np.empty(bits.shape, dtype=np.uint8) if out is None else out.reshape(-1)
    if random_bits is None and _uses_table(source, fmt, profile):
        if source in ("float32", "float64"):
            sticky, exact = _split_tables(source, fmt, profile)
            fast.take_split(bits, sticky, exact, out)
        else:
            fast.take16(_table16(source, fmt, profile), bits, out)
        return out.reshape(x.shape)
    rnd = None if random_bits is None else random_bits.reshape(-1)
    for start in range(0, bits.size, _CHUNK):
        b = bits[start:start + _CHUNK].astype(np.int64)
        r = None if rnd is None else rnd[start:start + _CHUNK]
        out[start:start + _CHUNK] = model.encode_bits(np, b, source, fmt, profile, r)
    return out.reshape(x.shape)


def _check_random(random_bits: Any, shape: tuple[int, ...], profile: Profile, fmt: Format, like_torch: bool) -> Any:
    p = profile.resolve(fmt)
    if p.rounding != "stochastic":
        if random_bits is not None:
            raise InvalidValueError(f"profile {p.name!r} rounds {p.rounding}; random_bits are only for stochastic rounding")
        return None
    if random_bits is None:
        raise InvalidValueError(f"profile {p.name!r} rounds stochastically: pass random_bits, integers in [0, 2**{p.stochastic_bits})")
    if like_torch:
        torch = _torch()
        r = torch.as_tensor(random_bits).to(torch.int64)
        lo, hi = (int(r.min()), int(r.max())) if r.numel() else (0, 0)
    else:
        r = np.asarray(random_bits).astype(np.int64)
        lo, hi = (int(r.min()), int(r.max())) if r.size else (0, 0)
    if tuple(r.shape) != tuple(shape):
        raise InvalidValueError(f"random_bits has shape {tuple(r.shape)}, the input {tuple(shape)}")
    if lo < 0 or hi >= 1 << p.stochastic_bits:
        raise InvalidValueError(f"random_bits must lie in [0, 2**{p.stochastic_bits}); got values in [{lo}, {hi}]")
    return r


def encode(x: Any, fmt: object, profile: object = "ieee", *, random_bits: Any = None) -> np.ndarray:
    """The codes (uint8, same shape as ``x``) a conversion under ``profile`` produces.

    ``x``: a NumPy array of float16, ml_dtypes bfloat16, float32 or float64,
    a torch tensor of those dtypes, or a Python float or list (float64).
    ``fmt``: a :class:`~fp8check.formats.Format` or anything
    :func:`fp8check.formats.get` accepts. ``profile``: a
    :class:`~fp8check.profiles.Profile` or name. ``random_bits``: for
    stochastic rounding, integers in ``[0, 2**stochastic_bits)`` shaped like
    ``x``. The result is exact from any input precision unless the profile
    names an intermediate type.
    """
    f, p = get_format(fmt), get_profile(profile)
    p.resolve(f)  # raises for a format the profile does not define
    if _is_torch(x):
        if x.device.type == "cpu" and random_bits is None:
            x = _numpy_view(x)  # the NumPy tables beat torch indexing on the CPU
        else:
            return encode_tensor(x, f, p, random_bits=random_bits).cpu().numpy()
    if not isinstance(x, np.ndarray):
        x = np.asarray(x, dtype=np.float64) if not hasattr(x, "dtype") else np.asarray(x)
    source = source_name(x)
    rnd = _check_random(random_bits, x.shape, p, f, like_torch=False)
    return _encode_numpy(x, source, f, p, rnd)


def encode_tensor(x: Any, fmt: object, profile: object = "ieee", *, random_bits: Any = None) -> Any:
    """Like :func:`encode` for a torch tensor, computed on its device.

    Returns a torch uint8 tensor on ``x.device``: the reference of an
    exhaustive GPU sweep runs where the kernel under test runs.
    """
    torch = _torch()
    f, p = get_format(fmt), get_profile(profile)
    source = source_name(x)
    rnd = _check_random(random_bits, tuple(x.shape), p, f, like_torch=True)
    if rnd is not None:
        rnd = rnd.to(x.device).reshape(-1)
    flat = x.reshape(-1)
    out = torch.empty(flat.shape, dtype=torch.uint8, device=x.device)
    use_table = rnd is None and _uses_table(source, f, p)
    width = SOURCE_FORMATS[source].bits
    if use_table:
        table = torch.tensor(encode_table(source, f, p), device=x.device)  # a copy: the table is read-only
    chunk = _CHUNK if x.device.type == "cpu" else 1 << 26
    xp = None
    for start in range(0, flat.numel(), chunk):
        bits = _bits_torch(flat[start:start + chunk], source)
        if use_table:
            if width > 16:  # index (upper 16 bits) * 2 + (any lower bit set), as encode_table says
                bits = ((bits >> (width - 17)) & 0x1FFFE) | ((bits & ((1 << (width - 16)) - 1)) != 0).to(torch.int64)
            out[start:start + chunk] = table[bits]
        else:
            xp = xp or _xp(bits)
            r = None if rnd is None else rnd[start:start + chunk]
            out[start:start + chunk] = model.encode_bits(xp, bits, source, f, p, r).to(torch.uint8)
    return out.reshape(x.shape)


def model_encode(x: Any, fmt: object, profile: object = "ieee", *, random_bits: Any = None) -> Any:
    """The model applied directly (no tables): for testing the fast paths."""
    f, p = get_format(fmt), get_profile(profile)
    source = source_name(x)
    if _is_torch(x):
        bits = _bits_torch(x.reshape(-1), source)
        r = None if random_bits is None else _check_random(random_bits, tuple(x.shape), p, f, True).reshape(-1).to(x.device)
        return model.encode_bits(_xp(bits), bits, source, f, p, r).to(_torch().uint8).reshape(x.shape)
    bits = _bits_numpy(np.asarray(x), source).reshape(-1).astype(np.int64)
    r = None if random_bits is None else _check_random(random_bits, np.shape(x), p, f, False).reshape(-1)
    return model.encode_bits(np, bits, source, f, p, r).astype(np.uint8).reshape(np.shape(x))


@lru_cache(maxsize=None)
def decode_table(fmt: object) -> np.ndarray:
    """The float64 value of every code of ``fmt`` (NaN for NaN codes), by the model."""
    f = get_format(fmt)
    codes = np.arange(f.code_count, dtype=np.int64)
    negative, sig, exp2, special = model.decode_fields(np, codes, f)
    values = np.ldexp(sig.astype(np.float64), exp2.astype(np.int32))
    values[special == 2] = np.inf
    values = np.where(negative, -values, values)  # -0 and -Inf too
    # NaN carries no sign here (fnuz's one NaN sits on the sign bit): +NaN.
    values[special == 1] = np.nan
    values.setflags(write=False)
    return values


@lru_cache(maxsize=None)
def conversion_table(src: object, dst: object, factor: float = 1.0, profile: object = "ocp-mx") -> np.ndarray:
    """The ``dst`` code of each ``src`` code's value divided by ``factor``.

    One read-only uint8 entry per code of ``src``: how already-quantized
    bytes move to another format when their scale is multiplied by
    ``factor`` (fn -> fnuz: factor 2, every byte keeps its pattern but 0x80,
    which becomes 0x00, and the fn NaNs, which become 0x80). Under the
    default ``ocp-mx`` profile a value ``dst`` cannot hold clamps to ±max and
    Inf becomes NaN where ``dst`` has no Inf: nothing non-finite turns finite.
    """
    f_src, f_dst = get_format(src), get_format(dst)
    with np.errstate(invalid="ignore"):
        table = encode(decode_table(f_src) / float(factor), f_dst, profile)
    table.setflags(write=False)
    return table


def _codes_numpy(codes: Any, fmt: Format) -> np.ndarray:
    if _is_torch(codes):
        torch = _torch()
        if codes.dtype.is_floating_point and codes.element_size() == 1:
            codes = codes.view(torch.uint8)
        codes = codes.detach().cpu().numpy()
    arr = np.asarray(codes)
    if arr.dtype.kind == "V" or (arr.dtype.itemsize == 1 and arr.dtype.kind not in "iub"):
        arr = arr.view(np.uint8)  # an ml_dtypes fp8 array: its bytes are the codes
    if arr.dtype.kind not in "iub":
        raise UnsupportedDtypeError(f"codes must be integers or an fp8 array, got dtype {arr.dtype}")
    if arr.dtype == np.uint8 and fmt.code_count == 256:
        return arr  # every byte is a code
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= fmt.code_count):
        raise InvalidValueError(
            f"codes must lie in [0, {fmt.code_count}) for {fmt.name}; got values in [{int(arr.min())}, {int(arr.max())}]"
        )
    return arr


def decode(codes: Any, fmt: object) -> np.ndarray:
    """The exact float64 values of ``codes`` (NaN for NaN codes).

    ``codes``: integers (NumPy, torch, lists), a torch fp8 tensor or an
    ml_dtypes fp8 array (their bytes are taken as the codes).
    """
    f = get_format(fmt)
    arr = _codes_numpy(codes, f)
    table = decode_table(f)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    flat = np.ascontiguousarray(arr).reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    fast.decode_into(table, flat, out)
    return out.reshape(arr.shape)

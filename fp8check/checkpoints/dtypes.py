"""Storage dtypes of checkpoint tensors, one vocabulary for torch and safetensors.

A tensor's dtype is named like torch names it without the ``torch.`` prefix
(``float8_e4m3fn``, ``bfloat16``, ``uint8``); safetensors codes (``F8_E4M3``)
map onto those names. Only the dtype a file states decides whether a tensor
holds FP8: a one-byte integer tensor is never taken for FP8 from its element
size alone (see :mod:`fp8check.checkpoints.conventions`).
"""

from __future__ import annotations

from fp8check import formats
from fp8check.formats import Format

# safetensors dtype code -> (our dtype name, bits per element).
SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 8),
    "U8": ("uint8", 8),
    "I8": ("int8", 8),
    "U16": ("uint16", 16),
    "I16": ("int16", 16),
    "U32": ("uint32", 32),
    "I32": ("int32", 32),
    "U64": ("uint64", 64),
    "I64": ("int64", 64),
    "F16": ("float16", 16),
    "BF16": ("bfloat16", 16),
    "F32": ("float32", 32),
    "F64": ("float64", 64),
    "C64": ("complex64", 64),
    "F8_E4M3": ("float8_e4m3fn", 8),
    "F8_E5M2": ("float8_e5m2", 8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 8),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8),
    "F4": ("float4_e2m1fn", 4),  # shape counts logical elements, two per byte
    "F6_E2M3": ("float6_e2m3fn", 6),
    "F6_E3M2": ("float6_e3m2fn", 6),
}
SAFETENSORS_CODE: dict[str, str] = {name: code for code, (name, _) in SAFETENSORS_DTYPES.items()}
# safetensors learned the fnuz codes in 0.8; a file holding them needs it.
FNUZ_CODES = ("F8_E4M3FNUZ", "F8_E5M2FNUZ")
FNUZ_MIN_SAFETENSORS = (0, 8)

# Our dtype name -> the FP8 data format it holds.
FP8_DTYPES: dict[str, Format] = {
    "float8_e4m3fn": formats.E4M3FN,
    "float8_e5m2": formats.E5M2,
    "float8_e4m3fnuz": formats.E4M3FNUZ,
    "float8_e5m2fnuz": formats.E5M2FNUZ,
}
BYTE_DTYPES = ("uint8", "int8")  # FP8 bytes stored as integers, recognised by naming only
FLOAT_SCALE_DTYPES = ("float32", "float16", "bfloat16", "float64")
E8M0_DTYPE = "float8_e8m0fnu"
# A scale may be stored as any of these; e8m0 bytes may also be uint8.
SCALE_DTYPES = FLOAT_SCALE_DTYPES + (E8M0_DTYPE, "uint8", "float8_e4m3fn")


def torch_dtype_name(dtype: object) -> str:
    """``torch.float8_e4m3fn`` -> ``"float8_e4m3fn"``."""
    return str(dtype).removeprefix("torch.")


def bits_of(dtype_name: str) -> int:
    for name, bits in SAFETENSORS_DTYPES.values():
        if name == dtype_name:
            return bits
    import torch

    return getattr(torch, dtype_name).itemsize * 8


def safetensors_version() -> tuple[int, ...]:
    import safetensors

    parts = []
    for piece in safetensors.__version__.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def fp8_format_of(dtype_name: str) -> Format | None:
    return FP8_DTYPES.get(dtype_name)

"""``ndarray.astype(ml_dtypes.*)`` casts."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from fp8check import formats, stacks
from fp8check.formats import Format
from fp8check.casts.adapters.kernel import CastKernel


def _dtype(fmt: Format) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, fmt.ml_dtypes_name))


def ml_dtypes_kernel() -> CastKernel:
    fmts = tuple(f for f in formats.ALL_FORMATS if f.ml_dtypes_name and hasattr(ml_dtypes, f.ml_dtypes_name))

    def cast(x: np.ndarray, fmt: Format) -> np.ndarray:
        with np.errstate(all="ignore"):
            return x.astype(_dtype(fmt)).view(np.uint8)

    def decode(codes: np.ndarray, fmt: Format) -> np.ndarray:
        return codes.view(_dtype(fmt)).astype(np.float32)

    claim = stacks.claim("ml_dtypes", version=ml_dtypes.__version__)
    return CastKernel(
        name="ml_dtypes",
        description=f"ml_dtypes {ml_dtypes.__version__} ndarray.astype",
        claims=claim.profile,
        observation=claim.observation,
        unpinned=claim.unpinned,
        formats=fmts,
        input_dtypes=("float32", "float16", "bfloat16", "float64"),
        cast_fn=cast,
        decode_fn=decode,
        known=claim.known,
    )

"""Upstream bugs of real stacks, as data the properties turn into strict xfails.

Each entry names the upstream issue (or says that none was found), so a
fixed upstream release turns the strict xfail into a failure that says the
entry can go.
"""

from __future__ import annotations

import numpy as np

from fp8check import inputs
from fp8check.formats import Format
from fp8check.kernels import KnownDivergence

# Inputs of e8m0fnu strictly between 2^-127 (code 0x00) and the midpoint
# 1.5 * 2^-127: RNE gives 0x00; torch (c10 Float8_e8m0fnu) and ml_dtypes 0.6
# round them up to 0x01. They are float32/bfloat16 subnormals.
E8M0_SUBNORMAL_REASON = (
    "e8m0fnu rounds float32 subnormal inputs (from float32, bfloat16 or float64) in (2^-127, 1.5*2^-127) up to 0x01 "
    "(RNE gives 0x00); no upstream issue found in pytorch/pytorch or jax-ml/ml_dtypes "
    "(ml_dtypes#298 discusses e8m0 rounding generally)"
)


def e8m0_subnormal_inputs(bits: np.ndarray, input_dtype: str, fmt: Format) -> np.ndarray:
    """Mask of the inputs the e8m0fnu subnormal rounding bug concerns.

    Those whose float32 value (float64 inputs are rounded to float32 first by
    both stacks) lies strictly between 2^-127 and 1.5 * 2^-127, either sign
    (torch takes |x|; ml_dtypes gives NaN for negatives, unaffected).
    """
    b = np.asarray(bits)
    if fmt.name != "e8m0fnu" or input_dtype == "float16":
        return np.zeros(b.shape, dtype=bool)
    with np.errstate(all="ignore"):
        f32 = inputs.from_bits(b, input_dtype).astype(np.float32)
    mag = f32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (mag > np.uint32(0x00400000)) & (mag < np.uint32(0x00600000))


FLOAT64_TORCH_REASON = (
    "torch casts float64 to fp8 through float32 (double rounding: inputs just off an fp8 "
    "midpoint round the wrong way); no upstream issue found in pytorch/pytorch"
)
FLOAT64_ML_DTYPES_REASON = (
    "ml_dtypes casts float64 to fp8 through float32 (double rounding); upstream: "
    "jax-ml/ml_dtypes#401 (open pull request that fixes it)"
)

TRITON_INTERPRETER_REASON = (
    "Triton interpreter fp8 downcasts round ties away, lose the mantissa carry, keep mantissa "
    "bits on overflow and truncate subnormals; upstream: triton-lang/triton#8322 "
    "(fix pending in triton-lang/triton#11897)"
)
TRITON_INTERPRETER_DECODE_REASON = (
    "Triton interpreter decodes fp8 NaN/Inf codes to finite values and fnuz 0x80 to -0.0; "
    "upstream: triton-lang/triton#8322 (interpreter fp8 conversions; fix pending in #11897)"
)


TORCH_CUDA_FP16_NAN_REASON = (
    "torch CUDA casts float16 NaN of either sign to +NaN 0x7F (e4m3fn, e5m2), where torch on the CPU and torch "
    "CUDA from float32/bfloat16 keep the sign (measured on an H200, torch 2.11); no upstream issue found"
)


def torch_cuda_fp16_negative_nan_inputs(bits: np.ndarray, input_dtype: str, fmt: Format) -> np.ndarray:
    """Mask of the inputs whose NaN sign torch CUDA drops: float16 NaNs with
    the sign bit set, into a format that has a NaN of each sign."""
    b = np.asarray(bits)
    if input_dtype != "float16" or fmt.name not in ("e4m3fn", "e5m2"):
        return np.zeros(b.shape, dtype=bool)
    return inputs.is_nan_bits(b, "float16") & ((b.astype(np.uint16) >> 15) == 1)


# The e8m0fnu round-up as torch and ml_dtypes both show it.
E8M0_SUBNORMAL = KnownDivergence(
    formats=frozenset({"e8m0fnu"}),
    input_dtypes=frozenset({"float32", "bfloat16", "float64"}),
    reason=E8M0_SUBNORMAL_REASON,
    hazards=frozenset({"input_subnormal"}),
    affects=e8m0_subnormal_inputs,
)

TORCH_CUDA_FP16_NAN = KnownDivergence(
    formats=frozenset({"e4m3fn", "e5m2"}),
    input_dtypes=frozenset({"float16"}),
    reason=TORCH_CUDA_FP16_NAN_REASON,
    hazards=frozenset({"nan"}),
    affects=torch_cuda_fp16_negative_nan_inputs,
)

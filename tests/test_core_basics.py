"""First facts of the core: the float64 exactness the issue pins, and the
spec and the model on every float16 input under ``ieee``."""

import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles
from fp8check.reference import spec


def test_float64_is_encoded_exactly_not_through_float32():
    # 1.0625 + 2**-30ish: just above the midpoint between 0x38 (1.0) and
    # 0x39 (1.125); rounding through float32 first lands on the tie -> 0x38.
    x = np.array([0x3FF1000000440000], dtype=np.uint64).view(np.float64)
    assert fp8check.encode(x, "e4m3fn")[0] == 0x39
    assert fp8check.encode(x, "e4m3fn", "ml_dtypes")[0] == 0x38


@pytest.mark.exhaustive
@pytest.mark.parametrize("fmt", formats.ALL_FORMATS, ids=str)
def test_spec_equals_model_on_every_float16_input_under_ieee(fmt):
    bits = np.arange(1 << 16, dtype=np.uint16)
    model = fp8check.encode(bits.view(np.float16), fmt)
    expected = np.array([spec.encode_bits(int(b), "float16", fmt, profiles.IEEE) for b in bits], dtype=np.uint8)
    mismatch = np.flatnonzero(model != expected)
    assert mismatch.size == 0, [(hex(i), hex(model[i]), hex(expected[i])) for i in mismatch[:5]]

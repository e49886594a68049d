"""Kernel == reference under the claimed profile, bit for bit: Hypothesis and exhaustive."""

import pytest
from hypothesis import given

from fp8check import inputs
from fp8check import strategies as fst


def test_matches_reference_on_hypothesis_inputs(fp8_target, fp8_settings):
    t = fp8_target

    @fp8_settings
    @given(fst.cast_input_arrays(t.fmt, dtype=t.input_dtype))
    def cast_matches_reference(x):
        t.check(inputs.to_bits(x, t.input_dtype), "Hypothesis inputs")

    cast_matches_reference()


@pytest.mark.exhaustive
def test_matches_reference_on_exhaustive_sweep(fp8_target):
    """float16/bfloat16: all 65,536 inputs; float32: every upper half with four
    lower halves plus every float16 value (see fp8check.inputs.sweep_bits)."""
    fp8_target.check(inputs.sweep_bits(fp8_target.input_dtype), f"inputs of the exhaustive {fp8_target.input_dtype} sweep")

"""The named hazards, each its own property, so that a failure's name says what broke.

Each runs the exact hazard set of fp8check.hazards for the target's format
and input dtype; a set the input dtype cannot reach is skipped.
"""

import numpy as np
import pytest

from fp8check import hazards as hz
from fp8check import inputs


def _check(target, *names):
    bits = inputs.unique(np.concatenate([hz.hazard_bits(target.fmt, target.input_dtype, n) for n in names]))
    if bits.size == 0:
        pytest.skip(f"no {target.input_dtype} input reaches {', '.join(names)} of {target.fmt.name}")
    target.check(bits, f"{'/'.join(names)} inputs")


@pytest.mark.fp8check_hazards("exact_values")
def test_exact_values_are_kept(fp8_target):
    _check(fp8_target, "exact_values")


@pytest.mark.fp8check_hazards("overflow")
def test_overflow_policy(fp8_target):
    """max, the overflow tie, just past it, far beyond: saturate or NaN/Inf as claimed."""
    _check(fp8_target, "overflow")


@pytest.mark.fp8check_hazards("infinity")
def test_infinity_handling(fp8_target):
    _check(fp8_target, "infinity")


@pytest.mark.fp8check_hazards("nan")
def test_nan_encoding(fp8_target):
    """NaNs of both signs with varied payloads give the claimed NaN code."""
    _check(fp8_target, "nan")


@pytest.mark.fp8check_hazards("signed_zero")
def test_signed_zero_and_tiny_negatives(fp8_target):
    """±0 and values that round to zero keep their sign where the format has -0."""
    _check(fp8_target, "signed_zero")


@pytest.mark.fp8check_hazards("signed_zero")
def test_fnuz_zero_and_tiny_negatives_never_0x80(fp8_fnuz_target):
    """fnuz has no -0: its pattern 0x80 is NaN. -0.0 and tiny negatives must give 0x00."""
    t = fp8_fnuz_target
    bits = hz.hazard_bits(t.fmt, t.input_dtype, "signed_zero")
    codes = t.kernel.cast(inputs.from_bits(bits, t.input_dtype), t.fmt)
    nan_inputs = inputs.is_nan_bits(bits, t.input_dtype)
    bad = (codes == 0x80) & ~nan_inputs
    assert not bad.any(), "0x80 (NaN) from " + ", ".join(
        f"{inputs.hex_bits(int(b), t.input_dtype)} ({inputs.describe(int(b), t.input_dtype)})" for b in bits[bad][:6])
    t.check(bits, "zero and tiny-negative inputs")


@pytest.mark.fp8check_hazards("subnormal", "input_subnormal")
def test_subnormals(fp8_target):
    """The format's subnormals and the boundary to the smallest normal; subnormal inputs."""
    _check(fp8_target, "subnormal", "input_subnormal")


@pytest.mark.fp8check_hazards("rounding_ties")
def test_rounding_ties(fp8_target):
    """Every exact midpoint and the inputs 1-2 ulps either side of it."""
    _check(fp8_target, "rounding_ties")


@pytest.mark.fp8check_hazards("mantissa_carry")
def test_mantissa_carry_into_exponent(fp8_target):
    """Rounding up from an all-ones mantissa carries into the exponent."""
    _check(fp8_target, "mantissa_carry")

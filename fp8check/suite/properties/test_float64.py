"""float64 inputs: the claimed profile (which models rounding through float32)
holds, and a cast that rounds once (exactly) is what the spec asks for."""

import numpy as np
import pytest

from fp8check import hazards as hz
from fp8check import inputs


def _float64_bits(target):
    # Every float32 hazard widened, and the float64 patterns either side of
    # it: inputs just off an fp8 midpoint are where double rounding shows.
    return inputs.sweep_bits("float64")


@pytest.mark.exhaustive
def test_float64_matches_claimed_profile(fp8_float64_target):
    fp8_float64_target.check(_float64_bits(fp8_float64_target), "float64 inputs")


@pytest.mark.exhaustive
def test_float64_is_rounded_once(fp8_float64_exact_target):
    t = fp8_float64_exact_target
    bits = inputs.unique(np.concatenate([_float64_bits(t), hz.hazard_bits(t.fmt, "float64", "rounding_ties")]))
    t.check(bits, "float64 inputs (rounded once, exactly)")

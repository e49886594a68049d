"""Known upstream bugs narrow enough to be described input by input.

The general properties excuse exactly these inputs; here they are expected
to fail (strict xfail naming the upstream issue), so that a fixed upstream
release makes this test pass and its entry in the stack registry (fp8check.stacks) can go.
"""

import numpy as np
import pytest

from fp8check import inputs


def test_known_upstream_divergence_is_still_present(fp8_known_bug_target):
    t = fp8_known_bug_target
    bits = inputs.sweep_bits(t.input_dtype)
    mask = np.zeros(bits.shape, dtype=bool)
    for k in t.known():
        if k.affects is not None:
            mask |= k.affects(bits, t.input_dtype, t.fmt)
    if not mask.any():
        pytest.skip("the known divergence concerns no input of this dtype")
    # Compare without the excuse: the known inputs must (still) diverge.
    from fp8check.casts import engine

    rec = engine.compare(t.kernel, t.fmt, t.profile, t.input_dtype, bits[mask])
    assert len(rec) == 0, t.message(rec, "inputs of a known upstream bug")

"""The per-tensor statistics from the 256 code counts, against the decoded values themselves."""

import numpy as np
import pytest

from fp8check import formats
from fp8check.checkpoints.stats import code_stats, code_values


@pytest.mark.parametrize("fmt", formats.FP8_FORMATS, ids=lambda f: f.name)
def test_code_stats_equal_a_direct_computation(fmt):
    rng = np.random.default_rng(0)
    v = code_values(fmt)
    for trial in range(400):
        hist = np.zeros(256, np.int64)
        idx = rng.integers(0, 256, size=rng.integers(0, 8))
        hist[idx] = rng.integers(1, 50, size=idx.size)
        if trial % 3 == 0:
            hist[0] += 1  # +0
        if trial % 4 == 0:
            hist[0x80] += 1  # -0 (NaN in fnuz)
        values = np.repeat(v, hist)
        finite = values[np.isfinite(values)]
        s = code_stats(hist, fmt)
        assert s.numel == values.size and s.codes_used == int(np.count_nonzero(hist))
        assert s.nan == int(np.isnan(values).sum()) and s.inf == int(np.isinf(values).sum())
        assert s.zeros == int((finite == 0).sum()) and s.neg_zeros == int(((finite == 0) & np.signbit(finite)).sum())
        assert s.saturated == int((np.abs(finite) == fmt.max).sum())
        assert s.subnormals == int(((finite != 0) & (np.abs(finite) < fmt.smallest_normal)).sum())
        if finite.size == 0:
            assert s.min is s.max is s.max_abs is None
            continue
        assert s.min == finite.min() and s.max == finite.max() and s.max_abs == np.abs(finite).max()
        nonzero = np.abs(finite[finite != 0])
        assert s.min_abs_nonzero == (nonzero.min() if nonzero.size else None)
        if s.min == 0:  # both zeros present: -0 is the smaller (IEEE total order), +0 the larger
            assert np.signbit(s.min) == bool(((finite == 0) & np.signbit(finite)).any())
        if s.max == 0:
            assert np.signbit(s.max) == (not ((finite == 0) & ~np.signbit(finite)).any())

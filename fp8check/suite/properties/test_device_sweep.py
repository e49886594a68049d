"""Every float32 input (all 2^32) through a kernel on the GPU, the reference on the GPU too."""

import numpy as np
import pytest

from fp8check.casts import engine


@pytest.mark.gpu
@pytest.mark.exhaustive
@pytest.mark.slow
def test_every_float32_input_on_the_device(fp8_device_target):
    from fp8check.casts.sweep import sweep

    t = fp8_device_target
    found = sweep(t.kernel, t.fmt, t.profile, 0, 1 << 32, device=t.kernel.device, chunk=1 << 26)
    assert found["checked"] == 1 << 32
    rec = engine.Divergences(fmt=t.fmt, profile=t.profile, input_dtype="float32")
    if found["bits"].size:
        rec.add(found["bits"], found["expected"], found["actual"])
    excused = np.zeros(len(rec), dtype=bool)
    for k in t.known():
        if k.affects is not None:
            excused |= k.affects(rec.bits, "float32", t.fmt)
    complete = found["diverged"] == found["bits"].size  # every mismatch was kept
    if complete:
        rec.drop(excused)
        assert len(rec) == 0, t.message(rec, "of all 2^32 float32 inputs")
    else:
        assert found["diverged"] == 0, t.message(rec, f"float32 inputs ({found['diverged']:,} of 2^32 diverge)")

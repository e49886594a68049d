"""The exhaustive float32 sweep: every bit pattern in a range, kernel against reference.

On a GPU both sides run on the device (the reference through
:func:`fp8check.reference.encode_tensor`), chunk by chunk, so only the
mismatches travel to the host. ``fp8check sweep`` is the command line of
:func:`sweep`.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["sweep", "sweep_check"]

_KEEP = 1 << 24  # mismatching inputs kept for classification (counts stay exact)


def sweep(kernel: Any, fmt: Any, profile: Any, start: int, stop: int, *, device: str, chunk: int,
          progress: Any = None) -> dict[str, Any]:
    """Compare ``kernel`` with the reference on float32 patterns [start, stop).

    Returns counts, the kept mismatches (bits, expected, actual as NumPy
    arrays, at most 2^24) and timings.
    """
    import numpy as np
    import torch

    from fp8check import reference

    total = 0
    kept_bits, kept_exp, kept_act = [], [], []
    kept = 0
    t_kernel = t_ref = 0.0
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    began = time.perf_counter()
    lo = start
    while lo < stop:
        hi = min(stop, lo + chunk)
        if lo < 1 << 31 < hi:
            hi = 1 << 31  # keep a chunk on one side of the sign bit: int32 arange
        a, b = (lo, hi) if lo < 1 << 31 else (lo - (1 << 32), hi - (1 << 32))
        bits = torch.arange(a, b, dtype=torch.int32, device=device)
        x = bits.view(torch.float32)
        sync()
        t0 = time.perf_counter()
        actual = kernel.cast_tensor(x, fmt)
        sync()
        t1 = time.perf_counter()
        if device == "cpu":  # the NumPy tables are faster than torch ops on a CPU
            expected = torch.from_numpy(reference.encode(x.numpy(), fmt, profile))
        else:
            expected = reference.encode_tensor(x, fmt, profile)
        sync()
        t2 = time.perf_counter()
        t_kernel += t1 - t0
        t_ref += t2 - t1
        diff = actual != expected
        n = int(diff.sum())
        if n:
            total += n
            if kept < _KEEP:
                idx = torch.nonzero(diff).reshape(-1)[: _KEEP - kept]
                kept_bits.append(bits[idx].cpu().numpy().view(np.uint32))
                kept_exp.append(expected[idx].cpu().numpy())
                kept_act.append(actual[idx].cpu().numpy())
                kept += int(idx.numel())
        if progress is not None:
            progress(hi - start, stop - start, total)
        lo = hi
    elapsed = time.perf_counter() - began
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
    return {
        "checked": stop - start,
        "diverged": total,
        "bits": cat(kept_bits, np.uint32),
        "expected": cat(kept_exp, np.uint8),
        "actual": cat(kept_act, np.uint8),
        "seconds": elapsed,
        "kernel_seconds": t_kernel,
        "reference_seconds": t_ref,
    }


def sweep_check(kernel: Any, fmt: Any, profile: Any, start: int, stop: int, *, device: str, chunk: int,
                cap: int | None = 100, name: str | None = None) -> Any:
    """:func:`sweep` as a :class:`~fp8check.results.CheckResult` (timings in ``extra``)."""
    from fp8check.casts import engine

    found = sweep(kernel, fmt, profile, start, stop, device=device, chunk=chunk)
    rec = engine.Divergences(fmt=fmt, profile=profile, input_dtype="float32")
    if found["bits"].size:
        rec.add(found["bits"], found["expected"], found["actual"])
    sampled = found["diverged"] > found["bits"].size
    name = name or kernel.name
    result = rec.result(
        kernel=name, checked=found["checked"], device=device, cap=cap,
        command=f"fp8check sweep {name} --format {fmt.name} --profile {profile.name} --device {device}"
                + (f" --start {start:#x} --stop {stop:#x}" if (start, stop) != (0, 1 << 32) else ""))
    result.passed = found["diverged"] == 0
    result.extra.update(
        diverged=found["diverged"], categories_from_first=int(found["bits"].size) if sampled else None,
        seconds=round(found["seconds"], 3), kernel_seconds=round(found["kernel_seconds"], 3),
        reference_seconds=round(found["reference_seconds"], 3),
        ns_per_input=round(1e9 * found["seconds"] / found["checked"], 3), profile_summary=profile.summary(fmt),
        range=[start, stop],
    )
    known = engine._known_reasons(kernel, fmt, "float32", rec)
    if known and not sampled:
        result.expected_failure = "; ".join(known)
    return result


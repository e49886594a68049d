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

    if device == "cpu":
        return _sweep_cpu(kernel, fmt, profile, start, stop, chunk=chunk, progress=progress)
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
        # The reference first, and kept inputs from their offsets: a kernel that writes its input
        # changes no verdict.
        sync()
        t0 = time.perf_counter()
        expected = reference.encode_tensor(x, fmt, profile)
        sync()
        t1 = time.perf_counter()
        actual = kernel.cast_tensor(x, fmt)
        sync()
        t2 = time.perf_counter()
        t_ref += t1 - t0
        t_kernel += t2 - t1
        diff = actual != expected
        n = int(diff.sum())
        if n:
            total += n
            if kept < _KEEP:
                idx = torch.nonzero(diff).reshape(-1)[: _KEEP - kept]
                kept_bits.append((idx + a).to(torch.int32).cpu().numpy().view(np.uint32))
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


_CPU_BLOCK = 1 << 20  # patterns per CPU block: its buffers stay allocated and warm


def _sweep_cpu(kernel: Any, fmt: Any, profile: Any, start: int, stop: int, *, chunk: int,
               progress: Any = None) -> dict[str, Any]:
    """:func:`sweep` on the CPU: one worker per core, each with its own buffers, over blocks in turn.

    While one worker is in the kernel another computes the reference, so the
    two overlap; each block's bits and comparison use buffers allocated once
    per worker (no page faults per block). Where the profile has a table the
    kernel's codes are compared run by run with one code per upper half
    (:func:`fast.sweep32_mismatches`), else the reference is encoded into a
    buffer and compared. torch runs one intra-op thread per worker meanwhile
    (the workers are the parallelism). The kept mismatches are those of the
    first blocks, in pattern order.
    """
    import threading

    import numpy as np
    import torch

    from fp8check import reference
    from fp8check.reference import fast

    block = max(1, min(chunk, _CPU_BLOCK))
    lock = threading.Lock()
    state = {"next": start, "total": 0, "done": 0, "kernel": 0.0, "ref": 0.0}
    kept: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    workers = max(1, min(fast.threads(), -(-(stop - start) // block)))
    tables = reference._split_tables("float32", fmt, profile) if reference._uses_table("float32", fmt, profile) \
        else None

    def work() -> None:
        bits = np.empty(block, dtype=np.uint32)
        where = np.empty(min(block, _KEEP), dtype=np.int64)
        expected = np.empty(block, dtype=np.uint8)
        diff = np.empty(block, dtype=np.bool_)
        t_kernel = t_ref = 0.0
        with fast.serial():
            while True:
                with lock:
                    lo = state["next"]
                    if lo >= stop:
                        break
                    hi = min(stop, lo + block)
                    state["next"] = hi
                m = hi - lo
                b = bits[:m]
                np.add(fast._steps(m), np.uint32(lo), out=b)  # lo + m <= 2**32: no wrap
                # Nothing after the kernel's call reads b: a kernel that writes its input changes no verdict.
                t0 = time.perf_counter()
                if tables is None:
                    e = expected[:m]
                    reference._encode_numpy(b.view(np.float32), "float32", fmt, profile, None, out=e)
                t1 = time.perf_counter()
                actual = kernel.cast_tensor(torch.from_numpy(b.view(np.float32)), fmt).numpy()
                t2 = time.perf_counter()
                if tables is not None:
                    n = fast.sweep32_mismatches(lo, actual, tables[0], tables[1], where, expected)
                    k = min(n, where.size)
                    idx, exp = where[:k], expected[:k]
                else:
                    d = diff[:m]
                    np.not_equal(actual, e, out=d)
                    n = int(np.count_nonzero(d))
                    idx = np.flatnonzero(d)[:_KEEP] if n else where[:0]
                    exp = e[idx]
                t3 = time.perf_counter()
                t_kernel += t2 - t1
                t_ref += (t1 - t0) + (t3 - t2)
                with lock:
                    state["total"] += n
                    state["done"] += m
                    if n:
                        _keep_first(kept, lo, lambda: ((idx + lo).astype(np.uint32), exp.copy(), actual[idx].copy()))
                    if progress is not None:
                        progress(state["done"], stop - start, state["total"])
        with lock:
            state["kernel"] += t_kernel
            state["ref"] += t_ref

    def abandon() -> None:  # the other workers take no new block
        with lock:
            state["next"] = stop

    began = time.perf_counter()
    _in_threads(work, workers, abandon)
    return _kept_result(kept, state, stop - start, time.perf_counter() - began)


def _kept_result(kept: dict[int, Any], state: dict[str, Any], checked: int, elapsed: float) -> dict[str, Any]:
    """:func:`_sweep_cpu`'s answer: the kept mismatches of its blocks in pattern order, its counts and timings."""
    import numpy as np

    order = sorted(kept)

    def cat(i: int, dt: Any) -> np.ndarray:
        return np.concatenate([kept[k][i] for k in order])[:_KEEP] if order else np.zeros(0, dtype=dt)

    return {
        "checked": checked,
        "diverged": state["total"],
        "bits": cat(0, np.uint32),
        "expected": cat(1, np.uint8),
        "actual": cat(2, np.uint8),
        "seconds": elapsed,
        # thread-seconds: the workers' kernel and reference run at the same time
        "kernel_seconds": state["kernel"],
        "reference_seconds": state["ref"],
    }


def _keep_first(kept: dict[int, Any], lo: int, make: Any) -> None:
    """Keep the mismatches ``make()`` of the block starting at ``lo`` while the blocks before it hold fewer than
    ``_KEEP``; drop the later blocks the first ``_KEEP`` no longer need (the caller holds the lock)."""

    def kept_before(at: int) -> int:
        return sum(v[0].size for k, v in kept.items() if k < at)

    if kept_before(lo) >= _KEEP:
        return
    kept[lo] = make()
    for k in sorted(kept, reverse=True):
        if k > lo and kept_before(k) >= _KEEP:
            del kept[k]


def _in_threads(work: Any, workers: int, abandon: Any) -> None:
    """Run ``work`` on this thread and ``workers - 1`` others, torch at one intra-op thread meanwhile; the first
    error of any of them is raised here after ``abandon()`` has stopped the rest and they have joined."""
    import threading

    import torch

    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as exc:  # re-raised on the calling thread
            errors.append(exc)
            abandon()

    torch_threads = torch.get_num_threads()
    if workers > 1:
        torch.set_num_threads(1)  # two OpenMP teams on the same cores spin against each other
    pool = [threading.Thread(target=guarded, name=f"fp8check-sweep-{i}") for i in range(workers - 1)]
    try:
        for t in pool:
            t.start()
        try:
            work()
        except BaseException:
            abandon()
            raise
        finally:
            for t in pool:
                t.join()
    finally:
        torch.set_num_threads(torch_threads)
    if errors:
        raise errors[0]


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


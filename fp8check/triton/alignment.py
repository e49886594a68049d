"""Pointer-alignment hints judged against the addresses a kernel sees on its target, not on this CPU.

``tl.multiple_of(ptr, 256)`` claims something about a device address. On a CPU the interpreter's tensors
live where torch's CPU allocator put them (64-byte aligned), so a hint that always holds on the GPU can be
false here. On the target, a tensor's storage starts where the target's PyTorch allocator puts it
(:class:`fp8check.triton.targets.Allocator`: a multiple of 512 bytes for the CUDA caching allocator and its
ROCm build), and a pointer into it is that start plus the byte offset the kernel computes. So a pointer
hint is judged on the offset of each lane from the start of its storage, with the start a multiple of the
allocator's alignment:

- ``multiple_of(..., v)`` with ``v`` dividing the alignment: true on the GPU exactly where the offset is a
  multiple of ``v`` (a view whose storage offset breaks it breaks it on the GPU too);
- ``v`` not dividing the alignment: true only where the allocator happens to place the tensor at a
  multiple of ``v``: a finding (the allocator does not promise it);
- ``max_contiguous``: differences of addresses, the same on every base.

Triton's own ``divisibility`` specialisation of pointer arguments (16 bytes) is computed from the pointer
of each launch, so it is never false; integer hints (offsets, strides) are judged on the values as computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["allocator", "device_offsets"]


def allocator() -> Any:
    """The active target's allocator (:class:`~fp8check.triton.targets.Allocator`); CUDA's without a target."""
    from fp8check.triton import active_target, targets

    target = active_target()
    return target.allocator if target is not None else targets.CUDA_CACHING_ALLOCATOR


def device_offsets(handle: Any, addresses: np.ndarray) -> np.ndarray | None:
    """Per lane, the byte offset of ``addresses`` (a pointer's values) from the start of the storage it points
    into: the tensor argument the pointer was derived from, else the one holding the lane. None when a lane
    lies in no tensor argument of the launch (its device address is unknown)."""
    from fp8check.triton import sanitizer

    if not sanitizer._LAUNCHES:
        return None
    flat = addresses.reshape(-1).astype(np.uint64)
    buf = (getattr(handle, "attr", None) or {}).get(sanitizer._KEY)
    state = sanitizer._LAUNCHES[-1]
    if buf is not None and any(b is buf for b in state.buffers):
        starts = np.full(flat.shape, buf.start, np.uint64)
    else:
        where = state.locate(flat, 1)
        if (where < 0).any():
            return None
        starts = np.array([state.buffers[i].start for i in range(len(state.buffers))], np.uint64)[where]
    return (flat - starts).view(np.int64).reshape(addresses.shape)

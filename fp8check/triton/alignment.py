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

from typing import Any, Callable

import numpy as np

from fp8check.triton.targets import CUDA_CACHING_ALLOCATOR, Allocator

__all__ = ["allocator", "device_offsets", "use_target_of"]

_TARGET_OF_BLOCK: list[Callable[[], Any]] = []  # the open faithful block's target (registered by interpreter mode)


def use_target_of(fn: Callable[[], Any]) -> None:
    """Judge pointer hints under the target ``fn()`` returns (the open ``faithful`` block's; None: CUDA's)."""
    _TARGET_OF_BLOCK[:] = [fn]


def allocator() -> Allocator:
    """The allocator of the target hints are judged under (PyTorch's CUDA caching allocator without one)."""
    target = _TARGET_OF_BLOCK[0]() if _TARGET_OF_BLOCK else None
    return target.allocator if target is not None else CUDA_CACHING_ALLOCATOR


def device_offsets(addresses: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per lane, the byte offset of a pointer's ``addresses`` from the ``starts`` of the storages they point
    into: the part of the device address the kernel computes (the start is the allocator's)."""
    return (addresses.astype(np.uint64) - starts.astype(np.uint64)).view(np.int64)

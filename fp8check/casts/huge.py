"""Huge calls: one input past 2^31 elements and one with more than 65,535 rows.

Index arithmetic that is right for every input a CPU test can afford goes
wrong only at sizes a GPU has room for: a Triton kernel whose offsets are
``tl.program_id(0) * BLOCK`` (int32) writes wrong codes past 2^31 elements
(measured on an H200: 4,096 wrong of 2^31 + 4,096) or, where the wrapped
offsets leave every allocation, faults (gpu/huge.py's kernel on an H200 with
torch 2.11 and Triton 3.6: an illegal memory access, a finding of
:mod:`fp8check.device_faults` attributed to the huge call), and a launch that puts
rows on a grid's y or z dimension fails past 65,535 rows. On a CUDA device
with enough free memory, the checks of casts and quantizers make one call of
each by default; when they are not made there (too little free memory, a
declared ``max_numel``) the result says so in a note, and so does a check of
a Triton kernel in the interpreter on a CPU.
``--max-numel`` (``supports.max_numel``) opts out: a call larger than the
kernel's declared domain is not made.

The huge input is a tile of already-checked patterns repeated, so the
expected output is the tile's, repeated: nothing is computed twice, and the
comparison runs in chunks (a kernel wrong everywhere costs no more memory).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["HUGE_NUMEL", "MANY_ROWS", "HugeCall", "plan", "compare_tiled"]

HUGE_NUMEL = (1 << 31) + 4096  # one block of 4,096 past 2^31 (the H200 measurement)
MANY_ROWS = (1 << 16) + 17  # more rows than a grid's y or z dimension holds (65,535)
MANY_ROWS_COLS = 64
_CHUNK = 1 << 26


@dataclass(frozen=True)
class HugeCall:
    """One huge call: its shape and what it is for, in words."""

    shape: tuple[int, ...]
    what: str
    virtual: bool = False  # interpreted without allocating it (fp8check.triton.virtual): a Triton kernel on a CPU

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    def condition(self) -> str:
        return f"only for a huge input: {self.what} (shape {self.shape}, {self.numel:,} elements)"


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.1f} GiB"


def plan(device: str, *, bytes_per_element: int, max_numel: int | None = None, numel_multiple_of: int = 1,
         force: bool | None = None, numel: int = HUGE_NUMEL, rows: int = MANY_ROWS,
         cols: int = MANY_ROWS_COLS, row_multiple: int = 1, virtual: bool = False) -> tuple[list[HugeCall], str]:
    """The huge calls to make on ``device`` and a note for the result ("" when both are made).

    ``bytes_per_element``: what one element costs on the device (input, the kernel's output and a
    float32 temporary it may make). ``force``: True makes the calls on any device (tests, with a
    small ``numel``), False never; None (default) on a CUDA device with room for them.
    ``row_multiple``: the many-rows call's row count is rounded up to it (a block quantizer's rows).
    ``virtual``: the caller can make the past-2^31 call of a Triton kernel interpreted on a CPU without
    allocating it (:mod:`fp8check.triton.virtual`, elementwise kernels): by default it is made so there.
    """
    if force is False:
        return [], ""
    many = -(-rows // row_multiple) * row_multiple
    wanted = [HugeCall((-(-numel // max(1, numel_multiple_of)) * max(1, numel_multiple_of),),
                       "past 2^31 elements" if numel > (1 << 31) else f"{numel:,} elements"),
              HugeCall((many, cols), f"{many:,} rows (more than 65,535)")]
    if force is None:
        if not str(device).startswith("cuda"):
            from fp8check.casts.harness import _triton_interpreting

            # A CPU kernel has no grid to overflow: the note is for a GPU kernel run in Triton's interpreter.
            if not _triton_interpreting():
                return [], ""
            if virtual and (max_numel is None or wanted[0].numel <= max_numel):
                # its last programs interpreted over a virtual input: int32 offsets caught on the CPU
                return [dataclasses.replace(wanted[0], virtual=True)], (
                    f"the call of {wanted[1].what} is made on a CUDA device only (grid limits)")
            return [], (f"no huge calls on {device}: on a CUDA device with room, one call of {HUGE_NUMEL:,} "
                        f"elements (past 2^31) and one of {MANY_ROWS:,} rows are made (int32 offsets, grid "
                        "limits)")
        import torch

        if not torch.cuda.is_available():
            return [], "no huge calls: no CUDA device here"
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        need = wanted[0].numel * bytes_per_element
        if free < need:
            wanted = wanted[1:]
            note = (f"the call past 2^31 elements was not made: it needs about {_gib(need)} free on {device}, "
                    f"{_gib(free)} are")
        else:
            note = ""
    else:
        note = ""
    if max_numel is not None:
        skipped = [c for c in wanted if c.numel > max_numel]
        wanted = [c for c in wanted if c.numel <= max_numel]
        if skipped:
            note = "; ".join(filter(None, [note, "max_numel " f"{max_numel:,} (the kernel's declared domain): not "
                                           "made: " + ", ".join(c.what for c in skipped)]))
    return wanted, note


def compare_tiled(actual: np.ndarray, tile_expected: np.ndarray, same: Callable[[np.ndarray, np.ndarray], np.ndarray],
                  *, samples: int = 64) -> tuple[int, np.ndarray]:
    """Compare ``actual`` (flat codes) with ``tile_expected`` repeated; (how many differ, the indices of the
    first ``samples`` that do). ``same(expected, actual)``: the mask of equal codes (NaN by class)."""
    actual = np.asarray(actual).reshape(-1)
    period = tile_expected.size
    count = 0
    found: list[np.ndarray] = []
    taken = 0
    chunk = max(period, _CHUNK // period * period)  # whole tiles per chunk
    for start in range(0, actual.size, chunk):
        a = actual[start:start + chunk]
        e = np.resize(tile_expected, a.size)
        bad = np.flatnonzero(~same(e, a))
        count += int(bad.size)
        if taken < samples and bad.size:
            found.append(bad[:samples - taken] + start)
            taken += min(bad.size, samples - taken)
    return count, (np.concatenate(found) if found else np.zeros(0, np.int64))


def tiled(tile: Any, shape: tuple[int, ...]) -> Any:
    """A contiguous tensor of ``shape`` holding the flat ``tile`` repeated (made on the tile's device)."""
    n = int(np.prod(shape))
    reps = -(-n // int(tile.numel()))
    return tile.reshape(-1).repeat(reps)[:n].reshape(shape)

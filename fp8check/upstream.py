"""Known upstream divergences of real stacks from the profiles they claim.

Each is data: which stack and format, which inputs, why, and the upstream
issue (or that none was found). The suite marks them as strict expected
failures and ``fp8check survey`` reports them as known rather than new.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["KnownDivergence", "KNOWN_DIVERGENCES", "e8m0_subnormal_round_up", "known_for"]


def e8m0_subnormal_round_up(x: np.ndarray) -> np.ndarray:
    """The inputs ml_dtypes and torch round up from 2**-127 (0x00) to 2**-126
    (0x01) although they are nearer 2**-127: |x| in (2**-127, 1.5 * 2**-127)
    once rounded to float32, where float32 is subnormal."""
    with np.errstate(all="ignore"):
        v = np.abs(np.asarray(x).astype(np.float32).astype(np.float64))
    return (v > 2.0**-127) & (v < 1.5 * 2.0**-127)


@dataclass(frozen=True)
class KnownDivergence:
    """A stack's known divergence from its own profile on some inputs."""

    name: str
    stacks: tuple[str, ...]
    formats: tuple[str, ...]
    summary: str
    upstream: str
    affected: Callable[[np.ndarray], np.ndarray]


KNOWN_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence(
        name="e8m0fnu subnormal round-up",
        stacks=("ml_dtypes", "torch"),
        formats=("e8m0fnu",),
        summary="float32 subnormals in (2**-127, 1.5 * 2**-127) round up to 0x01 instead of 0x00",
        upstream="no upstream issue found (pytorch/pytorch#146414 defines the cast as RNE)",
        affected=e8m0_subnormal_round_up,
    ),
)


def known_for(stack: str, fmt: str) -> tuple[KnownDivergence, ...]:
    """The known divergences of ``stack`` ("ml_dtypes", "torch") on ``fmt``."""
    return tuple(k for k in KNOWN_DIVERGENCES if stack in k.stacks and fmt in k.formats)

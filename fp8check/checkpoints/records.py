"""What the audit holds about a checkpoint while it reads it: its tensors (one :class:`Record` each), their scales
and the checkpoint's config and open files. Shared by the passes of :mod:`.audit`, the counting of
:mod:`.counting`, the per-tensor checks of :mod:`.tensor_checks` and :mod:`.convert`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fp8check import formats
from fp8check.checkpoints import conventions
from fp8check.checkpoints.findings import Finding
from fp8check.checkpoints.granularity import Granularity
from fp8check.checkpoints.layouts import Layout
from fp8check.checkpoints.loaders import CheckpointFile, TensorEntry
from fp8check.checkpoints.stats import CodeStats, ScaleStats
from fp8check.checkpoints.targets import ConversionPlan

SCALE_ROLES = (conventions.ROLE_SCALE, conventions.ROLE_ACTIVATION_SCALE, conventions.ROLE_KV_SCALE)


@dataclass
class ScaleInfo:
    key: tuple[str, str]
    entry: TensorEntry
    kind: str | None
    stats: ScaleStats | None = None
    values: np.ndarray | None = None
    granularity: Granularity | None = None


@dataclass(slots=True)  # one per tensor of the checkpoint, all held until the end: no __dict__ each
class Record:
    """One tensor while it is being audited."""

    key: tuple[str, str]
    entry: TensorEntry | None
    role: str
    fmt: formats.Format | None = None
    scale: ScaleInfo | None = None
    scale_of: str | None = None
    scale_stats: ScaleStats | None = None
    scale_values: np.ndarray | None = None  # kept only when small
    hist: np.ndarray | None = None  # the 256 code counts, until the tensor's result is made
    counted: bool = False  # every code of the tensor was counted
    unread: str = ""  # why the data of this tensor was not read, if it was meant to be
    findings: list[Finding] = field(default_factory=list)
    plans: dict[str, ConversionPlan] = field(default_factory=dict)
    format_source: str | None = None
    unpaired: list[str] = field(default_factory=list)  # scale-like names nearby that pair with nothing
    code_stats: CodeStats | None = None  # from hist, until the tensor's result is made
    finished: bool = False  # its findings are made
    layout: Layout | None = None  # the producer layout it was read as (None: no config names one)
    second_scale: tuple[str, str] | None = None  # NVFP4's per-tensor scale
    broken: str = ""  # why no loader can dequantize this tensor (its scale is missing or does not fit)
    beyond_fnuz: int = 0
    scale_x2_overflow: int = 0  # data elements whose scale x 2 overflows its dtype (a loader's scale becomes Inf)
    block_ok: np.ndarray | None = None  # a block plan: which scale elements take the factor (the scale's shape)
    packed_logical: tuple[int, ...] | None = None  # packed data: the logical shape of its e2m1 values

    @property
    def counts_data(self) -> bool:
        """Whether the audit counts this tensor's codes: FP8 or packed data that can be read."""
        return self.role in (conventions.ROLE_FP8, conventions.ROLE_PACKED) and self.entry is not None \
            and not self.entry.note


@dataclass
class Checkpoint:
    root: str
    index: str | None
    files: list[str]
    config: conventions.QuantConfig
    config_problems: list[str]
    readers: dict[str, CheckpointFile]
    records: list[Record]
    dequant_dtype: str
    fp8_scales: set[tuple[str, str]] = field(default_factory=set)
    strict_missing: bool = False
    scale_kinds: dict[tuple[str, str], str] = field(default_factory=dict)  # how a scale is read, where not by dtype

    def entry(self, key: tuple[str, str]) -> TensorEntry:
        return self.readers[key[0]].entries[key[1]]

"""What an audit returns: typed results, and their JSON form (``fp8check audit --json``).

:class:`AuditResult` holds the files, checkpoints, per-tensor results,
verdicts and summary of one audit. ``to_dict()`` gives the JSON document
(docs/audit.md describes it; the HTML report reads it); ``json_data()``
gives the same with the tensors as a :class:`fp8check.outputs.JsonStream`,
so that a report of any number of tensors is written one tensor at a time.

The tensors of a large audit are not held in memory: :class:`TensorRows`
keeps them in an anonymous temporary file (written and read only by this
process) and gives them back one at a time.
"""

from __future__ import annotations

import array
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, Iterator, NamedTuple

from fp8check.checkpoints import findings
from fp8check.checkpoints.conventions import QuantConfig
from fp8check.checkpoints.granularity import Granularity
from fp8check.checkpoints.stats import CodeStats, ScaleStats
from fp8check.checkpoints.targets import ConversionPlan, Verdict
from fp8check.outputs import JsonStream, json_line, json_ready

AUDIT_SCHEMA_VERSION = 1

__all__ = ["AUDIT_SCHEMA_VERSION", "AuditResult", "FileResult", "CheckpointResult", "ScaleRef", "TensorResult",
           "TensorRows", "RowBrief", "Summary", "Verdict"]


@dataclass
class FileResult:
    """One file: read (``ok``), unreadable or refused (``error``), or not part of the audit (``skipped``)."""

    path: str
    status: str  # "ok" | "error" | "skipped"
    kind: str | None = None  # "safetensors" | "torch-zip" | "torch-legacy"
    size_bytes: int | None = None
    tensors: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "status": self.status}
        if self.status == "skipped":
            d["reason"] = self.reason
            return d
        if self.kind is not None:
            d.update(kind=self.kind, size_bytes=self.size_bytes, tensors=self.tensors, metadata=dict(self.metadata),
                     notes=list(self.notes))
        if self.status == "error":
            d["error"] = self.error
        return d


@dataclass
class CheckpointResult:
    """Files read as one checkpoint (an index's shards, a directory, or files given together)."""

    root: str
    index: str | None
    files: list[str]
    config: QuantConfig
    config_problems: list[str]
    dequant_dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root, "index": self.index, "files": list(self.files), "config": self.config.to_dict(),
                "config_problems": list(self.config_problems), "dequant_dtype": self.dequant_dtype}


@dataclass
class ScaleRef:
    """The scale an FP8 tensor was paired with."""

    name: str
    file: str
    dtype: str
    shape: tuple[int, ...]
    read_as: str | None
    granularity: Granularity | None
    stats: ScaleStats | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "file": self.file, "dtype": self.dtype, "shape": list(self.shape),
                "read_as": self.read_as, "granularity": self.granularity.to_dict() if self.granularity else None,
                "convention": "multiply", "named_inverse": self.name.endswith("_inv"),
                "stats": self.stats.to_dict() if self.stats else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScaleRef:
        """Read back from :meth:`to_dict`'s JSON form."""
        return cls(name=d["name"], file=d["file"], dtype=d["dtype"], shape=tuple(d["shape"]), read_as=d["read_as"],
                   granularity=Granularity.from_dict(d["granularity"]) if d["granularity"] else None,
                   stats=ScaleStats.from_dict(d["stats"]) if d["stats"] else None)


@dataclass
class TensorResult:
    """One tensor: what the file says about it, what was read, and the findings."""

    name: str
    file: str
    role: str  # fp8 | scale | activation_scale | kv_scale | bytes | packed | other | missing
    dtype: str | None = None
    format: str | None = None
    shape: tuple[int, ...] | None = None
    numel: int | None = None
    nbytes: int | None = None
    format_source: str | None = None
    note: str | None = None  # why data was not read, if it was not
    scale: ScaleRef | None = None
    scale_of: str | None = None
    stats: CodeStats | None = None
    scale_stats: ScaleStats | None = None
    conversions: dict[str, ConversionPlan] = field(default_factory=dict)
    findings: list[findings.Finding] = field(default_factory=list)

    @property
    def severity(self) -> str | None:
        return findings.worst(self.findings)

    def to_dict(self, *, histogram: bool = True) -> dict[str, Any]:
        return {
            "name": self.name, "file": self.file, "dtype": self.dtype, "format": self.format,
            "shape": list(self.shape) if self.shape is not None else None, "numel": self.numel, "nbytes": self.nbytes,
            "role": self.role, "format_source": self.format_source, "note": self.note,
            "scale": self.scale.to_dict() if self.scale else None, "scale_of": self.scale_of,
            "stats": self.stats.to_dict(histogram=histogram) if self.stats else None,
            "scale_stats": self.scale_stats.to_dict() if self.scale_stats else None,
            "conversions": {k: v.to_dict() for k, v in self.conversions.items()},
            "severity": self.severity, "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TensorResult:
        """Read back from :meth:`to_dict`'s JSON form (what ``fp8check audit --json`` writes per tensor)."""
        return cls(
            name=d["name"], file=d["file"], role=d["role"], dtype=d["dtype"], format=d["format"],
            shape=tuple(d["shape"]) if d["shape"] is not None else None, numel=d["numel"], nbytes=d["nbytes"],
            format_source=d["format_source"], note=d["note"],
            scale=ScaleRef.from_dict(d["scale"]) if d["scale"] else None, scale_of=d["scale_of"],
            stats=CodeStats.from_dict(d["stats"]) if d["stats"] else None,
            scale_stats=ScaleStats.from_dict(d["scale_stats"]) if d["scale_stats"] else None,
            conversions={k: ConversionPlan.from_dict(v) for k, v in d["conversions"].items()},
            findings=[findings.Finding(**f) for f in d["findings"]])


def _row_json(row: TensorResult) -> str:
    """``row.to_dict()`` as one line of JSON, its code counts written by :meth:`CodeStats.histogram_json`
    (so ``histogram`` comes last in ``stats``, and ``stats`` last in the row)."""
    if row.stats is None:
        return json_line(row.to_dict())
    d = row.to_dict(histogram=False)
    stats = json_line(d.pop("stats"))
    return f'{json_line(d)[:-1]},"stats":{stats[:-1]},"histogram":{row.stats.histogram_json()}}}}}'


class RowBrief(NamedTuple):
    """What selecting a row needs, kept in memory for every row: its name, role and worst severity."""

    name: str
    role: str
    severity: str | None


class TensorRows:
    """The tensors of an audit, in order, given back one at a time.

    Up to ``keep`` of them stay in memory; past that each is written, as the
    line of JSON the report holds for it, to an anonymous temporary file
    (unlinked at once, readable only through this object), so that the
    memory an audit holds does not grow with its tensors' statistics. The
    JSON report copies those lines (:meth:`json_lines`); the terminal and the
    HTML report pick the rows they show from :meth:`briefs` and read back only
    those (:meth:`get`).
    """

    def __init__(self, keep: int = 1000) -> None:
        self._keep = keep
        self._rows: list[TensorResult] = []
        self._briefs: list[RowBrief] = []
        self._spool: IO[bytes] | None = None
        self._offsets = array.array("q")  # where each spooled row starts; one more: where the spool ends

    def append(self, row: TensorResult) -> None:
        self._briefs.append(RowBrief(row.name, row.role, row.severity))
        if self._spool is None and len(self._rows) < self._keep:
            self._rows.append(row)
            return
        if self._spool is None:
            self._spool = tempfile.TemporaryFile(prefix="fp8check-audit-")
            self._offsets.append(0)
            for r in self._rows:
                self._write(r)
            self._rows = []
        self._write(row)

    def _spooled(self) -> IO[bytes]:
        if self._spool is None:
            raise RuntimeError("TensorRows: no spool (closed, or its rows are in memory)")
        return self._spool

    def _write(self, row: TensorResult) -> None:
        data = _row_json(row).encode("utf-8") + b"\n"
        self._spooled().write(data)
        self._offsets.append(self._offsets[-1] + len(data))

    def __len__(self) -> int:
        return len(self._briefs)

    def briefs(self) -> list[RowBrief]:
        return self._briefs

    def _line(self, i: int) -> bytes:
        start, end = self._offsets[i], self._offsets[i + 1]
        return os.pread(self._spooled().fileno(), end - start, start)  # by offset: iterations may interleave

    def json_lines(self) -> Iterator[str]:
        """Each row as one compact line of strict JSON (:func:`fp8check.outputs.json_line`), in order."""
        if self._spool is None:
            for r in list(self._rows):
                yield _row_json(r)
            return
        self._spool.flush()
        for i in range(len(self._offsets) - 1):
            yield self._line(i)[:-1].decode("utf-8")

    def get(self, indices: list[int]) -> list[TensorResult]:
        """The rows at ``indices`` (in that order)."""
        if self._spool is None:
            return [self._rows[i] for i in indices]
        self._spool.flush()
        return [TensorResult.from_dict(json.loads(self._line(i))) for i in indices]

    def __iter__(self) -> Iterator[TensorResult]:
        if self._spool is None:
            yield from list(self._rows)
            return
        for line in self.json_lines():
            yield TensorResult.from_dict(json.loads(line))

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._rows = []
        self._briefs = []
        self._offsets = array.array("q")


@dataclass
class Summary:
    tensors: int = 0
    fp8_tensors: int = 0
    scale_tensors: int = 0
    fp8_bytes: int = 0
    packed_tensors: int = 0  # packed FP4 data (MXFP4, NVFP4: two e2m1 codes a byte)
    packed_bytes: int = 0
    bytes_read: int = 0
    files: int = 0
    unreadable_files: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    findings_by_code: dict[str, dict[str, Any]] = field(default_factory=dict)
    formats: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)  # why the verdicts are unknown, if they are
    fail_on: str = findings.ERROR
    exit_code: int = 0
    seconds: float = 0.0

    def count(self, row: TensorResult) -> None:
        """Add one tensor's findings and kind to the totals."""
        for f in row.findings:
            if f.severity == findings.ERROR:
                self.errors += 1
            elif f.severity == findings.WARNING:
                self.warnings += 1
            else:
                self.infos += 1
            agg = self.findings_by_code.setdefault(f.code, {"severity": f.severity, "tensors": 0, "count": 0})
            agg["tensors"] += 1
            agg["count"] += f.count
            if findings.SEVERITY_RANK[f.severity] > findings.SEVERITY_RANK[agg["severity"]]:
                agg["severity"] = f.severity

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensors": self.tensors, "fp8_tensors": self.fp8_tensors, "scale_tensors": self.scale_tensors,
            "fp8_bytes": self.fp8_bytes, "packed_tensors": self.packed_tensors, "packed_bytes": self.packed_bytes,
            "bytes_read": self.bytes_read, "files": self.files,
            "unreadable_files": self.unreadable_files, "errors": self.errors, "warnings": self.warnings,
            "infos": self.infos, "findings_by_code": self.findings_by_code, "formats": self.formats,
            "verdicts": self.verdicts, "unknown": list(self.unknown), "fail_on": self.fail_on,
            "exit_code": self.exit_code, "seconds": self.seconds,
            "bytes_per_second": self.bytes_read / self.seconds if self.seconds > 0 else None,
        }


@dataclass
class AuditResult:
    paths: list[str]
    environment: dict[str, Any]
    options: dict[str, Any]
    files: list[FileResult]
    checkpoints: list[CheckpointResult]
    summary: Summary
    portability: list[Verdict]
    tensors: TensorRows

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code

    def _head(self) -> dict[str, Any]:
        return {
            "fp8check_audit": AUDIT_SCHEMA_VERSION,
            "command": "audit",
            "paths": list(self.paths),
            "environment": self.environment,
            "options": self.options,
            "files": [f.to_dict() for f in self.files],
            "checkpoints": [c.to_dict() for c in self.checkpoints],
            "summary": self.summary.to_dict(),
            "portability": [v.to_dict() for v in self.portability],
            "finding_codes": {c.code: {"severity": c.severity, "title": c.title, "rule": c.rule}
                              for c in findings.CODES.values()},
            "thresholds": {
                "SATURATION_SHARE": findings.SATURATION_SHARE, "SATURATION_MIN_COUNT": findings.SATURATION_MIN_COUNT,
                "SATURATION_PILEUP": findings.SATURATION_PILEUP,
                "UNDERFLOW_ZERO_SHARE": findings.UNDERFLOW_ZERO_SHARE, "UNDERFLOW_EDGE_SHARE": findings.UNDERFLOW_EDGE_SHARE,
                "WEIGHT_MAGNITUDE_BOUND": findings.WEIGHT_MAGNITUDE_BOUND, "SIBLINGS_MIN": findings.SIBLINGS_MIN,
                "FUSED_RATIO_ERROR": findings.FUSED_RATIO_ERROR,
            },
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole JSON document in memory (strict JSON: non-finite floats as strings)."""
        d = json_ready(self._head())
        d["tensors"] = [json.loads(line) for line in self.tensors.json_lines()]
        return d

    def json_data(self) -> dict[str, Any]:
        """The JSON document with its tensors streamed: for :func:`fp8check.outputs.write_json`."""
        d = json_ready(self._head())
        d["tensors"] = JsonStream(self.tensors.json_lines(), encoded=True)
        return d

    def close(self) -> None:
        self.tensors.close()

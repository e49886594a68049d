"""The audit: files -> tensors and scales -> statistics -> findings -> verdicts.

Passes over one run:

1. discover the files (:mod:`.loaders`), open each safely, read configs;
2. pair FP8 tensors with scales across each checkpoint (:mod:`.conventions`);
3. read every scale (small) and summarise it; check its shape (:mod:`.granularity`);
4. count the 256 codes of every FP8 tensor, streamed chunk by chunk, on a
   thread pool (or one process per file with ``parallel="processes"``)
   (:mod:`.counting`);
5. as each tensor's counts come in (in order), derive its findings and
   conversion plans; only where the cheap bound says a dequantization might
   overflow, count exactly; the tensor's result is handed on and its counts
   dropped, so memory does not grow with the number of tensors
   (:mod:`.tensor_checks`);
6. portability verdicts per target, tallied tensor by tensor.

Unreadable files are reported and skipped; the rest is still audited, and
every verdict is ``unknown`` (DESIGN rule 12: a verdict only for what was read).
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from fp8check import formats
from fp8check.checkpoints import (conventions, ct_strategy, encodings, findings, granularity, layouts, relations, stats,
                                  targets)
from fp8check.checkpoints.audit_result import (AUDIT_SCHEMA_VERSION, AuditResult, CheckpointResult, FileResult,
                                               ScaleRef, Summary, TensorResult, TensorRows)
from fp8check.checkpoints.counting import CodeCounter
from fp8check.checkpoints.loaders import (CheckpointFile, Discovery, discover, open_checkpoint, read_config,
                                          require_torch)
from fp8check.checkpoints.records import SCALE_ROLES, Checkpoint, Record, ScaleInfo
from fp8check.checkpoints.tensor_checks import TensorChecks
from fp8check.errors import CheckpointError, InvalidValueError
from fp8check.progress import ProgressSink

__all__ = ["AUDIT_SCHEMA_VERSION", "AuditOptions", "Auditor", "audit"]

DEFAULT_DEQUANT_DTYPE = "bfloat16"
MAX_DEFAULT_JOBS = 32
_KEEP_SCALE_VALUES = 1 << 12  # keep small scale values; larger ones are read again when needed (rarely)


@dataclass
class AuditOptions:
    targets: tuple[str, ...] = ()
    dequant_dtype: str | None = None  # None: the config's torch_dtype, else bfloat16
    bytes_format: str | None = None
    jobs: int | None = None
    parallel: str = "threads"  # or "processes"
    chunk_bytes: int = stats.CHUNK_BYTES
    fail_on: str = findings.ERROR


def _bytes_format(name: str | None) -> formats.Format | None:
    if name is None:
        return None
    f = formats.get(name)
    if f not in formats.FP8_FORMATS:
        raise InvalidValueError(f"--bytes-format must be an FP8 format ({', '.join(x.name for x in formats.FP8_FORMATS)}), "
                                f"got {name!r}")
    return f


class Auditor:
    """One audit. :meth:`prepare` opens, pairs and reads scales; :meth:`finished`
    counts the FP8 tensors and yields each tensor's record in order, its findings made."""

    def __init__(self, options: AuditOptions, progress: ProgressSink | None = None) -> None:
        self.o = options
        self.progress = progress or ProgressSink()
        # each worker holds one 16 MB chunk resident while it counts it
        self.jobs = max(1, options.jobs or min(os.cpu_count() or 1, MAX_DEFAULT_JOBS))
        if options.parallel not in ("threads", "processes"):
            raise InvalidValueError(f"parallel must be 'threads' or 'processes', got {options.parallel!r}")
        if options.dequant_dtype is not None and options.dequant_dtype not in stats.DEQUANT_DTYPES:
            raise InvalidValueError(f"dequantized dtype must be one of {', '.join(stats.DEQUANT_DTYPES)}, "
                                    f"got {options.dequant_dtype!r}")
        if options.fail_on not in findings.SEVERITIES:
            raise InvalidValueError(f"fail_on must be one of {', '.join(findings.SEVERITIES)}, got {options.fail_on!r}")
        self.targets = [targets.get_target(t) for t in options.targets]
        self.bytes_format = _bytes_format(options.bytes_format)
        self.files: dict[str, FileResult] = {}
        self.checkpoints: list[Checkpoint] = []
        self._lock = threading.Lock()
        self.bytes_read = 0
        self._started = time.perf_counter()
        self._torch_threads: int | None = None
        self.counter = CodeCounter(self.checkpoints, jobs=self.jobs, chunk_bytes=options.chunk_bytes,
                                   parallel=options.parallel, progress=self.progress, file_error=self._file_error)
        self.checks = TensorChecks(self.targets, self._file_error)

    # -- file bookkeeping --

    def _file_error(self, exc: CheckpointError) -> None:
        with self._lock:
            info = self.files.get(exc.path)
            if info is None:
                info = self.files[exc.path] = FileResult(path=exc.path, status="error")
            info.status = "error"
            info.error = exc.reason

    # -- 1, 2: open and pair --

    def _open(self, disc: Discovery) -> None:
        for problem in disc.problems:
            self._file_error(problem)
        for path, why in disc.skipped:
            self.files.setdefault(path, FileResult(path=path, status="skipped", reason=why))
        for group in disc.groups:
            docs, problems = read_config(group.config_dir)
            config = conventions.parse_config(docs)
            readers: dict[str, CheckpointFile] = {}
            for path in group.files:
                try:
                    reader = open_checkpoint(path)
                except CheckpointError as exc:
                    self._file_error(exc)
                    continue
                readers[path] = reader
                self.files[path] = FileResult(path=path, status="ok", kind=reader.kind, size_bytes=reader.size,
                                              tensors=len(reader.entries), metadata=dict(reader.metadata),
                                              notes=list(reader.notes))
            dequant = self.o.dequant_dtype or config.dequant_dtype or DEFAULT_DEQUANT_DTYPE
            if dequant not in stats.DEQUANT_DTYPES:
                dequant = DEFAULT_DEQUANT_DTYPE
            ck = Checkpoint(root=group.root, index=group.index, files=list(group.files), config=config,
                            config_problems=problems, readers=readers, records=[], dequant_dtype=dequant)
            self._pair(ck, group.weight_map)
            ck.strict_missing = bool(ck.config.quant_method) or any(
                r.scale is not None for r in ck.records if r.role == conventions.ROLE_FP8)
            self.checkpoints.append(ck)

    def _pair(self, ck: Checkpoint, weight_map: dict[str, str]) -> None:
        entries = {f: r.entries for f, r in ck.readers.items()}
        pairing = conventions.pair(entries, config=ck.config, bytes_format=self.bytes_format, weight_map=weight_map)
        by_key: dict[tuple[str, str], Record] = {}
        for f, reader in ck.readers.items():
            for name, e in reader.entries.items():
                key = (f, name)
                rec = Record(key=key, entry=e, role=pairing.roles.get(key, conventions.ROLE_OTHER),
                             fmt=pairing.formats.get(key), format_source=pairing.byte_format_source.get(key))
                by_key[key] = rec
                ck.records.append(rec)
        for data_key, scale_key in pairing.scale_of.items():
            data = by_key[data_key]
            if data.role in (conventions.ROLE_FP8, conventions.ROLE_BYTES, conventions.ROLE_PACKED,
                             conventions.ROLE_OTHER):
                by_key[scale_key].scale_of = data_key[1]
            if data.role in (conventions.ROLE_FP8, conventions.ROLE_PACKED):
                ck.fp8_scales.add(scale_key)
                sc = by_key[scale_key].entry
                data.scale = ScaleInfo(key=scale_key, entry=sc, kind=stats.scale_kind(sc.dtype))
                extra = pairing.ambiguous.get(data_key)
                if extra:
                    data.findings.append(findings.make(
                        "SCALE_AMBIGUOUS", 1 + len(extra),
                        f"scale candidates {[scale_key[1]] + extra}; using {scale_key[1]}"))
            elif data.role == conventions.ROLE_BYTES:
                data.findings.append(findings.make(
                    "BYTES_FORMAT_UNKNOWN", 1,
                    f"{data.entry.dtype} tensor with scale {scale_key[1]}: no config says it holds FP8 "
                    f"(pass --bytes-format to audit it as FP8)"))
        for data_key, names in pairing.unpaired.items():
            by_key[data_key].unpaired = list(names)
        self._bind_layouts(ck)
        # a torchao tensor subclass X.weight is read as X.weight.qdata + X.weight.scale: the index's X.weight is there
        subclass_roots = {name.rpartition(".")[0] for f in ck.readers for name in ck.readers[f].entries}
        for name, f in weight_map.items():
            if f in ck.readers and name not in ck.readers[f].entries and name not in subclass_roots:
                rec = Record(key=(f, name), entry=None, role="missing")
                rec.findings.append(findings.make("INDEX_MISSING_TENSOR", 1,
                                            f"the index maps this tensor to {os.path.basename(f)}, which lacks it"))
                ck.records.append(rec)

    @staticmethod
    def _bind_layouts(ck: Checkpoint) -> None:
        """The producer layout of each quantized tensor (packed: also its per-tensor scale). Packed NVFP4 block
        scales saved as U8 are read as the e4m3fn codes their layout means (SCALE_ENCODING says so)."""
        for rec in ck.records:
            if rec.entry is None:
                continue
            scale_dtype = rec.scale.entry.dtype if rec.scale else None
            if rec.role == conventions.ROLE_FP8:
                rec.layout = layouts.fp8_layout(ck.config.quant_method, str(ck.config.raw.get("format", "")),
                                                name=rec.key[1], scale_dtype=scale_dtype)
            if rec.role != conventions.ROLE_PACKED:
                continue
            rec.layout = layouts.packed_layout(ck.config.packed, ck.config.quant_method, name=rec.key[1],
                                               scale_dtype=scale_dtype, file_packed=rec.entry.packed)
            for cand in layouts.second_scale_names(rec.key[1]):
                if cand in ck.readers[rec.key[0]].entries:
                    rec.second_scale = (rec.key[0], cand)
                    break
            if rec.layout is not None and rec.scale is not None and rec.layout.scale_format == "e4m3fn" \
                    and scale_dtype == "uint8":
                rec.scale.kind = ck.scale_kinds[rec.scale.key] = "float8_e4m3fn"

    # -- 3: scales --

    def _read_scales(self, ck: Checkpoint) -> None:
        for rec in ck.records:
            if rec.entry is None or rec.role not in SCALE_ROLES:
                continue
            kind = ck.scale_kinds.get(rec.key) or stats.scale_kind(rec.entry.dtype)
            if kind is None or rec.entry.note:
                continue
            try:
                tensor = ck.readers[rec.key[0]].tensor(rec.key[1])
                summary, values = stats.scale_stats(tensor, rec.entry.dtype, kind,
                                                    kv=rec.role == conventions.ROLE_KV_SCALE)
            except CheckpointError as exc:
                self._file_error(exc)
                rec.unread = exc.reason
                continue
            rec.scale_stats = summary
            self.progress.advance(rec.entry.nbytes)
            self.bytes_read += rec.entry.nbytes
            # a scale of FP8 data reports through its data; any other scale reports itself
            if rec.key not in ck.fp8_scales:
                rec.findings.extend(_scale_findings(summary, rec.key[1], ck.config))
                if summary.absent_sentinel:
                    rec.findings.append(findings.make("KV_SCALE_ABSENT", summary.absent_sentinel,
                                                "KV-cache scale is -1: no calibrated scale, the server uses its default"))
            rec.scale_values = values if values.size <= _KEEP_SCALE_VALUES else None
        by_key = {r.key: r for r in ck.records}
        for rec in ck.records:
            sc = rec.scale
            if rec.role not in (conventions.ROLE_FP8, conventions.ROLE_PACKED) or sc is None:
                continue
            srec = by_key[sc.key]
            sc.stats = srec.scale_stats
            sc.values = srec.scale_values
            if srec.unread:
                rec.unread = rec.unread or f"its scale {sc.key[1]} could not be read: {srec.unread}"
            if sc.kind is None:
                rec.findings.append(findings.make("SCALE_DTYPE", 1, f"scale {sc.key[1]} is stored as {sc.entry.dtype}, "
                                                              "which no FP8 convention uses"))
                rec.broken = f"its scale {sc.key[1]} is stored as {sc.entry.dtype}"
                continue
            if rec.role == conventions.ROLE_PACKED:
                self._packed_scale_shape(rec)
            else:
                self._fp8_scale_shape(ck, rec)
            if sc.stats is not None:
                rec.findings.extend(_scale_findings(sc.stats, sc.key[1], ck.config))
        _outlier_findings([r for r in ck.records if r.role == conventions.ROLE_FP8 and r.scale is not None
                           and r.scale.granularity is not None and r.scale.stats is not None])
        for rec in ck.records:
            if rec.layout is not None and rec.scale is not None:
                try:
                    rec.findings.extend(encodings.scale_encoding_findings(ck, rec))
                except CheckpointError as exc:
                    self._file_error(exc)
                    rec.unread = rec.unread or exc.reason
        ct_strategy.strategy_findings(ck)
        relations.relation_findings(ck)

    def _fp8_scale_shape(self, ck: Checkpoint, rec: Record) -> None:
        """The granularity of an FP8 tensor's scale, bound to the block size the file or the config declares."""
        sc = rec.scale
        assert sc is not None and rec.entry is not None
        declared = rec.entry.block or ck.config.block
        g = granularity.match(rec.entry.shape, sc.entry.shape, e8m0=sc.kind == "e8m0", block_hint=declared,
                     group_hint=ck.config.group_size)
        why = ""
        if g is None:
            why = (f"fits no granularity of data {list(rec.entry.shape)}; expected e.g. "
                   f"{granularity.expected_shapes(rec.entry.shape)}")
        elif g.name in (granularity.TENSORWISE, granularity.ROWWISE) and declared and not rec.entry.block \
                and ck.config.block_everywhere and not granularity.data_dims(rec.entry.shape)[0] \
                and sc.entry.numel != math.prod(want := granularity.block_scale_shape(rec.entry.shape, declared)):
            # one scale per tensor (or row) where the config gives every weight blocks: a (1, 1) scale of a
            # weight no larger than one block is both, and fits
            why = (f"holds {'one scale per row' if g.name == granularity.ROWWISE else 'one scale'}, but "
                   f"{ck.config.source} declares {list(declared)} blocks for every weight: expected {want}")
            g = None
        elif g.name != granularity.TENSORWISE and g.name != granularity.ROWWISE and declared and not rec.entry.block \
                and (g.block_rows, g.block_cols) != declared:
            want = granularity.block_scale_shape(rec.entry.shape, declared)
            why = (f"is read as {g.block_rows}x{g.block_cols} blocks, but {ck.config.source} declares "
                   f"{list(declared)} blocks: expected {want}")
            g = None
        elif g.name not in (granularity.TENSORWISE, granularity.ROWWISE, granularity.COLWISE) \
                and ck.config.group_size and not declared \
                and g.block_rows == 1 and g.block_cols != ck.config.group_size:
            why = (f"is read as groups of {g.block_cols}, but {ck.config.source} declares group_size "
                   f"{ck.config.group_size}")
            g = None
        elif sc.kind == "e8m0" and g.name not in (granularity.TENSORWISE, granularity.MX_E8M0) and not rec.entry.block \
                and ck.config.block is None and ck.config.group_size is None:
            why = (f"holds e8m0 (MX) scales read as {g.block_rows}x{g.block_cols} blocks; MX blocks are "
                   f"1x{granularity.MX_BLOCK}")
            g = None
        sc.granularity = g
        if why:
            rec.findings.append(findings.make("SCALE_SHAPE", sc.entry.numel,
                                              f"scale {sc.key[1]} {list(sc.entry.shape)} {why}"))
            rec.broken = f"its scale {sc.key[1]} {list(sc.entry.shape)} does not fit the data (SCALE_SHAPE)"

    def _packed_scale_shape(self, rec: Record) -> None:
        """Packed fp4 data: its block scale must have the layout's shape exactly."""
        sc = rec.scale
        lay = rec.layout
        assert sc is not None and rec.entry is not None
        shape = tuple(rec.entry.shape)
        if lay is None or not shape:
            return
        block = (rec.entry.block[1] if rec.entry.block else None) or lay.block or 32
        if lay.name == "gpt-oss-mxfp4":
            ok = len(shape) >= 2 and shape[-1] == block // 2 and tuple(sc.entry.shape) == shape[:-1]
            want = list(shape[:-1])
            logical = shape[:-2] + (shape[-2] * block,) if len(shape) >= 2 else shape
            batch_dims = shape[:-3]
        else:
            logical = shape[:-1] + (shape[-1] * 2,)
            want = list(logical[:-1]) + [-(-logical[-1] // block)]
            ok = list(sc.entry.shape) == want
            batch_dims = shape[:-2]
        if not ok:
            rec.findings.append(findings.make(
                "SCALE_SHAPE", sc.entry.numel,
                f"scale {sc.key[1]} {list(sc.entry.shape)} does not fit {lay.name} data {list(shape)}: expected "
                f"{want} (one {lay.scale_format} scale per {block} e2m1 values)"))
            rec.broken = f"its scale {sc.key[1]} {list(sc.entry.shape)} does not fit the data (expected {want})"
            return
        nb = 1
        for d in batch_dims:
            nb *= d
        gran_name = granularity.MX_E8M0 if lay.scale_format == "e8m0" else granularity.GROUP
        sc.granularity = granularity.Granularity(gran_name, 1, block, nb if batch_dims else 1)
        rec.packed_logical = logical

    # -- 4: code counts, 5: per-tensor results --

    def finished(self) -> Iterator[tuple[Checkpoint, Record]]:
        """Count every FP8 tensor and yield each record, in order, once its findings are made."""
        yield from self.counter.finished(self.checks.finish)


    def prepare(self, paths: list[str]) -> None:
        """Steps 1-3; the files stay open (for counting and convert) until :meth:`close`."""
        self._started = time.perf_counter()
        disc = discover(paths)
        self._open(disc)
        if any(ck.readers for ck in self.checkpoints):
            # torch only once there is something to read: a refused or missing file is
            # answered without its import (3 s of a 3.5 s run).
            torch = require_torch()
            # The audit runs its own workers over single-threaded kernels; torch's
            # intra-op pool would only spin on the same cores (measured: 3.5x
            # slower on 2 cores). Restored in close().
            self._torch_threads = torch.get_num_threads()
            torch.set_num_threads(1)
        total = sum(rec.entry.nbytes for _, rec in self.counter.records()
                    if rec.entry is not None and (rec.counts_data or rec.role in SCALE_ROLES))
        self.progress.start(total, sum(len(ck.readers) for ck in self.checkpoints))
        for ck in self.checkpoints:
            self._read_scales(ck)

    def close(self) -> None:
        for ck in self.checkpoints:
            for reader in ck.readers.values():
                reader.close()
        self.progress.close()
        if self._torch_threads:
            import torch

            torch.set_num_threads(self._torch_threads)
            self._torch_threads = None

    def run(self, paths: list[str]) -> AuditResult:
        rows = TensorRows()
        summary = Summary(fail_on=self.o.fail_on)
        verdict_targets = self.targets or [targets.TARGETS[t] for t in targets.DEFAULT_TARGETS]
        tallies = [targets.VerdictTally(t) for t in verdict_targets]
        unknown = _UnknownTally()
        failing = False
        try:
            self.prepare(paths)
            for ck, rec in self.finished():
                row = _tensor_result(rec)
                rows.append(row)
                summary.count(row)
                failing = failing or any(findings.reaches(f.severity, self.o.fail_on) for f in row.findings)
                if row.findings:
                    for tally in tallies:
                        tally.add_findings(row.name, row.findings)
                unknown.add(rec)
                if rec.entry is not None:
                    summary.tensors += 1
                if rec.role == conventions.ROLE_FP8 and rec.entry is not None and rec.fmt is not None:
                    summary.fp8_tensors += 1
                    summary.fp8_bytes += rec.entry.nbytes
                    summary.formats[rec.fmt.name] = summary.formats.get(rec.fmt.name, 0) + 1
                    if rec.counted and rec.code_stats is not None:
                        cs = rec.code_stats
                        g = rec.scale.granularity if rec.scale is not None else None
                        kind = layouts.MXFP8 if g is not None and g.name == granularity.MX_E8M0 else layouts.FP8
                        item = targets.TensorPortability(name=rec.key[1], file=rec.key[0], format=rec.fmt,
                                                    numel=cs.numel, nan=cs.nan, neg_zeros=cs.neg_zeros, plans=rec.plans,
                                                    kind=kind, broken=rec.broken, beyond_fnuz=rec.beyond_fnuz,
                                                    scale_x2_overflow=rec.scale_x2_overflow)
                        for tally in tallies:
                            tally.add(item)
                elif rec.role == conventions.ROLE_PACKED and rec.entry is not None and rec.layout is not None:
                    summary.packed_tensors += 1
                    summary.packed_bytes += rec.entry.nbytes
                    summary.formats[rec.layout.kind] = summary.formats.get(rec.layout.kind, 0) + 1
                    if rec.counted and rec.code_stats is not None:
                        item = targets.TensorPortability(name=rec.key[1], file=rec.key[0], format=formats.E2M1FN,
                                                    numel=rec.code_stats.numel, nan=0, kind=rec.layout.kind,
                                                    broken=rec.broken)
                        for tally in tallies:
                            tally.add(item)
                elif rec.role in SCALE_ROLES:
                    summary.scale_tensors += 1
                # the counts and statistics live on in the row only
                rec.hist = None
                rec.code_stats = None
                rec.scale_values = None
                rec.findings = []
        finally:
            self.close()
        for ck in self.checkpoints:
            for problem in ck.config_problems:
                unknown.reasons.setdefault(f"config: {problem}", None)
            for what in ck.config.not_understood:
                unknown.reasons.setdefault(f"{ck.config.source or 'config'}: {what}, not understood", None)
            quantized = any(r.role in (conventions.ROLE_FP8, conventions.ROLE_PACKED, conventions.ROLE_BYTES)
                            for r in ck.records)
            if (ck.config.quant_method or ck.config.packed) and not quantized and ck.readers:
                unknown.reasons.setdefault(
                    f"{ck.config.source} declares quantization ({ck.config.quant_method or ck.config.packed}) but no "
                    "tensor was recognised as quantized data of a known layout", None)
        unreadable = sum(1 for f in self.files.values() if f.status == "error")
        portability = [t.result() for t in tallies]
        nothing_read = not any(f.status == "ok" for f in self.files.values())
        reasons = unknown.messages(unreadable, nothing_read=nothing_read)
        for v in portability:
            v.complete = not reasons
            if reasons:
                read = [] if nothing_read else [f"of what was read: {v.verdict.replace('_', ' ')}"] + v.reasons
                v.reasons = reasons + read
                v.verdict = targets.UNKNOWN
        summary.files = len(self.files)
        summary.unreadable_files = unreadable
        summary.bytes_read = self.bytes_read + self.counter.bytes_read
        summary.verdicts = {v.target: v.verdict for v in portability}
        summary.unknown = reasons
        summary.seconds = time.perf_counter() - self._started
        if unreadable or unknown.unread_data or any(ck.config_problems for ck in self.checkpoints) or not self.files:
            summary.exit_code = 2
        elif failing or reasons:
            summary.exit_code = 1
        else:
            summary.exit_code = 0
        from fp8check.results import environment

        return AuditResult(
            paths=list(paths), environment=environment(),
            options={"targets": [t.name for t in self.targets], "fail_on": self.o.fail_on,
                     "dequant_dtype": self.o.dequant_dtype, "bytes_format": self.o.bytes_format,
                     "jobs": self.jobs, "parallel": self.o.parallel},
            files=list(self.files.values()),
            checkpoints=[CheckpointResult(root=ck.root, index=ck.index, files=ck.files, config=ck.config,
                                          config_problems=ck.config_problems, dequant_dtype=ck.dequant_dtype)
                         for ck in self.checkpoints],
            summary=summary, portability=portability, tensors=rows)


OUTLIER_FACTOR = 64.0  # a weight scale this far from its siblings' median is a finding
OUTLIER_MIN_SIBLINGS = 3


def _median_scale(summary: stats.ScaleStats) -> float | None:
    """The median of a scale's elements, to an eighth of an octave, from its fine log2 histogram."""
    counts = summary.log2_fine_counts
    if not counts or summary.log2_fine_min_bin is None:
        return None
    half = (sum(counts) + 1) // 2
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= half:
            return float(2.0 ** ((summary.log2_fine_min_bin + i + 0.5) / stats.LOG2_FINE_BINS))
    return None


def _outlier_findings(recs: list[Record]) -> None:
    """SCALE_OUTLIER: a weight scale whose median is >= 64x from the median over its siblings (the
    checkpoint's other weight scales of the same dtype), with the factor and whether it looks inverted."""
    by_dtype: dict[str, list[tuple[Record, float]]] = {}
    for r in recs:
        assert r.scale is not None and r.scale.stats is not None
        m = _median_scale(r.scale.stats)
        if m is not None and r.scale.kind != "e8m0":  # MX scales follow each block's amax: no common level
            by_dtype.setdefault(r.scale.entry.dtype, []).append((r, m))
    for group in by_dtype.values():
        if len(group) < OUTLIER_MIN_SIBLINGS + 1:
            continue
        logs = np.log2([m for _, m in group])
        for k, (r, m) in enumerate(group):
            others = np.delete(logs, k)
            level = float(2.0 ** np.median(others))
            factor = m / level
            if 1 / OUTLIER_FACTOR < factor < OUTLIER_FACTOR:
                continue
            assert r.scale is not None
            inverted = 0.25 <= (1 / m) / level <= 4.0
            how = f"{factor:.3g}x" if factor >= 1 else f"1/{1 / factor:.3g}x"
            r.findings.append(findings.make(
                "SCALE_OUTLIER", r.scale.entry.numel,
                f"scale {r.scale.key[1]}: median {m:.3g}, {how} the median of {len(others)} sibling weight scales "
                f"({level:.3g})" + ("; 1/scale matches them: stored inverted?" if inverted else "")))


class _UnknownTally:
    """Why no verdict can be given: what was not read, counted by kind."""

    def __init__(self) -> None:
        self.reasons: dict[str, None] = {}
        self.unread_data = 0  # tensors whose data could not be read (an error, not a choice)
        self.not_audited: dict[str, int] = {}

    def add(self, rec: Record) -> None:
        if rec.unread:
            self.unread_data += 1
        elif rec.entry is None and rec.role == "missing":
            self.not_audited["tensors the index names but their shard lacks"] = \
                self.not_audited.get("tensors the index names but their shard lacks", 0) + 1
        elif rec.entry is not None and rec.entry.note and rec.role not in (conventions.ROLE_OTHER,):
            key = f"tensors not read ({rec.entry.note.split(':')[0]})"
            self.not_audited[key] = self.not_audited.get(key, 0) + 1
        elif rec.role == conventions.ROLE_BYTES:
            key = "one-byte tensors with a scale whose format nothing declares (--bytes-format FMT audits them)"
            self.not_audited[key] = self.not_audited.get(key, 0) + 1
        elif rec.role == conventions.ROLE_PACKED and rec.layout is None:
            key = "packed one-byte tensors (fp4 and the like) of a layout fp8check does not know"
            self.not_audited[key] = self.not_audited.get(key, 0) + 1

    def messages(self, unreadable_files: int, nothing_read: bool) -> list[str]:
        out = []
        if nothing_read:
            out.append("nothing was read")
        elif unreadable_files:
            out.append(f"{unreadable_files} {_plural(unreadable_files, 'file')} could not be read")
        if self.unread_data:
            out.append(f"{self.unread_data} {_plural(self.unread_data, 'tensor')} could not be read")
        for what, n in self.not_audited.items():
            out.append(f"{n} {what}")
        out.extend(self.reasons)
        return out


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _scale_findings(s: stats.ScaleStats, name: str, config: conventions.QuantConfig) -> list[findings.Finding]:
    out = []
    if s.nonfinite:
        out.append(findings.make("SCALE_NONFINITE", s.nonfinite,
                           f"{findings.of(s.nonfinite, s.numel, 'element')} of {name} {findings.be(s.nonfinite)} NaN/Inf"))
    if s.nonpositive:
        out.append(findings.make("SCALE_NONPOSITIVE", s.nonpositive,
                           f"{findings.of(s.nonpositive, s.numel, 'element')} of {name} {findings.be(s.nonpositive)} zero or "
                           f"negative (min {s.min:g})"))
    if s.subnormal:
        out.append(findings.make("SCALE_SUBNORMAL", s.subnormal,
                           f"{findings.of(s.subnormal, s.numel, 'element')} of {name} {findings.be(s.subnormal)} subnormal in "
                           f"{'float32' if s.kind == 'e8m0' else s.kind} (zero under flush-to-zero)"))
    if config.ue8m0_scales and s.kind != "e8m0" and s.not_pow2:
        out.append(findings.make("SCALE_NOT_POW2", s.not_pow2,
                           f"{findings.of(s.not_pow2, s.numel, 'element')} of {name} {findings.be(s.not_pow2)} not "
                           f"{'a power' if s.not_pow2 == 1 else 'powers'} of two, "
                           "but the config declares ue8m0 scales"))
    return out


def _tensor_result(rec: Record) -> TensorResult:
    e = rec.entry
    sc = rec.scale
    note = (e.note or None) if e else None
    if rec.unread:
        note = f"not read: {rec.unread}"
    return TensorResult(
        name=rec.key[1], file=rec.key[0], role=rec.role,
        dtype=e.dtype if e else None, format=rec.fmt.name if rec.fmt else None,
        shape=tuple(e.shape) if e else None, numel=e.numel if e else None, nbytes=e.nbytes if e else None,
        format_source=rec.format_source or ("dtype" if rec.fmt else None), note=note,
        scale=ScaleRef(name=sc.key[1], file=sc.key[0], dtype=sc.entry.dtype, shape=tuple(sc.entry.shape),
                       read_as=sc.kind, granularity=sc.granularity, stats=sc.stats) if sc is not None else None,
        scale_of=rec.scale_of, stats=rec.code_stats if rec.counted else None,
        scale_stats=rec.scale_stats, conversions=dict(rec.plans), findings=list(rec.findings))


def audit(paths: list[str], options: AuditOptions | None = None, progress: ProgressSink | None = None) -> AuditResult:
    """Audit checkpoint files and directories; an :class:`AuditResult` (``.to_dict()`` for the JSON form)."""
    return Auditor(options or AuditOptions(), progress).run(list(paths))
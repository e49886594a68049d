"""The audit: files -> tensors and scales -> statistics -> findings -> verdicts.

Passes over one run:

1. discover the files (:mod:`.loaders`), open each safely, read configs;
2. pair FP8 tensors with scales across each checkpoint (:mod:`.conventions`);
3. read every scale (small) and summarise it; check its shape (:mod:`.granularity`);
4. count the 256 codes of every FP8 tensor, streamed chunk by chunk, on a
   thread pool (or one process per file with ``parallel="processes"``);
5. as each tensor's counts come in (in order), derive its findings and
   conversion plans; only where the cheap bound says a dequantization might
   overflow, count exactly; the tensor's result is handed on and its counts
   dropped, so memory does not grow with the number of tensors;
6. portability verdicts per target, tallied tensor by tensor.

Unreadable files are reported and skipped; the rest is still audited, and
every verdict is ``unknown`` (DESIGN rule 12: a verdict only for what was read).
"""

from __future__ import annotations

import collections
import copy
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from fp8check import formats
from fp8check.checkpoints import conventions as cv
from fp8check.checkpoints import findings as fd
from fp8check.checkpoints import granularity as gr
from fp8check.checkpoints import layouts as lo
from fp8check.checkpoints import stats as st
from fp8check.checkpoints import targets as tg
from fp8check.checkpoints.audit_result import (AUDIT_SCHEMA_VERSION, AuditResult, CheckpointResult, FileResult,
                                               ScaleRef, Summary, TensorResult, TensorRows)
from fp8check.checkpoints.loaders import (CheckpointFile, Discovery, TensorEntry, discover, open_checkpoint,
                                          pread_into, read_config, require_torch)
from fp8check.errors import CheckpointError, InvalidValueError
from fp8check.progress import ProgressSink

__all__ = ["AUDIT_SCHEMA_VERSION", "AuditOptions", "Auditor", "audit"]

DEFAULT_DEQUANT_DTYPE = "bfloat16"
MAX_DEFAULT_JOBS = 32
_KEEP_SCALE_VALUES = 1 << 12  # keep small scale values; larger ones are read again when needed (rarely)
_PREAD_BYTES = 1 << 20  # one read: stays in a core's cache between pread and bincount
_INLINE_BYTES = 1 << 16  # tensors up to this size are counted at once by the audit's own thread
_SCALE_ROLES = (cv.ROLE_SCALE, cv.ROLE_ACTIVATION_SCALE, cv.ROLE_KV_SCALE)
_MEMO_ENTRIES = 1024  # histograms remembered: many small tensors share one (empty, constant, copied experts)


@dataclass
class AuditOptions:
    targets: tuple[str, ...] = ()
    dequant_dtype: str | None = None  # None: the config's torch_dtype, else bfloat16
    bytes_format: str | None = None
    jobs: int | None = None
    parallel: str = "threads"  # or "processes"
    chunk_bytes: int = st.CHUNK_BYTES
    fail_on: str = fd.ERROR


@dataclass
class ScaleInfo:
    key: tuple[str, str]
    entry: TensorEntry
    kind: str | None
    stats: st.ScaleStats | None = None
    values: np.ndarray | None = None
    granularity: gr.Granularity | None = None


@dataclass(slots=True)  # one per tensor of the checkpoint, all held until the end: no __dict__ each
class Record:
    """One tensor while it is being audited."""

    key: tuple[str, str]
    entry: TensorEntry | None
    role: str
    fmt: formats.Format | None = None
    scale: ScaleInfo | None = None
    scale_of: str | None = None
    scale_stats: st.ScaleStats | None = None
    scale_values: np.ndarray | None = None  # kept only when small
    hist: np.ndarray | None = None  # the 256 code counts, until the tensor's result is made
    counted: bool = False  # every code of the tensor was counted
    unread: str = ""  # why the data of this tensor was not read, if it was meant to be
    findings: list[fd.Finding] = field(default_factory=list)
    plans: dict[str, tg.ConversionPlan] = field(default_factory=dict)
    format_source: str | None = None
    unpaired: list[str] = field(default_factory=list)  # scale-like names nearby that pair with nothing
    code_stats: st.CodeStats | None = None  # from hist, until the tensor's result is made
    finished: bool = False  # its findings are made
    layout: lo.Layout | None = None  # packed data: the producer layout it was read as
    second_scale: tuple[str, str] | None = None  # NVFP4's per-tensor scale
    broken: str = ""  # why no loader can dequantize this tensor (its scale is missing or does not fit)
    beyond_fnuz: int = 0
    scale_x2_overflow: int = 0  # data elements whose scale x 2 overflows its dtype (a loader's scale becomes Inf)
    block_ok: np.ndarray | None = None  # a block plan: which scale elements take the factor (the scale's shape)
    packed_logical: tuple[int, ...] | None = None  # packed data: the logical shape of its e2m1 values


@dataclass
class Checkpoint:
    root: str
    index: str | None
    files: list[str]
    config: cv.QuantConfig
    config_problems: list[str]
    readers: dict[str, CheckpointFile]
    records: list[Record]
    dequant_dtype: str
    fp8_scales: set[tuple[str, str]] = field(default_factory=set)
    strict_missing: bool = False


def _bytes_format(name: str | None) -> formats.Format | None:
    if name is None:
        return None
    f = formats.get(name)
    if f not in formats.FP8_FORMATS:
        raise InvalidValueError(f"--bytes-format must be an FP8 format ({', '.join(x.name for x in formats.FP8_FORMATS)}), "
                                f"got {name!r}")
    return f


class Auditor:
    """One audit. :meth:`prepare` opens, pairs and reads scales; :meth:`results`
    counts the FP8 tensors and yields each tensor's result in order."""

    def __init__(self, options: AuditOptions, progress: ProgressSink | None = None) -> None:
        self.o = options
        self.progress = progress or ProgressSink()
        # each worker holds one 16 MB chunk resident while it counts it
        self.jobs = max(1, options.jobs or min(os.cpu_count() or 1, MAX_DEFAULT_JOBS))
        if options.parallel not in ("threads", "processes"):
            raise InvalidValueError(f"parallel must be 'threads' or 'processes', got {options.parallel!r}")
        if options.dequant_dtype is not None and options.dequant_dtype not in st.DEQUANT_DTYPES:
            raise InvalidValueError(f"dequantized dtype must be one of {', '.join(st.DEQUANT_DTYPES)}, "
                                    f"got {options.dequant_dtype!r}")
        if options.fail_on not in fd.SEVERITIES:
            raise InvalidValueError(f"fail_on must be one of {', '.join(fd.SEVERITIES)}, got {options.fail_on!r}")
        self.targets = [tg.get_target(t) for t in options.targets]
        self.fnuz_target = any(t.fnuz for t in self.targets)  # a fnuz range finding is an error, not info
        self.ocp_target = any(t.ocp for t in self.targets)
        self.bytes_format = _bytes_format(options.bytes_format)
        self.files: dict[str, FileResult] = {}
        self.checkpoints: list[Checkpoint] = []
        self._lock = threading.Lock()
        self.bytes_read = 0
        self._started = time.perf_counter()
        self._torch_threads: int | None = None
        self._memo: dict[tuple[Any, ...], Any] = {}

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
            config = cv.parse_config(docs)
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
            if dequant not in st.DEQUANT_DTYPES:
                dequant = DEFAULT_DEQUANT_DTYPE
            ck = Checkpoint(root=group.root, index=group.index, files=list(group.files), config=config,
                            config_problems=problems, readers=readers, records=[], dequant_dtype=dequant)
            self._pair(ck, group.weight_map)
            ck.strict_missing = bool(ck.config.quant_method) or any(
                r.scale is not None for r in ck.records if r.role == cv.ROLE_FP8)
            self.checkpoints.append(ck)

    def _pair(self, ck: Checkpoint, weight_map: dict[str, str]) -> None:
        entries = {f: r.entries for f, r in ck.readers.items()}
        pairing = cv.pair(entries, config=ck.config, bytes_format=self.bytes_format, weight_map=weight_map)
        by_key: dict[tuple[str, str], Record] = {}
        for f, reader in ck.readers.items():
            for name, e in reader.entries.items():
                key = (f, name)
                rec = Record(key=key, entry=e, role=pairing.roles.get(key, cv.ROLE_OTHER),
                             fmt=pairing.formats.get(key), format_source=pairing.byte_format_source.get(key))
                by_key[key] = rec
                ck.records.append(rec)
        for data_key, scale_key in pairing.scale_of.items():
            data = by_key[data_key]
            if data.role in (cv.ROLE_FP8, cv.ROLE_BYTES, cv.ROLE_PACKED, cv.ROLE_OTHER):
                by_key[scale_key].scale_of = data_key[1]
            if data.role in (cv.ROLE_FP8, cv.ROLE_PACKED):
                ck.fp8_scales.add(scale_key)
                sc = by_key[scale_key].entry
                data.scale = ScaleInfo(key=scale_key, entry=sc, kind=st.scale_kind(sc.dtype))
                extra = pairing.ambiguous.get(data_key)
                if extra:
                    data.findings.append(fd.make(
                        "SCALE_AMBIGUOUS", 1 + len(extra),
                        f"scale candidates {[scale_key[1]] + extra}; using {scale_key[1]}"))
            elif data.role == cv.ROLE_BYTES:
                data.findings.append(fd.make(
                    "BYTES_FORMAT_UNKNOWN", 1,
                    f"{data.entry.dtype} tensor with scale {scale_key[1]}: no config says it holds FP8 "
                    f"(pass --bytes-format to audit it as FP8)"))
        for data_key, names in pairing.unpaired.items():
            by_key[data_key].unpaired = list(names)
        for rec in ck.records:
            if rec.role != cv.ROLE_PACKED or rec.entry is None:
                continue
            rec.layout = lo.packed_layout(ck.config.packed, ck.config.quant_method, name=rec.key[1],
                                          scale_dtype=rec.scale.entry.dtype if rec.scale else None,
                                          file_packed=rec.entry.packed)
            for cand in lo.second_scale_names(rec.key[1]):
                if cand in ck.readers[rec.key[0]].entries:
                    rec.second_scale = (rec.key[0], cand)
                    break
        # a torchao tensor subclass X.weight is read as X.weight.qdata + X.weight.scale: the index's X.weight is there
        subclass_roots = {name.rpartition(".")[0] for f in ck.readers for name in ck.readers[f].entries}
        for name, f in weight_map.items():
            if f in ck.readers and name not in ck.readers[f].entries and name not in subclass_roots:
                rec = Record(key=(f, name), entry=None, role="missing")
                rec.findings.append(fd.make("INDEX_MISSING_TENSOR", 1,
                                            f"the index maps this tensor to {os.path.basename(f)}, which lacks it"))
                ck.records.append(rec)

    # -- 3: scales --

    def _read_scales(self, ck: Checkpoint) -> None:
        for rec in ck.records:
            if rec.entry is None or rec.role not in _SCALE_ROLES:
                continue
            kind = st.scale_kind(rec.entry.dtype)
            if kind is None or rec.entry.note:
                continue
            try:
                tensor = ck.readers[rec.key[0]].tensor(rec.key[1])
                stats, values = st.scale_stats(tensor, rec.entry.dtype, kind, kv=rec.role == cv.ROLE_KV_SCALE)
            except CheckpointError as exc:
                self._file_error(exc)
                rec.unread = exc.reason
                continue
            rec.scale_stats = stats
            self.progress.advance(rec.entry.nbytes)
            self.bytes_read += rec.entry.nbytes
            # a scale of FP8 data reports through its data; any other scale reports itself
            if rec.key not in ck.fp8_scales:
                rec.findings.extend(_scale_findings(stats, rec.key[1], ck.config))
                if stats.absent_sentinel:
                    rec.findings.append(fd.make("KV_SCALE_ABSENT", stats.absent_sentinel,
                                                "KV-cache scale is -1: no calibrated scale, the server uses its default"))
            rec.scale_values = values if values.size <= _KEEP_SCALE_VALUES else None
        by_key = {r.key: r for r in ck.records}
        for rec in ck.records:
            sc = rec.scale
            if rec.role not in (cv.ROLE_FP8, cv.ROLE_PACKED) or sc is None:
                continue
            srec = by_key[sc.key]
            sc.stats = srec.scale_stats
            sc.values = srec.scale_values
            if srec.unread:
                rec.unread = rec.unread or f"its scale {sc.key[1]} could not be read: {srec.unread}"
            if sc.kind is None:
                rec.findings.append(fd.make("SCALE_DTYPE", 1, f"scale {sc.key[1]} is stored as {sc.entry.dtype}, "
                                                              "which no FP8 convention uses"))
                rec.broken = f"its scale {sc.key[1]} is stored as {sc.entry.dtype}"
                continue
            if rec.role == cv.ROLE_PACKED:
                self._packed_scale_shape(rec)
            else:
                self._fp8_scale_shape(ck, rec)
            if sc.stats is not None:
                rec.findings.extend(_scale_findings(sc.stats, sc.key[1], ck.config))
        _outlier_findings([r for r in ck.records if r.role == cv.ROLE_FP8 and r.scale is not None
                           and r.scale.granularity is not None and r.scale.stats is not None])

    def _fp8_scale_shape(self, ck: Checkpoint, rec: Record) -> None:
        """The granularity of an FP8 tensor's scale, bound to the block size the file or the config declares."""
        sc = rec.scale
        assert sc is not None and rec.entry is not None
        declared = rec.entry.block or ck.config.block
        g = gr.match(rec.entry.shape, sc.entry.shape, e8m0=sc.kind == "e8m0", block_hint=declared,
                     group_hint=ck.config.group_size)
        why = ""
        if g is None:
            why = f"fits no granularity of data {list(rec.entry.shape)}; expected e.g. {gr.expected_shapes(rec.entry.shape)}"
        elif g.name != gr.TENSORWISE and g.name != gr.ROWWISE and declared and not rec.entry.block \
                and (g.block_rows, g.block_cols) != declared:
            _, o, i = gr.data_dims(rec.entry.shape)
            want = [-(-o // declared[0]), -(-i // declared[1])]
            why = (f"is read as {g.block_rows}x{g.block_cols} blocks, but {ck.config.source} declares "
                   f"{list(declared)} blocks: expected {want}")
            g = None
        elif g.name not in (gr.TENSORWISE, gr.ROWWISE, gr.COLWISE) and ck.config.group_size and not declared \
                and g.block_rows == 1 and g.block_cols != ck.config.group_size:
            why = (f"is read as groups of {g.block_cols}, but {ck.config.source} declares group_size "
                   f"{ck.config.group_size}")
            g = None
        elif sc.kind == "e8m0" and g.name not in (gr.TENSORWISE, gr.MX_E8M0) and not rec.entry.block \
                and ck.config.block is None and ck.config.group_size is None:
            why = (f"holds e8m0 (MX) scales read as {g.block_rows}x{g.block_cols} blocks; MX blocks are "
                   f"1x{gr.MX_BLOCK}")
            g = None
        sc.granularity = g
        if why:
            rec.findings.append(fd.make("SCALE_SHAPE", sc.entry.numel, f"scale {sc.key[1]} {list(sc.entry.shape)} {why}"))
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
            rec.findings.append(fd.make(
                "SCALE_SHAPE", sc.entry.numel,
                f"scale {sc.key[1]} {list(sc.entry.shape)} does not fit {lay.name} data {list(shape)}: expected "
                f"{want} (one {lay.scale_format} scale per {block} e2m1 values)"))
            rec.broken = f"its scale {sc.key[1]} {list(sc.entry.shape)} does not fit the data (expected {want})"
            return
        nb = 1
        for d in batch_dims:
            nb *= d
        sc.granularity = gr.Granularity(gr.MX_E8M0 if lay.scale_format == "e8m0" else gr.GROUP, 1, block,
                                        nb if batch_dims else 1)
        rec.packed_logical = logical

    # -- 4: code counts, 5: per-tensor results --

    def _counts_data(self, rec: Record) -> bool:
        return rec.role in (cv.ROLE_FP8, cv.ROLE_PACKED) and rec.entry is not None and not rec.entry.note

    def _records(self) -> Iterator[tuple[Checkpoint, Record]]:
        for ck in self.checkpoints:
            for rec in ck.records:
                yield ck, rec

    def finished(self) -> Iterator[tuple[Checkpoint, Record]]:
        """Count every FP8 tensor and yield each record, in order, once its findings are made."""
        if self.o.parallel == "processes" and len(
                {rec.key[0] for _, rec in self._records() if self._counts_data(rec)}) > 1:
            self._count_processes()
            for ck, rec in self._records():
                self._finish(ck, rec, None)
                yield ck, rec
            return
        yield from self._count_threads()

    def _count_threads(self) -> Iterator[tuple[Checkpoint, Record]]:
        pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="fp8check-audit")
        inflight = threading.BoundedSemaphore(2 * self.jobs)
        window = 4 * self.jobs + 16  # records counted ahead of the one being finished
        remaining: dict[str, int] = {}
        for _, rec in self._records():
            if self._counts_data(rec):
                remaining[rec.key[0]] = remaining.get(rec.key[0], 0) + 1

        def count(part: Any, reader: CheckpointFile) -> np.ndarray:
            import torch

            try:
                h = torch.bincount(part, minlength=256)
                reader.release(part.data_ptr(), part.numel())
                return h.numpy()
            finally:
                inflight.release()

        # Where a tensor's bytes sit at a known offset, each worker reads its
        # share with pread into a small buffer of its own and counts it while
        # it is still in cache: no page faults (a cold file costs what `cat`
        # costs), reads spread over the workers, nothing held beyond a buffer
        # per thread.
        use_pread = hasattr(os, "preadv")
        fds: dict[str, int] = {}
        local = threading.local()

        def count_range(fd: int, pos: int, n: int, name: str, path: str) -> np.ndarray:
            import torch

            try:
                buf = getattr(local, "buf", None)
                if buf is None:
                    buf = local.buf = np.empty(_PREAD_BYTES, dtype=np.uint8)
                hist = torch.zeros(256, dtype=torch.int64)
                end = pos + n
                while pos < end:
                    try:
                        got = os.preadv(fd, [memoryview(buf)[:min(_PREAD_BYTES, end - pos)]], pos)
                    except OSError as exc:
                        raise CheckpointError(path, f"cannot read tensor {name!r}: {exc.strerror or exc}") from None
                    if got <= 0:
                        raise CheckpointError(path, f"tensor {name!r}: the file ended before its data did")
                    hist += torch.bincount(torch.from_numpy(buf[:got]), minlength=256)
                    pos += got
                return hist.numpy()
            finally:
                inflight.release()

        small = np.empty(_INLINE_BYTES, dtype=np.uint8)

        def count_small(fd: int, pos: int, n: int, name: str, path: str) -> np.ndarray:
            if n == 0:
                return np.zeros(256, dtype=np.int64)
            try:
                got = pread_into(fd, memoryview(small)[:n], pos)
            except OSError as exc:
                raise CheckpointError(path, f"cannot read tensor {name!r}: {exc.strerror or exc}") from None
            if got < n:
                raise CheckpointError(path, f"tensor {name!r}: the file ended before its data did")
            return np.bincount(small[:n], minlength=256)

        def submit(rec: Record) -> list[Future[Any]] | np.ndarray:
            """The futures of a tensor's chunk counts, or (a small tensor) its counts."""
            entry = rec.entry
            assert entry is not None
            futures: list[Future[Any]] = []
            if use_pread and entry.offset is not None:
                fd = fds.get(entry.file)
                if fd is None:
                    try:
                        fd = fds[entry.file] = os.open(entry.file, os.O_RDONLY)
                    except OSError as exc:
                        raise CheckpointError(entry.file, f"cannot read: {exc.strerror or exc}") from None
                    if hasattr(os, "posix_fadvise"):
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                if entry.nbytes <= _INLINE_BYTES:
                    # a small tensor is counted here at once: handing it to a worker costs more than
                    # counting it (measured: 100,000 tensors of 160 bytes spent most of their time in
                    # the pool's locks and queues)
                    return count_small(fd, entry.offset, entry.nbytes, rec.key[1], entry.file)
                if hasattr(os, "posix_fadvise") and entry.nbytes:
                    # start reading the whole tensor now, so the disk works
                    # while the workers count the chunks before it
                    os.posix_fadvise(fd, entry.offset, entry.nbytes, os.POSIX_FADV_WILLNEED)
                for pos in range(entry.offset, entry.offset + entry.nbytes, self.o.chunk_bytes):
                    n = min(self.o.chunk_bytes, entry.offset + entry.nbytes - pos)
                    inflight.acquire()
                    futures.append(pool.submit(count_range, fd, pos, n, rec.key[1], entry.file))
                return futures
            reader = self._reader(rec)
            flat = st.as_bytes(reader.tensor(rec.key[1]))
            for part in flat.split(self.o.chunk_bytes) if flat.numel() else []:
                inflight.acquire()
                reader.prefetch(part.data_ptr(), part.numel())
                futures.append(pool.submit(count, part, reader))
            return futures

        Work = list[Future[Any]] | np.ndarray | None
        pending: collections.deque[tuple[Checkpoint, Record, Work]] = collections.deque()

        def ready(work: Work) -> bool:
            return not isinstance(work, list) or all(f.done() for f in work)

        def finish(item: tuple[Checkpoint, Record, Work]) -> tuple[Checkpoint, Record]:
            ck, rec, work = item
            if work is not None:
                try:
                    if isinstance(work, np.ndarray):
                        hist = work
                    else:
                        hist = np.zeros(256, dtype=np.int64)
                        for fut in work:
                            hist += fut.result()
                except CheckpointError as exc:
                    self._file_error(exc)
                    rec.unread = exc.reason
                else:
                    rec.hist = hist
                    rec.counted = True
                    # a small tensor was read whole, in one go: its size is the count
                    n = rec.entry.nbytes if isinstance(work, np.ndarray) and rec.entry else int(hist.sum())
                    self.bytes_read += n
                    self.progress.advance(n)
                f = rec.key[0]
                remaining[f] -= 1
                if remaining[f] == 0:
                    self.progress.file_done(f)
            self._finish(ck, rec, None)
            return ck, rec

        try:
            for ck, rec in self._records():
                if self._counts_data(rec):
                    try:
                        pending.append((ck, rec, submit(rec)))
                    except CheckpointError as exc:
                        self._file_error(exc)
                        rec.unread = exc.reason
                        remaining[rec.key[0]] -= 1
                        self._finish(ck, rec, None)
                        pending.append((ck, rec, None))
                else:
                    pending.append((ck, rec, None))
                while pending and (len(pending) > window or ready(pending[0][2])):
                    yield finish(pending.popleft())
            while pending:
                yield finish(pending.popleft())
        finally:
            for _, _, work in pending:
                for fut in work if isinstance(work, list) else ():
                    fut.cancel()
            pool.shutdown(wait=True)
            for fd in fds.values():
                os.close(fd)

    def _reader(self, rec: Record) -> CheckpointFile:
        for ck in self.checkpoints:
            reader = ck.readers.get(rec.key[0])
            if reader is not None:
                return reader
        raise KeyError(rec.key[0])

    def _count_processes(self) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        by_file: dict[str, list[Record]] = {}
        for _, rec in self._records():
            if self._counts_data(rec):
                by_file.setdefault(rec.key[0], []).append(rec)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(self.jobs, mp_context=ctx) as ex:
            futures = {ex.submit(file_histograms, f, [r.key[1] for r in recs], self.o.chunk_bytes): f
                       for f, recs in by_file.items()}
            for fut in as_completed(futures):
                f = futures[fut]
                hists, error = fut.result()
                if error:
                    self._file_error(CheckpointError(f, error))
                for rec in by_file[f]:
                    if rec.key[1] in hists:
                        rec.hist = np.asarray(hists[rec.key[1]], dtype=np.int64)
                        rec.counted = True
                        self.bytes_read += int(rec.hist.sum())
                    else:
                        rec.unread = error or "not counted"
                self.progress.advance(sum(r.entry.nbytes for r in by_file[f] if r.entry))
                self.progress.file_done(f)

    def _finish(self, ck: Checkpoint, rec: Record, _: None) -> None:
        """The findings and conversion plans of one FP8 tensor, from its code counts."""
        if rec.role == cv.ROLE_PACKED and rec.entry is not None and not rec.finished:
            rec.finished = True
            self._finish_packed(ck, rec)
            return
        if rec.role != cv.ROLE_FP8 or rec.entry is None or rec.finished:
            return
        rec.finished = True
        fmt = rec.fmt
        assert fmt is not None
        name = rec.key[1]
        declared = ck.config.weight_format
        if declared is not None and fmt != declared and rec.format_source in (None, "dtype"):
            rec.findings.append(fd.make(
                "CONFIG_FORMAT", rec.entry.numel,
                f"{ck.config.source} declares {declared.name} weights, but this tensor is stored as {fmt.name}"))
        if rec.scale is None and ck.strict_missing and not rec.unpaired:
            rec.broken = "it has no scale, and the checkpoint's other tensors (or its config) say it needs one"
        if rec.scale is None:
            if rec.unpaired:
                rec.findings.append(fd.make(
                    "SCALE_UNPAIRED", len(rec.unpaired),
                    f"unpaired scale {rec.unpaired[0]}" + (f" (and {len(rec.unpaired) - 1} more)"
                                                          if len(rec.unpaired) > 1 else "")
                    + ": a scale-like name next to this tensor that no known convention pairs with it"))
            else:
                rec.findings.append(fd.make(
                    "SCALE_MISSING", 1,
                    f"no scale under any known name ({', '.join(cv.scale_candidates(name)[:2])}, ...)",
                    fd.ERROR if ck.strict_missing else fd.WARNING))
        if rec.hist is None:
            return
        hist_key = rec.hist.tobytes()
        # shared by the tensors of one histogram; copied before the dequantization fields are set
        cs = self._remember((fmt, hist_key), lambda: st.code_stats(rec.hist, fmt))
        rec.code_stats = cs
        n = cs.numel
        if cs.nan:
            rec.findings.append(fd.make("NAN_CODES", cs.nan,
                                        f"{fd.of(cs.nan, n, 'code')} {fd.be(cs.nan)} NaN in {fmt.name}"))
        if cs.inf:
            rec.findings.append(fd.make("INF_CODES", cs.inf, f"{fd.of(cs.inf, n, 'code')} {fd.be(cs.inf)} ±Inf"))
        if fmt.has_negative_zero and cs.neg_zeros:
            rec.findings.append(fd.make(
                "NEG_ZERO_FNUZ_HAZARD", cs.neg_zeros,
                f"{fd.plural(cs.neg_zeros, 'code')} 0x80 (-0 in {fmt.name}) {fd.be(cs.neg_zeros)} NaN if read "
                "as fnuz"))
        sc = rec.scale
        usable_scale = sc is not None and sc.stats is not None and sc.granularity is not None
        # one amax per scale element may legitimately sit at ±max
        blocks = sc.entry.numel if usable_scale and sc is not None else 0
        excess = cs.saturated - blocks
        below = fmt.max_code - 1
        neighbour = int(rec.hist[below] + (rec.hist[below | fmt.sign_mask] if fmt.signed else 0))
        # without the scale it was quantized with, a pile at ±max says nothing of clipping (one per block is normal)
        scale_expected = rec.scale is not None or ck.strict_missing
        if (not rec.broken and (usable_scale or not scale_expected) and excess >= fd.SATURATION_MIN_COUNT and n and excess / n > fd.SATURATION_SHARE
                and excess > fd.SATURATION_PILEUP * neighbour):
            rec.findings.append(fd.make(
                "SATURATION", excess,
                f"{fd.plural(cs.saturated, 'code')} at ±{fmt.max:g} ({cs.saturated / n:.2%}), {excess} beyond one "
                f"per scale block, against {neighbour} one step below: clipped values"))
        if n and cs.zero_share >= fd.UNDERFLOW_ZERO_SHARE and cs.subnormal_share >= fd.UNDERFLOW_EDGE_SHARE:
            rec.findings.append(fd.make(
                "UNDERFLOW", cs.zeros,
                f"{cs.zero_share:.2%} of codes are zero while {cs.subnormal_share:.2%} are subnormal: "
                "values underflowed (scale too large for this data)"))
        dst = tg.COUNTERPART.get(fmt)
        mx = usable_scale and sc is not None and sc.granularity is not None and sc.granularity.name == gr.MX_E8M0
        if dst is not None and not mx:  # MX is OCP only: no fnuz form to convert to (convert keeps it)
            factor_exact = sc.stats.factor_exact if usable_scale and sc and sc.stats else None
            plan = self._remember(  # shared by the tensors of one histogram: never changed once made
                (fmt, dst, hist_key, usable_scale, tuple(sorted((factor_exact or {}).items()))),
                lambda: tg.plan_conversion(fmt, dst, rec.hist, scaled=usable_scale, factor_exact=factor_exact))
            natural = tg.NATURAL_FACTOR.get((fmt, dst), 1.0)
            if usable_scale and plan.inexact and plan.factor != natural and sc is not None and sc.kind is not None:
                plan = self._block_plan(ck, rec, dst, natural, plan)
            if rec.broken and plan.inexact:
                plan = copy.copy(plan)
                plan.reason = (f"{plan.inexact:,} values do not fit {dst.name} at the same scale, and {rec.broken}, "
                               "so the scale cannot absorb them")
            rec.plans[dst.name] = plan
            if fmt is formats.E4M3FN:
                rec.beyond_fnuz = int(rec.hist @ _beyond_fnuz_mask())
                if usable_scale and sc is not None and factor_exact is not None and not factor_exact.get("2", True):
                    rec.scale_x2_overflow = self._scale_x2_overflow(ck, rec)
            if plan.inexact:
                if dst in tg.FNUZ:
                    rec.findings.append(fd.make("FNUZ_RANGE", plan.inexact, f"{fmt.name} -> {dst.name}: {plan.reason}",
                                                fd.ERROR if self.fnuz_target else fd.INFO))
                else:
                    rec.findings.append(fd.make("OCP_RANGE", plan.inexact, f"{fmt.name} -> {dst.name}: {plan.reason}",
                                                fd.ERROR if self.ocp_target else fd.INFO))
        for t in self.targets:
            if fmt not in t.formats and (dst is None or dst not in t.formats):
                rec.findings.append(fd.make(
                    "TARGET_FORMAT", n, f"{fmt.name} does not run on {t.name} ({', '.join(f.name for f in t.formats)}) "
                                        "and has no exact conversion there"))
        # dequantization overflow
        if usable_scale and sc is not None and sc.stats is not None and cs.max_abs is not None \
                and sc.stats.absmax is not None:
            threshold = st.overflow_threshold(ck.dequant_dtype)
            bound = cs.max_abs * sc.stats.absmax
            cs = rec.code_stats = copy.copy(cs)
            cs.dequant_absmax_bound = bound
            if bound < threshold:
                cs.dequant_overflow = 0
            else:
                try:
                    cs.dequant_overflow = self._exact_overflow(ck, rec, threshold)
                except CheckpointError as exc:
                    self._file_error(exc)
                    rec.unread = exc.reason
                    cs.dequant_overflow = None
                if cs.dequant_overflow:
                    rec.findings.append(fd.make(
                        "DEQUANT_OVERFLOW", cs.dequant_overflow,
                        f"{fd.plural(cs.dequant_overflow, 'value')} x scale "
                        f"overflow{'s' if cs.dequant_overflow == 1 else ''} {ck.dequant_dtype} "
                        f"(|v| >= {threshold:.6g})"))

    def _finish_packed(self, ck: Checkpoint, rec: Record) -> None:
        """Packed e2m1 (FP4) data of a known layout: its 16 code counts, its block scale and (NVFP4) its
        per-tensor scale, and whether value x scales overflows the dequantized dtype."""
        lay = rec.layout
        if lay is None:
            return
        if rec.scale is None:
            rec.findings.append(fd.make("SCALE_MISSING", 1, f"{lay.name} data without its block scale "
                                                            f"{(lo.scale_names(rec.key[1]) or ['?'])[0]}"))
            rec.broken = "its block scale is missing"
        second = None
        if lay.second_scale:
            if rec.second_scale is None:
                rec.findings.append(fd.make("SCALE_MISSING", 1, f"{lay.name} data without its per-tensor scale "
                                                                f"{(lo.second_scale_names(rec.key[1]) or ['?'])[0]}"))
                rec.broken = rec.broken or "its per-tensor scale is missing"
            else:
                try:
                    t = ck.readers[rec.second_scale[0]].tensor(rec.second_scale[1])
                    kind = st.scale_kind(self._entry(ck, rec.second_scale).dtype)
                    second = st.scale_values(t, kind) if kind else None
                except CheckpointError as exc:
                    self._file_error(exc)
                    rec.unread = exc.reason
        if rec.hist is None:
            return
        fmt = formats.E2M1FN
        cs = st.code_stats(st.fp4_histogram(rec.hist), fmt)
        rec.code_stats = cs
        sc = rec.scale
        if rec.broken or sc is None or sc.stats is None or sc.granularity is None or cs.max_abs is None \
                or sc.stats.absmax is None or rec.packed_logical is None:
            return
        factor = 1.0
        if second is not None and second.size == 1 and np.isfinite(second).all() and float(second.reshape(-1)[0]):
            g = float(second.reshape(-1)[0])
            factor = abs(1.0 / g if lay.second_direction == lo.DIVIDE else g)
        threshold = st.overflow_threshold(ck.dequant_dtype)
        cs = rec.code_stats = copy.copy(cs)
        cs.dequant_absmax_bound = cs.max_abs * sc.stats.absmax * factor
        if cs.dequant_absmax_bound < threshold:
            cs.dequant_overflow = 0
            return
        try:
            values = sc.values
            if values is None:
                values = st.scale_values(ck.readers[sc.key[0]].tensor(sc.key[1]), sc.kind)
            codes = st.unpack_fp4(ck.readers[rec.key[0]].tensor(rec.key[1])).reshape(-1)
            cs.dequant_overflow = st.dequant_overflow(codes, fmt, np.where(np.isfinite(values), values, 0.0) * factor,
                                                      sc.granularity, rec.packed_logical, threshold)
        except CheckpointError as exc:
            self._file_error(exc)
            rec.unread = exc.reason
            return
        if cs.dequant_overflow:
            rec.findings.append(fd.make(
                "DEQUANT_OVERFLOW", cs.dequant_overflow,
                f"{fd.plural(cs.dequant_overflow, 'value')} x scale overflow{'s' if cs.dequant_overflow == 1 else ''} "
                f"{ck.dequant_dtype} (|v| >= {threshold:.6g}; largest block scale {sc.stats.absmax:g})"))

    def _block_plan(self, ck: Checkpoint, rec: Record, dst: formats.Format, natural: float,
                    whole: tg.ConversionPlan) -> tg.ConversionPlan:
        """When some scale elements cannot take the natural factor exactly (an e8m0 scale of 254, an fp16 scale
        >= 32768), a plan per block: those blocks keep their scale and only their values that do not fit ``dst``
        are lost, where the whole-tensor plan (factor 1 everywhere) would lose every such value of the tensor."""
        sc = rec.scale
        assert sc is not None and sc.kind is not None and sc.granularity is not None and rec.entry is not None
        fmt = rec.fmt
        assert fmt is not None
        try:
            values = sc.values
            if values is None:
                values = st.scale_values(ck.readers[sc.key[0]].tensor(sc.key[1]), sc.kind)
            ok = st.factor_exact_mask(np.asarray(values, dtype=np.float64), sc.kind, natural)
            if not ok.any():
                return whole
            shape = rec.entry.shape
            ok3 = gr.normalise(ok.astype(np.float64), sc.granularity, shape)
            bad_natural = tg.conversion_table(fmt, dst, natural)[1] == 0
            bad_one = tg.conversion_table(fmt, dst, 1.0)[1] == 0
            codes = st.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1])).numpy()
        except CheckpointError as exc:
            self._file_error(exc)
            rec.unread = exc.reason
            return whole
        _, _, i = gr.data_dims(shape)
        rows = codes.size // max(i, 1)
        step = max(1, (1 << 22) // max(i, 1))
        inexact = 0
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            c = codes[r0 * i:r1 * i].reshape(r1 - r0, i)
            take = gr.expand_rows(ok3, sc.granularity, shape, r0, r1) > 0.5
            inexact += int(np.count_nonzero(np.where(take, bad_natural[c], bad_one[c])))
        if inexact >= whole.inexact:
            return whole
        kept = int(np.count_nonzero(~ok))
        rec.block_ok = ok
        reason = ""
        if inexact:
            reason = (f"{fd.plural(kept, 'scale element')} cannot be multiplied by {natural:g} exactly in "
                      f"{sc.entry.dtype}; their blocks keep their scale, where {fd.plural(inexact, 'value')} "
                      f"{'does' if inexact == 1 else 'do'} not fit {dst.name}")
        return tg.ConversionPlan(fmt.name, dst.name, natural, inexact == 0, inexact, whole.nan_kept,
                                 whole.neg_zero_to_zero, reason, blocks_kept=kept)

    def _scale_x2_overflow(self, ck: Checkpoint, rec: Record) -> int:
        """Data elements under the scale elements that overflow their dtype when doubled, as the loaders that
        double scales in place do (vLLM's normalisation, Quark's e4m3fn_to_e4m3fnuz): their scale becomes Inf."""
        sc = rec.scale
        if sc is None or sc.granularity is None or sc.kind is None or rec.entry is None:
            return 0
        try:
            values = sc.values
            if values is None:
                values = st.scale_values(ck.readers[sc.key[0]].tensor(sc.key[1]), sc.kind)
        except CheckpointError as exc:
            self._file_error(exc)
            rec.unread = exc.reason
            return 0
        limit = {"float16": formats.FLOAT16.max, "bfloat16": formats.BFLOAT16.max,
                 "float64": formats.FLOAT64.max}.get(sc.entry.dtype, formats.FLOAT32.max)  # e8m0: float32 at load
        s3 = gr.normalise(np.asarray(values, dtype=np.float64), sc.granularity, rec.entry.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            over = np.abs(s3) * 2 > limit  # NaN scales are SCALE_NONFINITE's
        return int((gr.elements_under(sc.granularity, rec.entry.shape, s3.shape) * over).sum())

    @staticmethod
    def _entry(ck: Checkpoint, key: tuple[str, str]) -> TensorEntry:
        return ck.readers[key[0]].entries[key[1]]

    def _remember(self, key: tuple[Any, ...], make: Any) -> Any:
        """``make()``, or what it gave for ``key`` before: a pure function of a histogram, once per histogram."""
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.clear()
            found = self._memo[key] = make()
        return found

    def _exact_overflow(self, ck: Checkpoint, rec: Record, threshold: float) -> int:
        sc = rec.scale
        assert sc is not None and sc.granularity is not None and sc.kind is not None and rec.fmt is not None
        assert rec.entry is not None
        values = sc.values
        if values is None:
            tensor = ck.readers[sc.key[0]].tensor(sc.key[1])
            values = st.scale_values(tensor, sc.kind)
        flat = st.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1]))
        return st.dequant_overflow(flat, rec.fmt, values, sc.granularity, rec.entry.shape, threshold)

    # -- run --

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
        total = sum(rec.entry.nbytes for _, rec in self._records()
                    if rec.entry is not None and (self._counts_data(rec) or rec.role in _SCALE_ROLES))
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
        verdict_targets = self.targets or [tg.TARGETS[t] for t in tg.DEFAULT_TARGETS]
        tallies = [tg.VerdictTally(t) for t in verdict_targets]
        unknown = _UnknownTally()
        failing = False
        try:
            self.prepare(paths)
            for ck, rec in self.finished():
                row = _tensor_result(rec)
                rows.append(row)
                summary.count(row)
                failing = failing or any(fd.reaches(f.severity, self.o.fail_on) for f in row.findings)
                unknown.add(rec)
                if rec.entry is not None:
                    summary.tensors += 1
                if rec.role == cv.ROLE_FP8 and rec.entry is not None and rec.fmt is not None:
                    summary.fp8_tensors += 1
                    summary.fp8_bytes += rec.entry.nbytes
                    summary.formats[rec.fmt.name] = summary.formats.get(rec.fmt.name, 0) + 1
                    if rec.counted and rec.code_stats is not None:
                        cs = rec.code_stats
                        g = rec.scale.granularity if rec.scale is not None else None
                        kind = lo.MXFP8 if g is not None and g.name == gr.MX_E8M0 else lo.FP8
                        item = tg.TensorPortability(name=rec.key[1], file=rec.key[0], format=rec.fmt,
                                                    numel=cs.numel, nan=cs.nan, neg_zeros=cs.neg_zeros, plans=rec.plans,
                                                    kind=kind, broken=rec.broken, beyond_fnuz=rec.beyond_fnuz,
                                                    scale_x2_overflow=rec.scale_x2_overflow)
                        for tally in tallies:
                            tally.add(item)
                elif rec.role == cv.ROLE_PACKED and rec.entry is not None and rec.layout is not None:
                    summary.packed_tensors += 1
                    summary.packed_bytes += rec.entry.nbytes
                    summary.formats[rec.layout.kind] = summary.formats.get(rec.layout.kind, 0) + 1
                    if rec.counted and rec.code_stats is not None:
                        item = tg.TensorPortability(name=rec.key[1], file=rec.key[0], format=formats.E2M1FN,
                                                    numel=rec.code_stats.numel, nan=0, kind=rec.layout.kind,
                                                    broken=rec.broken)
                        for tally in tallies:
                            tally.add(item)
                elif rec.role in _SCALE_ROLES:
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
            quantized = any(r.role in (cv.ROLE_FP8, cv.ROLE_PACKED, cv.ROLE_BYTES) for r in ck.records)
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
                v.verdict = tg.UNKNOWN
        summary.files = len(self.files)
        summary.unreadable_files = unreadable
        summary.bytes_read = self.bytes_read
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


def _beyond_fnuz_mask() -> np.ndarray:
    """1 for the e4m3fn codes whose magnitude is beyond e4m3fnuz's 240 (256 ... 448)."""
    v = np.abs(st.code_values(formats.E4M3FN))
    return (np.nan_to_num(v, nan=0.0) > formats.E4M3FNUZ.max).astype(np.int64)


OUTLIER_FACTOR = 64.0  # a weight scale this far from its siblings' median is a finding
OUTLIER_MIN_SIBLINGS = 3


def _median_scale(stats: st.ScaleStats) -> float | None:
    """The median of a scale's elements, to an eighth of an octave, from its fine log2 histogram."""
    counts = stats.log2_fine_counts
    if not counts or stats.log2_fine_min_bin is None:
        return None
    half = (sum(counts) + 1) // 2
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= half:
            return float(2.0 ** ((stats.log2_fine_min_bin + i + 0.5) / st.LOG2_FINE_BINS))
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
            r.findings.append(fd.make(
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
        elif rec.entry is not None and rec.entry.note and rec.role not in (cv.ROLE_OTHER,):
            key = f"tensors not read ({rec.entry.note.split(':')[0]})"
            self.not_audited[key] = self.not_audited.get(key, 0) + 1
        elif rec.role == cv.ROLE_BYTES:
            key = "one-byte tensors with a scale whose format nothing declares (--bytes-format FMT audits them)"
            self.not_audited[key] = self.not_audited.get(key, 0) + 1
        elif rec.role == cv.ROLE_PACKED and rec.layout is None:
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


def _scale_findings(s: st.ScaleStats, name: str, config: cv.QuantConfig) -> list[fd.Finding]:
    out = []
    if s.nonfinite:
        out.append(fd.make("SCALE_NONFINITE", s.nonfinite,
                           f"{fd.of(s.nonfinite, s.numel, 'element')} of {name} {fd.be(s.nonfinite)} NaN/Inf"))
    if s.nonpositive:
        out.append(fd.make("SCALE_NONPOSITIVE", s.nonpositive,
                           f"{fd.of(s.nonpositive, s.numel, 'element')} of {name} {fd.be(s.nonpositive)} zero or "
                           f"negative (min {s.min:g})"))
    if s.subnormal:
        out.append(fd.make("SCALE_SUBNORMAL", s.subnormal,
                           f"{fd.of(s.subnormal, s.numel, 'element')} of {name} {fd.be(s.subnormal)} subnormal in "
                           f"{'float32' if s.kind == 'e8m0' else s.kind} (zero under flush-to-zero)"))
    if config.ue8m0_scales and s.kind != "e8m0" and s.not_pow2:
        out.append(fd.make("SCALE_NOT_POW2", s.not_pow2,
                           f"{fd.of(s.not_pow2, s.numel, 'element')} of {name} {fd.be(s.not_pow2)} not "
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


def file_histograms(path: str, names: list[str], chunk: int) -> tuple[dict[str, list[int]], str | None]:
    """Worker of the process mode: the code counts of ``names`` in one file."""
    import torch

    torch.set_num_threads(1)
    out: dict[str, list[int]] = {}
    try:
        with open_checkpoint(path) as reader:
            for name in names:
                flat = st.as_bytes(reader.tensor(name))
                out[name] = st.histogram(flat, chunk=chunk, release=reader.release, prefetch=reader.prefetch).tolist()
            return out, None
    except CheckpointError as exc:
        return out, exc.reason


def audit(paths: list[str], options: AuditOptions | None = None, progress: ProgressSink | None = None) -> AuditResult:
    """Audit checkpoint files and directories; an :class:`AuditResult` (``.to_dict()`` for the JSON form)."""
    return Auditor(options or AuditOptions(), progress).run(list(paths))

"""The audit: files -> tensors and scales -> statistics -> findings -> verdicts.

Passes over one run:

1. discover the files (:mod:`.sources`), open each safely, read configs;
2. pair FP8 tensors with scales across each checkpoint (:mod:`.conventions`);
3. read every scale (small) and summarise it; check its shape (:mod:`.granularity`);
4. count the 256 codes of every FP8 tensor, streamed chunk by chunk, on a
   thread pool (or one process per file with ``parallel="processes"``);
5. derive findings and conversion plans from the counts; only where the
   cheap bound says a dequantization might overflow, count exactly;
6. portability verdicts per target; the report as plain JSON-able data.

Unreadable files are reported and skipped; the rest is still audited.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fp8check import formats
from fp8check.checkpoints import conventions as cv
from fp8check.checkpoints import findings as fd
from fp8check.checkpoints import granularity as gr
from fp8check.checkpoints import stats as st
from fp8check.checkpoints import targets as tg
from fp8check.errors import CheckpointError
from fp8check.checkpoints.loaders import (CheckpointFile, Discovery, TensorEntry, discover, open_checkpoint, read_config,
                                    require_torch)
from fp8check.errors import InvalidValueError

AUDIT_SCHEMA_VERSION = 1
DEFAULT_DEQUANT_DTYPE = "bfloat16"
MAX_DEFAULT_JOBS = 32
_KEEP_SCALE_VALUES = 1 << 12  # keep small scale values; larger ones are read again when needed (rarely)


_PREAD_BYTES = 1 << 20  # one read: stays in a core's cache between pread and bincount


@dataclass
class AuditOptions:
    targets: tuple[str, ...] = ()
    dequant_dtype: str | None = None  # None: the config's torch_dtype, else bfloat16
    bytes_format: str | None = None
    jobs: int | None = None
    parallel: str = "threads"  # or "processes"
    chunk_bytes: int = st.CHUNK_BYTES
    fail_on: str = fd.ERROR


class ProgressSink:
    """What the engine tells a progress display (all no-ops here)."""

    def start(self, total_bytes: int, total_files: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...

    def file_done(self, path: str) -> None: ...

    def close(self) -> None: ...


@dataclass
class ScaleInfo:
    key: tuple[str, str]
    entry: TensorEntry
    kind: str | None
    stats: st.ScaleStats | None = None
    values: np.ndarray | None = None
    granularity: gr.Granularity | None = None


@dataclass
class Record:
    """One tensor of the report."""

    key: tuple[str, str]
    entry: TensorEntry | None
    role: str
    fmt: formats.Format | None = None
    scale: ScaleInfo | None = None
    scale_of: str | None = None
    scale_stats: st.ScaleStats | None = None
    scale_values: np.ndarray | None = None  # kept only when small
    hist: np.ndarray | None = None
    code_stats: st.CodeStats | None = None
    findings: list[fd.Finding] = field(default_factory=list)
    plans: dict[str, tg.ConversionPlan] = field(default_factory=dict)
    format_source: str | None = None


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


def _bytes_format(name: str | None) -> formats.Format | None:
    if name is None:
        return None
    f = formats.get(name)
    if f not in formats.FP8_FORMATS:
        raise InvalidValueError(f"--bytes-format must be an FP8 format ({', '.join(x.name for x in formats.FP8_FORMATS)}), "
                                f"got {name!r}")
    return f


class Auditor:
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
        self.targets = [tg.get_target(t) for t in options.targets]
        self.bytes_format = _bytes_format(options.bytes_format)
        self.files: dict[str, dict[str, Any]] = {}
        self.checkpoints: list[Checkpoint] = []
        self._lock = threading.Lock()
        self.bytes_read = 0
        self._started = time.perf_counter()

    # -- file bookkeeping --

    def _file_error(self, exc: CheckpointError) -> None:
        with self._lock:
            info = self.files.setdefault(exc.path, {"path": exc.path})
            info.update(status="error", error=exc.reason)

    # -- 1, 2: open and pair --

    def _open(self, disc: Discovery) -> None:
        for problem in disc.problems:
            self._file_error(problem)
        for path, why in disc.skipped:
            self.files.setdefault(path, {"path": path, "status": "skipped", "reason": why})
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
                self.files[path] = {
                    "path": path, "status": "ok", "kind": reader.kind, "size_bytes": reader.size,
                    "tensors": len(reader.entries), "metadata": dict(reader.metadata), "notes": list(reader.notes),
                }
            dequant = self.o.dequant_dtype or config.dequant_dtype or DEFAULT_DEQUANT_DTYPE
            if dequant not in st.DEQUANT_DTYPES:
                dequant = DEFAULT_DEQUANT_DTYPE
            ck = Checkpoint(root=group.root, index=group.index, files=list(group.files), config=config,
                            config_problems=problems, readers=readers, records=[], dequant_dtype=dequant)
            self._pair(ck, group.weight_map)
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
            if data.role == cv.ROLE_FP8:
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
        for name, f in weight_map.items():
            if f in ck.readers and name not in ck.readers[f].entries:
                rec = Record(key=(f, name), entry=None, role="missing")
                rec.findings.append(fd.make("INDEX_MISSING_TENSOR", 1,
                                            f"the index maps this tensor to {os.path.basename(f)}, which lacks it"))
                ck.records.append(rec)

    # -- 3: scales --

    def _read_scales(self, ck: Checkpoint) -> None:
        for rec in ck.records:
            if rec.entry is None or rec.role not in (cv.ROLE_SCALE, cv.ROLE_ACTIVATION_SCALE, cv.ROLE_KV_SCALE):
                continue
            kind = st.scale_kind(rec.entry.dtype)
            if kind is None or rec.entry.note:
                continue
            try:
                tensor = ck.readers[rec.key[0]].tensor(rec.key[1])
                stats, values = st.scale_stats(tensor, rec.entry.dtype, kind, kv=rec.role == cv.ROLE_KV_SCALE)
            except CheckpointError as exc:
                self._file_error(exc)
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
            if rec.role != cv.ROLE_FP8 or sc is None:
                continue
            srec = by_key[sc.key]
            sc.stats = srec.scale_stats
            sc.values = srec.scale_values
            if sc.kind is None:
                rec.findings.append(fd.make("SCALE_DTYPE", 1, f"scale {sc.key[1]} is stored as {sc.entry.dtype}, "
                                                              "which no FP8 convention uses"))
                continue
            sc.granularity = gr.match(rec.entry.shape, sc.entry.shape, e8m0=sc.kind == "e8m0",
                                      block_hint=ck.config.block, group_hint=ck.config.group_size)
            if sc.granularity is None:
                rec.findings.append(fd.make(
                    "SCALE_SHAPE", sc.entry.numel,
                    f"scale {sc.key[1]} {list(sc.entry.shape)} fits no granularity of data {list(rec.entry.shape)}; "
                    f"expected e.g. {gr.expected_shapes(rec.entry.shape)}"))
            if sc.stats is not None:
                rec.findings.extend(_scale_findings(sc.stats, sc.key[1], ck.config))

    # -- 4: code counts --

    def _fp8_records(self) -> list[tuple[Checkpoint, Record]]:
        out = []
        for ck in self.checkpoints:
            for rec in ck.records:
                if rec.role == cv.ROLE_FP8 and rec.entry is not None and not rec.entry.note:
                    out.append((ck, rec))
        return out

    def _count_threads(self, work: list[tuple[Checkpoint, Record]]) -> None:
        pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="fp8check-audit")
        inflight = threading.BoundedSemaphore(2 * self.jobs)
        pending: list[tuple[Record, list[Future[Any]]]] = []
        remaining: dict[str, int] = {}
        for _, rec in work:
            remaining[rec.key[0]] = remaining.get(rec.key[0], 0) + 1

        def count(part: Any, reader: CheckpointFile) -> np.ndarray:
            import torch

            h = torch.bincount(part, minlength=256)
            reader.release(part.data_ptr(), part.numel())
            return h.numpy()

        def done(nbytes: int) -> Callable[[Future[Any]], None]:
            def callback(_: Future[Any]) -> None:
                inflight.release()
                self.progress.advance(nbytes)
            return callback

        # Where a tensor's bytes sit at a known offset (safetensors), each
        # worker reads its share with pread into a small buffer of its own and
        # counts it while it is still in cache: no page faults (a cold file
        # costs what `cat` costs), reads spread over the workers, and nothing
        # held beyond a buffer per thread.
        use_pread = hasattr(os, "preadv")
        fds: dict[str, int] = {}
        local = threading.local()

        def count_range(fd: int, pos: int, n: int, name: str, path: str) -> np.ndarray:
            import torch

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

        def submit_preads(rec: Record) -> list[Future[Any]]:
            entry = rec.entry
            fd = fds.get(entry.file)
            if fd is None:
                fd = fds[entry.file] = os.open(entry.file, os.O_RDONLY)
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            if hasattr(os, "posix_fadvise"):
                # Start reading the whole tensor now, so the disk works while
                # the workers count the chunks before it.
                os.posix_fadvise(fd, entry.offset, entry.nbytes, os.POSIX_FADV_WILLNEED)
            futures = []
            for pos in range(entry.offset, entry.offset + entry.nbytes, self.o.chunk_bytes):
                n = min(self.o.chunk_bytes, entry.offset + entry.nbytes - pos)
                inflight.acquire()
                fut = pool.submit(count_range, fd, pos, n, rec.key[1], entry.file)
                fut.add_done_callback(done(n))
                futures.append(fut)
            return futures

        try:
            for ck, rec in work:
                reader = ck.readers[rec.key[0]]
                if use_pread and rec.entry.offset is not None:
                    try:
                        pending.append((rec, submit_preads(rec)))
                    except (CheckpointError, OSError) as exc:
                        self._file_error(exc if isinstance(exc, CheckpointError)
                                         else CheckpointError(rec.entry.file, f"cannot read: {exc.strerror or exc}"))
                    continue
                try:
                    flat = st.as_bytes(reader.tensor(rec.key[1]))
                except CheckpointError as exc:
                    self._file_error(exc)
                    continue
                futures = []
                for part in flat.split(self.o.chunk_bytes) if flat.numel() else []:
                    inflight.acquire()
                    reader.prefetch(part.data_ptr(), part.numel())
                    fut = pool.submit(count, part, reader)
                    fut.add_done_callback(done(part.numel()))
                    futures.append(fut)
                pending.append((rec, futures))
            for rec, futures in pending:
                hist = np.zeros(256, dtype=np.int64)
                try:
                    for fut in futures:
                        hist += fut.result()
                except CheckpointError as exc:
                    self._file_error(exc)
                    continue
                rec.hist = hist
                self.bytes_read += int(hist.sum())
                f = rec.key[0]
                remaining[f] -= 1
                if remaining[f] == 0:
                    self.progress.file_done(f)
        finally:
            pool.shutdown(wait=True)
            for fd in fds.values():
                os.close(fd)

    def _count_processes(self, work: list[tuple[Checkpoint, Record]]) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        by_file: dict[str, list[Record]] = {}
        for _, rec in work:
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
                        self.bytes_read += int(rec.hist.sum())
                self.progress.advance(sum(r.entry.nbytes for r in by_file[f] if r.entry))
                self.progress.file_done(f)

    # -- 5: findings --

    def _findings(self, ck: Checkpoint) -> None:
        strict_missing = bool(ck.config.quant_method) or any(
            r.scale is not None for r in ck.records if r.role == cv.ROLE_FP8)
        fnuz_target = any(t.fnuz for t in self.targets)
        ocp_target = any(t.ocp for t in self.targets)
        threshold = st.overflow_threshold(ck.dequant_dtype)
        for rec in ck.records:
            if rec.role != cv.ROLE_FP8 or rec.entry is None:
                continue
            fmt = rec.fmt
            name = rec.key[1]
            if rec.scale is None:
                rec.findings.append(fd.make(
                    "SCALE_MISSING", 1,
                    f"no scale under any known name ({', '.join(cv.scale_candidates(name)[:2])}, ...)",
                    fd.ERROR if strict_missing else fd.WARNING))
            if rec.hist is None:
                continue
            cs = st.code_stats(rec.hist, fmt)
            rec.code_stats = cs
            n = cs.numel
            if cs.nan:
                rec.findings.append(fd.make("NAN_CODES", cs.nan, f"{cs.nan} of {n} codes are NaN in {fmt.name}"))
            if cs.inf:
                rec.findings.append(fd.make("INF_CODES", cs.inf, f"{cs.inf} of {n} codes are ±Inf"))
            if fmt.has_negative_zero and cs.neg_zeros:
                rec.findings.append(fd.make(
                    "NEG_ZERO_FNUZ_HAZARD", cs.neg_zeros,
                    f"{cs.neg_zeros} codes 0x80 (-0 in {fmt.name}) are NaN if these bytes are read as fnuz"))
            sc = rec.scale
            usable_scale = sc is not None and sc.stats is not None and sc.granularity is not None
            # one amax per scale element may legitimately sit at ±max
            blocks = sc.entry.numel if usable_scale else 0
            excess = cs.saturated - blocks
            below = fmt.max_code - 1
            neighbour = int(rec.hist[below] + (rec.hist[below | fmt.sign_mask] if fmt.signed else 0))
            if (excess >= fd.SATURATION_MIN_COUNT and excess / n > fd.SATURATION_SHARE
                    and excess > fd.SATURATION_PILEUP * neighbour):
                rec.findings.append(fd.make(
                    "SATURATION", excess,
                    f"{cs.saturated} codes at ±{fmt.max:g} ({cs.saturated / n:.2%}), {excess} beyond one per scale "
                    f"block, against {neighbour} one step below: clipped values"))
            if cs.zero_share >= fd.UNDERFLOW_ZERO_SHARE and cs.subnormal_share >= fd.UNDERFLOW_EDGE_SHARE:
                rec.findings.append(fd.make(
                    "UNDERFLOW", cs.zeros,
                    f"{cs.zero_share:.2%} of codes are zero while {cs.subnormal_share:.2%} are subnormal: "
                    "values underflowed (scale too large for this data)"))
            # conversions to the counterpart format, for portability
            dst = tg.COUNTERPART.get(fmt)
            if dst is not None:
                plan = tg.plan_conversion(fmt, dst, rec.hist, scaled=usable_scale,
                                          factor_exact=sc.stats.factor_exact if usable_scale else None)
                rec.plans[dst.name] = plan
                if plan.inexact:
                    if dst in tg.FNUZ:
                        rec.findings.append(fd.make(
                            "FNUZ_RANGE", plan.inexact, f"{fmt.name} -> {dst.name}: {plan.reason}",
                            fd.ERROR if fnuz_target else fd.INFO))
                    else:
                        rec.findings.append(fd.make(
                            "OCP_RANGE", plan.inexact, f"{fmt.name} -> {dst.name}: {plan.reason}",
                            fd.ERROR if ocp_target else fd.INFO))
            for t in self.targets:
                if fmt not in t.formats and (dst is None or dst not in t.formats):
                    rec.findings.append(fd.make(
                        "TARGET_FORMAT", n, f"{fmt.name} does not run on {t.name} ({', '.join(f.name for f in t.formats)}) "
                                            "and has no exact conversion there"))
            # dequantization overflow
            if usable_scale and cs.max_abs is not None and sc.stats.absmax is not None:
                bound = cs.max_abs * sc.stats.absmax
                cs.dequant_absmax_bound = bound
                if bound < threshold:
                    cs.dequant_overflow = 0
                else:
                    cs.dequant_overflow = self._exact_overflow(ck, rec, threshold)
                    if cs.dequant_overflow:
                        rec.findings.append(fd.make(
                            "DEQUANT_OVERFLOW", cs.dequant_overflow,
                            f"{cs.dequant_overflow} values x scale overflow {ck.dequant_dtype} "
                            f"(|v| >= {threshold:.6g})"))

    def _exact_overflow(self, ck: Checkpoint, rec: Record, threshold: float) -> int:
        sc = rec.scale
        values = sc.values
        if values is None:
            tensor = ck.readers[sc.key[0]].tensor(sc.key[1])
            values = st.scale_values(tensor, sc.kind)
        flat = st.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1]))
        return st.dequant_overflow(flat, rec.fmt, values, sc.granularity, rec.entry.shape, threshold)

    # -- run --

    def prepare(self, paths: list[str]) -> None:
        """Steps 1-5; the files stay open (for convert) until :meth:`close`."""
        torch = require_torch()
        self._started = time.perf_counter()
        # The audit runs its own workers over single-threaded kernels; torch's
        # intra-op pool would only spin on the same cores (measured: 3.5x
        # slower on 2 cores). Restored in close().
        self._torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        disc = discover(paths)
        self._open(disc)
        work = self._fp8_records()
        total = sum(r.entry.nbytes for _, r in work) + sum(
            r.entry.nbytes for ck in self.checkpoints for r in ck.records
            if r.entry is not None and r.role in (cv.ROLE_SCALE, cv.ROLE_ACTIVATION_SCALE, cv.ROLE_KV_SCALE))
        self.progress.start(total, sum(len(ck.readers) for ck in self.checkpoints))
        for ck in self.checkpoints:
            self._read_scales(ck)
        if self.o.parallel == "processes" and len({r.key[0] for _, r in work}) > 1:
            self._count_processes(work)
        else:
            self._count_threads(work)
        for ck in self.checkpoints:
            self._findings(ck)

    def close(self) -> None:
        for ck in self.checkpoints:
            for reader in ck.readers.values():
                reader.close()
        self.progress.close()
        if getattr(self, "_torch_threads", None):
            import torch

            torch.set_num_threads(self._torch_threads)
            self._torch_threads = None

    def run(self, paths: list[str]) -> dict[str, Any]:
        try:
            self.prepare(paths)
        finally:
            self.close()
        return self.report(paths, time.perf_counter() - self._started)

    # -- 6: report --

    def report(self, paths: list[str], seconds: float) -> dict[str, Any]:
        from fp8check.results import environment

        tensors: list[dict[str, Any]] = []
        portability_items: list[tg.TensorPortability] = []
        by_code: dict[str, dict[str, Any]] = {}
        counts = {fd.ERROR: 0, fd.WARNING: 0, fd.INFO: 0}
        fmts: dict[str, int] = {}
        n_fp8 = n_scales = fp8_bytes = 0
        for ck in self.checkpoints:
            for rec in ck.records:
                tensors.append(_tensor_dict(rec))
                for f in rec.findings:
                    counts[f.severity] += 1
                    agg = by_code.setdefault(f.code, {"severity": f.severity, "tensors": 0, "count": 0})
                    agg["tensors"] += 1
                    agg["count"] += f.count
                    if fd.SEVERITY_RANK[f.severity] > fd.SEVERITY_RANK[agg["severity"]]:
                        agg["severity"] = f.severity
                if rec.role == cv.ROLE_FP8 and rec.entry is not None:
                    n_fp8 += 1
                    fp8_bytes += rec.entry.nbytes
                    fmts[rec.fmt.name] = fmts.get(rec.fmt.name, 0) + 1
                    if rec.hist is not None:
                        portability_items.append(tg.TensorPortability(
                            name=rec.key[1], file=rec.key[0], format=rec.fmt, numel=int(rec.hist.sum()),
                            nan=rec.code_stats.nan if rec.code_stats else 0,
                            neg_zeros=rec.code_stats.neg_zeros if rec.code_stats else 0, plans=rec.plans))
                elif rec.role in (cv.ROLE_SCALE, cv.ROLE_ACTIVATION_SCALE, cv.ROLE_KV_SCALE):
                    n_scales += 1
        verdict_targets = self.targets or [tg.TARGETS[t] for t in tg.DEFAULT_TARGETS]
        portability = [tg.verdict(t, portability_items) for t in verdict_targets]
        unreadable = sum(1 for f in self.files.values() if f.get("status") == "error")
        for p in portability:
            p["complete"] = not unreadable
            if unreadable:
                p["reasons"].insert(0, f"{unreadable} files could not be read: this verdict covers only the rest")
        failing = any(fd.reaches(f.severity, self.o.fail_on) for ck in self.checkpoints for r in ck.records
                      for f in r.findings)
        exit_code = 2 if unreadable else (1 if failing else 0)
        if not self.files and not unreadable:
            exit_code = 2
        return {
            "fp8check_audit": AUDIT_SCHEMA_VERSION,
            "command": "audit",
            "paths": list(paths),
            "environment": environment(),
            "options": {
                "targets": [t.name for t in self.targets], "fail_on": self.o.fail_on,
                "dequant_dtype": self.o.dequant_dtype, "bytes_format": self.o.bytes_format,
                "jobs": self.jobs, "parallel": self.o.parallel,
            },
            "files": list(self.files.values()),
            "checkpoints": [{
                "root": ck.root, "index": ck.index, "files": ck.files, "config": ck.config.to_dict(),
                "config_problems": ck.config_problems, "dequant_dtype": ck.dequant_dtype,
            } for ck in self.checkpoints],
            "summary": {
                "tensors": sum(1 for ck in self.checkpoints for r in ck.records if r.entry is not None),
                "fp8_tensors": n_fp8,
                "scale_tensors": n_scales,
                "fp8_bytes": fp8_bytes,
                "bytes_read": self.bytes_read,
                "files": len(self.files),
                "unreadable_files": unreadable,
                "errors": counts[fd.ERROR],
                "warnings": counts[fd.WARNING],
                "infos": counts[fd.INFO],
                "findings_by_code": by_code,
                "formats": fmts,
                "verdicts": {p["target"]: p["verdict"] for p in portability},
                "fail_on": self.o.fail_on,
                "exit_code": exit_code,
                "seconds": seconds,
                "bytes_per_second": self.bytes_read / seconds if seconds > 0 else None,
            },
            "portability": portability,
            "finding_codes": {c.code: {"severity": c.severity, "title": c.title, "rule": c.rule}
                              for c in fd.CODES.values()},
            "thresholds": {
                "SATURATION_SHARE": fd.SATURATION_SHARE, "SATURATION_MIN_COUNT": fd.SATURATION_MIN_COUNT,
                "SATURATION_PILEUP": fd.SATURATION_PILEUP,
                "UNDERFLOW_ZERO_SHARE": fd.UNDERFLOW_ZERO_SHARE, "UNDERFLOW_EDGE_SHARE": fd.UNDERFLOW_EDGE_SHARE,
            },
            "tensors": tensors,
        }


def _scale_findings(s: st.ScaleStats, name: str, config: cv.QuantConfig) -> list[fd.Finding]:
    out = []
    if s.nonfinite:
        out.append(fd.make("SCALE_NONFINITE", s.nonfinite, f"{s.nonfinite} of {s.numel} elements of {name} are NaN/Inf"))
    if s.nonpositive:
        out.append(fd.make("SCALE_NONPOSITIVE", s.nonpositive,
                           f"{s.nonpositive} of {s.numel} elements of {name} are zero or negative (min {s.min:g})"))
    if s.subnormal:
        out.append(fd.make("SCALE_SUBNORMAL", s.subnormal,
                           f"{s.subnormal} of {s.numel} elements of {name} are subnormal in "
                           f"{'float32' if s.kind == 'e8m0' else s.kind} (zero under flush-to-zero)"))
    if config.ue8m0_scales and s.kind != "e8m0" and s.not_pow2:
        out.append(fd.make("SCALE_NOT_POW2", s.not_pow2,
                           f"{s.not_pow2} of {s.numel} elements of {name} are not powers of two, "
                           "but the config declares ue8m0 scales"))
    return out


def _tensor_dict(rec: Record) -> dict[str, Any]:
    e = rec.entry
    d: dict[str, Any] = {
        "name": rec.key[1],
        "file": rec.key[0],
        "dtype": e.dtype if e else None,
        "format": rec.fmt.name if rec.fmt else None,
        "shape": list(e.shape) if e else None,
        "numel": e.numel if e else None,
        "nbytes": e.nbytes if e else None,
        "role": rec.role,
        "format_source": rec.format_source or ("dtype" if rec.fmt else None),
        "note": (e.note or None) if e else None,
        "scale": None,
        "scale_of": rec.scale_of,
        "stats": rec.code_stats.to_dict() if rec.code_stats else None,
        "scale_stats": rec.scale_stats.to_dict() if rec.scale_stats else None,
        "conversions": {k: v.to_dict() for k, v in rec.plans.items()},
        "severity": fd.worst(rec.findings),
        "findings": [f.to_dict() for f in rec.findings],
    }
    sc = rec.scale
    if sc is not None:
        d["scale"] = {
            "name": sc.key[1],
            "file": sc.key[0],
            "dtype": sc.entry.dtype,
            "shape": list(sc.entry.shape),
            "read_as": sc.kind,
            "granularity": sc.granularity.to_dict() if sc.granularity else None,
            "convention": "multiply",
            "named_inverse": sc.key[1].endswith("_inv"),
            "stats": sc.stats.to_dict() if sc.stats else None,
        }
    return d


def file_histograms(path: str, names: list[str], chunk: int) -> tuple[dict[str, list[int]], str | None]:
    """Worker of the process mode: the code counts of ``names`` in one file."""
    import torch

    torch.set_num_threads(1)
    try:
        with open_checkpoint(path) as reader:
            out = {}
            for name in names:
                flat = st.as_bytes(reader.tensor(name))
                out[name] = st.histogram(flat, chunk=chunk, release=reader.release, prefetch=reader.prefetch).tolist()
            return out, None
    except CheckpointError as exc:
        return {}, exc.reason


def audit(paths: list[str], options: AuditOptions | None = None, progress: ProgressSink | None = None) -> dict[str, Any]:
    """Audit checkpoint files and directories; the report as JSON-able data."""
    return Auditor(options or AuditOptions(), progress).run(list(paths))

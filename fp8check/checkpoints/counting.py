"""Step 4 of the audit: the 256 code counts of every FP8 (and packed) tensor, streamed chunk by chunk.

Threads (the default): a pool counts the chunks of the tensors ahead of the one being finished, which is handed to
``finish`` in order as soon as its counts are in, so memory does not grow with the number of tensors. Processes
(``parallel="processes"``): one process per file counts all of its tensors, then every tensor is finished.
"""

from __future__ import annotations

import collections
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator

import numpy as np

from fp8check.checkpoints import stats
from fp8check.checkpoints.loaders import CheckpointFile, open_checkpoint, pread_into
from fp8check.checkpoints.records import Checkpoint, Record
from fp8check.errors import CheckpointError
from fp8check.progress import ProgressSink

_PREAD_BYTES = 1 << 20  # one read: stays in a core's cache between pread and bincount
_INLINE_BYTES = 1 << 16  # tensors up to this size are counted at once by the audit's own thread

# a tensor's chunk counts on their way, its counts (a small tensor, counted at once), or nothing to count
Work = list[Future[Any]] | np.ndarray | None
Finish = Callable[[Checkpoint, Record], None]
FileError = Callable[[CheckpointError], None]


class CodeCounter:
    """Counts the codes of one audit's tensors and yields every record, in order, once ``finish`` has made its
    findings. ``bytes_read`` is what the counting read."""

    def __init__(self, checkpoints: list[Checkpoint], *, jobs: int, chunk_bytes: int, parallel: str,
                 progress: ProgressSink, file_error: FileError) -> None:
        self.checkpoints = checkpoints
        self.jobs = jobs
        self.chunk_bytes = chunk_bytes
        self.parallel = parallel
        self.progress = progress
        self.file_error = file_error
        self.bytes_read = 0

    def records(self) -> Iterator[tuple[Checkpoint, Record]]:
        for ck in self.checkpoints:
            for rec in ck.records:
                yield ck, rec

    def finished(self, finish: Finish) -> Iterator[tuple[Checkpoint, Record]]:
        """Count every FP8 tensor and yield each record, in order, once ``finish`` has made its findings."""
        if self.parallel == "processes" and len(
                {rec.key[0] for _, rec in self.records() if rec.counts_data}) > 1:
            self._count_processes()
            for ck, rec in self.records():
                finish(ck, rec)
                yield ck, rec
            return
        yield from _ThreadPipeline(self, finish).run()

    def reader(self, rec: Record) -> CheckpointFile:
        for ck in self.checkpoints:
            reader = ck.readers.get(rec.key[0])
            if reader is not None:
                return reader
        raise KeyError(rec.key[0])

    def _count_processes(self) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        by_file: dict[str, list[Record]] = {}
        for _, rec in self.records():
            if rec.counts_data:
                by_file.setdefault(rec.key[0], []).append(rec)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(self.jobs, mp_context=ctx) as ex:
            futures = {ex.submit(file_histograms, f, [r.key[1] for r in recs], self.chunk_bytes): f
                       for f, recs in by_file.items()}
            for fut in as_completed(futures):
                f = futures[fut]
                hists, error = fut.result()
                if error:
                    self.file_error(CheckpointError(f, error))
                for rec in by_file[f]:
                    if rec.key[1] in hists:
                        rec.hist = np.asarray(hists[rec.key[1]], dtype=np.int64)
                        rec.counted = True
                        self.bytes_read += int(rec.hist.sum())
                    else:
                        rec.unread = error or "not counted"
                self.progress.advance(sum(r.entry.nbytes for r in by_file[f] if r.entry))
                self.progress.file_done(f)


class _ThreadPipeline:
    """One pass of the thread mode: submits each tensor's chunks to the pool, keeps at most ``window`` records
    counted ahead of the one being finished, and finishes them in order.

    Where a tensor's bytes sit at a known offset, each worker reads its share with pread into a small buffer of its
    own and counts it while it is still in cache: no page faults (a cold file costs what `cat` costs), reads spread
    over the workers, nothing held beyond a buffer per thread."""

    def __init__(self, counter: CodeCounter, finish: Finish) -> None:
        self.counter = counter
        self.finish_record = finish
        jobs = counter.jobs
        self.pool = ThreadPoolExecutor(jobs, thread_name_prefix="fp8check-audit")
        self.inflight = threading.BoundedSemaphore(2 * jobs)
        self.window = 4 * jobs + 16  # records counted ahead of the one being finished
        self.remaining: dict[str, int] = {}  # per file: tensors still to count
        for _, rec in counter.records():
            if rec.counts_data:
                self.remaining[rec.key[0]] = self.remaining.get(rec.key[0], 0) + 1
        self.use_pread = hasattr(os, "preadv")
        self.fds: dict[str, int] = {}
        self.local = threading.local()
        self.small = np.empty(_INLINE_BYTES, dtype=np.uint8)

    # -- the workers' tasks --

    def count(self, part: Any, reader: CheckpointFile) -> np.ndarray:
        import torch

        try:
            h = torch.bincount(part, minlength=256)
            reader.release(part.data_ptr(), part.numel())
            return h.numpy()
        finally:
            self.inflight.release()

    def count_range(self, fd: int, pos: int, n: int, name: str, path: str) -> np.ndarray:
        import torch

        try:
            buf = getattr(self.local, "buf", None)
            if buf is None:
                buf = self.local.buf = np.empty(_PREAD_BYTES, dtype=np.uint8)
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
            self.inflight.release()

    def count_small(self, fd: int, pos: int, n: int, name: str, path: str) -> np.ndarray:
        if n == 0:
            return np.zeros(256, dtype=np.int64)
        try:
            got = pread_into(fd, memoryview(self.small)[:n], pos)
        except OSError as exc:
            raise CheckpointError(path, f"cannot read tensor {name!r}: {exc.strerror or exc}") from None
        if got < n:
            raise CheckpointError(path, f"tensor {name!r}: the file ended before its data did")
        return np.bincount(self.small[:n], minlength=256)

    # -- the audit's thread --

    def _open(self, path: str) -> int:
        fd = self.fds.get(path)
        if fd is None:
            try:
                fd = self.fds[path] = os.open(path, os.O_RDONLY)
            except OSError as exc:
                raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return fd

    def submit(self, rec: Record) -> list[Future[Any]] | np.ndarray:
        """The futures of a tensor's chunk counts, or (a small tensor) its counts."""
        entry = rec.entry
        assert entry is not None
        chunk = self.counter.chunk_bytes
        futures: list[Future[Any]] = []
        if self.use_pread and entry.offset is not None:
            fd = self._open(entry.file)
            if entry.nbytes <= _INLINE_BYTES:
                # a small tensor is counted here at once: handing it to a worker costs more than
                # counting it (measured: 100,000 tensors of 160 bytes spent most of their time in
                # the pool's locks and queues)
                return self.count_small(fd, entry.offset, entry.nbytes, rec.key[1], entry.file)
            if hasattr(os, "posix_fadvise") and entry.nbytes:
                # start reading the whole tensor now, so the disk works
                # while the workers count the chunks before it
                os.posix_fadvise(fd, entry.offset, entry.nbytes, os.POSIX_FADV_WILLNEED)
            for pos in range(entry.offset, entry.offset + entry.nbytes, chunk):
                n = min(chunk, entry.offset + entry.nbytes - pos)
                self.inflight.acquire()
                futures.append(self.pool.submit(self.count_range, fd, pos, n, rec.key[1], entry.file))
            return futures
        reader = self.counter.reader(rec)
        flat = stats.as_bytes(reader.tensor(rec.key[1]))
        for part in flat.split(chunk) if flat.numel() else []:
            self.inflight.acquire()
            reader.prefetch(part.data_ptr(), part.numel())
            futures.append(self.pool.submit(self.count, part, reader))
        return futures

    @staticmethod
    def ready(work: Work) -> bool:
        return not isinstance(work, list) or all(f.done() for f in work)

    def finish(self, item: tuple[Checkpoint, Record, Work]) -> tuple[Checkpoint, Record]:
        ck, rec, work = item
        counter = self.counter
        if work is not None:
            try:
                if isinstance(work, np.ndarray):
                    hist = work
                else:
                    hist = np.zeros(256, dtype=np.int64)
                    for fut in work:
                        hist += fut.result()
            except CheckpointError as exc:
                counter.file_error(exc)
                rec.unread = exc.reason
            else:
                rec.hist = hist
                rec.counted = True
                # a small tensor was read whole, in one go: its size is the count
                n = rec.entry.nbytes if isinstance(work, np.ndarray) and rec.entry else int(hist.sum())
                counter.bytes_read += n
                counter.progress.advance(n)
            f = rec.key[0]
            self.remaining[f] -= 1
            if self.remaining[f] == 0:
                counter.progress.file_done(f)
        self.finish_record(ck, rec)
        return ck, rec

    def run(self) -> Iterator[tuple[Checkpoint, Record]]:
        pending: collections.deque[tuple[Checkpoint, Record, Work]] = collections.deque()
        try:
            for ck, rec in self.counter.records():
                if rec.counts_data:
                    try:
                        pending.append((ck, rec, self.submit(rec)))
                    except CheckpointError as exc:
                        self.counter.file_error(exc)
                        rec.unread = exc.reason
                        self.remaining[rec.key[0]] -= 1
                        self.finish_record(ck, rec)
                        pending.append((ck, rec, None))
                else:
                    pending.append((ck, rec, None))
                while pending and (len(pending) > self.window or self.ready(pending[0][2])):
                    yield self.finish(pending.popleft())
            while pending:
                yield self.finish(pending.popleft())
        finally:
            for _, _, work in pending:
                for fut in work if isinstance(work, list) else ():
                    fut.cancel()
            self.pool.shutdown(wait=True)
            for fd in self.fds.values():
                os.close(fd)


def file_histograms(path: str, names: list[str], chunk: int) -> tuple[dict[str, list[int]], str | None]:
    """Worker of the process mode: the code counts of ``names`` in one file."""
    import torch

    torch.set_num_threads(1)
    out: dict[str, list[int]] = {}
    try:
        with open_checkpoint(path) as reader:
            for name in names:
                flat = stats.as_bytes(reader.tensor(name))
                out[name] = stats.histogram(flat, chunk=chunk, release=reader.release,
                                            prefetch=reader.prefetch).tolist()
            return out, None
    except CheckpointError as exc:
        return out, exc.reason

"""Finding checkpoint files and reading them safely, one tensor at a time.

Nothing in a checkpoint is ever executed:

- ``.safetensors``: the header is parsed and validated here (length within
  the file and under safetensors' own 100 MB limit, JSON, known dtype codes,
  offsets inside the data section, byte size = shape x dtype, no gaps or
  overlaps) before safetensors' ``safe_open`` maps the file; tensors are
  then taken one by one, lazily, from the map.
- torch files (zip and legacy formats, whatever the extension): the pickle
  is first disassembled with :mod:`pickletools` and refused if it names a
  global outside torch's default weights-only set
  (:mod:`fp8check.checkpoints.pickles`); only then ``torch.load(...,
  weights_only=True)`` runs, with ``mmap=True`` for the zip format (the
  legacy format cannot be mapped and is read whole). TorchScript archives
  hold code and are refused.

The kind of a file is decided from its first bytes, not its extension.

Memory: tensors come from a read-only map of the file. After the audit has
counted a chunk of a tensor, :meth:`CheckpointFile.release` tells the kernel
to drop the chunk's pages (``madvise(MADV_DONTNEED)``, only inside a mapping
that /proc/self/maps shows to be this very file), so the resident set stays
near one chunk per worker instead of growing to the size of the checkpoint.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import stat
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from fp8check.checkpoints import dtypes, pickles
from fp8check.errors import CheckpointError, MissingDependencyError, UnsafeCheckpointError

CHECKPOINT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
SAFETENSORS_MAX_HEADER = 100_000_000  # safetensors refuses larger headers too
MAX_PICKLE_BYTES = 1 << 30  # data.pkl of a torch zip; real ones are a few MB
MAX_JSON_BYTES = 64 << 20  # index.json / config.json
MAX_NESTING = 64
MAX_METADATA_ITEMS = 256
MAX_METADATA_CHARS = 4096
MAX_DIMS = 64  # torch's own limit
MAX_ELEMENTS = 1 << 56  # 72 PB of bytes: a shape beyond it (zero-sized dims aside) is not a real tensor


def _bits_text(nbits: int) -> str:
    return str(nbits // 8) if nbits % 8 == 0 else f"{nbits // 8}.{nbits % 8 * 125:03d}".rstrip("0")


def _parse_json(path: str, raw: bytes, what: str) -> Any:
    """JSON from untrusted bytes; every way it can fail is one line (nesting, giant integers, encoding)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(path, f"{what}: {_first_line(exc)}") from None
    except RecursionError:
        raise CheckpointError(path, f"{what}: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise CheckpointError(path, f"{what}: {_first_line(exc)}") from None


# -- tensors and files -------------------------------------------------------


@dataclass(frozen=True, slots=True)  # one per tensor of a file, all held while the audit runs
class TensorEntry:
    """What a file says about one tensor, before any of its data is read."""

    name: str
    file: str
    dtype: str  # torch-style name: "float8_e4m3fn", "bfloat16", "uint8", ...
    shape: tuple[int, ...]
    nbytes: int
    note: str = ""  # why the data cannot be read (meta/sparse tensors), if so
    offset: int | None = None  # absolute byte offset of the data in the file, where known
    scale_hint: str | None = None  # the scale the file itself pairs with this tensor (torchao tensor subclasses)
    block: tuple[int, int] | None = None  # the scaling block the file declares for this tensor, if any
    packed: str = ""  # what a packed one-byte tensor holds, where the file says so ("nvfp4")

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = [line.strip() for line in str(exc).splitlines() if line.strip()]
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(
            "fp8check audit and convert need torch to read checkpoints: pip install torch"
        ) from None
    return torch


class CheckpointFile:
    """One opened checkpoint file: its tensor entries and a way to read them."""

    kind: str = ""

    def __init__(self, path: str) -> None:
        self.path = path
        self.size = os.path.getsize(path)
        self.entries: dict[str, TensorEntry] = {}
        self.metadata: dict[str, str] = {}
        self.notes: list[str] = []
        self._region: tuple[int, int] | None | bool = False  # False: not looked up yet
        self._fd: int | None = None

    def tensor(self, name: str) -> Any:
        raise NotImplementedError

    def _read_at(self, data: bytearray, offset: int) -> int:
        """Fill ``data`` from ``offset``; the bytes read. One descriptor for every read where the
        platform has ``preadv`` (an audit reads each of 100,000s of scales this way)."""
        try:
            if not hasattr(os, "preadv"):
                with open(self.path, "rb", buffering=0) as f:
                    f.seek(offset)
                    return f.readinto(data) or 0
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY)
            return pread_into(self._fd, memoryview(data), offset)
        except OSError as exc:
            raise CheckpointError(self.path, f"cannot read: {exc.strerror or exc}") from None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> CheckpointFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- page release (see the module docstring) --

    def _mapping_of(self, address: int) -> tuple[int, int] | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            st = os.stat(self.path)
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    parts = line.split(maxsplit=5)
                    if len(parts) < 6:
                        continue
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    if lo <= address < hi and int(parts[4]) == st.st_ino:
                        return lo, hi
        except (OSError, ValueError):
            return None
        return None

    def prefetch(self, address: int, nbytes: int) -> None:
        """Ask the kernel to start reading [address, address + nbytes) from
        disk now (``MADV_WILLNEED``, asynchronous), so that a cold file's I/O
        overlaps the counting of the chunks before it."""
        self._advise(address, nbytes, _MADV_WILLNEED, inner=False)

    def release(self, address: int, nbytes: int) -> None:
        """Drop the pages of [address, address + nbytes) from this process.

        Only acts inside the read-only file mapping this reader created, whose
        pages are clean copies of the file: dropping them loses nothing (a
        later read faults them in again).
        """
        self._advise(address, nbytes, _MADV_DONTNEED, inner=True)

    def _advise(self, address: int, nbytes: int, advice: int, *, inner: bool) -> None:
        if _madvise is None:
            return
        if self._region is False:
            self._region = self._mapping_of(address)
        region = self._region
        if not region:
            return
        lo, hi = region
        page = _PAGE
        if inner:  # whole pages inside the range only
            start, end = (address + page - 1) // page * page, (address + nbytes) // page * page
        else:  # every page the range touches
            start, end = address // page * page, (address + nbytes + page - 1) // page * page
        start, end = max(lo, start), min(hi, end)
        if end > start:
            _madvise(start, end - start, advice)


def _libc_madvise() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn
    except (OSError, AttributeError):
        return None


_madvise = _libc_madvise()
_MADV_DONTNEED = 4
_MADV_WILLNEED = 3
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# -- safetensors -----------------------------------------------------------


def read_safetensors_header(path: str) -> tuple[dict[str, Any], int, int]:
    """Parse and validate a safetensors header: (header dict, data start, file size).

    Raises :class:`CheckpointError` with one line naming what is wrong.
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(path, f"file of {size} bytes is too short for a safetensors header")
            n = int.from_bytes(head, "little")
            if n > SAFETENSORS_MAX_HEADER:
                raise CheckpointError(
                    path, f"safetensors header length {n} bytes is absurdly large (limit {SAFETENSORS_MAX_HEADER})"
                )
            if 8 + n > size:
                raise CheckpointError(
                    path, f"safetensors header length {n} bytes points past the end of the file ({size} bytes)"
                )
            raw = f.read(n)
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    header = _parse_json(path, raw, "safetensors header is not valid JSON")
    if not isinstance(header, dict):
        raise CheckpointError(path, "safetensors header is not a JSON object")
    return header, 8 + n, size


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Fill ``view`` from ``offset`` of ``fd`` (``os.preadv``: no shared file position); the bytes
    read, fewer only where the file ends. OSError as ``preadv`` raises it."""
    got = 0
    while got < len(view):
        k = os.preadv(fd, [view[got:]], offset + got)
        if k <= 0:
            break
        got += k
    return got


def _shown(name: str) -> str:
    """A tensor name as an error message shows it: JSON-quoted, at most 200 characters."""
    return json.dumps(name)[:200]


def _validate_safetensors(path: str, header: dict[str, Any], data_start: int, size: int) -> tuple[
        dict[str, TensorEntry], dict[str, str]]:
    data_len = size - data_start
    metadata_raw = header.get("__metadata__", {})
    if metadata_raw is None:
        metadata_raw = {}
    if not isinstance(metadata_raw, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata_raw.items()):
        raise CheckpointError(path, "safetensors __metadata__ is not a map of strings")
    metadata = {}
    for k, v in list(metadata_raw.items())[:MAX_METADATA_ITEMS]:
        metadata[k[:MAX_METADATA_CHARS]] = v[:MAX_METADATA_CHARS]
    spans: list[tuple[int, int, str]] = []
    past: list[tuple[int, str]] = []  # (end, name) of the tensors whose data ends past the file
    entries: dict[str, TensorEntry] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise CheckpointError(path, f"tensor {_shown(name)}: header entry is not an object")
        code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(code, str) or code not in dtypes.SAFETENSORS_DTYPES:
            raise CheckpointError(path, f"tensor {_shown(name)}: unknown dtype {json.dumps(code)[:40]}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                   for d in shape):
            raise CheckpointError(path, f"tensor {_shown(name)}: shape {json.dumps(shape)[:80]} is not a list of sizes")
        if len(shape) > MAX_DIMS:
            raise CheckpointError(path, f"tensor {_shown(name)}: {len(shape)} dimensions (at most {MAX_DIMS})")
        if math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
            raise CheckpointError(path, f"tensor {_shown(name)}: shape {json.dumps(shape)[:80]} is too large to be "
                                        "addressed (more than 2^56 elements)")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
            raise CheckpointError(path, f"tensor {_shown(name)}: data_offsets {json.dumps(offsets)[:80]} is not [start, end]")
        start, end = offsets
        if not 0 <= start <= end:
            raise CheckpointError(path, f"tensor {_shown(name)}: data_offsets [{start}, {end}] are not a range")
        if end > data_len:
            past.append((end, name))
        dtype_name, bits = dtypes.SAFETENSORS_DTYPES[code]
        numel = 1
        for d in shape:
            numel *= d
        nbits = numel * bits
        if nbits % 8 or nbits // 8 != end - start:
            raise CheckpointError(
                path,
                f"tensor {_shown(name)}: shape {json.dumps(shape)[:80]} of {code} needs "
                f"{_bits_text(nbits)} bytes but its data_offsets span {end - start}",
            )
        spans.append((start, end, name))
        entries[name] = TensorEntry(name=name, file=path, dtype=dtype_name, shape=tuple(shape), nbytes=end - start,
                                    offset=data_start + start)
    if past:
        end, name = max(past)
        spans.sort(key=lambda span: span[:2])
        whole = all(a[1] == b[0] for a, b in zip(spans, spans[1:])) and spans and spans[0][0] == 0
        what = "truncated" if whole and spans[-1][1] == end else "truncated or corrupted"
        raise CheckpointError(path, f"{what}: its header describes {end:,} bytes of tensor data but only {data_len:,} "
                                    f"follow the header ({end - data_len:,} missing; tensor {_shown(name)} "
                                    f"and {len(past) - 1} more lie past the end)" if len(past) > 1 else
                              f"{what}: its header describes {end:,} bytes of tensor data but only {data_len:,} "
                              f"follow the header ({end - data_len:,} missing; tensor {_shown(name)} lies past the end)")
    spans.sort(key=lambda span: span[:2])
    position = 0
    for start, end, name in spans:
        if start != position:
            what = "overlaps the previous tensor" if start < position else f"leaves a gap of {start - position} bytes"
            raise CheckpointError(path, f"tensor {_shown(name)}: data {what}")
        position = end
    if position != data_len:
        raise CheckpointError(path, f"{data_len - position} bytes after the last tensor are not described by the header")
    return entries, metadata


class SafetensorsFile(CheckpointFile):
    kind = "safetensors"

    def __init__(self, path: str) -> None:
        super().__init__(path)
        header, data_start, size = read_safetensors_header(path)
        self.entries, self.metadata = _validate_safetensors(path, header, data_start, size)
        codes = {info.get("dtype") for k, info in header.items() if k != "__metadata__"}
        if codes & set(dtypes.FNUZ_CODES) and dtypes.safetensors_version() < dtypes.FNUZ_MIN_SAFETENSORS:
            import safetensors

            raise CheckpointError(
                path,
                f"holds fnuz tensors (F8_E4M3FNUZ/F8_E5M2FNUZ), which safetensors {safetensors.__version__} "
                "cannot read; install safetensors>=0.8",
            )
        self._handle: Any = None

    def full_metadata(self) -> dict[str, str]:
        """The whole ``__metadata__`` (``metadata`` keeps at most 256 items of 4096 characters for the report);
        what convert copies into its output, where a reader needs every character (torchao's JSON)."""
        header, _, _ = read_safetensors_header(self.path)
        raw = header.get("__metadata__") or {}
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    def _open(self) -> Any:
        if self._handle is None:
            require_torch()
            from safetensors import safe_open

            try:
                self._handle = safe_open(self.path, framework="pt")
            except Exception as exc:  # safetensors raises its own error types
                raise CheckpointError(self.path, f"safetensors cannot open it: {_first_line(exc)}") from None
        return self._handle

    def tensor(self, name: str) -> Any:
        entry = self.entries.get(name)
        torch = require_torch()
        dtype = getattr(torch, entry.dtype, None) if entry is not None else None
        if entry is not None and entry.offset is not None and isinstance(dtype, torch.dtype) and dtype.itemsize:
            # Read just this tensor's bytes: safe_open's first get_tensor
            # reads the whole file (a 500 MB shard for a 200-byte scale).
            data = bytearray(entry.nbytes)
            if self._read_at(data, entry.offset) != entry.nbytes:
                raise CheckpointError(self.path, f"tensor {_shown(name)}: the file ended before its data did")
            if not data:
                return torch.empty(entry.shape, dtype=dtype)
            return torch.frombuffer(data, dtype=dtype).reshape(entry.shape)
        handle = self._open()
        try:
            return handle.get_tensor(name)
        except Exception as exc:
            raise CheckpointError(self.path, f"tensor {_shown(name)}: {_first_line(exc)}") from None

    def close(self) -> None:
        super().close()
        handle, self._handle = self._handle, None
        if handle is not None and hasattr(handle, "__exit__"):
            try:
                handle.__exit__(None, None, None)
            except Exception:
                pass


# -- torch ---------------------------------------------------------------------


def _refuse(path: str, bad: tuple[str, ...]) -> UnsafeCheckpointError:
    first = bad[0]
    more = f" (and {len(bad) - 1} more: {', '.join(bad[1:4])})" if len(bad) > 1 else ""
    if first.startswith("torchao."):
        why = ("a torchao class fp8check does not read (it reads Float8Tensor, MXTensor, NVFP4Tensor and the "
               "float8 AffineQuantizedTensor layouts)")
    else:
        why = "outside what fp8check reads from a torch pickle (tensors, containers, torch dtypes and storages)"
    return UnsafeCheckpointError(
        path, f"refused: the pickle asks for global {first}{more}, {why}; nothing was executed", bad)


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LOCAL_HEADER = 30  # bytes of a zip local file header before its name and extra field


@dataclass(frozen=True)
class _Record:
    """Where a storage's bytes sit in the file: [start, start + size)."""

    start: int
    size: int


class TorchFile(CheckpointFile):
    """A ``torch.save`` file, zip or legacy format, read without ``torch.load``.

    The pickle is read by :class:`fp8check.checkpoints.pickles.RestrictedUnpickler`
    into plain descriptions of tensors and storages. Each storage's byte range
    is found and checked here: in a zip, its record's entry in the central
    directory, its local header (signature, name, sizes, stored uncompressed)
    and that it ends before the next record; in the legacy format, the size
    written before each storage against what is left of the file. A tensor
    must lie inside its storage, and a storage inside its record. Only then
    are its bytes read (``pread``), one tensor at a time.
    """

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(path)
        self.kind = kind
        self._tensors: dict[str, pickles.TensorRef] = {}
        self._views: dict[str, tuple[str, Any]] = {}  # logical scales of swizzled torchao layouts
        self._records: dict[str, _Record] = {}
        try:
            if kind == "torch-zip":
                obj, storages = self._read_zip()
            else:
                obj, storages = self._read_legacy()
        except CheckpointError:
            raise
        except zipfile.BadZipFile as exc:
            raise CheckpointError(path, f"not a valid zip archive (truncated or corrupted): {_first_line(exc)}") from None
        except pickles.UnsafeGlobal as exc:
            raise _refuse(path, (exc.name,)) from None
        except pickles.MalformedPickle as exc:
            raise CheckpointError(path, f"corrupted pickle: {_first_line(exc)}") from None
        except (pickle.UnpicklingError, ValueError, EOFError, OSError, zipfile.LargeZipFile, NotImplementedError,
                RuntimeError, TypeError, KeyError, IndexError, AttributeError, OverflowError, MemoryError,
                RecursionError, UnicodeDecodeError) as exc:
            raise CheckpointError(path, f"corrupted or truncated pickle: {_first_line(exc)}") from None
        for key, ref in storages.items():
            rec = self._records.get(key)
            if rec is None:
                raise CheckpointError(path, f"the pickle declares storage {key[:60]!r} but the file holds no record "
                                            "of it")
            if ref.nbytes > rec.size:
                raise CheckpointError(
                    path, f"storage record data/{key[:60]} holds {rec.size} bytes but the pickle declares "
                          f"{ref.numel} x {pickles.DTYPE_ITEMSIZE[ref.dtype]} bytes: a tensor would read past its record")
        self._flatten(obj, "", set(), 0)
        if kind == "torch-legacy":
            self.notes.append("legacy torch format: storages read from the offsets the file gives, each checked "
                              "against the file's size")

    # -- the two formats --

    def _read_zip(self) -> tuple[object, dict[str, pickles.StorageRef]]:
        path = self.path
        with open(path, "rb") as f, zipfile.ZipFile(f) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
                raise CheckpointError(
                    path, "refused: a TorchScript archive (holds code); fp8check reads torch.save files only")
            pkls = [i for i in infos if i.filename.endswith("/data.pkl") or i.filename == "data.pkl"]
            if len(pkls) != 1:
                raise CheckpointError(path, "not a torch.save zip archive: no single data.pkl record")
            prefix = pkls[0].filename[: -len("data.pkl")]
            cd_start = zf.start_dir
            spans: list[tuple[int, int, str]] = []
            records: dict[str, _Record] = {}
            for info in infos:
                rec = self._local_record(f, info, cd_start)
                spans.append((info.header_offset, rec.start + rec.size, info.filename))
                records[info.filename] = rec
            spans.sort()
            for (s0, e0, n0), (s1, _, n1) in zip(spans, spans[1:]):
                if s1 < e0:
                    raise CheckpointError(path, f"zip records {n0[:60]!r} and {n1[:60]!r} overlap")
            pkl = records[pkls[0].filename]
            if pkl.size > MAX_PICKLE_BYTES:
                raise CheckpointError(path, f"data.pkl of {pkl.size} bytes is absurdly large")
            f.seek(pkl.start)
            data = f.read(pkl.size)
            if len(data) != pkl.size:
                raise CheckpointError(path, "data.pkl: the file ended before the record did")
        self._records = {n[len(prefix) + len("data/"):]: r for n, r in records.items()
                         if n.startswith(prefix + "data/")}
        self._scan(pickles.scan_bytes(data))
        return pickles.unpickle(data)

    def _local_record(self, f: Any, info: zipfile.ZipInfo, cd_start: int) -> _Record:
        """The data range of one zip record, from its local header, checked against the central directory."""
        name = info.filename
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise CheckpointError(self.path, f"zip record {name[:60]!r} is compressed; torch.save stores records "
                                             "uncompressed")
        if info.flag_bits & 0x1:
            raise CheckpointError(self.path, f"zip record {name[:60]!r} is encrypted")
        f.seek(info.header_offset)
        head = f.read(_LOCAL_HEADER)
        if len(head) != _LOCAL_HEADER or head[:4] != b"PK\x03\x04":
            raise CheckpointError(self.path, f"zip record {name[:60]!r}: its local header is missing or corrupt "
                                             "(bad signature)")
        n = int.from_bytes(head[26:28], "little")
        m = int.from_bytes(head[28:30], "little")
        local_name = f.read(n)
        if local_name != name.encode("utf-8") and local_name != name.encode("cp437", errors="replace"):
            raise CheckpointError(self.path, f"zip record {name[:60]!r}: its local header names another file "
                                             f"({local_name[:60]!r})")
        start = info.header_offset + _LOCAL_HEADER + n + m
        end = start + info.file_size
        if end > cd_start:
            raise CheckpointError(self.path, f"zip record {name[:60]!r} of {info.file_size} bytes runs past the "
                                             "start of the central directory")
        return _Record(start, info.file_size)

    def _read_legacy(self) -> tuple[object, dict[str, pickles.StorageRef]]:
        path = self.path
        with open(path, "rb") as f:
            # magic number, protocol version, sys info, the object, storage keys
            found = pickles.scan(f, count=5)
            self._scan(found)
            end_of_pickles = f.tell()
            f.seek(0)
            head = f.read(end_of_pickles)
        stream = io.BytesIO(head)
        values = []
        storages: dict[str, pickles.StorageRef] = {}
        for i in range(5):
            values.append(pickles.RestrictedUnpickler(stream, storages=storages).load())
        magic, _protocol, _sys_info, obj, keys = values
        if magic != _LEGACY_MAGIC:
            raise CheckpointError(path, "not a torch legacy file (wrong magic number)")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise CheckpointError(path, "corrupted pickle: the list of storage keys is malformed")
        pos = end_of_pickles
        with open(path, "rb") as f:
            for key in keys:
                ref = storages.get(key)
                if ref is None:
                    raise CheckpointError(path, f"storage {key[:60]!r} is listed but no tensor declares it")
                f.seek(pos)
                raw = f.read(8)
                if len(raw) != 8:
                    raise CheckpointError(path, f"storage {key[:60]!r}: the file ended before its size")
                count = int.from_bytes(raw, "little", signed=True)
                nbytes = count * pickles.DTYPE_ITEMSIZE[ref.dtype] if count >= 0 else -1
                if count < 0 or pos + 8 + nbytes > self.size:
                    raise CheckpointError(path, f"storage {key[:60]!r} claims {count} elements, more than the "
                                                f"{max(self.size - pos - 8, 0)} bytes left in the file")
                self._records[key] = _Record(pos + 8, nbytes)
                pos += 8 + nbytes
        return obj, storages

    def _scan(self, found: pickles.PickleScan) -> None:
        bad = pickles.recognised_globals(found)
        if bad:
            raise _refuse(self.path, bad)
        if found.error:
            raise CheckpointError(self.path, f"corrupted or truncated pickle: {found.error[:200]}")

    # -- tensors --

    def _add(self, name: str, ref: pickles.TensorRef, **extra: Any) -> None:
        note = ref.note
        offset = None
        if not note and ref.storage is not None:
            rec = self._records[ref.storage.key]
            if ref.extent() * ref.itemsize > min(ref.storage.nbytes, rec.size):
                raise CheckpointError(self.path, f"tensor {_shown(name)}: shape {list(ref.shape)} at offset "
                                                 f"{ref.offset} reaches past its storage of {ref.storage.numel} "
                                                 "elements")
            if ref.contiguous():
                offset = rec.start + ref.offset * ref.itemsize
        self._tensors[name] = ref
        self.entries[name] = TensorEntry(name=name, file=self.path, dtype=ref.dtype, shape=ref.shape,
                                         nbytes=ref.numel * ref.itemsize, note=note, offset=offset, **extra)

    def _flatten(self, obj: Any, prefix: str, seen: set[int], depth: int) -> None:
        if isinstance(obj, pickles.TensorRef):
            self._add(prefix or "<root>", obj)
            return
        if isinstance(obj, pickles.SubclassRef):
            self._subclass(prefix or "<root>", obj)
            return
        if depth > MAX_NESTING:
            raise CheckpointError(self.path, f"containers nested deeper than {MAX_NESTING} levels at {prefix[:200]!r}")
        if id(obj) in seen:
            return
        if isinstance(obj, dict):
            seen.add(id(obj))
            for key, value in obj.items():
                self._flatten(value, f"{prefix}.{key}" if prefix else str(key), seen, depth + 1)
        elif isinstance(obj, (list, tuple)):
            seen.add(id(obj))
            for i, value in enumerate(obj):
                self._flatten(value, f"{prefix}.{i}" if prefix else str(i), seen, depth + 1)

    def _subclass(self, name: str, sub: pickles.SubclassRef) -> None:
        """A torchao tensor subclass as plain tensors: its data, its scale(s), its block size."""
        kind = pickles.TORCHAO_SUBCLASSES.get(sub.cls, "")
        st = sub.state

        def tensor(key: str) -> pickles.TensorRef:
            value = st.get(key)
            if not isinstance(value, pickles.TensorRef):
                raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: no tensor {key!r} in its state")
            return value

        def block(value: Any) -> tuple[int, int] | None:
            if isinstance(value, (list, tuple)) and len(value) >= 2 and all(
                    isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value[-2:]):
                return int(value[-2]), int(value[-1])
            return None

        if kind == "AffineQuantizedTensor":
            impl = st.get("tensor_impl")
            if not isinstance(impl, pickles.SubclassRef) or \
                    pickles.TORCHAO_SUBCLASSES.get(impl.cls) != "Float8AQTTensorImpl":
                raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: its layout is not a float8 "
                                                 "layout fp8check reads")
            data, scale = impl.state.get("float8_data"), impl.state.get("scale")
            if not isinstance(data, pickles.TensorRef) or not isinstance(scale, pickles.TensorRef):
                raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: float8 layout without "
                                                 "float8_data and scale tensors")
            if impl.state.get("transposed"):
                raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: a transposed float8 layout, "
                                                 "which fp8check does not read")
            self._add(f"{name}.float8_data", data, scale_hint=f"{name}.scale", block=block(st.get("block_size")))
            self._add(f"{name}.scale", scale)
            self.notes.append(f"{name}: torchao AffineQuantizedTensor (float8 layout) read as {name}.float8_data "
                              f"x {name}.scale")
            return
        if kind == "Float8Tensor":
            self._add(f"{name}.qdata", tensor("qdata"), scale_hint=f"{name}.scale", block=block(st.get("block_size")))
            self._add(f"{name}.scale", tensor("scale"))
            self.notes.append(f"{name}: torchao Float8Tensor read as {name}.qdata x {name}.scale")
            return
        if kind in ("MXTensor", "NVFP4Tensor"):
            data = tensor("qdata")
            scale = tensor("scale")
            bs = st.get("block_size", st.get("_block_size"))
            if not isinstance(bs, int) or isinstance(bs, bool) or bs <= 0:
                raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: block_size is not a size")
            packed = "nvfp4" if kind == "NVFP4Tensor" else ("mxfp4" if data.dtype in ("uint8", "float4_e2m1fn_x2")
                                                            else "")
            rows = data.shape[-2] if len(data.shape) >= 2 else 1
            cols = data.shape[-1] * (2 if packed else 1) if data.shape else 1
            logical = (rows, -(-cols // bs))
            self._add(f"{name}.qdata", data, scale_hint=f"{name}.scale", block=(1, bs), packed=packed)
            if st.get("is_swizzled_scales"):
                self._add(f"{name}.scale", scale)
                padded = -(-logical[0] // 128) * 128 * (-(-logical[1] // 4) * 4)
                if scale.numel != padded:
                    raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: swizzled scale of "
                                                     f"{scale.numel} elements for {logical[0]} x {logical[1]} blocks")
                e = self.entries[f"{name}.scale"]
                self.entries[f"{name}.scale"] = TensorEntry(name=e.name, file=e.file, dtype=e.dtype, shape=logical,
                                                            nbytes=logical[0] * logical[1] * scale.itemsize)
                self._views[f"{name}.scale"] = ("unswizzle", logical)
                self.notes.append(f"{name}: torchao {kind} scale read from its swizzled (blocked) layout as "
                                  f"{list(logical)}")
            else:
                self._add(f"{name}.scale", scale)
            if kind == "NVFP4Tensor" and isinstance(st.get("per_tensor_scale"), pickles.TensorRef):
                self._add(f"{name}.per_tensor_scale", st["per_tensor_scale"])
            self.notes.append(f"{name}: torchao {kind} read as {name}.qdata x {name}.scale (block {bs})")
            return
        raise CheckpointError(self.path, f"{sub.cls} {_shown(name)}: a tensor subclass fp8check does not read")

    def storage_key(self, name: str) -> str:
        """The key of the storage record tensor ``name`` lies in ("" for a tensor without data)."""
        ref = self._tensors.get(name)
        return ref.storage.key if ref is not None and ref.storage is not None else ""

    def storage_of(self, name: str) -> tuple[str, int, int]:
        """(storage key, byte offset in its record, byte length) of the data of tensor ``name``, which must be
        contiguous (what convert rewrites in place)."""
        ref = self._tensors.get(name)
        if ref is None or ref.storage is None or ref.note:
            raise CheckpointError(self.path, f"tensor {_shown(name)}: holds no data of its own")
        if not ref.contiguous() or name in self._views:
            raise CheckpointError(self.path, f"tensor {_shown(name)}: not a contiguous run of its storage")
        return ref.storage.key, ref.offset * ref.itemsize, ref.numel * ref.itemsize

    def tensor(self, name: str) -> Any:
        torch = require_torch()
        ref = self._tensors.get(name)
        if ref is None:
            raise CheckpointError(self.path, f"tensor {_shown(name)}: not in this file")
        if ref.note or ref.storage is None:
            raise CheckpointError(self.path, f"tensor {_shown(name)}: {ref.note or 'holds no data'}")
        dtype = getattr(torch, ref.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise CheckpointError(self.path, f"tensor {_shown(name)}: this torch has no dtype {ref.dtype}")
        rec = self._records[ref.storage.key]
        lo = ref.offset * ref.itemsize
        hi = ref.extent() * ref.itemsize
        data = bytearray(max(hi - lo, 0))
        if data and self._read_at(data, rec.start + lo) != len(data):
            raise CheckpointError(self.path, f"tensor {_shown(name)}: the file ended before its data did")
        if ref.numel == 0:
            t = torch.empty(ref.shape, dtype=dtype)
        else:
            flat = torch.frombuffer(data, dtype=torch.uint8).view(dtype)
            t = flat.as_strided(ref.shape, ref.stride) if not ref.contiguous() else flat[: ref.numel].reshape(ref.shape)
        view = self._views.get(name)
        if view is not None:
            t = _unswizzle(t, view[1])
        return t


def _unswizzle(t: Any, logical: tuple[int, int]) -> Any:
    """torchao's blocked scale layout (128 x 4 tiles as 32 x 16, cuBLAS's block-scaling layout) back to
    ``[rows, blocks]``; the padding is dropped."""
    rows, cols = logical
    nrb, ncb = -(-rows // 128), -(-cols // 4)
    x = t.reshape(-1).reshape(nrb * ncb, 32, 4, 4).permute(0, 2, 1, 3).reshape(nrb, ncb, 128, 4)
    return x.permute(0, 2, 1, 3).reshape(nrb * 128, ncb * 4)[:rows, :cols].contiguous()


# -- sniffing and opening ------------------------------------------------------


def sniff(path: str) -> str:
    """``"safetensors"``, ``"torch-zip"`` or ``"torch-legacy"``, from the first bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    if not head:
        raise CheckpointError(path, "empty file")
    if head[:4] == b"PK\x03\x04":
        return "torch-zip"
    if len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "torch-legacy"
    what = "safetensors file" if path.endswith(".safetensors") else "checkpoint"
    raise CheckpointError(path, f"not a {what}: unrecognised format (first bytes {head[:8].hex()})")


def open_checkpoint(path: str) -> CheckpointFile:
    """Open one checkpoint file; raises :class:`CheckpointError` if it cannot be read safely."""
    _check_regular(path)
    kind = sniff(path)
    if kind == "safetensors":
        return SafetensorsFile(path)
    return TorchFile(path, kind)


def _check_regular(path: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CheckpointError(path, "no such file or directory") from None
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(path, "not a regular file")
    if not os.access(path, os.R_OK):
        raise CheckpointError(path, "cannot read: permission denied")


# -- discovery -----------------------------------------------------------------


@dataclass
class CheckpointGroup:
    """Files that form one checkpoint (an index's shards, a directory, or one file).

    Scales are paired within a file first, then across the group.
    """

    root: str
    files: list[str] = field(default_factory=list)
    index: str | None = None
    weight_map: dict[str, str] = field(default_factory=dict)  # tensor -> file path
    config_dir: str | None = None


@dataclass
class Discovery:
    groups: list[CheckpointGroup] = field(default_factory=list)
    problems: list[CheckpointError] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


def _read_json(path: str) -> Any:
    _check_regular(path)  # a FIFO would block the open forever
    try:
        size = os.path.getsize(path)
        if size > MAX_JSON_BYTES:
            raise CheckpointError(path, f"JSON file of {size} bytes is absurdly large")
        with open(path, "rb") as f:
            raw = f.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise CheckpointError(path, f"cannot read: {exc.strerror or exc}") from None
    return _parse_json(path, raw, "not valid JSON")


def _group_from_index(index_path: str, out: Discovery) -> CheckpointGroup | None:
    doc = _read_json(index_path)
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in weight_map.items()):
        raise CheckpointError(index_path, "index has no weight_map of tensor name -> shard file")
    base = os.path.dirname(index_path)
    group = CheckpointGroup(root=index_path, index=index_path, config_dir=base)
    shards: dict[str, str] = {}
    for shard in dict.fromkeys(weight_map.values()):
        parts = Path(shard).parts
        if not shard or os.path.isabs(shard) or ".." in parts or "\\" in shard:
            out.problems.append(CheckpointError(
                index_path, f"refused: weight_map names shard {json.dumps(shard)[:200]} outside the index's directory"))
            continue
        full = os.path.join(base, shard)
        if not os.path.exists(full):
            out.problems.append(CheckpointError(
                full, f"missing shard: named in {os.path.basename(index_path)} but not found"))
            continue
        shards[shard] = full
        group.files.append(full)
    group.weight_map = {k: shards[v] for k, v in weight_map.items() if v in shards}
    return group


def _walk(directory: str) -> Iterator[str]:
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(CHECKPOINT_SUFFIXES) and not name.startswith("."):
                yield os.path.join(root, name)


def discover(paths: list[str]) -> Discovery:
    """Resolve command-line paths into checkpoint groups; unreadable ones become problems."""
    out = Discovery()
    seen: set[str] = set()
    loose: dict[str, CheckpointGroup] = {}  # files given one by one, grouped by directory

    def add(group: CheckpointGroup) -> None:
        fresh = []
        for f in group.files:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                fresh.append(f)
        group.files = fresh
        if fresh:
            out.groups.append(group)

    for path in paths:
        try:
            if not os.path.exists(path):
                if os.path.islink(path):
                    raise CheckpointError(path, "broken symbolic link")
                raise CheckpointError(path, "no such file or directory")
            if os.path.isdir(path):
                if not os.access(path, os.R_OK | os.X_OK):
                    raise CheckpointError(path, "cannot read directory: permission denied")
                indexes = sorted(str(p) for p in Path(path).glob("*.index.json"))
                if indexes:
                    preferred = [p for p in indexes if p.endswith(".safetensors.index.json")] or indexes
                    for other in indexes:
                        if other != preferred[0]:
                            out.skipped.append((other, f"another index ({os.path.basename(preferred[0])}) is audited"))
                    group = _group_from_index(preferred[0], out)
                    if group is not None:
                        named = {os.path.realpath(f) for f in group.files}
                        for f in _walk(path):
                            if os.path.realpath(f) not in named:
                                out.skipped.append((f, "not named by the index"))
                        add(group)
                    continue
                files = list(_walk(path))
                if not files:
                    raise CheckpointError(
                        path, f"no checkpoint files ({', '.join(CHECKPOINT_SUFFIXES)}) in this directory")
                add(CheckpointGroup(root=path, files=files, config_dir=path))
            elif path.endswith(".index.json"):
                group = _group_from_index(path, out)
                if group is not None:
                    add(group)
            else:
                _check_regular(path)
                parent = os.path.dirname(os.path.abspath(path))
                group = loose.get(parent)
                if group is None:
                    group = loose[parent] = CheckpointGroup(root=parent, config_dir=os.path.dirname(path) or ".")
                    out.groups.append(group)
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    group.files.append(path)
        except CheckpointError as exc:
            out.problems.append(exc)
    out.groups = [g for g in out.groups if g.files]
    return out


def read_config(directory: str | None) -> tuple[dict[str, Any], list[str]]:
    """config.json and hf_quant_config.json next to a checkpoint: (merged docs, problems)."""
    docs: dict[str, Any] = {}
    problems: list[str] = []
    if not directory:
        return docs, problems
    for name in ("config.json", "hf_quant_config.json"):
        p = os.path.join(directory, name)
        if os.path.lexists(p):
            try:
                doc = _read_json(p)
            except CheckpointError as exc:
                problems.append(str(exc))
                continue
            if isinstance(doc, dict):
                docs[name] = doc
    return docs, problems

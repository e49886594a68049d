"""A streaming safetensors writer: one tensor's bytes in memory at a time.

safetensors' own ``save_file`` needs every tensor in memory at once; a
converter of a multi-GB checkpoint cannot afford that. The format is a
little-endian u64 header length, a JSON header (padded with spaces to a
multiple of 8 bytes) and the tensors' bytes back to back; every file this
writes is read back through safetensors' ``safe_open`` by the converter's
verification, so the official parser vouches for it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from fp8check.checkpoints import dtypes


@dataclass
class OutputTensor:
    name: str
    dtype: str  # safetensors code: "F8_E4M3FNUZ", "BF16", ...
    shape: tuple[int, ...]
    nbytes: int
    chunks: Callable[[], Iterable[bytes | memoryview]]  # called once, while writing


def write(path: str, tensors: list[OutputTensor], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to ``path`` atomically (a temporary file, then a rename)."""
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for t in tensors:
        if t.dtype not in dtypes.SAFETENSORS_DTYPES:
            raise ValueError(f"{t.name}: unknown safetensors dtype {t.dtype}")
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    tmp = f"{path}.partial{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(len(raw).to_bytes(8, "little"))
            f.write(raw)
            for t in tensors:
                written = 0
                for chunk in _iter(t.chunks()):
                    f.write(chunk)
                    written += len(chunk) if isinstance(chunk, bytes) else chunk.nbytes
                if written != t.nbytes:
                    raise ValueError(f"{t.name}: wrote {written} bytes, expected {t.nbytes}")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _iter(chunks: Iterable[bytes | memoryview]) -> Iterator[bytes | memoryview]:
    yield from chunks

"""A ``torch.save`` zip file written back with some tensors converted, with no object of it ever built.

``fp8check convert`` writes a torch file holding tensor subclasses (torchao's
``Float8Tensor``) back as a torch file, so that ``torch.load(weights_only=True)``
with torchao's classes allow-listed still gives torchao tensors. Nothing is
unpickled for real and nothing is pickled from live objects: the source's
``data.pkl`` is re-emitted opcode by opcode (``pickletools`` parses it), with
two kinds of change only:

- a ``GLOBAL`` naming a converted FP8 dtype (``torch float8_e4m3fn``) names its
  counterpart (``torch float8_e4m3fnuz``); every tensor, and every dtype field
  of a subclass's options (torchao's ``act_quant_kwargs.float8_dtype``), that
  named the one names the other;
- the storage records of converted data and rescaled scales get new bytes.

Every global of the pickle must be one fp8check's restricted unpickler reads
(checked again here), so the output names nothing the input did not. The
records are written by torch's own zip writer (``PyTorchFileWriter``, what
``torch.save`` uses: 64-byte aligned, stored, CRC-checked).
"""

from __future__ import annotations

import pickletools
import zipfile
from typing import Callable

from fp8check.checkpoints import pickles
from fp8check.errors import CheckpointError

# records torch's writer adds itself at the end of the file
_WRITER_RECORDS = ("version", ".data/serialization_id")


def rename_globals(data: bytes, renames: dict[str, str], *, path: str) -> tuple[bytes, dict[str, int]]:
    """``data`` (a pickle) with each ``GLOBAL "module name"`` in ``renames`` naming the new global instead;
    and how many times each was renamed. Refuses a pickle it cannot rewrite exactly."""
    out = bytearray()
    counts = {k: 0 for k in renames}
    ops = list(pickletools.genops(data))
    names = {op.name for op, _, _ in ops}
    if "FRAME" in names or "STACK_GLOBAL" in names:
        # protocol 4+: globals are strings inside length-counted frames; torch.save writes protocol 2
        raise CheckpointError(path, "the pickle uses protocol 4 or later (framed, STACK_GLOBAL): fp8check writes "
                                    "back protocol 2 pickles only (torch.save's default)")
    ends = [pos for _, _, pos in ops[1:]] + [len(data)]
    for (op, arg, pos), end in zip(ops, ends):
        if op.name in ("GLOBAL", "INST"):
            module, _, name = str(arg).partition(" ")
            if not pickles.recognised(f"{module}.{name}"):
                raise CheckpointError(path, f"the pickle names global {module}.{name}, outside what fp8check reads")
            full = f"{module}.{name}"
            if op.name == "GLOBAL" and full in renames:
                new_module, _, new_name = renames[full].rpartition(".")
                if not pickles.recognised(renames[full]):
                    raise CheckpointError(path, f"cannot rename {full} to {renames[full]}: not a global fp8check writes")
                out += b"c" + new_module.encode("ascii") + b"\n" + new_name.encode("ascii") + b"\n"
                counts[full] += 1
                continue
        out += data[pos:end]
    return bytes(out), counts


def pickle_of(path: str) -> tuple[str, bytes, list[zipfile.ZipInfo]]:
    """(the archive's record prefix, its data.pkl, its records) of a torch zip file fp8check has read."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        pkls = [i for i in infos if i.filename.endswith("/data.pkl") or i.filename == "data.pkl"]
        if len(pkls) != 1:
            raise CheckpointError(path, "not a torch.save zip archive: no single data.pkl record")
        prefix = pkls[0].filename[: -len("data.pkl")]
        return prefix, zf.read(pkls[0]), infos


def write(src: str, dst: str, pickle_data: bytes, storages: dict[str, Callable[[bytes], bytes]]) -> None:
    """Write ``dst``: every record of ``src`` in its order, ``data.pkl`` replaced by ``pickle_data`` and
    each storage record ``data/KEY`` of ``storages`` replaced by ``storages[KEY](its bytes)``."""
    from fp8check.checkpoints.loaders import require_torch

    torch = require_torch()
    prefix, _, infos = pickle_of(src)
    left = set(storages)
    writer = torch._C.PyTorchFileWriter(dst)
    try:
        with zipfile.ZipFile(src) as zf:
            for info in infos:
                name = info.filename[len(prefix):]
                if name in _WRITER_RECORDS:
                    continue
                if name == "data.pkl":
                    body = pickle_data
                else:
                    body = zf.read(info)
                    key = name[len("data/"):] if name.startswith("data/") else None
                    if key in storages:
                        new = storages[key](body)
                        if len(new) != len(body):
                            raise CheckpointError(dst, f"storage {key}: {len(new)} bytes written for {len(body)}")
                        body = new
                        left.discard(key)
                writer.write_record(name, body, len(body))
        writer.write_end_of_file()
    finally:
        del writer
    if left:
        raise CheckpointError(src, f"storage record(s) {', '.join(sorted(left))[:80]} not found")

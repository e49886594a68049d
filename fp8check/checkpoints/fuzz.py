"""Fuzz cases for the checkpoint loaders: valid seed checkpoints and their mutations.

Valid seed checkpoints (a safetensors file, a sharded directory with its
index and config, a torch zip file, a torch legacy file) are mutated at the
byte level (bit flips, truncation, inserted or overwritten runs), at the
JSON level (safetensors headers, index and config files: deep nesting, giant
integers, wrong types, huge, zero and too many dimensions, moved offsets,
many tensors, a FIFO in place of a file) and at the pickle level (opcodes of
``data.pkl`` and of the legacy stream: arguments changed, globals renamed,
opcodes dropped or repeated). The same seed and case give the same file on
every run.

This module only makes the cases; ``fp8check fuzz`` (:mod:`fp8check.commands.fuzz`)
runs each through ``fp8check audit`` and judges what the command line did.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import shutil
import struct
from typing import Any, Callable

from fp8check.checkpoints import pickles

KINDS = ("safetensors", "sharded", "torch-zip", "torch-legacy")
MANY_TENSORS = [1000, 20000, 200000]  # headers with this many tensors (the last one once ended in a MemoryError)


# -- seeds -------------------------------------------------------------------------


def make_seeds(directory: str) -> dict[str, str]:
    """One valid checkpoint of each kind under ``directory``; kind -> path."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 0x7E, size=(16, 32), dtype=np.uint8)
    w = torch.from_numpy(codes).view(torch.float8_e4m3fn)
    s = torch.full((16, 1), 0.5)
    os.makedirs(directory, exist_ok=True)
    out = {}
    st = os.path.join(directory, "seed.safetensors")
    save_file({"l.weight": w.clone(), "l.weight_scale": s.clone(), "l.input_scale": torch.tensor(1.0)}, st)
    out["safetensors"] = st
    sharded = os.path.join(directory, "sharded")
    os.makedirs(sharded, exist_ok=True)
    save_file({"a.weight": w.clone(), "b.weight_scale_inv": torch.ones(1, 1)},
              os.path.join(sharded, "model-00001-of-00002.safetensors"))
    save_file({"a.weight_scale_inv": torch.ones(1, 1), "b.weight": w.clone()},
              os.path.join(sharded, "model-00002-of-00002.safetensors"))
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {
            "a.weight": "model-00001-of-00002.safetensors", "b.weight_scale_inv": "model-00001-of-00002.safetensors",
            "a.weight_scale_inv": "model-00002-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}}, f)
    with open(os.path.join(sharded, "config.json"), "w") as f:
        json.dump({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                                                      "weight_block_size": [128, 128]}}, f)
    out["sharded"] = sharded
    pt = os.path.join(directory, "seed.pt")
    torch.save({"model": {"l.weight": w.clone(), "l.weight_scale": s.clone(), "l.bias": torch.zeros(16)}}, pt)
    out["torch-zip"] = pt
    legacy = os.path.join(directory, "seed_legacy.pt")
    torch.save({"l.weight": w.clone(), "l.weight_scale": s.clone()}, legacy, _use_new_zipfile_serialization=False)
    _canonical_legacy_file(legacy)
    out["torch-legacy"] = legacy
    return out


def _canonical_legacy_file(path: str) -> None:
    """Name the storages of a legacy torch file "0", "1", ... in the order its object uses them, and
    store them in that order. torch names them by memory address and stores them sorted by name, so
    the same seed differed from run to run, and so did every mutation of it (a case's "reproduce"
    line must reproduce it). The file is our own seed, just written by torch.save."""
    sizes: dict = {}  # storage key -> its bytes, in the order the object uses them

    class _Object(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> None:
            _, kind, key, _, numel = pid[:5]  # ("storage", storage class, key, location, numel, ...)
            per = 1 if kind == "UntypedStorage" else pickles.DTYPE_ITEMSIZE[pickles.STORAGE_CLASSES[kind]]
            sizes.setdefault(key, numel * per)

        def find_class(self, module: str, name: str) -> Any:
            return name if name.endswith("Storage") else (lambda *args, **kwargs: None)  # nothing is built

    def text(key: str) -> bytes:
        return b"X" + len(key.encode()).to_bytes(4, "little") + key.encode()

    data = open(path, "rb").read()
    f = io.BytesIO(data)
    for _ in range(3):  # magic number, protocol, system info
        pickle.load(f)
    head = data[:f.tell()]
    _Object(f).load()
    obj = data[len(head):f.tell()]
    keys = pickle.load(f)  # the storage keys, sorted, then each storage: an 8-byte count and its bytes
    records, at = {}, f.tell()
    for key in keys:
        records[key], at = data[at:at + 8 + sizes[key]], at + 8 + sizes[key]
    if at != len(data):
        raise ValueError(f"{path}: {len(data) - at} bytes after the storages (not a legacy torch file?)")
    for i, key in enumerate(sizes):
        obj = obj.replace(text(key), text(str(i)))
    names = pickle.dumps([str(i) for i in range(len(sizes))], protocol=2)  # as torch.save pickles the keys
    with open(path, "wb") as out:
        out.write(head + obj + names + b"".join(records[key] for key in sizes))


# -- mutations ------------------------------------------------------------------------


def _bytes_mutation(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    how = rng.choice(("flip", "flip", "truncate", "overwrite", "insert", "zero"))
    if not b:
        return bytes(b)
    if how == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        del b[rng.randrange(len(b)):]
    elif how == "overwrite":
        i = rng.randrange(len(b))
        n = rng.randint(1, 16)
        b[i:i + n] = bytes(rng.randrange(256) for _ in range(n))
    elif how == "insert":
        i = rng.randrange(len(b))
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    else:
        i = rng.randrange(len(b))
        b[i:i + rng.randint(1, 64)] = b"\0" * len(b[i:i + 64])
    return bytes(b)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


_BIG_INT = "9" * 5000  # beyond Python's 4,300-digit int conversion limit


def _json_value_mutation(rng: random.Random) -> Any:
    return rng.choice([
        "NESTED", "BIGINT", [1, 2], {"a": 1}, None, True, -1, 2 ** 64, 1.5, "F8_E4M3", [],
        [2 ** 62, 2 ** 62], [0, 2 ** 70], [1] * 70, [0, 64], [10 ** 12], "x" * 1000,
    ])


def _render_json(doc: Any) -> bytes:
    text = json.dumps(doc)
    text = text.replace('"NESTED"', _nested(100_000)).replace('"BIGINT"', _BIG_INT)
    return text.encode()


def _header_mutation(data: bytes, rng: random.Random) -> bytes:
    n = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError:
        return _bytes_mutation(data, rng)
    body = data[8 + n:]
    how = rng.choice(("field", "field", "field", "entry", "many", "nest", "length"))
    names = [k for k in header if k != "__metadata__"]
    if how == "field" and names:
        name = rng.choice(names)
        key = rng.choice(("dtype", "shape", "data_offsets"))
        header[name][key] = _json_value_mutation(rng)
    elif how == "entry" and names:
        header[rng.choice(names)] = _json_value_mutation(rng)
    elif how == "many":
        for i in range(rng.choice(MANY_TENSORS)):
            header[f"t{i}"] = {"dtype": "F8_E4M3", "shape": [0], "data_offsets": [0, 0]}
    elif how == "nest":
        header["__metadata__"] = "NESTED"
    else:
        raw = _render_json(header)
        return (rng.choice((len(raw) + 10 ** 6, 2 ** 63, 0, len(raw) // 2))).to_bytes(8, "little") + raw + body
    raw = _render_json(header)
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + body


def _pickle_mutation(pkl: bytes, rng: random.Random) -> bytes:
    import pickletools

    try:
        ops = list(pickletools.genops(pkl))
    except Exception:
        return _bytes_mutation(pkl, rng)
    # positions of opcode starts; mutate one opcode's argument bytes or the opcode itself
    starts = [pos for _, _, pos in ops] + [len(pkl)]
    k = rng.randrange(len(ops))
    op, arg, pos = ops[k]
    end = starts[k + 1]
    b = bytearray(pkl)
    how = rng.choice(("arg", "arg", "drop", "dup", "global", "opcode"))
    if how == "arg" and end - pos > 1:
        i = rng.randrange(pos + 1, end)
        b[i] = rng.choice((0, 0xFF, b[i] ^ (1 << rng.randrange(8)), rng.randrange(256)))
    elif how == "drop":
        del b[pos:end]
    elif how == "dup":
        b[pos:pos] = pkl[pos:end]
    elif how == "global":
        globals_ = [(p, e) for (o, _, p), e in zip(ops, starts[1:]) if o.name == "GLOBAL"]
        if globals_:
            p, e = rng.choice(globals_)
            b[p:e] = b"c" + rng.choice((b"posix\nsystem\n", b"builtins\neval\n", b"torch._utils\n_rebuild_tensor_v3\n",
                                        b"_codecs\nencode\n", b"torch\nFloatStorage\n", b"torch\nfloat8_e4m3fn\n",
                                        b"collections\nOrderedDict\n"))
    else:
        b[pos] = rng.randrange(256)
    return bytes(b)


def _rezip(src: str, dst: str, edit: Callable[[str, bytes], bytes]) -> None:
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():  # the source's date, not now: a case must be the same every run
            zout.writestr(zipfile.ZipInfo(info.filename, info.date_time), edit(info.filename, zin.read(info)))


def _storage_size_mutation(pkl: bytes, rng: random.Random) -> bytes:
    """Change the element count of one storage the pickle declares (what a size attack does)."""
    import pickletools

    ops = list(pickletools.genops(pkl))
    for i, (op, arg, pos) in enumerate(ops):
        if op.name == "BINPERSID" and i >= 2:
            o, a, p = ops[i - 2]  # the count is the last item of the persistent-id tuple
            if o.name in ("BININT1", "BININT2", "BININT"):
                new = rng.choice((2 ** 31 - 1, 10 ** 6, (a or 0) + 1, (a or 0) * 2 + 64))
                end = ops[i - 1][2]
                return pkl[:p] + b"J" + struct.pack("<i", min(new, 2 ** 31 - 1)) + pkl[end:]
    return pkl


def mutate(seeds: dict[str, str], case: int, seed: int, directory: str) -> tuple[str, str]:
    """Write mutated case number ``case`` under ``directory``: (path to audit, what was done)."""
    rng = random.Random(seed * 1_000_003 + case)
    kind = KINDS[case % len(KINDS)]
    src = seeds[kind]
    out = os.path.join(directory, f"case{case}")
    if kind == "safetensors":
        data = open(src, "rb").read()
        how = rng.choice(("bytes", "header", "header"))
        path = out + ".safetensors"
        with open(path, "wb") as f:
            f.write(_bytes_mutation(data, rng) if how == "bytes" else _header_mutation(data, rng))
        return path, f"{kind} {how}"
    if kind == "sharded":
        shutil.copytree(src, out)
        target = rng.choice(("index", "index", "config", "shard", "fifo"))
        if target == "fifo":
            victim = os.path.join(out, rng.choice(("model.safetensors.index.json", "config.json",
                                                   "model-00001-of-00002.safetensors")))
            os.unlink(victim)
            os.mkfifo(victim)
            return out, f"{kind} fifo {os.path.basename(victim)}"
        if target == "shard":
            p = os.path.join(out, "model-00002-of-00002.safetensors")
            data = open(p, "rb").read()
            with open(p, "wb") as f:
                f.write(_header_mutation(data, rng) if rng.random() < 0.6 else _bytes_mutation(data, rng))
            return out, f"{kind} shard"
        p = os.path.join(out, "model.safetensors.index.json" if target == "index" else "config.json")
        doc = json.load(open(p))
        how = rng.choice(("value", "nest", "bigint", "bytes", "weight_map"))
        if how == "bytes":
            raw = _bytes_mutation(open(p, "rb").read(), rng)
        else:
            if how == "value":
                key = rng.choice(list(doc))
                doc[key] = _json_value_mutation(rng)
            elif how == "nest":
                doc["metadata" if target == "index" else "torch_dtype"] = "NESTED"
            elif how == "bigint":
                doc["metadata" if target == "index" else "torch_dtype"] = "BIGINT"
            elif target == "index":
                wm = doc["weight_map"]
                name = rng.choice(list(wm))
                wm[name] = _json_value_mutation(rng) if rng.random() < 0.5 else rng.choice(
                    ("../seed.safetensors", "/etc/passwd", "missing.safetensors", "", "model-00001-of-00002.safetensors"))
            raw = _render_json(doc)
        with open(p, "wb") as f:
            f.write(raw)
        return out, f"{kind} {target} {how}"
    if kind == "torch-zip":
        path = out + ".pt"
        how = rng.choice(("bytes", "pickle", "pickle", "size", "record"))
        if how == "bytes":
            with open(path, "wb") as f:
                f.write(_bytes_mutation(open(src, "rb").read(), rng))
        elif how == "record":
            _rezip(src, path, lambda name, d: d[: rng.randrange(len(d) + 1)] if "/data/" in name else d)
        else:
            fn = _pickle_mutation if how == "pickle" else _storage_size_mutation
            _rezip(src, path, lambda name, d: fn(d, rng) if name.endswith("data.pkl") else d)
        return path, f"{kind} {how}"
    path = out + ".pt"
    data = open(src, "rb").read()
    how = rng.choice(("bytes", "pickle", "size"))
    if how == "bytes":
        data = _bytes_mutation(data, rng)
    elif how == "size":  # the 8-byte element count written before a storage
        import pickletools

        stream = io.BytesIO(data)
        for _ in range(5):
            for _ in pickletools.genops(stream):
                pass
        at = stream.tell()
        data = data[:at] + struct.pack("<q", rng.choice((2 ** 62, 10 ** 15, 2 ** 40, -1))) + data[at + 8:]
    else:
        data = _pickle_mutation(data, rng)
    with open(path, "wb") as f:
        f.write(data)
    return path, f"{kind} {how}"

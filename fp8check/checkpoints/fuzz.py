"""Fuzzing the checkpoint loaders: mutated checkpoints through ``fp8check audit``.

    python -m fp8check.checkpoints.fuzz --cases 3000 --seed 1 --jobs 2

Valid seed checkpoints (a safetensors file, a sharded directory with its
index and config, a torch zip file, a torch legacy file) are mutated at the
byte level (bit flips, truncation, inserted or overwritten runs), at the
JSON level (safetensors headers, index and config files: deep nesting, giant
integers, wrong types, huge, zero and too many dimensions, moved offsets,
many tensors, a FIFO in place of a file) and at the pickle level (opcodes of
``data.pkl`` and of the legacy stream: arguments changed, globals renamed,
opcodes dropped or repeated). Each case goes through ``fp8check audit CASE
--json OUT -q`` and must end with exit 0, 1 or 2, with one line per problem
on stderr and no traceback, within a time limit (no hang) and a memory limit
(nothing allocated from a size the file claims before it is checked), and
with no positive verdict when something was not read.

The cases run in worker processes (each with its own address-space limit),
many cases per process; ``--subprocess`` runs each case in a fresh
interpreter instead (slower, closest to a user's command line). Exit code 1
when any case broke a rule (each is printed with how to reproduce it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import random
import shutil
import signal
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
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


# -- running one case -------------------------------------------------------------------


@dataclass
class Outcome:
    case: int
    what: str
    exit_code: int | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # broken rules


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def check_case(path: str, what: str, case: int, json_out: str, timeout: float) -> Outcome:
    """Audit one case in this process and judge it."""
    from fp8check.cli import main

    out = Outcome(case, what)
    err, stdout = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout):
            out.exit_code = main(["audit", path, "--json", json_out, "-q", "--jobs", "1"])
    except _Timeout:
        out.problems.append(f"hang: no answer within {timeout:g} s")
    except MemoryError:
        out.problems.append("MemoryError: allocated from a claimed size")
    except SystemExit as exc:
        out.exit_code = int(exc.code or 0)
    except BaseException as exc:  # the one thing the CLI must never do
        out.problems.append(f"traceback: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out.seconds = time.perf_counter() - started
    _judge(out, err.getvalue(), json_out)
    return out


def _judge(out: Outcome, stderr: str, json_out: str) -> None:
    if out.exit_code is not None and out.exit_code not in (0, 1, 2):
        out.problems.append(f"exit code {out.exit_code}")
    if "Traceback" in stderr:
        out.problems.append("traceback on stderr")
    for line in stderr.splitlines():
        if line.strip() and not line.startswith("fp8check: error: "):
            out.problems.append(f"stray stderr line: {line[:120]}")
            break
    if out.exit_code is None:
        return
    try:
        doc = json.load(open(json_out))
    except (OSError, ValueError):
        if out.exit_code != 2:
            out.problems.append("no JSON report although the audit ran")
        return
    s = doc.get("summary", {})
    unread = s.get("unreadable_files") or s.get("unknown") or any(
        f.get("status") == "error" for f in doc.get("files", []))
    positive = [t for t, v in (s.get("verdicts") or {}).items() if v != "unknown"]
    if (unread or out.exit_code == 2) and positive:
        out.problems.append(f"positive verdict for {positive} although something was not read")


def _run_subprocess(path: str, what: str, case: int, json_out: str, timeout: float, memory: int) -> Outcome:
    import resource
    import subprocess

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    out = Outcome(case, what)
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "fp8check", "audit", path, "--json", json_out, "-q", "--jobs", "1"],
                              capture_output=True, text=True, timeout=timeout, preexec_fn=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        out.problems.append(f"hang: no answer within {timeout:g} s")
        return out
    out.seconds = time.perf_counter() - started
    out.exit_code = proc.returncode
    _judge(out, proc.stderr, json_out)
    return out


# -- workers ------------------------------------------------------------------------------


_STATE: dict[str, Any] = {}


def _init(seed_dir: str, memory: int) -> tuple[int, int] | None:
    """Set up a worker: the seed paths, and an address-space limit of ``memory`` bytes (the soft
    limit only, so that the caller's can be restored); the previous limits, if changed."""
    import resource

    old = None
    if memory:
        old = resource.getrlimit(resource.RLIMIT_AS)
        hard = old[1]
        resource.setrlimit(resource.RLIMIT_AS, (memory if hard == resource.RLIM_INFINITY else min(memory, hard), hard))
    _STATE["seeds"] = make_seeds(seed_dir) if not os.path.exists(os.path.join(seed_dir, "seed.pt")) else {
        "safetensors": os.path.join(seed_dir, "seed.safetensors"), "sharded": os.path.join(seed_dir, "sharded"),
        "torch-zip": os.path.join(seed_dir, "seed.pt"), "torch-legacy": os.path.join(seed_dir, "seed_legacy.pt")}
    return old


def _one(args: tuple[int, int, str, float, bool, int]) -> Outcome:
    case, seed, work, timeout, subprocess_mode, memory = args
    d = tempfile.mkdtemp(prefix=f"case{case}-", dir=work)
    try:
        path, what = mutate(_STATE["seeds"], case, seed, d)
        json_out = os.path.join(d, "out.json")
        if subprocess_mode:
            return _run_subprocess(path, what, case, json_out, timeout, memory)
        return check_case(path, what, case, json_out, timeout)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run(cases: int, seed: int, *, jobs: int = 1, timeout: float = 60.0, memory: int = 4 << 30,
        subprocess_mode: bool = False, work: str | None = None, many: list[int] | None = None) -> list[Outcome]:
    """Run ``cases`` mutated checkpoints; every outcome (with the rules it broke, if any).

    ``many``: the tensor counts of the "many tensors" header mutation (smaller in the suite, for time;
    only where the cases run in this process, ``jobs=1``)."""
    if many is not None:
        MANY_TENSORS[:] = many
    own = work is None
    work = work or tempfile.mkdtemp(prefix="fp8check-fuzz-")
    seed_dir = os.path.join(work, "seeds")
    try:
        make_seeds(seed_dir)
        items = [(c, seed, work, timeout, subprocess_mode, memory) for c in range(cases)]
        if jobs <= 1:  # in this process: its memory limit is restored afterwards
            import resource

            old = _init(seed_dir, 0 if subprocess_mode else memory)
            try:
                return [_one(i) for i in items]
            finally:
                if old is not None:
                    resource.setrlimit(resource.RLIMIT_AS, old)
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(jobs, initializer=_init, initargs=(seed_dir, 0 if subprocess_mode else memory),
                      maxtasksperchild=200) as pool:
            return list(pool.imap(_one, items, chunksize=4))
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    codes: dict[str, int] = {}
    for o in outcomes:
        key = str(o.exit_code) if o.exit_code is not None else "none"
        codes[key] = codes.get(key, 0) + 1
    return {
        "cases": len(outcomes),
        "exit_codes": dict(sorted(codes.items())),
        "tracebacks": sum(any(p.startswith("traceback") for p in o.problems) for o in outcomes),
        "hangs": sum(any(p.startswith("hang") for p in o.problems) for o in outcomes),
        "positive_verdicts_for_unread": sum(any(p.startswith("positive") for p in o.problems) for o in outcomes),
        "broken": sum(bool(o.problems) for o in outcomes),
        "slowest_seconds": round(max((o.seconds for o in outcomes), default=0.0), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fp8check.checkpoints.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case (a hang past it fails)")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit per worker")
    parser.add_argument("--subprocess", action="store_true", help="one fresh interpreter per case")
    parser.add_argument("--json", metavar="OUT", help="write every outcome as JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcomes = run(args.cases, args.seed, jobs=args.jobs, timeout=args.timeout, memory=int(args.memory_gb * (1 << 30)),
                   subprocess_mode=args.subprocess)
    summary = summarise(outcomes)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    for o in outcomes:
        if o.problems:
            print(f"case {o.case} ({o.what}): {'; '.join(o.problems)}  [reproduce: --seed {args.seed}, case {o.case}]")
    print(json.dumps(summary))
    if args.json:
        from fp8check.outputs import write_json

        write_json(args.json, {"summary": summary, "outcomes": [o.__dict__ for o in outcomes]})
    return 1 if summary["broken"] else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``fp8check convert``: exact e4m3fn <-> e4m3fnuz (and e5m2 <-> e5m2fnuz), verified.

What serving stacks do by hand when an OCP checkpoint meets an MI300, done
right (see :mod:`fp8check.checkpoints.targets` for the conversion tables):

- codes mapped through a 256-entry table: the bytes reinterpreted, 0x80 -> 0x00
  (fnuz has no -0), the fn NaNs 0x7F/0xFF -> 0x80 (the fnuz NaN; a naive
  reinterpretation leaves them finite ±240);
- each weight scale multiplied by 2 (exactly, in its own dtype), so every
  value x scale is unchanged; where some scale elements cannot be doubled
  exactly, per block: those blocks keep their scale and their codes are
  re-encoded at it (without a scale: the whole tensor), and values the target
  cannot hold are saturated and *reported*, never hidden;
- activation and KV-cache scales multiplied by 2 as vLLM and SGLang do at
  load on fnuz hardware (``--activation-scales keep`` leaves them); -1
  ("absent") stays -1;
- packed FP4 and MX tensors kept as they are (no fnuz form exists);
- everything else copied byte for byte.

The output is what a loader takes: safetensors (fnuz dtype codes
``F8_E4M3FNUZ``/``F8_E5M2FNUZ`` need safetensors >= 0.8: checked), or, for torch
files holding torchao tensor subclasses, torch files again
(:mod:`fp8check.checkpoints.torch_writer`); the configs rewritten to say what
the tensors now are (:func:`rewrite_config`) and the folder's other files
copied. Then the output is read back and verified: every dequantized value
(code value x scale, exact in float64) of DST equals SRC's bit for bit (NaN by
class; a -0 becomes +0 where the target has no -0, counted), every copied
tensor is byte-identical; a tensor that is not is named with the reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from fp8check import formats
from fp8check.checkpoints import conventions, dtypes, findings, granularity, safetensors_writer, stats, targets
from fp8check.checkpoints.audit import AuditOptions, Auditor
from fp8check.checkpoints.records import Checkpoint, Record
from fp8check.progress import ProgressSink
from fp8check.errors import CheckpointError, MissingDependencyError
from fp8check.checkpoints import torch_writer
from fp8check.checkpoints.loaders import CheckpointFile, SafetensorsFile, TorchFile, open_checkpoint
from fp8check.errors import InvalidValueError
from fp8check.formats import Format

CONVERT_SCHEMA_VERSION = 1
_ROWS_ELEMS = 1 << 22
CONFIG_FILES = ("config.json", "hf_quant_config.json")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
MAX_AUX_BYTES = 64 << 20  # other files of the folder (tokenizer, generation config) copied up to this size
# how the configs that name the element format spell each FP8 format
_FMT_SPELLING = {"e4m3fn": "e4m3", "e4m3fnuz": "e4m3fnuz", "e5m2": "e5m2", "e5m2fnuz": "e5m2fnuz"}


@dataclass
class ConvertOptions:
    to: str
    activation_scales: str = "scale"  # or "keep"
    force: bool = False
    jobs: int | None = None


def resolve_to(name: str) -> tuple[Format, ...]:
    key = name.strip().lower()
    if key == "fnuz":
        return targets.FNUZ
    if key == "ocp":
        return targets.OCP
    f = formats.get(key)
    if f not in formats.FP8_FORMATS:
        raise InvalidValueError(f"--to must be an FP8 format, fnuz or ocp; got {name!r}")
    return (f,)


@dataclass
class Action:
    kind: str  # copy, convert, scale
    rec: Record
    table: np.ndarray | None = None
    dst_fmt: Format | None = None
    factor: float = 1.0
    plan: targets.ConversionPlan | None = None
    block_ok: np.ndarray | None = None  # a block plan: the scale elements that take the factor (others keep theirs)
    out_file: str = ""
    result: dict[str, Any] = field(default_factory=dict)


def _chunks(flat: Any, release: Any, chunk: int = stats.CHUNK_BYTES) -> Iterator[np.ndarray]:
    for start in range(0, flat.numel(), chunk):
        part = flat[start:start + chunk]
        yield part.numpy()
        release(part.data_ptr(), part.numel())


def _raw_bytes(tensor: Any) -> Any:
    """All bytes of a tensor as a flat torch uint8 view."""
    import torch

    t = tensor.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.reshape(-1).view(torch.uint8)


def _scaled_values(tensor: Any, kind: str, factor: float, kv: bool, only: np.ndarray | None = None) -> Any:
    """The scale tensor times ``factor`` in its own dtype (e8m0: exponent shifted); -1 kept for KV scales;
    with ``only`` (a block plan), the elements where it is False keep their value."""
    import torch

    t = tensor.detach().contiguous()
    if kind == "e8m0":
        b = t.view(torch.uint8).to(torch.int32)
        step = int(round(np.log2(factor)))
        out = torch.where(b == 0xFF, b, (b + step).clamp(0, 254))
        if only is not None:
            out = torch.where(torch.from_numpy(np.asarray(only, dtype=bool).reshape(tuple(t.shape))), out, b)
        return out.to(torch.uint8).view(t.dtype)
    d = t.to(torch.float64)
    out = d * factor
    if kv:
        out = torch.where(d == -1.0, d, out)
    if only is not None:
        out = torch.where(torch.from_numpy(np.asarray(only, dtype=bool).reshape(tuple(t.shape))), out, d)
    return out.to(t.dtype)


def _block_chunks(ck: Checkpoint, a: Action, tensor: Any) -> Iterator[np.ndarray]:
    """The converted codes of a tensor under a block plan, rows at a time: the factor's table in the blocks whose
    scale takes it, the same-value table (factor 1) in the others."""
    rec = a.rec
    sc = rec.scale
    assert sc is not None and sc.granularity is not None and a.block_ok is not None and rec.fmt and a.dst_fmt
    shape = rec.entry.shape
    ok3 = granularity.normalise(np.asarray(a.block_ok, dtype=np.float64), sc.granularity, shape)
    one = targets.conversion_table(rec.fmt, a.dst_fmt, 1.0)[0]
    codes = stats.as_bytes(tensor).numpy()
    _, _, i = granularity.data_dims(shape)
    rows = codes.size // max(i, 1)
    step = max(1, _ROWS_ELEMS // max(i, 1))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        c = codes[r0 * i:r1 * i].reshape(r1 - r0, i)
        take = granularity.expand_rows(ok3, sc.granularity, shape, r0, r1) > 0.5
        yield np.where(take, a.table[c], one[c]).astype(np.uint8).reshape(-1)


class Converter:
    def __init__(self, options: ConvertOptions, progress: ProgressSink | None = None) -> None:
        self.o = options
        self.progress = progress or ProgressSink()
        self.targets = resolve_to(options.to)
        self.torch_back: set[str] = set()  # source torch files written back as torch files
        self.kept: list[str] = []  # FP8 tensors left as they are, with the reason in their row
        self.configs: list[str] = []  # config files written beside the shards (rewritten)
        self.copied_files: list[str] = []  # other files of the source folder copied (tokenizer, ...)
        self.src_is_folder = False
        self.carried: list[dict[str, str]] = []  # the source's error findings: name, code, message
        if options.activation_scales not in ("scale", "keep"):
            raise InvalidValueError(f"--activation-scales must be scale or keep, got {options.activation_scales!r}")
        if any(f in targets.FNUZ for f in self.targets) and dtypes.safetensors_version() < dtypes.FNUZ_MIN_SAFETENSORS:
            import safetensors

            raise MissingDependencyError(
                f"fnuz tensors need safetensors>=0.8 (F8_E4M3FNUZ/F8_E5M2FNUZ dtype codes); installed: "
                f"{safetensors.__version__}. Readers of the converted file need it too.")

    def run(self, src: str, dst: str) -> dict[str, Any]:
        check_destination(dst, force=self.o.force)
        if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
            raise InvalidValueError("DST is SRC")
        aud = Auditor(AuditOptions(jobs=self.o.jobs), self.progress)
        self.src_is_folder = os.path.isdir(src) or src.endswith(".index.json")
        staging = ""
        try:
            aud.prepare([src])
            if len(aud.checkpoints) > 1:
                raise InvalidValueError(f"{src}: convert takes one checkpoint (a file, a directory or an index)")
            for _, rec in aud.finished():  # counts every FP8 tensor: the conversion plans
                # errors the conversion carries over unchanged (it converts formats, it fixes no defect)
                self.carried.extend({"name": rec.key[1], "code": f.code, "message": f.message}
                                    for f in rec.findings if f.severity == findings.ERROR)
            problems = [f for f in aud.files.values() if f.status == "error"]
            if problems or not aud.checkpoints:
                return self._failed(src, dst, problems)
            ck = aud.checkpoints[0]
            unread = [r for r in ck.records if r.unread]
            if unread:
                raise CheckpointError(unread[0].key[0], f"tensor {json.dumps(unread[0].key[1])[:200]} could not be "
                                                        f"read: {unread[0].unread}")
            actions = self._plan(ck, dst)
            # Everything is written beside DST under a temporary name, verified
            # there, and renamed onto DST only then: a failure leaves nothing.
            staging = _staging(dst)
            self._write(ck, actions, dst, staging)
            self._verify(ck, actions, dst, staging)
            _commit(staging, dst)
            staging = ""
        finally:
            aud.close()
            if staging:
                _discard(staging)
        return self._report(src, dst, ck, actions)

    # -- planning --

    def _plan(self, ck: Checkpoint, dst: str) -> list[Action]:
        single = dst.endswith(".safetensors")
        if not single and os.path.exists(dst) and not os.path.isdir(dst):
            raise InvalidValueError(f"{dst}: not a directory (name it *.safetensors for one output file)")
        self.torch_back = _torch_back(ck)
        if single and self.torch_back:
            raise InvalidValueError(f"{sorted(self.torch_back)[0]} holds torchao tensor subclasses, which convert "
                                    "writes back as torch files: give DST as a directory")
        actions: dict[tuple[str, str], Action] = {}
        names: dict[str, str] = {}
        for rec in ck.records:
            if rec.entry is None:
                continue
            if rec.entry.note:
                raise InvalidValueError(f"{rec.key[0]}: tensor {json.dumps(rec.key[1])[:200]}: cannot convert a "
                                        f"{rec.entry.note.split(':')[0]}")
            back = rec.key[0] in self.torch_back
            if not back and rec.entry.dtype not in dtypes.SAFETENSORS_CODE:
                raise InvalidValueError(f"{rec.key[0]}: tensor {json.dumps(rec.key[1])[:200]}: dtype {rec.entry.dtype} "
                                        "has no safetensors code")
            if single:
                out_file = dst
            elif back:
                out_file = os.path.join(dst, os.path.basename(rec.key[0]))
            else:
                out_file = os.path.join(dst, _out_name(rec.key[0]))
            if single and rec.key[1] in names:
                raise InvalidValueError(f"tensor {json.dumps(rec.key[1])[:200]} is in both {names[rec.key[1]]} and "
                                        f"{rec.key[0]}; convert them one by one")
            names[rec.key[1]] = rec.key[0]
            actions[rec.key] = Action("copy", rec, out_file=out_file)
        converted = False
        for rec in ck.records:
            if rec.role != conventions.ROLE_FP8 or rec.entry is None or rec.fmt in self.targets:
                continue
            dst_fmt = targets.COUNTERPART.get(rec.fmt)
            if dst_fmt not in self.targets:
                raise InvalidValueError(
                    f"tensor {json.dumps(rec.key[1])[:200]} is {rec.fmt.name}; --to {self.o.to} converts "
                    f"{', '.join(targets.COUNTERPART[t].name for t in self.targets)} only (--to fnuz or --to ocp converts "
                    "every format to its counterpart)")
            if not rec.counted:
                raise CheckpointError(rec.key[0], f"tensor {json.dumps(rec.key[1])[:200]} could not be read")
            act = actions[rec.key]
            if rec.scale is not None and rec.scale.granularity is not None and rec.scale.granularity.name == granularity.MX_E8M0:
                # MX is an OCP format (e8m0 scales over OCP elements): no loader reads MX blocks of fnuz elements
                act.result["reason"] = (f"kept as {rec.fmt.name}: an MX layout (e8m0 scales of 32-element blocks) has "
                                        f"no {dst_fmt.name} form; a target without MX matmuls runs it emulated "
                                        "(dequantized at load)")
                self.kept.append(rec.key[1])
                continue
            plan = rec.plans[dst_fmt.name]
            act.kind, act.dst_fmt, act.plan, act.factor = "convert", dst_fmt, plan, plan.factor
            act.table = targets.conversion_table(rec.fmt, dst_fmt, plan.factor)[0]
            converted = True
            act.block_ok = rec.block_ok
            if plan.factor != 1.0 and rec.scale is not None:
                sact = actions[rec.scale.key]
                sact.kind, sact.factor, sact.block_ok = "scale", plan.factor, rec.block_ok
                sact.result["scale_of"] = rec.key[1]
        if converted and self.o.activation_scales == "scale":
            natural = 2.0 if any(f in targets.FNUZ for f in self.targets) else 0.5
            for rec in ck.records:
                if rec.role not in (conventions.ROLE_ACTIVATION_SCALE, conventions.ROLE_KV_SCALE) or rec.scale_stats is None:
                    continue
                act = actions[rec.key]
                if rec.scale_stats.factor_exact.get(f"{natural:g}"):
                    act.kind, act.factor = "scale", natural
                else:
                    act.result["reason"] = f"kept: x {natural:g} is not exact in {rec.entry.dtype}"
        return list(actions.values())

    # -- writing --

    def _write(self, ck: Checkpoint, actions: list[Action], dst: str, staging: str) -> None:
        by_file: dict[str, list[Action]] = {}
        for a in actions:
            by_file.setdefault(a.out_file, []).append(a)
        total = sum(a.rec.entry.nbytes for a in actions)
        self.progress.start(total, len(by_file))
        try:
            for out_file, acts in by_file.items():
                if acts[0].rec.key[0] in self.torch_back:
                    self._write_torch(ck, acts, _staged(out_file, dst, staging))
                    self.progress.file_done(out_file)
                    continue
                outs = [self._output(ck, a) for a in acts]
                meta = {"format": "pt",
                        "fp8check.convert": f"to {self.o.to}: {sum(a.kind == 'convert' for a in acts)} FP8 tensors converted"}
                src_files = {a.rec.key[0] for a in acts}
                if len(src_files) == 1:
                    reader = ck.readers[next(iter(src_files))]
                    src_meta = reader.full_metadata() if isinstance(reader, SafetensorsFile) else reader.metadata
                    renames = {f"float8_{a.rec.fmt.name}": f"float8_{a.dst_fmt.name}" for a in acts
                               if a.kind == "convert" and a.rec.fmt is not None and a.dst_fmt is not None}
                    meta = {**{k: _renamed_dtypes(v, renames) for k, v in src_meta.items()}, **meta}
                safetensors_writer.write(_staged(out_file, dst, staging), outs, meta)
                self.progress.file_done(out_file)
            if dst.endswith(".safetensors"):
                return
            if self.torch_back and ck.index:
                # the index of torch shards names the state dict's keys (a subclass is one key): its file names stay
                with open(ck.index, "rb") as f:
                    raw = f.read()
                with open(os.path.join(staging, os.path.basename(ck.index)), "wb") as f:
                    f.write(raw)
            elif ck.index or len(by_file) > 1:
                weight_map = {a.rec.key[1]: os.path.basename(a.out_file) for a in actions}
                index = {"metadata": {"total_size": total}, "weight_map": weight_map}
                with open(os.path.join(staging, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
                    json.dump(index, f, indent=1)
            self._write_configs(ck, actions, staging)
        finally:
            self.progress.close()

    def _write_torch(self, ck: Checkpoint, acts: list[Action], path: str) -> None:
        """A torch file written back as a torch file: its pickle re-emitted with converted dtypes renamed, the
        storages of converted and rescaled tensors rewritten (fp8check.checkpoints.torch_writer)."""
        src = acts[0].rec.key[0]
        reader = ck.readers[src]
        renames = {f"torch.float8_{a.rec.fmt.name}": f"torch.float8_{a.dst_fmt.name}"
                   for a in acts if a.kind == "convert" and a.rec.fmt is not None and a.dst_fmt is not None}
        renamed = {k.split(".", 1)[1] for k in renames}
        for a in acts:
            if a.kind != "convert" and a.rec.entry.dtype in renamed:
                raise InvalidValueError(
                    f"{src}: tensor {json.dumps(a.rec.key[1])[:200]} stays {a.rec.entry.dtype} while other "
                    f"{a.rec.entry.dtype} tensors of the file are converted, and a torch pickle names a dtype once "
                    "for all its tensors: convert cannot write this file back")
        _, data, _ = torch_writer.pickle_of(src)
        pickle_data, _ = torch_writer.rename_globals(data, renames, path=src)
        owners: dict[str, list[Action]] = {}
        for a in acts:
            owners.setdefault(reader.storage_key(a.rec.key[1]), []).append(a)
        storages = {}
        for key, found in owners.items():
            changing = [a for a in found if a.kind != "copy"]
            if not changing:
                continue  # copied: the record as it was
            if len(found) > 1:
                raise InvalidValueError(
                    f"{src}: tensor {json.dumps(changing[0].rec.key[1])[:200]} shares its storage with "
                    f"{json.dumps([a.rec.key[1] for a in found if a is not changing[0]][0])[:200]}: convert "
                    "cannot rewrite one without the other")
            _, start, length = reader.storage_of(changing[0].rec.key[1])
            storages[key] = self._splice(ck, changing[0], start, length)
        torch_writer.write(src, path, pickle_data, storages)

    def _splice(self, ck: Checkpoint, a: Action, start: int, length: int) -> Any:
        def new_bytes(record: bytes) -> bytes:
            body = b"".join(np.ascontiguousarray(c).view(np.uint8).tobytes() for c in self._output(ck, a).chunks())
            if len(body) != length:
                raise CheckpointError(a.rec.key[0], f"tensor {a.rec.key[1]}: {len(body)} bytes made for {length}")
            return record[:start] + body + record[start + length:]

        return new_bytes

    def _write_configs(self, ck: Checkpoint, actions: list[Action], staging: str) -> None:
        """The checkpoint's other files beside the converted shards, the configs rewritten to say what the
        tensors now are (see :func:`rewrite_config`)."""
        folder = os.path.dirname(ck.index) if ck.index else (ck.root if os.path.isdir(ck.root) else "")
        if not folder or not self.src_is_folder:
            return
        converted = {a.rec.fmt.name: a.dst_fmt.name for a in actions
                     if a.kind == "convert" and a.rec.fmt is not None and a.dst_fmt is not None}
        factors = sorted({a.factor for a in actions if a.kind == "convert"})
        shards = {os.path.realpath(f) for f in ck.files}
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            out = os.path.join(staging, name)
            if (name.startswith(".") or os.path.exists(out) or not os.path.isfile(path) or os.path.islink(path)
                    or os.path.realpath(path) in shards or name.endswith(".index.json")
                    or name.endswith(_WEIGHT_SUFFIXES)):
                continue
            if name in CONFIG_FILES:
                from fp8check.checkpoints.loaders import _read_json

                doc = _read_json(path)
                if isinstance(doc, dict):
                    doc = rewrite_config(name, doc, converted, factors, kept=self.kept)
                with open(out, "w", encoding="utf-8") as f:
                    json.dump(doc, f, indent=2)
                    f.write("\n")
                self.configs.append(name)
            elif os.path.getsize(path) <= MAX_AUX_BYTES:
                import shutil

                shutil.copyfile(path, out)
                self.copied_files.append(name)

    def _output(self, ck: Checkpoint, a: Action) -> safetensors_writer.OutputTensor:
        rec = a.rec
        e = rec.entry
        reader = ck.readers[rec.key[0]]
        code = dtypes.SAFETENSORS_CODE[e.dtype]
        if a.kind == "convert" and e.dtype in dtypes.FP8_DTYPES:
            code = dtypes.SAFETENSORS_CODE[f"float8_{a.dst_fmt.name}"]
        progress = self.progress

        def chunks() -> Iterator[Any]:
            tensor = reader.tensor(rec.key[1])
            if a.kind == "convert" and a.block_ok is not None:
                yield from _block_chunks(ck, a, tensor)
                progress.advance(e.nbytes)
            elif a.kind == "convert":
                table = a.table
                for part in _chunks(stats.as_bytes(tensor), reader.release):
                    yield np.take(table, part)
                    progress.advance(part.size)
            elif a.kind == "scale":
                kind = stats.scale_kind(e.dtype) or e.dtype
                yield _raw_bytes(_scaled_values(tensor, kind, a.factor, rec.role == conventions.ROLE_KV_SCALE,
                                                a.block_ok)).numpy()
                progress.advance(e.nbytes)
            else:
                for part in _chunks(_raw_bytes(tensor), reader.release):
                    yield part
                    progress.advance(part.size)

        return safetensors_writer.OutputTensor(rec.key[1], code, e.shape, e.nbytes, chunks)

    # -- verification --

    def _verify(self, ck: Checkpoint, actions: list[Action], dst: str, staging: str) -> None:
        outs: dict[str, CheckpointFile] = {}
        try:
            for out_file in dict.fromkeys(a.out_file for a in actions):
                outs[out_file] = open_checkpoint(_staged(out_file, dst, staging))  # validates what we wrote
            by_name = {a.rec.key: a for a in actions}
            for a in actions:
                out = outs[a.out_file]
                entry = out.entries.get(a.rec.key[1])
                if entry is None or list(entry.shape) != list(a.rec.entry.shape):
                    a.result.update(exact=False, reason="missing or reshaped in the output")
                    continue
                if a.kind == "convert" and entry.dtype != f"float8_{a.dst_fmt.name}":
                    a.result.update(exact=False, reason=f"stored as {entry.dtype} in the output, not {a.dst_fmt.name}")
                elif a.kind == "convert":
                    self._verify_data(ck, a, out, outs, by_name)
                elif a.kind == "scale":
                    self._verify_scale(ck, a, out)
                else:
                    self._verify_copy(ck, a, out)
        finally:
            for r in outs.values():
                r.close()

    def _scale_pair(self, ck: Checkpoint, a: Action, outs: dict[str, CheckpointFile],
                    by_name: dict[tuple[str, str], Action]) -> tuple[np.ndarray, np.ndarray, granularity.Granularity] | None:
        sc = a.rec.scale
        if sc is None or sc.granularity is None or sc.kind is None:
            return None
        src = stats.scale_values(ck.readers[sc.key[0]].tensor(sc.key[1]), sc.kind)
        sact = by_name[sc.key]
        dst = stats.scale_values(outs[sact.out_file].tensor(sc.key[1]), sc.kind)
        return src, dst, sc.granularity

    def _verify_data(self, ck: Checkpoint, a: Action, out: CheckpointFile, outs: dict[str, CheckpointFile],
                     by_name: dict[tuple[str, str], Action]) -> None:
        rec = a.rec
        shape = rec.entry.shape
        src_codes = stats.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1])).numpy()
        dst_codes = stats.as_bytes(out.tensor(rec.key[1])).numpy()
        vs_table, vd_table = stats.code_values(rec.fmt), stats.code_values(a.dst_fmt)
        pair = self._scale_pair(ck, a, outs, by_name)
        _, o, i = granularity.data_dims(shape)
        rows = src_codes.size // max(i, 1)
        step = max(1, _ROWS_ELEMS // max(i, 1))
        mismatch = zero_sign = nan = 0
        first: int | None = None
        if pair is not None:
            s_src3 = granularity.normalise(pair[0], pair[2], shape)
            s_dst3 = granularity.normalise(pair[1], pair[2], shape)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            cs = src_codes[r0 * i:r1 * i].reshape(r1 - r0, i)
            cd = dst_codes[r0 * i:r1 * i].reshape(r1 - r0, i)
            with np.errstate(invalid="ignore", over="ignore"):
                if pair is None:
                    vs, vd = vs_table[cs], vd_table[cd]
                else:
                    vs = vs_table[cs] * granularity.expand_rows(s_src3, pair[2], shape, r0, r1)
                    vd = vd_table[cd] * granularity.expand_rows(s_dst3, pair[2], shape, r0, r1)
            same_bits = vs.view(np.int64) == vd.view(np.int64)
            both_nan = np.isnan(vs) & np.isnan(vd)
            zs = (vs == 0) & (vd == 0) & ~same_bits
            ok = same_bits | both_nan | (zs if not a.dst_fmt.has_negative_zero else False)
            bad = ~ok
            n_bad = int(np.count_nonzero(bad))
            if n_bad and first is None:
                first = r0 * i + int(np.flatnonzero(bad.reshape(-1))[0])
            mismatch += n_bad
            zero_sign += int(np.count_nonzero(zs))
            nan += int(np.count_nonzero(both_nan))
        # a loader that makes parameters of the source's dtype (the config's, which has no fnuz spelling) and casts
        # DST's tensors into them by value rounds what the source format cannot hold at the new scale
        back_exact = targets.conversion_table(a.dst_fmt, rec.fmt, 1.0)[1]
        cast_back = int(np.count_nonzero(~back_exact[dst_codes]))
        a.result.update(exact=mismatch == 0, mismatches=mismatch, neg_zero_to_zero=zero_sign, nan_kept=nan,
                        cast_back_rounded=cast_back)
        if mismatch:
            reason = a.plan.reason if a.plan and a.plan.reason else "dequantized values differ"
            a.result["reason"] = (f"{mismatch} dequantized {'value differs' if mismatch == 1 else 'values differ'} "
                                  f"(first at flat index {first}): {reason}")

    def _verify_scale(self, ck: Checkpoint, a: Action, out: CheckpointFile) -> None:
        rec = a.rec
        kind = stats.scale_kind(rec.entry.dtype)
        src = stats.scale_values(ck.readers[rec.key[0]].tensor(rec.key[1]), kind)
        dst = stats.scale_values(out.tensor(rec.key[1]), kind)
        expect = src * a.factor
        if a.block_ok is not None:
            expect = np.where(np.asarray(a.block_ok, dtype=bool).reshape(src.shape), expect, src)
        if rec.role == conventions.ROLE_KV_SCALE:
            expect = np.where(src == -1.0, src, expect)
        ok = (expect == dst) | (np.isnan(expect) & np.isnan(dst))
        bad = int(np.count_nonzero(~ok))
        a.result.update(exact=bad == 0, mismatches=bad)
        if bad:
            a.result["reason"] = f"{bad} scale {'element is' if bad == 1 else 'elements are'} not exactly x {a.factor:g}"

    def _verify_copy(self, ck: Checkpoint, a: Action, out: CheckpointFile) -> None:
        src = _raw_bytes(ck.readers[a.rec.key[0]].tensor(a.rec.key[1])).numpy()
        dst = _raw_bytes(out.tensor(a.rec.key[1])).numpy()
        bad = int(np.count_nonzero(src != dst)) if src.shape == dst.shape else max(src.size, dst.size)
        a.result.update(exact=bad == 0, mismatches=bad)
        if bad:
            a.result["reason"] = f"{bad} {'byte differs' if bad == 1 else 'bytes differ'} from the source"

    # -- report --

    def _report(self, src: str, dst: str, ck: Checkpoint, actions: list[Action]) -> dict[str, Any]:
        from fp8check.results import environment

        tensors = []
        for a in actions:
            rec = a.rec
            d = {"name": rec.key[1], "file": rec.key[0], "out_file": a.out_file, "role": rec.role,
                 "action": "kept" if rec.key[1] in self.kept else
                 {"copy": "copied", "convert": "converted", "scale": "scaled"}[a.kind],
                 "dtype": rec.entry.dtype, "shape": list(rec.entry.shape),
                 "from": rec.fmt.name if rec.fmt else None,
                 "to": a.dst_fmt.name if a.dst_fmt else (rec.fmt.name if rec.fmt else None),
                 "factor": a.factor, "exact": a.result.get("exact", True), "mismatches": a.result.get("mismatches", 0),
                 "reason": a.result.get("reason", "")}
            for k in ("neg_zero_to_zero", "nan_kept", "scale_of", "cast_back_rounded"):
                if k in a.result:
                    d[k] = a.result[k]
            if a.plan is not None:
                d["plan"] = a.plan.to_dict()
            tensors.append(d)
        bad = [t for t in tensors if not t["exact"]]
        return {
            "fp8check_convert": CONVERT_SCHEMA_VERSION,
            "command": "convert",
            "src": src, "dst": dst, "to": self.o.to,
            "environment": environment(),
            "summary": {
                "tensors": len(tensors),
                "converted": sum(t["action"] == "converted" for t in tensors),
                "scaled": sum(t["action"] == "scaled" for t in tensors),
                "copied": sum(t["action"] == "copied" for t in tensors),
                "kept": sum(t["action"] == "kept" for t in tensors),
                "cast_back_rounded": sum(t.get("cast_back_rounded", 0) for t in tensors),
                "not_exact": len(bad),
                "exit_code": 1 if bad else 0,
            },
            "problems": [],
            "carried_errors": list(self.carried),
            "configs": list(self.configs),
            "files_copied": list(self.copied_files),
            "tensors": tensors,
        }

    def _failed(self, src: str, dst: str, problems: list[Any]) -> dict[str, Any]:
        from fp8check.results import environment

        return {"fp8check_convert": CONVERT_SCHEMA_VERSION, "command": "convert", "src": src, "dst": dst,
                "to": self.o.to, "environment": environment(),
                "summary": {"tensors": 0, "converted": 0, "scaled": 0, "copied": 0, "not_exact": 0, "exit_code": 2},
                "problems": [{"path": p.path, "error": p.error or ""} for p in problems], "tensors": []}


def check_destination(dst: str, *, force: bool) -> None:
    """DST can be written: its directory exists and is writable; an existing DST needs ``force``
    and must be of the same kind (a file for ``*.safetensors``, else a directory)."""
    from fp8check.outputs import check_writable

    single = dst.endswith(".safetensors")
    if os.path.lexists(dst):
        if not force:
            raise InvalidValueError(f"{dst} exists; pass --force to overwrite it")
        if single and not os.path.isfile(dst):
            raise InvalidValueError(f"DST {dst}: cannot write: not a regular file")
        if not single and not os.path.isdir(dst):
            raise InvalidValueError(f"{dst}: not a directory (name it *.safetensors for one output file)")
    if single:
        check_writable(dst, "DST")
        return
    parent = os.path.dirname(os.path.abspath(dst.rstrip(os.sep))) or "."
    if not os.path.isdir(parent):
        raise InvalidValueError(f"DST {dst}: cannot write: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidValueError(f"DST {dst}: cannot write: directory {parent} is not writable")


def _staging(dst: str) -> str:
    """A temporary file or directory beside DST, on the same file system."""
    from fp8check.outputs import new_beside

    try:  # the mode any new file or directory gets (tempfile's would be 0600 / 0700)
        return str(new_beside(os.path.abspath(dst.rstrip(os.sep)), directory=not dst.endswith(".safetensors")))
    except OSError as exc:
        raise InvalidValueError(f"DST {dst}: cannot write: {exc.strerror or exc}") from None


def _staged(out_file: str, dst: str, staging: str) -> str:
    if dst.endswith(".safetensors"):
        return staging
    return os.path.join(staging, os.path.basename(out_file))


def _commit(staging: str, dst: str) -> None:
    """Put the verified output in DST's place (an existing DST, allowed by --force, is replaced)."""
    import shutil

    target = dst.rstrip(os.sep) or dst
    if os.path.isdir(staging):
        old = ""
        if os.path.isdir(target):
            old = staging + ".old"
            os.replace(target, old)
        os.replace(staging, target)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, target)


def _discard(staging: str) -> None:
    import shutil

    if os.path.isdir(staging):
        shutil.rmtree(staging, ignore_errors=True)
    else:
        try:
            os.unlink(staging)
        except OSError:
            pass


def _torch_back(ck: Checkpoint) -> set[str]:
    """The source files written back as torch files: every torch zip file of a checkpoint of which some torch
    file holds tensor subclasses (torchao's), whose flat tensors no loader would take back from safetensors."""
    torch_files = {path: r for path, r in ck.readers.items() if isinstance(r, TorchFile)}
    if not any(e.scale_hint for r in torch_files.values() for e in r.entries.values()):
        return set()
    legacy = [p for p, r in torch_files.items() if r.kind != "torch-zip"]
    if legacy:
        raise InvalidValueError(f"{legacy[0]}: a legacy-format torch file of a checkpoint with tensor subclasses; "
                                "convert writes torch zip files back only")
    return set(torch_files)


def rewrite_config(name: str, doc: dict[str, Any], converted: dict[str, str], factors: list[float], *,
                   kept: list[str] = ()) -> dict[str, Any]:
    """A config (``config.json`` or ``hf_quant_config.json``) that says what the converted tensors now are.

    Where the producer's config names the element format (transformers/DeepSeek ``quant_method: fp8``'s
    ``fmt``), it is rewritten; no producer has a spelling for fnuz elsewhere (compressed-tensors ``type:
    float``, Quark ``fp8_e4m3``, ModelOpt ``FP8``), so those keys stay as their loaders expect them and a
    top-level ``fp8check_convert`` record says what changed (loaders ignore keys they do not know; the audit
    reads it). Nothing else is changed."""
    out = json.loads(json.dumps(doc))
    if not converted:
        return out
    qc = out.get("quantization_config")
    if name == "config.json" and isinstance(qc, dict) and str(qc.get("quant_method", "")).lower() == "fp8":
        src = str(qc.get("fmt", "e4m3")).lower()
        for a, b in converted.items():
            if src in (a, _FMT_SPELLING[a]) or (src == "fp8" and a == "e4m3fn"):
                qc["fmt"] = _FMT_SPELLING[b]
    from fp8check import __version__

    out["fp8check_convert"] = {
        "weights": dict(converted),
        "weight_scale_factor": factors[0] if len(factors) == 1 else factors,
        "note": "FP8 weights converted by fp8check convert (codes mapped, weight scales multiplied by the factor, "
                "every dequantized value verified equal)" + (f"; {len(kept)} MX tensors kept as they were"
                                                            if kept else ""),
        "fp8check": __version__,
    }
    return out


def _renamed_dtypes(value: str, renames: dict[str, str]) -> str:
    """A metadata value with the converted dtypes renamed where it is torchao's JSON for a tensor subclass
    (``{"_type": "torch.dtype", "_data": "float8_e4m3fn"}``, e.g. its act_quant_kwargs), so that
    ``unflatten_tensor_state_dict`` rebuilds it with the dtype its data now has; any other value as it was."""
    if not renames or '"torch.dtype"' not in value:
        return value
    try:
        doc = json.loads(value)
    except ValueError:
        return value

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("_type") == "torch.dtype" and node.get("_data") in renames:
                return {**node, "_data": renames[node["_data"]]}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return json.dumps(walk(doc))


def _out_name(path: str) -> str:
    base = os.path.basename(path)
    for suffix in (".safetensors", ".pt", ".pth", ".bin", ".ckpt"):
        if base.endswith(suffix):
            return base[: -len(suffix)] + ".safetensors"
    return base + ".safetensors"


def convert(src: str, dst: str, options: ConvertOptions, progress: ProgressSink | None = None) -> dict[str, Any]:
    """Convert ``src`` to ``dst`` (safetensors) and verify it; the report as JSON-able data."""
    return Converter(options, progress).run(src, dst)

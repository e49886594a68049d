"""The auditor reads files from strangers: nothing in them runs, and every
malformed input is one clear line and exit code 2, with the rest still audited."""

import json
import os
import re
import pickle
import zipfile

import pytest
import torch

from checkpoint_builders import codes, fp8, save_pt, save_st, write_json
from fp8check.checkpoints import pickles
from fp8check.cli import main


class Payload:
    """Unpickling this runs a shell command (what a malicious checkpoint does)."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def cli(capsys, *args):
    rc = main(["audit", *map(str, args), "-q"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def good_file(tmp_path):
    return save_st(tmp_path / "good.safetensors", {"g.weight": fp8(codes((8, 8))), "g.weight_scale": torch.tensor(1.0)})


# -- malicious pickles ------------------------------------------------------------------


def _malicious_files(tmp_path, marker):
    cmd = f"touch {marker}"
    files = {}
    files["zip"] = save_pt(tmp_path / "evil_zip.pt", {"w": torch.zeros(2), "x": Payload(cmd)})
    files["legacy"] = save_pt(tmp_path / "evil_legacy.pth", {"w": torch.zeros(2), "x": Payload(cmd)}, legacy=True)
    with open(tmp_path / "evil_proto4.bin", "wb") as f:  # a bare pickle, STACK_GLOBAL
        pickle.dump({"x": Payload(cmd)}, f, protocol=4)
    files["proto4"] = str(tmp_path / "evil_proto4.bin")
    torch.save({"x": Payload(cmd)}, tmp_path / "evil_proto4_zip.pt", pickle_protocol=4)
    files["proto4_zip"] = str(tmp_path / "evil_proto4_zip.pt")
    return files


def test_the_malicious_files_really_run_code_when_unpickled(tmp_path):
    # positive control: the payload works, so its absence below means something
    marker = tmp_path / "pwned"
    files = _malicious_files(tmp_path, marker)
    torch.load(files["zip"], weights_only=False)
    assert marker.exists()
    marker.unlink()
    with open(files["proto4"], "rb") as f:
        pickle.load(f)
    assert marker.exists()


@pytest.mark.parametrize("kind", ["zip", "legacy", "proto4", "proto4_zip"])
def test_malicious_pickle_is_refused_naming_the_global(tmp_path, capsys, kind):
    marker = tmp_path / "pwned"
    path = _malicious_files(tmp_path, marker)[kind]
    good = good_file(tmp_path)
    out_json = tmp_path / "r.json"
    rc, out, err = cli(capsys, path, good, "--json", out_json)
    assert rc == 2
    assert not marker.exists()
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1, err
    assert "posix.system" in lines[0] and "refused" in lines[0] and path in lines[0]
    assert "Traceback" not in err
    report = json.loads(out_json.read_text())
    assert {t["name"] for t in report["tensors"]} == {"g.weight", "g.weight_scale"}  # the rest is audited


@pytest.mark.parametrize("kind", ["zip", "legacy"])
def test_the_restricted_unpickler_is_the_second_lock(tmp_path, capsys, monkeypatch, kind):
    # with the static scan switched off, the restricted unpickler still refuses, naming the global
    monkeypatch.setattr(pickles, "recognised_globals", lambda found: ())
    marker = tmp_path / "pwned"
    path = _malicious_files(tmp_path, marker)[kind]
    rc, _, err = cli(capsys, path)
    assert rc == 2 and not marker.exists()
    assert "posix.system" in err and len(err.strip().splitlines()) == 1


def test_torchao_classes_outside_what_is_read_are_refused(tmp_path, capsys):
    # importing torchao allow-lists its classes for torch.load; fp8check reads only the FP8/MX ones it knows
    torchao = pytest.importorskip("torchao.quantization")
    t = torchao.Float8Tensor.from_hp(torch.randn(16, 32))
    path = save_pt(tmp_path / "ao.pt", {"l.weight": t})
    assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
    pkl_name = "ao/data.pkl"
    edited = _rezip(path, tmp_path / "ao_int4.pt", lambda name, d: d.replace(
        b"torchao.quantization\nFloat8Tensor", b"torchao.quantization\nInt4Tensor__") if name == pkl_name else d)
    rc, _, err = cli(capsys, edited)
    assert rc == 2
    assert "torchao.quantization.Int4Tensor__" in err and "does not read" in err and "nothing was executed" in err


def test_torchscript_archive_is_refused(tmp_path, capsys):
    m = torch.jit.script(torch.nn.Linear(2, 2))
    path = str(tmp_path / "scripted.pt")
    torch.jit.save(m, path)
    rc, _, err = cli(capsys, path)
    assert rc == 2 and "TorchScript" in err


# -- malformed files: one line each, exit 2, the rest still audited ------------------------


def _truncate(src, dst, keep):
    data = open(src, "rb").read()
    with open(dst, "wb") as f:
        f.write(data[: int(len(data) * keep)])
    return str(dst)


def _rezip(src, dst, edit):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, edit(info.filename, zin.read(info)))
    return str(dst)


def _raw_safetensors(path, header, data=b""):
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw + data)
    return str(path)


def malformed_cases(tmp_path):
    pt = save_pt(tmp_path / "src.pt", {"w": torch.arange(100, dtype=torch.float32)})
    legacy = save_pt(tmp_path / "src_legacy.pt", {"w": torch.arange(100, dtype=torch.float32)}, legacy=True)
    st = save_st(tmp_path / "src.safetensors", {"w": torch.ones(4, 4)})
    st_bytes = open(st, "rb").read()
    n = int.from_bytes(st_bytes[:8], "little")
    cases = {}
    cases["truncated zip"] = (_truncate(pt, tmp_path / "trunc.pt", 0.5), "not a valid zip archive")
    cases["corrupted pickle"] = (_rezip(pt, tmp_path / "badpkl.pt",
                                        lambda name, d: b"\x80\x02}q\x00(X\x01\x00\x00\x00wq\x01\xff\xfe" if name.endswith(
                                            "data.pkl") else d), "pickle")
    cases["truncated pickle"] = (_rezip(pt, tmp_path / "halfpkl.pt",
                                        lambda name, d: d[: len(d) // 2] if name.endswith("data.pkl") else d), "pickle")
    cases["short storage record"] = (_rezip(pt, tmp_path / "short.pt",
                                            lambda name, d: d[:40] if name.endswith("data/0") else d),
                                     "would read past its record")
    cases["truncated legacy"] = (_truncate(legacy, tmp_path / "trunc_legacy.pt", 0.6), "")
    past = bytearray(st_bytes)
    past[:8] = (len(st_bytes) + 100).to_bytes(8, "little")
    open(tmp_path / "past.safetensors", "wb").write(bytes(past))
    cases["header past the file"] = (str(tmp_path / "past.safetensors"), "points past the end of the file")
    huge = bytearray(st_bytes)
    huge[:8] = (1 << 40).to_bytes(8, "little")
    open(tmp_path / "huge.safetensors", "wb").write(bytes(huge))
    cases["absurd header"] = (str(tmp_path / "huge.safetensors"), "absurdly large")
    cases["header not json"] = (_write(tmp_path / "nojson.safetensors", (9).to_bytes(8, "little") + b"{not json"),
                                "not valid JSON")
    cases["shape vs bytes"] = (_raw_safetensors(tmp_path / "shape.safetensors",
                                                {"w": {"dtype": "F32", "shape": [4, 5], "data_offsets": [0, 64]}},
                                                st_bytes[8 + n:]), "needs 80 bytes but its data_offsets span 64")
    cases["offsets past data"] = (_raw_safetensors(tmp_path / "offs.safetensors",
                                                   {"w": {"dtype": "U8", "shape": [128], "data_offsets": [0, 128]}},
                                                   b"\0" * 64),
                                 "truncated: its header describes 128 bytes of tensor data but only 64 follow")
    cases["unknown dtype"] = (_raw_safetensors(tmp_path / "dtype.safetensors",
                                               {"w": {"dtype": "F7", "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
                              "unknown dtype")
    cases["empty file"] = (_write(tmp_path / "empty.pt", b""), "empty file")
    cases["not a checkpoint"] = (_write(tmp_path / "text.bin", b"hello world, not a checkpoint"), "unrecognised format")
    cases["missing path"] = (str(tmp_path / "nope.safetensors"), "no such file or directory")
    os.mkdir(tmp_path / "emptydir")
    cases["empty directory"] = (str(tmp_path / "emptydir"), "no checkpoint files")
    os.mkdir(tmp_path / "sharded")
    save_st(tmp_path / "sharded" / "model-1.safetensors", {"a": torch.ones(2)})
    write_json(tmp_path / "sharded" / "model.safetensors.index.json",
               {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})
    cases["missing shard"] = (str(tmp_path / "sharded"), "missing shard")
    os.mkdir(tmp_path / "escape")
    write_json(tmp_path / "escape" / "model.safetensors.index.json", {"weight_map": {"a": "../good.safetensors"}})
    cases["shard outside the index's directory"] = (str(tmp_path / "escape"), "outside the index's directory")
    os.mkdir(tmp_path / "badindex")
    _write(tmp_path / "badindex" / "model.safetensors.index.json", b"{broken")
    cases["broken index"] = (str(tmp_path / "badindex"), "not valid JSON")
    os.symlink(tmp_path / "gone.safetensors", tmp_path / "dangling.safetensors")
    cases["dangling symlink"] = (str(tmp_path / "dangling.safetensors"), "broken symbolic link")
    os.mkfifo(tmp_path / "fifo.safetensors")
    cases["fifo"] = (str(tmp_path / "fifo.safetensors"), "not a regular file")
    return cases


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


CASES = ["truncated zip", "corrupted pickle", "truncated pickle", "short storage record", "truncated legacy",
         "header past the file", "absurd header", "header not json", "shape vs bytes", "offsets past data",
         "unknown dtype", "empty file", "not a checkpoint", "missing path", "empty directory", "missing shard",
         "shard outside the index's directory", "broken index", "dangling symlink", "fifo"]


@pytest.mark.parametrize("case", CASES)
def test_malformed_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    path, expected = malformed_cases(tmp_path)[case]
    good = good_file(tmp_path)
    out_json = tmp_path / "r.json"
    rc, out, err = cli(capsys, good, path, "--json", out_json)
    assert rc == 2
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1, err
    assert lines[0].startswith("fp8check: error: ") and expected in lines[0]
    assert "Traceback" not in err + out
    report = json.loads(out_json.read_text())
    assert report["summary"]["unreadable_files"] == 1 and report["summary"]["exit_code"] == 2
    assert {"g.weight", "g.weight_scale"} <= {t["name"] for t in report["tensors"]}


def test_all_malformed_inputs_at_once(tmp_path, capsys):
    cases = malformed_cases(tmp_path)
    rc, out, err = cli(capsys, good_file(tmp_path), *(p for p, _ in cases.values()))
    assert rc == 2
    assert len([line for line in err.splitlines() if line]) == len(cases)
    assert "Traceback" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path, capsys):
    p = save_st(tmp_path / "locked.safetensors", {"a": torch.ones(2)})
    os.chmod(p, 0)
    rc, _, err = cli(capsys, p)
    assert rc == 2 and "permission denied" in err


@pytest.mark.xfail(strict=True, reason="torch.load(mmap=True) does not check a storage record's size against the "
                                       "size the pickle declares (mmap=False does); no upstream issue found")
def test_torch_mmap_load_rejects_a_short_storage_record(tmp_path):
    pt = save_pt(tmp_path / "src.pt", {"w": torch.arange(100, dtype=torch.float32)})
    short = _rezip(pt, tmp_path / "short.pt", lambda name, d: d[:40] if name.endswith("data/0") else d)
    with pytest.raises(RuntimeError):
        torch.load(short, weights_only=True, mmap=True)


# -- untrusted text --------------------------------------------------------------------------


@pytest.mark.parametrize("color", [False, True], ids=["plain", "FORCE_COLOR"])
def test_names_are_printed_as_text_and_kept_raw_in_json(tmp_path, capsys, monkeypatch, color):
    # rich colours its own output when FORCE_COLOR is set (some CI runners
    # set it): the file's escapes must not get through either way.
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")  # rich never colours a dumb terminal
    if color:
        monkeypatch.setenv("FORCE_COLOR", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
    hostile = ["[bold red]pwn[/]", "evil\x1b[2J\x1b]0;title\x07", "rtl\u202eexe.txt", "<script>alert(1)</script>"]
    tensors = {}
    for i, name in enumerate(hostile):
        tensors[name] = fp8(codes((4, 8), seed=i))  # no scale: SCALE_MISSING lists them
    p = save_st(tmp_path / "m.safetensors", tensors, metadata={"note": "[link=file:///etc]x[/link]\x1b[31m"})
    out_json = tmp_path / "r.json"
    rc = main(["audit", p, "--json", str(out_json), "--max-rows", "100"])
    out, err = capsys.readouterr()
    assert rc == 0  # SCALE_MISSING alone is a warning here
    assert "\u202e" not in out and "\x07" not in out
    assert "\x1b[2J" not in out and "\x1b]" not in out
    assert ("\x1b[" in out) == color  # rich's own styling, only when asked for
    if color:  # what is left is what the file held, escaped
        out = re.sub("\x1b\\[[0-9;]*m", "", out)
    assert "[bold red]pwn[/]" in out  # shown literally, not as markup
    assert "\\x1b" in out and "\\u202e" in out
    report = json.loads(out_json.read_text())
    assert {t["name"] for t in report["tensors"]} == set(hostile)
    assert report["files"][0]["metadata"]["note"] == "[link=file:///etc]x[/link]\x1b[31m"


def test_the_restricted_unpickler_imports_and_calls_nothing(tmp_path):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"x": Payload(f"touch {marker}"), "y": [1, 2]}, protocol=2)
    with pytest.raises(pickles.UnsafeGlobal, match="posix.system"):
        pickles.unpickle(data)
    assert not marker.exists()
    pt = save_pt(tmp_path / "ok.pt", {"a": torch.zeros(3, dtype=torch.float8_e4m3fn), "b": torch.ones(2, 5)})
    with zipfile.ZipFile(pt) as zf:
        pkl = zf.read([n for n in zf.namelist() if n.endswith("data.pkl")][0])
    obj, storages = pickles.unpickle(pkl)
    assert {k: (v.dtype, v.numel) for k, v in storages.items()} == {"0": ("uint8", 3), "1": ("float32", 10)}
    assert (obj["a"].dtype, obj["a"].shape, obj["b"].dtype, obj["b"].shape) == ("float8_e4m3fn", (3,), "float32", (2, 5))

"""Regression tests for what fuzzing and crafted files found (issue 13), and a short fuzzing run with a
fixed seed. (torchao checkpoints read without torchao: test_torchao_checkpoints.py.)"""

import json
import os
import stat
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from checkpoint_builders import codes, codes_of, fp8, quantize, save_pt, save_st, tensor_of, write_json
from fp8check.checkpoints import fuzz
from fp8check.checkpoints.loaders import open_checkpoint
from fp8check.cli import main
from fp8check.commands import fuzz as fuzz_command


def cli(capsys, *args):
    rc = main(["audit", *map(str, args), "-q", "--jobs", "1"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def raw_safetensors(path, header_text, data=b""):
    raw = header_text.encode() if isinstance(header_text, str) else header_text
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw + data)
    return str(path)


def one_line_exit_2(capsys, *paths, expect):
    rc, out, err = cli(capsys, *paths)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and "Traceback" not in err + out, err
    assert len(lines) == 1 and lines[0].startswith("fp8check: error: ") and expect in lines[0], err
    return lines[0]


# -- the traceback classes the fuzzing run found -------------------------------------------


DEEP = "[" * 100_000 + "]" * 100_000
BIG = "9" * 5000


@pytest.mark.parametrize("case,header,expect", [
    ("nested header", '{"__metadata__": ' + DEEP + "}", "nested too deeply"),
    ("giant integer in a header", '{"w": {"dtype": "U8", "shape": [' + BIG + '], "data_offsets": [0, 0]}}',
     "not valid JSON"),
    ("huge dimensions", '{"w": {"dtype": "U8", "shape": [0, 4611686018427387904, 4611686018427387904], '
                        '"data_offsets": [0, 0]}}', "too large"),
    ("zero-size scale with a huge dimension", '{"w_scale": {"dtype": "F32", "shape": [0, 4611686018427387904], '
                                              '"data_offsets": [0, 0]}}', "too large"),
    ("shape past the file", '{"w": {"dtype": "F32", "shape": [9223372036854775807, 3], "data_offsets": [0, 4]}}',
     "too large"),
    ("65 dimensions", '{"w": {"dtype": "U8", "shape": [' + ",".join(["1"] * 65) + '], "data_offsets": [0, 1]}}',
     "65 dimensions"),
    ("dtype a list", '{"w": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}', "unknown dtype"),
    ("dtype a dict", '{"w": {"dtype": {"a": 1}, "shape": [1], "data_offsets": [0, 4]}}', "unknown dtype"),
])
def test_malformed_safetensors_headers(tmp_path, capsys, case, header, expect):
    data = b"\0" * (4 if '"data_offsets": [0, 4]' in header else 1 if '[0, 1]' in header else 0)
    one_line_exit_2(capsys, raw_safetensors(tmp_path / "m.safetensors", header, data), expect=expect)


@pytest.mark.parametrize("name", ["model.safetensors.index.json", "config.json"])
@pytest.mark.parametrize("what", ["nested", "giant integer"])
def test_malformed_index_and_config(tmp_path, capsys, name, what):
    save_st(tmp_path / "model-1.safetensors", {"w.weight": fp8(codes((4, 4))), "w.weight_scale": torch.ones(())})
    write_json(tmp_path / "model.safetensors.index.json",
               {"weight_map": {"w.weight": "model-1.safetensors", "w.weight_scale": "model-1.safetensors"}})
    text = '{"metadata": ' + (DEEP if what == "nested" else BIG) + "}"
    (tmp_path / name).write_text(text)
    rc, out, err = cli(capsys, tmp_path, "--json", tmp_path / "r.json")
    assert rc == 2 and "Traceback" not in err + out
    r = json.loads((tmp_path / "r.json").read_text())
    assert set(r["summary"]["verdicts"].values()) == {"unknown"}
    if name == "config.json":  # a config that cannot be read: the tensors are audited, the verdict is unknown
        assert r["summary"]["unknown"] and r["summary"]["fp8_tensors"] == 1


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@pytest.mark.parametrize("victim", ["model.safetensors.index.json", "config.json", "model-1.safetensors"])
def test_fifos_are_refused_before_they_are_opened(tmp_path, capsys, victim):
    # a FIFO used to hang the audit forever (it blocks on open until a writer comes); the audit runs in
    # this process under an alarm, so that a regression fails the test instead of hanging the suite
    import signal

    save_st(tmp_path / "model-1.safetensors", {"w.weight": fp8(codes((4, 4))), "w.weight_scale": torch.ones(())})
    write_json(tmp_path / "model.safetensors.index.json",
               {"weight_map": {"w.weight": "model-1.safetensors", "w.weight_scale": "model-1.safetensors"}})
    write_json(tmp_path / "config.json", {"torch_dtype": "bfloat16"})
    os.unlink(tmp_path / victim)
    os.mkfifo(tmp_path / victim)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        rc = main(["audit", str(tmp_path), "-q", "--jobs", "1", "--json", "-"])
    except _Hang:
        pytest.fail(f"the audit hung on a FIFO in place of {victim}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out = capsys.readouterr()
    assert rc == 2 and "not a regular file" in out.err and "Traceback" not in out.err
    assert set(json.loads(out.out)["summary"]["verdicts"].values()) == {"unknown"}


def test_many_tensors_stream_in_bounded_memory(tmp_path, capsys):
    # 200,000 tensors once ended in a MemoryError while the JSON was built; rows now stream (fewer here, for time)
    n = 1_500  # past the 1,000 rows an audit keeps in memory: the rest go through its spool file
    header = {f"t{i}.weight": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [2 * i, 2 * i + 2]} for i in range(n)}
    path = raw_safetensors(tmp_path / "many.safetensors", json.dumps(header), b"\x01" * (2 * n))
    write_json(tmp_path / "config.json", {"torch_dtype": "float8_e4m3fn"})  # a model saved in FP8: no scales needed
    rc, _, err = cli(capsys, path, "--json", tmp_path / "r.json")
    assert rc == 0, err
    with open(tmp_path / "r.json") as f:
        r = json.load(f)
    assert len(r["tensors"]) == n and r["summary"]["fp8_tensors"] == n
    assert [t["name"] for t in r["tensors"]] == list(header)
    # the terminal and the HTML report read back only the rows they show, from the spool
    assert main(["audit", str(path), "--jobs", "1", "--max-rows", "1300", "--html", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "t1234.weight" in out and "t1299.weight" in out and "t1300.weight" not in out
    assert f"… {n - 1300} more" in out
    html = (tmp_path / "r.html").read_text()
    assert "t1499.weight" in html  # within the 2,000 rows the report keeps


# -- the two crafted files that read past their zip records -----------------------------------


def _fp8_pt(tmp_path):
    t = {f"w{i}": fp8(codes((64, 64), seed=i)) for i in range(7)}
    return save_pt(tmp_path / "src.pt", t)


def test_a_corrupt_local_header_is_refused(tmp_path, capsys):
    # (a) the local header of data/5: bad signature and a filename length of 125 instead of 12; torch's
    # memory-mapped load read a tensor 113 bytes past its record
    src = _fp8_pt(tmp_path)
    data = bytearray(open(src, "rb").read())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("src/data/5")
    h = info.header_offset
    assert data[h:h + 4] == b"PK\x03\x04" and int.from_bytes(data[h + 26:h + 28], "little") == len("src/data/5")
    data[h:h + 4] = b"PK\x00\x00"
    data[h + 26:h + 28] = (125).to_bytes(2, "little")
    bad = tmp_path / "bad_local_header.pt"
    bad.write_bytes(bytes(data))
    line = one_line_exit_2(capsys, bad, expect="local header")
    assert "src/data/5" in line


def test_a_storage_type_built_with_codecs_is_refused(tmp_path, capsys):
    # (b) the storage type name made with _codecs.encode (in torch's default weights-only set): the old
    # record-size check skipped that storage and an FP8 tensor read 1,856 bytes of zip headers
    src = save_pt(tmp_path / "src.pt", {"w": fp8(codes((64, 64)))})
    with zipfile.ZipFile(src) as zf:
        pkl = zf.read("src/data.pkl")
    old = b"ctorch.storage\nUntypedStorage\n"
    assert old in pkl
    new = b"c_codecs\nencode\nX\x0e\x00\x00\x00UntypedStorageX\x06\x00\x00\x00latin1\x86R"
    edited = pkl.replace(old, new)
    out = tmp_path / "codecs.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            d = zin.read(info)
            if info.filename == "src/data.pkl":
                d = edited
            if info.filename == "src/data/0":
                d = d[:4096 - 1856 // 8]  # a record shorter than the tensor
            zout.writestr(info.filename, d)
    one_line_exit_2(capsys, out, expect="not a torch storage class")


def test_legacy_sizes_are_checked_before_anything_is_allocated(tmp_path, capsys):
    src = save_pt(tmp_path / "old.pt", {"w": torch.ones(16)}, legacy=True)
    data = bytearray(open(src, "rb").read())
    # the 8-byte element count before the storage's bytes: 72 PB
    import io
    import pickletools

    stream = io.BytesIO(bytes(data))
    for _ in range(5):
        for _ in pickletools.genops(stream):
            pass
    at = stream.tell()
    assert int.from_bytes(data[at:at + 8], "little") == 16
    data[at:at + 8] = (9 * 10 ** 15).to_bytes(8, "little")
    bad = tmp_path / "huge_legacy.pt"
    bad.write_bytes(bytes(data))
    one_line_exit_2(capsys, bad, expect="more than the")


# -- verdicts only for what was read ----------------------------------------------------------


@pytest.mark.parametrize("what", ["random bytes", "empty file", "missing file", "refused pickle"])
def test_nothing_read_gives_no_verdict(tmp_path, capsys, what):
    p = tmp_path / "x.safetensors"
    if what == "random bytes":
        p.write_bytes(np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8).tobytes())
    elif what == "empty file":
        p.write_bytes(b"")
    elif what == "refused pickle":
        import pickle

        p = tmp_path / "x.pt"
        p.write_bytes(pickle.dumps({"x": os.system}, protocol=2))
    rc, out, err = cli(capsys, p, "--target", "mi300", "--json", tmp_path / "r.json")
    assert rc == 2
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["summary"]["verdicts"] == {"mi300": "unknown"} and r["portability"][0]["complete"] is False
    assert r["portability"][0]["reasons"][0] == "nothing was read"
    rc = main(["audit", str(p), "--target", "mi300", "--jobs", "1"])
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("verdict unknown: nothing was read")  # said first
    assert "mi300 (e4m3fnuz, e5m2fnuz): unknown" in out and "runs as is" not in out


def test_unpaired_scale_is_named(tmp_path, run_audit):
    q, s = quantize(torch.randn(32, 64), "e4m3fn", "rowwise")
    r = run_audit(save_st(tmp_path / "m.safetensors", {"l.weight": q, "l.scale": s}), targets=("mi300",))
    assert codes_of(r, "l.weight")["SCALE_UNPAIRED"] == ("warning", 1) and "SCALE_MISSING" not in codes_of(r, "l.weight")
    assert tensor_of(r, "l.weight")["findings"][0]["message"].startswith("unpaired scale l.scale")


# -- convert: atomic, nothing left behind -------------------------------------------------------


def test_convert_zero_size_tensor_and_duplicate_scale_names(tmp_path, capsys):
    z = save_st(tmp_path / "zero" / "m.safetensors", {"w.weight": fp8(np.zeros((0, 64), np.uint8)),
                                                      "w.weight_scale": torch.tensor(1.0)})
    assert main(["convert", z, str(tmp_path / "out0.safetensors"), "--to", "e4m3fnuz", "-q"]) == 0
    d = tmp_path / "dup"
    save_st(d / "a.safetensors", {"x.weight": fp8(codes((4, 8))), "x.weight_scale": torch.tensor(1.0)})
    save_st(d / "b.safetensors", {"x.weight": fp8(codes((8, 8), seed=2)), "x.weight_scale": torch.ones(8, 1)})
    rc = main(["convert", str(d), str(tmp_path / "out1"), "--to", "e4m3fnuz", "-q"])
    capsys.readouterr()
    assert rc == 0
    assert sorted(os.listdir(tmp_path / "out1")) == ["a.safetensors", "b.safetensors", "model.safetensors.index.json"]


def test_convert_failure_leaves_nothing(tmp_path, capsys, monkeypatch):
    from fp8check.checkpoints import convert

    src = save_st(tmp_path / "src" / "m.safetensors", {"w.weight": fp8(codes((4, 8))),
                                                       "w.weight_scale": torch.tensor(1.0)})

    def boom(*a, **k):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(convert.Converter, "_verify", boom)
    for dst in ("o.safetensors", "odir"):
        before = set(os.listdir(tmp_path))
        with pytest.raises(ZeroDivisionError):
            main(["convert", src, str(tmp_path / dst), "--to", "e4m3fnuz", "-q"])
        assert set(os.listdir(tmp_path)) == before


# -- fuzzing: a fixed-seed run in the suite ----------------------------------------------------


def test_fuzzing_fixed_seed(tmp_path):
    # 200 cases, about 3 CPU seconds (most of it the headers of 200 and 1,000 tensors); the long run: fp8check fuzz
    outcomes = fuzz_command.run(200, seed=1, jobs=1, timeout=30, work=str(tmp_path), many=[200, 1000])
    summary = fuzz_command.summarise(outcomes)
    broken = [(o.case, o.what, o.problems) for o in outcomes if o.problems]
    assert not broken, broken[:5]
    assert summary["tracebacks"] == 0 and summary["hangs"] == 0 and summary["positive_verdicts_for_unread"] == 0
    assert set(summary["exit_codes"]) <= {"0", "1", "2"}


def test_canonical_legacy_file_is_the_same_whatever_the_storages_addresses(tmp_path):
    # the storages' order in a legacy file follows their memory addresses: allocating the two tensors
    # in both orders gives both orders of storages on any heap; the canonical file must not care
    w = torch.arange(512, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).reshape(16, 32)
    s = torch.full((16, 1), 0.5)
    files = []
    for order in ((0, 1), (1, 0)) * 4:
        made = [None, None]
        for i in order:
            made[i] = (w, s)[i].clone()
        path = tmp_path / f"{len(files)}.pt"
        torch.save({"l.weight": made[0], "l.weight_scale": made[1]}, path, _use_new_zipfile_serialization=False)
        fuzz._canonical_legacy_file(str(path))
        files.append(path.read_bytes())
        with open_checkpoint(str(path)) as back:  # torch 2.13.0 cannot torch.load float8 from a legacy file
            assert torch.equal(back.tensor("l.weight").view(torch.uint8), w.view(torch.uint8))
            assert torch.equal(back.tensor("l.weight_scale"), s)
    assert len(set(files)) == 1


def test_fuzz_seeds_are_the_same_every_run(tmp_path):
    # torch's legacy format names and orders storages by memory address: without renaming them, the
    # legacy seed (and every case mutated from it) differed from run to run, so a case's "reproduce"
    # line did not reproduce it
    runs = [fuzz.make_seeds(str(tmp_path / f"run{i}")) for i in range(4)]
    for kind in ("safetensors", "torch-zip", "torch-legacy"):
        assert len({open(r[kind], "rb").read() for r in runs}) == 1, kind


_WRITE_CASES = """
import os, sys, time
from fp8check.checkpoints import fuzz
now = time.time
time.time = lambda: now() + {shift}  # a later clock
seeds = fuzz.make_seeds(os.path.join(sys.argv[1], "seeds"))
for case in range({cases}):
    fuzz.mutate(seeds, case, 7, sys.argv[1])
"""


def _case_files(directory):
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            found[os.path.relpath(path, directory)] = open(path, "rb").read() if stat.S_ISREG(mode) else mode
    return found


def test_fuzz_cases_are_the_same_in_another_process_at_another_time(tmp_path):
    # a case's "reproduce" line names its seed and number: the case it writes must not depend on the
    # clock (zip entries' dates) or on the interpreter's string hashing
    for i, hash_seed in enumerate(("1", "2")):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        code = _WRITE_CASES.format(shift=i * 40_000_000, cases=24)
        subprocess.run([sys.executable, "-c", code, str(tmp_path / f"run{i}")], env=env, check=True, timeout=300)
    first, second = _case_files(tmp_path / "run0"), _case_files(tmp_path / "run1")
    assert len(first) > 24 and first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []

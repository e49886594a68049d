"""Every subcommand checks its output paths before any work: one line, exit 2, nothing written."""

import os
import time

import pytest

from fp8check.cli import main

torch = pytest.importorskip("torch")


@pytest.fixture
def ckpt(tmp_path):
    from safetensors.torch import save_file

    p = tmp_path / "m.safetensors"
    save_file({"l.weight": torch.zeros(4, 4, dtype=torch.float8_e4m3fn), "l.weight_scale": torch.ones(())}, str(p))
    return str(p)


def _commands(tmp_path, ckpt, bad):
    out_ok = str(tmp_path / "ok.json")
    return {
        "audit --json": ["audit", ckpt, "-q", "--json", bad],
        "audit --html": ["audit", ckpt, "-q", "--html", bad],
        "convert DST": ["convert", ckpt, bad + ".safetensors", "--to", "e4m3fnuz", "-q"],
        "convert DST dir": ["convert", ckpt, bad, "--to", "e4m3fnuz", "-q"],
        "convert --json": ["convert", ckpt, str(tmp_path / "o.safetensors"), "--to", "e4m3fnuz", "-q", "--json", bad],
        "survey --json": ["survey", "--kernel", "torch-cpu", "--format", "e4m3fn", "--json", bad],
        "check --json": ["check", "torch-cpu", "--format", "e4m3fn", "--json", bad],
        "check --html": ["check", "torch-cpu", "--format", "e4m3fn", "--json", out_ok, "--html", bad],
        "fingerprint --json": ["fingerprint", "torch-cpu", "--format", "e4m3fn", "--json", bad],
        "sweep --json": ["sweep", "torch-cpu", "--format", "e4m3fn", "--limit", "65536", "--json", bad],
        "report -o": ["report", str(tmp_path / "missing.json"), "-o", bad],
        "golden generate --dir": ["golden", "generate", "--dir", bad],
    }


KINDS = ["no directory", "a directory", "under a file"]
NAMES = list(_commands(__import__("pathlib").Path("/t"), "/c", "/b"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", NAMES)
def test_unwritable_output_is_one_line_before_any_work(tmp_path, capsys, ckpt, name, kind):
    if kind == "no directory":
        if name == "golden generate --dir":
            pytest.skip("golden generate creates its directory")
        bad = str(tmp_path / "nonexistent" / "out")
    elif kind == "a directory":
        bad = str(tmp_path / "adir")
        os.mkdir(bad)
        if name in ("convert DST dir", "golden generate --dir"):
            pytest.skip("a directory is what this option takes")
        if name == "convert DST":
            os.mkdir(bad + ".safetensors")
    else:
        blocker = tmp_path / "afile"
        blocker.write_text("x")
        bad = str(blocker / "out")
    argv = _commands(tmp_path, ckpt, bad)[name]
    if name.startswith("convert DST") and kind == "a directory":
        argv = argv + ["--force"]
    before = set(os.listdir(tmp_path))
    started = time.perf_counter()
    rc = main(argv)
    seconds = time.perf_counter() - started
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith("fp8check: error: ") and "cannot write" in lines[0] \
        or "not a directory" in lines[0], err
    assert "Traceback" not in err + out
    assert seconds < 5, f"{name} worked {seconds:.1f} s before refusing its output path"
    assert set(os.listdir(tmp_path)) == before  # nothing written, no temporary left behind


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_respect_the_umask_and_keep_an_existing_mode(tmp_path, umask):
    """--json, --fp8check-json and the HTML reports are written like any file: 0666 less the umask."""
    from fp8check.outputs import write_json, write_text

    old = os.umask(umask)
    try:
        write_json(tmp_path / "r.json", {"a": 1})
        write_text(tmp_path / "r.html", "<p>x</p>", "--html")
        assert oct(os.stat(tmp_path / "r.json").st_mode & 0o777) == oct(0o666 & ~umask)
        assert oct(os.stat(tmp_path / "r.html").st_mode & 0o777) == oct(0o666 & ~umask)
        assert os.umask(umask) == umask  # the umask itself is left as it was
        os.chmod(tmp_path / "r.json", 0o640)  # a file replaced keeps its mode, as open(..., "w") keeps it
        write_json(tmp_path / "r.json", {"a": 2})
        assert oct(os.stat(tmp_path / "r.json").st_mode & 0o777) == oct(0o640)
    finally:
        os.umask(old)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_commands_outputs_get_the_mode_of_any_new_file(tmp_path, ckpt, umask):
    """Reports, results and converted checkpoints as the CLI writes them: 0666 (files) and 0777 (directories)
    less the umask, as the user's own files are (issue 21: they were 0600 and 0700 under umask 022)."""
    outputs = {"audit.json": "f", "audit.html": "f", "check.json": "f", "check.html": "f",
               "converted.safetensors": "f", "converted": "d"}
    old = os.umask(umask)
    try:
        assert main(["audit", ckpt, "-q", "--json", str(tmp_path / "audit.json"),
                     "--html", str(tmp_path / "audit.html")]) in (0, 1)
        assert main(["check", "torch-cpu", "--format", "e4m3fn", "--input-dtype", "bfloat16", "--max-examples", "10",
                     "--json", str(tmp_path / "check.json"), "--html", str(tmp_path / "check.html")]) in (0, 1)
        for dst in ("converted.safetensors", "converted"):
            assert main(["convert", ckpt, str(tmp_path / dst), "--to", "e4m3fnuz", "-q"]) == 0
    finally:
        os.umask(old)
    modes = {name: oct(os.stat(tmp_path / name).st_mode & 0o777) for name in outputs}
    assert modes == {name: oct((0o666 if kind == "f" else 0o777) & ~umask) for name, kind in outputs.items()}
    inside = [p for p in (tmp_path / "converted").rglob("*") if p.is_file()]
    assert inside and all(p.stat().st_mode & 0o777 == 0o666 & ~umask for p in inside)
    assert not list(tmp_path.glob(".*.part"))  # no temporary left behind

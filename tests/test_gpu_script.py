"""gpu/run_all.sh, the one call that runs every GPU check, runs the parts
it is asked for and refuses a part it does not know (no GPU needed)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "gpu" / "run_all.sh"


def _run(tmp_path: Path, *parts: str) -> subprocess.CompletedProcess:
    # The script calls python3: make it this interpreter.
    env = dict(os.environ, OUT=str(tmp_path / "out"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", str(SCRIPT), *parts], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)


def test_an_unknown_part_is_refused_in_one_line(tmp_path):
    proc = _run(tmp_path, "environment", "recipe")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: unknown part recipe (parts: environment suite tests-gpu recipes triton-faithful ops-table approx-ops zoo zoo-serving mma-tiles gemm training training-dist huge audit-bench)"]


@pytest.mark.skipif((ROOT / ".whl").is_dir(), reason="installing the carried wheels is not what this checks")
def test_only_the_named_parts_run(tmp_path):
    proc = _run(tmp_path, "environment")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "summary.txt").read_text().splitlines()[0].startswith("environment exit=0 ")
    assert len((tmp_path / "out" / "summary.txt").read_text().splitlines()) == 1
    assert "===== suite" not in proc.stdout and '"python"' in proc.stdout

"""fp8check's plugin as a guest in other projects' pytest (issue 27).

Each host project below is run twice, with the plugin and under
``-p no:fp8check``: the same exit code and the same summary line. In the
default lane through pytester, in process (the plugin of this source tree); in the slow
lane from the wheel installed into a fresh venv (the fixture of
test_kernel_repo.py), and in a venv with the oldest pytest and pluggy the
wheel's metadata allows, where ``pytest -m fnuz`` still checks a declared kernel.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

try:  # the wheel in a fresh venv (session-scoped, built once per session of this module)
    from test_kernel_repo import Env, env  # noqa: F401
except pytest.skip.Exception:  # no torch: the slow cases below skip with it
    env = None

PARAMETRIZED = '''
import pytest

@pytest.mark.parametrize("fp8_target", ["e4m3fn", "e5m2"])
def test_formats(fp8_target):
    assert fp8_target.startswith("e")
'''

FIXTURE_CONFTEST = '''
import pytest

@pytest.fixture
def fp8_decode_target():
    return "mine"
'''
FIXTURE_TEST = "def test_uses_it(fp8_decode_target):\n    assert fp8_decode_target == 'mine'\n"

# A host guarding its markers: each undeclared generic mark is a collection error, as without fp8check.
STRICT_INI = "[pytest]\naddopts = --strict-markers\n"
MARKED = "import pytest\n\n@pytest.mark.{mark}\ndef test_marked():\n    pass\n"

# A host whose pytest.ini is its configuration: an invalid pyproject.toml beside it is not pytest's file.
PLAIN = "def test_ok():\n    pass\n"

HOSTS = {
    "parametrizes-fp8_target": ({"test_host.py": PARAMETRIZED}, []),
    "fixture-fp8_decode_target": ({"conftest.py": FIXTURE_CONFTEST, "test_host.py": FIXTURE_TEST}, []),
    **{f"strict-markers-{m}": ({"pytest.ini": STRICT_INI, "test_host.py": MARKED.format(mark=m)}, [])
       for m in ("slow", "gpu", "exhaustive", "mx")},
    "c-pytest.ini-invalid-pyproject": ({"pytest.ini": "[pytest]\n", "pyproject.toml": "[tool.fp8check\n",
                                        "test_host.py": PLAIN}, ["-c", "pytest.ini"]),
    "pytest.ini-invalid-pyproject": ({"pytest.ini": "[pytest]\n", "pyproject.toml": "[tool.fp8check\n",
                                      "test_host.py": PLAIN}, []),
    "gpu-marked-host-test-with-fp8_target": (
        {"pytest.ini": "[pytest]\nmarkers =\n    gpu: mine\n",
         "test_host.py": "import pytest\n\n@pytest.mark.gpu\n" + PARAMETRIZED.split("\n", 2)[2]}, ["-rs"]),
}


ROOT = Path(__file__).resolve().parents[1]


def summary(output: str) -> str:
    """The run's last line, without its timing."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return re.sub(r" in [0-9.]+s( \([^)]*\))?", "", lines[-1]).strip("= ") if lines else ""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(text)


@pytest.mark.parametrize("host", [pytest.param(h, marks=pytest.mark.slow) if h.startswith("strict-markers-")
                                  and h != "strict-markers-slow" else h for h in HOSTS])
def test_a_host_runs_the_same_with_and_without_the_plugin(pytester, host):
    files, args = HOSTS[host]
    _write(pytester.path, files)
    base = ["-p", "no:cacheprovider", *args]
    with_plugin = pytester.runpytest(*base)
    without = pytester.runpytest(*base, "-p", "no:fp8check")
    out_with, out_without = with_plugin.stdout.str(), without.stdout.str()
    assert (with_plugin.ret, summary(out_with)) == (without.ret, summary(out_without)), out_with + out_without


def test_the_strict_hosts_really_fail_with_the_plugin(pytester, monkeypatch):
    """The comparison above means something: an undeclared mark is a collection error in these hosts, with the
    plugin loaded (a child pytest importing this source tree's fp8check)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    _write(pytester.path, HOSTS["strict-markers-slow"][0])
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == pytest.ExitCode.INTERRUPTED and "'slow' not found in `markers`" in run.stdout.str()


def test_a_kernel_repository_s_own_test_keeps_its_parameters(pytester):
    """In a repository declaring a kernel, the suite runs and a host test named like a target is untouched."""
    (pytester.path / "kern.py").write_text("import torch\n\ndef cast(x):\n"
                                           "    return x.float().clamp(-240, 240).to(torch.float8_e4m3fnuz)\n")
    (pytester.path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--strict-markers -p no:cacheprovider"\n\n'
        '[[tool.fp8check.cast]]\nkernel = "kern:cast"\nformat = "e4m3fnuz"\nprofile = "satfinite"\n'
        'input-dtypes = ["float16"]\n')
    pytester.makepyfile(test_host=PARAMETRIZED)
    ids = [line.strip() for line in pytester.runpytest("--collect-only", "-q").outlines if "::" in line]
    assert [i for i in ids if i.startswith("test_host.py")] == ["test_host.py::test_formats[e4m3fn]",
                                                                "test_host.py::test_formats[e5m2]"]
    assert any(i.startswith("fp8check-suite/") and "[cast-" in i for i in ids)


# -- from the wheel -------------------------------------------------------------------------------------------


def _run(python: Path, cwd: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=_clean_env(python))
    return proc.returncode, proc.stdout + proc.stderr


def _clean_env(python: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _floor(wheel: Path, package: str) -> str:
    """The lowest version of ``package`` the wheel's metadata allows (its ``>=`` bound)."""
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    line = next(x for x in meta.splitlines() if re.match(rf"Requires-Dist: {package}\b", x, re.I))
    return re.search(r">=\s*([0-9][^,;\s]*)", line).group(1)


@pytest.mark.slow  # a wheel build and a venv, 20 pytest runs
def test_hosts_run_the_same_with_and_without_the_installed_wheel(env, tmp_path):
    for host, (files, args) in HOSTS.items():
        root = tmp_path / host
        root.mkdir()
        _write(root, files)
        code_with, out_with = _run(env.python, root, *args)
        code_without, out_without = _run(env.python, root, *args, "-p", "no:fp8check")
        assert (code_with, summary(out_with)) == (code_without, summary(out_without)), (host, out_with, out_without)


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
                           "--quiet", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # a venv with pytest and pluggy from the package index
def test_the_oldest_pytest_and_pluggy_the_metadata_allows(env, tmp_path):
    import venv

    pytest_floor = _floor(env.wheel, "pytest")
    vdir = tmp_path / "old"
    venv.create(vdir, with_pip=False)
    python = vdir / "bin" / "python"
    got = _pip(python, "install", f"pytest=={pytest_floor}")
    if got.returncode != 0:
        pytest.skip(f"pytest=={pytest_floor} cannot be installed here: {got.stderr.strip().splitlines()[-1:]}")
    requires = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                               "print(next(r for r in m.requires('pytest') if r.startswith('pluggy')))"],
                              capture_output=True, text=True, check=True).stdout
    pluggy_floor = re.search(r">=\s*([0-9][^,;\s]*)", requires).group(1)
    got = _pip(python, "install", f"pluggy=={pluggy_floor}")
    assert got.returncode == 0, got.stderr
    assert _pip(python, "install", "--no-deps", "--no-index", str(env.wheel)).returncode == 0
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # After its own pytest and pluggy (first on sys.path): torch, numpy, hypothesis of this environment.
    from test_kernel_repo import _site_dirs

    (Path(purelib) / "zz_host_site_packages.pth").write_text("\n".join(_site_dirs()) + "\n")
    versions = subprocess.run([str(python), "-c", "import pytest, pluggy; print(pytest.__version__, "
                               "pluggy.__version__)"], capture_output=True, text=True, check=True).stdout.split()
    assert versions == [pytest_floor, pluggy_floor]

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kern.py").write_text("import torch\n\ndef cast(x):\n"
                                  "    return x.float().clamp(-240, 240).to(torch.float8_e4m3fnuz)\n\n"
                                  "def negzero(x):\n    c = cast(x).view(torch.uint8)\n"
                                  "    return torch.where(torch.signbit(x.float()) & (c == 0), "
                                  "torch.full_like(c, 0x80), c)\n")
    (repo / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--strict-markers"\n\n'
        '[[tool.fp8check.cast]]\nkernel = "kern:cast"\nformat = "e4m3fnuz"\nprofile = "satfinite"\n'
        'input-dtypes = ["float16"]\n\n'
        '[[tool.fp8check.cast]]\nname = "buggy"\nkernel = "kern:negzero"\nformat = "e4m3fnuz"\n'
        'profile = "satfinite"\ninput-dtypes = ["float16"]\n')
    code, out = _run(python, repo, "-m", "fnuz", "-k", "signed_zero", "-rf")
    assert code == 1 and re.search(r"1 failed, 1 passed", out), out[-4000:]
    assert "buggy" in out and "signed_zero" in out, out[-4000:]
    for host, (files, args) in HOSTS.items():  # and every host project as without the plugin
        root = tmp_path / host
        root.mkdir()
        _write(root, files)
        with_plugin, without = _run(python, root, *args), _run(python, root, *args, "-p", "no:fp8check")
        assert (with_plugin[0], summary(with_plugin[1])) == (without[0], summary(without[1])), (host, with_plugin)

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


_HEADER = ("platform ", "rootdir:", "plugins:", "cachedir:", "configfile:", "running:", "in:", "cwd:",
           "hypothesis profile", "using --randomly-seed", "Using --randomly-seed")


def whole_output(output: str) -> str:
    """The run's output without the header lines that name plugins, paths or versions, and without timings:
    what must not change when the plugin is loaded (node ids, outcomes, warnings, errors, summary)."""
    lines = [re.sub(r" in [0-9.]+s( \([^)]*\))?", "", line).rstrip() for line in output.splitlines()
             if not line.lower().startswith(_HEADER)]
    return "\n".join(line for line in lines if line.strip())


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(text)


@pytest.mark.parametrize("host", [pytest.param(h, marks=pytest.mark.slow) if h.startswith("strict-markers-")
                                  and h not in ("strict-markers-slow", "strict-markers-gpu") else h for h in HOSTS])
def test_a_host_runs_the_same_with_and_without_the_plugin(pytester, monkeypatch, host):
    files, args = HOSTS[host]
    _write(pytester.path, files)
    base = ["-p", "no:cacheprovider", "-rA", "-v", *args]
    if host.startswith("strict-markers-"):
        # pytest caches the registered marker names per process (pytest.mark): strictness only shows in a child
        # pytest (importing this source tree's fp8check).
        monkeypatch.setenv("PYTHONPATH", str(ROOT))
        run = pytester.runpytest_subprocess
    else:
        run = pytester.runpytest
    with_plugin, without = run(*base), run(*base, "-p", "no:fp8check")
    out_with, out_without = with_plugin.stdout.str(), without.stdout.str()
    assert (with_plugin.ret, summary(out_with)) == (without.ret, summary(out_without)), out_with + out_without
    assert whole_output(out_with) == whole_output(out_without)  # node ids, outcomes, warnings, reasons
    if host.startswith("strict-markers-"):  # the comparison means something: the mark is a collection error
        assert with_plugin.ret == pytest.ExitCode.INTERRUPTED and "not found in `markers`" in out_with, out_with


KERNEL = "import torch\n\ndef cast(x):\n    return x.float().clamp(-240, 240).to(torch.float8_e4m3fnuz)\n"
DECLARED = ('[[tool.fp8check.cast]]\nkernel = "kern:cast"\nformat = "e4m3fnuz"\nprofile = "satfinite"\n'
            'input-dtypes = ["float16"]\n')
STRICT_PYPROJECT = '[tool.pytest.ini_options]\naddopts = "--strict-markers -p no:cacheprovider"\n\n'
# Where a kernel repository keeps its pytest configuration: its [tool.fp8check] table is read in each.
KERNEL_REPOS = {
    "pyproject.toml": ({"pyproject.toml": STRICT_PYPROJECT + DECLARED}, []),
    # pytest >= 8.1 reads such a file as its configuration; before 8.1 fp8check reads it in the rootdir.
    "pyproject.toml-without-pytest-table": ({"pyproject.toml": DECLARED}, []),
    "pytest.ini-beside-pyproject.toml": ({"pytest.ini": "[pytest]\naddopts = --strict-markers -p no:cacheprovider\n",
                                          "pyproject.toml": DECLARED}, []),
    "c-pytest.ini-beside-pyproject.toml": ({"pytest.ini": "[pytest]\naddopts = --strict-markers\n",
                                            "pyproject.toml": DECLARED}, ["-c", "pytest.ini", "-p", "no:cacheprovider"]),
}


@pytest.mark.parametrize("layout", KERNEL_REPOS)
def test_a_kernel_repository_gets_the_suite_and_its_own_test_keeps_its_parameters(pytester, layout):
    """In a repository declaring a kernel, the suite runs and a host test named like a target is untouched."""
    pytest.importorskip("torch")
    files, args = KERNEL_REPOS[layout]
    _write(pytester.path, {"kern.py": KERNEL, **files})
    pytester.makepyfile(test_host=PARAMETRIZED)
    ids = [line.strip() for line in pytester.runpytest(*args, "--collect-only", "-q").outlines if "::" in line]
    assert [i for i in ids if i.startswith("test_host.py")] == ["test_host.py::test_formats[e4m3fn]",
                                                                "test_host.py::test_formats[e5m2]"]
    assert any(i.startswith("fp8check-suite/") and "[cast-" in i for i in ids), ids


def test_a_fp8check_table_beside_a_pytest_ini_is_fp8check_s_to_check(pytester):
    """A pyproject.toml pytest did not read is read when it parses: errors in its [tool.fp8check] table, which
    is addressed to fp8check, are one-line usage errors (an unparsable one is left alone: HOSTS above)."""
    _write(pytester.path, {"pytest.ini": "[pytest]\n", "test_host.py": PLAIN,
                           "pyproject.toml": '[[tool.fp8check.cast]]\nkernel = "kern:cast"\n'})
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "needs 'format'" in result.stderr.str() and "Traceback" not in result.stderr.str()


def test_a_strict_kernel_repository_keeps_its_typo_guard(pytester, monkeypatch):
    """A repository declaring kernels under --strict-markers: its own undeclared `slow` mark is a collection
    error, as without fp8check (the generic names are registered after the host's modules are collected);
    the suite's own `slow`/`exhaustive`/`gpu` marks are registered; `pytest --markers` lists them."""
    pytest.importorskip("torch")
    _write(pytester.path, {"kern.py": KERNEL, "pyproject.toml": STRICT_PYPROJECT + DECLARED})
    pytester.makepyfile(test_host=MARKED.format(mark="slow"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # a child pytest: marker names are cached per process
    with_plugin = pytester.runpytest_subprocess("--collect-only", "-q")
    without = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:fp8check")
    assert (with_plugin.ret, summary(with_plugin.stdout.str())) == (without.ret, summary(without.stdout.str()))
    assert with_plugin.ret == pytest.ExitCode.INTERRUPTED
    assert "'slow' not found in `markers`" in with_plugin.stdout.str()
    pytester.makepyfile(test_host=PLAIN)
    ids = [line.strip() for line in pytester.runpytest("--collect-only", "-q", "-m", "slow or exhaustive").outlines
           if "::" in line]
    assert ids and all(i.startswith("fp8check-suite/") for i in ids)  # the suite's own marks, registered
    listed = pytester.runpytest("--markers").stdout.str()
    assert all(f"@pytest.mark.{m}:" in listed for m in ("slow", "gpu", "exhaustive", "mx", "fnuz"))


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


def _lowest_allowed(requirements: list[str], package: str) -> str:
    """The lowest version of ``package`` that ``requirements`` (Requires-Dist lines) allow: its ``>=`` bound."""
    from packaging.requirements import Requirement

    req = next(Requirement(r) for r in requirements if Requirement(r).name.lower() == package)
    floors = [spec.version for spec in req.specifier if spec.operator in (">=", "==", "~=")]
    assert floors, f"{req}: no lower bound"
    return max(floors, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)))


def _wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]


def _check_hosts(python: Path, tmp_path: Path) -> None:
    """Every host project runs as without the plugin; every kernel repository layout gets the suite."""
    for host, (files, args) in HOSTS.items():
        root = tmp_path / host
        root.mkdir()
        _write(root, files)
        with_plugin = _run(python, root, "-rA", "-v", *args)
        without = _run(python, root, "-rA", "-v", *args, "-p", "no:fp8check")
        assert (with_plugin[0], summary(with_plugin[1])) == (without[0], summary(without[1])), \
            (host, with_plugin, without)
        assert whole_output(with_plugin[1]) == whole_output(without[1]), (host, with_plugin, without)
        if host.startswith("strict-markers-"):
            assert "not found in `markers`" in with_plugin[1], (host, with_plugin)
    for layout, (files, args) in KERNEL_REPOS.items():
        root = tmp_path / f"kernel-repo-{layout}"
        root.mkdir()
        _write(root, {"kern.py": KERNEL, "test_host.py": PARAMETRIZED, **files})
        code, out = _run(python, root, *args, "--collect-only", "-q")
        ids = [line.strip() for line in out.splitlines() if "::" in line]
        assert code == 0 and [i for i in ids if i.startswith("test_host.py")] == [
            "test_host.py::test_formats[e4m3fn]", "test_host.py::test_formats[e5m2]"], (layout, out)
        assert any(i.startswith("fp8check-suite/") and "[cast-" in i for i in ids), (layout, out)
    root = tmp_path / "strict-kernel-repo"
    root.mkdir()
    _write(root, {"kern.py": KERNEL, "pyproject.toml": STRICT_PYPROJECT + DECLARED,
                  "test_host.py": MARKED.format(mark="slow")})
    with_plugin, without = _run(python, root, "-rA"), _run(python, root, "-rA", "-p", "no:fp8check")
    assert (with_plugin[0], summary(with_plugin[1])) == (without[0], summary(without[1])), (with_plugin, without)
    assert whole_output(with_plugin[1]) == whole_output(without[1]), (with_plugin, without)
    assert "'slow' not found in `markers`" in with_plugin[1], with_plugin


@pytest.mark.slow  # a wheel build and a venv, about 30 pytest runs
def test_hosts_run_the_same_with_and_without_the_installed_wheel(env, tmp_path):
    _check_hosts(env.python, tmp_path)


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
                           "--quiet", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # a venv with pytest and pluggy from the package index
def test_the_oldest_pytest_and_pluggy_the_metadata_allows(env, tmp_path):
    import venv

    pytest_floor = _lowest_allowed(_wheel_requirements(env.wheel), "pytest")
    vdir = tmp_path / "old"
    venv.create(vdir, with_pip=False)
    python = vdir / "bin" / "python"
    got = _pip(python, "install", f"pytest=={pytest_floor}")
    if got.returncode != 0:
        pytest.skip(f"pytest=={pytest_floor} cannot be installed here: {got.stderr.strip().splitlines()[-1:]}")
    requires = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(*m.requires('pytest'), "
                               "sep='\\n')"], capture_output=True, text=True, check=True).stdout.splitlines()
    pluggy_floor = _lowest_allowed(requires, "pluggy")
    got = _pip(python, "install", f"pluggy=={pluggy_floor}")
    assert got.returncode == 0, got.stderr
    got = _pip(python, "install", "--no-deps", "--no-index", str(env.wheel))
    assert got.returncode == 0, got.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # After its own pytest and pluggy (first on sys.path): torch, numpy, hypothesis of this environment.
    from test_kernel_repo import _site_dirs

    (Path(purelib) / "zz_host_site_packages.pth").write_text("\n".join(_site_dirs()) + "\n")
    versions = subprocess.run([str(python), "-c", "import pytest, pluggy, fp8check; print(pytest.__version__, "
                               "pluggy.__version__, fp8check.__file__)"], capture_output=True, text=True,
                              check=True, cwd=tmp_path, env=_clean_env(python)).stdout.split()
    from packaging.version import Version

    assert [Version(v) for v in versions[:2]] == [Version(pytest_floor), Version(pluggy_floor)], versions
    assert Path(versions[2]).resolve().is_relative_to(vdir.resolve()), versions  # fp8check from the wheel
    plain = tmp_path / "plain"
    plain.mkdir()
    _write(plain, {"test_host.py": PLAIN})
    code, out = _run(python, plain, "-p", "no:fp8check")
    if code != 0:  # pytest itself does not run on this Python: not the plugin's doing
        pytest.skip(f"pytest {versions[0]} does not run on Python {sys.version.split()[0]}: {out[-300:]}")

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kern.py").write_text(KERNEL + "\n\ndef negzero(x):\n    c = cast(x).view(torch.uint8)\n"
                                  "    return torch.where(torch.signbit(x.float()) & (c == 0), "
                                  "torch.full_like(c, 0x80), c)\n")
    (repo / "pyproject.toml").write_text(
        STRICT_PYPROJECT + DECLARED + '\n[[tool.fp8check.cast]]\nname = "buggy"\nkernel = "kern:negzero"\n'
        'format = "e4m3fnuz"\nprofile = "satfinite"\ninput-dtypes = ["float16"]\n')
    code, out = _run(python, repo, "-m", "fnuz", "-k", "signed_zero", "-rf")
    assert code == 1 and re.search(r"1 failed, 1 passed", out), out[-4000:]
    assert "FAILED fp8check-suite/test_hazards.py::test_signed_zero_and_tiny_negatives[buggy-e4m3fnuz-float16]" \
        in out, out[-4000:]
    assert f"pytest-{versions[0]}, pluggy-{versions[1]}" in out, out[:2000]
    _check_hosts(python, tmp_path)  # and every host project as without the plugin


def test_the_kernel_option_s_help_says_what_it_does(pytester):
    """--fp8check-kernel adds a kernel to those the repository declares (the built-in adapters are off in a host)."""
    text = " ".join(pytester.runpytest("--help").stdout.str().split())
    assert "--fp8check-kernel=MODULE:FUNC a cast kernel to put through fp8check's property suite (with " \
           "--fp8check-format), besides the kernels the repository declares" in text
    assert "instead of the built-in adapters" not in text

"""The pytest plugin, tested through pytester: markers, selection, user kernels,
ini keys, the results JSON (also merged across pytest-xdist workers) and the
Hypothesis profiles."""

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

try:  # pytester's in-process runs unload modules first imported inside them, and
    import triton  # noqa: F401  Triton's native extension cannot be loaded twice
except ImportError:
    pass
# The plugin imports fp8check's modules lazily; import them here, in the outer
# session, so that in-process runs share one copy of each (an unloaded and
# re-imported fp8check.profiles would make two Profile classes).
import hypothesis  # noqa: E402,F401
import fp8check  # noqa: E402
import fp8check.casts.adapters.user  # noqa: E402,F401
import fp8check.results  # noqa: E402,F401
import fp8check.strategies  # noqa: E402,F401
import fp8check.suite  # noqa: E402,F401
import fp8check.suite.testing  # noqa: E402,F401
from fp8check import FP8CheckError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# importlib mode: the outer session may have imported the real properties/
# modules under the same basenames as these copies.
INI = "[pytest]\naddopts = --import-mode=importlib\n"

COUNTING_KERNEL = '''
import os
import torch

def cast(x):
    with open(os.environ["FP8CHECK_CALL_LOG"], "a") as log:
        log.write(f"{x.numel()} {x.dtype}\\n")
    return x.to(torch.float8_e4m3fnuz)
'''


@pytest.fixture
def suite(pytester):
    """A kernel author's repository: the mutants and an ini; the plugin brings the property suite."""
    (pytester.path / "fp8_mutants.py").write_text((ROOT / "tests" / "fp8_mutants.py").read_text())
    pytester.makeini(INI)
    return pytester


@pytest.fixture
def builtin_suite(suite):
    """fp8check's own properties/ on its built-in adapters, as its own pyproject.toml runs them."""
    (suite.path / "properties").mkdir()
    for path in (ROOT / "properties").glob("*.py"):
        (suite.path / "properties" / path.name).write_text(path.read_text())
    suite.makeini(INI + "fp8check_builtin_adapters = true\n")
    return suite


def _ids(result):
    return [line.strip() for line in result.outlines if "::" in line]


FP8_MARKERS = ("fnuz", "ocp", "e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "fp8check", "fp8check_hazards(*names)")
GENERIC_MARKERS = ("mx", "gpu", "exhaustive", "slow")


def test_markers_are_declared(suite):
    """The FP8 vocabulary in every session; the generic names only where fp8check's own tests run."""
    text = suite.runpytest("--markers").stdout.str()
    for name in FP8_MARKERS:
        assert f"@pytest.mark.{name}" in text, name
    for name in GENERIC_MARKERS:
        assert f"@pytest.mark.{name}:" not in text, name
    declared = suite.runpytest("--markers", "--fp8check-kernel", "fp8_mutants:correct_e4m3fnuz",
                               "--fp8check-format", "e4m3fnuz").stdout.str()
    for name in FP8_MARKERS + GENERIC_MARKERS:
        assert f"@pytest.mark.{name}" in declared, name


def test_fnuz_marker_selects_exactly_the_fnuz_targets_of_every_builtin_adapter(builtin_suite):
    result = builtin_suite.runpytest("properties", "-m", "fnuz", "--collect-only", "-q", "-p", "no:cacheprovider")
    ids = _ids(result)
    assert ids and all("fnuz" in i for i in ids)
    adapters = {i.split("[")[1].split("-e")[0] for i in ids if "[" in i}
    assert {"torch-cpu", "ml_dtypes"} <= adapters
    assert any("e4m3fnuz" in i for i in ids) and any("e5m2fnuz" in i for i in ids)
    everything = _ids(builtin_suite.runpytest("properties", "--collect-only", "-q", "-p", "no:cacheprovider"))
    assert len(everything) > len(ids) and any("-e4m3fn-" in i for i in everything)


def test_a_command_line_kernel_gets_the_shipped_suite_and_no_builtin_adapter(suite):
    result = suite.runpytest("--fp8check-kernel", "fp8_mutants:correct_e4m3fnuz", "--fp8check-format", "e4m3fnuz",
                             "--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [i for i in _ids(result) if "[NOTSET]" not in i]  # empty parameter sets (no known bugs)
    assert ids and all(i.startswith("fp8check-suite/") for i in ids)
    assert all("[fp8_mutants:correct_e4m3fnuz-" in i for i in ids)
    assert {i.rsplit("-", 1)[1].rstrip("]") for i in ids} == {"float32", "float16", "bfloat16"}


def test_ini_keys_match_the_options(suite):
    suite.makeini(INI + "fp8check_kernel = fp8_mutants:flush_subnormals_e4m3fnuz\n"
                  "fp8check_format = e4m3fnuz\nfp8check_input_dtype = bfloat16\nfp8check_json = ini.json\n")
    result = suite.runpytest("-p", "no:cacheprovider", "-k", "test_subnormals")
    result.assert_outcomes(failed=1)
    checks = json.loads((suite.path / "ini.json").read_text())["checks"]
    assert [(c["kernel"], c["input_dtype"], list(c["categories"])) for c in checks] == [
        ("fp8_mutants:flush_subnormals_e4m3fnuz", "bfloat16", ["subnormal"])]


KERNELS = """
import torch

def e4m3fnuz(x):
    return x.float().clamp(-240, 240).to(torch.float8_e4m3fnuz)

def e5m2fnuz(x):
    return x.float().clamp(-57344, 57344).to(torch.float8_e5m2fnuz)

def e4m3fn(x):
    return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)

def e5m2(x):
    return x.float().to(torch.float8_e5m2)

def negzero_e4m3fnuz(x):
    c = e4m3fnuz(x).view(torch.uint8)
    return torch.where(torch.signbit(x.float()) & (c == 0), torch.full_like(c, 0x80), c)
"""

PYPROJECT = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[[tool.fp8check.cast]]
kernel = "kern:e4m3fnuz"
format = "e4m3fnuz"
profile = "satfinite"
input-dtypes = ["float16"]

[[tool.fp8check.cast]]
kernel = "kern:e5m2fnuz"
format = "e5m2fnuz"
profile = "satfinite"
input-dtypes = ["float16"]

[[tool.fp8check.cast]]
kernel = "kern:e4m3fn"
format = "e4m3fn"
profile = "satfinite"
input-dtypes = ["float16"]

[[tool.fp8check.cast]]
kernel = "kern:e5m2"
format = "e5m2"
profile = "torch-2.12"
input-dtypes = ["float16"]

[[tool.fp8check.cast]]
name = "buggy"
kernel = "kern:negzero_e4m3fnuz"
format = "e4m3fnuz"
profile = "satfinite"
input-dtypes = ["float16"]
"""


@pytest.fixture
def repo(pytester):
    """A repository declaring five cast kernels in its pyproject.toml (one with a planted bug)."""
    (pytester.path / "kern.py").write_text(KERNELS)
    (pytester.path / "pyproject.toml").write_text(PYPROJECT)
    return pytester


def test_fnuz_selects_exactly_the_declared_fnuz_kernels(repo):
    ids = _ids(repo.runpytest("-m", "fnuz", "--collect-only", "-q"))
    kernels = {i.split("[")[1].split("-")[0] for i in ids if "[" in i and "[NOTSET]" not in i}
    assert kernels == {"e4m3fnuz", "e5m2fnuz", "buggy"}
    ocp = _ids(repo.runpytest("-m", "ocp", "--collect-only", "-q"))
    assert {i.split("[")[1].split("-")[0] for i in ocp if "[" in i and "[NOTSET]" not in i} == {"e4m3fn", "e5m2"}


def test_a_declared_bug_fails_and_the_correct_kernels_pass(repo):
    result = repo.runpytest("-m", "fnuz", "-k", "signed_zero or real_callers", "--fp8check-json", "out.json")
    failed = {r.nodeid for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call" and r.failed}
    passed = {r.nodeid for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call" and r.passed}
    assert failed and all("[buggy-" in n for n in failed)
    assert any("[e4m3fnuz-" in n for n in passed) and any("[e5m2fnuz-" in n for n in passed)
    text = result.stdout.str()
    assert "signed_zero" in text and "reproduce: fp8check check kern:negzero_e4m3fnuz --format e4m3fnuz" in text
    checks = json.loads((repo.path / "out.json").read_text())["checks"]
    assert {c["kernel"] for c in checks if not c["passed"]} == {"buggy"}


def test_kinds_nothing_was_declared_for_are_deselected_not_skipped_or_errors(repo):
    # a repository declaring casts only: the suite's quantizer, GEMM, ... properties have no kernel; pytest's
    # empty parameter set would be a skip per test, or a collection error under fail_at_collect
    (repo.path / "pytest.ini").write_text("[pytest]\nempty_parameter_set_mark = fail_at_collect\n")
    result = repo.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()[-2000:]
    ids = _ids(result)
    assert ids and not any("[NOTSET]" in i or "[none]" in i for i in ids)
    assert "deselected" in result.stdout.str()


def test_a_repository_declaring_nothing_gets_no_fp8check_tests(pytester):
    pytester.makepyfile(test_mine="def test_own():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert _ids(result) == ["test_mine.py::test_own"]


def test_kernels_declared_in_a_conftest_hook(pytester):
    (pytester.path / "kern.py").write_text(KERNELS)
    pytester.makeconftest("import fp8check\n\ndef pytest_fp8check_kernels():\n"
                          "    import kern\n"
                          "    return [fp8check.cast_kernel(kern.e4m3fnuz, format='e4m3fnuz', profile='satfinite',"
                          " input_dtypes=('bfloat16',))]\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "overflow_policy")
    result.assert_outcomes(passed=1)


def test_kernel_tests_makes_a_test_class_of_the_suite_for_the_kernels_given(pytester):
    """fp8check.kernel_tests: no configuration, no hook; the class's tests check its own kernels only."""
    (pytester.path / "kern.py").write_text(KERNELS)
    pytester.makepyfile(test_mine=(
        "import fp8check, kern\n"
        "TestGood = fp8check.kernel_tests(fp8check.cast_kernel(kern.e4m3fnuz, format='e4m3fnuz', "
        "profile='satfinite', input_dtypes=('float16',)))\n"
        "TestBuggy = fp8check.kernel_tests(fp8check.cast_kernel(kern.negzero_e4m3fnuz, format='e4m3fnuz', "
        "profile='satfinite', input_dtypes=('float16',)))\n"))
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "fnuz", "-k", "signed_zero or real_callers")
    reports = [r for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    assert {r.nodeid for r in reports if r.failed} == {
        "test_mine.py::TestBuggy::test_cast_conforms_as_real_callers_call_it[negzero_e4m3fnuz-float16]",
        "test_mine.py::TestBuggy::test_signed_zero_and_tiny_negatives[negzero_e4m3fnuz-e4m3fnuz-float16]"}
    assert {r.nodeid.split("::")[1] for r in reports if r.passed} == {"TestGood"}
    assert len([r for r in reports if r.passed]) == 2
    with pytest.raises(FP8CheckError, match="needs at least one declaration"):
        fp8check.kernel_tests()
    with pytest.raises(FP8CheckError, match="takes declarations"):
        fp8check.kernel_tests(print)


@pytest.mark.parametrize("pyproject, message", [
    ('[[tool.fp8check.cast]]\nkernel = "kern:e4m3fn"\n', "needs 'format'"),
    ('[[tool.fp8check.cast]]\nkernel = "kern:e4m3fn"\nformat = "e4m3fn"\nprofil = "x"\n', "unknown key(s) profil"),
    ('[[tool.fp8check.quantizer]]\nkernel = "kern:e4m3fn"\n', "needs 'recipe'"),
    ('[[tool.fp8check.cast]]\nkernel = "kern:e4m3fn"\nformat = "e9m9"\n', "unknown format"),
    ('[tool.fp8check\n', "Expected ']'"),  # pytest itself reads pyproject.toml first
    ('[tool.fp8check]\ncast = true\n', "tool.fp8check.cast must be tables"),
    ('[tool]\nfp8check = 3\n', "[tool.fp8check] must be a table"),
    # a GEMM on the CPU is judged under a Triton target's tensor cores: without one, a usage error at configure time
    ('[[tool.fp8check.gemm]]\nkernel = "kern:e4m3fn"\nrecipe = "tensorwise"\nformat = "e4m3fn"\n',
     "needs 'triton-target'"),
    ('[[tool.fp8check.gemm]]\nkernel = "kern:e4m3fn"\nformat = "e4m3fn"\ntriton-target = "sm90"\n', "needs 'recipe'"),
    ('[[tool.fp8check.dequant]]\nkernel = "kern:e4m3fn"\nformat = "e4m3fn"\nblock = [0, 128]\n', "of positive sizes"),
    # a key the kind's check never reads is an error, not silently ignored
    ('[[tool.fp8check.dequant]]\nkernel = "kern:e4m3fn"\nformat = "e4m3fn"\nrecipe = "tensorwise"\n',
     "'recipe' is not read by a dequant kernel"),
    ('[[tool.fp8check.decode]]\nkernel = "kern:e4m3fn"\nformat = "e4m3fn"\nulps = 1\n',
     "'ulps' is not read by a decode kernel"),
    ('[[tool.fp8check.gemm]]\nkernel = "kern:e4m3fn"\nrecipe = "tensorwise"\nformat = "e4m3fn"\n'
     'triton-target = "sm90"\nreference = "kern:e4m3fn"\n', "'reference' is not read by a gemm kernel"),
    # a misspelt table is reported like a misspelt key, not ignored
    ('[[tool.fp8check.gemmm]]\nkernel = "kern:e4m3fn"\n', "unknown table(s) gemmm"),
    ('[tool.fp8check.recipes.mine]\nbase = "tensorwise"\n', "unknown table(s) recipes"),
])
def test_bad_declarations_are_one_line_usage_errors(pytester, pyproject, message):
    (pytester.path / "kern.py").write_text(KERNELS)
    (pytester.path / "pyproject.toml").write_text(pyproject)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str() and "Traceback" not in result.stderr.str()


@pytest.mark.parametrize("kind, keys", [
    ("cast", 'format = "e4m3fn"'),
    ("gemm", 'recipe = "tensorwise"\nformat = "e4m3fn"\ntriton-target = "sm90"'),
])
def test_an_unimportable_declared_kernel_is_one_usage_error_per_declaration(pytester, kind, keys):
    # before: 9 collection errors of ~248 lines of pluggy tracebacks, each repeating the UsageError (casts), or a
    # failing test with a traceback (the other kinds)
    (pytester.path / "kern.py").write_text(KERNELS)
    (pytester.path / "broken.py").write_text("import no_such_dependency_of_broken\n")
    (pytester.path / "pyproject.toml").write_text(
        f'[[tool.fp8check.{kind}]]\nkernel = "broken:f"\n{keys}\n\n'
        f'[[tool.fp8check.{kind}]]\nkernel = "nowhere:g"\n{keys}\n\n'
        '[[tool.fp8check.cast]]\nkernel = "kern:e4m3fn"\nformat = "e4m3fn"\n')
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert out.count("cannot import kernel 'broken:f': ModuleNotFoundError: No module named "
                     "'no_such_dependency_of_broken'") == 1, out
    assert out.count("cannot import kernel 'nowhere:g'") == 1, out
    assert "Traceback" not in out and "UsageError" not in out and "site-packages" not in out, out
    assert len([line for line in out.splitlines() if line.strip()]) <= 12, out  # pytest's header, one line each


TRITON_KERNELS = """
import triton  # the only module missing here

def cast(x):
    raise AssertionError("never called without Triton")

gemm = dequant = cast
"""


def test_triton_kernels_skip_without_triton_and_other_import_errors_still_fail(pytester, monkeypatch):
    # docs/kernel-repo.md: "without Triton, these kernels' tests are skipped"; before, gemm and dequant kernels'
    # tests failed with KernelLoadError: ... No module named 'triton'. A subprocess: Triton is hidden there only.
    (pytester.path / "tk.py").write_text(TRITON_KERNELS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makeconftest("import sys\nsys.modules['triton'] = None  # Triton not installed\n")
    declared = ('[[tool.fp8check.gemm]]\nkernel = "tk:gemm"\nrecipe = "tensorwise"\nformat = "e4m3fn"\n'
                'triton-target = "sm90"\n\n'
                '[[tool.fp8check.dequant]]\nkernel = "tk:dequant"\nformat = "e4m3fn"\ntriton-target = "sm90"\n\n'
                '[[tool.fp8check.cast]]\nkernel = "tk:cast"\nformat = "e4m3fnuz"\ntriton-target = "gfx942"\n'
                'input-dtypes = ["float32"]\n')
    (pytester.path / "pyproject.toml").write_text(declared)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "-p", "no:xdist")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped") and not outcomes.get("failed") and not outcomes.get("errors"), out
    assert out.count("without Triton, these kernels' tests are skipped") == 3, out
    # a kernel module whose own import fails is no Triton question: it still fails, in one clear line
    (pytester.path / "tk2.py").write_text("import no_such_dependency_of_tk2\n")  # (a lane without Triton too)
    (pytester.path / "pyproject.toml").write_text(declared.replace('"tk:dequant"', '"tk2:dequant"'))
    pytester.makeconftest("")  # tk2's own import error is what fails, Triton or not
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "cannot import kernel 'tk2:dequant': ModuleNotFoundError: No module named 'no_such_dependency_of_tk2'" \
        in out and "Traceback" not in out, out


def test_a_declared_kernels_failure_shows_its_report_not_fp8checks_source(pytester):
    (pytester.path / "kern.py").write_text(KERNELS)
    (pytester.path / "pyproject.toml").write_text(
        '[[tool.fp8check.cast]]\nkernel = "kern:negzero_e4m3fnuz"\nformat = "e4m3fnuz"\nprofile = "satfinite"\n'
        'input-dtypes = ["float16"]\n')
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "real_callers")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "signed_zero" in out and "pytest -k 'negzero_e4m3fnuz-float16'" in out, out
    # the message only: no source of fp8check's suite (suite/__init__.py's check) above it
    assert "raise AssertionError" not in out and "def check(" not in out and "suite/__init__.py" not in out, out


@pytest.mark.parametrize("args, message", [
    (["--fp8check-kernel", "fp8_mutants:correct_e4m3fnuz"], "needs --fp8check-format"),
    (["--fp8check-kernel", "no_such_mod:f", "--fp8check-format", "e4m3fnuz"], "cannot import kernel"),
    (["--fp8check-kernel", "fp8_mutants:raises", "--fp8check-format", "e4m3fnuz"], "raised RuntimeError"),
    (["--fp8check-kernel", "fp8_mutants:correct_e4m3fnuz", "--fp8check-format", "e9m9"], "unknown format"),
])
def test_bad_user_kernel_options_are_one_line_usage_errors(suite, args, message):
    result = suite.runpytest(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert message in err and "Traceback" not in err


def test_json_lists_every_target_with_exact_counts(suite):
    result = suite.runpytest("--fp8check-kernel", "fp8_mutants:round_toward_zero_e4m3fnuz",
                             "--fp8check-format", "e4m3fnuz", "--fp8check-json", "out.json", "-p", "no:cacheprovider",
                             "-k", "not float64 and not known_upstream and not real_callers")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((suite.path / "out.json").read_text())
    assert doc["fp8check_results"] == 1 and "environment" in doc
    by_dtype = {c["input_dtype"]: c for c in doc["checks"]}
    assert set(by_dtype) == {"float32", "float16", "bfloat16"}
    for c in by_dtype.values():
        assert c["passed"] is False and c["categories"]["rounding"] > 0
        assert len(c["divergences"]) <= 1000 and c["extra"]["tests"] >= 9


def _merged(path):
    doc = json.loads(Path(path).read_text())
    return {(c["kernel"], c["format"], c["input_dtype"]): (c["categories"], c["checked"], len(c["divergences"]),
                                                           [d["input_hex"] for d in c["divergences"]])
            for c in doc["checks"]}


@pytest.mark.slow
def test_json_under_xdist_merges_every_worker_and_loses_nothing(suite):
    args = ["--fp8check-kernel", "fp8_mutants:round_toward_zero_e4m3fnuz", "--fp8check-format",
            "e4m3fnuz", "--fp8check-input-dtype", "float16,bfloat16", "--fp8check-max-listed", "0",
            "-p", "no:cacheprovider", "-k", "not float64 and not known_upstream and not hypothesis and not real_callers"]
    serial = suite.runpytest_subprocess(*args, "--fp8check-json", "serial.json", "-p", "no:xdist")
    parallel = suite.runpytest_subprocess(*args, "--fp8check-json", "parallel.json", "-n", "2")
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED
    assert "2 workers" in parallel.stdout.str() or "gw1" in parallel.stdout.str()
    a, b = _merged(suite.path / "serial.json"), _merged(suite.path / "parallel.json")
    assert a == b and len(a) == 2
    # Nothing lost: with --fp8check-max-listed 0 every divergence is listed.
    for cats, _, listed, _ in a.values():
        assert listed == sum(cats.values()) > 0


@pytest.mark.slow  # a pytest run in a child process
def test_ci_profile_is_the_default_and_derandomized(suite, monkeypatch):
    (suite.path / "counting.py").write_text(COUNTING_KERNEL)
    args = ["-k", "hypothesis", "--fp8check-kernel", "counting:cast",
            "--fp8check-format", "e4m3fnuz", "--fp8check-input-dtype", "float16", "-p", "no:cacheprovider"]

    def calls(run):
        log = suite.path / f"calls{len(list(suite.path.glob('calls*')))}.log"
        monkeypatch.setenv("FP8CHECK_CALL_LOG", str(log))
        run(*args).assert_outcomes(passed=1)
        return log.read_text().splitlines()

    first, second = calls(suite.runpytest_subprocess), calls(suite.runpytest)
    assert first == second  # ci: derandomized, no database: the same inputs in every run
    assert 20 <= len(first) <= 60 + 1  # max_examples=60, plus the load-time probe


@pytest.mark.slow  # two pytest runs of the thorough profile
@pytest.mark.parametrize("ci_env", [None, "true"], ids=["no-CI-variable", "CI=true"])
def test_thorough_settings_are_selected_with_the_fp8check_option(suite, monkeypatch, ci_env):
    # A subprocess, under this environment: Hypothesis loads its own
    # derandomized profile at import when $CI is set, and settings that
    # inherited from it would not be the ones we documented.
    if ci_env is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci_env)
    suite.makepyfile(test_profile="def test_settings(fp8_settings):\n    print('MAX', fp8_settings.max_examples, fp8_settings.derandomize)\n")
    default = suite.runpytest_subprocess("-s", "-p", "no:cacheprovider", "test_profile.py")
    thorough = suite.runpytest_subprocess("-s", "-p", "no:cacheprovider", "test_profile.py",
                                          "--fp8check-hypothesis-profile", "fp8check-thorough")
    assert "MAX 60 True" in default.stdout.str()
    assert "MAX 2000 False" in thorough.stdout.str()
    bad = suite.runpytest_subprocess("-p", "no:cacheprovider", "test_profile.py",
                                     "--fp8check-hypothesis-profile", "no-such-profile")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR or "is not registered" in bad.stdout.str() + bad.stderr.str()


SETTINGS_PROBE = """
from hypothesis import settings

def test_print_the_settings_in_force():
    s = settings()
    print("IN FORCE", settings._current_profile, s.max_examples, s.derandomize, s.database is None, s.deadline)
"""


@pytest.mark.parametrize("ci_env", [pytest.param(None, marks=pytest.mark.slow), "true"], ids=["no-CI-variable", "CI=true"])
def test_an_unrelated_project_keeps_hypothesis_s_own_profile(pytester, monkeypatch, ci_env):
    # With fp8check installed (its plugin loads through the pytest11 entry
    # point) and without it, another project's Hypothesis tests run under
    # the same settings: under CI=true, Hypothesis's own "ci" profile.
    if ci_env is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci_env)
    pytester.makepyfile(test_other=SETTINGS_PROBE)

    def in_force(*args):
        out = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", *args).stdout.str()
        return next(line[line.index("IN FORCE"):] for line in out.splitlines() if "IN FORCE" in line)

    with_plugin, without = in_force(), in_force("-p", "no:fp8check")
    assert with_plugin == without
    if ci_env:
        assert with_plugin.startswith("IN FORCE ci ")


def test_the_plugin_module_imports_pytest_alone():
    import subprocess
    import sys

    code = ("import sys, fp8check.plugin; "
            "print(sorted(m for m in ('numpy', 'hypothesis', 'torch', 'ml_dtypes', 'rich', 'triton') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_gpu_marker_of_another_project_is_left_alone(pytester):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    pytester.makepyfile("import pytest\n@pytest.mark.gpu\ndef test_needs_gpu():\n    assert True\n")
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_gpu_targets_skip_cleanly_without_cuda(suite):  # a CUDA kernel on a machine without CUDA: usage error
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    result = suite.runpytest("--fp8check-kernel", "fp8_mutants:correct_e4m3fnuz",
                             "--fp8check-format", "e4m3fnuz", "--fp8check-device", "cuda", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "no CUDA device" in result.stderr.str()

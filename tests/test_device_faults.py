"""Faults of the kernel under test on a CUDA device (issue 21, item 6; DESIGN.md rule 15): an illegal address,
a device-side assert, a misaligned address or a launch failure ends the check with a failed result whose finding
is the fault, attributed to the call that made it, never a lost check or report.

No CUDA fault can be made on a CPU: the kernels here raise what torch raises for one (``torch.AcceleratorError``
with CUDA's own message; Triton's launcher's ``RuntimeError``), and the attribution is tested by a kernel whose
fault surfaces only at the next device operation, as a real asynchronous one does. The tests marked ``gpu``
make real ones with an out-of-bounds Triton kernel (``bash gpu/run_all.sh tests-gpu`` on a CUDA machine).
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest_plugins = ["pytester"]
AcceleratorError = getattr(torch, "AcceleratorError", RuntimeError)  # torch >= 2.8 raises it for CUDA errors

import fp8check.suite  # noqa: E402,F401  (pytester's in-process runs share the outer session's modules)
import jinja2  # noqa: E402,F401  (imported here: pytester unloads what its in-process run imports, and the report needs it)
from fp8check import device_faults  # noqa: E402
from fp8check.casts import engine, harness, huge  # noqa: E402
from fp8check.casts.adapters.user import wrap_callable  # noqa: E402
from fp8check.cli import main  # noqa: E402
from fp8check.declarations import cast_kernel, quantizer_kernel, run_declaration, static_quantizer  # noqa: E402
from fp8check.errors import KernelCallError  # noqa: E402
from fp8check.results import CheckResult  # noqa: E402
from fp8check.terminal.divergences import result_text  # noqa: E402

# What torch 2.11 (cu130) raised on the H200 for gpu/huge.py's int32-offset kernel past 2^31 elements.
ILLEGAL = ("CUDA error: an illegal memory access was encountered\nSearch for `cudaErrorIllegalAddress' in "
           "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
           "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
           "might be incorrect.")

FAULTY = f'''
import torch

AcceleratorError = getattr(torch, "AcceleratorError", RuntimeError)

from fp8check import quantizers
from fp8check.quantizers.adapters import torch_quantizer

ILLEGAL = {ILLEGAL!r}
_rowwise = torch_quantizer(quantizers.get("rowwise"))


def _cast(x):
    return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)


def faults(x):
    if x.numel() == 4099:  # one of the calls the harness makes (a prime size)
        raise AcceleratorError(ILLEGAL)
    return _cast(x)


def faults_big(x):  # on the exhaustive sweep's one call of every bfloat16 input
    if x.numel() >= 65536:
        raise AcceleratorError(ILLEGAL)
    return _cast(x)


def refuses(x):  # a CUDA error the device survives: a refused launch, not a fault
    if x.numel() == 4099:
        raise AcceleratorError("CUDA error: invalid configuration argument")
    return _cast(x)


def fine(x):
    return _cast(x)


def quant(x):
    if x.shape[-1] == 1001:  # one of the odd shapes of the quantizer harness
        raise RuntimeError("Triton Error [CUDA]: misaligned address")
    return _rowwise(x)


def static(x, scale):
    raise AcceleratorError("CUDA error: device-side assert triggered")
'''


@pytest.fixture(autouse=True)
def _fresh_context():
    """The faults planted here mark this process's (non-existent) CUDA context lost: forget them after each test."""
    device_faults.forget()
    yield
    device_faults.forget()


@pytest.fixture
def faulty(tmp_path, monkeypatch):
    (tmp_path / "faulty.py").write_text(FAULTY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _wrapped(exc_type, message, cause=None):
    try:
        try:
            raise cause if cause is not None else exc_type(message)
        except Exception as inner:
            if cause is None:
                raise
            raise exc_type(message) from inner
    except Exception as exc:
        return exc


@pytest.mark.parametrize("exc, category, name", [
    (AcceleratorError(ILLEGAL), "out_of_bounds", "cudaErrorIllegalAddress"),
    (RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"), "out_of_bounds",
     "cudaErrorIllegalAddress"),
    (AcceleratorError("CUDA error: device-side assert triggered"), "device_assert", "cudaErrorAssert"),
    (RuntimeError("Triton Error [CUDA]: misaligned address"), "crashed", "cudaErrorMisalignedAddress"),
    (AcceleratorError("CUDA error: unspecified launch failure"), "crashed", "cudaErrorLaunchFailure"),
    # fp8check's own one-line kernel error, raised from the CUDA error: the chain is read
    (_wrapped(KernelCallError, "k raised AcceleratorError", AcceleratorError(ILLEGAL)), "out_of_bounds",
     "cudaErrorIllegalAddress"),
    # CUDA errors a device survives, and errors that are no CUDA error: refusals
    (AcceleratorError("CUDA error: invalid configuration argument"), None, ""),
    (RuntimeError("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmulAlgoGetHeuristic`"), None, ""),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB"), None, ""),
    (ValueError("an illegal memory access, said nobody's CUDA"), None, ""),
], ids=["illegal-address", "triton-illegal-address", "device-assert", "misaligned", "launch-failure", "wrapped",
        "invalid-configuration", "cublas-status", "out-of-memory", "no-cuda-error"])
def test_a_fault_is_told_from_a_refusal(exc, category, name):
    fault = device_faults.fault_of(exc, device="cuda", call="bfloat16 input of shape (1,), call 9", kernel="k")
    if category is None:
        assert fault is None and device_faults.lost() is None
        return
    assert (fault.category, fault.name) == (category, name)
    assert "\n" not in fault.error and fault.error.startswith(("CUDA error", "Triton Error"))
    assert device_faults.lost() == fault  # this process's CUDA context is lost from now on
    with pytest.raises(device_faults.DeviceLostError, match=r"lost to a fault of k in its call on bfloat16 input"):
        device_faults.require_usable("cuda", "another kernel")
    device_faults.require_usable("cpu", "a CPU kernel")  # the CPU is unaffected


def test_a_fault_ends_the_cast_check_at_its_call_with_the_finding_json_and_report(faulty, capsys):
    decl = cast_kernel("faulty:faults", format="e4m3fn", profile="satfinite", input_dtypes=("bfloat16",))
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert not r.passed and r.categories == {"out_of_bounds": 1}
    assert r.checked == 1 << 16  # the coverage calls before the fault were compared (and conform)
    d = r.divergences[0]
    assert d.category == "out_of_bounds" and d.condition.startswith("bfloat16 input of shape (4099,)")
    assert "faulted on the device" in d.detail and "cudaErrorIllegalAddress" in d.detail
    fault = r.extra["device_fault"]
    assert fault["kernel"] == "faults" and fault["call"] == d.condition
    assert r.extra["calls"] == int(d.condition.rsplit("call ", 1)[1])  # no call after the fault
    assert CheckResult.from_dict(json.loads(json.dumps(r.to_dict()))).extra["device_fault"] == fault
    text = result_text(r)
    assert "DEVICE FAULT (out_of_bounds): CUDA error: an illegal memory access was encountered" in text
    assert "in the call on bfloat16 input of shape (4099,)" in text
    # The process's CUDA context is lost: a check on CUDA is refused with the reason, one on the CPU goes on.
    with pytest.raises(device_faults.DeviceLostError, match="lost to a fault of faults"):
        run_declaration(cast_kernel("faulty:fine", format="e4m3fn", device="cuda"), input_dtype="bfloat16")
    assert run_declaration(cast_kernel("faulty:fine", format="e4m3fn", profile="satfinite",
                                       input_dtypes=("bfloat16",)), max_examples=0, thorough=False).passed
    device_faults.forget()
    # The CLI: the result, its exit code, its JSON and HTML report.
    code = main(["check", "faulty:faults", "--format", "e4m3fn", "--profile", "satfinite", "--input-dtype",
                 "bfloat16", "--max-examples", "0", "--json", "r.json", "--html", "r.html"])
    assert code == 1 and "DEVICE FAULT (out_of_bounds)" in capsys.readouterr().out
    assert json.loads((faulty / "r.json").read_text())["categories"] == {"out_of_bounds": 1}
    assert "faulted on the device in its call on bfloat16 input of shape (4099,)" in (faulty / "r.html").read_text()


def test_a_cuda_error_the_device_survives_stays_a_refusal(faulty):
    decl = cast_kernel("faulty:refuses", format="e4m3fn", profile="satfinite", input_dtypes=("bfloat16",))
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert r.passed and "device_fault" not in r.extra and device_faults.lost() is None
    assert any("invalid configuration argument" in x.error and "(4099,)" in x.condition for x in r.refusals)


def test_the_fault_is_the_call_that_made_it_not_the_next_operation(monkeypatch):
    """A CUDA fault is asynchronous: the kernel's launch returns, and the next device operation raises. The check
    synchronises inside each guarded call, so the call that faulted is named. Planted: without that
    synchronisation the next call (an innocent one) is blamed."""
    pending = []

    def late(x):
        if pending:  # the next CUDA operation reports the fault of an earlier launch
            raise AcceleratorError(ILLEGAL)
        if x.numel() == 4099:
            pending.append(True)  # this launch faults on the device; the call returns
        return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)

    def synchronise(device):  # what torch.cuda.synchronize does after such a launch
        if pending:
            raise AcceleratorError(ILLEGAL)

    kernel = wrap_callable(late, name="late", profile="satfinite", input_dtypes=("bfloat16",))
    run = dict(input_dtype="bfloat16", max_examples=0)
    monkeypatch.setattr(device_faults, "settle", synchronise)
    r, _ = engine.run_check(kernel, "e4m3fn", "satfinite", **run)
    assert r.extra["device_fault"]["call"].startswith("bfloat16 input of shape (4099,)")
    device_faults.forget()
    pending.clear()
    monkeypatch.setattr(device_faults, "settle", lambda device: None)  # the planted bug: no synchronisation
    r, _ = engine.run_check(kernel, "e4m3fn", "satfinite", **run)
    assert "(4099,)" not in r.extra["device_fault"]["call"]  # an innocent later call would be blamed


PAST = harness.LARGE_CPU + 4096  # as tests/test_huge_calls.py: the "2^31" of the CPU


def test_a_fault_in_the_huge_call_is_a_finding_past_its_size():
    def faults_past(x):  # as int32 offsets fault past 2^31 on the H200
        if x.numel() > PAST:
            raise AcceleratorError(ILLEGAL)
        return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)

    kernel = wrap_callable(faults_past, name="faults_past", profile="satfinite", input_dtypes=("bfloat16",))
    r, _ = engine.run_check(kernel, "e4m3fn", "satfinite", input_dtype="bfloat16", max_examples=0, huge=True,
                            huge_numel=PAST + 8192)
    assert not r.passed and r.categories == {"out_of_bounds": 1} and r.checked == 1 << 16
    assert r.divergences[0].condition == f"a huge input: {PAST + 8192:,} elements (shape ({PAST + 8192},), " \
                                         f"{PAST + 8192:,} elements)"
    assert not r.refusals  # a fault is not a refusal


def _gpu_huge_module():
    import importlib.util
    from pathlib import Path

    pytest.importorskip("triton")
    path = Path(__file__).resolve().parents[1] / "gpu" / "huge.py"
    spec = importlib.util.spec_from_file_location("gpu_huge", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_script_expects_a_fault_or_wrong_codes_past_2_31():
    as_expected = _gpu_huge_module().as_expected

    def result(**kw):
        return CheckResult(**{"kernel": "k", "format": "e4m3fn", "profile": "triton-sm90", "passed": True,
                              "checked": 1 << 16, **kw})

    past = huge.HugeCall((huge.HUGE_NUMEL,), "past 2^31 elements").condition()
    fault_past = device_faults.DeviceFault(category="out_of_bounds", error="CUDA error: an illegal memory access "
                                           "was encountered", call=past.removeprefix("only for "))
    assert as_expected(fault_past.apply(result()), should_pass=False)
    from fp8check.results import Divergence

    wrong = result(passed=False, categories={"other": 1}, divergences=[Divergence(
        category="other", input_hex="0x3f80", expected_hex="0x38", actual_hex="0x00",
        condition=f"{past}: 4,096 wrong codes, the first at element 2,147,483,648")])
    assert as_expected(wrong, should_pass=False)
    early = device_faults.DeviceFault(category="out_of_bounds", error="CUDA error: an illegal memory access was "
                                      "encountered", call="bfloat16 input of shape (1,), call 9")
    assert not as_expected(early.apply(result()), should_pass=False)  # a fault, but not past 2^31
    assert as_expected(result(), should_pass=True)
    assert not as_expected(result(extra={"notes": ["no huge calls: no CUDA device here"]}), should_pass=True)


def test_the_gpu_script_planted_kernel_is_importable_by_name_for_its_child_process(monkeypatch):
    from pathlib import Path

    from fp8check.loader import load_callable

    pytest.importorskip("triton")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # gpu/run_all.sh: PYTHONPATH=.
    assert callable(load_callable("gpu.huge:cast_int32_offsets"))


def test_a_fault_ends_a_quantizer_check_keeping_what_it_checked(faulty):
    r = run_declaration(quantizer_kernel("faulty:quant", recipe="rowwise"), max_examples=2)
    assert not r.passed and r.categories["crashed"] == 1
    assert r.categories["codes"] == r.categories["scale"] == 0 and r.checked > 0
    fault = r.extra["device_fault"]
    assert fault["name"] == "cudaErrorMisalignedAddress" and "shape (3, 1001)" in fault["call"]
    text = result_text(r)
    assert "DEVICE FAULT (crashed): Triton Error [CUDA]: misaligned address" in text and "DIVERGES" in text


def test_a_fault_of_a_static_quantizer_is_its_result(faulty):
    decl = static_quantizer("faulty:static", format="e4m3fn", input_dtypes=("float32",))
    r = run_declaration(decl, input_dtype="float32")
    assert not r.passed and r.categories == {"device_assert": 1} and r.kind == "static_quantize"
    text = result_text(r)
    assert "DEVICE FAULT (device_assert): CUDA error: device-side assert triggered" in text
    assert "reproduce: fp8check check faulty:static --kind static" in text


def test_under_isolate_the_fault_is_the_childs_and_this_process_goes_on(faulty):
    decl = cast_kernel("faulty:faults", format="e4m3fn", profile="satfinite", input_dtypes=("bfloat16",),
                       isolate=True)
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert not r.passed and r.categories == {"out_of_bounds": 1} and r.checked == 1 << 16
    assert r.extra["device_fault"]["call"].startswith("bfloat16 input of shape (4099,)")
    assert any("this process's CUDA context is unaffected" in n for n in r.extra["notes"])
    assert device_faults.lost() is None  # the child's context was lost, not this one's


PYPROJECT = '''
[tool.fp8check]

[[tool.fp8check.cast]]
name = "faults"
kernel = "faulty:faults"
format = "e4m3fn"
profile = "satfinite"
input-dtypes = ["bfloat16"]

[[tool.fp8check.cast]]
name = "fine"
kernel = "faulty:fine"
format = "e4m3fn"
profile = "satfinite"
input-dtypes = ["bfloat16"]
'''


def test_in_pytest_the_fault_fails_its_test_and_is_in_the_json(pytester):
    (pytester.path / "faulty.py").write_text(FAULTY)
    (pytester.path / "pyproject.toml").write_text(PYPROJECT)
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "real_callers", "--fp8check-json", "out.json")
    reports = [r for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    outcome = {r.nodeid.split("[")[1].split("-")[0]: r.outcome for r in reports}
    assert outcome == {"faults": "failed", "fine": "passed"}  # a CPU kernel's tests do not skip
    assert "DEVICE FAULT (out_of_bounds)" in result.stdout.str()
    checks = {c["kernel"]: c for c in json.loads((pytester.path / "out.json").read_text())["checks"]}
    assert checks["faults"]["categories"] == {"out_of_bounds": 1} and checks["faults"]["extra"]["device_fault"]
    assert checks["fine"]["passed"]


def test_in_pytest_a_fault_in_a_property_is_in_the_json_and_report(pytester):
    (pytester.path / "faulty.py").write_text(FAULTY)
    (pytester.path / "pyproject.toml").write_text(PYPROJECT.replace("faulty:faults", "faulty:faults_big"))
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "exhaustive_sweep and faults",
                                "--fp8check-json", "out.json", "--fp8check-report", "out.html")
    result.assert_outcomes(failed=1)
    assert "faulted on the device in its call on bfloat16 input of shape (65536,)" in result.stdout.str()
    check, = json.loads((pytester.path / "out.json").read_text())["checks"]
    assert check["categories"] == {"out_of_bounds": 1} and check["checked"] == 0 and not check["passed"]
    assert "faulted on the device in its call on bfloat16 input of shape (65536,)" in \
        (pytester.path / "out.html").read_text()


CUDA_PYPROJECT = '''
[tool.fp8check]

[[tool.fp8check.quantizer]]
name = "on_cuda"
kernel = "faulty:quant"
recipe = "rowwise"
device = "cuda"

[[tool.fp8check.quantizer]]
name = "on_cuda_isolated"
kernel = "faulty:quant"
recipe = "rowwise"
device = "cuda"
isolate = true

[[tool.fp8check.quantizer]]
name = "on_cpu"
kernel = "faulty:quant"
recipe = "rowwise"
max-examples = 0
'''


def test_in_pytest_after_a_fault_the_remaining_gpu_targets_skip_naming_it(pytester, monkeypatch):
    """A session whose CUDA context a kernel's fault has lost (planted: no CUDA here): its remaining GPU targets
    skip with the fault as the reason; an isolated one still runs (in a child, with a context of its own), and
    so does a CPU one."""
    import fp8check.plugin

    (pytester.path / "faulty.py").write_text(FAULTY)
    (pytester.path / "pyproject.toml").write_text(CUDA_PYPROJECT)
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    monkeypatch.setattr(fp8check.plugin, "_cuda_available", lambda: True)  # no "needs a CUDA device" skip
    device_faults.fault_of(AcceleratorError(ILLEGAL), call="a huge input: past 2^31 elements", kernel="wild")
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "recipe", "-rs")
    reports = [r for r in result.reprec.getreports("pytest_runtest_logreport") if r.when in ("setup", "call")]
    outcome = {}
    for r in reports:
        outcome.setdefault(r.nodeid.split("[")[1].rstrip("]"), []).append(r.outcome)
    assert outcome["on_cuda"] == ["skipped"]
    assert "passed" in outcome["on_cuda_isolated"] and "skipped" not in outcome["on_cuda_isolated"]
    assert outcome["on_cpu"] == ["passed", "failed"]  # its own fault (a CPU kernel is not skipped)
    assert "CUDA context was lost to a fault of wild in its call on a huge input: past 2^31" in result.stdout.str()


# -- on a CUDA device -----------------------------------------------------------------------------------------

WILD = '''
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _tail(x_ptr, y_ptr, n, WILD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    if WILD:
        # The planted bug: the lanes past the end are loaded unmasked, at offsets 2^40 away (as wrapped
        # offsets are): outside every allocation, an illegal address. Only a call with a tail has such lanes.
        x = tl.load(x_ptr + tl.where(inside, offs, offs + (1 << 40))).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=inside).to(tl.float32)
    y = tl.where(x != x, x, tl.clamp(x, -448.0, 448.0))
    tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=inside)


def _launch(wild):
    def cast(x):
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        _tail[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), WILD=wild, BLOCK=BLOCK)
        return y

    return cast


wild_tail = _launch(True)
good_tail = _launch(False)
'''

GPU_PYPROJECT = '''
[tool.fp8check]

[[tool.fp8check.cast]]
name = "wild_tail"
kernel = "wild:wild_tail"
format = "e4m3fn"
profile = "triton-sm90"
input-dtypes = ["bfloat16"]
device = "cuda"

[[tool.fp8check.cast]]
name = "good_tail"
kernel = "wild:good_tail"
format = "e4m3fn"
profile = "triton-sm90"
input-dtypes = ["bfloat16"]
device = "cuda"
'''


@pytest.fixture
def wild(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    (tmp_path / "wild.py").write_text(WILD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.gpu
def test_gpu_a_real_out_of_bounds_kernel_faults_in_a_child_and_this_process_goes_on(wild):
    decl = cast_kernel("wild:wild_tail", format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                       device="cuda", isolate=True)
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert not r.passed and r.categories == {"out_of_bounds": 1}, result_text(r)
    fault = r.extra["device_fault"]
    assert fault["name"] == "cudaErrorIllegalAddress" and fault["call"].startswith("bfloat16 input of shape (1,)")
    assert r.checked == 1 << 16  # its coverage calls (no tail) were compared before the fault
    # This process's context is untouched: the same kernel without the bug conforms here, on the device.
    assert device_faults.lost() is None
    good = cast_kernel("wild:good_tail", format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                       device="cuda")
    assert run_declaration(good, input_dtype="bfloat16", max_examples=0, thorough=False).passed


def _plugin_args() -> list[str]:
    """``-p fp8check.plugin`` where fp8check is not installed (its entry point then loads nothing)."""
    from importlib.metadata import entry_points

    installed = any(ep.value.startswith("fp8check") for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "fp8check.plugin"]


@pytest.mark.gpu
def test_gpu_in_pytest_the_fault_fails_its_test_and_the_remaining_gpu_targets_skip(pytester):
    pytest.importorskip("triton")
    (pytester.path / "wild.py").write_text(WILD)
    (pytester.path / "pyproject.toml").write_text(GPU_PYPROJECT)
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib\n")
    # Its own process: the fault loses that process's CUDA context, not this one's.
    result = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "-k", "real_callers",
                                           "--fp8check-json", "out.json", "-rs")
    text = result.stdout.str()
    result.assert_outcomes(failed=1, skipped=1)
    assert "DEVICE FAULT (out_of_bounds)" in text and "in the call on bfloat16 input of shape (1,)" in text
    assert "CUDA context was lost to a fault of wild_tail" in text  # the reason good_tail skipped
    checks = {c["kernel"]: c for c in json.loads((pytester.path / "out.json").read_text())["checks"]}
    assert checks["wild_tail"]["categories"] == {"out_of_bounds": 1}
    assert "good_tail" not in checks  # skipped: no verdict for what was not checked


def test_the_gpu_tests_kernels_in_the_interpreter_the_wild_one_is_out_of_bounds_there_too(wild):
    """The GPU tests' Triton kernels in fp8check's faithful interpreter (sm90) on the CPU: the wild one's
    unmasked tail loads are the sanitizer's out_of_bounds, the category its CUDA fault gets on a GPU (one
    category for one bug, interpreted or compiled); the masked one conforms."""
    runs = {}
    for name in ("wild_tail", "good_tail"):
        decl = cast_kernel(f"wild:{name}", format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                           triton_target="sm90")
        runs[name] = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert set(runs["wild_tail"].categories) == {"out_of_bounds"}
    assert "element offsets [1099511627777" in runs["wild_tail"].divergences[0].detail  # 2^40 + 1: the first lane
    assert runs["good_tail"].passed

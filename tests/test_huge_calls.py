"""Huge calls (issue 21, item 6): one call past 2^31 elements and one with more than 65,535 rows, made by
default on a CUDA device with room for them. On the CPU they are made here with ``huge=True`` at a size just
past the harness's large call, on kernels planted to go wrong only past that size (as int32 offsets go wrong
only past 2^31: gpu/huge.py has the real one, run on the H200 by ``bash gpu/run_all.sh huge``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fp8check import quantizers  # noqa: E402
from fp8check.casts import engine, harness, huge  # noqa: E402
from fp8check.casts.adapters.user import wrap_callable  # noqa: E402
from fp8check.quantizers.adapters import torch_quantizer  # noqa: E402
from fp8check.quantizers.conformance import check_quantizer  # noqa: E402

PAST = harness.LARGE_CPU + 4096  # the element from which the planted kernels go wrong (the "2^31" here)


def _cast(x):
    return x.float().clamp(-448, 448).to(torch.float8_e4m3fn)


def _wraps_past(x):
    """Right on every input the usual calls make; past PAST elements its last 100 codes are stale (zero)."""
    y = _cast(x)
    if y.numel() > PAST:
        y.view(torch.uint8).view(-1)[PAST:PAST + 100] = 0
    return y


def _kernel(fn):
    return wrap_callable(fn, name=fn.__name__, profile="satfinite", input_dtypes=("bfloat16",))


def test_the_huge_call_catches_a_cast_wrong_only_past_its_size():
    run = dict(input_dtype="bfloat16", max_examples=0)
    r, _ = engine.run_check(_kernel(_wraps_past), "e4m3fn", "satfinite", huge=True, huge_numel=PAST + 8192, **run)
    assert not r.passed
    for d in r.divergences:
        assert "only for a huge input" in d.condition
        first = int(d.condition.rsplit("first at element ", 1)[1].replace(",", ""))
        assert PAST <= first < PAST + 100
    assert engine.run_check(_kernel(_cast), "e4m3fn", "satfinite", huge=True, huge_numel=PAST + 8192, **run)[0].passed
    # Without the huge calls (the CPU default) the same kernel conforms; a CPU kernel gets no note about them,
    # a Triton kernel in the interpreter does (it is a GPU kernel the CPU run cannot call that large).
    plain, _ = engine.run_check(_kernel(_wraps_past), "e4m3fn", "satfinite", **run)
    assert plain.passed and not any("huge" in n for n in plain.extra.get("notes", ()))
    pytest.importorskip("triton")
    from fp8check.triton import interpreting

    with interpreting():
        assert "no huge calls on cpu" in huge.plan("cpu", bytes_per_element=10)[1]


def test_max_numel_opts_out_of_the_huge_call():
    calls, note = huge.plan("cuda", bytes_per_element=10, max_numel=1 << 30, force=True)
    assert [c.what for c in calls] == ["65,553 rows (more than 65,535)"]
    assert "past 2^31 elements" in note and "max_numel 1,073,741,824" in note
    assert huge.plan("cpu", bytes_per_element=10)[0] == []
    assert huge.plan("cuda", bytes_per_element=10, force=False) == ([], "")


@pytest.mark.slow  # three whole quantizer checks with 8 M-element calls: 40 s on a loaded 2-core machine
def test_the_huge_calls_of_a_quantizer():
    good = torch_quantizer(quantizers.get("rowwise"))

    def stale_past(x):
        c, s = good(x)
        if x.numel() > 1 << 23:
            c.view(torch.uint8).view(-1)[1 << 23:(1 << 23) + 50] = 0
        return c, s

    fast = dict(max_examples=2, huge=True, huge_numel=(1 << 23) + 4096)
    r = check_quantizer(stale_past, "rowwise", **fast)
    assert not r.passed and r.categories["codes"] == 50
    d = next(d for d in r.divergences if d.category == "codes")
    assert "only for a huge input" in d.condition and "first at element 8,388,608 (row 2,048)" in d.detail
    assert check_quantizer(good, "rowwise", **fast).passed
    block = torch_quantizer(quantizers.get("block-128x128"))
    assert check_quantizer(block, "block-128x128", **fast).passed


def _gpu_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "gpu" / "huge.py"
    spec = importlib.util.spec_from_file_location("gpu_huge", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_int32_offsets_past_2_31_are_a_finding_on_the_cpu():
    """Issue 32, item 3: gpu/huge.py's two Triton casts (the int32 one wrote 4,096 wrong codes on the H200)
    checked on the CPU with nothing asked for: the call past 2^31 elements is made virtually (the last
    programs of the grid over an input never allocated) and the int32 offsets' wrap is out of bounds at
    the first program past 2^31; the int64 twin conforms, with the codes of its last programs judged."""
    pytest.importorskip("triton")
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the memory's peak from Linux's /proc/self/status")
    from fp8check.declarations import cast_kernel, run_declaration

    module = _gpu_script()
    results = {}
    for name in ("cast_int32_offsets", "cast_int64_offsets"):
        decl = cast_kernel(getattr(module, name), format="e4m3fn", profile="triton-sm90",
                           input_dtypes=("bfloat16",), triton_target="sm90", name=name)
        results[name] = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    bad, good = results["cast_int32_offsets"], results["cast_int64_offsets"]
    assert not bad.passed and set(bad.categories) == {"out_of_bounds"}
    last = (huge.HUGE_NUMEL - 1) // module.BLOCK  # 524,288: its int32 offset pid * 4096 wraps to -2^31
    faults = [d.detail for d in bad.divergences]
    assert len(faults) == 2 and all(f"program ({last}, 0, 0)" in f and "[-2147483648, " in f for f in faults)
    assert good.passed and not good.divergences
    note = next(n for n in good.extra["notes"] if "past 2^31" in n)
    assert "was made on the CPU" in note and "64 of 524,289" in note and "262,144 output codes" in note
    assert not any("no huge calls" in n for n in good.extra["notes"] + bad.extra["notes"])
    # never allocated: 6 GiB of input and output would be. Measured in a fresh process by its own memory's
    # peak (VmHWM): this process's is whatever test ran in it before, and Linux carries a parent's ru_maxrss
    # over into a child it execs (an xdist worker's 7 GB showed up in both).
    child = subprocess.run([sys.executable, "-c", _VIRTUAL_CALL_MEMORY], capture_output=True, text=True,
                           timeout=600, cwd=Path(__file__).resolve().parents[1])
    assert child.returncode == 0, child.stderr
    assert int(child.stdout.split()[-1]) < 3 << 20  # KiB


_VIRTUAL_CALL_MEMORY = """
import sys
sys.path.insert(0, "tests")
import test_huge_calls as t
from fp8check.declarations import cast_kernel, run_declaration
module = t._gpu_script()
decl = cast_kernel(module.cast_int32_offsets, format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                   triton_target="sm90", name="cast_int32_offsets")
assert not run_declaration(decl, input_dtype="bfloat16", max_examples=0).passed
print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1])  # KiB
"""


def test_a_launcher_computing_on_the_virtual_input_is_a_note_not_an_allocation():
    pytest.importorskip("triton")
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the memory's peak from Linux's /proc/self/status")
    from fp8check.declarations import cast_kernel, run_declaration

    module = _gpu_script()

    def via_float32(x):
        return module.cast_int64_offsets(x.float())  # reads the whole input: 8 GiB if made

    decl = cast_kernel(via_float32, format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                       triton_target="sm90", name="via_float32")
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert r.passed
    note = next(n for n in r.extra["notes"] if "past 2^31" in n)
    assert note.startswith("the call past 2^31 elements was not made: the launcher computes") and "float" in note


def test_a_kernel_refusing_the_virtual_call_is_a_refusal_not_a_crash():
    """AMD aiter's static cast launches one program per row with ``tl.arange(0, next_power_of_2(cols))``: a
    1-D input past 2^31 elements is one row whose arange does not fit in int32, which Triton refuses (on a GPU
    too). The virtual call is then the kernel's refusal of the huge call, as a real one is."""
    pytest.importorskip("triton")
    import triton
    import triton.language as tl

    from fp8check.declarations import cast_kernel, run_declaration

    @triton.jit
    def _one_row(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
        y = tl.where(x != x, x, tl.clamp(x, -448.0, 448.0))
        tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=offs < n)

    def one_row(x):
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
        _one_row[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
        return y

    decl = cast_kernel(one_row, format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                       triton_target="sm90", name="one_row")
    r = run_declaration(decl, input_dtype="bfloat16", max_examples=0)
    assert r.passed
    (refusal,) = [f for f in r.refusals if "huge input" in f.condition]
    assert "arange must fit in int32" in refusal.error and "past 2^31" in refusal.condition


def test_the_gpu_script_kernels_are_right_below_2_31_in_the_interpreter():
    """gpu/huge.py's two Triton casts, run here in the faithful sm90 interpreter on every bfloat16 input: both
    conform below 2^31 elements (the int32 one differs only past it, which only the GPU part reaches)."""
    pytest.importorskip("triton")
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the memory's peak from Linux's /proc/self/status")
    from fp8check.declarations import cast_kernel, run_declaration

    module = _gpu_script()
    for fn in (module.cast_int32_offsets, module.cast_int64_offsets):
        decl = cast_kernel(fn, format="e4m3fn", profile="triton-sm90", input_dtypes=("bfloat16",),
                           triton_target="sm90", name=fn.__name__)
        r = run_declaration(decl, input_dtype="bfloat16", max_examples=0, thorough=False)
        assert r.passed and r.checked == 1 << 16, (fn.__name__, r.categories)


def test_the_virtual_launch_runs_the_last_programs_of_a_3d_grid_with_their_real_ids():
    """Only the last TAIL_PROGRAMS programs (in the stock loop's order: x outermost) run, each seeing its real
    program ids and the real grid's num_programs; the executor loops over those programs only."""
    pytest.importorskip("triton")
    import triton
    import triton.language as tl

    import fp8check.triton as ft
    from fp8check.triton import virtual

    @triton.jit
    def _ids(out_ptr):
        x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        gy, gz = tl.num_programs(1), tl.num_programs(2)
        lin = x * gy * gz + y * gz + z
        tl.store(out_ptr + lin, lin + 1)

    grid = (4, 5, 7)  # 140 programs
    out = torch.zeros(140, dtype=torch.int32)
    with ft.interpreting(), virtual.virtual_call(torch.zeros(8), (16,)) as v:
        _ids[grid](out)
    first = 140 - virtual.TAIL_PROGRAMS
    assert out[:first].eq(0).all() and out[first:].tolist() == list(range(first + 1, 141))
    assert (v.launches, v.programs_run, v.programs_total) == (1, virtual.TAIL_PROGRAMS, 140)

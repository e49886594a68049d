"""Memory-safe interpretation and autotuned kernels (fp8check.triton.sanitizer, fp8check.triton.launch).

Small kernels launched directly in the faithful interpreter, each with one planted fault: the fault is
reported with its kind, the kernel's line, the program, the tensor and the offsets, the kernel goes on,
and nothing outside its tensors is touched. The same kernels without the fault report nothing. Autotuned
kernels run every config with no GPU driver, honouring key, prune_configs_by, reset_to_zero, pre_hook and
heuristics; everything patched is restored afterwards.

The same faults in declared kernels, through pytest and the CLI, are in test_planted.py (slow)."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
import textwrap

import numpy as np
import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check.triton import launch, sanitizer  # noqa: E402

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)


def line_of(fn, mark: str) -> str:
    """``file.py:LINE`` of the source line of ``fn`` that holds ``mark``."""
    fn = getattr(fn, "fn", fn)
    while not inspect.isfunction(fn):
        fn = fn.fn
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, text in enumerate(lines) if mark in text]
    assert len(hits) == 1, (mark, hits)
    return f"{inspect.getsourcefile(fn).rsplit('/', 1)[-1]}:{hits[0]}"


def run(launcher, *args, target: str = "sm90"):
    """``launcher(*args)`` in the faithful interpreter; (its result, the faults reported)."""
    with sanitizer.collect() as found, ft.interpreting(), ft.faithful(target):
        out = launcher(*args)
    return out, found.faults


def kinds(faults) -> list[str]:
    return sorted({f.kind for f in faults})


# -- out of bounds --------------------------------------------------------------------------------------

@triton.jit
def _row_copy(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask)
    tl.store(y_ptr + row * y_stride + cols, x, mask=mask)  # the store


def _copy_rows(x: torch.Tensor, y_stride_of_x: bool) -> torch.Tensor:
    y = torch.zeros(x.shape, dtype=x.dtype)
    _row_copy[(x.shape[0],)](x, y, x.shape[1], x.stride(0), x.stride(0) if y_stride_of_x else y.stride(0),
                             BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def test_a_launcher_stride_bug_is_an_out_of_bounds_store_reported_and_not_performed():
    padded = torch.arange(8 * 24, dtype=torch.float32).reshape(8, 24)
    x = padded[:, :20]  # row-padded: stride 24, 20 columns
    y, faults = run(_copy_rows, x, True)
    assert kinds(faults) == ["out_of_bounds"]
    (f,) = faults
    assert f.site == line_of(_row_copy, "# the store") and f.kernel == "_row_copy" and f.buffer == "y_ptr"
    # row r writes elements r*24 .. r*24+19 of a 160-element output: 4 lanes of row 6 and all 20 of row 7
    # lie past it
    assert f.program == (6, 0, 0) and f.offsets[:2] == (160, 161) and f.count == 4 + 20
    assert "not performed" in f.detail
    # the rows inside were stored (at the wrong places, as on a GPU): the kernel went on
    assert torch.equal(y.reshape(-1)[24:44], x[1]) and torch.equal(y.reshape(-1)[144:160], x[6, :16])


def test_the_same_launcher_with_the_output_stride_reports_nothing():
    padded = torch.arange(8 * 24, dtype=torch.float32).reshape(8, 24)
    x = padded[:, :20]
    y, faults = run(_copy_rows, x, False)
    assert faults == [] and torch.equal(y, x)


@triton.jit
def _wild_store(y_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + far + offs, offs.to(tl.float32))  # wild


def test_a_wild_store_cannot_crash_the_process():
    """A store 2**40 bytes past its tensor: performed, it is a segmentation fault. Run in a child process so
    that a regression fails this test instead of killing the session."""
    code = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
        from test_sanitizer import _wild_store, run
        y = torch.zeros(16)
        _, faults = run(lambda: _wild_store[(1,)](y, 1 << 38, BLOCK=16))
        print(len(faults), faults[0].kind, faults[0].count, float(y.abs().sum()))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "out_of_bounds", "16", "0.0"]


@triton.jit
def _select_pointers(a_ptr, b_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    src = tl.where(offs % 2 == 0, a_ptr + offs, b_ptr + offs)  # a pointer of unknown origin
    tl.store(y_ptr + offs, tl.load(src))


def test_a_pointer_of_unknown_origin_is_checked_against_every_tensor_of_the_launch():
    a, b = torch.full((8,), 1.0), torch.full((8,), 2.0)
    y, faults = run(lambda: (_select_pointers[(1,)](a, b, y := torch.zeros(8), BLOCK=8), y)[1])
    assert faults == [] and y.tolist() == [1.0, 2.0] * 4
    short = torch.full((4,), 2.0)  # b is too short now: lanes 5 and 7 are inside no tensor
    y, faults = run(lambda: (_select_pointers[(1,)](a, short, y := torch.zeros(8), BLOCK=8), y)[1])
    assert kinds(faults) == ["out_of_bounds"] and faults[0].count == 2 and faults[0].buffer == ""
    assert y.tolist()[5] == 0.0 and y.tolist()[7] == 0.0  # not read: the load gave 0


@triton.jit
def _described(x_ptr, y_ptr, n, rows, BLOCK: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, shape=[rows], strides=[1], block_shape=[BLOCK])  # the shape claimed
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, desc.load([tl.program_id(0) * BLOCK]), mask=offs < n)


@pytest.mark.skipif(not hasattr(tl, "make_tensor_descriptor"), reason="no tensor descriptors in this Triton")
def test_a_tensor_descriptor_larger_than_its_tensor_reads_out_of_bounds():
    x = torch.arange(20, dtype=torch.float32)
    y, faults = run(lambda: (_described[(3,)](x, y := torch.zeros(24), 24, 20, BLOCK=8), y)[1])
    assert faults == [] and torch.equal(y[:20], x)  # the descriptor's own bounds: padding, no fault
    y, faults = run(lambda: (_described[(3,)](x, y := torch.zeros(24), 24, 24, BLOCK=8), y)[1])
    assert kinds(faults) == ["out_of_bounds"] and faults[0].count == 4  # elements 20..23 of a 20-element tensor


@triton.jit
def _block_pointers(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    xb = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(tl.program_id(0) * BLOCK,), block_shape=(BLOCK,),
                           order=(0,))
    yb = tl.make_block_ptr(y_ptr, shape=(n,), strides=(1,), offsets=(tl.program_id(0) * BLOCK,), block_shape=(BLOCK,),
                           order=(0,))
    tl.store(yb, tl.load(xb), boundary_check=(0,))  # the load has no boundary check


def test_a_block_pointer_load_without_its_boundary_check_reads_out_of_bounds():
    x = torch.arange(20, dtype=torch.float32)
    try:
        y, faults = run(lambda: (_block_pointers[(3,)](x, y := torch.zeros(20), 20, BLOCK=8), y)[1])
    except Exception as exc:  # Triton >= 3.8: "Block pointers have been removed"
        if "removed" in str(exc):
            pytest.skip(str(exc)[:200])
        raise
    assert kinds(faults) == ["out_of_bounds"] and faults[0].count == 4 and torch.equal(y, x)


# -- uninitialised reads ----------------------------------------------------------------------------------

@triton.jit
def _fill(t_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(t_ptr + offs, offs.to(tl.float32), mask=offs < n)


@triton.jit
def _double(t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    t = tl.load(t_ptr + offs, mask=offs < n)  # the read
    tl.store(y_ptr + offs, t * 2, mask=offs < n)


def _two_pass(n: int, filled: int, alloc=torch.empty) -> torch.Tensor:
    t = alloc(n)
    y = torch.empty(n)
    _fill[(triton.cdiv(filled, 8),)](t, filled, BLOCK=8)
    _double[(triton.cdiv(n, 8),)](t, y, n, BLOCK=8)
    return y


def test_reading_what_no_store_wrote_of_an_empty_allocation_is_uninitialised():
    _, faults = run(_two_pass, 20, 17)
    assert kinds(faults) == ["uninitialised"]
    (f,) = faults
    assert f.site == line_of(_double, "# the read") and f.buffer == "t_ptr" and f.offsets == (17, 18, 19)
    assert f.program == (2, 0, 0) and f.count == 3


def test_memory_written_by_a_store_or_by_torch_is_initialised():
    assert run(_two_pass, 20, 20)[1] == []
    assert run(_two_pass, 20, 17, torch.zeros)[1] == []  # not an empty allocation
    assert run(_two_pass, 20, 17, lambda n: torch.empty(n).fill_(1.0))[1] == []  # torch wrote it


@triton.jit
def _accumulate(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(y_ptr + offs, mask=offs < n)  # read before write
    tl.store(y_ptr + offs, y + tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_an_in_place_kernel_on_an_empty_output_reads_uninitialised_memory():
    x = torch.ones(10)
    _, faults = run(lambda: _accumulate[(2,)](torch.empty(10), x, 10, BLOCK=8))
    assert kinds(faults) == ["uninitialised"] and faults[0].site == line_of(_accumulate, "# read before write")
    assert run(lambda: _accumulate[(2,)](torch.zeros(10), x, 10, BLOCK=8))[1] == []


# -- races ----------------------------------------------------------------------------------------------

@triton.jit
def _block_max(x_ptr, out_ptr, n, ATOMIC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = tl.max(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    if ATOMIC:
        tl.atomic_max(out_ptr, m)
    else:
        tl.store(out_ptr, m)  # the racy store


def test_two_programs_storing_different_values_to_one_address_is_a_race():
    x = torch.arange(24, dtype=torch.float32)
    out = torch.zeros(())
    _, faults = run(lambda: _block_max[(3,)](x, out, 24, ATOMIC=False, BLOCK=8))
    assert kinds(faults) == ["race"]
    (f,) = faults
    assert f.site == line_of(_block_max, "# the racy store") and f.buffer == "out_ptr" and f.offsets == (0,)
    assert f.program == (1, 0, 0) and "program (0, 0, 0)" in f.detail and f.count == 2
    out = torch.zeros(())
    _, faults = run(lambda: _block_max[(3,)](x, out, 24, ATOMIC=True, BLOCK=8))
    assert faults == [] and float(out) == 23.0
    same = torch.full((24,), 5.0)  # every program stores the same bytes: no race
    assert run(lambda: _block_max[(3,)](same, torch.zeros(()), 24, ATOMIC=False, BLOCK=8))[1] == []


# -- hints and asserts ------------------------------------------------------------------------------------

@triton.jit
def _hinted(x_ptr, y_ptr, n, start, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.assume(pid < 2)  # assume
    offs = start + pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)  # hints
    tl.device_assert(offs < n, "offset in range")  # assert
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x, mask=offs < n)


def test_true_hints_report_nothing():
    x = torch.arange(32, dtype=torch.float32)
    y, faults = run(lambda: (_hinted[(2,)](x, y := torch.zeros(32), 32, 0, BLOCK=16), y)[1])
    assert faults == [] and torch.equal(y, x)


def test_false_hints_and_failing_asserts_are_findings_and_the_kernel_goes_on():
    x = torch.arange(64, dtype=torch.float32)
    y = torch.zeros(64)
    _, faults = run(lambda: _hinted[(3,)](x, y, 40, 4, BLOCK=16))
    by = {f.kind: f for f in faults}
    assert sorted(by) == ["device_assert", "false_hint"]
    hints = {f.site: f for f in faults if f.kind == "false_hint"}
    assert sorted(hints) == sorted([line_of(_hinted, "# assume"), line_of(_hinted, "# hints")])
    assume = hints[line_of(_hinted, "# assume")]
    assert assume.program == (2, 0, 0) and "tl.assume(pid < 2)" in assume.detail and "pid=2" in assume.detail
    multiple = hints[line_of(_hinted, "# hints")]
    assert "tl.multiple_of(..., 16)" in multiple.detail and "[4" in multiple.detail
    assert by["device_assert"].site == line_of(_hinted, "# assert") and "offset in range" in by["device_assert"].detail
    assert by["device_assert"].program == (2, 0, 0) and by["device_assert"].count == 12
    assert torch.equal(y[4:40], x[4:40])  # every program ran to its end


@triton.jit
def _misaligned(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) * 2
    offs = tl.max_contiguous(offs, BLOCK)  # not contiguous
    tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + offs))


def test_a_false_max_contiguous_is_a_finding():
    _, faults = run(lambda: _misaligned[(1,)](torch.arange(16.0), torch.zeros(8), BLOCK=8))
    assert kinds(faults) == ["false_hint"] and "tl.max_contiguous(..., 8)" in faults[0].detail
    assert faults[0].site == line_of(_misaligned, "# not contiguous")


def test_triton_s_own_interpreter_stops_at_a_false_assume():
    """What a check saw before (issue 20): the interpreter's AssertionError ends the kernel."""
    from triton.runtime.interpreter import InterpretedFunction

    with pytest.raises(Exception, match="Assume failed"):
        InterpretedFunction(_hinted.fn)[(3,)](torch.arange(64.0), torch.zeros(64), 64, 0, BLOCK=16)


# -- autotune and heuristics ------------------------------------------------------------------------------

CALLS: list[str] = []


def _note_pre_hook(args):
    CALLS.append(f"pre_hook BLOCK={args['BLOCK']}")


@triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 16}, pre_hook=_note_pre_hook),
                          triton.Config({"BLOCK": 32}, num_warps=8)],
                 key=["n"], reset_to_zero=["count_ptr"],
                 prune_configs_by={"early_config_prune": lambda configs, named, **kw:
                                   [c for c in configs if c.kwargs["BLOCK"] <= max(8, named["n"])]})
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _tuned_copy(x_ptr, y_ptr, count_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n)
    if BLOCK == 32:
        tl.store(y_ptr + offs, x)  # unmasked in the widest config only
    else:
        tl.store(y_ptr + offs, x, mask=offs < n)
    tl.atomic_add(count_ptr, 1)


def _launch_tuned(n: int, count: torch.Tensor) -> torch.Tensor:
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros(n)
    _tuned_copy[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, count, n)
    assert torch.equal(y, x)
    return y


def test_every_config_runs_with_no_driver_and_a_fault_names_its_config():
    count = torch.zeros(1, dtype=torch.int32)
    CALLS.clear()

    def check():
        with sanitizer.collect() as found, ft.interpreting(), ft.faithful("sm90"):
            _launch_tuned(40, count)
            _launch_tuned(36, count)
        return found.faults

    runs = launch.each_config(check)
    assert [label for label, _ in runs] == ["BLOCK=8", "BLOCK=16", "BLOCK=32, num_warps=8"]
    assert [kinds(f) for _, f in runs] == [[], [], ["out_of_bounds"]]
    (f,) = runs[2][1]
    assert f.config == "BLOCK=32, num_warps=8" and f.site == line_of(_tuned_copy, "# unmasked in the widest")
    assert "[config BLOCK=32, num_warps=8]" in f.message
    assert CALLS == ["pre_hook BLOCK=16"] * 2  # a config's pre_hook: before each of its launches


def test_a_config_pruned_away_falls_back_and_the_label_says_so():
    def check():
        with ft.interpreting(), ft.faithful("sm90"):
            _launch_tuned(40, torch.zeros(1, dtype=torch.int32))
            _launch_tuned(5, torch.zeros(1, dtype=torch.int32))  # n=5: only BLOCK=8 is left
    labels = [label for label, _ in launch.each_config(check)]
    assert labels[0] == "BLOCK=8"
    assert labels[1] == "BLOCK=16 (pruned away for some calls; ran BLOCK=8 in 1 call)"


def test_reset_to_zero_runs_once_per_tuning_key_as_triton_does():
    """Triton zeroes ``reset_to_zero`` arguments after benchmarking a new key, not before every call: the
    counter of the second call with the same key keeps what the first added."""
    count = torch.zeros(1, dtype=torch.int32)

    def check():
        with ft.interpreting(), ft.faithful("sm90"):
            count.fill_(100)
            _launch_tuned(40, count)  # a new key: reset, then 5 programs add 1 each
            first = int(count)
            _launch_tuned(40, count)  # the same key: no reset
            second = int(count)
            _launch_tuned(36, count)  # a new key: reset
            return first, second, int(count)

    assert [r for _, r in launch.each_config(check)] == [(5, 10, 5), (3, 6, 3), (2, 4, 2)]


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.autotune(configs=[triton.Config({"SCALE": 1.0}), triton.Config({"SCALE": 2.0})], key=[])
@triton.jit
def _heuristic_above(x_ptr, y_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)


def test_heuristics_above_an_autotuner_run_each_config():
    x = torch.arange(5, dtype=torch.float32)

    def check():
        y = torch.zeros(5)
        with ft.interpreting(), ft.faithful("sm90"):
            _heuristic_above[(1,)](x, y, 5)
        return y.tolist()

    assert launch.each_config(check) == [("SCALE=1.0", [0.0, 1.0, 2.0, 3.0, 4.0]),
                                         ("SCALE=2.0", [0.0, 2.0, 4.0, 6.0, 8.0])]


HOOKED: list[tuple[int, bool]] = []


@triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})],
                 key=["n"], pre_hook=lambda args, reset_only=False: HOOKED.append((args["n"], reset_only)),
                 prune_configs_by={"perf_model": lambda **kw: -kw["BLOCK"] if kw["n"] > 20 else kw["BLOCK"],
                                   "top_k": 1})
@triton.jit
def _modelled(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_a_perf_model_with_top_k_and_a_user_pre_hook_are_honoured():
    """top_k=1 keeps the config the model ranks first for each call (the widest for n > 20, else the
    narrowest); with one config left Triton does not tune, so a user pre_hook is never called."""
    HOOKED.clear()

    def check():
        with ft.interpreting(), ft.faithful("sm90"):
            for n in (40, 10):
                x = torch.arange(n, dtype=torch.float32)
                y = torch.zeros(n)
                _modelled[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
                assert torch.equal(y, x)

    labels = [label for label, _ in launch.each_config(check)]
    assert labels == ["BLOCK=8 (pruned away for some calls; ran BLOCK=32 in 1 call)",
                      "BLOCK=16 (pruned away for some calls; ran BLOCK=32 in 1 call, BLOCK=8 in 1 call)",
                      "BLOCK=32 (pruned away for some calls; ran BLOCK=8 in 1 call)"]
    assert HOOKED == []


def test_two_autotuned_kernels_in_one_launcher_run_config_i_of_each():
    def check():
        with ft.interpreting(), ft.faithful("sm90"):
            _launch_tuned(40, torch.zeros(1, dtype=torch.int32))
            _heuristic_above[(1,)](torch.arange(5.0), torch.zeros(5), 5)

    labels = [label for label, _ in launch.each_config(check)]
    assert labels == ["_tuned_copy: BLOCK=8; _heuristic_above: SCALE=1.0",
                      "_tuned_copy: BLOCK=16; _heuristic_above: SCALE=2.0",
                      "_tuned_copy: BLOCK=32, num_warps=8; _heuristic_above: SCALE=2.0"]


def test_triton_s_own_autotuner_needs_a_driver_here():
    """Why launch.py exists: without it, a multi-config autotuner fails on a machine without a GPU."""
    from triton.runtime.autotuner import Autotuner

    assert Autotuner.run is not launch._autotuned_run
    with pytest.raises(Exception, match="driver"):
        _heuristic_above[(1,)](torch.zeros(5), torch.zeros(5), 5)


# -- everything restored ------------------------------------------------------------------------------------

def _patched_state():
    import triton.runtime.interpreter as interp
    from triton.runtime.autotuner import Autotuner

    b = interp.InterpreterBuilder.__dict__
    return ([b[n] for n in ("create_masked_load", "create_masked_store", "create_assume", "create_assert",
                            "create_addptr", "create_splat", "create_broadcast", "create_atomic_rmw",
                            "create_atomic_cas")]
            + [interp.GridExecutor.__dict__["__call__"], interp.GridExecutor.__dict__["_init_args_hst"],
               interp._implicit_cvt, interp._patch_lang, interp.interpreter_builder.options,
               Autotuner.__dict__["run"]])


def test_everything_patched_is_restored_and_triton_s_interpreter_is_its_own_again():
    from torch.overrides import _get_current_function_mode_stack
    from triton.runtime.interpreter import InterpretedFunction

    before = _patched_state()
    modes = list(_get_current_function_mode_stack())
    with pytest.raises(ZeroDivisionError):
        with ft.interpreting(), ft.faithful("sm90"):
            _launch_tuned(40, torch.zeros(1, dtype=torch.int32))
            assert _patched_state() != before
            1 / 0
    assert _patched_state() == before
    assert list(_get_current_function_mode_stack()) == modes and sanitizer._FRESH == {}
    # Triton's own interpreter, used afterwards in this process, behaves as before fp8check ran
    with pytest.raises(Exception, match="Assume failed"):
        InterpretedFunction(_hinted.fn)[(3,)](torch.arange(64.0), torch.zeros(64), 64, 0, BLOCK=16)


def test_a_real_compile_after_a_checked_run_still_works():
    """Compile (no GPU needed: to PTX) a kernel with tl.cumsum and an autotuner after the interpreter ran."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    _, faults = run(_two_pass, 20, 17)
    assert faults
    src = ASTSource(fn=_cumsum_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}, constexprs={"BLOCK": 16})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32))
    assert "ld.global" in compiled.asm["ptx"]


@triton.jit
def _cumsum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0))


def test_faults_outside_a_collect_block_are_suppressed_not_reported():
    padded = torch.arange(8 * 24, dtype=torch.float32).reshape(8, 24)
    with ft.interpreting(), ft.faithful("sm90"):
        y = _copy_rows(padded[:, :20], True)
    assert np.isfinite(y.numpy()).all()

"""Issue 36: no false finding where the interpreter, not the kernel, is wrong.

``and``/``or``/``not`` and chained comparisons on tensors run as the Triton compiler lowers them
(fp8check.triton.boolops); alignment hints are judged against the addresses the target's allocator gives;
a kernel the installed Triton cannot run says so in one line. Each correct kernel reports nothing beside a
twin with the fault, which does."""

from __future__ import annotations

import importlib.util
import sys

import pytest

if importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("triton and torch are needed for the faithful interpreter", allow_module_level=True)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check.triton import boolops  # noqa: E402
from tests.triton_faithful.test_sanitizer import kinds, run  # noqa: E402  (the same helpers)

if triton.__version__.split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
    pytest.skip(f"Triton {triton.__version__} is not one the faithful interpreter supports", allow_module_level=True)

ROWS, COLS, BLOCK = 5, 7, 8  # a 5 x 7 tensor in one 8 x 8 tile: 3 rows and 1 column of the tile lie outside


# -- `and`, `or`, `not` on masks ----------------------------------------------------------------------------

@triton.jit
def _tile_and(x_ptr, y_ptr, n_rows, n_cols, WIDEN: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    row_mask = rows < n_rows
    col_mask = cols < n_cols + WIDEN  # WIDEN = 1: one column too many (the planted bug)
    mask = row_mask and col_mask
    offs = rows * n_cols + cols
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def _copy_tile(widen: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) + 1
    y = torch.zeros_like(x)
    _tile_and[(1,)](x, y, ROWS, COLS, WIDEN=widen, BLOCK=BLOCK)
    return x, y


def test_an_and_of_two_masks_is_elementwise_as_compiled():
    """Python's ``and`` returns ``col_mask`` (every row of the tile, 3 past the tensor: out of bounds);
    the compiler combines the masks elementwise, and the kernel is correct."""
    (x, y), faults = run(_copy_tile, 0)
    assert faults == []
    assert torch.equal(y, x * 2)


def test_its_twin_with_one_column_too_many_is_out_of_bounds():
    (x, y), faults = run(_copy_tile, 1)
    assert kinds(faults) == ["out_of_bounds"]
    # the last row's extra column is element 35, one past the 35-element tensors; the other rows' extra
    # column is the next row's first element (inside the storage: a wrong result, not a fault)
    assert {f.buffer for f in faults} == {"x_ptr", "y_ptr"} and all(f.offsets == (35,) for f in faults)


@triton.jit
def _tail_not(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    past = offs >= n
    keep = not past
    either = past or offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=keep, other=-1.0), mask=either and keep)


def test_not_and_or_of_masks_are_elementwise_as_compiled():
    """``not past`` in Python is False (a tensor of several elements is true): nothing would be loaded or
    stored; compiled, it is the elementwise complement."""
    x, y = torch.arange(1.0, 6.0), torch.zeros(5)
    _, faults = run(lambda: _tail_not[(1,)](x, y, 5, BLOCK=8))
    assert faults == [] and torch.equal(y, x)


@triton.jit
def _chained(x_ptr, y_ptr, lo, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = lo <= offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0), mask=offs < n)


def test_a_chained_comparison_is_what_the_installed_compiler_makes_of_it():
    x, y = torch.arange(1.0, 7.0), torch.zeros(6)
    _, faults = run(lambda: _chained[(1,)](x, y, 2, 6, BLOCK=8))
    assert torch.equal(y, torch.tensor([0.0, 0.0, 3.0, 4.0, 5.0, 6.0]))  # (2 <= offs) & (offs < 6)
    if boolops.chained_comparisons_compile():  # Triton 3.9
        assert faults == []
    else:  # 3.6, 3.8: "simultaneous multiple comparison is not supported"
        assert kinds(faults) == ["compile_error"] and "multiple comparison" in faults[0].detail


@triton.jit
def _int_and(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    both = offs and offs + 1  # int32 operands: the compiler bitcasts them to int1
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + both)


def test_an_and_the_compiler_rejects_is_a_compile_error_finding():
    x, y = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    _, faults = run(lambda: _int_and[(1,)](x, y, BLOCK=4))
    assert kinds(faults) == ["compile_error"]
    (f,) = faults
    assert "Cannot bitcast data-type of size 32" in f.detail and "offs and offs + 1" in f.detail
    assert f.site.endswith(f":{_int_and.fn.__code__.co_firstlineno + 3}")


# -- a feature the installed Triton removed ----------------------------------------------------------------

@triton.jit
def _block_pointer_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    block = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(block, boundary_check=(0,)), mask=offs < n)


def test_block_pointers_under_a_release_without_them_are_one_line_naming_the_releases_that_run_them():
    from fp8check.triton import releases

    x, y = torch.arange(1.0, 7.0), torch.zeros(6)
    feature = releases.feature_named("block pointers")
    if releases.accepting(feature):  # 3.6, 3.8: it runs
        _, faults = run(lambda: _block_pointer_copy[(1,)](x, y, 6, BLOCK=8))
        assert faults == [] and torch.equal(y, x)
        return
    with pytest.raises(ft.TritonFeatureError) as err:  # 3.9: NotImplementedError inside InterpreterError
        run(lambda: _block_pointer_copy[(1,)](x, y, 6, BLOCK=8))
    message = str(err.value)
    assert "\n" not in message and "tl.make_block_ptr" in message
    assert message.endswith("fp8check runs it under Triton 3.6.0 and 3.8.0")
    assert f"Triton {triton.__version__} does not run (NotImplementedError: Block pointers have been removed" \
        in message


def test_dot_scaled_under_triton_3_6_is_one_line_naming_the_releases_that_run_it():
    from pathlib import Path

    from fp8check.matmul import gemm
    from fp8check.triton import releases

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the planted GEMM kernels
    import gemm_plants as plants

    a, sa, b, sb = gemm.gemm_inputs(gemm.GemmCase(16, 32, 64), "e4m3fn", "mx", 0)
    ta, tb = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (a, b))
    call = lambda: plants.mx_gemm(ta, torch.from_numpy(sa), tb, torch.from_numpy(sb))  # noqa: E731
    if releases.accepting(releases.feature_named("tl.dot_scaled")):  # 3.8, 3.9: it runs
        with ft.interpreting(), ft.faithful("sm90"):
            assert call().shape == (16, 32)
        return
    with pytest.raises(ft.TritonFeatureError) as err, ft.interpreting(), ft.faithful("sm90"):
        call()
    assert str(err.value).endswith("fp8check runs it under Triton 3.8.0 and 3.9.0")


def test_a_refusal_message_from_another_function_is_not_taken_for_the_feature():
    from fp8check.triton import releases

    def dot_scaled():
        raise AttributeError("'str' object has no attribute 'value'")

    def elsewhere():
        raise AttributeError("'str' object has no attribute 'value'")

    for fn, expected in ((dot_scaled, True), (elsewhere, False)):
        try:
            fn()
        except AttributeError as exc:
            assert releases._raised_in(exc, "dot_scaled") is expected


# -- pointer hints on the target's addresses ---------------------------------------------------------------

@triton.jit
def _aligned_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    base = tl.multiple_of(x_ptr, 256)  # the hint: x starts 256-byte aligned
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(base + offs, mask=offs < n), mask=offs < n)


def _cpu_storage_not_256_aligned() -> torch.Tensor:
    """A fresh tensor whose CPU storage starts at an odd multiple of 64 bytes (torch's CPU alignment), so
    that the CPU address makes the hint false while the target's 512-byte allocator makes it true."""
    kept = []
    while True:
        t = torch.arange(1.0, 65.0)
        if t.data_ptr() % 256:
            return t
        kept.append(t)


def test_a_256_byte_hint_on_a_tensor_base_holds_on_the_gpu_and_is_no_finding():
    x = _cpu_storage_not_256_aligned()
    y = torch.zeros(64)
    _, faults = run(lambda: _aligned_copy[(1,)](x, y, 64, BLOCK=64))
    assert faults == [] and torch.equal(y, x)
    assert ft.get_target("sm90").allocator.alignment == 512 == ft.get_target("gfx942").allocator.alignment


def test_the_same_hint_on_a_view_16_floats_into_its_storage_is_false_on_the_gpu_too():
    storage = torch.arange(1.0, 81.0)
    x = storage[16:]  # 64 bytes past the storage's start: on the GPU too, x.data_ptr() % 256 == 64
    y = torch.zeros(64)
    _, faults = run(lambda: _aligned_copy[(1,)](x, y, 64, BLOCK=64), target="gfx942")
    assert kinds(faults) == ["false_hint"]
    (f,) = faults
    assert "tl.multiple_of(..., 256)" in f.detail and "byte offsets into the storage [64]" in f.detail


@triton.jit
def _over_aligned(x_ptr, y_ptr, BLOCK: tl.constexpr):
    base = tl.multiple_of(x_ptr, 1024)  # more than the allocator promises
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(base + offs))


def test_a_hint_beyond_the_allocators_alignment_is_a_finding():
    x, y = torch.arange(1.0, 9.0), torch.zeros(8)
    _, faults = run(lambda: _over_aligned[(1,)](x, y, BLOCK=8))
    assert kinds(faults) == ["false_hint"] and "multiple of 512 bytes only" in faults[0].detail

"""The batched fast path (fp8check.triton.batched) gives the stock loop's bits, faults and errors.

Each kernel runs twice in the faithful interpreter, programs batched and one
at a time (``batched.sequential()``, Triton's own loop), and every output
byte, every fault the sanitizer reports and every error must be the same.
Kernels that cannot run batched (control flow that differs between
programs, programs that read each other's stores, atomics, faults) must fall
back, and say why.
"""

from __future__ import annotations

import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import fp8check.triton as ft  # noqa: E402
from fp8check.triton import batched, sanitizer  # noqa: E402

pytestmark = pytest.mark.skipif(not batched.supported(), reason=f"batched interpretation is written for Triton "
                                f"{', '.join(batched.SUPPORTED_TRITON_VERSIONS)}")
torch = pytest.importorskip("torch")


def both(target: str, fn):
    """fn() batched and one program at a time: (batched result, sequential result, stats, faults of each)."""
    out = []
    for seq in (False, True):
        with ft.interpreting(), ft.faithful(target), sanitizer.collect() as found, batched.stats() as st:
            if seq:
                with batched.sequential():
                    r = fn()
            else:
                r = fn()
        out.append((r, st, [f.to_dict() for f in found.faults]))
    (rb, sb, fb), (rs, ss, fs) = out
    return rb, rs, sb, fb, fs


def same_bits(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same_bits(a[k], b[k])
        return
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same_bits(x, y)
        return
    a = a.contiguous().view(torch.uint8).numpy() if isinstance(a, torch.Tensor) else np.asarray(a).view(np.uint8)
    b = b.contiguous().view(torch.uint8).numpy() if isinstance(b, torch.Tensor) else np.asarray(b).view(np.uint8)
    assert a.shape == b.shape
    diff = np.flatnonzero(a.reshape(-1) != b.reshape(-1))
    assert diff.size == 0, f"{diff.size} bytes differ, first at byte {diff[:5].tolist()}"


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_op_table_kernels_give_the_same_bits_batched(target, monkeypatch):
    from tests.triton_faithful import op_kernels

    monkeypatch.setattr(op_kernels, "BLOCK", 64)  # many programs per launch
    data = op_kernels.inputs()
    rb, rs, st, fb, fs = both(target, lambda: op_kernels.run(data, "cpu", ft.interpreted))
    same_bits(rb, rs)
    assert st.batched_programs > 0.9 * st.programs, st
    assert fb == fs


# -- kernels that use every shape op, on 1-D and 2-D grids ----------------------------------------------


@triton.jit
def _shapes_kernel(x_ptr, y_ptr, s_ptr, c_ptr, d_ptr, w_ptr, M: tl.constexpr, N: tl.constexpr, FP8: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * M + tl.arange(0, M)
    cols = pid_n * N + tl.arange(0, N)
    ld = tl.num_programs(1) * N
    offs = rows[:, None] * ld + cols[None, :]
    offs = tl.multiple_of(offs, [1, 1])
    x = tl.load(x_ptr + offs).to(tl.float32)
    amax_rows = tl.max(tl.abs(x), axis=1)  # (M,)
    amax_cols = tl.max(tl.abs(x), axis=0, keep_dims=True)  # (1, N)
    total = tl.sum(x, axis=1) + tl.sum(tl.trans(x), axis=0)  # sums along both axes
    scale = tl.maximum(amax_rows, 1e-12) / 448.0
    y = tl.clamp(x / scale[:, None], -448.0, 448.0)
    tl.store(y_ptr + offs, y.to(FP8))
    tl.store(s_ptr + pid_n * tl.num_programs(0) * M + rows, scale + 0.0 * total)
    csum = tl.cumsum(x, axis=1)
    flat = tl.reshape(csum, (M * N,))
    a, b = tl.split(tl.reshape(tl.join(amax_cols, amax_cols * 2.0), (1, N, 2)))
    tl.store(c_ptr + offs, tl.reshape(flat, (M, N)) + tl.broadcast_to(a + b, (M, N)))
    w = tl.load(w_ptr + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :])
    acc = tl.dot(x, w, input_precision="ieee")
    imax = tl.argmax(x, axis=1)
    tl.store(d_ptr + offs, acc + imax[:, None].to(tl.float32))
    for k in range(0, N, N // 2):  # a loop with uniform bounds
        if k > 0:
            tl.store(d_ptr + offs, tl.load(d_ptr + offs) + k)


@pytest.mark.parametrize("target,fp8", [("sm90", "e4m3fn"), ("gfx942", "e4m3fnuz")])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shape_ops_reductions_dots_and_loops_give_the_same_bits_batched(target, fp8, dtype):
    M, N, GM, GN = 16, 16, 5, 3
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(GM * M, GN * N, generator=g) * 50).to(getattr(torch, dtype))
    x[3, 4], x[20, 7], x[40, 2] = float("nan"), float("inf"), -0.0
    w = torch.randn(N, N, generator=g)
    fp8_dtype = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}[fp8]
    tl_fp8 = {"e4m3fn": tl.float8e4nv, "e4m3fnuz": tl.float8e4b8}[fp8]

    def run():
        y = torch.empty(x.shape, dtype=fp8_dtype)
        s = torch.empty(GN * GM * M, dtype=torch.float32)
        c = torch.empty(x.shape, dtype=torch.float32)
        d = torch.empty(x.shape, dtype=torch.float32)
        ft.interpreted(_shapes_kernel)[(GM, GN)](x, y, s, c, d, w, M=M, N=N, FP8=tl_fp8)
        return y, s, c, d

    rb, rs, st, fb, fs = both(target, run)
    same_bits(rb, rs)
    assert st.batched_programs == GM * GN and not st.fallbacks, st
    assert fb == fs == []


# -- what must fall back --------------------------------------------------------------------------------


@triton.jit
def _first_program_differs(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if pid == 0:
        x = x * 2.0
    tl.store(y_ptr + offs, x)


@triton.jit
def _reads_the_previous_program(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))
    prev = tl.maximum(pid - 1, 0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(y_ptr + prev) + 1.0)  # y of program pid-1: written before, in order


@triton.jit
def _tensorwise_amax(x_ptr, amax_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_max(amax_ptr, tl.max(tl.abs(tl.load(x_ptr + offs)), axis=0))


@triton.jit
def _loop_bound_per_program(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(pid + 1):
        acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
    tl.store(y_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


@pytest.mark.parametrize("kernel,reason", [
    (_first_program_differs, "a value used by Python differs between programs"),
    (_reads_the_previous_program, "a program loads what another one stores"),
    (_tensorwise_amax, "atomic"),
    (_loop_bound_per_program, "a value used by Python differs between programs"),
])
def test_what_programs_do_differently_falls_back_to_the_stock_loop(kernel, reason):
    BLOCK, P = 32, 9
    x0 = torch.randn(P * BLOCK, generator=torch.Generator().manual_seed(1))

    def run():
        x = x0.clone()
        if kernel is _tensorwise_amax:
            amax = torch.zeros(1)
            ft.interpreted(kernel)[(P,)](x, amax, BLOCK=BLOCK)
            return x, amax
        y = torch.zeros_like(x)
        ft.interpreted(kernel)[(P,)](x, y, BLOCK=BLOCK)
        return x, y

    rb, rs, st, fb, fs = both("sm90", run)
    same_bits(rb, rs)
    assert reason in st.fallbacks, st
    assert fb == fs


# -- faults: the same findings, batched or not ------------------------------------------------------------


@triton.jit
def _stride_bug(x_ptr, y_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols)
    tl.store(y_ptr + row * stride_x + cols, x.to(tl.float8e4nv), mask=cols < n_cols)  # y is n_cols wide


@triton.jit
def _false_assume(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.assume(pid > 0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _false_multiple_of(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    start = tl.multiple_of(tl.program_id(0) * n, 16)  # n = 10: false for odd programs
    offs = start + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=tl.arange(0, BLOCK) < n), mask=tl.arange(0, BLOCK) < n)


@triton.jit
def _race(x_ptr, y_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK)))


@triton.jit
def _uninitialised(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.load(y_ptr + offs)  # y is an output nobody writes before
    tl.store(y_ptr + offs + BLOCK * tl.num_programs(0), tl.load(x_ptr + offs) + y)


def test_faults_are_the_same_batched_or_not():
    BLOCK, P = 16, 6
    x = torch.randn(P, 24, generator=torch.Generator().manual_seed(3))[:, :BLOCK]  # rows padded: stride 24

    cases = {
        "stride": lambda: ft.interpreted(_stride_bug)[(P,)](x, y8 := torch.zeros(P, BLOCK, dtype=torch.float8_e4m3fn),
                                                         BLOCK, x.stride(0), BLOCK=BLOCK) or y8,
        "assume": lambda: ft.interpreted(_false_assume)[(P,)](xc := x.contiguous(), yc := torch.zeros_like(xc),
                                                              BLOCK=BLOCK) or yc,
        "multiple_of": lambda: ft.interpreted(_false_multiple_of)[(P,)](xc := x.contiguous(), yc := torch.zeros(200),
                                                                        10, BLOCK=BLOCK) or yc,
        "race": lambda: ft.interpreted(_race)[(P,)](xc := x.contiguous(), yc := torch.zeros(BLOCK), BLOCK=BLOCK) or yc,
        "uninitialised": lambda: ft.interpreted(_uninitialised)[(P,)](xc := x.contiguous(),
                                                                      yc := torch.empty(2 * P * BLOCK),
                                                                      BLOCK=BLOCK) or yc[P * BLOCK:],
    }
    kinds = {"stride": "out_of_bounds", "assume": "false_hint", "multiple_of": "false_hint", "race": "race",
             "uninitialised": "uninitialised"}
    for name, fn in cases.items():
        rb, rs, st, fb, fs = both("sm90", fn)
        if name != "uninitialised":  # its output holds what torch.empty held
            same_bits(rb, rs)
        assert fb == fs, name
        assert {f["kind"] for f in fb} == {kinds[name]}, (name, fb)


def test_an_error_in_a_kernel_is_the_stock_loop_error():
    @triton.jit
    def bad(x_ptr, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK == 3, "BLOCK must be 3")

    x = torch.zeros(4)
    errors = []
    for seq in (False, True):
        with ft.interpreting(), ft.faithful("sm90"), batched.stats() as st:
            with batched.sequential() if seq else batched.stats():
                with pytest.raises(Exception) as info:
                    ft.interpreted(bad)[(4,)](x, BLOCK=4)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_the_batched_path_is_restored_on_exit():
    from triton.runtime import interpreter as interp

    before = interp.GridExecutor.__dict__["__call__"], interp.InterpretedFunction.__dict__["__call__"]
    with ft.interpreting():
        assert interp.GridExecutor.__dict__["__call__"] is not before[0]
    assert (interp.GridExecutor.__dict__["__call__"], interp.InterpretedFunction.__dict__["__call__"]) == before

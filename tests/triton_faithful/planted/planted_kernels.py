"""Planted kernel faults: Triton kernels (and their launchers) as a kernel author might write them, each
with one fault that the faithful interpreter must report as a finding naming its line, never crash on.

Each function below is a declared kernel of ``pyproject.toml`` next to this file (``triton-target``
sm90). The line of each fault is marked ``# FAULT: <kind>`` (the tests find it by that mark). The casts
write e4m3fn (e4m3fnuz for gfx942), or ``out_dtype`` (benchmarks/sanitizer_peer.py runs them with
float16 outputs too, for a tool that cannot run FP8 conversions).

- :func:`assume_cast`: ``tl.assume(pid > 0)``, false for program 0 (undefined behaviour once compiled).
- :func:`stride_cast`: the launcher indexes its contiguous output with the *input's* row stride; on a
  row-padded input (a slice of a wider matrix) the last rows are written past the output's storage.
- :func:`uninit_cast`: a two-pass cast whose first pass skips the last element of its scratch buffer
  (``torch.empty``); the second pass reads it.
- :func:`racy_tensorwise`: a tensorwise quantizer whose amax kernel stores each program's partial amax
  to one address with ``tl.store`` (not ``tl.atomic_max``): programs store different values there.
- :func:`autotuned_cast`: ``@triton.autotune`` over three configs; the widest config processes its
  block in two halves, and the high half is loaded with the low half's mask: only the 2048-wide config
  reads past the end of its input.
- :func:`good_autotuned_cast` (sm90, e4m3fn) and :func:`good_autotuned_cast_fnuz` (gfx942, e4m3fnuz): an
  autotuned kernel without a fault (``key``, ``prune_configs_by``, ``reset_to_zero``, heuristics): every
  config conforms.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024
FP8 = torch.float8_e4m3fn


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().reshape(-1)


# -- a false tl.assume ------------------------------------------------------------------------------

@triton.jit
def _assume_cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.assume(pid > 0)  # FAULT: false_hint
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask)


def assume_cast(x: torch.Tensor, out_dtype: torch.dtype = FP8) -> torch.Tensor:
    src = _flat(x)
    y = torch.empty(src.shape, dtype=out_dtype)
    if src.numel():
        _assume_cast_kernel[(triton.cdiv(src.numel(), BLOCK),)](src, y, src.numel(), BLOCK=BLOCK)
    return y.reshape(x.shape)


# -- a launcher stride bug ---------------------------------------------------------------------------

@triton.jit
def _row_cast_kernel(x_ptr, y_ptr, n_cols, x_row_stride, x_col_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_row_stride + cols * x_col_stride, mask=mask)
        tl.store(y_ptr + row * y_row_stride + cols, x.to(y_ptr.dtype.element_ty), mask=mask)  # FAULT: out_of_bounds


def stride_cast(x: torch.Tensor, out_dtype: torch.dtype = FP8) -> torch.Tensor:
    x2 = x.reshape(1, -1) if x.dim() < 2 else x.reshape(-1, x.shape[-1])
    y = torch.empty(x2.shape, dtype=out_dtype)
    rows, cols = x2.shape
    if x2.numel():
        # the bug: the output is contiguous, its row stride is `cols`, not the input's
        _row_cast_kernel[(rows,)](x2, y, cols, x2.stride(0), x2.stride(1), x2.stride(0), BLOCK=BLOCK)
    return y.reshape(x.shape)


# -- an uninitialised read ---------------------------------------------------------------------------

@triton.jit
def _widen_kernel(x_ptr, t_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n - 1  # the bug: the last element is never written
    tl.store(t_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.float32), mask=mask)


@triton.jit
def _narrow_kernel(t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    t = tl.load(t_ptr + offs, mask=mask)  # FAULT: uninitialised
    tl.store(y_ptr + offs, t.to(y_ptr.dtype.element_ty), mask=mask)


def uninit_cast(x: torch.Tensor, out_dtype: torch.dtype = FP8) -> torch.Tensor:
    src = _flat(x)
    n = src.numel()
    t = torch.empty(n, dtype=torch.float32)
    y = torch.empty(n, dtype=out_dtype)
    if n:
        grid = (triton.cdiv(n, BLOCK),)
        _widen_kernel[grid](src, t, n, BLOCK=BLOCK)
        _narrow_kernel[grid](t, y, n, BLOCK=BLOCK)
    return y.reshape(x.shape)


# -- a write-write race ------------------------------------------------------------------------------

@triton.jit
def _amax_kernel(x_ptr, amax_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    a = tl.where(tl.abs(x) < float("inf"), tl.abs(x), 0.0)  # finite values only (NaN compares false)
    tl.store(amax_ptr, tl.max(a, axis=0))  # FAULT: race


@triton.jit
def _scale_cast_kernel(x_ptr, scale_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    scale = tl.load(scale_ptr)
    y = tl.clamp(tl.div_rn(x, scale), -448.0, 448.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + offs, y.to(tl.float8e4nv), mask=mask)


def racy_tensorwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    src = _flat(x)
    n = src.numel()
    amax = torch.zeros((), dtype=torch.float32)
    y = torch.empty(n, dtype=torch.float8_e4m3fn)
    if n:
        grid = (triton.cdiv(n, BLOCK),)
        _amax_kernel[grid](src, amax, n, BLOCK=BLOCK)
    scale = torch.clamp(amax, min=1e-12) / torch.tensor(448.0, dtype=torch.float32)
    if n:
        _scale_cast_kernel[grid](src, scale, y, n, BLOCK=BLOCK)
    return y.reshape(x.shape), scale


# -- one bad autotune config among good ones ---------------------------------------------------------

@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512}),
                          triton.Config({"BLOCK": 2048}, num_warps=8)], key=["n"])
@triton.jit
def _autotuned_cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    if BLOCK >= 2048:  # wide blocks in two halves
        lo = start + tl.arange(0, BLOCK // 2)
        hi = lo + BLOCK // 2
        x_lo = tl.load(x_ptr + lo, mask=lo < n)
        x_hi = tl.load(x_ptr + hi, mask=lo < n)  # FAULT: out_of_bounds (BLOCK=2048: the low half's mask)
        tl.store(y_ptr + lo, x_lo.to(y_ptr.dtype.element_ty), mask=lo < n)
        tl.store(y_ptr + hi, x_hi.to(y_ptr.dtype.element_ty), mask=hi < n)
    else:
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=offs < n)


def autotuned_cast(x: torch.Tensor, out_dtype: torch.dtype = FP8) -> torch.Tensor:
    src = _flat(x)
    y = torch.empty(src.shape, dtype=out_dtype)
    n = src.numel()
    if n:
        _autotuned_cast_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](src, y, n)
    return y.reshape(x.shape)


# -- the same, correct: key, prune_configs_by, reset_to_zero --------------------------------------

def _prune(configs, named_args, **kwargs):
    """Drop configs wider than the input needs (at least one stays)."""
    n = named_args["n"]
    kept = [c for c in configs if c.kwargs["BLOCK"] <= max(256, triton.next_power_of_2(n))]
    return kept or configs[:1]


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512}),
                          triton.Config({"BLOCK": 4096})], key=["n"], prune_configs_by={"early_config_prune": _prune},
                 reset_to_zero=["count_ptr"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _good_autotuned_cast_kernel(x_ptr, y_ptr, count_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty))
    else:
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=offs < n)
    tl.atomic_add(count_ptr, 1)


def good_autotuned_cast(x: torch.Tensor, out_dtype: torch.dtype = FP8) -> torch.Tensor:
    src = _flat(x)
    y = torch.empty(src.shape, dtype=out_dtype)
    count = torch.zeros(1, dtype=torch.int32)
    n = src.numel()
    if n:
        _good_autotuned_cast_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](src, y, count, n)
    return y.reshape(x.shape)


def good_autotuned_cast_fnuz(x: torch.Tensor) -> torch.Tensor:
    """The same kernel for MI300 (gfx942): e4m3fnuz."""
    return good_autotuned_cast(x, torch.float8_e4m3fnuz)

"""Capture every FP8 cast and FP8 GEMM of torchao float8 training, results unchanged.

:func:`capture_float8` wraps, for the duration of a ``with`` block, the
three places torchao 0.18 goes through in a ``Float8Linear`` step:

- ``matmul_with_hp_or_float8_args.forward`` / ``.backward`` (to know which
  linear and which GEMM a cast belongs to: the weight's storage names the
  module);
- ``hp_tensor_to_float8_dynamic`` as ``float8_linear`` calls it (every
  operand cast: the high-precision tensor, the fp8 data and the scale it
  returned);
- the ``aten.mm`` entry of ``FLOAT8_OPS_TABLE`` (every FP8 GEMM: both
  operands' data and scales, and the output).

Each wrapper calls the original with the same arguments and returns its
result object untouched; only copies are kept. Whatever is installed at
those names when the block starts is what runs (so a test can plant a
faulty cast there first). Everything is restored when the block ends.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from fp8check.errors import FP8CheckError

__all__ = ["CastRecord", "GemmRecord", "Capture", "capture_float8", "dtype_name", "to_numpy_2d"]

_ROLE_OPERANDS = {  # (phase, gemm_input_role name, occurrence) -> operand
    ("forward", "INPUT", 0): "input", ("forward", "WEIGHT", 0): "weight",
    ("backward", "GRAD_OUTPUT", 0): "grad_output", ("backward", "WEIGHT", 0): "weight_t",
    ("backward", "GRAD_OUTPUT", 1): "grad_output_t", ("backward", "INPUT", 0): "input_t",
}


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.").removeprefix("float8_")


def to_numpy_2d(t: Any) -> np.ndarray:
    """A contiguous NumPy copy of ``t`` as the 2-D matrix the GEMM sees (leading dims flattened)."""
    import torch

    t = t.detach()
    if t.dim() != 2:
        t = t.reshape(-1, t.shape[-1]) if t.dim() > 0 else t.reshape(1, 1)
    if t.dtype.itemsize == 1 and t.dtype.is_floating_point:
        return t.cpu().contiguous().view(torch.uint8).numpy().copy()
    return t.cpu().to(torch.float32).contiguous().numpy().copy()


@dataclass
class CastRecord:
    """One operand cast as torchao made it."""

    step: int
    layer: str
    operand: str
    hp: np.ndarray  # float32, 2-D
    hp_dtype: str
    dtype: str  # the fp8 dtype torchao cast to: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz
    codes: np.ndarray  # uint8, 2-D
    scale: np.ndarray  # float32, torchao's convention (multiplies the input), flattened
    axiswise_dim: int | None  # None: one scale; -1: one per row of the 2-D matrix; 0: one per column


@dataclass
class GemmRecord:
    step: int
    layer: str
    gemm: str  # output, grad_input, grad_weight
    fmt_a: str
    fmt_b: str
    qa: np.ndarray
    sa: np.ndarray  # torchao scales (dequant divides by them), shaped to broadcast over (M, K)
    qb: np.ndarray
    sb: np.ndarray  # shaped to broadcast over (K, N)
    out: np.ndarray  # float64 of the output
    out_dtype: str


@dataclass
class Capture:
    casts: list[CastRecord] = field(default_factory=list)
    gemms: list[GemmRecord] = field(default_factory=list)
    step: int = 0
    unattributed: int = 0  # casts seen outside a Float8Linear GEMM (counted, never guessed)
    _layer: str | None = None
    _phase: str = ""
    _seen: dict[str, int] = field(default_factory=dict)
    _mm: int = 0


def _scale_2d(scale: Any, like_rows: int, rows: bool) -> np.ndarray:
    s = scale.detach().cpu().to(__import__("torch").float32).numpy().astype(np.float32)
    if s.size == 1:
        return s.reshape(1, 1)
    return s.reshape(-1, 1) if rows else s.reshape(1, -1)


@contextlib.contextmanager
def capture_float8(model: Any) -> Iterator[Capture]:
    """Record every cast and FP8 GEMM of ``model``'s Float8Linear modules inside the block.

    Set ``capture.step`` before each training step; records carry it.
    """
    try:
        import torch
        from torchao.float8 import float8_linear, float8_ops
        from torchao.float8.float8_training_tensor import Float8TrainingTensor
    except Exception as exc:  # torchao may fail at import for many reasons
        raise FP8CheckError(f"capturing float8 training casts needs torchao: {exc}") from None

    cap = Capture()
    names = {m.weight.untyped_storage().data_ptr(): n for n, m in model.named_modules()
             if isinstance(m, float8_linear.Float8Linear)}
    fn_cls = float8_linear.matmul_with_hp_or_float8_args
    orig_forward, orig_backward = fn_cls.forward, fn_cls.backward
    orig_cast = float8_linear.hp_tensor_to_float8_dynamic
    aten_mm = torch.ops.aten.mm.default
    orig_mm = float8_ops.FLOAT8_OPS_TABLE[aten_mm]

    def enter(weight_hp_t: Any, phase: str) -> None:
        cap._layer = names.get(weight_hp_t.untyped_storage().data_ptr(), "<unknown linear>")
        cap._phase, cap._seen, cap._mm = phase, {}, 0

    def forward(ctx: Any, input_hp: Any, weight_hp_t: Any, *rest: Any) -> Any:
        enter(weight_hp_t, "forward")
        try:
            return orig_forward(ctx, input_hp, weight_hp_t, *rest)
        finally:
            cap._layer = None

    def backward(ctx: Any, grad_output: Any) -> Any:
        enter(ctx.saved_tensors[1], "backward")
        try:
            return orig_backward(ctx, grad_output)
        finally:
            cap._layer = None

    def cast(hp_tensor: Any, float8_dtype: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig_cast(hp_tensor, float8_dtype, *args, **kwargs)
        if cap._layer is None:
            cap.unattributed += 1
            return result
        role = kwargs.get("gemm_input_role")
        role_name = getattr(role, "name", str(role))
        k = cap._seen.get(role_name, 0)
        cap._seen[role_name] = k + 1
        operand = _ROLE_OPERANDS.get((cap._phase, role_name, k), f"{cap._phase}:{role_name}:{k}")
        cap.casts.append(CastRecord(
            step=cap.step, layer=cap._layer, operand=operand, hp=to_numpy_2d(hp_tensor),
            hp_dtype=dtype_name(hp_tensor.dtype), dtype=dtype_name(result._data.dtype),
            codes=to_numpy_2d(result._data), scale=result._scale.detach().cpu().to(torch.float32).numpy().reshape(-1).copy(),
            axiswise_dim=None if result._axiswise_dim is None else (0 if result._axiswise_dim == 0 else -1)))
        return result

    def mm(aten_op: Any, args: Any, kwargs: Any = None) -> Any:
        out = orig_mm(aten_op, args, kwargs)
        a, b = args[0], args[1]
        if cap._layer is not None and isinstance(a, Float8TrainingTensor) and isinstance(b, Float8TrainingTensor):
            gemm = "output" if cap._phase == "forward" else ("grad_input", "grad_weight")[min(cap._mm, 1)]
            cap._mm += 1
            cap.gemms.append(GemmRecord(
                step=cap.step, layer=cap._layer, gemm=gemm, fmt_a=dtype_name(a._data.dtype), fmt_b=dtype_name(b._data.dtype),
                qa=to_numpy_2d(a._data), sa=_scale_2d(a._scale, a.shape[0], rows=True),
                qb=b._data.detach().cpu().contiguous().view(torch.uint8).numpy().copy(),
                sb=_scale_2d(b._scale, b.shape[1], rows=False),
                out=out.detach().cpu().to(torch.float64).numpy().copy(), out_dtype=dtype_name(out.dtype)))
        return out

    fn_cls.forward, fn_cls.backward = staticmethod(forward), staticmethod(backward)
    float8_linear.hp_tensor_to_float8_dynamic = cast
    float8_ops.FLOAT8_OPS_TABLE[aten_mm] = mm
    try:
        yield cap
    finally:
        fn_cls.forward, fn_cls.backward = staticmethod(orig_forward), staticmethod(orig_backward)
        float8_linear.hp_tensor_to_float8_dynamic = orig_cast
        float8_ops.FLOAT8_OPS_TABLE[aten_mm] = orig_mm


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

Under torch.distributed (:mod:`fp8check.training.distributed`) three more
places are wrapped, where torchao casts outside a Float8Linear GEMM:

- ``WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather`` (FSDP2 with
  ``enable_fsdp_float8_all_gather``: each rank casts its own shard of the
  weight, with the all-reduced amax or the precomputed scale, and FSDP
  all-gathers the FP8 bytes): a record per shard (``placement="fsdp-shard"``);
- the input casts of ``Float8ColwiseParallel``/``Float8RowwiseParallel``
  (``float8_tensor_parallel.hp_tensor_to_float8_dynamic``) and
  ``NoopFwToFloat8BwDynamic.backward`` (tensor parallelism's grad_output cast).

A cast of a DTensor is recorded as its local shard, with its placement
(``R``, ``S(0)``, ``S(1)``): the checker puts the shards of all ranks back
together before it compares. The layer of a cast is the Float8Linear whose
forward (a forward pre-hook, run first) or whose GEMM's backward (kept on
the autograd context) it belongs to: under FSDP2 the weight a GEMM sees is
a fresh unsharded buffer, so storage addresses name nothing.

Each wrapper calls the original with the same arguments and returns its
result object untouched; only copies are kept. Whatever is installed at
those names when the block starts is what runs (so a test can plant a
faulty cast there first). Everything is restored when the block ends.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from fp8check.errors import FP8CheckError
from fp8check.matmul.accumulation import model_for_device
from fp8check.patching import PatchScope

__all__ = ["CastRecord", "GemmRecord", "Capture", "capture_float8", "dtype_name", "to_numpy_2d", "placement"]

_ROLE_OPERANDS = {  # (phase, gemm_input_role name, occurrence) -> operand
    ("forward", "INPUT", 0): "input", ("forward", "WEIGHT", 0): "weight",
    ("backward", "GRAD_OUTPUT", 0): "grad_output", ("backward", "WEIGHT", 0): "weight_t",
    ("backward", "GRAD_OUTPUT", 1): "grad_output_t", ("backward", "INPUT", 0): "input_t",
}


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.").removeprefix("float8_")


def _local(t: Any) -> Any:
    """A DTensor's local shard (anything else as it is)."""
    return getattr(t, "_local_tensor", t)


def placement(t: Any) -> str:
    """``R``/``S(d)``/``P`` of a one-dimensional-mesh DTensor (dims of the 2-D matrix the GEMM sees); '' for a tensor."""
    places = getattr(t, "placements", None)
    if not places:
        return ""
    p = places[0]
    if p.is_shard():
        dim = p.dim if p.dim >= 0 else p.dim + t.dim()
        return f"S({0 if dim < t.dim() - 1 else 1})"
    return "R" if p.is_replicate() else "P"


def to_numpy_2d(t: Any) -> np.ndarray:
    """A contiguous NumPy copy of ``t`` as the 2-D matrix the GEMM sees (leading dims flattened; a DTensor's
    local shard)."""
    import torch

    # A copy in torch before .numpy(): .numpy() marks the storage it views not resizable, and FSDP2 frees
    # its unsharded parameters by resizing their storage.
    t = _local(t).detach()
    if t.dim() != 2:
        t = t.reshape(-1, t.shape[-1]) if t.dim() > 0 else t.reshape(1, 1)
    if t.dtype.itemsize == 1 and t.dtype.is_floating_point:
        return t.cpu().clone().view(torch.uint8).numpy()
    return t.cpu().to(torch.float32, copy=True).contiguous().numpy()


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
    placement: str = ""  # "": the whole tensor; "R", "S(0)", "S(1)": a DTensor's local part; "fsdp-shard": FSDP2's
    rank: int = 0


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
    accumulation: str = "float32"  # the accumulation model of the device the GEMM ran on (fp8check.matmul)


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
    _module: str | None = None  # the Float8Linear whose forward is running


def _scale_2d(scale: Any, like_rows: int, rows: bool) -> np.ndarray:
    s = scale.detach().cpu().to(__import__("torch").float32, copy=True).numpy()
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
    rank = torch.distributed.get_rank() if torch.distributed.is_available() and torch.distributed.is_initialized() else 0
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, float8_linear.Float8Linear)]
    names = {m.weight.untyped_storage().data_ptr(): n for n, m in linears if not hasattr(m.weight, "placements")}
    shards = {id(_local(m.weight)): n for n, m in linears}  # FSDP2's sharded parameters (their local tensors)
    fn_cls = float8_linear.matmul_with_hp_or_float8_args
    orig_forward, orig_backward = fn_cls.forward, fn_cls.backward
    orig_cast = float8_linear.hp_tensor_to_float8_dynamic
    aten_mm = torch.ops.aten.mm.default
    orig_mm = float8_ops.FLOAT8_OPS_TABLE[aten_mm]

    def enter(layer: str, phase: str) -> None:
        cap._layer = layer
        cap._phase, cap._seen, cap._mm = phase, {}, 0

    def record(hp: Any, result: Any, layer: str, operand: str, where: str = "") -> None:
        data, scale = _local(result)._data, _local(result)._scale
        axis = _local(result)._axiswise_dim
        cap.casts.append(CastRecord(
            step=cap.step, layer=layer, operand=operand, hp=to_numpy_2d(hp), hp_dtype=dtype_name(hp.dtype),
            dtype=dtype_name(data.dtype), codes=to_numpy_2d(data),
            scale=_local(scale).detach().cpu().to(torch.float32, copy=True).numpy().reshape(-1),
            axiswise_dim=None if axis is None else (0 if axis == 0 else -1), placement=where or placement(hp),
            rank=rank))

    def pre_hook(name: str) -> Any:
        def hook(_m: Any, _args: Any) -> None:
            cap._module = name
        return hook

    hooks = [m.register_forward_pre_hook(pre_hook(n), prepend=True) for n, m in linears]

    def forward(ctx: Any, input_hp: Any, weight_hp_t: Any, *rest: Any) -> Any:
        layer = names.get(_local(weight_hp_t).untyped_storage().data_ptr()) if not hasattr(weight_hp_t, "_data") \
            and not hasattr(weight_hp_t, "placements") else None
        layer = layer or cap._module or "<unknown linear>"
        ctx._fp8check_layer = layer
        enter(layer, "forward")
        try:
            return orig_forward(ctx, input_hp, weight_hp_t, *rest)
        finally:
            cap._layer = None

    def backward(ctx: Any, grad_output: Any) -> Any:
        enter(getattr(ctx, "_fp8check_layer", "<unknown linear>"), "backward")
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
        record(hp_tensor, result, cap._layer, operand)
        return result

    def mm(aten_op: Any, args: Any, kwargs: Any = None) -> Any:
        out = orig_mm(aten_op, args, kwargs)
        a, b = args[0], args[1]
        if cap._layer is not None and isinstance(a, Float8TrainingTensor) and isinstance(b, Float8TrainingTensor):
            gemm = "output" if cap._phase == "forward" else ("grad_input", "grad_weight")[min(cap._mm, 1)]
            cap._mm += 1
            out_dtype = dtype_name(out.dtype)
            rowwise = a._scale.numel() > 1 and b._scale.numel() > 1
            emulated = getattr(getattr(a._linear_mm_config, gemm, None), "emulate", True)
            if rowwise and out_dtype in ("float32", "float16") and not emulated:
                # torchao's real rowwise path (addmm_float8_unwrapped) computes in bfloat16 and converts after
                out_dtype = "bfloat16"
            # torchao's emulation is a float32 mm; its real path runs torch._scaled_mm on the device's tensor cores
            accumulation = "float32" if emulated else model_for_device(out.device).name
            cap.gemms.append(GemmRecord(
                step=cap.step, layer=cap._layer, gemm=gemm, fmt_a=dtype_name(a._data.dtype), fmt_b=dtype_name(b._data.dtype),
                qa=to_numpy_2d(a._data), sa=_scale_2d(a._scale, a.shape[0], rows=True),
                qb=b._data.detach().cpu().clone().view(torch.uint8).numpy(),
                sb=_scale_2d(b._scale, b.shape[1], rows=False),
                out=out.detach().cpu().to(torch.float64, copy=True).numpy(), out_dtype=out_dtype,
                accumulation=accumulation))
        return out

    scope = PatchScope()
    try:
        scope.set(fn_cls, "forward", staticmethod(forward))
        scope.set(fn_cls, "backward", staticmethod(backward))
        scope.set(float8_linear, "hp_tensor_to_float8_dynamic", cast)
        scope.set_item(float8_ops.FLOAT8_OPS_TABLE, aten_mm, mm)
        _patch_distributed(cap, scope, record, shards)
        yield cap
    finally:
        scope.restore()
        for h in hooks:
            h.remove()


def _patch_distributed(cap: Capture, scope: PatchScope, record: Any, shards: dict[int, str]) -> None:
    """Wrap torchao's casts outside a Float8Linear GEMM: FSDP2's per-shard weight casts, tensor parallelism's."""
    from torchao.float8 import float8_scaling_utils, float8_tensor_parallel, fsdp_utils

    weight_cls = fsdp_utils.WeightWithDynamicFloat8CastTensor
    orig_pre = weight_cls.fsdp_pre_all_gather
    orig_dyn, orig_static = fsdp_utils.hp_tensor_to_float8_dynamic, fsdp_utils.hp_tensor_and_scale_to_float8
    shard_layer: list[str | None] = [None]

    @functools.wraps(orig_pre)  # FSDP2 reads its signature
    def pre_all_gather(self: Any, *args: Any, **kwargs: Any) -> Any:
        shard_layer[0] = shards.get(id(self), "<unknown linear>")
        try:
            return orig_pre(self, *args, **kwargs)
        finally:
            shard_layer[0] = None

    def shard_cast(orig: Any) -> Any:
        def fn(hp: Any, *args: Any, **kwargs: Any) -> Any:
            result = orig(hp, *args, **kwargs)
            if shard_layer[0] is not None:
                record(hp, result, shard_layer[0], "weight", "fsdp-shard")
            return result
        return fn

    tp_orig = float8_tensor_parallel.hp_tensor_to_float8_dynamic

    def tp_input_cast(hp: Any, *args: Any, **kwargs: Any) -> Any:
        result = tp_orig(hp, *args, **kwargs)
        record(hp, result, cap._module or "<unknown linear>", "input")
        return result

    noop = float8_scaling_utils.NoopFwToFloat8BwDynamic
    noop_forward, noop_backward = noop.forward, noop.backward

    def noop_fw(ctx: Any, tensor: Any, *args: Any) -> Any:
        ctx._fp8check_layer = cap._module or "<unknown linear>"
        return noop_forward(ctx, tensor, *args)

    def noop_bw(ctx: Any, grad: Any) -> Any:
        out = noop_backward(ctx, grad)
        if out[0] is not grad:  # not already FP8
            record(grad, out[0], getattr(ctx, "_fp8check_layer", "<unknown linear>"), "grad_output")
        return out

    scope.set(weight_cls, "fsdp_pre_all_gather", pre_all_gather)
    scope.set(fsdp_utils, "hp_tensor_to_float8_dynamic", shard_cast(orig_dyn))
    scope.set(fsdp_utils, "hp_tensor_and_scale_to_float8", shard_cast(orig_static))
    scope.set(float8_tensor_parallel, "hp_tensor_to_float8_dynamic", tp_input_cast)
    scope.set(noop, "forward", staticmethod(noop_fw))
    scope.set(noop, "backward", staticmethod(noop_bw))

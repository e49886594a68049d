"""A tiny MoE layer through torchao's MXFP8 grouped-GEMM training path, every cast and GEMM checked.

torchao 0.18 trains MoE experts in FP8 through ``torchao.prototype.moe_training``: the expert
weights are wrapped (``quantize_(model, MXFP8TrainingOpConfig)``) so that ``torch._grouped_mm``
goes through ``_MXFP8GroupedMM``, which quantizes both operands of each of its three grouped GEMMs
to MX (e4m3fn elements, one e8m0 scale per 32 along the contraction) and multiplies. On a CPU the
``EMULATED`` kernel preference runs the same quantization (``to_mx``) and a dequantize-then-
``_grouped_mm`` GEMM; on a B200 the same casts feed CUTLASS kernels.

:func:`check_moe_step` records, for each grouped GEMM of each step, the six casts (forward input and
weight; grad_output and the transposed weight for grad_input; grad_output and input transposed for
grad_weight) with ``to_mx``'s own outputs, and the three outputs. Each cast is compared bit for bit
with fp8check's ``mx-e8m0-<mode>`` recipe (codes as bytes, scales as decoded e8m0); each GEMM, group
by group, with the exact product of the operands it was given, against
:func:`fp8check.training.step.gemm_bound`. Results are the same ``StepConformance`` the dense path
gives, so the terminal, JSON and HTML show them alike.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from fp8check import quantizers
from fp8check.errors import FP8CheckError, InvalidValueError
from fp8check.formats import E4M3FN, E8M0FNU
from fp8check.reference import decode
from fp8check.training.capture import dtype_name, to_numpy_2d
from fp8check.training.step import CastCheck, GemmCheck, gemm_bound

__all__ = ["MoEConfig", "TINY_MOE", "MOE_OPERANDS", "build_moe", "capture_mxfp8_grouped", "check_moe_step"]

# to_mx calls of one _MXFP8GroupedMM, in the order torchao 0.18 makes them
MOE_OPERANDS = {"forward": ("input", "weight"),
                "backward": ("grad_output", "weight_t", "grad_output_t", "input_t")}
SCALE_MODES = ("rceil", "floor", "ceil", "even")


@dataclass(frozen=True)
class MoEConfig:
    """Experts ``w1: (E, hidden, dim)`` and ``w2: (E, dim, hidden)``; tokens routed top-1 to group sizes
    ``groups`` (multiples of 32 and one that is not: MX blocks of grad_weight then straddle two experts)."""

    dim: int = 64
    hidden: int = 96
    groups: tuple[int, ...] = (64, 32, 80, 48)

    @property
    def experts(self) -> int:
        return len(self.groups)

    @property
    def tokens(self) -> int:
        return sum(self.groups)


TINY_MOE = MoEConfig()


def build_moe(cfg: MoEConfig = TINY_MOE, seed: int = 0) -> Any:
    import torch
    from torch import nn

    class Experts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(seed)
            self.w1 = nn.Parameter(torch.randn(cfg.experts, cfg.hidden, cfg.dim, generator=g) * cfg.dim ** -0.5)
            self.w2 = nn.Parameter(torch.randn(cfg.experts, cfg.dim, cfg.hidden, generator=g) * cfg.hidden ** -0.5)

        def forward(self, x: Any, offs: Any) -> Any:
            h = torch._grouped_mm(x, self.w1.transpose(-2, -1), offs=offs)
            return torch._grouped_mm(torch.nn.functional.silu(h), self.w2.transpose(-2, -1), offs=offs)

    return Experts()


@dataclass
class MXCast:
    step: int
    layer: str
    operand: str
    hp: np.ndarray  # float32, 2-D, blocks of 32 along the last dim
    hp_dtype: str
    dtype: str
    codes: np.ndarray
    scales: np.ndarray  # decoded e8m0, float64, (rows, cols // 32)
    mode: str


@dataclass
class MXGemm:
    step: int
    layer: str
    gemm: str  # output, grad_input, grad_weight
    out: np.ndarray  # float64
    out_dtype: str
    offsets: np.ndarray


@dataclass
class MoECapture:
    casts: list[MXCast]
    gemms: list[MXGemm]
    step: int = 0


def _scales(scale: Any) -> np.ndarray:
    import torch

    s = scale.detach().cpu().contiguous().view(torch.uint8).numpy()
    return decode(s.reshape(-1, s.shape[-1]), E8M0FNU).astype(np.float64)


@contextlib.contextmanager
def capture_mxfp8_grouped() -> Iterator[MoECapture]:
    """Record every ``to_mx`` cast and grouped-GEMM output of torchao's ``_MXFP8GroupedMM`` in the block."""
    try:
        from torchao.prototype.moe_training import mxfp8_grouped_mm as g
    except Exception as exc:
        raise FP8CheckError(f"checking MoE training needs torchao's moe_training: {exc}") from None
    cap = MoECapture(casts=[], gemms=[])
    fn = g._MXFP8GroupedMM
    orig_forward, orig_backward, orig_to_mx = fn.forward, fn.backward, g.to_mx
    layers: dict[int, str] = {}
    state: dict[str, Any] = {"phase": None, "layer": None, "k": 0, "calls": 0, "step": None}

    def to_mx(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        scale, data = orig_to_mx(tensor, *args, **kwargs)
        if state["phase"] is not None:
            names = MOE_OPERANDS[state["phase"]]
            k = state["k"]
            state["k"] = k + 1
            mode = kwargs.get("scaling_mode", args[2] if len(args) > 2 else None)
            cap.casts.append(MXCast(step=cap.step, layer=state["layer"], operand=names[k] if k < len(names) else f"extra{k}",
                                    hp=to_numpy_2d(tensor), hp_dtype=dtype_name(tensor.dtype),
                                    dtype=dtype_name(data.dtype), codes=to_numpy_2d(data), scales=_scales(scale),
                                    mode=str(getattr(mode, "value", mode)).lower()))
        return scale, data

    def forward(ctx: Any, input_act: Any, weight_t: Any, offs: Any = None, *rest: Any) -> Any:
        if state["step"] != cap.step:  # layers are numbered in forward order within a step
            state.update(step=cap.step, calls=0)
        layer = f"grouped_mm.{state['calls']}"
        state["calls"] += 1
        layers[id(ctx)] = layer
        state.update(phase="forward", layer=layer, k=0)
        try:
            out = orig_forward(ctx, input_act, weight_t, offs, *rest)
        finally:
            state["phase"] = None
        cap.gemms.append(MXGemm(step=cap.step, layer=layer, gemm="output", out=_f64(out), out_dtype=dtype_name(out.dtype),
                                offsets=offs.detach().cpu().numpy().astype(np.int64)))
        return out

    def backward(ctx: Any, grad_output: Any) -> Any:
        layer = layers.get(id(ctx), "grouped_mm.?")
        state.update(phase="backward", layer=layer, k=0)
        try:
            grads = orig_backward(ctx, grad_output)
        finally:
            state["phase"] = None
        offs = ctx.saved_tensors[2].detach().cpu().numpy().astype(np.int64)
        cap.gemms.append(MXGemm(step=cap.step, layer=layer, gemm="grad_input", out=_f64(grads[0]),
                                out_dtype=dtype_name(grads[0].dtype), offsets=offs))
        cap.gemms.append(MXGemm(step=cap.step, layer=layer, gemm="grad_weight", out=_f64(grads[1]),
                                out_dtype=dtype_name(grads[1].dtype), offsets=offs))
        return grads

    fn.forward, fn.backward, g.to_mx = staticmethod(forward), staticmethod(backward), to_mx
    try:
        yield cap
    finally:
        fn.forward, fn.backward, g.to_mx = staticmethod(orig_forward), staticmethod(orig_backward), orig_to_mx


def _f64(t: Any) -> np.ndarray:
    import torch

    return t.detach().cpu().to(torch.float64).numpy().copy()


def _check_cast(c: MXCast) -> CastCheck:
    mode = c.mode if c.mode in SCALE_MODES else "rceil"
    ref = quantizers.get(f"mx-e8m0-{mode}", E4M3FN)
    res = CastCheck(step=c.step, layer=c.layer, operand=c.operand, declared=f"MX block 32 e4m3fn, e8m0 {mode}",
                    dtype=c.dtype, shape=tuple(c.hp.shape), passed=True)
    if c.dtype != "e4m3fn":
        res.passed, res.category, res.detail = False, "format", f"cast to {c.dtype}; MXFP8 declares e4m3fn"
        return res
    q = quantizers.quantize(c.hp, ref)
    exp = np.asarray(q.scales, dtype=np.float64).reshape(-1)
    act = c.scales.reshape(-1)
    if act.size != exp.size:
        res.passed, res.category = False, "scale"
        res.detail = f"{act.size} scales; the recipe has {exp.size}"
        return res
    bad = ~((act == exp) | (np.isnan(act) & np.isnan(exp)))
    res.scale_mismatches = int(bad.sum())
    res.code_mismatches = int(np.count_nonzero(c.codes.reshape(-1) != q.codes.reshape(-1)))
    if res.scale_mismatches:
        i = int(np.argmax(bad))
        res.passed, res.category = False, "scale"
        res.detail = f"scale {act[i]!r}, reference {exp[i]!r} ({res.scale_mismatches} of {exp.size} scales differ)"
    elif res.code_mismatches:
        res.passed, res.category = False, "codes"
        res.detail = f"{res.code_mismatches} of {c.codes.size} codes differ from the reference with the same scales"
    return res


def _dequant(c: MXCast) -> np.ndarray:
    v = decode(c.codes, E4M3FN).astype(np.float64)
    return v * np.repeat(c.scales.reshape(v.shape[0], -1), 32, axis=1)[:, : v.shape[1]]


def _groups(offsets: np.ndarray) -> list[tuple[int, int, int]]:
    starts = np.concatenate([[0], offsets[:-1]])
    return [(g, int(a), int(b)) for g, (a, b) in enumerate(zip(starts, offsets))]


def _check_gemm(gm: MXGemm, a: MXCast, b: MXCast) -> GemmCheck:
    """One grouped GEMM: per group, the exact product of the MX operands it was given, against the bound."""
    A, B = _dequant(a), _dequant(b)
    if gm.gemm in ("output", "grad_input"):  # A (M, K); B (E*N, K): group g's rows of A times expert g
        E = len(gm.offsets)
        Bg = B.reshape(E, -1, B.shape[1])
        K = A.shape[1]
        C = np.zeros((A.shape[0], Bg.shape[1]))
        P = np.zeros_like(C)
        for g, s, e in _groups(gm.offsets):
            C[s:e] = A[s:e] @ Bg[g].T
            P[s:e] = np.abs(A[s:e]) @ np.abs(Bg[g]).T
        out = gm.out.reshape(C.shape)
    else:  # grad_weight: A (N, M), B (K, M); expert g sums over its tokens only; out (E, K, N)
        K = 0
        E = len(gm.offsets)
        C = np.zeros((E, B.shape[0], A.shape[0]))
        P = np.zeros_like(C)
        for g, s, e in _groups(gm.offsets):
            C[g] = B[:, s:e] @ A[:, s:e].T
            P[g] = np.abs(B[:, s:e]) @ np.abs(A[:, s:e]).T
            K = max(K, e - s)
        out = gm.out.reshape(C.shape)
    res = GemmCheck(step=gm.step, layer=gm.layer, gemm=gm.gemm, formats="MX e4m3fn x MX e4m3fn", M=C.shape[-2],
                    K=K, N=C.shape[-1], out_dtype=gm.out_dtype)
    # float64 sums of exact products: their own error, K * 2^-53 * P, is added to the bound
    bound = gemm_bound(C, P, K, gm.out_dtype) + K * 2.0 ** -53 * P
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(C)
        err = np.abs(out - C)
        res.checked = int(finite.sum())
        res.violations = int((finite & ~(err <= bound)).sum())
        res.nan_mismatches = int((np.isnan(C) != np.isnan(out)).sum())
        if finite.any():
            res.max_ratio = float(np.max(np.where(finite, err / np.where(bound > 0, bound, 1), 0)))
    return res


def check_moe_step(cfg: MoEConfig = TINY_MOE, *, steps: int = 2, seed: int = 0, mode: str = "rceil",
                   lr: float = 0.05) -> Any:
    """``steps`` SGD steps of :func:`build_moe` under torchao's MXFP8 grouped-GEMM training (emulated
    kernels: any CPU), every cast and grouped GEMM checked; a :class:`StepConformance`."""
    import torch

    from fp8check.training.checks import StepConformance

    if mode not in SCALE_MODES:
        raise InvalidValueError(f"MX scale mode {mode!r}; known: {', '.join(SCALE_MODES)}")
    if any(n <= 0 for n in cfg.groups):
        raise InvalidValueError(f"MoE group sizes must be positive, got {cfg.groups}")
    try:
        from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
        from torchao.quantization import quantize_
        from torchao.quantization.quantize_.common import KernelPreference
    except Exception as exc:
        raise FP8CheckError(f"checking MoE training needs torchao's moe_training: {exc}") from None

    model = build_moe(cfg, seed)
    config = MXFP8TrainingOpConfig(kernel_preference=KernelPreference.EMULATED, out_dtype=torch.bfloat16,
                                   scale_calculation_mode=ScaleCalculationMode[mode.upper()])
    quantize_(model, config, filter_fn=lambda m, fqn: m is model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    offs = torch.tensor(np.cumsum(cfg.groups), dtype=torch.int32)
    with capture_mxfp8_grouped() as cap:
        for step in range(steps):
            cap.step = step
            x = torch.randn(cfg.tokens, cfg.dim, generator=g).to(torch.bfloat16)
            y = torch.randn(cfg.tokens, cfg.dim, generator=g)
            loss = torch.nn.functional.mse_loss(model(x, offs).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    casts = [_check_cast(c) for c in cap.casts]
    by = {(c.step, c.layer, c.operand): c for c in cap.casts}
    operands = {"output": ("input", "weight"), "grad_input": ("grad_output", "weight_t"),
                "grad_weight": ("grad_output_t", "input_t")}
    gemms = []
    for gm in cap.gemms:
        a, b = (by.get((gm.step, gm.layer, o)) for o in operands[gm.gemm])
        if a is None or b is None:
            raise FP8CheckError(f"{gm.layer} step {gm.step}: no MX cast recorded for {gm.gemm}'s operands "
                                "(torchao's MXFP8 grouped GEMM path changed)")
        gemms.append(_check_gemm(gm, a, b))
    return StepConformance(recipe=f"mxfp8-{mode} (MoE grouped GEMM, emulated)", format="e4m3fn",
                           platform="cpu-emulated-mxfp8", steps=steps, casts=casts, gemms=gemms, twins=[])

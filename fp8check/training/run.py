"""Training runs: the tiny decoder in BF16 or FP8 (torchao float8 training), step by step.

``fmt`` is ``bf16`` (every Linear's GEMM on bfloat16-rounded operands, float32 output: the
high-precision baseline), ``e4m3fn`` (torchao's recipe with the OCP formats, as on H100/H200) or
``e4m3fnuz`` (the same recipe with e4m3fnuz/e5m2fnuz, as torchao picks on MI300). On the CPU the
FP8 GEMMs are torchao's emulation (``Float8LinearConfig.emulate``: a float32 ``mm`` of
``data / scale``); on CUDA they are torchao's real ``torch._scaled_mm`` path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fp8check.errors import FP8CheckError, InvalidValueError
from fp8check.training.capture import Capture, capture_float8
from fp8check.training.model import ModelConfig, build_model, synthetic_batches
from fp8check.training.recipes import get_recipe

__all__ = ["FORMATS", "torchao_config", "prepare_model", "LossRun", "train"]

FORMATS = ("bf16", "e4m3fn", "e4m3fnuz")


def torchao_config(recipe: str, *, fnuz: bool, emulate: bool) -> Any:
    """torchao's ``Float8LinearConfig`` for ``recipe`` with the fn or the fnuz formats."""
    import torch
    from torchao.float8 import Float8LinearConfig

    c = Float8LinearConfig.from_recipe_name(get_recipe(recipe).name)
    swap = {torch.float8_e4m3fn: torch.float8_e4m3fnuz, torch.float8_e5m2: torch.float8_e5m2fnuz} if fnuz else {}
    casts = {}
    for f in dataclasses.fields(c):
        if f.name.startswith("cast_config"):
            cc = getattr(c, f.name)
            casts[f.name] = dataclasses.replace(cc, target_dtype=swap.get(cc.target_dtype, cc.target_dtype))
    return dataclasses.replace(c, emulate=emulate, **casts)


def _bf16_linears(model: Any) -> None:
    import torch
    import torch.nn.functional as F

    class BF16Linear(torch.nn.Linear):
        def forward(self, x: Any) -> Any:
            return F.linear(x.to(torch.bfloat16), self.weight.to(torch.bfloat16)).to(x.dtype)

    for m in model.modules():
        if type(m) is torch.nn.Linear:
            m.__class__ = BF16Linear


def prepare_model(cfg: ModelConfig, seed: int, fmt: str, recipe: str, *, device: str = "cpu",
                  emulate: bool | None = None, config: Any = None) -> Any:
    if fmt not in FORMATS:
        raise InvalidValueError(f"unknown training format {fmt!r}; known: {', '.join(FORMATS)}")
    model = build_model(cfg, seed).to(device)
    if fmt == "bf16":
        _bf16_linears(model)
        return model
    try:
        from torchao.float8 import convert_to_float8_training
    except Exception as exc:
        raise FP8CheckError(f"FP8 training runs need torchao: {exc}") from None
    if emulate is None:
        emulate = not str(device).startswith("cuda")
    convert_to_float8_training(model, config=config or torchao_config(recipe, fnuz=fmt == "e4m3fnuz", emulate=emulate))
    return model


@dataclass
class LossRun:
    """One run: the loss of every step, and per step a digest of every module's output (forward order)."""

    fmt: str
    recipe: str
    device: str
    losses: list[float] = field(default_factory=list)
    digests: list[dict[str, str]] = field(default_factory=list)
    first_nonfinite: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": self.fmt, "recipe": self.recipe, "device": self.device,
                "losses": [float(x) for x in self.losses], "losses_hex": [float(x).hex() for x in self.losses],
                "first_nonfinite": self.first_nonfinite}


def train(cfg: ModelConfig, fmt: str, *, recipe: str = "rowwise", steps: int = 50, seed: int = 0, device: str = "cpu",
          emulate: bool | None = None, config: Any = None, capture_steps: int = 0,
          on_step: Callable[[int], None] | None = None, digests: bool = True) -> tuple[LossRun, Capture | None]:
    """Train ``steps`` steps of AdamW on the synthetic data; capture the casts of the first ``capture_steps``."""
    import torch

    model = prepare_model(cfg, seed, fmt, recipe, device=device, emulate=emulate, config=config)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0, foreach=False)
    run = LossRun(fmt=fmt, recipe=recipe, device=str(device))
    current: dict[str, str] = {}
    bad: list[str] = []
    hooks = []
    if digests:
        def hook(name: str) -> Callable[..., None]:
            def fn(_m: Any, _i: Any, out: Any) -> None:
                if isinstance(out, torch.Tensor):
                    a = out.detach().to(torch.float32).cpu().numpy()
                    current[name] = hashlib.blake2b(a.tobytes(), digest_size=8).hexdigest()
                    if not np.isfinite(a).all():
                        bad.append(name)
            return fn

        for name, m in model.named_modules():
            if name and not list(m.children()):
                hooks.append(m.register_forward_hook(hook(name)))
    cap_ctx = capture_float8(model) if capture_steps and fmt != "bf16" else None
    cap = cap_ctx.__enter__() if cap_ctx is not None else None
    try:
        for step, (x, y) in enumerate(synthetic_batches(cfg, seed, steps)):
            capturing = cap is not None and step < capture_steps
            if cap is not None:
                cap.step = step if capturing else -1
            current.clear()
            bad.clear()
            tokens = torch.from_numpy(x).to(device)
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, cfg.vocab_size),
                                                     torch.from_numpy(y).to(device).reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grads_finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.grad is not None)
            value = float(loss.detach().cpu())
            run.losses.append(value)
            run.digests.append(dict(current))
            if run.first_nonfinite is None and (bad or not math.isfinite(value) or not grads_finite):
                run.first_nonfinite = {"step": step, "layer": bad[0] if bad else None,
                                       "where": "forward" if bad else ("loss" if not math.isfinite(value) else "gradients")}
            opt.step()
            if cap is not None and not capturing:
                # Nothing after the captured steps is kept.
                cap.casts = [c for c in cap.casts if c.step >= 0]
                cap.gemms = [g for g in cap.gemms if g.step >= 0]
            if on_step:
                on_step(step)
    finally:
        if cap_ctx is not None:
            cap_ctx.__exit__(None, None, None)
        for h in hooks:
            h.remove()
    return run, cap

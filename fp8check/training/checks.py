"""The training checks as the library's API: typed results, no printing.

::

    from fp8check import training
    step = training.check_step(recipe="rowwise", fmt="e4m3fnuz")   # casts, GEMMs, twins
    parity = training.loss_parity(formats=("bf16", "e4m3fn", "e4m3fnuz"), steps=50)
    report = training.TrainingReport(step=[step], parity=parity)
    report.passed, report.to_json()
"""

from __future__ import annotations

import math
import platform as _platform
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fp8check.errors import InvalidValueError
from fp8check.training.model import TINY_LLAMA, ModelConfig, build_model, synthetic_batches
from fp8check.training.recipes import get_recipe
from fp8check.training.run import FORMATS, LossRun, prepare_model, train
from fp8check.training.step import CATEGORIES, CastCheck, GemmCheck, TwinStats, check_all

__all__ = ["StepConformance", "Gate", "Divergence", "LossParity", "TrainingReport", "check_step", "loss_parity",
           "first_divergence", "sqnr_gates", "platform_key", "RELATIVE_LOSS_GATE", "SQNR_GATES"]

# The anchors' thresholds, with where they come from (the training issue records them from these sources).
RELATIVE_LOSS_GATE = (0.25e-2, "DeepSeek-V3 technical report: FP8 training loss within 0.25 % of BF16")
SQNR_GATES = {  # what: (dB, source)
    "output": (18.0, "torchao test/float8 (Float8Linear): output SQNR >= 18 dB"),
    "grad_weight": (17.0, "torchao test/float8 (Float8Linear): weight gradient SQNR >= 17 dB"),
}


def platform_key(fmt: str, device: str = "cpu") -> str:
    """The golden-file key of a run: ``cpu-emulated-e4m3fn``, ``h200-e4m3fn``, ..."""
    if str(device).startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name(0).lower()
        gpu = "h200" if "h200" in name else "h100" if "h100" in name else "mi300" if "mi300" in name else "cuda"
        return f"{gpu}-{fmt}"
    return f"cpu-emulated-{fmt}"


@dataclass
class StepConformance:
    recipe: str
    format: str
    platform: str
    steps: int
    casts: list[CastCheck]
    gemms: list[GemmCheck]
    twins: list[TwinStats]

    @property
    def categories(self) -> dict[str, int]:
        c = Counter(x.category for x in self.casts if not x.passed)
        out = {k: c.get(k, 0) for k in CATEGORIES}
        out["gemm-bound"] = sum(not g.passed for g in self.gemms)
        return out

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.casts) and all(g.passed for g in self.gemms) and bool(self.casts)

    def to_json(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "format": self.format, "platform": self.platform, "steps": self.steps,
                "passed": self.passed, "categories": self.categories,
                "casts": [c.to_json() for c in self.casts], "gemms": [g.to_json() for g in self.gemms],
                "twins": [t.to_json() for t in self.twins]}


def check_step(cfg: ModelConfig = TINY_LLAMA, *, recipe: str = "rowwise", fmt: str = "e4m3fn", steps: int = 2,
               seed: int = 0, device: str = "cpu", emulate: bool | None = None, config: Any = None,
               tensor_parallel: int = 1, model: Any = None, batches: Sequence[Any] | None = None) -> StepConformance:
    """``steps`` training steps of a model converted with ``convert_to_float8_training``: every cast and GEMM checked.

    ``config``: a ``Float8LinearConfig`` to run instead of the recipe's own (it is still judged
    against what the recipe declares). ``model``/``batches``: a user's float32 model (converted here)
    and its (inputs, targets) batches instead of the tiny decoder; the loss is cross-entropy.
    """
    r = get_recipe(recipe)
    if fmt not in ("e4m3fn", "e4m3fnuz"):
        raise InvalidValueError(f"step conformance checks an FP8 format (e4m3fn or e4m3fnuz), got {fmt!r}")
    if model is None:
        run, cap = train(cfg, fmt, recipe=r.name, steps=steps, seed=seed, device=device, emulate=emulate, config=config,
                         capture_steps=steps, digests=False)
    else:
        cap = _user_model_steps(model, batches or (), r.name, fmt, device, emulate, config)
    assert cap is not None
    casts, gemms, twins = check_all(cap.casts, cap.gemms, r, fmt == "e4m3fnuz", tensor_parallel=tensor_parallel)
    return StepConformance(recipe=r.name, format=fmt, platform=platform_key(fmt, device), steps=steps, casts=casts,
                           gemms=gemms, twins=twins)


def _user_model_steps(model: Any, batches: Sequence[Any], recipe: str, fmt: str, device: str, emulate: bool | None,
                      config: Any) -> Any:
    import torch
    from torchao.float8 import convert_to_float8_training

    from fp8check.training.capture import capture_float8
    from fp8check.training.run import torchao_config

    if emulate is None:
        emulate = not str(device).startswith("cuda")
    convert_to_float8_training(model, config=config or torchao_config(recipe, fnuz=fmt == "e4m3fnuz", emulate=emulate))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with capture_float8(model) as cap:
        for step, (x, y) in enumerate(batches):
            cap.step = step
            out = model(torch.as_tensor(x).to(device))
            loss = torch.nn.functional.cross_entropy(out.float().reshape(-1, out.shape[-1]),
                                                     torch.as_tensor(y).to(device).reshape(-1)) \
                if not torch.is_floating_point(torch.as_tensor(y)) else torch.nn.functional.mse_loss(out, torch.as_tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return cap


@dataclass
class Gate:
    name: str
    value: float
    threshold: float
    passed: bool
    source: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": _finite(self.value), "threshold": self.threshold, "passed": self.passed,
                "source": self.source, "detail": self.detail}


def _finite(v: float) -> float | str:
    return v if math.isfinite(v) else repr(v)


@dataclass
class Divergence:
    """Where two runs part: ``step``, the first step whose loss differs by more than ``rel_tol``
    (0: by any bit); ``layer_step`` and ``layer``, the first step at which any module's output differs
    at all and the first such module in forward order (None: the runs never part)."""

    a: str
    b: str
    step: int | None
    layer_step: int | None
    layer: str | None
    rel_tol: float

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "step": self.step, "layer_step": self.layer_step, "layer": self.layer,
                "rel_tol": self.rel_tol}


def first_divergence(a: LossRun, b: LossRun, *, rel_tol: float = 0.0) -> Divergence:
    step = None
    for i, (la, lb) in enumerate(zip(a.losses, b.losses)):
        same = float(la).hex() == float(lb).hex() if rel_tol == 0 else abs(la - lb) <= rel_tol * abs(lb)
        if not same:
            step = i
            break
    layer_step = layer = None
    for i, (da, db) in enumerate(zip(a.digests, b.digests)):
        layer = next((n for n in da if da[n] != db.get(n)), None)
        if layer is not None:
            layer_step = i
            break
    return Divergence(a=a.fmt, b=b.fmt, step=step, layer_step=layer_step, layer=layer, rel_tol=rel_tol)


def _sqnr(x: Any, y: Any) -> float:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    noise = float(np.sum((x - y) ** 2))
    return math.inf if noise == 0 else 10 * math.log10(float(np.sum(x ** 2)) / noise)


def sqnr_gates(cfg: ModelConfig, recipe: str, fmt: str, *, seed: int = 0, device: str = "cpu") -> list[Gate]:
    """torchao's SQNR gates on the first step: the FP8 model's logits and every Linear's weight
    gradient against the float32 model's, same weights, same batch."""
    import torch

    x, y = next(synthetic_batches(cfg, seed, 1))
    grads, outs = {}, {}
    for which in ("float32", fmt):
        model = build_model(cfg, seed).to(device) if which == "float32" else prepare_model(cfg, seed, fmt, recipe,
                                                                                          device=device)
        logits = model(torch.from_numpy(x).to(device))
        torch.nn.functional.cross_entropy(logits.float().reshape(-1, cfg.vocab_size),
                                          torch.from_numpy(y).to(device).reshape(-1)).backward()
        outs[which] = logits.detach().double().cpu().numpy()
        grads[which] = {n: m.weight.grad.detach().double().cpu().numpy() for n, m in model.named_modules()
                        if isinstance(m, torch.nn.Linear)}
    gates = []
    out_db = _sqnr(outs["float32"], outs[fmt])
    t, src = SQNR_GATES["output"]
    gates.append(Gate(name=f"{fmt} output SQNR (dB)", value=out_db, threshold=t, passed=out_db >= t, source=src))
    worst = min(grads["float32"], key=lambda n: _sqnr(grads["float32"][n], grads[fmt][n]))
    w_db = _sqnr(grads["float32"][worst], grads[fmt][worst])
    t, src = SQNR_GATES["grad_weight"]
    gates.append(Gate(name=f"{fmt} weight-gradient SQNR, worst layer (dB)", value=w_db, threshold=t, passed=w_db >= t,
                      source=src, detail=f"worst layer {worst}"))
    return gates


@dataclass
class LossParity:
    config: ModelConfig
    recipe: str
    seed: int
    steps: int
    runs: dict[str, LossRun]
    gates: list[Gate] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.config.to_json(), "recipe": self.recipe, "seed": self.seed, "steps": self.steps,
                "passed": self.passed, "runs": {k: v.to_json() for k, v in self.runs.items()},
                "gates": [g.to_json() for g in self.gates], "divergences": [d.to_json() for d in self.divergences]}


def relative_loss_error(run: LossRun, baseline: LossRun, *, window: int = 10) -> float:
    """|mean loss of the last ``window`` steps - baseline's| / baseline's (NaN/Inf anywhere: Inf)."""
    a, b = np.asarray(run.losses[-window:]), np.asarray(baseline.losses[-window:])
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return math.inf
    return float(abs(a.mean() - b.mean()) / abs(b.mean()))


def loss_parity(cfg: ModelConfig = TINY_LLAMA, *, formats: Sequence[str] = FORMATS, recipe: str = "rowwise",
                steps: int = 50, seed: int = 0, device: str = "cpu", sqnr: bool = True,
                on_step: Callable[[str, int], None] | None = None) -> LossParity:
    for f in formats:
        if f not in FORMATS:
            raise InvalidValueError(f"unknown training format {f!r}; known: {', '.join(FORMATS)}")
    r = get_recipe(recipe)
    runs = {}
    for f in formats:
        runs[f] = train(cfg, f, recipe=r.name, steps=steps, seed=seed, device=device,
                        on_step=(lambda s, f=f: on_step(f, s)) if on_step else None)[0]
    res = LossParity(config=cfg, recipe=r.name, seed=seed, steps=steps, runs=runs)
    window = max(1, min(10, steps // 5))
    t, src = RELATIVE_LOSS_GATE
    for f, run in runs.items():
        if f != "bf16" and "bf16" in runs:
            e = relative_loss_error(run, runs["bf16"], window=window)
            res.gates.append(Gate(name=f"{f} relative loss error vs bf16 (mean of the last {window} steps)", value=e,
                                  threshold=t, passed=e <= t, source=src))
            res.divergences.append(first_divergence(run, runs["bf16"], rel_tol=t))
        if run.first_nonfinite is not None:
            res.gates.append(Gate(name=f"{f} finite", value=float(run.first_nonfinite["step"]), threshold=0, passed=False,
                                  source="a training step must stay finite",
                                  detail=f"first NaN/Inf at step {run.first_nonfinite['step']} "
                                         f"({run.first_nonfinite['where']}, {run.first_nonfinite['layer']})"))
        if sqnr and f != "bf16":
            res.gates += sqnr_gates(cfg, r.name, f, seed=seed, device=device)
    fp8 = [f for f in runs if f != "bf16"]
    if len(fp8) == 2:
        res.divergences.append(first_divergence(runs[fp8[0]], runs[fp8[1]]))
    return res


@dataclass
class TrainingReport:
    step: list[StepConformance] = field(default_factory=list)
    parity: LossParity | None = None
    goldens: list[dict[str, Any]] = field(default_factory=list)
    distributed: list[Any] = field(default_factory=list)  # DistributedConformance (fp8check.training.distributed)

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.step) and (self.parity is None or self.parity.passed) \
            and all(g.get("passed", False) for g in self.goldens) and all(d.passed for d in self.distributed)

    def to_json(self) -> dict[str, Any]:
        from fp8check.results import environment

        return {"kind": "training", "passed": self.passed, "environment": environment(),
                "machine": _platform.machine(), "step_conformance": [s.to_json() for s in self.step],
                "loss_parity": None if self.parity is None else self.parity.to_json(), "goldens": self.goldens,
                "distributed": [d.to_json() for d in self.distributed]}

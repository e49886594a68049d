"""FP8 training across processes on torch.distributed: FSDP2 (with and without torchao's float8
all-gather) and a tensor-parallel MLP, every cast of every shard checked against the single-device
reference, the per-step loss against the single-device run.

:func:`check_distributed` launches ``torchrun --standalone --nproc-per-node N`` (``python -m
torch.distributed.run``) on this module; each rank builds the tiny decoder, converts it with torchao's
``convert_to_float8_training``, parallelizes it with torch's own ``fully_shard`` (FSDP2) or
``parallelize_module`` with torchao's ``Float8ColwiseParallel``/``Float8RowwiseParallel``, trains
``steps`` steps under :func:`~fp8check.training.capture.capture_float8` and writes what it saw. The
parent then trains the same model on one process (the single-device reference) and compares:

- **every cast of every shard**: a cast of a sharded tensor (an FSDP2 weight shard cast before the FP8
  all-gather, a DTensor shard under tensor parallelism) is checked against the recipe reference of the
  *whole* tensor, put back together from all ranks' shards: its scale must be the whole tensor's (the
  amax all-reduced first) and its codes those of its part, bit for bit. A scale that is the shard's own
  is named ``amax-before-all-reduce``. Whole-tensor casts are checked as on one device.
- **the loss, step by step**, of each rank against the single-device run. FSDP2 (modes ``fsdp``,
  ``fsdp-float8``, ``fsdp-float8-precompute``): the reference runs each rank's micro-batch in turn and
  averages the gradients as the reduce-scatter does, so with 2 ranks ((g0 + g1) / 2 in float32, the
  same whatever the order) the losses must be **bit-identical** -- what torchao's own FSDP2 test
  asserts for float8 all-gather on and off. With more ranks the sum's order is the backend's, and the
  comparison is within the relative-loss gate. Tensor parallelism (``tp``): the row-parallel GEMM sums
  partial products across ranks, so the loss is compared within the relative-loss gate (DeepSeek-V3's
  0.25 %) and the first step that differs at all is reported.

On a CPU the same code runs with the gloo backend (torchao's emulated FP8 GEMMs). One thing gloo
cannot do: it has no float8 dtypes (``RuntimeError: Invalid scalar type`` from ``all_gather_single``)
and FSDP2 all-gathers a parameter group in its own dtype when every input has the same one (mixed
dtypes go as uint8). Where the backend is gloo, every FSDP2 module gets a custom all-gather
(``FSDPModule.set_custom_all_gather``) that moves one-byte float dtypes as uint8 views of the same
bytes; nothing else is emulated. NCCL moves FP8 as it is.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fp8check.errors import FP8CheckError, InvalidValueError
from fp8check.training.capture import CastRecord, GemmRecord
from fp8check.training.model import TINY_LLAMA, ModelConfig, build_model, synthetic_batches
from fp8check.training.recipes import get_recipe
from fp8check.training.step import CATEGORIES, CastCheck, GemmCheck, check_cast, check_gemm

__all__ = ["MODES", "DistributedConformance", "LossComparison", "check_distributed", "reference_losses",
           "torchrun_command", "validate"]

MODES = {
    "fsdp": "FSDP2 (fully_shard per block): weights all-gathered in high precision, cast on every rank",
    "fsdp-float8": "FSDP2 with enable_fsdp_float8_all_gather: each rank casts its weight shard (amax all-reduced), "
                   "FSDP all-gathers the FP8 bytes",
    "fsdp-float8-precompute": "fsdp-float8 with precompute_float8_dynamic_scale_for_fsdp after every optimizer step",
    "tp": "tensor parallelism of every MLP: Float8ColwiseParallel w1, w3 and Float8RowwiseParallel w2",
}
# torchao's float8 all-gather and its tensor-parallel styles assume tensorwise scaling.
_TENSORWISE_ONLY = ("fsdp-float8", "fsdp-float8-precompute", "tp")
LOSS_GATE = 0.25e-2  # DeepSeek-V3's relative loss gate, for comparisons that cannot be bit-exact


@dataclass
class LossComparison:
    rank: int
    mode: str  # "bit-exact" or "within 0.25 % (why)"
    passed: bool
    first_difference: int | None  # the first step whose loss differs in any bit
    max_rel_diff: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DistributedConformance:
    mode: str
    nproc: int
    backend: str
    recipe: str
    format: str
    steps: int
    casts: list[CastCheck]
    gemms: list[GemmCheck]
    losses: list[LossComparison]
    rank_losses: list[list[float]]
    reference: list[list[float]]
    sharded_casts: int = 0  # casts of a shard (checked against the whole tensor)
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def categories(self) -> dict[str, int]:
        out = {k: 0 for k in CATEGORIES}
        for c in self.casts:
            if not c.passed:
                out[c.category or "scale"] = out.get(c.category or "scale", 0) + 1
        out["gemm-bound"] = sum(not g.passed for g in self.gemms)
        return out

    @property
    def first_divergence(self) -> dict[str, Any] | None:
        """The first cast (by step, then rank and order) that fails, else the first step whose loss differs."""
        bad = [c for c in self.casts if not c.passed]
        if bad:
            c = min(bad, key=lambda c: (c.step, c.rank))
            return {"what": "cast", "step": c.step, "rank": c.rank, "layer": c.layer, "operand": c.operand,
                    "category": c.category}
        steps = [(x.first_difference, x.rank) for x in self.losses if x.first_difference is not None]
        if steps:
            step, rank = min(steps)
            return {"what": "loss", "step": step, "rank": rank}
        return None

    @property
    def passed(self) -> bool:
        return bool(self.casts) and all(c.passed for c in self.casts) and all(g.passed for g in self.gemms) \
            and all(x.passed for x in self.losses)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "description": MODES[self.mode], "model": self.model, "nproc": self.nproc, "backend": self.backend,
                "recipe": self.recipe, "format": self.format, "steps": self.steps, "passed": self.passed,
                "categories": self.categories, "first_divergence": self.first_divergence,
                "sharded_casts": self.sharded_casts, "losses": [x.to_json() for x in self.losses],
                "rank_losses": self.rank_losses, "reference_losses": self.reference,
                "casts": [c.to_json() for c in self.casts], "gemms": [g.to_json() for g in self.gemms]}


def _float8_config(recipe: str, fmt: str, mode: str, *, emulate: bool) -> Any:
    import dataclasses

    from fp8check.training.run import torchao_config

    c = torchao_config(recipe, fnuz=fmt == "e4m3fnuz", emulate=emulate)
    if mode.startswith("fsdp-float8"):
        c = dataclasses.replace(c, enable_fsdp_float8_all_gather=True)
    return c


def _micro_batch(x: np.ndarray, rank: int, world: int) -> np.ndarray:
    n = x.shape[0] // world
    return x[rank * n:(rank + 1) * n]


def validate(cfg: ModelConfig, mode: str, nproc: int, recipe: str, fmt: str) -> None:
    if mode not in MODES:
        raise InvalidValueError(f"unknown parallel mode {mode!r}; known: {', '.join(MODES)}")
    if not isinstance(nproc, int) or nproc < 2:
        raise InvalidValueError(f"--nproc {nproc!r}: give 2 or more processes")
    if fmt not in ("e4m3fn", "e4m3fnuz"):
        raise InvalidValueError(f"distributed checks run an FP8 format (e4m3fn or e4m3fnuz), got {fmt!r}")
    if mode in _TENSORWISE_ONLY and get_recipe(recipe).name != "tensorwise":
        raise InvalidValueError(f"{mode}: torchao's float8 all-gather and tensor-parallel styles need the tensorwise "
                                f"recipe, got {recipe!r}")
    if mode.startswith("fsdp") and cfg.batch_size % nproc:
        raise InvalidValueError(f"{mode}: batch_size {cfg.batch_size} does not split into {nproc} micro-batches")
    if mode == "tp" and cfg.hidden_dim % (16 * nproc):
        raise InvalidValueError(f"tp: hidden_dim {cfg.hidden_dim} does not split into {nproc} shards of a multiple "
                                f"of 16")


# -- the worker (one rank, under torchrun) -------------------------------------------------------


def _parallelize(model: Any, mode: str, device_type: str, world: int, backend: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device_type, (world,))
    if mode == "tp":
        from torch.distributed.tensor.parallel import parallelize_module
        from torchao.float8.float8_tensor_parallel import Float8ColwiseParallel, Float8RowwiseParallel

        for block in model.layers:
            parallelize_module(block.feed_forward, mesh, {"w1": Float8ColwiseParallel(), "w3": Float8ColwiseParallel(),
                                                          "w2": Float8RowwiseParallel()})
        return
    from torch.distributed.fsdp import fully_shard

    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if backend == "gloo":
        comm = _gloo_byte_all_gather()
        for m in model.modules():
            if hasattr(m, "set_custom_all_gather"):
                m.set_custom_all_gather(comm)


def _gloo_byte_all_gather() -> Any:
    """FSDP2's default all-gather, moving one-byte float dtypes (FP8) as uint8 views: gloo has no float8."""
    import torch

    try:
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather
    except ImportError as exc:
        raise FP8CheckError(f"torch {torch.__version__}: FSDP2 has no DefaultAllGather to derive gloo's byte "
                            f"all-gather from ({exc})") from None

    class ByteAllGather(DefaultAllGather):
        def __call__(self, output_tensor: Any, input_tensor: Any, group: Any, async_op: bool = False) -> Any:
            if input_tensor.dtype.itemsize == 1 and input_tensor.dtype.is_floating_point:
                output_tensor, input_tensor = output_tensor.view(torch.uint8), input_tensor.view(torch.uint8)
            return super().__call__(output_tensor, input_tensor, group, async_op)

    return ByteAllGather()


def _save(out: Path, rank: int, losses: list[float], casts: Sequence[CastRecord], gemms: Sequence[GemmRecord],
          meta: dict[str, Any]) -> None:
    arrays: dict[str, np.ndarray] = {}
    cast_meta, gemm_meta = [], []
    for i, c in enumerate(casts):
        arrays[f"c{i}_hp"], arrays[f"c{i}_codes"], arrays[f"c{i}_scale"] = c.hp, c.codes, c.scale
        cast_meta.append({k: getattr(c, k) for k in ("step", "layer", "operand", "hp_dtype", "dtype", "axiswise_dim",
                                                      "placement", "rank")})
    for i, g in enumerate(gemms):
        for k in ("qa", "sa", "qb", "sb", "out"):
            arrays[f"g{i}_{k}"] = getattr(g, k)
        gemm_meta.append({k: getattr(g, k) for k in ("step", "layer", "gemm", "fmt_a", "fmt_b", "out_dtype", "accumulation")})
    np.savez(out / f"rank{rank}.npz", **arrays)
    (out / f"rank{rank}.json").write_text(json.dumps({**meta, "rank": rank, "losses": [x.hex() for x in losses],
                                                      "casts": cast_meta, "gemms": gemm_meta}))


def _load(out: Path, rank: int) -> tuple[dict[str, Any], list[CastRecord], list[GemmRecord]]:
    meta = json.loads((out / f"rank{rank}.json").read_text())
    with np.load(out / f"rank{rank}.npz", allow_pickle=False) as z:
        casts = [CastRecord(hp=z[f"c{i}_hp"], codes=z[f"c{i}_codes"], scale=z[f"c{i}_scale"], **m)
                 for i, m in enumerate(meta["casts"])]
        gemms = [GemmRecord(qa=z[f"g{i}_qa"], sa=z[f"g{i}_sa"], qb=z[f"g{i}_qb"], sb=z[f"g{i}_sb"], out=z[f"g{i}_out"],
                            **m) for i, m in enumerate(meta["gemms"])]
    return meta, casts, gemms


def _loss(model: Any, cfg: ModelConfig, x: np.ndarray, y: np.ndarray, device: str) -> Any:
    import torch

    logits = model(torch.from_numpy(np.ascontiguousarray(x)).to(device))
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, cfg.vocab_size),
                                             torch.from_numpy(np.ascontiguousarray(y)).to(device).reshape(-1))


def worker(argv: Sequence[str] | None = None) -> int:
    """One rank (``python -m fp8check.training.distributed ...`` under torchrun)."""
    ap = argparse.ArgumentParser(prog="fp8check.training.distributed")
    ap.add_argument("--mode", required=True, choices=list(MODES))
    ap.add_argument("--config", required=True, help="the model config as JSON")
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--format", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--capture-steps", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--worker-init", default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torchao.float8 import convert_to_float8_training
    from torchao.float8.fsdp_utils import precompute_float8_dynamic_scale_for_fsdp

    from fp8check.training.capture import capture_float8

    cuda = a.device.startswith("cuda")
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    try:
        if a.worker_init:
            from fp8check.loader import load_callable

            load_callable(a.worker_init)()
        cfg = ModelConfig(**json.loads(a.config))
        model = build_model(cfg, a.seed).to(device)
        convert_to_float8_training(model, config=_float8_config(a.recipe, a.format, a.mode, emulate=not cuda))
        _parallelize(model, a.mode, "cuda" if cuda else "cpu", world, backend)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0, foreach=False)
        losses: list[float] = []
        with capture_float8(model) as cap:
            for step, (x, y) in enumerate(synthetic_batches(cfg, a.seed, a.steps)):
                cap.step = step if step < a.capture_steps else -1
                if a.mode.startswith("fsdp"):
                    x, y = _micro_batch(x, rank, world), _micro_batch(y, rank, world)
                loss = _loss(model, cfg, x, y, device)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if a.mode == "fsdp-float8-precompute":
                    precompute_float8_dynamic_scale_for_fsdp(model)
                losses.append(float(loss.detach().cpu()))
                cap.casts = [c for c in cap.casts if c.step >= 0]
                cap.gemms = [g for g in cap.gemms if g.step >= 0]
        _save(Path(a.out), rank, losses, cap.casts, cap.gemms, {"backend": backend, "world": world})
    finally:
        dist.destroy_process_group()
    return 0


# -- the parent: launch, reference, compare ------------------------------------------------------


def _error_line(output: str) -> str:
    """The exception a rank died of (``[rank0]: ValueError: ...``), else the last line torchrun printed."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    found = [ln for ln in lines if re.match(r"(\[rank\d+\]:\s*)?[\w.]*(Error|Exception)\b.*:", ln)]
    return (found or lines or ["no output"])[-1]


def torchrun_command(nproc: int, worker_args: Sequence[str]) -> list[str]:
    """The command that runs ``nproc`` ranks of this module's worker on this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "fp8check.training.distributed", *worker_args]


def reference_losses(cfg: ModelConfig, mode: str, nproc: int, *, recipe: str, fmt: str, steps: int, seed: int,
                     device: str = "cpu") -> list[list[float]]:
    """The single-device run: per rank, the loss of each step (FSDP: that rank's micro-batch; the gradients
    of all micro-batches averaged as FSDP2's reduce-scatter averages them; tensor parallelism: the whole
    batch, the same on every rank)."""
    import torch

    from fp8check.training.run import prepare_model

    model = prepare_model(cfg, seed, fmt, recipe, device=device, emulate=not str(device).startswith("cuda"))
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0, foreach=False)
    out: list[list[float]] = [[] for _ in range(nproc)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank runs (torchrun's OMP_NUM_THREADS=1)
    try:
        for x, y in synthetic_batches(cfg, seed, steps):
            if mode == "tp":
                loss = _loss(model, cfg, x, y, device)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                for r in range(nproc):
                    out[r].append(float(loss.detach().cpu()))
            else:
                grads: list[list[Any]] = []
                for r in range(nproc):
                    opt.zero_grad(set_to_none=True)
                    loss = _loss(model, cfg, _micro_batch(x, r, nproc), _micro_batch(y, r, nproc), device)
                    loss.backward()
                    grads.append([p.grad.detach().clone() for p in params])
                    out[r].append(float(loss.detach().cpu()))
                for i, p in enumerate(params):
                    total = grads[0][i]
                    for r in range(1, nproc):
                        total = total + grads[r][i]
                    p.grad = total / nproc
            opt.step()
    finally:
        torch.set_num_threads(threads)
    return out


def _whole(records: list[CastRecord]) -> tuple[np.ndarray, list[slice], int]:
    """The whole tensor of a sharded cast (one record per rank, in rank order), each rank's part, the axis."""
    axis = 1 if records[0].placement == "S(1)" else 0
    hp = np.concatenate([r.hp for r in records], axis=axis)
    parts, start = [], 0
    for r in records:
        n = r.hp.shape[axis]
        parts.append(slice(start, start + n))
        start += n
    return hp, parts, axis


def _check_casts(per_rank: list[list[CastRecord]], recipe: str, fmt: str, nproc: int) -> tuple[list[CastCheck], int]:
    from fp8check import quantizers
    from fp8check.training.step import reference_recipe

    r = get_recipe(recipe)
    fnuz = fmt == "e4m3fnuz"
    lengths = {len(c) for c in per_rank}
    if len(lengths) != 1:
        raise FP8CheckError(f"the ranks made different numbers of FP8 casts ({sorted(len(c) for c in per_rank)}): "
                            "they did not run the same program")
    checks, sharded = [], 0
    for i in range(lengths.pop()):
        group = [ranks[i] for ranks in per_rank]
        keys = {(c.step, c.layer, c.operand, c.placement) for c in group}
        if len(keys) != 1:
            raise FP8CheckError(f"cast {i} differs between ranks: {sorted(keys)}")
        if group[0].placement in ("", "R"):
            for c in group:
                res = check_cast(c, r, fnuz)
                res.rank, res.placement = c.rank, c.placement
                checks.append(res)
            continue
        sharded += len(group)
        hp, parts, axis = _whole(group)
        ref = reference_recipe(r, group[0].operand, fnuz)
        expected = quantizers.quantize(hp, ref).codes.reshape(hp.shape) if ref is not None else None
        for c, part in zip(group, parts):
            codes = expected.copy() if expected is not None else np.zeros(hp.shape, np.uint8)
            if axis == 0:
                codes[part, :] = c.codes
            else:
                codes[:, part] = c.codes
            whole = CastRecord(step=c.step, layer=c.layer, operand=c.operand, hp=hp, hp_dtype=c.hp_dtype, dtype=c.dtype,
                               codes=codes, scale=c.scale, axiswise_dim=c.axiswise_dim, placement=c.placement,
                               rank=c.rank)
            res = check_cast(whole, r, fnuz, tensor_parallel=nproc)
            res.rank, res.placement = c.rank, c.placement
            res.shape = tuple(c.hp.shape)
            res.detail = (f"shard {c.placement} of {hp.shape[0]}x{hp.shape[1]} on rank {c.rank}: " + res.detail).rstrip(": ")
            checks.append(res)
    return checks, sharded


def _compare_losses(ranks: list[list[float]], reference: list[list[float]], *, exact: bool, why: str
                    ) -> list[LossComparison]:
    out = []
    for rank, (got, ref) in enumerate(zip(ranks, reference)):
        first, worst = None, 0.0
        for i, (a, b) in enumerate(zip(got, ref)):
            if first is None and float(a).hex() != float(b).hex():
                first = i
            rel = abs(a - b) / abs(b) if b and math.isfinite(a) and math.isfinite(b) else (0.0 if a == b else math.inf)
            worst = max(worst, rel)
        complete = len(got) == len(ref)
        if exact:
            out.append(LossComparison(rank=rank, mode="bit-exact", passed=first is None and complete,
                                      first_difference=first, max_rel_diff=worst))
        else:
            out.append(LossComparison(rank=rank, mode=f"within 0.25 % per step ({why})",
                                      passed=worst <= LOSS_GATE and complete, first_difference=first,
                                      max_rel_diff=worst))
    return out


def check_distributed(cfg: ModelConfig = TINY_LLAMA, *, mode: str = "fsdp", nproc: int = 2, recipe: str = "tensorwise",
                      fmt: str = "e4m3fn", steps: int = 10, capture_steps: int = 2, seed: int = 0, device: str = "cpu",
                      worker_init: str | None = None, timeout: float = 900.0) -> DistributedConformance:
    """Run ``mode`` on ``nproc`` processes (torchrun) and check it against the single-device run.

    ``worker_init``: ``MODULE:FUNC`` called in every rank before the model is built (a user's patches of
    torchao; the tests plant bugs with it); never in this process, where the reference runs.
    """
    recipe = get_recipe(recipe).name
    validate(cfg, mode, nproc, recipe, fmt)
    with tempfile.TemporaryDirectory(prefix="fp8check-dist-") as tmp:
        args = ["--mode", mode, "--config", json.dumps(cfg.to_json()), "--recipe", recipe, "--format", fmt,
                "--steps", str(steps), "--capture-steps", str(min(capture_steps, steps)), "--seed", str(seed),
                "--device", device, "--out", tmp]
        if worker_init:
            args += ["--worker-init", worker_init]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        try:
            proc = subprocess.run(torchrun_command(nproc, args), capture_output=True, text=True, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            raise FP8CheckError(f"torchrun with {nproc} processes ({mode}) ran past {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise FP8CheckError(f"torchrun with {nproc} processes ({mode}) failed (exit {proc.returncode}): "
                                f"{_error_line(proc.stderr + proc.stdout)}")
        loaded = [_load(Path(tmp), r) for r in range(nproc)]
    backend = loaded[0][0]["backend"]
    rank_losses = [[float.fromhex(h) for h in meta["losses"]] for meta, _, _ in loaded]
    reference = reference_losses(cfg, mode, nproc, recipe=recipe, fmt=fmt, steps=steps, seed=seed, device=device)
    casts, sharded = _check_casts([c for _, c, _ in loaded], recipe, fmt, nproc)
    gemms = []
    for _, _, gs in loaded:
        gemms += [check_gemm(g) for g in gs]
    if mode == "tp":
        losses = _compare_losses(rank_losses, reference, exact=False, why="the row-parallel GEMM sums partial products "
                                 "across ranks")
    else:
        losses = _compare_losses(rank_losses, reference, exact=nproc == 2,
                                 why=f"{nproc} ranks: the gradient sum's order is the backend's")
    return DistributedConformance(mode=mode, nproc=nproc, backend=backend, recipe=recipe, format=fmt, steps=steps,
                                  casts=casts, gemms=gemms, losses=losses, rank_losses=rank_losses,
                                  reference=reference, sharded_casts=sharded, model=cfg.to_json())


if __name__ == "__main__":
    raise SystemExit(worker())

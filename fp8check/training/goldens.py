"""Golden loss curves per platform, and how a run is compared with one.

A golden file (``fp8check/training/goldens/<platform>.json``) holds the per-step losses of one
run (model config, recipe, seed, steps) and the **key** of the machine that made it: the torch and
torchao versions, the device (``cpu`` or the GPU's name) and, on the CPU, the ATen CPU capability
(``torch.backends.cpu.get_cpu_capability()``: DEFAULT/AVX2/AVX512/...), because float32 GEMM
kernels -- and so the last bits of every step -- depend on it.

Comparison: when the key matches the running machine the losses must be **bit-identical** (compared
as float64 bit patterns, step by step); when it does not, each step's loss must be within the
relative-loss gate (0.25 %, DeepSeek-V3's FP8-vs-BF16 bound) of the golden one, and the comparison
says it was not exact and why. The first step that differs is reported either way.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fp8check.errors import InvalidValueError
from fp8check.training.model import ModelConfig
from fp8check.training.run import LossRun

__all__ = ["GOLDEN_DIR", "golden_path", "machine_key", "golden_document", "GoldenComparison", "compare_golden",
           "load_golden"]

GOLDEN_DIR = Path(__file__).with_name("goldens")
TOLERANCE = 0.25e-2


def golden_path(platform: str, directory: Path | None = None) -> Path:
    return (directory or GOLDEN_DIR) / f"{platform}.json"


def machine_key(device: str = "cpu") -> dict[str, str]:
    import torch

    key = {"torch": torch.__version__.split("+")[0], "device": "cpu"}
    try:
        import torchao

        key["torchao"] = torchao.__version__.split("+")[0]
    except Exception:
        key["torchao"] = "absent"
    if str(device).startswith("cuda"):
        key["device"] = torch.cuda.get_device_name(0)
    else:
        key["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return key


def golden_document(run: LossRun, cfg: ModelConfig, *, platform: str, seed: int, device: str = "cpu") -> dict[str, Any]:
    return {"platform": platform, "format": run.fmt, "recipe": run.recipe, "seed": seed, "steps": len(run.losses),
            "model": cfg.to_json(), "key": machine_key(device), "losses": [float(x) for x in run.losses],
            "losses_hex": [float(x).hex() for x in run.losses]}


def load_golden(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        losses = [float.fromhex(h) for h in doc["losses_hex"]]
        doc["model"], doc["key"], doc["recipe"], doc["seed"]  # noqa: B018 -- the keys a comparison needs
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidValueError(f"golden loss file {path}: unreadable ({exc})") from None
    doc["_losses"] = losses
    return doc


@dataclass
class GoldenComparison:
    platform: str
    mode: str  # "bit-exact" or "within 0.25 % (key differs: ...)"
    passed: bool
    steps: int
    first_difference: int | None
    max_rel_diff: float

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["max_rel_diff"] = self.max_rel_diff if math.isfinite(self.max_rel_diff) else repr(self.max_rel_diff)
        return d


def compare_golden(doc: dict[str, Any], run: LossRun, *, device: str = "cpu", prefix: bool = False) -> GoldenComparison:
    """``run`` against the golden ``doc`` (``prefix``: a shorter run is compared with the golden's first steps)."""
    golden = doc["_losses"] if "_losses" in doc else [float.fromhex(h) for h in doc["losses_hex"]]
    here = machine_key(device)
    diffs = [k for k in sorted(set(doc["key"]) | set(here)) if doc["key"].get(k) != here.get(k)]
    exact = not diffs
    n = min(len(golden), len(run.losses))
    first, worst = None, 0.0
    for i in range(n):
        g, r = golden[i], run.losses[i]
        rel = abs(r - g) / abs(g) if g != 0 and math.isfinite(g) and math.isfinite(r) else (0.0 if r == g else math.inf)
        worst = max(worst, rel)
        if first is None and float(r).hex() != float(g).hex():
            first = i
    if exact:
        passed = first is None and (prefix or len(run.losses) == len(golden)) and n == len(run.losses)
        mode = "bit-exact"
    else:
        passed = worst <= TOLERANCE and (prefix or n == len(golden)) and n == len(run.losses)
        mode = "within 0.25 % per step (key differs: " + ", ".join(
            f"{k} {doc['key'].get(k)} in the golden, {here.get(k)} here" for k in diffs) + ")"
    return GoldenComparison(platform=doc["platform"], mode=mode, passed=passed, steps=n, first_difference=first,
                            max_rel_diff=worst)

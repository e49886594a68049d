"""Training models a repository declares, for ``pytest -m training``.

Beside its kernels, a repository declares the models whose FP8 training steps fp8check checks, in
``[[tool.fp8check.training]]`` of its ``pyproject.toml``::

    [[tool.fp8check.training]]
    name = "tiny"
    model = "configs/tiny.json"       # tiny-llama, a CONFIG.json (fp8check's tiny decoder), or MODULE:FUNC
    recipe = "rowwise"                # torchao's recipe: tensorwise, rowwise, rowwise_with_gw_hp
    formats = ["e4m3fn", "e4m3fnuz"]  # the FP8 formats, as torchao picks them on H100 and on MI300
    steps = 1                         # training steps whose every cast and GEMM is checked
    loss-steps = 8                    # also train BF16 and each format this many steps: the loss gates
    golden-dir = "goldens"            # golden loss curves (fp8check train --write-goldens) compared when present

    [[tool.fp8check.training]]
    name = "mlp"
    model = "mymodel.model:build"     # a function returning a float32 torch.nn.Module
    batches = "mymodel.model:batches" # a function returning (inputs, targets) batches
    config = "mymodel.fp8:config"     # optional: FUNC(format) -> the Float8LinearConfig the repository uses
    recipe = "tensorwise"
    formats = ["e4m3fnuz"]

The plugin turns each into tests marked ``training`` and with the markers of the format
(``fnuz``/``ocp``, ``e4m3fn``/``e4m3fnuz``): ``pytest -m training``, ``pytest -m "training and fnuz"``,
``-k NAME``. A model's own ``config`` is judged against what its ``recipe`` declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fp8check.errors import InvalidValueError

__all__ = ["TrainingDeclaration", "training_from_table", "KEYS"]

KEYS = {"name", "model", "batches", "config", "recipe", "formats", "steps", "loss-steps", "seed", "device",
        "golden-dir"}
_FP8 = ("e4m3fn", "e4m3fnuz")


@dataclass(frozen=True)
class TrainingDeclaration:
    name: str
    model: str = "tiny-llama"
    batches: str | None = None
    config: str | None = None
    recipe: str = "rowwise"
    formats: tuple[str, ...] = _FP8
    steps: int = 1
    loss_steps: int = 0
    seed: int = 0
    device: str = "cpu"
    golden_dir: str | None = None
    root: str = "."  # the directory relative paths are read from (the pyproject.toml's)

    def __post_init__(self) -> None:
        from fp8check.training.recipes import get_recipe

        label = f"[[tool.fp8check.training]] {self.name!r}"
        if not self.name or not isinstance(self.name, str):
            raise InvalidValueError("[[tool.fp8check.training]]: every model needs a 'name'")
        object.__setattr__(self, "recipe", get_recipe(self.recipe).name)
        bad = [f for f in self.formats if f not in _FP8]
        if bad or not self.formats:
            raise InvalidValueError(f"{label}: formats {list(self.formats)!r}: give e4m3fn and/or e4m3fnuz")
        for key in ("steps", "loss_steps", "seed"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if key == "steps" else 0):
                raise InvalidValueError(f"{label}: {key.replace('_', '-')} must be an integer "
                                        f"{'>= 1' if key == 'steps' else '>= 0'}, got {v!r}")
        if self.device not in ("cpu", "cuda"):
            raise InvalidValueError(f"{label}: device {self.device!r}: use cpu or cuda")
        if self.callable_model:
            if not self.batches:
                raise InvalidValueError(f"{label}: a model given as MODULE:FUNC needs 'batches' (MODULE:FUNC)")
            if self.loss_steps or self.golden_dir:
                raise InvalidValueError(f"{label}: loss-steps and golden-dir need a model config (tiny-llama or a "
                                        "CONFIG.json), not MODULE:FUNC")
        elif self.batches:
            raise InvalidValueError(f"{label}: 'batches' goes with a MODULE:FUNC model; fp8check's decoder makes its own")

    @property
    def callable_model(self) -> bool:
        return ":" in self.model and not self.model.endswith(".json")

    def model_config(self) -> Any:
        """The :class:`~fp8check.training.model.ModelConfig` (None for a MODULE:FUNC model)."""
        from fp8check.training.model import load_config

        if self.callable_model:
            return None
        if self.model == "tiny-llama":
            return load_config(self.model)
        return load_config(Path(self.root) / self.model)

    def float8_config(self, fmt: str) -> Any:
        if not self.config:
            return None
        from fp8check.loader import load_callable

        return load_callable(self.config)(fmt)

    def check_step(self, fmt: str) -> Any:
        """Every cast and GEMM of ``steps`` training steps in ``fmt``: a StepConformance."""
        from fp8check.training.checks import check_step

        if self.callable_model:
            from fp8check.loader import load_callable

            model = load_callable(self.model)()
            batches = list(load_callable(self.batches)())[: self.steps]  # type: ignore[arg-type]
            return check_step(recipe=self.recipe, fmt=fmt, steps=len(batches), seed=self.seed, device=self.device,
                              config=self.float8_config(fmt), model=model, batches=batches)
        return check_step(self.model_config(), recipe=self.recipe, fmt=fmt, steps=self.steps, seed=self.seed,
                          device=self.device, config=self.float8_config(fmt))

    def loss_parity(self) -> tuple[Any, list[Any]]:
        """BF16 and every format trained ``loss_steps`` steps with the gates; the golden comparisons made."""
        from fp8check.training.checks import loss_parity, platform_key
        from fp8check.training.goldens import compare_golden, golden_path, load_golden

        cfg = self.model_config()
        parity = loss_parity(cfg, formats=("bf16", *self.formats), recipe=self.recipe, steps=self.loss_steps,
                             seed=self.seed, device=self.device)
        compared = []
        if self.golden_dir:
            for fmt, run in parity.runs.items():
                path = golden_path(platform_key(fmt, self.device), Path(self.root) / self.golden_dir)
                if path.is_file():
                    doc = load_golden(path)
                    if doc["model"] == cfg.to_json() and doc["recipe"] == self.recipe and doc["seed"] == self.seed:
                        compared.append(compare_golden(doc, run, device=self.device, prefix=True))
        return parity, compared


def training_from_table(entry: Any, root: str | Path, where: str = "pyproject.toml") -> TrainingDeclaration:
    """A declaration from one ``[[tool.fp8check.training]]`` table (dashes or underscores in keys)."""
    from fp8check.declarations import table_keys

    norm = table_keys("training", entry, where, KEYS)
    kw = {k.replace("-", "_"): v for k, v in norm.items()}
    if "formats" in kw:
        if isinstance(kw["formats"], str) or not isinstance(kw["formats"], (list, tuple)):
            raise InvalidValueError(f"{where}: [[tool.fp8check.training]] formats must be a list, got {kw['formats']!r}")
        kw["formats"] = tuple(kw["formats"])
    for key in ("name", "model", "batches", "config", "recipe", "device", "golden_dir"):
        if key in kw and not isinstance(kw[key], str):
            raise InvalidValueError(f"{where}: [[tool.fp8check.training]] {key} must be a string, got {kw[key]!r}")
    return TrainingDeclaration(root=str(root), **kw)

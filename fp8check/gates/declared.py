"""Gates a repository declares, for ``pytest -m gate``.

A repository names its own acceptance test (or a public one) in ``[[tool.fp8check.gate]]`` of its
``pyproject.toml``::

    [[tool.fp8check.gate]]
    gate = "tests.tolerances:close_enough"  # MODULE:FUNCTION (actual, expected), or a built-in gate name
    recipe = "block-1x128"                  # the recipe its quantizer declares (built-in or [tool.fp8check.recipe])
    kernel = "mykernels.quant:act_quant"    # optional: the quantizer; its own output where it conforms
    gemm = ["128x256x512"]                  # optional: also compare GEMM outputs of these MxNxK shapes
    # name, format, shape ("256x512"), dtype, expected ("reference" | "input"), inputs, seed, defects,
    # max-examples: as the options of `fp8check gate`

The plugin turns each into one test marked ``gate`` (``pytest -m gate``): it fails when the gate
accepts a defect that fp8check's own check of the same kernel rejects, and its message is the table
of what the gate lets through, with the assertion that replaces it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fp8check.errors import InvalidValueError

__all__ = ["GateDeclaration", "gate_from_table", "KEYS"]

KEYS = {"name", "gate", "recipe", "format", "kernel", "shape", "gemm", "dtype", "expected", "inputs", "seed",
        "defects", "max-examples"}


@dataclass(frozen=True)
class GateDeclaration:
    gate: str
    recipe: str
    name: str = ""
    format: str | None = None
    kernel: str | None = None
    shape: str | None = "256x512"
    gemm: tuple[str, ...] = ()
    dtype: str | None = None
    expected: str = "reference"
    inputs: int = 3
    seed: int = 0
    defects: tuple[str, ...] = ()
    max_examples: int = 20
    root: str = "."  # where MODULE:FUNCTION names are imported from (the pyproject.toml's directory)
    recipes: dict[str, Any] = field(default_factory=dict, compare=False)  # the repository's declared recipes

    def __post_init__(self) -> None:
        from fp8check import quantizers
        from fp8check.gates import defect, parse_views

        if not self.name:
            object.__setattr__(self, "name", f"{self.gate.rpartition(':')[2] or self.gate}-{self.recipe}")
        quantizers.get(self.recipe, self.format, declared=self.recipes)  # an unknown recipe fails here
        parse_views(self.shape, self.gemm)
        for d in self.defects:
            defect(d)
        if self.expected not in ("reference", "input"):
            raise InvalidValueError(f"expected = {self.expected!r}: 'reference' or 'input'")

    def command(self) -> str:
        """The ``fp8check gate`` line that measures the same (run from the pyproject.toml's directory)."""
        import shlex

        parts = ["fp8check", "gate", self.gate, "--recipe", self.recipe]
        for option, value in (("--format", self.format), ("--kernel", self.kernel), ("--shape", self.shape or "none"),
                              ("--dtype", self.dtype), ("--expected", self.expected), ("--inputs", self.inputs),
                              ("--seed", self.seed), ("--max-examples", self.max_examples),
                              ("--defects", ",".join(self.defects))):
            if value not in (None, ""):
                parts += [option, str(value)]
        for g in self.gemm:
            parts += ["--gemm", g]
        return shlex.join(parts)

    def measure(self) -> Any:
        from fp8check import quantizers
        from fp8check.gates import DEFECTS, defect, measure_gates, parse_views

        root = str(Path(self.root).resolve())
        if root not in sys.path:
            sys.path.insert(0, root)  # the repository's modules, wherever pytest runs from
        recipe = quantizers.get(self.recipe, self.format, declared=self.recipes)
        return measure_gates([self.gate], recipe=recipe, kernel=self.kernel, views=parse_views(self.shape, self.gemm),
                             dtype=self.dtype, expected=self.expected, inputs=self.inputs, seed=self.seed,
                             defects=tuple(defect(d) for d in self.defects) if self.defects else DEFECTS,
                             max_examples=self.max_examples)  # type: ignore[arg-type]


def gate_from_table(entry: Any, root: str | Path, where: str, recipes: dict[str, Any] | None = None) -> GateDeclaration:
    """One ``[[tool.fp8check.gate]]`` table as a declaration (keys with dashes or underscores)."""
    from fp8check.declaration_reader import table_keys

    kw = table_keys("gate", entry, where, KEYS)
    for key in ("gate", "recipe"):
        if not isinstance(kw.get(key), str):
            raise InvalidValueError(f"{where}: [[tool.fp8check.gate]] needs {key} = \"...\"")
    if "gemm" in kw:
        gemm = kw["gemm"]
        kw["gemm"] = tuple([gemm] if isinstance(gemm, str) else gemm)
    if "defects" in kw:
        kw["defects"] = tuple(kw["defects"])
    for key in ("inputs", "seed", "max-examples"):
        if key in kw and (not isinstance(kw[key], int) or kw[key] < (1 if key == "inputs" else 0)):
            raise InvalidValueError(f"{where}: [[tool.fp8check.gate]] {key} = {kw[key]!r}: give a whole number")
    if "max-examples" in kw:
        kw["max_examples"] = kw.pop("max-examples")
    try:
        return GateDeclaration(root=str(root), recipes=recipes or {}, **kw)
    except InvalidValueError as exc:
        raise InvalidValueError(f"{where}: [[tool.fp8check.gate]] {kw.get('name') or kw['gate']}: {exc}") from None

"""What torchao's float8 training recipes declare for every GEMM operand, as data.

Read from torchao 0.18 ``torchao/float8/config.py``
(``Float8LinearConfig.from_recipe_name``) and ``float8_linear.py``
(``matmul_with_hp_or_float8_args``): which of the six operand casts of a
linear happen, their granularity (tensorwise, or axiswise over the last
dimension -- one scale per row -- or over dim 0 -- one per column), their
format family (e4m3 or e5m2) and whether scales are rounded down to a
power of two. The format family becomes a format by platform, as torchao
chooses it (``Float8TypeConfig``: e4m3fnuz/e5m2fnuz on MI300, the OCP
formats elsewhere). This table, not the model's config, is what a step is
checked against: a config that casts grad_output to e4m3 under the
tensorwise recipe (which declares e5m2) is caught.
"""

from __future__ import annotations

from dataclasses import dataclass

from fp8check.errors import InvalidValueError
from fp8check.formats import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, Format

__all__ = ["OPERANDS", "GEMMS", "OperandCast", "TrainingRecipe", "TRAINING_RECIPES", "get_recipe",
           "PLATFORMS", "platform_format", "twin_formats"]

# The six casts of one linear, in the order matmul_with_hp_or_float8_args makes them, and their GEMM.
OPERANDS = ("input", "weight", "grad_output", "weight_t", "grad_output_t", "input_t")
GEMMS = {"output": ("input", "weight"), "grad_input": ("grad_output", "weight_t"),
         "grad_weight": ("grad_output_t", "input_t")}


@dataclass(frozen=True, kw_only=True)
class OperandCast:
    """One declared cast: ``granularity`` tensorwise / rowwise / colwise (of the 2-D operand as the GEMM
    takes it), ``family`` e4m3 / e5m2, or ``None`` for an operand kept in high precision."""

    operand: str
    granularity: str | None
    family: str | None

    @property
    def disabled(self) -> bool:
        return self.granularity is None


@dataclass(frozen=True, kw_only=True)
class TrainingRecipe:
    name: str
    casts: tuple[OperandCast, ...]
    pow2: bool
    source: str

    def cast(self, operand: str) -> OperandCast:
        return next(c for c in self.casts if c.operand == operand)


def _r(name: str, pow2: bool, spec: dict[str, tuple[str | None, str | None]]) -> TrainingRecipe:
    return TrainingRecipe(name=name, pow2=pow2, source="torchao 0.18 torchao/float8/config.py from_recipe_name",
                          casts=tuple(OperandCast(operand=o, granularity=spec[o][0], family=spec[o][1])
                                      for o in OPERANDS))


TRAINING_RECIPES: dict[str, TrainingRecipe] = {r.name: r for r in (
    # Float8LinearConfig(): dynamic tensorwise, grad_output in e5m2.
    _r("tensorwise", False, {"input": ("tensorwise", "e4m3"), "weight": ("tensorwise", "e4m3"),
                             "grad_output": ("tensorwise", "e5m2"), "weight_t": ("tensorwise", "e4m3"),
                             "grad_output_t": ("tensorwise", "e5m2"), "input_t": ("tensorwise", "e4m3")}),
    # axiswise everywhere, all e4m3, round_scales_to_power_of_2=True. The weight arrives transposed
    # (in, out): axiswise_dim 0 is one scale per output feature (a column of W^T).
    _r("rowwise", True, {"input": ("rowwise", "e4m3"), "weight": ("colwise", "e4m3"),
                         "grad_output": ("rowwise", "e4m3"), "weight_t": ("rowwise", "e4m3"),
                         "grad_output_t": ("colwise", "e4m3"), "input_t": ("colwise", "e4m3")}),
    # rowwise forward, grad_input with a tensorwise weight, grad_weight in high precision.
    _r("rowwise_with_gw_hp", True, {"input": ("rowwise", "e4m3"), "weight": ("colwise", "e4m3"),
                                    "grad_output": ("rowwise", "e4m3"), "weight_t": ("tensorwise", "e4m3"),
                                    "grad_output_t": (None, None), "input_t": (None, None)}),
)}


def get_recipe(name: str) -> TrainingRecipe:
    key = str(name).strip().lower().replace("-", "_")
    if key not in TRAINING_RECIPES:
        raise InvalidValueError(f"unknown training recipe {name!r}; known: {', '.join(TRAINING_RECIPES)}")
    return TRAINING_RECIPES[key]


# Platforms: which formats torchao picks (Float8TypeConfig) and whether the GEMM is emulated.
PLATFORMS = {
    "cpu-emulated-e4m3fn": {"e4m3": E4M3FN, "e5m2": E5M2},
    "cpu-emulated-e4m3fnuz": {"e4m3": E4M3FNUZ, "e5m2": E5M2FNUZ},  # what torchao picks on MI300
    "h200-e4m3fn": {"e4m3": E4M3FN, "e5m2": E5M2},
    "mi300-e4m3fnuz": {"e4m3": E4M3FNUZ, "e5m2": E5M2FNUZ},
}


def platform_format(family: str, fnuz: bool) -> Format:
    return {("e4m3", False): E4M3FN, ("e4m3", True): E4M3FNUZ, ("e5m2", False): E5M2, ("e5m2", True): E5M2FNUZ}[
        (family, fnuz)]


def twin_formats(family: str) -> tuple[Format, Format]:
    """The OCP format and its fnuz twin for a family."""
    return platform_format(family, False), platform_format(family, True)

"""Recipes a repository declares: ``[tool.fp8check.recipe.NAME]`` tables, a conftest hook, the Python API.

A declared recipe is a :class:`~fp8check.quantizers.Recipe` built from a
table of its fields, optionally starting from a named recipe (``base``)::

    [tool.fp8check.recipe.my-rowwise]
    base = "fbgemm-rowwise"          # a built-in or another declared recipe
    format = "e4m3fnuz"
    eps = "none"                     # no eps ("none" or false clears a base's value)

    [tool.fp8check.recipe.my-per-token]
    granularity = "rowwise"          # tensorwise, rowwise, colwise, "block 1x128", group-rowwise, group-colwise
    convention = "scale_inv"         # what the computed number is: scale (multiplies) or scale_inv (divides)
    apply = "multiply-reciprocal"    # divide | multiply | multiply-reciprocal (x * fl(1/s))
    stored = "applied"               # applied | reciprocal (fl(1/s), what FBGEMM stores)
    scale-divide = "divide"          # divide | multiply-reciprocal: the scale's quotient as num * fl(1/den)
    amax = "skip-nan"                # finite | ieee | skip-nan (tl.max, fmaxf: NaN skipped, Inf kept)

    [tool.fp8check.recipe.my-mxfp4]
    base = "mx-e8m0-floor"           # OCP MX scales for FP4/FP6 elements too
    format = "e2m1fn"                # e2m1fn (fp4), e2m3fn / e3m2fn (fp6), or an fp8 format
    packed = "low-first"             # e2m1fn only: two codes per byte, element 2j in the low nibble (or high-first)

Every other field of ``Recipe`` is a key too (dashes or underscores):
``target``, ``eps``, ``scale-precision``, ``pow2``, ``scale-dtype``,
``profile``, ``rule``, ``ragged``, ``dequant-dtype``, ``scale-min``,
``zero-scale``, ``description`` (``nonfinite`` is ``amax``'s other name).
Without a ``base``, ``format`` (default e4m3fn) and ``granularity`` are
needed and the other fields take ``Recipe``'s defaults.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from fp8check.errors import FP8CheckError, InvalidValueError
import fp8check.quantizers.presets as presets
from fp8check.quantizers.recipe import Granularity, Recipe, block

__all__ = ["declared_recipe", "declared_recipes", "parse_granularity", "RECIPE_KEYS"]

RECIPE_KEYS = ("base", "format", "granularity", "convention", "rule", "target", "eps", "scale_precision", "pow2",
               "scale_dtype", "profile", "nonfinite", "amax", "ragged", "dequant_dtype", "scale_min", "zero_scale",
               "apply", "stored", "scale_divide", "packed", "description")
_CLEARABLE = ("target", "eps", "pow2", "scale_min", "zero_scale", "apply", "packed")
_NUMBERS = ("target", "eps", "scale_min", "zero_scale")


def parse_granularity(value: Any, where: str) -> Granularity:
    """``tensorwise``, ``rowwise``, ``colwise``, ``group-rowwise``, ``group-colwise`` or a block
    (``"block 1x128"``, ``"block-128x128"``, ``"1x32"``)."""
    if isinstance(value, Granularity):
        return value
    text = str(value).strip().lower().replace("_", "-")
    m = re.fullmatch(r"(?:block[\s-]*)?(\d+)\s*x\s*(\d+)", text)
    if m:
        return block(int(m.group(1)), int(m.group(2)))
    kinds = {"tensorwise": "tensorwise", "rowwise": "rowwise", "colwise": "colwise",
             "group-rowwise": "group_rowwise", "group-colwise": "group_colwise"}
    if text not in kinds:
        raise InvalidValueError(f"{where}: granularity {value!r}: use tensorwise, rowwise, colwise, group-rowwise, "
                                "group-colwise or a block such as \"block 1x128\"")
    return Granularity(kind=kinds[text])


def _cleared(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() == "none")


def declared_recipe(name: str, table: Mapping[str, Any] | None = None, *, where: str = "the Python API",
                    recipes: Mapping[str, Recipe] | None = None, **fields: Any) -> Recipe:
    """The recipe ``name`` declared by ``table`` (and/or keyword ``fields``), from its ``base`` if it has one.

    ``recipes``: other declared recipes a ``base`` may name (the built-in ones always can).
    """
    entry = {str(k).replace("-", "_"): v for k, v in {**dict(table or {}), **fields}.items()}
    label = f"{where}: recipe {name!r}"
    unknown = sorted(set(entry) - set(RECIPE_KEYS))
    if unknown:
        raise InvalidValueError(f"{label}: unknown key(s) {', '.join(unknown)}; known: {', '.join(RECIPE_KEYS)}")
    if "amax" in entry and "nonfinite" in entry:
        raise InvalidValueError(f"{label}: give 'amax' or 'nonfinite' (the same field), not both")
    if "amax" in entry:
        entry["nonfinite"] = entry.pop("amax")
    base_name = entry.pop("base", None)
    if base_name is not None:
        key = str(base_name).strip().lower().replace("_", "-")
        if recipes and key in recipes:
            base = recipes[key]
        else:
            try:
                base = presets.get(base_name)
            except presets.UnknownRecipeError:
                raise InvalidValueError(f"{label}: base {base_name!r} is no recipe; known: "
                                        f"{', '.join(list(recipes or ()) + list(presets.names()))}") from None
        kw: dict[str, Any] = {}
    else:
        if "granularity" not in entry:
            raise InvalidValueError(f"{label}: give a 'base' recipe or at least 'granularity' (and 'format')")
        base = None
        kw = {"format": "e4m3fn"}
    for key, value in entry.items():
        if key in _CLEARABLE and _cleared(value):
            kw[key] = None
        elif key == "granularity":
            kw[key] = parse_granularity(value, label)
        elif key in _NUMBERS:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidValueError(f"{label}: {key} = {value!r}: give a number (or \"none\")")
            kw[key] = float(value)
        elif key == "ragged":
            if not isinstance(value, bool):
                raise InvalidValueError(f"{label}: ragged = {value!r}: give true or false")
            kw[key] = value
        else:
            kw[key] = str(value)
    try:
        if base is None:
            return Recipe(name=name, **kw)
        kw.setdefault("description", f"declared from {base.name}" + (f": {base.description}" if base.description else ""))
        return base.replace(name=name, **kw)
    except InvalidValueError as exc:
        raise InvalidValueError(f"{where}: {exc}") from None
    except Exception as exc:  # an unknown format or profile name raises the project's own lookup errors
        if isinstance(exc, FP8CheckError):
            raise InvalidValueError(f"{label}: {exc}") from None
        raise


def declared_recipes(tables: Any, where: str = "pyproject.toml") -> dict[str, Recipe]:
    """Every recipe of a ``[tool.fp8check.recipe]`` table (NAME -> fields), bases resolved in any order."""
    if tables is None:
        return {}
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise InvalidValueError(f"{where}: [tool.fp8check.recipe] holds one table per recipe: "
                                "[tool.fp8check.recipe.NAME]")
    pending = {str(k).strip().lower().replace("_", "-"): v for k, v in tables.items()}
    for name in pending:
        if name in presets.RECIPES:
            raise InvalidValueError(f"{where}: recipe {name!r} is a built-in recipe's name; declare it under another "
                                    f"name (with base = \"{name}\" to start from it)")
    done: dict[str, Recipe] = {}
    while pending:
        ready = [n for n, t in pending.items()
                 if str(t.get("base", "")).strip().lower().replace("_", "-") not in pending]
        if not ready:
            raise InvalidValueError(f"{where}: the bases of recipes {', '.join(sorted(pending))} form a cycle")
        for n in ready:
            done[n] = declared_recipe(n, pending.pop(n), where=where, recipes=done)
    return done

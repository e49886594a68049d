"""The reader of declarations: ``[[tool.fp8check.KIND]]`` tables of a ``pyproject.toml``, and the calls a
``pytest_fp8check_kernels()`` hook of a ``conftest.py`` makes (:func:`cast_kernel`, :func:`quantizer_kernel`,
:func:`fused_kernel`, :func:`static_quantizer`), each made into a :class:`~fp8check.declaration.KernelDeclaration`
through :func:`~fp8check.declaration.declare`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fp8check.declaration import KERNEL_KINDS, KINDS, KernelDeclaration, declare
from fp8check.errors import InvalidValueError
from fp8check.pyproject import read_fp8check_table

__all__ = ["cast_kernel", "quantizer_kernel", "fused_kernel", "static_quantizer", "decode_kernel",
           "dequant_kernel", "from_table", "from_pyproject",
           "table_keys", "first_duplicate", "TABLE_KEYS", "SETTINGS_TABLES", "gemm_kernel"]

# [tool.fp8check] tables besides the kernel kinds: declared recipes, training models, gates
SETTINGS_TABLES = {"recipe", "training", "gate"}
TABLE_KEYS = {"name", "kernel", "format", "profile", "input-dtypes", "device", "recipe", "reference", "args", "ulps",
              "triton-target", "supports", "apply", "scale", "isolate", "requires", "known-divergence",
              "max-examples", "code-dtypes", "output-dtype", "block", "epilogue"}


def cast_kernel(kernel: Any, *, format: str, profile: str = "ieee", **kw: Any) -> KernelDeclaration:
    """Declare a cast kernel: ``kernel(x) -> fp8 tensor or uint8 codes``."""
    return declare("cast", kernel=kernel, format=format, profile=profile, **kw)


def quantizer_kernel(kernel: Any, *, recipe: Any, format: str | None = None, **kw: Any) -> KernelDeclaration:
    """Declare a quantizer: ``kernel(x) -> (codes, scales)`` under ``recipe`` (a name, or a
    :class:`~fp8check.quantizers.Recipe`, e.g. from :func:`fp8check.quantizers.declared_recipe`)."""
    return declare("quantizer", kernel=kernel, recipe=recipe, format=format, **kw)


def fused_kernel(kernel: Any, *, reference: Any, format: str, profile: str = "ieee", args: Any = None,
                 ulps: int = 0, **kw: Any) -> KernelDeclaration:
    """Declare a fused kernel: ``kernel(x, *args) -> codes``, ``reference(x, *args)`` the values before its cast."""
    return declare("fused", kernel=kernel, reference=reference, format=format, profile=profile, args=args, ulps=ulps, **kw)


def static_quantizer(kernel: Any, *, format: str, profile: str = "satfinite", apply: str = "divide",
                     scale: float | None = None, **kw: Any) -> KernelDeclaration:
    """Declare a static-scale quantizer: ``kernel(x, scale) -> fp8 codes``, ``scale`` a float32 tensor of
    shape (1,) applied as ``apply`` says (``divide``: x / scale; ``multiply-reciprocal``: x * fl(1/scale);
    ``multiply``: x * scale; ``target-divide`` and ``multiply-target-reciprocal``: x / scale and x * (1.0 / scale)
    with the Triton target's own ``/``). ``scale``: check this one scale only (default: scales drawn at every
    boundary)."""
    return declare("static", kernel=kernel, format=format, profile=profile, apply=apply, scale=scale, **kw)


def decode_kernel(kernel: Any, *, format: str, code_dtypes: Any = (), output_dtype: str | None = None,
                  **kw: Any) -> KernelDeclaration:
    """Declare a decode kernel: ``kernel(codes) -> values`` (float32, float16 or bfloat16), ``codes`` uint8 or the
    format's torch fp8 dtype (``code_dtypes``: ``"uint8"`` and/or ``"fp8"``; default: each tried)."""
    return declare("decode", kernel=kernel, format=format, code_dtypes=code_dtypes, output_dtype=output_dtype, **kw)


def dequant_kernel(kernel: Any, *, format: str, block: Any = (128, 128), apply: str = "multiply",
                   code_dtypes: Any = (), output_dtype: str | None = None, **kw: Any) -> KernelDeclaration:
    """Declare a block dequant kernel: ``kernel(codes, scales) -> values``, ``codes`` (M, N) uint8 or the format's
    torch fp8 dtype, ``scales`` float32 (ceil(M / rows), ceil(N / cols)) for ``block = (rows, cols)``, applied as
    ``apply`` says (``multiply``: code * scale; ``divide``; ``multiply-reciprocal``: code * fl(1/scale))."""
    return declare("dequant", kernel=kernel, format=format, block=tuple(block) if isinstance(block, list) else block,
                   apply=apply, code_dtypes=code_dtypes, output_dtype=output_dtype, **kw)


def gemm_kernel(kernel: Any, *, recipe: str, format: str, epilogue: str | None = None, args: Any = None,
                **kw: Any) -> KernelDeclaration:
    """Declare a scaled FP8 GEMM: ``kernel(a, a_scales, b, b_scales) -> out`` (``a`` (M, K), ``b`` (N, K); or
    ``kernel(*args(a, a_scales, b, b_scales))``) under the GEMM ``recipe`` of its scales and its ``epilogue``
    (:mod:`fp8check.matmul.gemm`), judged under ``triton_target``'s tensor cores."""
    return declare("gemm", kernel=kernel, recipe=recipe, format=format, epilogue=epilogue, args=args, **kw)


def table_keys(kind: str, entry: Any, where: str, known: set[str]) -> dict[str, Any]:
    """One ``[[tool.fp8check.KIND]]`` table with its keys spelled with dashes (underscores accepted), every
    key one of ``known``."""
    if not isinstance(entry, dict):
        raise InvalidValueError(f"{where}: [[tool.fp8check.{kind}]] entries must be tables")
    norm = {str(k).replace("_", "-"): v for k, v in entry.items()}
    unknown = set(norm) - known
    if unknown:
        raise InvalidValueError(f"{where}: [[tool.fp8check.{kind}]] has unknown key(s) {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(sorted(known))}")
    return norm


def first_duplicate(names: list[str]) -> str | None:
    """The first name given twice (declarations, training models: each must be told apart), or None."""
    return next((n for n in names if names.count(n) > 1), None)


def from_table(kind: str, entry: dict[str, Any], where: str = "pyproject.toml",
               recipes: dict[str, Any] | None = None) -> KernelDeclaration:
    """A declaration from one ``[[tool.fp8check.KIND]]`` table (dashes or underscores in keys); ``recipes``: the
    recipes the same file declares (``[tool.fp8check.recipe.NAME]``), which its ``recipe`` may name."""
    norm = table_keys(kind, entry, where, TABLE_KEYS)
    supports = {str(k).replace("-", "_"): v for k, v in dict(norm.pop("supports", {}) or {}).items()}
    kw = {k.replace("-", "_"): v for k, v in norm.items()}
    if "input_dtypes" in kw:
        kw["input_dtypes"] = tuple(kw["input_dtypes"])
    if kind == "quantizer" and recipes and isinstance(kw.get("recipe"), str):
        from fp8check import quantizers

        kw["recipe"] = quantizers.get(kw["recipe"], declared=recipes)
    if kind == "dequant" and isinstance(kw.get("block"), list):
        kw["block"] = tuple(kw["block"])
    if kind == "static" and "scale" in kw:
        if isinstance(kw["scale"], bool) or not isinstance(kw["scale"], (int, float)):
            raise InvalidValueError(f"{where}: [[tool.fp8check.static]] scale = {kw['scale']!r}: give a number")
        kw["scale"] = float(kw["scale"])
    if where.endswith("pyproject.toml"):
        kw.setdefault("declared_in", str(Path(where).parent))
    try:
        return declare(kind, supports=supports, **kw)
    except TypeError as exc:
        raise InvalidValueError(f"{where}: [[tool.fp8check.{kind}]]: {exc}") from None


def from_pyproject(path: str | Path, *, invalid_ok: bool = False) -> tuple[list[KernelDeclaration], dict[str, Any]]:
    """The kernels ``[tool.fp8check]`` of ``path`` declares, and its other settings (``invalid_ok``: see
    :func:`~fp8check.pyproject.read_fp8check_table`). The pytest plugin declares a repository's kernels through
    this."""
    from fp8check.quantizers.declared import declared_recipes

    table = read_fp8check_table(path, invalid_ok=invalid_ok)
    where = str(path)
    # tables and arrays of tables only: scalar keys are the pytest plugin's options (hypothesis-profile, ...)
    tables = {k for k, v in table.items() if isinstance(v, (dict, list))}
    unknown = sorted(tables - set(KINDS) - SETTINGS_TABLES)
    if unknown:  # a misspelt table would otherwise declare nothing, silently
        raise InvalidValueError(f"{where}: unknown table(s) {', '.join(f'tool.fp8check.{t}' for t in unknown)} "
                                f"(unknown table(s) {', '.join(unknown)}); known: "
                                f"{', '.join(sorted(set(KINDS) | SETTINGS_TABLES))}")
    recipes = declared_recipes(table.get("recipe"), where)
    out = []
    for kind in KERNEL_KINDS:
        entries = table.get(kind, [])
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list):
            raise InvalidValueError(f"{where}: tool.fp8check.{kind} must be tables ([[tool.fp8check.{kind}]])")
        out.extend(from_table(kind, e, where, recipes) for e in entries)
    settings = {k: v for k, v in table.items() if k not in KINDS and k != "recipe"}
    return out, settings

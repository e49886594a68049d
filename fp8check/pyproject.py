"""The ``[tool.fp8check]`` table of a ``pyproject.toml``, and the recipes it declares.

The one reader of fp8check's table in a configuration file: the declarations'
reader (:mod:`fp8check.declaration_reader`), the pytest plugin and the command
line read ``[tool.fp8check]`` through :func:`read_fp8check_table`. A leaf: it
knows nothing of declarations, so the record and the reader both import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fp8check.errors import InvalidValueError

__all__ = ["read_fp8check_table", "repository_recipes", "recipe_named", "UnreadablePyproject"]


class UnreadablePyproject(InvalidValueError):
    """A ``pyproject.toml`` that cannot be read or is not valid TOML."""


def read_fp8check_table(path: str | Path, *, invalid_ok: bool = False) -> dict[str, Any]:
    """The ``[tool.fp8check]`` table of the ``pyproject.toml`` at ``path`` ({} when it has none).

    The one reader of fp8check's table in a configuration file: whatever reads ``[tool.fp8check]``
    (the pytest plugin through :func:`fp8check.declarations.from_pyproject`) reads it through this.
    A file that cannot be read or is not valid TOML raises :class:`InvalidValueError`, or with
    ``invalid_ok`` counts as declaring nothing: a file pytest did not read is left alone."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    p = Path(path)
    try:
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UnreadablePyproject(f"{p}: cannot read: {exc.strerror or exc}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UnreadablePyproject(f"{p}: not valid TOML: {exc}") from None
    except UnreadablePyproject:
        if invalid_ok:
            return {}
        raise
    tool = doc.get("tool", {})
    table = tool.get("fp8check", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise InvalidValueError(f"{p}: [tool.fp8check] must be a table")
    return table


def repository_recipes(start: str | Path | None = None) -> dict[str, Any]:
    """The recipes ``[tool.fp8check.recipe]`` declares in the nearest ``pyproject.toml`` at or above ``start``
    (default: the working directory) that has a ``[tool.fp8check]`` table; {} when there is none."""
    from fp8check.quantizers.declared import declared_recipes

    for p, table, _ in _pyproject_tables(start):
        if table:
            return declared_recipes(table.get("recipe"), str(p))
    return {}


def recipe_named(name: Any, fmt: Any = None, start: str | Path | None = None) -> Any:
    """The recipe ``name`` (``fmt`` as in :func:`fp8check.quantizers.get`): a named one or one the repository
    declares (:func:`repository_recipes`). A name neither knows also names the ``pyproject.toml`` passed over
    as unreadable on the way, whose recipes were then never read."""
    from fp8check import quantizers

    try:
        return quantizers.get(name, fmt, declared=repository_recipes(start))
    except quantizers.UnknownRecipeError as exc:
        for _, table, unreadable in _pyproject_tables(start):
            if unreadable is not None:
                raise quantizers.UnknownRecipeError(f"{exc}; {unreadable}, so the recipes it declares were not "
                                                    f"read") from None
            if table:
                break
        raise


def _pyproject_tables(start: str | Path | None) -> Iterator[tuple[Path, dict[str, Any], UnreadablePyproject | None]]:
    """Each ``pyproject.toml`` at or above ``start`` (default: the working directory), nearest first, with its
    ``[tool.fp8check]`` table, or {} and the error that kept it from being read."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        p = folder / "pyproject.toml"
        if not p.is_file():
            continue
        try:
            yield p, read_fp8check_table(p), None
        except UnreadablePyproject as exc:  # declares nothing, as pytest would not have read it either
            yield p, {}, exc

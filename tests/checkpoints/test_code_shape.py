"""The checkpoint package stays readable (issue 31): no function over 100 lines, and modules imported under their
own names (``conventions.pair``, not ``cv.pair``)."""

from __future__ import annotations

import ast
from pathlib import Path

import fp8check.checkpoints

PACKAGE = Path(fp8check.checkpoints.__file__).parent
MAX_LINES = 100


def long_functions(source: str, name: str) -> list[str]:
    return [f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES]


def module_aliases(source: str, name: str) -> list[str]:
    """``from fp8check... import x as y`` and ``import fp8check.x as y`` of a module of fp8check."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fp8check"):
            out += [f"{name}:{node.lineno} {a.name} as {a.asname}" for a in node.names
                    if a.asname and a.name.islower() and a.asname != a.name]
        elif isinstance(node, ast.Import):
            out += [f"{name}:{node.lineno} {a.name} as {a.asname}" for a in node.names
                    if a.asname and a.name.startswith("fp8check")]
    return out


def _sources() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(PACKAGE.glob("*.py"))}


def test_no_function_of_the_checkpoint_package_is_over_100_lines():
    assert [f for name, src in _sources().items() for f in long_functions(src, name)] == []


def test_the_checkpoint_package_imports_modules_by_their_names():
    assert [f for name, src in _sources().items() for f in module_aliases(src, name)] == []


def test_the_rules_see_planted_code():
    long = "def f():\n" + "    x = 1\n" * MAX_LINES
    assert long_functions(long, "m.py") == [f"m.py:1 f ({MAX_LINES + 1} lines)"]
    assert long_functions("def f():\n" + "    x = 1\n" * (MAX_LINES - 1), "m.py") == []
    planted = "from fp8check.checkpoints import stats as st\nfrom fp8check.checkpoints.findings import CODES as C\n"
    assert module_aliases(planted, "m.py") == ["m.py:1 stats as st"]

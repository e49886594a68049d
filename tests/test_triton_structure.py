"""The shape of fp8check.triton (issue 31): one patch scope, no import circles, no long functions.

The import graph counts function-local imports too (a circle through them is still a circle); the
checks read the source with ``ast`` and import nothing of Triton.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from fp8check.patching import PatchScope

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRITON = ROOT / "fp8check" / "triton"
MAX_FUNCTION_LINES = 100


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """Every one of ``modules`` that ``path`` imports, at module level or inside a function
    (``from pkg import module`` imports the module, ``from pkg import name`` the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules else node.module)
    return found & modules


def _graph(package_dir: pathlib.Path) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in package_dir.rglob("*.py")}
    return {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}


def _circle(graph: dict[str, set[str]], skip: frozenset[str] = frozenset()) -> list[str] | None:
    """One import circle of ``graph`` (the package's ``__init__`` left out: importing a submodule imports it
    first anyway), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m] - skip):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(set(graph) - skip):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_module_of_fp8check_triton_imports_back_up():
    graph = _graph(TRITON)
    assert _circle(graph, frozenset({"fp8check.triton"})) is None, _circle(graph, frozenset({"fp8check.triton"}))
    # the layers below interpreter mode import neither it nor the package (whose __init__ imports it)
    for low in ("layer", "launch", "sanitizer", "batched", "ops", "targets"):
        up = graph[f"fp8check.triton.{low}"] & {"fp8check.triton", "fp8check.triton.interpreter_mode"}
        assert not up, f"fp8check.triton.{low} imports {up}"


def test_the_patch_scope_is_a_leaf():
    tree = ast.parse((ROOT / "fp8check" / "patching.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.split(".")[0] == "fp8check"}, imported


def test_a_planted_circle_is_found():
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": set()}
    assert _circle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    graph["p.c"] = set()
    assert _circle(graph) is None


@pytest.mark.parametrize("path", sorted(TRITON.rglob("*.py")) + [ROOT / "fp8check" / "patching.py"],
                         ids=lambda p: p.name)
def test_no_function_over_100_lines(path):
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


class _Owner:
    @staticmethod
    def kept() -> str:
        return "original"


class _Child(_Owner):
    pass


def test_patch_scope_restores_in_reverse_what_it_replaced():
    import types

    module = types.SimpleNamespace(value=1)
    table = {"a": 1}
    scope = PatchScope()
    scope.set(module, "value", 2)
    scope.set(module, "value", 3)  # set twice: the first original comes back
    scope.set(module, "added", 4)  # absent before: deleted again
    scope.set(_Owner, "kept", staticmethod(lambda: "patched"))
    scope.set(_Child, "kept", staticmethod(lambda: "child"))  # inherited: deleted again, not copied down
    scope.set_item(table, "a", 2)
    scope.set_item(table, "b", 3)
    assert (module.value, module.added, _Owner.kept(), _Child.kept(), table) == (3, 4, "patched", "child",
                                                                                  {"a": 2, "b": 3})
    assert len(scope) == 7
    scope.restore()
    assert module.value == 1 and not hasattr(module, "added") and table == {"a": 1}
    assert isinstance(_Owner.__dict__["kept"], staticmethod) and _Owner.kept() == "original"
    assert "kept" not in _Child.__dict__ and _Child.kept() == "original"
    assert len(scope) == 0

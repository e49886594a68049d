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


# -- every layer removed ----------------------------------------------------------------------------------

try:
    import triton
    import triton.language as tl
except ImportError:  # the structure checks above need no Triton
    triton = None

if triton is not None:
    @triton.jit
    def _cast(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, tl.clamp(x / 2.0, -448.0, 448.0).to(tl.float8e4nv), mask=offs < n)


def _patchable() -> list[object]:
    """Everything the layers patch: Triton's interpreter, its builder and executor, the autotuner, the jit
    function class, triton.language."""
    import triton.language as tl
    import triton.runtime.interpreter as interp
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    return [interp, interp.InterpreterBuilder, interp.GridExecutor, interp.InterpretedFunction, interp.ReduceOps,
            interp.ScanOps, interp.interpreter_builder, Autotuner, JITFunction, tl, tl.core, tl.math,
            tl.core.tensor, tl.core.dtype]


def _state() -> list[dict[str, int]]:
    import os

    launch_state = {"grid_dim", "grid_idx"}  # the builder's program ids, set by every launch (not a patch)
    return [{name: id(value) for name, value in vars(obj).items() if name not in launch_state}
            for obj in _patchable()] + [{"TRITON_INTERPRET": id(os.environ.get("TRITON_INTERPRET"))}]


def test_every_layer_is_removed_in_reverse_and_nothing_is_left_patched():
    if triton is None:
        pytest.skip("needs triton")
    torch = pytest.importorskip("torch")
    import fp8check.triton as ft

    if ft.triton_version().split("+")[0] not in ft.SUPPORTED_TRITON_VERSIONS:
        pytest.skip("a Triton the faithful interpreter does not support")
    before = _state()
    x = torch.linspace(-1000, 1000, 100)
    y = torch.empty(100, dtype=torch.float8_e4m3fn)
    with ft.watch() as w, ft.interpreting(), ft.faithful("sm90"):
        inside = _state()
        with ft.interpreting(), ft.faithful("gfx950"):  # nested blocks install nothing twice
            assert _state() == inside
        _cast[(4,)](x, y, 100, BLOCK=32)
    assert inside != before and w.faithful_conversions > 0
    assert _state() == before
    expected = torch.clamp(x / 2.0, -448.0, 448.0).to(torch.float8_e4m3fn)
    assert torch.equal(y.view(torch.uint8), expected.view(torch.uint8))

"""The layers point down (DESIGN.md, Layout): the core and the library packages never import a face,
and the terminal renders result types only (it never reaches into an engine)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import fp8check

PACKAGE = Path(fp8check.__file__).parent
# The faces at the edge, which only turn results into output.
FACES = ("fp8check.terminal", "fp8check.report", "fp8check.cli", "fp8check.commands", "fp8check.plugin",
         "fp8check.api", "fp8check.suite")
# What a terminal view may read of a check kind's package: its result types and finding codes.
RESULT_MODULES = ("fp8check.results", "fp8check.checkpoints.audit_result", "fp8check.checkpoints.findings")
ENGINE_PACKAGES = ("fp8check.casts", "fp8check.quantizers", "fp8check.matmul", "fp8check.checkpoints",
                   "fp8check.triton", "fp8check.training")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("fp8check",) + path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every module an import statement names, at any depth (function-level imports too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.module, node.lineno)] + [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return found


def _violations(rule) -> list[str]:
    return [f"{mod}:{line} imports {name}" for mod, path in _modules().items() for name, line in _imports(path)
            if rule(mod, name)]


def library_imports_a_face(mod: str, name: str) -> bool:
    library = not _within(mod, FACES) and mod not in ("fp8check", "fp8check.__main__")
    return library and _within(name, FACES)


def terminal_reaches_into_an_engine(mod: str, name: str) -> bool:
    return _within(mod, ("fp8check.terminal",)) and _within(name, ENGINE_PACKAGES) and not _within(name, RESULT_MODULES)


def test_the_library_never_imports_a_face():
    assert _violations(library_imports_a_face) == []


def test_the_terminal_renders_result_types_only():
    assert _violations(terminal_reaches_into_an_engine) == []


def test_the_rules_see_a_planted_import(tmp_path, monkeypatch):
    # each rule can fail: a core module that imports the terminal printer, a terminal module that imports the auditor
    planted = {"fp8check.results": "from fp8check.terminal.divergences import result_text",
               "fp8check.terminal.checkpoints": "from fp8check.checkpoints.audit import Auditor"}
    modules = _modules()
    fake = {}
    for name, line in planted.items():
        copy = tmp_path / (name + ".py")
        copy.write_text(modules[name].read_text(encoding="utf-8") + f"\n\ndef _planted():\n    {line}\n")
        fake[name] = copy
    monkeypatch.setattr(sys.modules[__name__], "_modules", lambda: {**modules, **fake})
    assert {v.split(":")[0] for v in _violations(library_imports_a_face)} == {"fp8check.results"}
    assert {v.split(":")[0] for v in _violations(terminal_reaches_into_an_engine)} == {"fp8check.terminal.checkpoints"}


# Issue 31: the house stays changeable. A circle through function-local imports is still a circle (it only
# moves the ImportError to run time), and a function past this length no longer reads as one idea.
LONGEST_FUNCTION = 120


def _import_graph() -> dict[str, set[str]]:
    """Module -> the fp8check modules it imports anywhere in its body. `from fp8check.x import name` is an
    edge to fp8check.x.name when that is a module (not to the package x, whose __init__ Python runs first
    but which is not what the importer depends on), else to fp8check.x."""
    modules = _modules()
    graph: dict[str, set[str]] = {mod: set() for mod in modules}

    def defining_module(name: str) -> str | None:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in modules else None

    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [defining_module(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [defining_module(f"{node.module}.{a.name}") for a in node.names]
            else:
                continue
            graph[mod] |= {t for t in targets if t is not None and t != mod}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def long_functions(paths: dict[str, Path], limit: int = LONGEST_FUNCTION) -> list[str]:
    found = []
    for mod, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{mod}:{node.lineno} {node.name} is {length} lines")
    return found


def test_no_import_circle_inside_the_package():
    assert import_circles(_import_graph()) == []


def test_no_function_longer_than_the_limit():
    assert long_functions(_modules()) == []


def test_the_house_rules_see_a_planted_circle_and_a_long_function(tmp_path):
    # a function-local import from results back into the terminal closes a circle; a long function is counted
    graph = _import_graph()
    graph["fp8check.formats"] = graph["fp8check.formats"] | {"fp8check.results"}
    graph["fp8check.results"] = graph["fp8check.results"] | {"fp8check.formats"}
    assert ["fp8check.formats", "fp8check.results"] in import_circles(graph)
    long = tmp_path / "long.py"
    long.write_text("def planted():\n" + "    x = 1\n" * LONGEST_FUNCTION)
    assert long_functions({"planted": long}) == [f"planted:1 planted is {LONGEST_FUNCTION + 1} lines"]


# The checkpoint package (issue 31 item 6): its modules imported under their own names (`conventions.pair`, not
# `cv.pair`), and its functions within the interpreter's 100 lines.
CHECKPOINTS = PACKAGE / "checkpoints"


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


def test_the_checkpoint_package_imports_modules_by_their_names():
    found = [f for p in sorted(CHECKPOINTS.glob("*.py")) for f in module_aliases(p.read_text(encoding="utf-8"), p.name)]
    assert found == []


def test_no_function_of_the_checkpoint_package_is_over_100_lines():
    assert long_functions({p.name: p for p in sorted(CHECKPOINTS.glob("*.py"))}, limit=100) == []


def test_the_alias_rule_sees_planted_code():
    planted = "from fp8check.checkpoints import stats as st\nfrom fp8check.checkpoints.findings import CODES as C\n"
    assert module_aliases(planted, "m.py") == ["m.py:1 stats as st"]

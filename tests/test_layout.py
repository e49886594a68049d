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

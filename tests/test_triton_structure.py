"""The shape of fp8check.triton (issue 31): one patch scope, no import circles, no long functions.

The import graph counts function-local imports too (a circle through them is still a circle); the
checks read the source with ``ast`` and import nothing of Triton.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from fp8check.patching import PatchScope
from test_layout import _import_graph, long_functions

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRITON = ROOT / "fp8check" / "triton"
MAX_FUNCTION_LINES = 100


def test_no_module_of_fp8check_triton_imports_back_up():
    # the package-wide circle check is tests/test_layout.py's; here, the layers below interpreter mode import
    # neither it nor the package (whose __init__ imports it)
    graph = _import_graph()
    for low in ("layer", "launch", "sanitizer", "batched", "ops", "targets"):
        up = graph[f"fp8check.triton.{low}"] & {"fp8check.triton", "fp8check.triton.interpreter_mode"}
        assert not up, f"fp8check.triton.{low} imports {up}"


def test_the_patch_scope_is_a_leaf():
    tree = ast.parse((ROOT / "fp8check" / "patching.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.split(".")[0] == "fp8check"}, imported


def test_no_function_of_fp8check_triton_over_100_lines():
    paths = {p.name: p for p in sorted(TRITON.rglob("*.py")) + [ROOT / "fp8check" / "patching.py"]}
    assert long_functions(paths, limit=MAX_FUNCTION_LINES) == []


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

"""``and``, ``or``, ``not`` and chained comparisons in an interpreted kernel, as the Triton compiler makes them.

Triton's interpreter runs a kernel's body as Python, so ``mask = row_mask and col_mask`` is Python's ``and``:
it asks ``bool(row_mask)`` (True for any tensor of more than one element) and returns ``col_mask``, and
``not mask`` is a Python bool. The compiler (``triton/compiler/code_generator.py``) lowers them elementwise:

- ``visit_BoolOp`` (3.6.0, 3.8.0, 3.9.0): the operands are visited in order; an operand that is not a
  run-time value (3.6/3.8: not a ``tl.tensor``; 3.9: ``_is_dynamic_boolean_operand``, a Triton value that is
  not a ``constexpr`` or a tuple) is a constant: a false one ends an ``and`` (a true one an ``or``) and is the
  result, the operands after it are not visited; any other constant is dropped. The run-time operands are
  combined from the right, ``lhs.logical_and(rhs)`` / ``logical_or`` (``semantic.logical_and``: int1
  operands as they are, any other type bitcast to int1, which does not compile for a type wider than 1 bit:
  "Cannot bitcast data-type of size 32 to data-type of size 1"); with none, the last operand is the result.
  Every release warns "Logical operators 'and' and 'or' are deprecated for non-scalar tensors".
- ``visit_UnaryOp`` with ``not``: a run-time operand's ``__not__`` (``semantic.not_``: int1 inverted, other
  types bitcast to int1 as above); a constant's Python ``not``.
- ``visit_Compare``: 3.6.0 and 3.8.0 refuse a chain (``a < b < c``: "simultaneous multiple comparison is not
  supported"); 3.9.0 evaluates the comparisons in order (each middle operand once) and combines them as an
  ``and`` of their results, constants short-circuiting as above. Triton 3.9's interpreter already rewrites
  chains that way (its ``ASTTransformer.visit_Compare``); 3.6's and 3.8's run them as Python.

:data:`LAYER` (a layer of ``interpreting()``) makes the interpreter rewrite each kernel's source once more,
after Triton's own rewrite, so that these forms call :class:`Operand` chains with the compiler's rules; the
rewritten function is cached per kernel function (not in Triton's own cache, which stays stock). A form the
installed Triton's compiler rejects is a ``compile_error`` kernel fault naming the line, and the kernel goes
on with the elementwise result.
"""

from __future__ import annotations

import ast
import operator
import sys
from typing import Any, Callable

from fp8check.patching import PatchScope
from fp8check.triton import releases, sanitizer
from fp8check.triton.layer import Layer, installed_triton_version

__all__ = ["Operand", "LAYER", "chained_comparisons_compile"]

_HELPER = "_fp8check_boolops"  # the name under which a rewritten kernel sees this module

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}


def chained_comparisons_compile() -> bool:
    """Whether the installed Triton's compiler accepts ``a < b < c`` (3.9 does; 3.6 and 3.8 refuse it)."""
    return releases.accepting(releases.feature_named("chained comparisons"))


def _dynamic(value: Any) -> bool:
    """Whether the compiler treats ``value`` as a run-time boolean operand (its own predicate where it has one)."""
    from triton.compiler import code_generator as cg

    predicate = getattr(cg, "_is_dynamic_boolean_operand", None) or cg._is_triton_tensor
    return bool(predicate(value))


def _rejected(form: str, why: str) -> None:
    sanitizer._fault("compile_error", f"`{form}` does not compile with Triton {installed_triton_version()}: {why}; "
                                      "interpreted elementwise")


def _elementwise(method: str, lhs: Any, rhs: Any, form: str) -> Any:
    """``lhs.logical_and(rhs)`` as the compiler calls it; where it cannot compile, the fault and ``!= 0`` of each."""
    try:
        return getattr(lhs, method)(rhs)
    except (ValueError, TypeError) as exc:
        _rejected(form, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return getattr(lhs.__ne__(0), "__and__" if method == "logical_and" else "__or__")(rhs.__ne__(0))


def logical_not(value: Any, form: str) -> Any:
    """``not value`` as ``visit_UnaryOp`` lowers it."""
    if not _dynamic(value):
        return not value
    try:
        return value.__not__()
    except (ValueError, TypeError) as exc:
        _rejected(form, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return value.__eq__(0)


class _Chain:
    """What the operands of one ``and``/``or``/comparison chain have accumulated (``_apply_boolean_values``)."""

    def __init__(self, method: str, form: str) -> None:
        self.method, self.form = method, form
        self.values: list[Any] = []  # the run-time operands
        self.last: Any = None
        self.short: tuple[Any] | None = None  # (the constant that ended the chain,)

    def take(self, value: Any) -> None:
        self.last = value
        if _dynamic(value):
            self.values.append(value)
            return
        truth = bool(value)
        if truth is (self.method == "logical_or"):
            self.short = (value,)

    def result(self) -> Any:
        if self.short is not None:
            return self.short[0]
        if not self.values:
            return self.last
        values = list(self.values)
        while len(values) >= 2:
            rhs, lhs = values.pop(), values.pop()
            values.append(_elementwise(self.method, lhs, rhs, self.form))
        return values[0]


class Operand:
    """One operand of a rewritten chain: ``Operand(a, ...) < Operand(b, ...) < ...`` evaluates the operands
    in order, in the kernel's own scope, and stops where the compiler stops (``__bool__`` is False once a
    constant ended the chain), as Python's native comparison chain does; ``.result()`` is the compiled value.
    ``compare``: for a comparison chain, how this operand is compared with the one before it."""

    def __init__(self, value: Any, method: str, form: str, compare: type | None = None) -> None:
        self.value, self.method, self.form, self.compare = value, method, form, compare
        self.chain: _Chain | None = None

    def _start(self) -> _Chain:
        if self.chain is None:
            self.chain = _Chain(self.method, self.form)
            if self.compare is None and self.method != "compare":
                self.chain.take(self.value)
        return self.chain

    def __lt__(self, rhs: "Operand") -> "Operand":
        chain = self._start()
        if self.method == "compare":
            if chain.method == "compare":  # the first link: a comparison chain is an ``and`` of comparisons
                chain.method = "logical_and"
                if not chained_comparisons_compile():
                    _rejected(self.form, "simultaneous multiple comparison is not supported")
            chain.take(_COMPARE[rhs.compare](self.value, rhs.value))  # type: ignore[index]
        else:
            chain.take(rhs.value)
        rhs.chain = chain
        return rhs

    def __bool__(self) -> bool:
        return self.chain is None or self.chain.short is None

    def result(self) -> Any:
        return self._start().result()


# -- the source rewrite -------------------------------------------------------------------------------------


def _operand(value: ast.expr, method: str, form: str, compare: ast.cmpop | None = None) -> ast.Call:
    args: list[ast.expr] = [value, ast.Constant(method), ast.Constant(form)]
    if compare is not None:
        args.append(ast.Constant(type(compare).__name__))
    return ast.Call(func=ast.Attribute(value=ast.Name(id=_HELPER, ctx=ast.Load()), attr="operand", ctx=ast.Load()),
                    args=args, keywords=[])


def operand(value: Any, method: str, form: str, compare: str | None = None) -> Operand:
    """An :class:`Operand` (what the rewritten source calls; ``compare`` by its ``ast`` class name)."""
    return Operand(value, method, form, getattr(ast, compare) if compare else None)


def _chain(node: ast.expr, operands: list[ast.Call]) -> ast.Call:
    chain = ast.Compare(left=operands[0], ops=[ast.Lt() for _ in operands[1:]], comparators=operands[1:])
    call = ast.Call(func=ast.Attribute(value=chain, attr="result", ctx=ast.Load()), args=[], keywords=[])
    return ast.copy_location(call, node)


def _is_stock_chain(node: ast.Compare) -> bool:
    """A chain Triton 3.9's own interpreter rewrite made (``_InterpreterComparison(...) < ...``): left alone."""
    left = node.left
    return isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and \
        left.func.id == "_InterpreterComparison"


class _Rewrite(ast.NodeTransformer):
    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        form = ast.unparse(node)
        self.generic_visit(node)
        method = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        return _chain(node, [_operand(v, method, form) for v in node.values])

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        form = ast.unparse(node)
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        call = ast.Call(func=ast.Attribute(value=ast.Name(id=_HELPER, ctx=ast.Load()), attr="logical_not",
                                           ctx=ast.Load()), args=[node.operand, ast.Constant(form)], keywords=[])
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) == 1 or _is_stock_chain(node):
            return self.generic_visit(node)
        form = ast.unparse(node)
        self.generic_visit(node)
        operands = [_operand(node.left, "compare", form)]
        operands += [_operand(v, "compare", form, op) for op, v in zip(node.ops, node.comparators)]
        return _chain(node, operands)


class _Transformer:
    """Triton's own interpreter rewrite, then this module's."""

    def __init__(self, stock: Any) -> None:
        self.stock = stock

    def visit(self, tree: ast.AST) -> ast.AST:
        tree = self.stock.visit(tree)
        ast.fix_missing_locations(tree)
        return _Rewrite().visit(tree)


_CACHE: dict[Any, Any] = {}  # kernel function -> its rewritten function


class _CompiledForms(Layer):
    """Kernels' sources rewritten as above while interpreting."""

    name = "and/or/not and chained comparisons as compiled"
    triton_versions = ("3.6.0", "3.8.0", "3.9.0")

    def install(self, scope: PatchScope, interp: Any) -> None:
        stock_transformer = interp.FunctionRewriter.ast_transformer
        module = sys.modules[__name__]

        def rewrite(self: Any) -> Any:
            fn = _CACHE.get(self.fn)
            if fn is None:
                rewriter = interp.FunctionRewriter(self.fn, **getattr(self, "kwargs", {}))
                rewriter.ast_transformer = _Transformer(stock_transformer)
                self.fn.__globals__.setdefault(_HELPER, module)
                fn = _CACHE[self.fn] = rewriter.rewrite_ast()
            return fn

        scope.set(interp.InterpretedFunction, "rewrite", rewrite)


LAYER = _CompiledForms()

"""Target-dependent outputs: codes that depend on where the hardware's approximation lands.

Some instructions a compiled kernel uses have a documented error bound, not a
specified result (NVIDIA's ``div.full.f32`` and ``.approx`` functions, AMD's
1-ulp transcendentals). The faithful Triton interpreter
(:mod:`fp8check.triton.ops`) can run a kernel three times: with every such
result correctly rounded (``rn``) and at the lowest and highest end of its
bound (``lo``, ``hi``). An output that differs between the runs depends on the
target's approximation: where one of the runs gives the reference's code, it
is reported as **target-dependent** (counted, with examples, never a
divergence); where none does, it stays a divergence.

The checks (casts, quantizers, fused kernels) call :func:`runs` around a
kernel call and :func:`resolve` before comparing; the interpreter registers
its runner with :func:`set_runner` when it is imported, so nothing here
imports Triton, and a check of anything else calls the kernel once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np

from fp8check.results import Divergence

__all__ = ["runs", "runs_on", "resolve", "set_runner", "Tally"]

T = TypeVar("T")

# runner(call) -> (outputs, op names): [one output], or [rn, lo, hi] when the rn run used a bracketed op
_RUNNER: Callable[[Callable[[], Any]], tuple[list[Any], tuple[str, ...]]] | None = None


def set_runner(runner: Callable[[Callable[[], Any]], tuple[list[Any], tuple[str, ...]]] | None) -> None:
    global _RUNNER
    _RUNNER = runner


def runs(call: Callable[[], T]) -> tuple[list[T], tuple[str, ...]]:
    """``call()``'s output, or its three outputs (``rn``, ``lo``, ``hi``) and the bracketed ops that made
    them differ. ``call`` must build its inputs afresh each time."""
    if _RUNNER is None:
        return [call()], ()
    return _RUNNER(call)


def _restore(x: Any, values: Any) -> None:
    try:
        import torch
    except ImportError:  # no torch: only NumPy inputs
        torch = None
    if torch is not None and isinstance(x, torch.Tensor):
        x.copy_(values)
    else:
        x[...] = values


def runs_on(fn: Callable[[Any], T], x: Any) -> tuple[list[T], tuple[str, ...]]:
    """:func:`runs` of ``fn(x)``, every run on ``x`` itself (the same addresses and layout), its values put
    back as they were before the first run (a kernel may write its input; the first run's write is the one
    a check sees)."""
    if _RUNNER is None:
        return [fn(x)], ()
    before = x.clone() if hasattr(x, "clone") else np.array(x, copy=True)
    state = {"first": True}

    def one() -> T:
        if not state["first"]:
            _restore(x, before)
        state["first"] = False
        return fn(x)

    return _RUNNER(one)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))
    return a == b


def resolve(expected: np.ndarray, candidates: list[np.ndarray],
            same: Callable[[np.ndarray, np.ndarray], np.ndarray] = _equal) -> tuple[np.ndarray, np.ndarray]:
    """The output to compare, and which elements are target-dependent.

    ``candidates``: the ``rn`` output first, then the ``lo`` and ``hi`` ones.
    An element is target-dependent when the candidates disagree and one of
    them equals ``expected``: it is then compared as ``expected`` (it is not
    a divergence). Elsewhere the ``rn`` output is compared as it is."""
    rn = np.asarray(candidates[0])
    if len(candidates) == 1:
        return rn, np.zeros(rn.shape, dtype=bool)
    expected = np.broadcast_to(np.asarray(expected), rn.shape)
    differ = np.zeros(rn.shape, dtype=bool)
    match = same(rn, expected)
    for c in candidates[1:]:
        c = np.asarray(c).reshape(rn.shape)
        differ |= ~same(c, rn)
        match |= same(c, expected)
    dependent = differ & match
    return np.where(dependent, expected, rn).astype(rn.dtype, copy=False), dependent


@dataclass
class Tally:
    """The target-dependent outputs of one check: a count (each input once) and a few examples."""

    ops: set[str] = field(default_factory=set)
    keys: set[Any] = field(default_factory=set)
    examples: list[Divergence] = field(default_factory=list)
    cap: int = 8

    def add(self, keys: Any, make_example: Callable[[int], Divergence], dependent: np.ndarray,
            op_names: tuple[str, ...] = ()) -> None:
        """Count the dependent elements by ``keys`` (one key per element: its input, or its place);
        ``make_example(i)`` builds the example for element ``i``."""
        idx = np.flatnonzero(np.asarray(dependent).reshape(-1))
        if not idx.size:
            return
        self.ops.update(op_names)
        flat = np.asarray(keys).reshape(-1) if not isinstance(keys, list) else keys
        for i in idx:
            key = flat[int(i)] if flat is not None else int(i)
            key = key.item() if hasattr(key, "item") else key
            if key in self.keys:
                continue
            self.keys.add(key)
            if len(self.examples) < self.cap:
                example = make_example(int(i))
                if all(e.input_hex != example.input_hex or e.input_hex == "-" for e in self.examples):
                    self.examples.append(example)  # one example per input value

    @property
    def count(self) -> int:
        return len(self.keys)

    def apply(self, result: Any) -> None:
        """Record the tally on a :class:`~fp8check.results.CheckResult`."""
        result.target_dependent = self.count
        result.target_dependent_examples = list(self.examples)
        if self.count:
            result.extra["target_dependent_ops"] = ", ".join(sorted(self.ops))

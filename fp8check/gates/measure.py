"""Which defects a gate lets through: run every defect of the family past the gate and past fp8check.

For every defect (:mod:`.defects`) and every view (the dequantized tensor, or a GEMM's output
with the defective tensor as its first operand), on a few seeded inputs that expose it, the
gate is called as the repository's test calls it: ``gate(actual, expected)``, ``expected``
the correct output (the reference's, or the kernel's own where it conforms), in the
compared dtype. fp8check's own check (:func:`fp8check.quantizers.conformance.check_quantizer`)
runs on the same kernel with the same defect. A gate *lets a defect through* when it accepts
the mutant on an input where the defect is present and where it accepts the correct output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np

from fp8check.errors import FP8CheckError, InvalidValueError
from fp8check.gates.defects import DEFECTS, Defect, applies, exposing_input, mutate, previous_batch
from fp8check.gates.public import Compares, gate_accepts, parse_gate
from fp8check.quantizers.recipe import Recipe
from fp8check.quantizers.scaling import Quantized, dequantize, quantize

__all__ = ["View", "DefectOutcome", "GateVerdict", "GateReport", "measure_gates", "mutant_kernel",
           "fp8check_rejects", "parse_views"]

Status = Literal["accepted", "rejected", "blind", "n/a"]
Expected = Literal["reference", "input"]
_COMPARE_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class View:
    """What the gate compares: the dequantized (M, K) tensor, or the (M, N) output of a GEMM with it."""

    kind: Literal["dequant", "gemm"]
    m: int
    k: int
    n: int = 0

    @property
    def name(self) -> str:
        return f"dequant {self.m}x{self.k}" if self.kind == "dequant" else f"gemm {self.m}x{self.n}x{self.k}"


def parse_views(dequant: str | None = "256x512", gemms: Sequence[str] = ()) -> tuple[View, ...]:
    """Views from ``MxK`` (dequantized) and ``MxNxK`` (GEMM) texts."""
    views = []
    for text, kind in ([(dequant, "dequant")] if dequant else []) + [(g, "gemm") for g in gemms]:
        parts = str(text).lower().replace(",", "x").split("x")
        want = 2 if kind == "dequant" else 3
        try:
            dims = [int(p) for p in parts]
        except ValueError:
            dims = []
        if len(dims) != want or min(dims) < 1 or max(dims) > 1 << 14:
            raise InvalidValueError(f"shape {text!r}: expected {'MxK' if want == 2 else 'MxNxK'} with sides 1..16384")
        views.append(View("dequant", dims[0], dims[1]) if kind == "dequant" else View("gemm", dims[0], dims[2], dims[1]))
    if not views:
        raise InvalidValueError("nothing to compare: give a dequantized shape or a GEMM shape")
    return tuple(views)


@dataclass(frozen=True, kw_only=True)
class DefectOutcome:
    """What one gate did with one defect in one view."""

    defect: Defect
    view: str
    status: Status
    exposed: int  # inputs on which the defect is present
    judged: int  # of those, inputs where the gate accepts the correct output
    accepted_on: int  # of those, inputs where the gate accepts the defect
    largest_accepted: float | None  # the largest magnitude accepted (nominal or sweep)
    fp8check: Literal["rejected", "accepted", "n/a", "not run"]
    note: str = ""  # why n/a, or the gate's message on the first rejection

    @property
    def escapes(self) -> bool:
        return self.status == "accepted" and self.fp8check == "rejected"

    def to_json(self) -> dict[str, Any]:
        d = self.defect
        return {"defect": d.name, "family": d.family, "description": d.description, "magnitude": d.magnitude_text(),
                "view": self.view, "status": self.status, "exposed": self.exposed, "judged": self.judged,
                "accepted_on": self.accepted_on,
                "largest_accepted": None if self.largest_accepted is None else d.magnitude_text(self.largest_accepted),
                "largest_accepted_value": self.largest_accepted, "fp8check": self.fp8check,
                "escapes": self.escapes, "note": self.note}


@dataclass(frozen=True, kw_only=True)
class GateVerdict:
    """One gate's table: every defect in every view."""

    gate: str
    title: str
    source: str
    rule: str
    outcomes: tuple[DefectOutcome, ...]
    correct_accepted: dict[str, bool]  # view -> the gate accepts the correct output of a plain input

    @property
    def escapes(self) -> list[DefectOutcome]:
        return [o for o in self.outcomes if o.escapes]

    @property
    def passed(self) -> bool:
        return not self.escapes

    def rate(self, view: str | None = None) -> tuple[int, int]:
        """(accepted, judged) over the defects present in ``view`` (all views when None)."""
        rows = [o for o in self.outcomes if o.status != "n/a" and (view is None or o.view == view)]
        return sum(o.status == "accepted" for o in rows), len(rows)

    def to_json(self) -> dict[str, Any]:
        accepted, judged = self.rate()
        return {"gate": self.gate, "title": self.title, "source": self.source, "rule": self.rule,
                "passed": self.passed, "accepted": accepted, "judged": judged,
                "escapes": [f"{o.defect.name} ({o.view})" for o in self.escapes],
                "correct_accepted": self.correct_accepted, "outcomes": [o.to_json() for o in self.outcomes]}


@dataclass(frozen=True, kw_only=True)
class GateReport:
    """Every gate measured on one kernel under one recipe."""

    kernel: str
    recipe: Recipe
    dtype: str
    expected: Expected
    views: tuple[View, ...]
    kernel_conforms: bool | None  # None: no kernel given (the reference's output is the correct one)
    fp8check: dict[str, str]  # defect -> rejected / accepted / n/a / not run
    verdicts: tuple[GateVerdict, ...]
    inputs: int
    seed: int

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def replacement(self) -> str:
        """The assertion that rejects every defect above: fp8check's own check of the declared recipe."""
        kernel = self.kernel if self.kernel != "reference" else "my_quantizer"
        fn = kernel.rpartition(":")[2] or kernel
        return (f"report = fp8check.check_quantizer({fn}, recipe={self.recipe.name!r}, "
                f"format={self.recipe.format.name!r})\nfp8check.assert_conforms(report)")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "gate", "kernel": self.kernel, "recipe": self.recipe.name, "format": self.recipe.format.name,
                "recipe_summary": self.recipe.summary(), "dtype": self.dtype, "expected": self.expected,
                "views": [v.name for v in self.views], "kernel_conforms": self.kernel_conforms,
                "inputs": self.inputs, "seed": self.seed, "passed": self.passed, "fp8check": self.fp8check,
                "defects": [d.to_json() for d in DEFECTS], "replacement": self.replacement,
                "gates": [v.to_json() for v in self.verdicts]}


# -- the mutated kernel and fp8check's check of it -------------------------------------------------


def mutant_kernel(d: Defect, recipe: Recipe, magnitude: float | None = None) -> Callable[..., tuple[Any, Any]]:
    """A quantizer with defect ``d``: the reference's output on each call, mutated; a stale scale is the
    previous call's (of the same shape)."""
    state: dict[str, Quantized | None] = {"previous": None}

    def kernel(x: Any, *rest: Any) -> tuple[Any, Any]:
        import torch

        x32 = x.detach().to(torch.float32).cpu().numpy()
        correct = quantize(x32, recipe)
        out = mutate(d, x32, recipe, correct, magnitude=magnitude, previous=state["previous"])
        state["previous"] = correct
        return (torch.from_numpy(out.codes.copy()).to(x.device),
                torch.from_numpy(np.asarray(out.scales, np.float32).copy()).to(x.device))

    kernel.__name__ = f"mutant[{d.name}]"
    return kernel


def fp8check_rejects(d: Defect, recipe: Recipe, *, max_examples: int = 20, seed: int = 0) -> bool:
    """Whether fp8check's check of the quantizer with defect ``d`` fails (the check itself, unchanged)."""
    from fp8check.quantizers.conformance import check_quantizer

    try:
        result = check_quantizer(mutant_kernel(d, recipe), recipe, max_examples=max_examples, seed=seed)
    except FP8CheckError:  # a kernel fault is a finding too: it does not pass
        return True
    return not result.passed


# -- the forms a gate compares ----------------------------------------------------------------------


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _values(q: Quantized, recipe: Recipe) -> np.ndarray:
    return dequantize(q.codes, q.scales, recipe)


def _weight(recipe: Recipe, view: View, seed: int) -> np.ndarray:
    return _values(quantize(exposing_input(None, recipe, (view.n, view.k), seed + 7919), recipe), recipe)


class _Forms:
    """The tensors a gate receives for one input: correct and defective, in one view and dtype."""

    def __init__(self, recipe: Recipe, view: View, dtype: str, expected: Expected, compares: Compares,
                 x: np.ndarray, weight: np.ndarray | None) -> None:
        self.recipe, self.view, self.dtype, self.expected_kind, self.compares = recipe, view, dtype, expected, compares
        self.x, self.weight = x, weight

    def of(self, q: Quantized) -> Any:
        import torch

        if self.compares == "quantized":
            fmt = _torch_dtype(f"float8_{self.recipe.format.name}")
            return (torch.from_numpy(q.codes.copy()).view(fmt), torch.from_numpy(np.asarray(q.scales, np.float32).copy()))
        v = _values(q, self.recipe)
        return self._tensor(v)

    def _tensor(self, v: np.ndarray) -> Any:
        import torch

        with np.errstate(all="ignore"):
            out = v if self.view.kind == "dequant" else v @ self.weight.T
        return torch.from_numpy(np.ascontiguousarray(out, dtype=np.float64)).to(_torch_dtype(self.dtype))

    def expected(self, correct: Quantized) -> Any:
        if self.expected_kind == "input" and self.compares == "values":
            return self._tensor(self.x.astype(np.float64))
        return self.of(correct)


def _differs(a: Quantized, b: Quantized) -> bool:
    sa, sb = np.asarray(a.scales, np.float32), np.asarray(b.scales, np.float32)
    return not np.array_equal(a.codes, b.codes) or not np.array_equal(sa.view(np.uint32), sb.view(np.uint32))


def _correct_output(kernel: Callable[..., Any] | None, x: np.ndarray, recipe: Recipe) -> Quantized:
    if kernel is None:
        return quantize(x, recipe)
    from fp8check.quantizers.cases import QuantCase
    from fp8check.quantizers.conformance import run_kernel

    codes, scales, _ = run_kernel(kernel, QuantCase("gate", x), recipe, name="the kernel")
    return Quantized(codes, scales.astype(np.float32))


@dataclass
class _Tally:
    exposed: int = 0
    judged: int = 0
    accepted: int = 0
    note: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class _Run:
    """One measurement: the recipe, the views, the gates (name, callable, what it compares) and the inputs."""

    recipe: Recipe
    views: tuple[View, ...]
    gates: list[tuple[str, Callable[..., Any], Compares]]
    dtype: str
    expected: Expected
    inputs: int
    seed: int
    base: Callable[..., Any] | None  # the kernel whose output is the correct one (None: the reference)
    weights: dict[View, np.ndarray | None] = field(default_factory=dict)

    def forms(self, v: View, compares: Compares, x: np.ndarray) -> _Forms:
        return _Forms(self.recipe, v, self.dtype, self.expected, compares, x, self.weights.get(v))

    def correct_accepted(self) -> list[dict[str, bool]]:
        """Per gate and view: whether the gate passes the correct output of a plain input."""
        out: list[dict[str, bool]] = [{} for _ in self.gates]
        for v in self.views:
            x = exposing_input(None, self.recipe, (v.m, v.k), self.seed)
            correct = _correct_output(self.base, x, self.recipe)
            for gi, (name, fn, compares) in enumerate(self.gates):
                if compares == "quantized" and v.kind == "gemm":
                    continue
                f = self.forms(v, compares, x)
                out[gi][v.name] = gate_accepts(fn, f.of(correct), f.expected(correct), name=name)[0]
        return out

    def tallies(self, d: Defect, v: View, magnitudes: list[float]) -> dict[float, list[_Tally]]:
        """Each gate's word on each magnitude of ``d`` in view ``v``: the sweep (for the largest accepted
        magnitude) on the first input, the nominal magnitude on every one."""
        r = self.recipe
        tallies = {m: [_Tally() for _ in self.gates] for m in magnitudes}
        for i in range(self.inputs):
            x = exposing_input(d, r, (v.m, v.k), self.seed + 1000 * (i + 1))
            correct = _correct_output(self.base, x, r)
            forms = {c: self.forms(v, c, x) for c in ("values", "quantized")}
            seen: dict[Any, Any] = {}  # the correct output's forms and each gate's word on it, once per input
            for m in (magnitudes if i == 0 else [d.magnitude]):
                before = previous_batch(d, x, m)
                bad = mutate(d, x, r, correct, magnitude=m, previous=None if before is None else quantize(before, r))
                if not _differs(bad, correct):
                    continue
                bad_forms: dict[str, Any] = {}
                for gi, (name, fn, compares) in enumerate(self.gates):
                    t = tallies[m][gi]
                    t.exposed += 1
                    if compares == "quantized" and v.kind == "gemm":
                        continue
                    f = forms[compares]
                    if compares not in seen:
                        seen[compares] = (f.of(correct), f.expected(correct))
                    got, want = seen[compares]
                    if gi not in seen:
                        seen[gi] = gate_accepts(fn, got, want, name=name)[0]
                    if not seen[gi]:
                        continue
                    t.judged += 1
                    if compares not in bad_forms:
                        bad_forms[compares] = f.of(bad)
                    ok, message = gate_accepts(fn, bad_forms[compares], want, name=name)
                    t.accepted += ok
                    if not ok and not t.note:
                        t.note = message
        return tallies

    def outcomes(self, d: Defect, v: View, why: str | None, fp8: str) -> tuple[list[DefectOutcome], bool]:
        """One row per gate for ``d`` in ``v``, and whether the defect was present on any input."""
        magnitudes = sorted({d.magnitude, *d.sweep})
        tallies = self.tallies(d, v, magnitudes) if not why else \
            {m: [_Tally() for _ in self.gates] for m in magnitudes}
        rows = []
        for gi, (name, fn, compares) in enumerate(self.gates):
            t = tallies[d.magnitude][gi]
            largest = max((m for m in magnitudes if tallies[m][gi].accepted), default=None)
            if why or (compares == "quantized" and v.kind == "gemm"):
                status: Status = "n/a"
                note = why or "this gate compares the quantized tensors, not a GEMM's output"
            elif t.exposed == 0:
                status, note = "n/a", "not present on any input drawn for this recipe"
            elif t.judged == 0:
                status, note = "blind", "the gate rejects the correct output of these inputs too"
            else:
                status, note = ("accepted" if t.accepted else "rejected"), t.note
            rows.append(DefectOutcome(
                defect=d, view=v.name, status=status, exposed=t.exposed, judged=t.judged, accepted_on=t.accepted,
                largest_accepted=largest if status != "n/a" else None,
                fp8check=fp8 if status != "n/a" or not why else "n/a", note=note))
        return rows, any(t.exposed for row in tallies.values() for t in row)


def _validated(recipe: Any, format: object, dtype: str | None, expected: str, inputs: int) -> tuple[Recipe, str]:
    from fp8check import quantizers

    r = quantizers.get(recipe, format)
    if r.grouped:
        raise InvalidValueError(f"recipe {r.name!r} is grouped: fp8check gate measures per-tensor, row, column "
                                "and block recipes")
    if r.format.bits != 8:  # the defects flip and zero one-byte codes
        raise InvalidValueError(f"recipe {r.name!r} stores {r.format.name} elements: fp8check gate measures FP8 "
                                "recipes")
    dtype = dtype or r.dequant_dtype
    if dtype not in _COMPARE_DTYPES:
        raise InvalidValueError(f"--dtype {dtype!r}: the gate compares float32, bfloat16 or float16")
    if expected not in ("reference", "input"):
        raise InvalidValueError(f"expected={expected!r}: 'reference' or 'input'")
    if inputs < 1:
        raise InvalidValueError(f"inputs={inputs}: at least one input per defect")
    return r, dtype


def _base_kernel(kernel: Any, recipe: Recipe, max_examples: int, seed: int) -> tuple[str, Any, bool | None]:
    """(its name, the kernel when it conforms else None, whether it conforms; None without a kernel)."""
    if kernel is None:
        return "reference", None, None
    from fp8check.loader import load_callable
    from fp8check.quantizers.conformance import check_quantizer

    name = kernel if isinstance(kernel, str) else getattr(kernel, "__name__", repr(kernel))
    fn = load_callable(kernel) if isinstance(kernel, str) else kernel
    conforms = check_quantizer(fn, recipe, max_examples=max_examples, seed=seed).passed
    return name, (fn if conforms else None), conforms


def measure_gates(gates: Sequence[Any], *, recipe: Any, format: object = None, kernel: Any = None,
                  views: Sequence[View] | None = None, dtype: str | None = None, expected: Expected = "reference",
                  inputs: int = 3, seed: int = 0, defects: Sequence[Defect] = DEFECTS, check: bool = True,
                  max_examples: int = 20) -> GateReport:
    """Measure ``gates`` (built-in names, ``MODULE:FUNCTION`` texts or callables) on the defect family.

    ``kernel``: the quantizer whose correct output the defects start from (``x -> (codes, scales)`` or
    ``MODULE:FUNCTION``); it is checked first and used only where it conforms (else the reference is).
    ``dtype``: what the gate compares (default: the recipe's dequantization dtype, bfloat16).
    ``expected``: ``reference`` (the correct output, dequantized) or ``input`` (the unquantized input, or
    its GEMM, as tests that compare with the original tensor do).
    """
    r, dtype = _validated(recipe, format, dtype, expected, inputs)
    views = tuple(views or parse_views())
    parsed = [parse_gate(g) for g in gates]
    if not parsed:
        raise InvalidValueError("no gate to measure")
    kernel_name, base, conforms = _base_kernel(kernel, r, max_examples, seed)
    run = _Run(recipe=r, views=views, gates=parsed, dtype=dtype, expected=expected, inputs=inputs, seed=seed,
               base=base, weights={v: (_weight(r, v, seed) if v.kind == "gemm" else None) for v in views})
    correct_accepted = run.correct_accepted()

    rows: list[list[DefectOutcome]] = [[] for _ in parsed]
    fp8: dict[str, str] = {}
    for d in defects:
        why = applies(d, r)
        fp8[d.name] = "n/a" if why else ("not run" if not check else
                                          "rejected" if fp8check_rejects(d, r, max_examples=max_examples, seed=seed)
                                          else "accepted")
        mine: list[list[DefectOutcome]] = [[] for _ in parsed]
        present = False
        for v in views:
            per_gate, seen = run.outcomes(d, v, why, fp8[d.name])
            present = present or seen
            for gi, o in enumerate(per_gate):
                mine[gi].append(o)
        if fp8[d.name] == "accepted" and not present:
            # the mutant equals the correct kernel on every input either side drew: no defect under this recipe
            fp8[d.name] = "n/a"
            mine = [[dataclasses.replace(o, fp8check="n/a", status="n/a", note=o.note or "not produced under this "
                                         "recipe") for o in m] for m in mine]
        for gi in range(len(parsed)):
            rows[gi] += mine[gi]

    verdicts = tuple(GateVerdict(gate=name, title=getattr(fn, "title", f"the repository's gate {name}"),
                                 source=getattr(fn, "source", name), rule=getattr(fn, "rule", ""),
                                 outcomes=tuple(rows[gi]), correct_accepted=correct_accepted[gi])
                     for gi, (name, fn, compares) in enumerate(parsed))
    return GateReport(kernel=kernel_name, recipe=r, dtype=dtype, expected=expected, views=views,
                      kernel_conforms=conforms, fp8check=fp8, verdicts=verdicts, inputs=inputs, seed=seed)

"""The acceptance tests FP8 kernel repositories write, as their sources compute them, cited.

A gate is any callable ``gate(actual, expected)``: it accepts by returning ``True`` or ``None``
and rejects by returning ``False`` or raising. The built-in ones below are the public gates
found in FP8 kernel repositories. Where a library function exists in the installed stack
(``torch.testing.assert_close``, ``torch.allclose``, ``torch.isclose``, ``numpy.allclose``) the
gate calls it; the others are re-stated from their source, formula for formula:

``assert_close``
    ``torch.testing.assert_close(actual, expected)``; with no rtol/atol the defaults of the
    compared dtype (torch/testing/_comparison.py ``_DTYPE_PRECISIONS``: bfloat16 rtol 0.016,
    atol 1e-5; float16 1e-3, 1e-5; float32 1.3e-6, 1e-5; a float8 dtype is not in the table:
    rtol = atol = 0). ``assert_close(rtol=1e-2, atol=1e-2)`` takes the user's.
``assert_close-quantized``
    ``torch.testing.assert_close((codes, scales), (codes_ref, scales_ref))``: the quantized pair
    itself, codes as a float8 tensor (defaults 0, 0: exact) and float32 scales (1.3e-6, 1e-5).
``numpy.allclose``
    ``numpy.allclose(actual, expected)`` (rtol 1e-5, atol 1e-8), on the values as float64.
``deepgemm``
    DeepGEMM's ``calc_diff(x, y) < 1e-3`` (deep_gemm/testing/numeric.py; tests/test_fp8.py
    asserts ``diff < 0.001``): ``1 - 2 sum(x*y) / sum(x*x + y*y)`` in float64.
``aiter``
    aiter's ``checkAllclose(a, b)`` (aiter/test_common.py; rtol = atol = 1e-2,
    tol_err_ratio = 0.05): the fraction of elements where ``torch.isclose`` fails; up to 5% is
    logged as a warning, and the function returns the fraction instead of raising. The gate
    accepts what it does not log as ``failed!`` (fraction <= 0.05); a test that ignores the
    returned number accepts everything.
``kernelbench``
    KernelBench's ``torch.allclose(output, output_new, atol=tol, rtol=tol)``
    (src/kernelbench/eval.py ``run_and_check_correctness``) with ``get_tolerance_for_precision``:
    1e-4 for float32, 1e-2 for float16 and bfloat16 (the reference is the first argument).
``torchao-sqnr-18`` ``-20`` ``-25``
    torchao's ``compute_error(ref, actual) >= dB``: ``20 log10(||ref|| / ||ref - actual||)``
    (torchao/float8/float8_utils.py); 25 dB after dequantizing (test/float8/test_base.py), 18
    for a float8 linear's output (test/float8/test_base.py, test/prototype/mx_formats/
    test_mx_linear.py), 20 for an MX inference linear (test_mx_linear.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from fp8check.errors import InvalidValueError

__all__ = ["PublicGate", "PUBLIC_GATES", "public_gate", "parse_gate", "gate_accepts", "GateCallError"]

Compares = Literal["values", "quantized"]


class GateCallError(InvalidValueError):
    """A gate that raised something other than a rejection on the correct output, or returned a non-boolean."""


@dataclass(frozen=True, kw_only=True)
class PublicGate:
    """One public acceptance test: what it computes, where it comes from, its parameters."""

    name: str
    title: str
    source: str
    rule: str
    kind: str  # which free function below computes it
    params: tuple[tuple[str, float], ...] = ()
    compares: Compares = "values"
    description: str = field(default="", compare=False)

    def param(self, key: str, default: float | None = None) -> float | None:
        return dict(self.params).get(key, default)

    def with_params(self, **values: float) -> PublicGate:
        allowed = _PARAMS[self.kind]
        for k in values:
            if k not in allowed:
                raise InvalidValueError(f"gate {self.name!r} takes {', '.join(allowed) or 'no parameters'}, not {k!r}")
        merged = dict(self.params) | values
        shown = ", ".join(f"{k}={v:g}" for k, v in values.items())
        return PublicGate(name=f"{self.name}({shown})" if shown else self.name, title=self.title, source=self.source,
                          rule=self.rule, kind=self.kind, params=tuple(sorted(merged.items())),
                          compares=self.compares, description=self.description)

    def __call__(self, actual: Any, expected: Any) -> bool:
        return _KINDS[self.kind](self, actual, expected)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "source": self.source, "rule": self.rule,
                "params": dict(self.params), "compares": self.compares}


# -- the gates, one free function each --------------------------------------------------


def _assert_close(gate: PublicGate, actual: Any, expected: Any) -> bool:
    import torch

    rtol, atol = gate.param("rtol"), gate.param("atol")
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)  # raises AssertionError to reject
    return True


def _numpy_allclose(gate: PublicGate, actual: Any, expected: Any) -> bool:
    import numpy as np

    return bool(np.allclose(_float64(actual), _float64(expected), rtol=gate.param("rtol", 1e-5),
                            atol=gate.param("atol", 1e-8)))


def _calc_diff(gate: PublicGate, actual: Any, expected: Any) -> bool:
    x, y = actual.double(), expected.double()
    denominator = (x * x + y * y).sum()
    sim = 2 * (x * y).sum() / denominator
    return bool((1 - sim) < gate.param("t", 1e-3))


def _check_allclose(gate: PublicGate, actual: Any, expected: Any) -> bool:
    import torch

    close = torch.isclose(actual, expected, rtol=gate.param("rtol", 1e-2), atol=gate.param("atol", 1e-2))
    mismatched = int((~close).sum().item()) / max(actual.numel(), 1)
    return mismatched <= gate.param("tol_err_ratio", 0.05)  # "failed!" is logged only above the ratio


_KERNELBENCH_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def _kernelbench(gate: PublicGate, actual: Any, expected: Any) -> bool:
    import torch

    tol = gate.param("tol") or _KERNELBENCH_TOLERANCE.get(str(expected.dtype).removeprefix("torch."))
    if tol is None:
        raise InvalidValueError(f"KernelBench has no tolerance for {expected.dtype} (float32, float16, bfloat16)")
    return bool(torch.allclose(expected, actual, atol=tol, rtol=tol))


def _sqnr(gate: PublicGate, actual: Any, expected: Any) -> bool:
    import torch

    ps = torch.linalg.vector_norm(expected)
    pn = torch.linalg.vector_norm(expected - actual)
    return bool(20 * torch.log10(ps / pn) >= gate.param("db", 25.0))


def _float64(t: Any) -> Any:
    import numpy as np

    if hasattr(t, "detach"):
        import torch

        return t.detach().to(torch.float64).cpu().numpy()
    return np.asarray(t, np.float64)


_KINDS: dict[str, Callable[[PublicGate, Any, Any], bool]] = {
    "assert_close": _assert_close, "numpy_allclose": _numpy_allclose, "calc_diff": _calc_diff,
    "check_allclose": _check_allclose, "kernelbench": _kernelbench, "sqnr": _sqnr,
}
_PARAMS = {"assert_close": ("rtol", "atol"), "numpy_allclose": ("rtol", "atol"), "calc_diff": ("t",),
           "check_allclose": ("rtol", "atol", "tol_err_ratio"), "kernelbench": ("tol",), "sqnr": ("db",)}

_TORCH = "pytorch/pytorch torch/testing/_comparison.py (assert_close, _DTYPE_PRECISIONS)"
_TORCHAO = ("pytorch/ao torchao/float8/float8_utils.py compute_error; thresholds in test/float8/test_base.py "
            "and test/prototype/mx_formats/test_mx_linear.py")
_ALL = [
    PublicGate(name="assert_close", kind="assert_close", title="torch.testing.assert_close, the dtype's defaults",
               source=_TORCH, rule="|a - e| <= atol + rtol |e| everywhere, NaN never equal (bfloat16: rtol 0.016, "
               "atol 1e-5; float32: 1.3e-6, 1e-5)"),
    PublicGate(name="assert_close-quantized", kind="assert_close", compares="quantized",
               title="torch.testing.assert_close on (codes, scales)", source=_TORCH,
               rule="float8 codes exactly (no float8 entry in _DTYPE_PRECISIONS: 0, 0), float32 scales to "
               "rtol 1.3e-6, atol 1e-5"),
    PublicGate(name="numpy.allclose", kind="numpy_allclose", title="numpy.allclose, its defaults",
               source="numpy/numpy numpy/_core/numeric.py (allclose: rtol=1e-05, atol=1e-08)",
               rule="|a - e| <= 1e-8 + 1e-5 |e| everywhere"),
    PublicGate(name="deepgemm", kind="calc_diff", params=(("t", 1e-3),), title="DeepGEMM calc_diff < 1e-3",
               source="deepseek-ai/DeepGEMM deep_gemm/testing/numeric.py (calc_diff), tests/test_fp8.py "
               "(assert diff < 0.001)", rule="1 - 2 sum(a e) / sum(a^2 + e^2) < 1e-3, in float64"),
    PublicGate(name="aiter", kind="check_allclose", params=(("atol", 1e-2), ("rtol", 1e-2), ("tol_err_ratio", 0.05)),
               title="aiter checkAllclose (rtol = atol = 1e-2; up to 5% mismatch is a warning)",
               source="ROCm/aiter aiter/test_common.py (checkAllclose, at 029455b)",
               rule="fraction of elements with |a - e| > 1e-2 + 1e-2 |e| (NaN counts) <= 0.05; the function returns "
               "that fraction and never raises by default"),
    PublicGate(name="kernelbench", kind="kernelbench", title="KernelBench torch.allclose, tolerance per dtype",
               source="ScalingIntelligence/KernelBench src/kernelbench/eval.py (run_and_check_correctness, "
               "get_tolerance_for_precision)",
               rule="torch.allclose(ref, out, atol=tol, rtol=tol): tol 1e-4 float32, 1e-2 float16/bfloat16"),
]
for _db in (18.0, 20.0, 25.0):
    _ALL.append(PublicGate(name=f"torchao-sqnr-{_db:g}", kind="sqnr", params=(("db", _db),),
                           title=f"torchao SQNR >= {_db:g} dB", source=_TORCHAO,
                           rule=f"20 log10(||e|| / ||e - a||) >= {_db:g}"))

PUBLIC_GATES: dict[str, PublicGate] = {g.name: g for g in _ALL}

_CALL = re.compile(r"^\s*([\w.\-]+)\s*(?:\((.*)\))?\s*$")


def public_gate(name: str) -> PublicGate:
    """The built-in gate ``name``, with parameters when written ``name(key=value, ...)``."""
    m = _CALL.match(name)
    if not m or m.group(1) not in PUBLIC_GATES:
        raise InvalidValueError(f"unknown gate {name!r}; built-in gates: {', '.join(PUBLIC_GATES)} "
                                "(or MODULE:FUNCTION, a gate of your own)")
    gate = PUBLIC_GATES[m.group(1)]
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        key, sep, text = part.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not sep or not math.isfinite(value) or value < 0:
            raise InvalidValueError(f"gate {name!r}: {part!r} is not KEY=NUMBER (a finite number >= 0)")
        values[key.strip()] = value
    return gate.with_params(**values) if values else gate


def parse_gate(spec: Any) -> tuple[str, Callable[..., Any], Compares]:
    """(name, callable, what it compares) for a built-in name, ``MODULE:FUNCTION`` or a callable."""
    if callable(spec) and not isinstance(spec, str):
        gate = spec
        return getattr(gate, "name", None) or getattr(gate, "__name__", repr(gate)), gate, getattr(gate, "compares", "values")
    text = str(spec)
    m = _CALL.match(text)
    if m and m.group(1) in PUBLIC_GATES:
        g = public_gate(text)
        return g.name, g, g.compares
    if ":" not in text:
        public_gate(text)  # raises: names neither a built-in gate nor MODULE:FUNCTION
    from fp8check.loader import load_callable

    return text, load_callable(text), "values"


def gate_accepts(gate: Callable[..., Any], actual: Any, expected: Any, *, name: str = "gate") -> tuple[bool, str]:
    """Whether ``gate`` lets ``actual`` through, and why not (its message, one line)."""
    try:
        out = gate(actual, expected)
    except AssertionError as exc:
        return False, _first_line(exc)
    except KeyboardInterrupt:
        raise
    except InvalidValueError:
        raise
    except Exception as exc:  # any exception fails the user's test: a rejection, reported as such
        return False, f"{type(exc).__name__}: {_first_line(exc)}"
    if out is None:
        return True, ""
    if isinstance(out, bool) or type(out).__name__ in ("bool_", "bool"):
        return bool(out), "" if out else "returned False"
    if hasattr(out, "numel") and out.numel() == 1 and str(out.dtype) == "torch.bool":
        return bool(out.item()), "" if out.item() else "returned False"
    raise GateCallError(f"gate {name} returned {type(out).__name__} {out!r:.60}; a gate returns True/False or None, "
                        "or raises to reject")


def _first_line(exc: BaseException) -> str:
    lines = [x for x in str(exc).strip().splitlines() if x.strip()]
    return lines[0][:200] if lines else type(exc).__name__

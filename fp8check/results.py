"""Divergences and check results as data: collected here, rendered elsewhere.

A :class:`Divergence` is one input where a kernel and the reference disagree;
a :class:`CheckResult` is everything one check of one kernel found. Both
round-trip through JSON (``to_dict`` / ``from_dict``), which is the contract
between the suite (``fp8check check``, the pytest plugin), the report
renderer and anyone reading results later.

A results file holds many checks::

    {"fp8check_results": 1, "environment": {...}, "checks": [CheckResult, ...]}

while ``fp8check check --json`` writes one CheckResult object (with its
``environment``) at the top level.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

RESULTS_VERSION = 1

# Cast divergences of one input, in the order a report lists them.
CAST_CATEGORIES = ("rounding", "overflow", "infinity", "nan", "signed_zero", "subnormal", "other")
# Divergences of a call rather than of an input value (casts, quantizers,
# fused kernels): the kernel changed its input, repeated calls on the same
# input gave different bytes, or the kernel raised on an input inside the
# domain its author declared.
CALL_CATEGORIES = ("in_place", "nondeterministic", "refused")
# Quantizer divergences (recipes): a wrong scale, wrong codes under a right
# scale, or mishandled non-finite input.
QUANTIZE_CATEGORIES = ("scale", "codes", "nonfinite")
# Matmul divergences (recipes): an error beyond the derived accumulation
# bound; scale, overflow, nan and other are shared with the lists above.
MATMUL_CATEGORIES = ("accuracy",)
# Faults of an interpreted Triton kernel (fp8check.triton.sanitizer): a load or store outside its
# tensor, a read of output memory the kernel never writes, two programs storing different bytes to
# one address, a false tl.assume/tl.multiple_of/tl.max_contiguous, a failing tl.device_assert, a form
# the installed Triton's compiler rejects (``a and b`` of int32 tensors; 3.6/3.8: ``a < b < c``).
# Not divergences of a value: the kernel's behaviour on a GPU is undefined or scheduling-dependent.
KERNEL_FAULT_CATEGORIES = ("out_of_bounds", "uninitialised", "race", "false_hint", "device_assert", "compile_error")
# A check run in a child process (isolate = true) whose kernel took the process down.
CRASH_CATEGORIES = ("crashed",)
# Not a divergence: an output whose code depends on where the target's unspecified instructions (NVIDIA's
# div.full.f32, .approx functions) land inside their documented bounds (fp8check.brackets). Counted in
# CheckResult.target_dependent, never in CheckResult.categories.
TARGET_DEPENDENT = "target_dependent"
CATEGORIES = (CAST_CATEGORIES + QUANTIZE_CATEGORIES + MATMUL_CATEGORIES + CALL_CATEGORIES + KERNEL_FAULT_CATEGORIES
              + CRASH_CATEGORIES + (TARGET_DEPENDENT,))


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """One input on which a kernel and the reference disagree.

    Hex strings are bit patterns in their own width: ``input_hex`` has 4
    digits for a 16-bit input and 8 for float32; codes have 2.
    """

    category: str
    input_hex: str
    expected_hex: str
    actual_hex: str
    input_dtype: str = "float32"
    input_value: str = ""
    expected_value: str = ""
    actual_value: str = ""
    detail: str = ""
    # The condition the divergence needs ("" for none): which call, shape,
    # layout or dtype showed it, e.g. "only for non-contiguous input, ...".
    condition: str = ""

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown divergence category {self.category!r}; known: {', '.join(CATEGORIES)}")

    def to_dict(self) -> dict[str, Any]:
        # Flat strings: a plain dict is much faster than asdict() for many divergences.
        return {name: getattr(self, name) for name in _DIVERGENCE_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Divergence:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A call the kernel raised on: a finding, not a divergence, unless the
    call lay inside the domain the kernel's author declared (``declared``)."""

    condition: str
    error: str
    declared: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "error": self.error, "declared": self.declared}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Refusal:
        return cls(condition=str(data.get("condition", "")), error=str(data.get("error", "")),
                   declared=bool(data.get("declared", False)))


@dataclass(kw_only=True)
class CheckResult:
    """What one check of one kernel against one format and profile found.

    ``categories`` counts every divergence found (exact); ``divergences``
    lists at most a capped number of them, the most minimal first.
    """

    kernel: str
    format: str
    profile: str
    passed: bool
    checked: int
    categories: dict[str, int] = field(default_factory=dict)
    divergences: list[Divergence] = field(default_factory=list)
    kind: str = "cast"  # "cast", "quantize" or "matmul"
    input_dtype: str = "float32"
    device: str = "cpu"
    seed: int | None = None
    command: str = ""  # a command line that reproduces the check
    expected_failure: str = ""  # the upstream issue when the divergence is known
    refusals: list[Refusal] = field(default_factory=list)  # calls the kernel raised on
    extra: dict[str, Any] = field(default_factory=dict)
    # Outputs (each input once) whose code depends on the target's approximation: not divergences.
    target_dependent: int = 0
    target_dependent_examples: list[Divergence] = field(default_factory=list)

    @property
    def ulps(self) -> int:
        """The ulps the check allowed before the cast (0: bit for bit)."""
        return int(self.extra.get("ulps") or self.extra.get("fused", {}).get("ulps") or 0)

    def add_note(self, note: str | None) -> None:
        """Add a line the result shows under its header (``extra["notes"]``); empty or repeated notes are left out."""
        if note and note not in self.extra.get("notes", ()):
            self.extra.setdefault("notes", []).append(note)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(dataclasses.replace(self, divergences=[], refusals=[], target_dependent_examples=[]))
        data["divergences"] = [d.to_dict() for d in self.divergences]
        data["refusals"] = [r.to_dict() for r in self.refusals]
        data["target_dependent_examples"] = [d.to_dict() for d in self.target_dependent_examples]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in names}
        kept["divergences"] = [Divergence.from_dict(d) for d in data.get("divergences", [])]
        kept["refusals"] = [Refusal.from_dict(r) for r in data.get("refusals", [])]
        kept["target_dependent_examples"] = [Divergence.from_dict(d)
                                             for d in data.get("target_dependent_examples", [])]
        return cls(**kept)

    def __str__(self) -> str:
        """One line: what was checked and the verdict. The full text, divergences and
        reproducers included, is the terminal printer's (``fp8check.terminal.divergences.result_text``,
        which ``fp8check.assert_conforms`` and ``str(Report)`` use): the core renders nothing."""
        what = f"{self.kernel} ({self.kind}, {self.format}/{self.profile}, {self.input_dtype} in, {self.device})"
        dependent = f"; {self.target_dependent:,} target-dependent" if self.target_dependent else ""
        if self.passed:
            within = f" within {self.ulps} ulps" if self.ulps else ""
            return f"{what}: conforms{within} ({self.checked:,} values checked{dependent})"
        found = ", ".join(f"{c} {n:,}" for c, n in self.categories.items() if n) or "no divergence counted"
        return f"{what}: diverges ({found}; {self.checked:,} values checked{dependent})"


_DIVERGENCE_FIELDS = tuple(f.name for f in fields(Divergence))

# The category index of every input of an exhaustive 16-bit sweep
# (``CheckResult.extra["map16"]``): 0 the kernel matches the reference, then
# the cast categories, and a last index for inputs not compared.
MAP16_ORDER = ("match",) + CAST_CATEGORIES + ("unchecked",)
MAP16_DTYPES = ("float16", "bfloat16")
_MAP16_SIZE = 1 << 16


@dataclass
class InputMap16:
    """What happened to each of the 65,536 inputs of a 16-bit input dtype.

    Indexed by the input's bit pattern: ``category`` (an index into
    ``order``), the reference's code ``expected`` and the kernel's code
    ``actual`` (both 0 where unchecked). In JSON each array is 65,536
    bytes, zlib-compressed and base64-encoded: a few kilobytes, so that a
    report can draw the whole input space without re-running anything.
    """

    input_dtype: str
    category: Any  # numpy uint8[65536]
    expected: Any  # numpy uint8[65536]
    actual: Any  # numpy uint8[65536]
    order: tuple[str, ...] = MAP16_ORDER

    @classmethod
    def empty(cls, input_dtype: str) -> InputMap16:
        import numpy as np

        return cls(input_dtype=input_dtype,
                   category=np.full(_MAP16_SIZE, MAP16_ORDER.index("unchecked"), dtype=np.uint8),
                   expected=np.zeros(_MAP16_SIZE, dtype=np.uint8), actual=np.zeros(_MAP16_SIZE, dtype=np.uint8))

    @property
    def unchecked_index(self) -> int:
        return self.order.index("unchecked")

    @property
    def checked(self) -> int:
        import numpy as np

        return int(np.count_nonzero(self.category != self.unchecked_index))

    def record(self, bits: Any, expected: Any, actual: Any, category: Any) -> None:
        """Set the entries of inputs ``bits`` (``category``: indices into ``order``)."""
        import numpy as np

        idx = np.asarray(bits).astype(np.int64)
        self.expected[idx] = np.asarray(expected).astype(np.uint8)
        self.actual[idx] = np.asarray(actual).astype(np.uint8)
        self.category[idx] = np.asarray(category).astype(np.uint8)

    def merge(self, other: InputMap16) -> None:
        """Take every input ``other`` checked (the same input gives the same codes)."""
        import numpy as np

        if other.order != self.order:
            raise ValueError("cannot merge input maps with different category orders")
        seen = np.flatnonzero(other.category != other.unchecked_index)
        self.record(seen, other.expected[seen], other.actual[seen], other.category[seen])

    def counts(self) -> dict[str, int]:
        """Inputs per entry of ``order`` (only those present)."""
        import numpy as np

        n = np.bincount(self.category, minlength=len(self.order))
        return {name: int(k) for name, k in zip(self.order, n) if k}

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_dtype": self.input_dtype,
            "encoding": "zlib+base64: 65536 bytes, one per input bit pattern",
            "order": list(self.order),
            "checked": self.checked,
            "category": _pack(self.category),
            "expected": _pack(self.expected),
            "actual": _pack(self.actual),
        }

    @classmethod
    def from_dict(cls, data: Any) -> InputMap16:
        """Read the JSON form back; a malformed map raises InvalidValueError."""
        from fp8check.errors import InvalidValueError

        try:
            order = tuple(str(o) for o in data["order"])
            arrays = [_unpack(data[k]) for k in ("category", "expected", "actual")]
            dtype = str(data["input_dtype"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidValueError(f"malformed map16 ({type(exc).__name__}: {exc})") from None
        if "unchecked" not in order or int(arrays[0].max()) >= len(order):
            raise InvalidValueError("malformed map16: a category index is outside its order")
        return cls(input_dtype=dtype, category=arrays[0], expected=arrays[1], actual=arrays[2], order=order)


def _pack(array: Any) -> str:
    import base64
    import zlib

    import numpy as np

    return base64.b64encode(zlib.compress(np.ascontiguousarray(array, dtype=np.uint8).tobytes(), 9)).decode("ascii")


def _unpack(text: Any) -> Any:
    """65,536 bytes from zlib+base64 text (no more is ever inflated)."""
    import base64
    import binascii
    import zlib

    import numpy as np

    if not isinstance(text, str):
        raise ValueError("not a string")
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(base64.b64decode(text.encode("ascii"), validate=True), _MAP16_SIZE + 1)
    except (binascii.Error, zlib.error, UnicodeEncodeError) as exc:
        raise ValueError(f"not zlib+base64: {exc}") from None
    if len(raw) != _MAP16_SIZE:
        raise ValueError(f"{len(raw)} bytes where 65536 were expected")
    return np.frombuffer(raw, dtype=np.uint8).copy()

@functools.lru_cache(maxsize=None)
def _installed_version(name: str) -> str | None:
    """The installed distribution's version, without importing it (looked up once per process:
    reading package metadata costs milliseconds, and the audit of many small files asks each time)."""
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def environment() -> dict[str, Any]:
    """Versions and device facts, so that two results can be compared."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    from fp8check import __version__

    env["fp8check"] = __version__
    for name in ("numpy", "ml_dtypes", "torch", "triton", "torchao", "gfloat", "hypothesis"):
        module = sys.modules.get(name)
        if module is None:
            installed = _installed_version(name)
            if installed is None:
                continue
            env[name] = installed
        else:
            env[name] = getattr(module, "__version__", "unknown")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            env["cuda_device"] = torch.cuda.get_device_name(0)
        except Exception:  # a CUDA context a kernel's fault left unusable (fp8check.device_faults)
            env["cuda_device"] = "unknown (the CUDA context was lost to a fault of a kernel under test)"
        env["cuda"] = torch.version.cuda
    return env


def dump_results(path: str | Path, checks: Iterable[CheckResult], env: dict[str, Any] | None = None) -> None:
    """Write a results file holding ``checks``."""
    from fp8check.outputs import write_json

    doc = {
        "fp8check_results": RESULTS_VERSION,
        "environment": env if env is not None else environment(),
        "checks": [c.to_dict() for c in checks],
    }
    write_json(path, doc)

"""The zoo: FP8 quantizers and conversions that real packages ship, checked against what they claim.

Each :class:`ZooEntry` is data: the package and the version range it was
checked with, the upstream function, the recipe its own source or docs
claim (and where: ``citation``), the devices it runs on, the adapter that
calls it (imported lazily, ``module:function`` of a factory taking a
``mode``), and the divergences already found (:class:`KnownIssue`, each
with its upstream issue or "no upstream issue found" and a one-line
reproducer). :func:`entries` lists them all, :func:`installed` those whose
package can be imported here, :func:`run_entry` checks one and returns a
:class:`ZooResult`, :func:`survey` checks every installed one.

Modes (how an adapter runs the package's code):

``eager``              plain torch code of the package, on ``device``.
``faithful:<target>``  a Triton kernel in fp8check's faithful interpreter on
                       the CPU (:mod:`fp8check.triton`): every FP8 conversion
                       as compiled Triton does it on ``target`` (``sm90`` for
                       the NVIDIA-style kernels, ``gfx942`` where a package
                       runs the kernel with e4m3fnuz on MI300).
``interpret``          the same kernel in Triton's own interpreter, its FP8
                       conversions included (wrong: triton-lang/triton#8322).
                       A divergence seen here and not under ``faithful:`` is
                       the interpreter's own (``KnownIssue.interpreter_only``).
``compiled``           the Triton kernel compiled for the CUDA device.

:mod:`fp8check.zoo._triton` is the one place that knows how each runs.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from fp8check.errors import FP8CheckError, InvalidValueError

__all__ = [
    "KnownIssue",
    "ZooEntry",
    "ZooResult",
    "ZooUnavailable",
    "entries",
    "get",
    "installed",
    "package_version",
    "version_matches",
    "run_entry",
    "survey",
    "MODES",
]

MODES = ("eager", "faithful:sm90", "faithful:gfx942", "interpret", "compiled")  # faithful: any fp8check.triton target


class ZooUnavailable(FP8CheckError, ImportError):
    """The package an entry needs cannot be imported here (the message says exactly why)."""


@dataclass(frozen=True, kw_only=True)
class KnownIssue:
    """A divergence found in an entry: what, where it shows, and the upstream issue."""

    summary: str
    upstream: str  # an issue/PR reference, or "no upstream issue found (searched ...)"
    categories: frozenset[str]  # check categories it shows in ("scale", "codes", "nonfinite", ...)
    modes: frozenset[str] = frozenset({"eager"})
    versions: str = ""  # version spec where it applies; "" = the entry's range
    reproducer: str = ""
    interpreter_only: bool = False  # the Triton interpreter's own FP8 casts, not the package
    # A targeted input that always shows it: a callable returning a list of
    # QuantCase (quantize entries); ``shown_by`` says in words what it is.
    example: Callable[[], Any] | None = field(default=None, compare=False)
    shown_by: str = ""

    def applies(self, mode: str, version: str | None) -> bool:
        return mode in self.modes and (not self.versions or version is None or version_matches(version, self.versions))


@dataclass(frozen=True, kw_only=True)
class ZooEntry:
    """One quantizer or conversion of one package, as data."""

    id: str
    package: str  # the distribution name (pip)
    module: str  # what must import for the entry to run
    versions: str  # the version range it was checked with: "==5.17.0", ">=0.19,<0.20"
    function: str  # the upstream function, as its package names it
    kind: str  # "quantize" (check_quantizer) or "convert" (fn -> fnuz byte conversion)
    claims: str  # the recipe (quantize) or reference function (convert) it claims
    citation: str  # file / function / version where the claim is made
    adapter: str  # "module:factory"; factory(mode) -> kernel
    modes: tuple[str, ...]  # modes it runs in, CPU first
    fmt: str = "e4m3fn"
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    devices: tuple[str, ...] = ("cpu", "cuda")
    known: tuple[KnownIssue, ...] = ()
    note: str = ""
    heavy: bool = False  # importing the package takes a minute or more (its tests are slow)

    def modes_for(self, device: str) -> tuple[str, ...]:
        if device == "cpu":
            return tuple(m for m in self.modes if m in ("eager", "interpret") or m.startswith("faithful:"))
        return tuple(m for m in self.modes if m in ("eager", "compiled"))

    def recipe(self) -> Any:
        """The :class:`~fp8check.quantizers.Recipe` the entry claims (quantize entries)."""
        from fp8check import quantizers

        return quantizers.get(self.claims, self.fmt)

    def reproducer(self, mode: str) -> str:
        spec = _spec(self, mode)
        if self.kind == "quantize":
            return f"fp8check check {spec} --kind quantize --recipe {self.claims} --format {self.fmt}"
        if self.kind == "cast":
            return f"fp8check check {spec} --format {self.fmt} --profile {self.claims} --input-dtype {self.dtypes[0]}"
        return f"fp8check survey --zoo --entry {self.id}"


def _spec(entry: ZooEntry, mode: str) -> str:
    """``module:callable`` of the adapter for ``mode``: what ``fp8check check`` loads."""
    return entry.adapter.split(":")[0] + ":" + _kernel_name(entry, mode)


def _kernel_name(entry: ZooEntry, mode: str) -> str:
    """The module-level callable of the adapter module for ``mode`` (what a reproducer names)."""
    base = entry.adapter.split(":")[1]
    return base if mode == entry.modes[0] else f"{base}_{mode.replace('-', '_').replace(':', '_')}"


@dataclass
class ZooResult:
    """What checking one entry in one mode found."""

    entry: ZooEntry
    mode: str
    device: str
    status: str  # conforms | diverges | known | fixed? | unverified | unavailable | error
    version: str | None = None
    checks: list[Any] = field(default_factory=list)  # CheckResult per input dtype
    known: list[KnownIssue] = field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0

    @property
    def categories(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.checks:
            for k, n in c.categories.items():
                if n:
                    out[k] = out.get(k, 0) + n
        return out

    @property
    def checked(self) -> int:
        return sum(c.checked for c in self.checks)

    @property
    def verdict(self) -> str:
        return {
            "conforms": "conforms",
            "diverges": "DIVERGES",
            "known": "diverges (known)",
            "fixed?": "conforms where a divergence was known",
            "unverified": "not checked: version outside the range",
            "unavailable": "not available here",
            "error": "error",
        }[self.status]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.entry.id,
            "package": self.entry.package,
            "version": self.version,
            "versions_checked": self.entry.versions,
            "function": self.entry.function,
            "claims": self.entry.claims,
            "citation": self.entry.citation,
            "mode": self.mode,
            "device": self.device,
            "status": self.status,
            "verdict": self.verdict,
            "checked": self.checked,
            "categories": self.categories,
            "known": [{"summary": k.summary, "upstream": k.upstream, "reproducer": k.reproducer,
                       "interpreter_only": k.interpreter_only} for k in self.known],
            "detail": self.detail,
            "reproducer": self.entry.reproducer(self.mode),
            "seconds": round(self.seconds, 2),
            "checks": [c.to_dict() for c in self.checks],
        }


# -- versions ---------------------------------------------------------------------


def _vtuple(v: str) -> tuple[int, ...]:
    parts = []
    for p in re.split(r"[.+-]", v):
        m = re.match(r"\d+", p)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def version_matches(version: str, spec: str) -> bool:
    """``version`` within ``spec`` ("==1.2.3", ">=0.19,<0.20"; comma = and)."""
    v = _vtuple(version)
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        m = re.match(r"(==|>=|<=|<|>|!=)\s*(.+)", clause)
        if not m:
            raise InvalidValueError(f"version spec {spec!r}: cannot read {clause!r}")
        op, want = m.group(1), _vtuple(m.group(2))
        n = max(len(v), len(want))
        a, b = v + (0,) * (n - len(v)), want + (0,) * (n - len(want))
        ok = {"==": a == b, ">=": a >= b, "<=": a <= b, "<": a < b, ">": a > b, "!=": a != b}[op]
        if not ok:
            return False
    return True


def package_version(entry: ZooEntry) -> str | None:
    """The installed version of the entry's package, or None.

    A package made importable without being installed (vLLM or SGLang
    unpacked from their wheels onto ``sys.path``) has no distribution
    metadata: its ``__version__`` is used then."""
    try:
        return importlib.metadata.version(entry.package)
    except importlib.metadata.PackageNotFoundError:
        pass
    top = entry.module.split(".")[0]
    if importlib.util.find_spec(top) is None:
        return None
    try:
        mod = importlib.import_module(top)
    except Exception:
        return None
    return getattr(mod, "__version__", None)


# -- the catalog ------------------------------------------------------------------

_MODULES = ("transformers", "compressed_tensors", "vllm", "sglang", "quark", "gemlite", "coat", "transformer_engine",
            "aiter", "fbgemm")


def entries() -> tuple[ZooEntry, ...]:
    """Every entry of the zoo (whether or not its package is here)."""
    out: list[ZooEntry] = []
    for name in _MODULES:
        mod = importlib.import_module(f"fp8check.zoo.{name}")
        out.extend(mod.ENTRIES)
    return tuple(out)


def get(entry_id: str) -> ZooEntry:
    for e in entries():
        if e.id == entry_id:
            return e
    raise InvalidValueError(f"unknown zoo entry {entry_id!r}; known: {', '.join(e.id for e in entries())}")


def installed() -> list[ZooEntry]:
    """The entries whose package is importable here (not imported yet: cheap)."""
    return [e for e in entries() if package_version(e) is not None]


# -- running ----------------------------------------------------------------------


def _factory(entry: ZooEntry) -> Callable[..., Any]:
    """The adapter module's ``make_<name>(mode=...)`` for ``adapter = "module:name"``."""
    module, _, name = entry.adapter.partition(":")
    return getattr(importlib.import_module(module), f"make_{name}")


def _quantize_checks(entry: ZooEntry, kernel: Any, mode: str, device: str, max_examples: int,
                     seed: int | None, cases: list[Any] | None, edge: bool) -> list[Any]:
    from fp8check.quantizers.conformance import check_quantizer
    from fp8check.quantizers.edge_cases import edge_cases

    recipe = entry.recipe()
    if cases is not None:  # targeted inputs only (a known issue's example)
        return [check_quantizer(kernel, recipe, max_examples=0, device=device, kernel_name=_spec(entry, mode),
                                cases=cases)]
    out = []
    for dtype in entry.dtypes:
        mine = [c for c in edge_cases(recipe) if c.dtype == dtype] if edge else []
        out.append(check_quantizer(kernel, recipe, max_examples=max_examples, seed=seed, device=device,
                                   kernel_name=_spec(entry, mode), dtypes=(dtype,), cases=mine))
    return out


def run_entry(entry: ZooEntry | str, *, mode: str | None = None, device: str = "cpu", max_examples: int = 20,
              seed: int | None = 0, cases: list[Any] | None = None, edge: bool = True) -> ZooResult:
    """Check ``entry`` in ``mode`` (default: its first mode for ``device``).

    ``cases``: check only these inputs (a list of
    :class:`~fp8check.quantizers.cases.QuantCase`, e.g. a known issue's
    ``example()``); ``edge=False`` leaves the targeted edge cases out and
    runs the ``max_examples`` Hypothesis inputs only (seeded by ``seed``)."""
    if isinstance(entry, str):
        entry = get(entry)
    modes = entry.modes_for(device)
    if mode is None:
        if not modes:
            return ZooResult(entry=entry, mode="-", device=device, status="unavailable",
                             detail=f"{entry.id} does not run on {device}")
        mode = modes[0]
    if mode not in entry.modes:
        raise InvalidValueError(f"{entry.id} runs in {', '.join(entry.modes)}, not {mode!r}")
    started = time.perf_counter()
    version = package_version(entry)
    result = ZooResult(entry=entry, mode=mode, device=device, status="error", version=version)
    if version is None:
        result.status, result.detail = "unavailable", f"{entry.package} is not installed here"
        return result
    try:
        kernel = _factory(entry)(mode=mode)
        if entry.kind == "quantize":
            result.checks = _quantize_checks(entry, kernel, mode, device, max_examples, seed, cases, edge)
        elif entry.kind == "cast":
            from fp8check.casts import engine

            if not hasattr(kernel, "profile_for"):  # a plain tensor -> fp8 callable (a Triton launcher's adapter)
                from fp8check.casts.adapters.user import wrap_callable

                kernel = wrap_callable(kernel, name=_spec(entry, mode), device=device, profile=entry.claims,
                                       input_dtypes=entry.dtypes)

            result.checks = [engine.run_check(kernel, entry.fmt, None, input_dtype=d, seed=seed,
                                              max_examples=max_examples if d == "float32" else 0)[0]
                             for d in entry.dtypes]
            for c in result.checks:
                c.command = c.command.replace(kernel.name, _spec(entry, mode), 1)
        else:
            from fp8check.zoo.convert import check_fnuz_conversion

            result.checks = [check_fnuz_conversion(kernel, device=device, kernel_name=_spec(entry, mode))]
    except ZooUnavailable as exc:
        result.status, result.detail = "unavailable", str(exc)
        return result
    except FP8CheckError as exc:
        result.status, result.detail = "error", str(exc)
        return result
    finally:
        result.seconds = time.perf_counter() - started
    diverged = {k for k, n in result.categories.items() if n}
    known = [k for k in entry.known if k.applies(mode, version)]
    in_range = version_matches(version, entry.versions)
    if not diverged:
        result.status = "fixed?" if known and cases is None else "conforms"
        result.known = known
    elif known and diverged <= set().union(*(k.categories for k in known)):
        result.status, result.known = "known", known
    else:
        result.status = "diverges"
        result.known = known
    if not in_range:
        result.detail = (f"{entry.package} {version} is outside the range checked ({entry.versions}); "
                         "the known divergences are not asserted for it")
        if result.status in ("known", "fixed?"):
            result.status = "unverified"
    return result


def survey(chosen: Iterable[ZooEntry] | None = None, *, device: str = "cpu", max_examples: int = 20,
           seed: int | None = 0, modes: Iterable[str] | None = None,
           progress: Callable[[ZooResult], None] | None = None) -> list[ZooResult]:
    """Check every installed entry (or ``chosen``) in each mode it runs in on ``device``."""
    wanted = None if modes is None else set(modes)
    results = []
    for entry in (installed() if chosen is None else list(chosen)):
        for mode in entry.modes_for(device) or ("-",):
            if wanted is not None and mode not in wanted:
                continue
            r = run_entry(entry, mode=None if mode == "-" else mode, device=device, max_examples=max_examples, seed=seed)
            results.append(r)
            if progress is not None:
                progress(r)
    return results

"""Kernels a repository declares, and the checks that run them.

A kernel author declares the kernels fp8check should check, any number of
them, in ``[tool.fp8check]`` of the repository's ``pyproject.toml``::

    [[tool.fp8check.cast]]
    kernel = "mykernels.casts:cast_e4m3fnuz"
    format = "e4m3fnuz"
    profile = "satfinite"

    [[tool.fp8check.quantizer]]
    kernel = "mykernels.quant:tensorwise_fnuz"
    recipe = "tensorwise"
    format = "e4m3fnuz"

    [[tool.fp8check.fused]]
    kernel = "mykernels.fused:rmsnorm_quant"
    reference = "mykernels.fused:rmsnorm_reference"
    args = "mykernels.fused:rmsnorm_args"
    format = "e4m3fn"
    profile = "satfinite"
    ulps = 2

or returns them from a ``pytest_fp8check_kernels()`` hook in a
``conftest.py`` (:func:`cast_kernel`, :func:`quantizer_kernel`,
:func:`fused_kernel`, where a kernel may be a function object too). Every
key: ``name`` (the test ids' name for the kernel; default the function's),
``kernel``, ``format``, ``profile`` (default ``ieee``), ``input-dtypes``
(casts; default float32, float16, bfloat16), ``device`` (``cpu`` or
``cuda``), ``recipe`` (quantizers), ``reference``/``args``/``ulps`` (fused
kernels; ``args`` also for quantizers with fused pre-processing, with
``reference`` the values the recipe applies to), ``triton-target`` (run a
Triton kernel in fp8check's faithful interpreter with that GPU's FP8
semantics), and a ``supports`` table declaring the kernel's domain
(``input-dtypes``, ``contiguous-only``, ``numel-multiple-of``,
``max-numel``): calls outside it are not tried, a refusal inside it fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from fp8check.errors import InvalidValueError

__all__ = ["KernelDeclaration", "cast_kernel", "quantizer_kernel", "fused_kernel", "static_quantizer",
           "from_pyproject", "from_table", "read_fp8check_table", "repository_recipes", "run_declaration", "KINDS"]

KINDS = ("cast", "quantizer", "fused", "static")
_CAST_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class KernelDeclaration:
    """One kernel a repository declares (see the module docstring for the keys)."""

    kind: str
    kernel: Any  # "MODULE:FUNC" or a callable
    format: str | None = None
    profile: str | None = None
    name: str = ""
    input_dtypes: tuple[str, ...] = _CAST_DTYPES
    device: str = "cpu"
    recipe: Any = None  # a recipe name or a Recipe (a declared one)
    reference: Any = None
    args: Any = None
    ulps: int = 0
    triton_target: str | None = None
    supports: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    apply: str | None = None  # static: divide | multiply | multiply-reciprocal
    scale: float | None = None  # static: the one scale to check (default: scales drawn for every boundary)
    isolate: bool = False  # check in a child process (fp8check.isolation): a crash is a finding
    requires: tuple[str, ...] = ()  # modules the kernel needs; one that cannot be imported skips its check
    # A documented defect of the kernel's package: {"categories": [...], "reason": "..."}; the check is a strict
    # xfail that fails outright on a divergence of any other category.
    known_divergence: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    declared_in: str | None = field(default=None, compare=False)  # the folder of the pyproject.toml it came from
    max_examples: int | None = None  # Hypothesis examples of its check in the pytest suite (default: the suite's)

    def __post_init__(self) -> None:
        from fp8check import formats, profiles

        if self.kind not in KINDS:
            raise InvalidValueError(f"kernel kind {self.kind!r}: use one of {', '.join(KINDS)}")
        if not self.kernel:
            raise InvalidValueError(f"a declared {self.kind} kernel needs 'kernel = \"MODULE:FUNC\"'")
        if self.kind in ("cast", "fused", "static") and not self.format:
            raise InvalidValueError(f"{self.label}: a {self.kind} kernel needs 'format'")
        if self.kind == "quantizer" and not self.recipe:
            raise InvalidValueError(f"{self.label}: a quantizer needs 'recipe'")
        if self.kind == "quantizer":
            from fp8check import quantizers

            try:
                quantizers.get(self.recipe)  # an unknown name: one clear error now, not at run time
            except quantizers.UnknownRecipeError:  # a recipe this repository's pyproject.toml declares
                object.__setattr__(self, "recipe", quantizers.get(self.recipe, declared=repository_recipes()))
        if self.kind == "static":
            from fp8check.quantizers.static import check_options

            check_options(self.apply, self.scale, self.label)
        elif self.apply is not None or self.scale is not None:
            raise InvalidValueError(f"{self.label}: 'apply' and 'scale' are for static-scale quantizers "
                                    "([[tool.fp8check.static]]); a quantizer's recipe says how it applies its scale")
        if self.kind == "fused" and self.reference is None:
            raise InvalidValueError(f"{self.label}: a fused kernel needs 'reference' (the values before its cast)")
        if self.format:
            formats.get(self.format)
        if self.profile:
            profiles.get(self.profile)
        if self.device not in ("cpu", "cuda"):
            raise InvalidValueError(f"{self.label}: device {self.device!r}: use cpu or cuda")
        from fp8check import inputs

        for d in self.input_dtypes:
            inputs.source_format(d)
        if self.ulps < 0:
            raise InvalidValueError(f"{self.label}: ulps must be >= 0")
        if self.max_examples is not None and (isinstance(self.max_examples, bool) or not isinstance(self.max_examples, int)
                                              or self.max_examples < 0):
            raise InvalidValueError(f"{self.label}: max-examples = {self.max_examples!r}: give an integer >= 0")
        if not isinstance(self.isolate, bool):
            raise InvalidValueError(f"{self.label}: isolate = {self.isolate!r}: give true or false")
        if isinstance(self.requires, str):
            object.__setattr__(self, "requires", (self.requires,))
        object.__setattr__(self, "requires", tuple(str(m) for m in self.requires))
        if self.known_divergence is not None:
            from fp8check.results import CATEGORIES

            kd = {str(k).replace("-", "_"): v for k, v in dict(self.known_divergence).items()}
            cats, reason = kd.get("categories"), kd.get("reason")
            if (set(kd) - {"categories", "reason"} or not isinstance(reason, str) or not reason.strip()
                    or not isinstance(cats, (list, tuple)) or not cats or set(cats) - set(CATEGORIES)):
                raise InvalidValueError(f"{self.label}: known-divergence = {self.known_divergence!r}: give "
                                        "{categories = [...], reason = \"...\"} with categories of "
                                        f"{', '.join(CATEGORIES)}")
            object.__setattr__(self, "known_divergence", {"categories": tuple(cats), "reason": reason})
        if self.triton_target:
            from fp8check.triton import targets

            targets.get(self.triton_target)
        unknown = set(self.supports) - {"input_dtypes", "contiguous_only", "numel_multiple_of", "max_numel"}
        if unknown:
            raise InvalidValueError(f"{self.label}: unknown 'supports' key(s) {', '.join(sorted(unknown))}")
        if not self.name:
            object.__setattr__(self, "name", _default_name(self.kernel))

    @property
    def label(self) -> str:
        return self.name or _default_name(self.kernel)

    @property
    def fmt_name(self) -> str:
        """The format the kernel produces (a quantizer: its recipe's, unless ``format`` overrides it)."""
        if self.format:
            from fp8check import formats

            return formats.get(self.format).name
        from fp8check import quantizers

        return quantizers.get(self.recipe).format.name

    def harness_supports(self) -> Any:
        from fp8check.casts.harness import Supports

        s = self.supports
        dtypes = s.get("input_dtypes")
        return Supports(input_dtypes=tuple(dtypes) if dtypes is not None else None,
                        contiguous_only=bool(s.get("contiguous_only", False)),
                        numel_multiple_of=int(s.get("numel_multiple_of", 1)), max_numel=s.get("max_numel"))

    def resolve(self, what: Any) -> Any:
        if what is None or callable(what):
            return what
        from fp8check.loader import load_callable

        return load_callable(str(what))

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        """Where the kernel runs: the faithful Triton interpreter for a declared target, else as is."""
        if not self.triton_target:
            yield
            return
        import warnings

        import numpy as np

        import fp8check.triton as ft

        # The interpreter runs the kernel's float arithmetic in NumPy: a division by zero or an Inf * 0 the
        # kernel means (IEEE) is no RuntimeWarning in the user's warnings summary.
        with ft.interpreting(), ft.faithful(self.triton_target), np.errstate(all="ignore"), \
                warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.")
            yield

    @contextlib.contextmanager
    def triton_watch(self) -> Iterator[Callable[[Any], None]]:
        """Around a run in the faithful interpreter: yields a function that adds to a result the note on
        float32 divisions the target compiles approximately (the interpreter divides exactly) and the
        kernel faults the interpreter found (out-of-bounds, uninitialised reads, races, false hints)."""
        if not self.triton_target:
            yield lambda result: None
            return
        import fp8check.triton as ft
        from fp8check.triton import sanitizer

        with ft.watch() as w, sanitizer.collect() as found:
            def finish(result: Any) -> None:
                result.add_note(w.division_note)
                add_faults(result, found.faults)

            yield finish

    def call_with_context(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if not self.triton_target:
            return fn

        def wrapped(*a: Any, **k: Any) -> Any:
            with self.context():
                return fn(*a, **k)

        wrapped.__name__ = getattr(fn, "__name__", "kernel")
        return wrapped

    def command(self, input_dtype: str | None = None, *, max_examples: int | None = None,
                seed: int | None = None) -> str:
        """An ``fp8check check`` command that reproduces this kernel's check from the repository root."""
        import shlex

        spec = self.kernel if isinstance(self.kernel, str) else _default_name(self.kernel)
        parts = ["fp8check", "check", spec]
        if self.kind == "quantizer":
            parts += ["--kind", "quantize"] + recipe_arguments(self.recipe, self.declared_in)
            if "input_dtypes" in self.supports:
                parts += ["--input-dtype", ",".join(self.supports["input_dtypes"])]
            if self.format:
                parts += ["--format", self.format]
            if self.ulps:
                parts += ["--ulps", str(self.ulps)]
        elif self.kind == "static":
            parts += ["--kind", "static", "--format", str(self.format), "--profile", self.profile or "ieee",
                      "--apply", self.apply or "divide"]
            if self.scale is not None:
                parts += ["--scale", repr(float(self.scale))]
            if self.ulps:
                parts += ["--ulps", str(self.ulps)]
        else:
            parts += ["--format", str(self.format), "--profile", self.profile or "ieee"]
        if self.kind == "fused":
            parts += ["--kind", "fused", "--reference", _spec(self.reference)]
            if self.args is not None:
                parts += ["--args", _spec(self.args)]
            if self.ulps:
                parts += ["--ulps", str(self.ulps)]
        if input_dtype and self.kind in ("cast", "fused", "static"):
            parts += ["--input-dtype", input_dtype]
        if self.device != "cpu":
            parts += ["--device", self.device]
        if self.isolate:
            parts += ["--isolate"]
        if self.triton_target:
            parts += ["--triton-target", self.triton_target]
        for key, value in self.supports.items():
            if key == "contiguous_only" and value:
                parts += ["--contiguous-only"]
            elif key == "numel_multiple_of":
                parts += ["--numel-multiple-of", str(value)]
            elif key == "max_numel":
                parts += ["--max-numel", str(value)]
        if max_examples is not None:
            parts += ["--max-examples", str(max_examples)]
        if seed is not None:
            parts += ["--seed", str(seed)]
        return shlex.join(parts)


def _spec(what: Any) -> str:
    return what if isinstance(what, str) else f"{getattr(what, '__module__', '?')}:{getattr(what, '__qualname__', '?')}"


def recipe_arguments(recipe: Any, start: str | Path | None = None) -> list[str]:
    """``--recipe NAME`` for a recipe the command line finds by that name (built in, or declared in the
    pyproject.toml at or above ``start``, default the working directory), else ``--recipe BASE`` and a
    ``--recipe-field KEY=VALUE`` per field that differs from BASE, the known recipe that differs least: a
    recipe made through the Python API or a conftest hook is reproduced field by field."""
    from fp8check import quantizers
    from fp8check.quantizers.recipe import Recipe

    if not isinstance(recipe, Recipe):
        return ["--recipe", str(recipe)]
    try:
        declared = repository_recipes(start)
    except Exception:  # a pyproject.toml the command line could not read either
        declared = {}
    known = {**quantizers.RECIPES, **declared}
    if known.get(recipe.name) == recipe:
        return ["--recipe", recipe.name]

    def diff(base: Recipe) -> list[str]:
        return [f"{f.name.replace('_', '-')}={_field_text(getattr(recipe, f.name))}"
                for f in dataclasses.fields(Recipe) if f.name not in ("name", "description")
                and getattr(recipe, f.name) != getattr(base, f.name)]

    name, fields = min(((n, diff(r)) for n, r in known.items()), key=lambda nf: len(nf[1]))
    return ["--recipe", name] + [a for f in fields for a in ("--recipe-field", f)]


def _field_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(getattr(value, "name", value))


def _default_name(kernel: Any) -> str:
    if isinstance(kernel, str):
        return kernel.rpartition(":")[2] or kernel
    return getattr(kernel, "__name__", type(kernel).__name__)


def cast_kernel(kernel: Any, *, format: str, profile: str = "ieee", **kw: Any) -> KernelDeclaration:
    """Declare a cast kernel: ``kernel(x) -> fp8 tensor or uint8 codes``."""
    return KernelDeclaration(kind="cast", kernel=kernel, format=format, profile=profile, **kw)


def quantizer_kernel(kernel: Any, *, recipe: Any, format: str | None = None, **kw: Any) -> KernelDeclaration:
    """Declare a quantizer: ``kernel(x) -> (codes, scales)`` under ``recipe`` (a name, or a
    :class:`~fp8check.quantizers.Recipe`, e.g. from :func:`fp8check.quantizers.declared_recipe`)."""
    return KernelDeclaration(kind="quantizer", kernel=kernel, recipe=recipe, format=format, **kw)


def fused_kernel(kernel: Any, *, reference: Any, format: str, profile: str = "ieee", args: Any = None,
                 ulps: int = 0, **kw: Any) -> KernelDeclaration:
    """Declare a fused kernel: ``kernel(x, *args) -> codes``, ``reference(x, *args)`` the values before its cast."""
    return KernelDeclaration(kind="fused", kernel=kernel, reference=reference, format=format, profile=profile,
                             args=args, ulps=ulps, **kw)


_KEYS = {"name", "kernel", "format", "profile", "input-dtypes", "device", "recipe", "reference", "args", "ulps",
         "triton-target", "supports", "apply", "scale", "isolate", "requires", "known-divergence", "max-examples"}


def static_quantizer(kernel: Any, *, format: str, profile: str = "satfinite", apply: str = "divide",
                     scale: float | None = None, **kw: Any) -> KernelDeclaration:
    """Declare a static-scale quantizer: ``kernel(x, scale) -> fp8 codes``, ``scale`` a float32 tensor of
    shape (1,) applied as ``apply`` says (``divide``: x / scale; ``multiply-reciprocal``: x * fl(1/scale);
    ``multiply``: x * scale). ``scale``: check this one scale only (default: scales drawn at every boundary)."""
    return KernelDeclaration(kind="static", kernel=kernel, format=format, profile=profile, apply=apply, scale=scale,
                             **kw)


def table_keys(kind: str, entry: Any, where: str, known: set[str]) -> dict[str, Any]:
    """One ``[[tool.fp8check.KIND]]`` table with its keys spelled with dashes (underscores accepted), every
    key one of ``known``."""
    if not isinstance(entry, dict):
        raise InvalidValueError(f"{where}: [[tool.fp8check.{kind}]] entries must be tables")
    norm = {str(k).replace("_", "-"): v for k, v in entry.items()}
    unknown = set(norm) - known
    if unknown:
        raise InvalidValueError(f"{where}: [[tool.fp8check.{kind}]] has unknown key(s) {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(sorted(known))}")
    return norm


def first_duplicate(names: list[str]) -> str | None:
    """The first name given twice (declarations, training models: each must be told apart), or None."""
    return next((n for n in names if names.count(n) > 1), None)


def from_table(kind: str, entry: dict[str, Any], where: str = "pyproject.toml",
               recipes: dict[str, Any] | None = None) -> KernelDeclaration:
    """A declaration from one ``[[tool.fp8check.KIND]]`` table (dashes or underscores in keys); ``recipes``: the
    recipes the same file declares (``[tool.fp8check.recipe.NAME]``), which its ``recipe`` may name."""
    norm = table_keys(kind, entry, where, _KEYS)
    supports = {str(k).replace("-", "_"): v for k, v in dict(norm.pop("supports", {}) or {}).items()}
    kw = {k.replace("-", "_"): v for k, v in norm.items()}
    if "input_dtypes" in kw:
        kw["input_dtypes"] = tuple(kw["input_dtypes"])
    if kind == "quantizer" and recipes and isinstance(kw.get("recipe"), str):
        from fp8check import quantizers

        kw["recipe"] = quantizers.get(kw["recipe"], declared=recipes)
    if kind == "static" and "scale" in kw:
        if isinstance(kw["scale"], bool) or not isinstance(kw["scale"], (int, float)):
            raise InvalidValueError(f"{where}: [[tool.fp8check.static]] scale = {kw['scale']!r}: give a number")
        kw["scale"] = float(kw["scale"])
    if where.endswith("pyproject.toml"):
        kw.setdefault("declared_in", str(Path(where).parent))
    try:
        return KernelDeclaration(kind=kind, supports=supports, **kw)
    except TypeError as exc:
        raise InvalidValueError(f"{where}: [[tool.fp8check.{kind}]]: {exc}") from None


def read_fp8check_table(path: str | Path, *, invalid_ok: bool = False) -> dict[str, Any]:
    """The ``[tool.fp8check]`` table of the ``pyproject.toml`` at ``path`` ({} when it has none).

    The one reader of fp8check's table in a configuration file: whatever reads ``[tool.fp8check]``
    (the pytest plugin through :func:`from_pyproject`) reads it through this.
    A file that cannot be read or is not valid TOML raises :class:`InvalidValueError`, or with
    ``invalid_ok`` counts as declaring nothing: a file pytest did not read is left alone."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        if invalid_ok:
            return {}
        raise InvalidValueError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        if invalid_ok:
            return {}
        raise InvalidValueError(f"{p}: not valid TOML: {exc}") from None
    tool = doc.get("tool", {})
    table = tool.get("fp8check", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise InvalidValueError(f"{p}: [tool.fp8check] must be a table")
    return table


def from_pyproject(path: str | Path, *, invalid_ok: bool = False) -> tuple[list[KernelDeclaration], dict[str, Any]]:
    """The kernels ``[tool.fp8check]`` of ``path`` declares, and its other settings (``invalid_ok``: see
    :func:`read_fp8check_table`). The pytest plugin declares a repository's kernels through this."""
    from fp8check.quantizers import declared_recipes

    table = read_fp8check_table(path, invalid_ok=invalid_ok)
    where = str(path)
    recipes = declared_recipes(table.get("recipe"), where)
    out = []
    for kind in KINDS:
        entries = table.get(kind, [])
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list):
            raise InvalidValueError(f"{where}: tool.fp8check.{kind} must be tables ([[tool.fp8check.{kind}]])")
        out.extend(from_table(kind, e, where, recipes) for e in entries)
    settings = {k: v for k, v in table.items() if k not in KINDS and k != "recipe"}
    return out, settings


def repository_recipes(start: str | Path | None = None) -> dict[str, Any]:
    """The recipes ``[tool.fp8check.recipe]`` declares in the nearest ``pyproject.toml`` at or above ``start``
    (default: the working directory) that has a ``[tool.fp8check]`` table; {} when there is none."""
    from fp8check.quantizers import declared_recipes

    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        p = folder / "pyproject.toml"
        if not p.is_file():
            continue
        table = read_fp8check_table(p, invalid_ok=True)
        if table:
            return declared_recipes(table.get("recipe"), str(p))
    return {}


def run_cast_declaration(decl: KernelDeclaration, *, input_dtype: str | None = None, max_examples: int = 200,
                         seed: int = 0, thorough: bool = True, cap: int | None = 100) -> tuple[Any, Any]:
    """Run the check of a declared cast on one input dtype: the result and its full divergence record
    (:class:`~fp8check.casts.engine.Divergences`, which the pytest suite merges with its properties')."""
    from fp8check.casts import engine
    from fp8check.casts.adapters.user import wrap_callable

    from fp8check import device_faults

    device_faults.require_usable(decl.device, decl.label)

    def once() -> tuple[Any, Any]:
        kernel = wrap_callable(decl.call_with_context(decl.resolve(decl.kernel)), name=decl.name,
                               device=decl.device, profile=decl.profile or "ieee", input_dtypes=decl.input_dtypes)
        with decl.context(), decl.triton_watch() as noted:
            result, record = engine.run_check(kernel, decl.format, decl.profile or "ieee",
                                              input_dtype=input_dtype or decl.input_dtypes[0],
                                              max_examples=max_examples, seed=seed, thorough=thorough,
                                              supports=decl.harness_supports(), cap=cap)
        result.command = decl.command(input_dtype or decl.input_dtypes[0], max_examples=max_examples, seed=seed)
        noted(result)
        return result, record

    return _each_config(decl, once)


def missing_requirement(decl: KernelDeclaration) -> str:
    """Why ``decl`` cannot be checked here ("" when it can): a module of ``requires`` that does not import."""
    import importlib

    for module in decl.requires:
        try:
            importlib.import_module(module)
        except Exception as exc:  # an import runs a package's code: anything can go wrong
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"{decl.label} needs {module}, which cannot be imported here ({type(exc).__name__}: {first})"
    return ""


def run_declaration(decl: KernelDeclaration, *, input_dtype: str | None = None, max_examples: int = 200,
                    seed: int = 0, thorough: bool = True, cap: int | None = 100, isolate: bool | None = None) -> Any:
    """Run the check of ``decl`` (one input dtype for casts); a :class:`~fp8check.results.CheckResult`.

    ``isolate`` (default: the declaration's): run it in a child process (:mod:`fp8check.isolation`), where a
    crash of the kernel is a ``crashed`` finding instead of the end of this process.

    A fault of the kernel on a CUDA device (:mod:`fp8check.device_faults`) ends the check with a failed
    result whose finding is the fault and the call that made it; this process's CUDA context is unusable
    after it, and a later check on a CUDA device raises :class:`~fp8check.device_faults.DeviceLostError`
    (in a child process, with ``isolate``, this process's context is unaffected).
    """
    if decl.isolate if isolate is None else isolate:
        from fp8check.isolation import run_isolated

        return run_isolated(decl, input_dtype=input_dtype, max_examples=max_examples, seed=seed, thorough=thorough,
                            cap=cap)
    from fp8check import device_faults

    device_faults.require_usable(decl.device, decl.label)
    try:
        if decl.kind == "cast":
            return run_cast_declaration(decl, input_dtype=input_dtype, max_examples=max_examples, seed=seed,
                                        thorough=thorough, cap=cap)[0]

        def once() -> tuple[Any, None]:
            with decl.triton_watch() as noted:
                result = _run_other(decl, input_dtype=input_dtype, max_examples=max_examples, seed=seed,
                                    thorough=thorough, cap=cap)
            noted(result)
            return result, None

        return _each_config(decl, once)[0]
    except device_faults.DeviceFaultError as exc:  # a check with no partial result of its own (fused, static)
        return fault_result(decl, dataclasses.replace(exc.fault, kernel=decl.name), input_dtype=input_dtype,
                            max_examples=max_examples, seed=seed)


def fault_result(decl: KernelDeclaration, fault: Any, *, input_dtype: str | None = None,
                 max_examples: int | None = None, seed: int | None = None) -> Any:
    """A failed :class:`~fp8check.results.CheckResult` of ``decl`` whose one finding is ``fault`` (a
    :class:`~fp8check.device_faults.DeviceFault`): what a check that ended at its fault gives."""
    from fp8check.results import CheckResult

    dtype = input_dtype or (decl.input_dtypes[0] if decl.kind != "quantizer" else "float32")
    kind = {"quantizer": "quantize", "static": "static_quantize"}.get(decl.kind, decl.kind)
    result = CheckResult(kernel=decl.name, format=decl.fmt_name, profile=decl.profile or "", passed=False,
                         checked=0, kind=kind, input_dtype=dtype, device=decl.device, seed=seed,
                         command=decl.command(dtype if decl.kind != "quantizer" else None,
                                              max_examples=max_examples, seed=seed))
    return fault.apply(result)


def _each_config(decl: KernelDeclaration, once: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``once()`` for each config of the autotuned kernels a declared Triton kernel launches (each config
    is a kernel of its own), merged into one result (and one record of a cast's divergences) whose
    divergences and faults name their config."""
    if not decl.triton_target:
        return once()
    from fp8check.triton import launch

    runs = launch.each_config(once)
    if len(runs) == 1 and not runs[0][0]:
        return runs[0][1]
    return merge_config_runs([(label, r) for label, (r, _) in runs]), _merge_config_records(runs)


def _merge_config_records(runs: list[tuple[str, tuple[Any, Any]]]) -> Any:
    """One record of a cast's divergent inputs over every config (None for other kinds), each labelled."""
    records = [(label, rec) for label, (_, rec) in runs if rec is not None]
    if not records:
        return None
    import numpy as np

    first = records[0][1]
    merged = type(first)(fmt=first.fmt, profile=first.profile, input_dtype=first.input_dtype,
                         checked_count=first.checked_count)
    for label, rec in records:
        conditions = np.array([f"config {label}" + (f"; {c}" if c else "") for c in rec.conditions], dtype=object)
        merged.extend(rec.bits, rec.expected, rec.actual, rec.categories, conditions)
        for category, (count, d) in rec.calls.items():
            merged.add_call(category, count, _in_config(d, label))
        if rec.input_map is not None and merged.input_map is None:
            merged.input_map = rec.input_map
        elif rec.input_map is not None:
            merged.input_map.merge(rec.input_map)
    return merged


def _in_config(d: Any, label: str) -> Any:
    if d.condition.startswith("config "):
        return d
    return dataclasses.replace(d, condition="; ".join(x for x in (f"config {label}", d.condition) if x))


def merge_config_runs(runs: list[tuple[str, Any]]) -> Any:
    """One :class:`~fp8check.results.CheckResult` from one per autotune config: divergences carry their
    config in ``condition``, counts add up, ``extra["triton_configs"]`` has each config's verdict.
    ``checked`` is one config's (every config is run on the same inputs)."""
    base = dataclasses.replace(runs[0][1], categories={}, divergences=[], refusals=[], extra=dict(runs[0][1].extra))
    base.extra.pop("kernel_faults", None)
    base.passed = all(r.passed for _, r in runs)
    per_config = []
    for label, r in runs:
        for cat, n in r.categories.items():
            base.categories[cat] = base.categories.get(cat, 0) + n
        base.divergences.extend(_in_config(d, label) for d in r.divergences)
        base.refusals.extend(r.refusals)
        for note in r.extra.get("notes", ()):
            base.add_note(note)
        base.extra.setdefault("kernel_faults", []).extend(r.extra.get("kernel_faults", ()))
        per_config.append({"config": label, "passed": r.passed, "checked": r.checked,
                           "categories": {c: n for c, n in r.categories.items() if n}})
    if not base.extra["kernel_faults"]:
        del base.extra["kernel_faults"]
    base.extra["triton_configs"] = per_config
    verdicts = ", ".join(f"{c['config']}: {'conforms' if c['passed'] else 'DIVERGES'}" for c in per_config)
    base.add_note(f"autotuned: {len(runs)} config{'s' if len(runs) != 1 else ''} checked on the same inputs, "
                  f"each a kernel of its own ({verdicts})")
    return base


def add_faults(result: Any, faults: list[Any]) -> None:
    """Add the faults an interpreted kernel made (:class:`fp8check.triton.sanitizer.KernelFault`, or their
    ``to_dict()``) to a result: each a divergence of its own category (a kernel that faults does not
    conform), listed first, and all of them in ``extra["kernel_faults"]``."""
    from fp8check.results import Divergence

    added = []
    for f in faults:
        f = f if isinstance(f, dict) else f.to_dict()
        result.categories[f["kind"]] = result.categories.get(f["kind"], 0) + int(f["count"])
        added.append(Divergence(category=f["kind"], input_hex="-", expected_hex="-", actual_hex="-",
                                detail=f["message"], condition=f"config {f['config']}" if f["config"] else ""))
        result.extra.setdefault("kernel_faults", []).append(f)
        result.passed = False
    result.divergences[:0] = added


def _run_other(decl: KernelDeclaration, *, input_dtype: str | None, max_examples: int, seed: int, thorough: bool,
               cap: int | None) -> Any:
    fn = decl.call_with_context(decl.resolve(decl.kernel))
    name = decl.name
    if decl.kind == "quantizer":
        from fp8check.quantizers.conformance import check_quantizer

        result = check_quantizer(fn, decl.recipe, fmt=decl.format, profile=decl.profile, device=decl.device,
                                 max_examples=max_examples, seed=seed, kernel_name=name, thorough=thorough,
                                 supports=decl.harness_supports(), args=_args_of(decl),
                                 precast=decl.resolve(decl.reference), ulps=decl.ulps, cap=cap)
        result.command = decl.command(max_examples=max_examples, seed=seed)
        return result
    if decl.kind == "static":
        from fp8check.quantizers.static import check_static_quantizer

        result = check_static_quantizer(fn, format=decl.format, profile=decl.profile or "satfinite",
                                        apply=decl.apply or "divide", scale=decl.scale,
                                        input_dtype=input_dtype or decl.input_dtypes[0], device=decl.device,
                                        seed=seed, name=name, ulps=decl.ulps, cap=cap,
                                        supports=decl.harness_supports(), max_examples=min(max_examples, 20))
        result.command = decl.command(input_dtype or decl.input_dtypes[0], max_examples=max_examples, seed=seed)
        return result
    from fp8check.casts.fused import check_fused

    result = check_fused(fn, reference_fn=decl.resolve(decl.reference), format=decl.format,
                         profile=decl.profile or "ieee", args=_args_of(decl), ulps=decl.ulps,
                         input_dtype=input_dtype or decl.input_dtypes[0], device=decl.device, seed=seed, name=name,
                         supports=decl.harness_supports(), thorough=thorough, cap=cap)
    result.command = decl.command(input_dtype or decl.input_dtypes[0], max_examples=max_examples, seed=seed)
    return result


def _args_of(decl: KernelDeclaration) -> Any:
    if decl.args is None or isinstance(decl.args, (tuple, list)):
        return decl.args
    return decl.resolve(decl.args)


def with_changes(decl: KernelDeclaration, **changes: Any) -> KernelDeclaration:
    return dataclasses.replace(decl, **changes)

"""The fp8check pytest plugin (registered through the ``pytest11`` entry point).

- **Kernels a repository declares** (``[tool.fp8check]`` in its
  ``pyproject.toml``, a ``pytest_fp8check_kernels()`` hook in a
  ``conftest.py``, or ``--fp8check-kernel MODULE:FUNC --fp8check-format
  FMT``; see :mod:`fp8check.declarations`): the property suite shipped
  inside fp8check (:mod:`fp8check.suite.properties`) is collected and run on
  every one of them. Each test id names the kernel; each parameter carries
  the markers of its format (``fnuz``/``ocp``/``mx`` and the format's own),
  ``gpu`` for CUDA kernels and ``fp8check``, so ``pytest -m fnuz`` and ``-k
  KERNEL`` select. With nothing declared, fp8check adds no tests.
- ``--fp8check-builtin-adapters`` (ini ``fp8check_builtin_adapters = true``):
  the properties parametrized over fp8check's own adapters (torch, ml_dtypes,
  Triton), as fp8check's own ``properties/`` runs them.
- Declares the FP8 markers in every session, and the generic ones its own
  tests carry (``slow``, ``gpu``, ...) only once they are collected (see
  docs/suite.md, "The plugin as a guest"); the GPU targets it generates skip cleanly
  without a CUDA device; ``xfail(strict=True)`` naming the upstream issue
  where a real stack's divergence is a known upstream bug.
- ``--fp8check-json PATH`` writes every divergence found (exact counts,
  reproducers capped by ``--fp8check-max-listed``); under pytest-xdist
  each worker sends its findings to the controller, which merges them.
  ``--fp8check-report PATH`` renders the same checks as one HTML report.
- Hypothesis settings of fp8check's own, for fp8check's properties only:
  ``fp8check-ci`` (the default: fast, derandomized, no database) and
  ``fp8check-thorough`` (many more examples, random), chosen with
  ``--fp8check-hypothesis-profile``. They are never registered or loaded
  as Hypothesis profiles, so other tests in the same run keep whatever
  profile Hypothesis loaded for them (its own ``ci`` when ``$CI`` is set).

A good guest: importing this module imports pytest alone (no Hypothesis,
NumPy or torch), and nothing here changes other projects' tests. Every
option has an ini key of the same name with ``-`` as ``_`` (e.g.
``fp8check_kernel``).
"""

from __future__ import annotations

from typing import Any

import pytest

# The FP8 vocabulary, registered in every session: `pytest -m fnuz` is the point of the plugin, and no
# other project's typo guard is weakened by names this specific.
MARKERS = {
    "fnuz": "fnuz: checks of the AMD CDNA3 formats e4m3fnuz and e5m2fnuz",
    "ocp": "ocp: checks of the OCP formats e4m3fn and e5m2, and the OCP MX FP4/FP6 elements e2m1fn, e2m3fn, e3m2fn",
    "e4m3fn": "e4m3fn: checks of e4m3fn",
    "e4m3fnuz": "e4m3fnuz: checks of e4m3fnuz",
    "e5m2": "e5m2: checks of e5m2",
    "e5m2fnuz": "e5m2fnuz: checks of e5m2fnuz",
    "fp8check": "fp8check: a property of fp8check's shipped suite run on a declared kernel",
    "fp8check_hazards": "fp8check_hazards(*names): the hazard sets (fp8check.hazards.HAZARDS) a property "
    "covers; known upstream divergences on them make the property a strict xfail",
    "fp8check_nothing_declared": "fp8check_nothing_declared: a property of a kind nothing was declared for "
    "(deselected)",
}
# Generic names fp8check's own tests carry. Registered only when fp8check's own tests are collected, after
# the host's modules (see pytest_configure): a `--strict-markers` host keeps its collection error for an
# undeclared `@pytest.mark.slow` of its own, as without fp8check.
GENERIC_MARKERS = {
    "mx": "mx: checks of OCP MX formats and scales (e8m0fnu, fp4, fp6)",
    "gpu": "gpu: needs a CUDA device; skipped cleanly without one",
    "exhaustive": "exhaustive: sweeps a whole input space (all codes, all 16-bit inputs)",
    "slow": "slow: takes more than a few seconds",
    "training": "training: an FP8 training step (or the loss gates) of a model the repository declares "
    "([[tool.fp8check.training]])",
    "gate": "gate: a test tolerance the repository declares ([[tool.fp8check.gate]]) measured on fp8check's FP8 "
    "defect family: fails when it lets through a defect fp8check's own check rejects",
}

_OPTIONS = (
    ("kernel", "MODULE:FUNC", "a cast kernel to put through fp8check's property suite (with --fp8check-format), "
     "besides the kernels the repository declares"),
    ("format", "FMT", "the format the user kernel casts to (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, ...)"),
    ("profile", "NAME", "the profile the user kernel claims (default: ieee)"),
    ("input-dtype", "DTYPES", "comma-separated input dtypes fed to the user kernel (default: float32,float16,bfloat16)"),
    ("device", "DEVICE", "cpu or cuda: where the user kernel's input tensors live (default: cpu)"),
    ("json", "PATH", "write every divergence found to PATH (fp8check results JSON)"),
    ("report", "PATH", "write a self-contained HTML divergence report of every check to PATH"),
    ("max-listed", "N", "reproducers listed per check in the JSON (default 1000; 0 lists all; counts stay exact)"),
    ("hypothesis-profile", "NAME", "Hypothesis settings for fp8check's properties: fp8check-ci (default), "
     "fp8check-thorough, or a Hypothesis profile registered by name"),
    ("builtin-adapters", "BOOL", "also run the properties on fp8check's own adapters (torch, ml_dtypes, Triton): "
     "true/false (default false)"),
)

_STATE = pytest.StashKey[dict]()
# The fixtures the plugin parametrizes (see _targets).
_FIXTURES = ("fp8_target", "fp8_fnuz_target", "fp8_device_target", "fp8_decode_target", "fp8_float64_target",
             "fp8_float64_exact_target", "fp8_known_bug_target", "fp8_call_target", "fp8_quantizer_target",
             "fp8_fused_target", "fp8_training_target", "fp8_training_loss_target", "fp8_gate_target",
             "fp8_gemm_target")


class _HookSpecs:
    @pytest.hookspec
    def pytest_fp8check_kernels(self) -> Any:
        """Return the kernels fp8check checks in this repository: a list of
        :func:`fp8check.cast_kernel`, :func:`fp8check.quantizer_kernel` and
        :func:`fp8check.fused_kernel` declarations (in a ``conftest.py``)."""


# Declared decode and block dequant kernels (one check each, run whole like a quantizer's).
_FIXTURES += ("fp8_decoder_target", "fp8_dequant_target")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_HookSpecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fp8check", "fp8check: bit-exact FP8 properties")
    for name, metavar, help_text in _OPTIONS:
        group.addoption(f"--fp8check-{name}", dest=f"fp8check_{name.replace('-', '_')}", metavar=metavar,
                        default=None, help=help_text)
        parser.addini(f"fp8check_{name.replace('-', '_')}", help_text, default=None)


def _option(config: pytest.Config, name: str) -> str | None:
    key = f"fp8check_{name.replace('-', '_')}"
    value = config.getoption(key, None)
    if value is None:
        value = config.getini(key) or None
    return value


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS.values():
        config.addinivalue_line("markers", line)
    config.stash[_STATE] = {"collector": None, "targets": None, "declared": None, "generic_markers": False}
    config.stash[_STATE]["cli_kernel"] = _cli_declaration(config)
    _CONFIGS.append(config)
    # fp8check's own properties/ star-imports the suite while pytest collects; `pytest --markers` collects
    # nothing. Elsewhere the generic names wait until fp8check's own tests are collected (see
    # _register_generic_markers), after the host's modules, whose marks are checked as without fp8check.
    if _builtin(config) or (getattr(config.option, "markers", False) and _declarations(config)):
        _register_generic_markers(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config in _CONFIGS:
        _CONFIGS.remove(config)


# The sessions configured in this process, newest last: fp8check.kernel_tests() (called while a host module
# is imported) registers the generic markers of the session importing it.
_CONFIGS: list[pytest.Config] = []


def config_file(config: pytest.Config) -> tuple[Any, bool]:
    """The pyproject.toml whose [tool.fp8check] table this session reads (or None), and whether pytest
    itself read that file.

    The configuration file pytest used (``config.inipath``) when it is a pyproject.toml; beside a
    pytest.ini, tox.ini, setup.cfg or a ``-c`` file (or, with none, in the rootdir), the pyproject.toml
    there. A file pytest did not read is left alone unless it is valid TOML: only its [tool.fp8check]
    table, addressed to fp8check, is fp8check's to read (and to complain about)."""
    inipath = getattr(config, "inipath", None)
    if inipath is not None and inipath.name == "pyproject.toml":
        return inipath, True
    candidate = (inipath.parent if inipath is not None else config.rootpath) / "pyproject.toml"
    return (candidate, False) if candidate.is_file() else (None, False)


def _register_generic_markers(config: pytest.Config) -> None:
    """Register ``GENERIC_MARKERS`` in a session that runs fp8check's own tests (which carry them)."""
    state = config.stash.get(_STATE, None)
    if state is None or state["generic_markers"]:
        return
    state["generic_markers"] = True
    for line in GENERIC_MARKERS.values():
        config.addinivalue_line("markers", line)


def register_generic_markers_of_current_session() -> None:
    """For :func:`fp8check.kernel_tests`: its class carries fp8check's own tests (and their markers)."""
    if _CONFIGS:
        _register_generic_markers(_CONFIGS[-1])


def _collector(config: pytest.Config) -> Any:
    """The session's divergence collector, made when fp8check's first target is (imports NumPy)."""
    state = config.stash[_STATE]
    if state["collector"] is None:
        from fp8check.suite import Collector

        state["collector"] = Collector()
    return state["collector"]


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())




def _cli_declaration(config: pytest.Config) -> Any:
    """The kernel of ``--fp8check-kernel`` (checked at configure time: bad options are usage errors)."""
    spec = _option(config, "kernel")
    if not spec:
        return None
    from fp8check.casts.adapters.user import check_callable, wrap_callable
    from fp8check.declaration_reader import cast_kernel
    from fp8check.errors import FP8CheckError
    from fp8check.formats import get as get_format

    fmt_name = _option(config, "format")
    if not fmt_name:
        raise pytest.UsageError("fp8check: --fp8check-kernel needs --fp8check-format (or the ini key fp8check_format)")
    try:
        dtypes = tuple(d.strip() for d in (_option(config, "input-dtype") or "float32,float16,bfloat16").split(",")
                       if d.strip())
        decl = cast_kernel(spec, format=fmt_name, profile=_option(config, "profile") or "ieee",
                           input_dtypes=dtypes, device=_option(config, "device") or "cpu", name=spec)
        kernel = wrap_callable(decl.resolve(decl.kernel), name=spec, device=decl.device, profile=decl.profile,
                               input_dtypes=dtypes)
        check_callable(kernel, get_format(fmt_name), dtypes[0])
    except FP8CheckError as exc:
        raise pytest.UsageError(f"fp8check: {exc}") from None
    return decl


def _declarations(config: pytest.Config) -> list[Any]:
    """Every kernel this repository declares: --fp8check-kernel, [tool.fp8check] of the pyproject.toml
    :func:`config_file` names, and the pytest_fp8check_kernels hooks of its conftest.py files (read once,
    when first needed)."""
    state = config.stash[_STATE]
    if state["declared"] is not None:
        return state["declared"]
    from fp8check.declaration import KernelDeclaration
    from fp8check.declaration_reader import first_duplicate, from_pyproject
    from fp8check.errors import FP8CheckError

    out = [state["cli_kernel"]] if state["cli_kernel"] is not None else []
    try:
        pyproject, read_by_pytest = config_file(config)
        if pyproject is not None:
            declared, state["settings"] = from_pyproject(pyproject, invalid_ok=not read_by_pytest)
            out += declared
        for batch in config.hook.pytest_fp8check_kernels():
            for d in batch or ():
                if not isinstance(d, KernelDeclaration):
                    raise pytest.UsageError(f"fp8check: pytest_fp8check_kernels returned {d!r}; use "
                                            "fp8check.cast_kernel/quantizer_kernel/fused_kernel")
                out.append(d)
    except FP8CheckError as exc:
        raise pytest.UsageError(f"fp8check: {exc}") from None
    duplicate = first_duplicate([d.name for d in out])
    if duplicate:
        raise pytest.UsageError(f"fp8check: two declared kernels are named {duplicate!r}: give one a 'name'")
    state["declared"] = out
    return out


def _settings_tables(config: pytest.Config, key: str, what: str, read: Any, hint: str = "") -> list[Any]:
    """The declarations ``[[tool.fp8check.KEY]]`` tables of this repository's pyproject.toml make, each read by
    ``read(entry, root, where)``, cached; a bad table or two of one name is a usage error naming it."""
    state = config.stash[_STATE]
    if key in state:
        return state[key]
    _declarations(config)
    entries = (state.get("settings") or {}).get(key, [])
    out = []
    if entries:
        from fp8check.declaration_reader import first_duplicate
        from fp8check.errors import FP8CheckError

        where = str(config.rootpath / "pyproject.toml")
        try:
            out = [read(e, config.rootpath, where) for e in (entries if isinstance(entries, list) else [entries])]
        except FP8CheckError as exc:
            raise pytest.UsageError(f"fp8check: {exc}") from None
        duplicate = first_duplicate([d.name for d in out])
        if duplicate:
            raise pytest.UsageError(f"fp8check: two declared {what} are named {duplicate!r}{hint}")
    state[key] = out
    return out


def _training(config: pytest.Config) -> list[Any]:
    """The training models ``[[tool.fp8check.training]]`` of this repository's pyproject.toml declares."""
    def read(entry: Any, root: Any, where: str) -> Any:
        from fp8check.training.declared import training_from_table  # only where a table asks for it

        return training_from_table(entry, root, where)

    return _settings_tables(config, "training", "training models", read)


def _gates(config: pytest.Config) -> list[Any]:
    """The gates ``[[tool.fp8check.gate]]`` of this repository's pyproject.toml declares (against its recipes)."""
    def read(entry: Any, root: Any, where: str) -> Any:
        from fp8check.gates.declared import gate_from_table  # only where a table asks for it
        from fp8check.pyproject import repository_recipes

        return gate_from_table(entry, root, where, repository_recipes(root))

    return _settings_tables(config, "gate", "gates", read, ": give one a 'name'")


def _builtin(config: pytest.Config) -> bool:
    return str(_option(config, "builtin-adapters") or "").strip().lower() in ("1", "true", "yes", "on")


def _targets(config: pytest.Config) -> dict[str, list[Any]]:
    """The parameters of every fixture the plugin provides (built once per session)."""
    state = config.stash[_STATE]
    if state["targets"] is None:
        state["targets"] = build_targets(_declarations(config), builtin=_builtin(config), collector=_collector(config))
        from fp8check.suite.training import TrainingTarget

        models = _training(config)
        state["targets"]["fp8_training_target"] = [TrainingTarget(d, f) for d in models for f in d.formats]
        state["targets"]["fp8_training_loss_target"] = [TrainingTarget(d) for d in models if d.loss_steps]
        from fp8check.suite.gates import GateTarget

        state["targets"]["fp8_gate_target"] = [GateTarget(d) for d in _gates(config)]
    return state["targets"]


def _class_targets(config: pytest.Config, cls: type) -> dict[str, list[Any]]:
    """The parameters for a test class made by :func:`fp8check.kernel_tests` (built once per class)."""
    state = config.stash[_STATE]
    cache = state.setdefault("class_targets", {})
    if cls not in cache:
        cache[cls] = build_targets(cls.fp8check_declarations, builtin=False, collector=_collector(config))
    return cache[cls]


def build_targets(declared: Any, *, builtin: bool = False, collector: Any = None) -> dict[str, list[Any]]:
    """The targets of each fixture for ``declared`` kernels (and the built-in adapters when ``builtin``)."""
    from fp8check import formats, profiles
    from fp8check.casts import adapters
    from fp8check.casts.adapters.user import wrap_callable
    from fp8check.errors import FP8CheckError, KernelLoadError
    from fp8check.loader import without_triton
    from fp8check.suite import FNUZ, DeclaredTarget, DecodeTarget, Target, exact_variant, targets_for

    cast_targets, f64, all_kernels = [], [], []
    try:
        for d in declared:
            if d.kind != "cast" or d.isolate or d.requires:  # those are checked whole (a child process, a skip)
                continue
            try:
                fn = d.resolve(d.kernel)
            except KernelLoadError as exc:
                if without_triton(exc):  # its whole check (fp8_call_target) skips, saying why
                    continue
                raise
            kernel = wrap_callable(d.call_with_context(fn), name=d.name, device=d.device,
                                   profile=d.profile or "ieee", input_dtypes=d.input_dtypes)
            fmt, profile = formats.get(d.format), profiles.get(d.profile or "ieee")
            profile.resolve(fmt)
            cast_targets += [Target(kernel=kernel, fmt=fmt, input_dtype=t, profile=profile, collector=collector,
                                    declaration=d) for t in d.input_dtypes if t != "float64"]
            if "float64" in d.input_dtypes:
                f64.append(Target(kernel=kernel, fmt=fmt, input_dtype="float64", profile=profile, collector=collector,
                                  declaration=d))
        if builtin:
            builtins = adapters.builtin_kernels()
            all_kernels += builtins
            cast_targets += targets_for(builtins, collector=collector)
            f64 += [Target(kernel=k, fmt=f, input_dtype="float64", profile=k.profile_for(f), collector=collector)
                    for k in builtins if "float64" in k.input_dtypes for f in k.formats if k.supports(f)]
    except FP8CheckError as exc:
        raise pytest.UsageError(f"fp8check: {exc}") from None
    exact = [Target(kernel=t.kernel, fmt=t.fmt, input_dtype="float64", profile=exact_variant(t.profile),
                    collector=collector, declaration=t.declaration) for t in f64]
    decode = [DecodeTarget(kernel=k, fmt=f, collector=collector)
              for k in all_kernels if k.decode_fn is not None for f in k.formats if k.supports(f)]
    known = [t for t in cast_targets if any(k.affects is not None for k in t.known())]
    whole = [DeclaredTarget(d, t, collector) for d in declared if d.kind in ("cast", "fused")
             for t in d.input_dtypes]
    return {"fp8_target": cast_targets, "fp8_decode_target": decode,
                        "fp8_fnuz_target": [t for t in cast_targets if t.fmt.name in FNUZ],
                        "fp8_device_target": [t for t in cast_targets if t.kernel.device != "cpu"
                                              and t.input_dtype == "float32" and t.kernel.tensor_fn is not None],
                        "fp8_float64_target": f64, "fp8_float64_exact_target": exact,
                        "fp8_known_bug_target": known,
                        # declared decode and block dequant kernels, each checked whole
                        "fp8_decoder_target": [DeclaredTarget(d, None, collector) for d in declared
                                               if d.kind == "decode"],
                        "fp8_dequant_target": [DeclaredTarget(d, None, collector) for d in declared
                                               if d.kind == "dequant"],
                        "fp8_call_target": [t for t in whole if t.declaration.kind == "cast"],
                        "fp8_fused_target": [t for t in whole if t.declaration.kind == "fused"],
                        "fp8_quantizer_target": [DeclaredTarget(d, None, collector) for d in declared
                                                 if d.kind == "quantizer"]
                        + [DeclaredTarget(d, t, collector) for d in declared if d.kind == "static"  # per input dtype
                           for t in d.input_dtypes],
                        "fp8_training_target": [], "fp8_training_loss_target": [], "fp8_gate_target": [],
                        "fp8_gemm_target": [DeclaredTarget(d, None, collector) for d in declared if d.kind == "gemm"]}


def _format_marks(fmt_name: str, device: str) -> list[Any]:
    from fp8check.suite import FNUZ, MX, OCP

    marks = [getattr(pytest.mark, fmt_name)] if fmt_name in MARKERS else []
    if fmt_name in FNUZ:
        marks.append(pytest.mark.fnuz)
    if fmt_name in OCP:
        marks.append(pytest.mark.ocp)
    if fmt_name in MX:
        marks.append(pytest.mark.mx)
    if device != "cpu":
        marks.append(pytest.mark.gpu)
    return marks


def _is_own_test(function: Any, cls: Any) -> bool:
    """Whether a test is fp8check's: a property of the shipped suite (also star-imported into a module, or
    in a class :func:`fp8check.kernel_tests` made). Another project's test is never fp8check's to
    parametrize, whatever its parameter names."""
    if cls is not None and getattr(cls, "fp8check_declarations", None) is not None:
        return True
    return str(getattr(function, "__module__", "") or "").startswith("fp8check.suite.properties.")


def _host_owned(metafunc: pytest.Metafunc) -> set[str]:
    """The target names a test's own ``parametrize`` marks give values: those stay the test's."""
    out: set[str] = set()
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        out.update(names)
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = [n for n in _FIXTURES if n in metafunc.fixturenames]
    if not names:
        return
    cls = metafunc.cls
    if not _is_own_test(metafunc.function, cls):
        return
    owned = _host_owned(metafunc)
    names = [n for n in names if n not in owned]
    if not names:
        return
    _register_generic_markers(metafunc.config)
    if cls is not None and getattr(cls, "fp8check_declarations", None) is not None:
        targets = _class_targets(metafunc.config, cls)
    else:
        targets = _targets(metafunc.config)
    hazard_marker = metafunc.definition.get_closest_marker("fp8check_hazards")
    hazards = tuple(hazard_marker.args) if hazard_marker else None
    for name in names:
        params = []
        for t in targets[name]:
            if name == "fp8_gate_target":
                marks = [pytest.mark.gate, pytest.mark.fp8check]
                params.append(pytest.param(t, id=t.id, marks=marks))
                continue
            if name in ("fp8_training_target", "fp8_training_loss_target"):
                d = t.declaration
                marks = [pytest.mark.training, pytest.mark.fp8check]
                for f in ([t.fmt] if t.fmt else d.formats):
                    marks += [m for m in _format_marks(f, d.device) if m not in marks]
                params.append(pytest.param(t, id=t.id, marks=marks))
                continue
            if name in ("fp8_call_target", "fp8_quantizer_target", "fp8_fused_target", "fp8_decoder_target",
                        "fp8_dequant_target", "fp8_gemm_target"):
                marks = _format_marks(t.fmt_name, t.declaration.device) + [pytest.mark.fp8check]
                known = t.declaration.known_divergence
                if known is not None:  # a documented defect of the kernel's package; other divergences fail
                    marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=known["reason"]))
                params.append(pytest.param(t, id=t.id, marks=marks))
                continue
            if t.kernel.unpinned:  # a built-in adapter of a release or platform the registry does not cover
                marks = _format_marks(t.fmt.name, t.kernel.device) + [pytest.mark.skip(reason=t.kernel.unpinned)]
                params.append(pytest.param(t, id=t.id, marks=marks))
                continue
            if name == "fp8_decode_target":
                marks = _format_marks(t.fmt.name, t.kernel.device)
                known = t.kernel.known_divergences(t.fmt, None, "decode")
                if known:
                    marks.append(pytest.mark.xfail(strict=True, reason=known[0].reason))
                params.append(pytest.param(t, id=t.id, marks=marks))
                continue
            marks = _format_marks(t.fmt.name, t.kernel.device)
            if getattr(t, "declaration", None) is not None:
                marks.append(pytest.mark.fp8check)
            if name in ("fp8_target", "fp8_fnuz_target", "fp8_device_target"):
                broad = t.broad_known(hazards)
                if broad is not None:
                    marks.append(pytest.mark.xfail(strict=True, reason=broad.reason))
            elif name == "fp8_known_bug_target":
                reasons = "; ".join(k.reason for k in t.known() if k.affects is not None)
                marks.append(pytest.mark.xfail(strict=True, reason=reasons))
            elif name == "fp8_float64_exact_target":
                reason = _float64_reason(t)
                if reason:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
            params.append(pytest.param(t, id=t.id, marks=marks))
        if not params:  # nothing of this kind declared: one placeholder, deselected at collection's end (pytest's
            # empty parameter set would be a skip per test, or a collection error under fail_at_collect)
            params = [pytest.param(None, id="none", marks=pytest.mark.fp8check_nothing_declared)]
        metafunc.parametrize(name, params)


def _float64_reason(target: Any) -> str:
    """The known upstream bug that keeps ``target``'s kernel from rounding float64 once ('' if none)."""
    known = target.kernel.known_divergences(target.fmt, "float64", "exact")
    return "; ".join(k.reason for k in known)


@pytest.fixture
def fp8_settings(request: pytest.FixtureRequest) -> Any:
    """Hypothesis settings for a property: ``--fp8check-hypothesis-profile``
    (``fp8check-ci`` by default); no shrinking where a strict xfail is already
    known to fail (shrinking a broken stack only costs time), nor for a kernel
    declared to run in Triton's interpreter (each shrink step is an interpreted
    launch; the failure's record still lists the smallest divergent inputs)."""
    from fp8check.errors import FP8CheckError
    from fp8check.suite import hypothesis_settings

    target = request.getfixturevalue("fp8_target") if "fp8_target" in request.fixturenames else None
    interpreted = bool(getattr(getattr(target, "declaration", None), "triton_target", None))
    try:
        return hypothesis_settings(_option(request.config, "hypothesis-profile"),
                                   shrink=request.node.get_closest_marker("xfail") is None and not interpreted)
    except FP8CheckError as exc:
        raise pytest.UsageError(f"fp8check: {exc}") from None


@pytest.hookimpl(tryfirst=True)  # before -m and -k deselect
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # A host whose own collection failed stops there (as without fp8check): the suite is not added to it.
    stopping = session.testsfailed and not config.getoption("continue_on_collection_errors", False)
    if not stopping and (_declarations(config) or _training(config) or _gates(config)):
        _check_importable(_declarations(config))  # once, before the suite is collected over them
        _register_generic_markers(config)  # after the host's own modules: their marks were checked without
        # A repository that already collects the suite (a star-import of it) does not get it twice.
        collected = {getattr(item, "function", None) for item in items}
        items.extend(x for x in _shipped_suite_items(session) if getattr(x, "function", None) not in collected)
    placeholders = [item for item in items if item.get_closest_marker("fp8check_nothing_declared")]
    if placeholders:  # the suite's tests of a kind nothing was declared for: not run, said as deselected
        items[:] = [item for item in items if not item.get_closest_marker("fp8check_nothing_declared")]
        config.hook.pytest_deselected(items=placeholders)
    # Only fp8check's own targets: another project's `gpu` marker means what it says there.
    gpu_items = [item for item in items if item.get_closest_marker("gpu") and _target_of(item) is not None]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (none found)")
        for item in gpu_items:
            item.add_marker(skip)


def _check_importable(declared: list[Any]) -> None:
    """Every declared kernel (and its reference and args) imports: one usage error, a line per declaration
    that does not, rather than a collection error per test module. A kernel that needs Triton where Triton is
    not installed is left to its test, which skips; an isolated kernel is imported in its own process."""
    from fp8check.errors import KernelLoadError
    from fp8check.loader import without_triton
    from fp8check.running import missing_requirement

    problems = []
    for d in declared:
        if d.isolate or missing_requirement(d):
            continue
        for what in (d.kernel, d.reference, d.args):
            if not isinstance(what, str):
                continue
            try:
                d.resolve(what)
            except KernelLoadError as exc:
                if not without_triton(exc):
                    problems.append(f"fp8check: {d.label} ([[tool.fp8check.{d.kind}]]): {exc}")
                break
    if problems:
        raise pytest.UsageError(*problems)


def _shipped_suite_items(session: pytest.Session) -> list[pytest.Item]:
    """The shipped property suite's tests, collected from inside the installed package."""
    from pathlib import Path

    import fp8check.suite.properties as shipped

    out: list[pytest.Item] = []
    for path in sorted(Path(shipped.__file__).parent.glob("test_*.py")):
        module = pytest.Module.from_parent(session, path=path, nodeid=f"fp8check-suite/{path.name}")
        out.extend(x for x in session.genitems(module) if isinstance(x, pytest.Item))
    return out


def _target_of(item: pytest.Item) -> Any:
    """The fp8check target an item of fp8check's own tests runs on (None for every other test)."""
    if not _is_own_test(getattr(item, "function", None), getattr(item, "cls", None)):
        return None
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec else {}
    return next((params[n] for n in _FIXTURES if n in params), None)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """After a kernel's fault left this process's CUDA context unusable (:mod:`fp8check.device_faults`), the
    remaining GPU targets skip with the fault as the reason (an isolated check runs in a context of its own)."""
    import sys

    faults = sys.modules.get("fp8check.device_faults")
    if faults is None or faults.lost() is None or not item.get_closest_marker("gpu"):
        return
    target = _target_of(item)
    if target is None or getattr(getattr(target, "declaration", None), "isolate", False):
        return
    pytest.skip(faults.lost_reason())


# Old-style wrappers (pluggy's hookwrapper): they work with every pytest and pluggy the metadata allows;
# new-style ones (wrapper=True) need pluggy 1.2.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    if _target_of(item) is None:
        yield
        return
    from fp8check.strategies import without_local_constants

    with without_local_constants():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and _target_of(item) is not None:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec else {}
        target = next((params[n] for n in _FIXTURES if n in params and hasattr(params[n], "key")), None)
        xfail = item.get_closest_marker("xfail")
        reason = xfail.kwargs.get("reason", "") if xfail else ""
        if target is not None and hasattr(target, "key"):
            _collector(item.config).note_test(
                target.key, failed=report.failed or bool(getattr(report, "wasxfail", "")), reason=reason)
        decode = params.get("fp8_decode_target")
        if decode is not None and hasattr(decode, "decode_key"):
            _collector(item.config).note_decode_test(decode.decode_key, reason)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    if state["collector"] is None:  # no fp8check target ran in this process
        return
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: send findings to the controller
        workeroutput["fp8check"] = state["collector"].to_state()
        return
    path = _option(config, "json")
    html_path = _option(config, "report")
    if not path and not html_path:
        return
    from fp8check.results import dump_results, environment

    listed = _option(config, "max-listed")
    cap = int(listed) if listed not in (None, "") else 1000
    checks = state["collector"].results(cap=cap if cap > 0 else None)
    env = environment()
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    diverged = sum(not c.passed for c in checks)
    if path:
        dump_results(path, checks, env)
        if reporter is not None:
            reporter.write_line(f"fp8check: wrote {len(checks)} checks ({diverged} diverged) to {path}")
    if html_path:
        from fp8check.errors import FP8CheckError
        from fp8check.report import Source, divergence_report, write_html

        import shlex

        source = Source(name=shlex.join(["pytest", *map(str, config.invocation_params.args)]), environment=env,
                        checks=checks)
        try:
            size = write_html(html_path, divergence_report([source]), what="--fp8check-report")
        except FP8CheckError as exc:
            if reporter is not None:
                reporter.write_line(f"fp8check: {exc}", red=True)
            return
        if reporter is not None:
            reporter.write_line(f"fp8check: wrote the HTML report of {len(checks)} checks ({diverged} diverged) "
                                f"to {html_path} ({size / 1024:,.0f} KB)")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: merge a finished worker's findings (controller side)."""
    output = getattr(node, "workeroutput", None) or {}
    state = node.config.stash.get(_STATE, None)
    if state is None or "fp8check" not in output:
        return
    _collector(node.config).merge_state(output["fp8check"])

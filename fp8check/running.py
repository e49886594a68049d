"""The runner of declarations: the check of a :class:`~fp8check.declaration.KernelDeclaration`.

:func:`run_declaration` runs the runner its kind's row names
(:data:`fp8check.declaration.KERNEL_KINDS`: ``run_cast``, ``run_quantizer``,
``run_fused``, ``run_static`` here), in a child process when the declaration
asks to be isolated (:mod:`fp8check.isolation`, given this module's
``run_declaration`` as the entry point to run there). A Triton kernel with a
target runs in the faithful interpreter, once per autotune config, its faults
and the target's approximate divisions added to its result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from typing import Any, Callable, Iterator

from fp8check import device_faults
from fp8check.declaration import KernelDeclaration, KernelKind

__all__ = ["run_declaration", "run_cast_declaration", "run_cast", "run_quantizer", "run_fused", "run_static",
           "run_decode", "run_dequant",
           "missing_requirement", "fault_result", "merge_config_runs", "add_faults", "triton_watch", "ENTRY_POINT",
           "run_gemm"]

ENTRY_POINT = f"{__name__}:run_declaration"  # what an isolated check runs in its child process


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
    kw = {"input_dtype": input_dtype, "max_examples": max_examples, "seed": seed, "thorough": thorough, "cap": cap}
    if decl.isolate if isolate is None else isolate:
        from fp8check.isolation import run_isolated

        return run_isolated(decl, entry=ENTRY_POINT, **kw)
    device_faults.require_usable(decl.device, decl.label)
    try:
        return _runner(decl.kind_row)(decl, **kw)
    except device_faults.DeviceFaultError as exc:  # a check with no partial result of its own (fused, static)
        return fault_result(decl, dataclasses.replace(exc.fault, kernel=decl.name), input_dtype=input_dtype,
                            max_examples=max_examples, seed=seed)


def _runner(kind: KernelKind) -> Callable[..., Any]:
    module, _, name = kind.runner.partition(":")
    return getattr(importlib.import_module(module), name)


def run_cast_declaration(decl: KernelDeclaration, *, input_dtype: str | None = None, max_examples: int = 200,
                         seed: int = 0, thorough: bool = True, cap: int | None = 100) -> tuple[Any, Any]:
    """Run the check of a declared cast on one input dtype: the result and its full divergence record
    (:class:`~fp8check.casts.engine.Divergences`, which the pytest suite merges with its properties')."""
    from fp8check.casts import engine
    from fp8check.casts.adapters.user import wrap_callable

    device_faults.require_usable(decl.device, decl.label)
    dtype = input_dtype or decl.input_dtypes[0]

    def once() -> tuple[Any, Any]:
        kernel = wrap_callable(decl.call_with_context(decl.resolve(decl.kernel)), name=decl.name,
                               device=decl.device, profile=decl.profile or "ieee", input_dtypes=decl.input_dtypes)
        with decl.context(), triton_watch(decl) as noted:
            result, record = engine.run_check(kernel, decl.format, decl.profile or "ieee", input_dtype=dtype,
                                              max_examples=max_examples, seed=seed, thorough=thorough,
                                              supports=decl.harness_supports(), cap=cap)
        result.command = decl.command(dtype, max_examples=max_examples, seed=seed)
        if "float64" not in decl.input_dtypes:  # issue 32: a verdict says which input dtypes it did not cover
            from fp8check.checking import note_unchecked_dtypes

            note_unchecked_dtypes(result, {"float64": "not checked: add float64 to input-dtypes (--input-dtype) "
                                                      "to check it"})
        noted(result)
        return result, record

    return _each_config(decl, once)


def run_cast(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared cast on one input dtype (:func:`run_cast_declaration` without its record)."""
    return run_cast_declaration(decl, **kw)[0]


def run_quantizer(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared quantizer (:func:`fp8check.quantizers.conformance.check_quantizer`)."""
    return _watched(decl, _check_quantizer, **kw)


def run_static(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared static-scale quantizer on one input dtype
    (:func:`fp8check.quantizers.static.check_static_quantizer`)."""
    return _watched(decl, _check_static, **kw)


def run_fused(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared fused kernel on one input dtype (:func:`fp8check.casts.fused.check_fused`)."""
    return _watched(decl, _check_fused, **kw)


def run_decode(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared decode kernel: every code (:func:`fp8check.casts.decoding.check_decode`)."""
    return _watched(decl, _check_decode, **kw)


def run_dequant(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared block dequant kernel (:func:`fp8check.quantizers.dequant.check_dequant`)."""
    return _watched(decl, _check_dequant, **kw)


def _watched(decl: KernelDeclaration, check: Callable[..., Any], **kw: Any) -> Any:
    """``check(decl, fn, **kw)`` of the declared kernel ``fn``, once per autotune config of a Triton kernel
    with a target, each run's interpreter findings added to its result."""
    def once() -> tuple[Any, None]:
        with triton_watch(decl) as noted:
            result = check(decl, decl.call_with_context(decl.resolve(decl.kernel)), **kw)
        noted(result)
        return result, None

    return _each_config(decl, once)[0]


def _check_quantizer(decl: KernelDeclaration, fn: Callable[..., Any], *, input_dtype: str | None, max_examples: int,
                     seed: int, thorough: bool, cap: int | None) -> Any:
    from fp8check.quantizers.conformance import check_quantizer

    result = check_quantizer(fn, decl.recipe, fmt=decl.format, profile=decl.profile, device=decl.device,
                             max_examples=max_examples, seed=seed, kernel_name=decl.name, thorough=thorough,
                             supports=decl.harness_supports(), args=_args_of(decl),
                             precast=decl.resolve(decl.reference), ulps=decl.ulps, cap=cap,
                             triton_target=decl.triton_target)
    result.command = decl.command(max_examples=max_examples, seed=seed)
    _note_quantizer_dtypes(result)
    return result


def _note_quantizer_dtypes(result: Any) -> None:
    """A quantizer's verdict names the input dtypes its check does not draw (issue 32: every dtype a kernel
    accepts is checked, or its verdict says which were not)."""
    from fp8check.checking import note_unchecked_dtypes
    from fp8check.quantizers.cases import QUANTIZER_INPUT_DTYPES

    drawn = set(result.input_dtype.split(","))
    note_unchecked_dtypes(result, {
        d: ("not checked: fp8check draws quantizer inputs of " + " and ".join(QUANTIZER_INPUT_DTYPES) + " only"
            if d not in QUANTIZER_INPUT_DTYPES else "not checked: not in the kernel's declared input dtypes")
        for d in ("float32", "float16", "bfloat16", "float64") if d not in drawn})


def _check_static(decl: KernelDeclaration, fn: Callable[..., Any], *, input_dtype: str | None, max_examples: int,
                  seed: int, thorough: bool, cap: int | None) -> Any:
    from fp8check.quantizers.static import check_static_quantizer

    dtype = input_dtype or decl.input_dtypes[0]
    result = check_static_quantizer(fn, format=decl.format, profile=decl.profile or "satfinite",
                                    apply=decl.apply or "divide", scale=decl.scale, input_dtype=dtype,
                                    device=decl.device, seed=seed, name=decl.name, ulps=decl.ulps, cap=cap,
                                    supports=decl.harness_supports(), max_examples=min(max_examples, 20),
                                    triton_target=decl.triton_target)
    result.command = decl.command(dtype, max_examples=max_examples, seed=seed)
    return result


def _check_fused(decl: KernelDeclaration, fn: Callable[..., Any], *, input_dtype: str | None, max_examples: int,
                 seed: int, thorough: bool, cap: int | None) -> Any:
    from fp8check.casts.fused import check_fused

    dtype = input_dtype or decl.input_dtypes[0]
    result = check_fused(fn, reference_fn=decl.resolve(decl.reference), format=decl.format,
                         profile=decl.profile or "ieee", args=_args_of(decl), ulps=decl.ulps, input_dtype=dtype,
                         device=decl.device, seed=seed, name=decl.name, supports=decl.harness_supports(),
                         thorough=thorough, cap=cap)
    result.command = decl.command(dtype, max_examples=max_examples, seed=seed)
    return result


def _check_decode(decl: KernelDeclaration, fn: Callable[..., Any], *, input_dtype: str | None, max_examples: int,
                  seed: int, thorough: bool, cap: int | None) -> Any:
    from fp8check.casts.decoding import check_decode

    result = check_decode(fn, decl.format, code_dtypes=decl.code_dtypes, output_dtype=decl.output_dtype,
                          device=decl.device, name=decl.name, triton_target=decl.triton_target)
    result.command = decl.command()
    return result


def _check_dequant(decl: KernelDeclaration, fn: Callable[..., Any], *, input_dtype: str | None, max_examples: int,
                   seed: int, thorough: bool, cap: int | None) -> Any:
    from fp8check.quantizers.dequant import check_dequant

    result = check_dequant(fn, decl.format, block=decl.block_shape, apply=decl.apply or "multiply",
                           code_dtypes=decl.code_dtypes, output_dtype=decl.output_dtype, device=decl.device,
                           name=decl.name, seed=seed, cap=cap)
    result.command = decl.command(seed=seed)
    return result


def _args_of(decl: KernelDeclaration) -> Any:
    if decl.args is None or isinstance(decl.args, (tuple, list)):
        return decl.args
    return decl.resolve(decl.args)


@contextlib.contextmanager
def triton_watch(decl: KernelDeclaration) -> Iterator[Callable[[Any], None]]:
    """Around a run in the faithful interpreter: yields a function that adds to a result the note on
    float32 divisions the target compiles approximately (the interpreter divides exactly) and the
    kernel faults the interpreter found (out-of-bounds, uninitialised reads, races, false hints)."""
    if not decl.triton_target:
        yield lambda result: None
        return
    import fp8check.triton as ft
    from fp8check.triton import sanitizer

    with ft.watch() as w, sanitizer.collect() as found:
        def finish(result: Any) -> None:
            result.add_note(w.division_note)
            if not result.passed:
                result.add_note(w.known_division_note_for(_declared_divisions(decl, result)))
            if result.categories.get("nonfinite") or result.categories.get("nan"):
                result.add_note(w.nan_clamp_note)
            add_faults(result, found.faults)

        yield finish


def _declared_divisions(decl: KernelDeclaration, result: Any) -> dict[str, str]:
    """How the declaration says the kernel divides: a static kernel's ``apply``, a quantizer recipe's ``apply``
    and ``scale-divide`` (as its check resolved them); nothing for the other kinds."""
    if decl.kind == "static":
        return {"apply": decl.apply or "divide"}
    recipe = result.extra.get("recipe") or {}
    if decl.kind != "quantizer" or "scale_divide" not in recipe:
        return {}
    apply = recipe["apply"]  # Recipe.to_dict's element_op: every recipe has one
    return {**({"apply": apply} if apply != "multiply" else {}), "scale-divide": recipe["scale_divide"]}


def fault_result(decl: KernelDeclaration, fault: Any, *, input_dtype: str | None = None,
                 max_examples: int | None = None, seed: int | None = None) -> Any:
    """A failed :class:`~fp8check.results.CheckResult` of ``decl`` whose one finding is ``fault`` (a
    :class:`~fp8check.device_faults.DeviceFault`): what a check that ended at its fault gives."""
    from fp8check.results import CheckResult

    result = CheckResult(kernel=decl.name, format=decl.fmt_name, profile=decl.profile or "", passed=False,
                         checked=0, kind=decl.kind_row.result_kind, input_dtype=decl.result_dtype(input_dtype),
                         device=decl.device, seed=seed,
                         command=decl.command(decl.command_dtype(input_dtype), max_examples=max_examples, seed=seed))
    return fault.apply(result)


def missing_requirement(decl: KernelDeclaration) -> str:
    """Why ``decl`` cannot be checked here ("" when it can): a module of ``requires`` that does not import."""
    for module in decl.requires:
        try:
            importlib.import_module(module)
        except Exception as exc:  # an import runs a package's code: anything can go wrong
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"{decl.label} needs {module}, which cannot be imported here ({type(exc).__name__}: {first})"
    return ""




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


def run_gemm(decl: KernelDeclaration, **kw: Any) -> Any:
    """The check of a declared scaled FP8 GEMM (:func:`fp8check.matmul.gemm.check_gemm`) under its Triton
    target's tensor cores, or on a CUDA device under that device's (:func:`device_target`)."""
    return _watched(decl, _check_gemm, **kw)


def _check_gemm(decl: KernelDeclaration, fn: Callable[..., Any], *, input_dtype: str | None, max_examples: int,
                seed: int, thorough: bool, cap: int | None) -> Any:
    from fp8check.matmul.gemm import check_gemm

    result = check_gemm(fn, recipe=decl.recipe, format=decl.format, target=decl.triton_target or device_target(decl),
                        epilogue=decl.epilogue, args=_args_of(decl), name=decl.name, seed=seed, cap=cap,
                        supports=decl.harness_supports())
    result.command = decl.command(seed=seed)
    return result


def device_target(decl: KernelDeclaration) -> str:
    """The tensor-core model of the GPU a declared GEMM without a Triton target runs on (sm89, sm90, sm100,
    gfx942, gfx950); a CPU has none."""
    from fp8check.errors import InvalidValueError
    from fp8check.triton import targets

    if decl.device != "cuda":
        raise InvalidValueError(f"{decl.label}: a GEMM kernel on the CPU needs 'triton-target' (the tensor cores "
                                "whose arithmetic judges it)")
    return targets.of_device(decl.device)
"""The record of one declared kernel: :class:`KernelDeclaration`, the kinds of kernel, and the rules its keys obey.

A declaration is a plain frozen dataclass. :func:`declare` turns what a
repository wrote (a ``[[tool.fp8check.KIND]]`` table, a conftest hook's
call) into one, normalising its keys first; the dataclass then only checks
them, each key by its rule in :data:`KEY_RULES`. A kind of kernel is one row
of :data:`KERNEL_KINDS`: its table name, the kind its results carry, the
keys it needs, the runner that checks it (a ``MODULE:FUNC`` entry point of
:mod:`fp8check.running`) and the arguments of its reproduce line. Reading
pyproject tables is :mod:`fp8check.declaration_reader`'s, running a check
:mod:`fp8check.running`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from fp8check import formats, profiles
from fp8check.errors import InvalidValueError
from fp8check.loader import load_callable
from fp8check.pyproject import repository_recipes
from fp8check.results import CATEGORIES

__all__ = ["KernelDeclaration", "KernelKind", "KERNEL_KINDS", "KINDS", "KEY_RULES", "DEFAULT_INPUT_DTYPES",
           "declare", "recipe_arguments", "default_name"]

DEFAULT_INPUT_DTYPES = ("float32", "float16", "bfloat16")  # a cast's, a fused kernel's, a static quantizer's
_SUPPORTS_KEYS = {"input_dtypes", "contiguous_only", "numel_multiple_of", "max_numel", "k_multiple_of"}
_GEMM_SUPPORTS_KEYS = {"contiguous_only", "k_multiple_of"}  # the ones a GEMM's check reads


@dataclass(frozen=True)
class KernelKind:
    """One kind of declared kernel, as data: adding a kind is adding a row to :data:`KERNEL_KINDS`."""

    table: str  # [[tool.fp8check.TABLE]], and KernelDeclaration.kind
    result_kind: str  # the kind of its CheckResult (and of a crash's or a fault's)
    runner: str  # MODULE:FUNC: runner(decl, *, input_dtype, max_examples, seed, thorough, cap) -> CheckResult
    arguments: Callable[[KernelDeclaration], list[str]]  # its part of the reproduce line
    required: tuple[tuple[str, str], ...] = ()  # (key, the error's text after "LABEL: ") for each key it needs
    per_input_dtype: bool = True  # checked once per input dtype (a quantizer: every dtype in one check)
    unread: tuple[str, ...] = ()  # keys its check never reads: given, they are an error, not silently ignored


def _quantizer_arguments(d: KernelDeclaration) -> list[str]:
    parts = ["--kind", "quantize"] + recipe_arguments(d.recipe, d.declared_in)
    if "input_dtypes" in d.supports:
        parts += ["--input-dtype", ",".join(d.supports["input_dtypes"])]
    if d.format:
        parts += ["--format", d.format]
    return parts + _ulps(d)


def _static_arguments(d: KernelDeclaration) -> list[str]:
    parts = ["--kind", "static", "--format", str(d.format), "--profile", d.profile or "ieee",
             "--apply", d.apply or "divide"]
    if d.scale is not None:
        parts += ["--scale", repr(float(d.scale))]
    return parts + _ulps(d)


def _cast_arguments(d: KernelDeclaration) -> list[str]:
    return ["--format", str(d.format), "--profile", d.profile or "ieee"]


def _fused_arguments(d: KernelDeclaration) -> list[str]:
    parts = _cast_arguments(d) + ["--kind", "fused", "--reference", _spec(d.reference)]
    if d.args is not None:
        parts += ["--args", _spec(d.args)]
    return parts + _ulps(d)


def _decode_arguments(d: KernelDeclaration) -> list[str]:
    parts = ["--kind", "decode", "--format", str(d.format)]
    if d.code_dtypes:
        parts += ["--code-dtype", ",".join(d.code_dtypes)]
    if d.output_dtype:
        parts += ["--output-dtype", d.output_dtype]
    return parts


def _dequant_arguments(d: KernelDeclaration) -> list[str]:
    parts = ["--kind", "dequant", "--format", str(d.format), "--block", "x".join(str(b) for b in d.block_shape),
             "--apply", d.apply or "multiply"]
    if d.code_dtypes:
        parts += ["--code-dtype", ",".join(d.code_dtypes)]
    if d.output_dtype:
        parts += ["--output-dtype", d.output_dtype]
    return parts


def _gemm_arguments(d: KernelDeclaration) -> list[str]:
    parts = ["--kind", "gemm", "--recipe", str(d.recipe), "--format", str(d.format)]
    if d.epilogue:
        parts += ["--epilogue", d.epilogue]
    if d.args is not None:
        parts += ["--args", _spec(d.args)]
    return parts


def _ulps(d: KernelDeclaration) -> list[str]:
    return ["--ulps", str(d.ulps)] if d.ulps else []


_NEEDS_FORMAT = "a {kind} kernel needs 'format'"
KERNEL_KINDS: dict[str, KernelKind] = {k.table: k for k in (
    KernelKind("cast", "cast", "fp8check.running:run_cast", _cast_arguments, (("format", _NEEDS_FORMAT),)),
    KernelKind("quantizer", "quantize", "fp8check.running:run_quantizer", _quantizer_arguments,
               (("recipe", "a quantizer needs 'recipe'"),), per_input_dtype=False),
    KernelKind("fused", "fused", "fp8check.running:run_fused", _fused_arguments,
               (("format", _NEEDS_FORMAT), ("reference", "a fused kernel needs 'reference' (the values before its "
                                                         "cast)"))),
    KernelKind("static", "static_quantize", "fp8check.running:run_static", _static_arguments,
               (("format", _NEEDS_FORMAT),)),
    # codes -> values: every code, each way the kernel takes them, in one check
    KernelKind("decode", "decode", "fp8check.running:run_decode", _decode_arguments, (("format", _NEEDS_FORMAT),),
               per_input_dtype=False, unread=("recipe", "reference", "args", "ulps", "profile", "input_dtypes")),
    # (codes, block scales) -> values: every code in whole and ragged blocks
    KernelKind("dequant", "dequant", "fp8check.running:run_dequant", _dequant_arguments,
               (("format", _NEEDS_FORMAT),), per_input_dtype=False,
               unread=("recipe", "reference", "args", "ulps", "profile", "input_dtypes")),
    KernelKind("gemm", "gemm", "fp8check.running:run_gemm", _gemm_arguments,
               (("format", _NEEDS_FORMAT), ("recipe", "a GEMM kernel needs 'recipe' (its scales: tensorwise, rowwise, "
                                                      "block-1x128-128x128, block-128x128, mx)")),
               per_input_dtype=False, unread=("reference", "ulps", "profile", "input_dtypes")),
)}
KINDS = tuple(KERNEL_KINDS)


# -- the rules of the keys: each checks one key of a declaration (already normalised) --------------------


def _check_kind(d: KernelDeclaration) -> None:
    if d.kind not in KERNEL_KINDS:
        raise InvalidValueError(f"kernel kind {d.kind!r}: use one of {', '.join(KINDS)}")
    if not d.kernel:
        raise InvalidValueError(f"a declared {d.kind} kernel needs 'kernel = \"MODULE:FUNC\"'")
    for key, text in d.kind_row.required:
        value = getattr(d, key)
        if value is None or (isinstance(value, str) and not value):
            raise InvalidValueError(f"{d.label}: {text.format(kind=d.kind)}")


def _check_unread_keys(d: KernelDeclaration) -> None:
    """A key the kind's check never reads (a recipe on a decode kernel, a reference on a GEMM) is an error."""
    for key in d.kind_row.unread:
        value = getattr(d, key)
        default = DEFAULT_INPUT_DTYPES if key == "input_dtypes" else (0 if key == "ulps" else None)
        if value != default:
            raise InvalidValueError(f"{d.label}: '{key.replace('_', '-')}' is not read by a {d.kind} kernel's check "
                                    "(see docs/kernel-repo.md for its keys)")


def _check_recipe(d: KernelDeclaration) -> None:
    if d.kind == "quantizer":
        from fp8check import quantizers

        quantizers.get(d.recipe)  # an unknown name: one clear error now, not at run time


def _check_static_keys(d: KernelDeclaration) -> None:
    if d.kind == "static":
        from fp8check.quantizers.static import check_options

        check_options(d.apply, d.scale, d.label)
    elif d.kind == "dequant":  # its apply: how it applies its block scales; no static scale
        _check_dequant_keys(d)
    elif d.apply is not None or d.scale is not None:
        raise InvalidValueError(f"{d.label}: 'apply' and 'scale' are for static-scale quantizers "
                                "([[tool.fp8check.static]]); a quantizer's recipe says how it applies its scale")


def _check_dequant_keys(d: KernelDeclaration) -> None:
    from fp8check.quantizers.dequant import APPLY, block_of

    if d.scale is not None:
        raise InvalidValueError(f"{d.label}: 'scale' is for static-scale quantizers; a dequant kernel takes its "
                                "scales as an argument")
    if d.apply is not None and d.apply not in APPLY:
        raise InvalidValueError(f"{d.label}: apply = {d.apply!r}: a dequant kernel applies its scale by "
                                f"{', '.join(APPLY)}")
    if d.block is not None:  # default: DEFAULT_BLOCK (block_shape)
        block_of(d.block, d.label)


def _check_decode_keys(d: KernelDeclaration) -> None:
    from fp8check.casts.decoding import check_code_dtypes, check_output_dtype

    if d.kind not in ("decode", "dequant") and (d.code_dtypes or d.output_dtype):
        raise InvalidValueError(f"{d.label}: 'code-dtypes' and 'output-dtype' are for decode and dequant kernels "
                                "([[tool.fp8check.decode]], [[tool.fp8check.dequant]])")
    if d.kind != "dequant" and d.block is not None:
        raise InvalidValueError(f"{d.label}: 'block' is for dequant kernels ([[tool.fp8check.dequant]])")
    check_code_dtypes(d.code_dtypes, d.label)
    check_output_dtype(d.output_dtype, d.label)


def _check_gemm_keys(d: KernelDeclaration) -> None:
    if d.kind != "gemm":
        if d.epilogue is not None:
            raise InvalidValueError(f"{d.label}: 'epilogue' is for GEMM kernels ([[tool.fp8check.gemm]])")
        return
    from fp8check.matmul.gemm import check_epilogue, default_epilogue, gemm_recipe

    check_epilogue(gemm_recipe(d.recipe), d.epilogue or default_epilogue(d.recipe))
    if not d.triton_target and d.device != "cuda":  # checked now, not when its test runs
        raise InvalidValueError(f"{d.label}: a GEMM kernel on the CPU needs 'triton-target' (--triton-target: the "
                                "tensor cores whose arithmetic judges it, sm89, sm90, sm100, gfx942 or gfx950); on a "
                                "CUDA device (device = \"cuda\", --device cuda), the GPU's own")


def _check_device(d: KernelDeclaration) -> None:
    if d.device not in ("cpu", "cuda"):
        raise InvalidValueError(f"{d.label}: device {d.device!r}: use cpu or cuda")


def _check_input_dtypes(d: KernelDeclaration) -> None:
    from fp8check import inputs

    for dtype in d.input_dtypes:
        inputs.source_format(dtype)


def _check_ulps(d: KernelDeclaration) -> None:
    if d.ulps < 0:
        raise InvalidValueError(f"{d.label}: ulps must be >= 0")


def _check_max_examples(d: KernelDeclaration) -> None:
    n = d.max_examples
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise InvalidValueError(f"{d.label}: max-examples = {n!r}: give an integer >= 0")


def _check_isolate(d: KernelDeclaration) -> None:
    if not isinstance(d.isolate, bool):
        raise InvalidValueError(f"{d.label}: isolate = {d.isolate!r}: give true or false")


def _known_divergence(value: Any) -> dict[str, Any] | None:
    """``known-divergence`` as ``{"categories": (...), "reason": "..."}``, or None when it is not one."""
    kd = {str(k).replace("-", "_"): v for k, v in dict(value).items()}
    cats, reason = kd.get("categories"), kd.get("reason")
    if (set(kd) - {"categories", "reason"} or not isinstance(reason, str) or not reason.strip()
            or not isinstance(cats, (list, tuple)) or not cats or set(cats) - set(CATEGORIES)):
        return None
    return {"categories": tuple(cats), "reason": reason}


def _check_known_divergence(d: KernelDeclaration) -> None:
    if d.known_divergence is not None and _known_divergence(d.known_divergence) is None:
        raise InvalidValueError(f"{d.label}: known-divergence = {d.known_divergence!r}: give "
                                "{categories = [...], reason = \"...\"} with categories of "
                                f"{', '.join(CATEGORIES)}")


def _check_format(d: KernelDeclaration) -> None:
    if d.format:
        formats.get(d.format)


def _check_profile(d: KernelDeclaration) -> None:
    if d.profile:
        profiles.get(d.profile)


def _check_triton_target(d: KernelDeclaration) -> None:
    if d.triton_target:
        from fp8check.triton import targets

        targets.get(d.triton_target)


def _check_supports(d: KernelDeclaration) -> None:
    unknown = set(d.supports) - _SUPPORTS_KEYS
    if unknown:
        raise InvalidValueError(f"{d.label}: unknown 'supports' key(s) "
                                f"{', '.join(sorted(k.replace('_', '-') for k in unknown))}; known: "
                                f"{', '.join(sorted(k.replace('_', '-') for k in _SUPPORTS_KEYS))}")
    unread = sorted(k.replace("_", "-") for k in set(d.supports) - _GEMM_SUPPORTS_KEYS) if d.kind == "gemm" else []
    if unread:
        raise InvalidValueError(f"{d.label}: 'supports' key(s) {', '.join(unread)} are not read by a gemm kernel's "
                                "check (its keys: contiguous-only, k-multiple-of)")
    if "k_multiple_of" in d.supports:
        k = d.supports["k_multiple_of"]
        if d.kind != "gemm":
            raise InvalidValueError(f"{d.label}: 'supports' key k-multiple-of is for gemm kernels (K of A @ B)")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidValueError(f"{d.label}: k-multiple-of = {k!r}: a whole number >= 1")


KEY_RULES: tuple[Callable[[KernelDeclaration], None], ...] = (
    _check_kind,
    _check_unread_keys,
    _check_recipe,
    _check_static_keys,
    _check_format,
    _check_profile,
    _check_device,
    _check_input_dtypes,
    _check_ulps,
    _check_max_examples,
    _check_isolate,
    _check_known_divergence,
    _check_triton_target,
    _check_supports,
    _check_decode_keys,
    _check_gemm_keys,
)


@dataclass(frozen=True)
class KernelDeclaration:
    """One kernel a repository declares (see :mod:`fp8check.declarations` for the keys); made by
    :func:`declare`, which normalises the keys, and checked here by :data:`KEY_RULES`."""

    kind: str
    kernel: Any  # "MODULE:FUNC" or a callable
    format: str | None = None
    profile: str | None = None
    name: str = ""
    input_dtypes: tuple[str, ...] = DEFAULT_INPUT_DTYPES
    device: str = "cpu"
    recipe: Any = None  # a recipe name or a Recipe (a declared one)
    reference: Any = None
    args: Any = None
    ulps: int = 0
    triton_target: str | None = None
    supports: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    apply: str | None = None  # static: divide | multiply | multiply-reciprocal | target-divide | multiply-target-reciprocal
    scale: float | None = None  # static: the one scale to check (default: scales drawn for every boundary)
    isolate: bool = False  # check in a child process (fp8check.isolation): a crash is a finding
    requires: tuple[str, ...] = ()  # modules the kernel needs; one that cannot be imported skips its check
    # A documented defect of the kernel's package: {"categories": (...), "reason": "..."}; the check is a strict
    # xfail that fails outright on a divergence of any other category.
    known_divergence: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    declared_in: str | None = field(default=None, compare=False)  # the folder of the pyproject.toml it came from
    max_examples: int | None = None  # Hypothesis examples of its check in the pytest suite (default: the suite's)
    code_dtypes: tuple[str, ...] = ()  # decode: how it takes codes, "uint8" and/or "fp8" (default: each tried)
    output_dtype: str | None = None  # decode: the dtype of the values it must return (default: any float)
    block: Any = None  # dequant: [rows, cols] of one scale's block (default 128x128)
    epilogue: str | None = None  # gemm: where the scales are applied (fp8check.matmul.gemm.EPILOGUES)

    def __post_init__(self) -> None:
        for rule in KEY_RULES:
            rule(self)

    @property
    def kind_row(self) -> KernelKind:
        return KERNEL_KINDS[self.kind]

    @property
    def block_shape(self) -> tuple[int, int]:
        """A dequant kernel's block (rows, cols)."""
        from fp8check.quantizers.dequant import DEFAULT_BLOCK, block_of

        return DEFAULT_BLOCK if self.block is None else block_of(self.block, self.label)

    @property
    def label(self) -> str:
        return self.name or default_name(self.kernel)

    @property
    def fmt_name(self) -> str:
        """The format the kernel produces (a quantizer: its recipe's, unless ``format`` overrides it)."""
        if self.format:
            return formats.get(self.format).name
        from fp8check import quantizers

        return quantizers.get(self.recipe).format.name

    def result_dtype(self, input_dtype: str | None = None) -> str:
        """The input dtype a result of this kernel's check is labelled with (a quantizer's: float32 unless given)."""
        return input_dtype or (self.input_dtypes[0] if self.kind_row.per_input_dtype else "float32")

    def command_dtype(self, input_dtype: str | None = None) -> str | None:
        """The input dtype its reproduce line names (a quantizer's: none, its check draws every dtype)."""
        return (input_dtype or self.input_dtypes[0]) if self.kind_row.per_input_dtype else None

    def harness_supports(self) -> Any:
        from fp8check.casts.harness import Supports

        s = self.supports
        dtypes = s.get("input_dtypes")
        return Supports(input_dtypes=tuple(dtypes) if dtypes is not None else None,
                        contiguous_only=bool(s.get("contiguous_only", False)),
                        numel_multiple_of=int(s.get("numel_multiple_of", 1)), max_numel=s.get("max_numel"),
                        k_multiple_of=int(s.get("k_multiple_of", 1)))

    def resolve(self, what: Any) -> Any:
        if what is None or callable(what):
            return what
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

    def call_with_context(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if not self.triton_target:
            return fn

        @functools.wraps(fn)  # the kernel's name and signature (inspect follows __wrapped__)
        def wrapped(*a: Any, **k: Any) -> Any:
            with self.context():
                return fn(*a, **k)

        return wrapped

    def command(self, input_dtype: str | None = None, *, max_examples: int | None = None,
                seed: int | None = None) -> str:
        """An ``fp8check check`` command that reproduces this kernel's check from the repository root."""
        spec = self.kernel if isinstance(self.kernel, str) else default_name(self.kernel)
        parts = ["fp8check", "check", spec] + self.kind_row.arguments(self)
        if input_dtype and self.kind_row.per_input_dtype:
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
            elif key == "k_multiple_of":
                parts += ["--k-multiple-of", str(value)]
        if max_examples is not None:
            parts += ["--max-examples", str(max_examples)]
        if seed is not None:
            parts += ["--seed", str(seed)]
        return shlex.join(parts)


def declare(kind: str, **keys: Any) -> KernelDeclaration:
    """A :class:`KernelDeclaration` from what a repository wrote (keys spelled with underscores), normalised:
    ``requires`` a tuple of module names, ``known_divergence``'s keys spelled with underscores and its categories
    a tuple, a quantizer's recipe that this repository's pyproject.toml declares resolved, ``name`` the
    function's by default."""
    requires = keys.get("requires", ())
    keys["requires"] = tuple(str(m) for m in ((requires,) if isinstance(requires, str) else requires))
    if isinstance(keys.get("supports"), dict):  # spelled as in pyproject.toml (dashes) or with underscores
        keys["supports"] = {str(k).replace("-", "_"): v for k, v in keys["supports"].items()}
    if "code_dtypes" in keys:
        code_dtypes = keys["code_dtypes"] or ()
        keys["code_dtypes"] = (code_dtypes,) if isinstance(code_dtypes, str) else tuple(code_dtypes)
    if keys.get("known_divergence") is not None:  # kept as written when it is no known divergence: its rule says so
        keys["known_divergence"] = _known_divergence(keys["known_divergence"]) or keys["known_divergence"]
    kernel, recipe = keys.get("kernel"), keys.get("recipe")
    if kind == "quantizer" and kernel and isinstance(recipe, str):
        from fp8check import quantizers

        try:
            quantizers.get(recipe)
        except quantizers.UnknownRecipeError:  # a recipe this repository's pyproject.toml declares
            keys["recipe"] = quantizers.get(recipe, declared=repository_recipes())
    if not keys.get("name") and "kernel" in keys:
        keys["name"] = default_name(kernel)
    return KernelDeclaration(kind=kind, **keys)


def default_name(kernel: Any) -> str:
    if isinstance(kernel, str):
        return kernel.rpartition(":")[2] or kernel
    return getattr(kernel, "__name__", type(kernel).__name__)


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

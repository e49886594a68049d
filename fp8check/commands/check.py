"""``fp8check check``: one kernel against the reference, driven the way real callers drive it.

Exit 0 when the kernel conforms, 1 when it diverges, 2 for a usage error or a
kernel that cannot be imported or called at all.
"""

from __future__ import annotations

import argparse
from typing import Any

from fp8check.commands._shared import KERNEL_HELP, check_outputs_and_examples

_CAST_DTYPES = ("float32", "float16", "bfloat16")
# Tried by default on a user's cast too: a kernel that accepts float64 is checked on it (double rounding through
# float32 is the classic float64 defect); one that refuses it is told so in its verdict line.
_TRIED_DTYPES = _CAST_DTYPES + ("float64",)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check",
        help="check a cast, quantize or fused kernel against the reference, bit for bit",
        description="Run the sweep of each input dtype, every hazard input and Hypothesis-drawn inputs through "
        "KERNEL, in calls of many sizes, shapes, layouts and contents (with repeated calls and the input checked "
        "for writes), and compare each output with the reference under the claimed profile.",
    )
    p.add_argument("kernel", metavar="MODULE:FUNC", help=KERNEL_HELP)
    p.add_argument("--format", metavar="FMT",
                   help="the target format: e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, ... (required for a cast, fused, static, "
                   "decode, dequant and gemm kernel: a gemm's operands, a decoder's codes; a quantizer's recipe names "
                   "its own unless this overrides it)")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="the profile the kernel claims (default: ieee; for a built-in adapter, what it claims)")
    p.add_argument("--kind", choices=("cast", "quantize", "fused", "static", "decode", "dequant", "gemm"),
                   default="cast",
                   help="cast (default): tensor -> codes; quantize: tensor -> (codes, scales) under --recipe; fused: "
                   "(x, *args) -> codes of values --reference computes; static: (x, scale) -> codes; decode: codes "
                   "-> float32/float16/bfloat16 values (every code); dequant: (codes, block scales) -> values; gemm: "
                   "(a, a_scales, b, b_scales) -> out under --recipe's scales and --triton-target's tensor cores")
    p.add_argument("--block", metavar="ROWSxCOLS", default=None,
                   help="--kind dequant: the block one scale covers (default 128x128)")
    p.add_argument("--code-dtype", metavar="DTYPES", default=None,
                   help="--kind decode or dequant: how the kernel takes codes, uint8 and/or fp8 (the format's torch "
                   "dtype), "
                   "comma-separated (default: each tried, a refusal noted)")
    p.add_argument("--output-dtype", metavar="DTYPE", default=None, choices=("float32", "float16", "bfloat16"),
                   help="--kind decode or dequant: the dtype the kernel must return (default: any of float32, "
                   "float16, bfloat16)")
    p.add_argument("--epilogue", choices=("k-block", "k-block-product", "end", "end-product", "rescaled", "dot-scaled"),
                   default=None,
                   help="--kind gemm: where the scales are applied: to each K block's dot (k-block, the default for "
                   "block scales; k-block-product: times a_s * b_s), after the K loop as (acc * a_s) * b_s (end, the default otherwise), as "
                   "acc * (a_s * b_s) (end-product), to one dot over K kept in units of each K block's scale (rescaled: "
                   "acc *= s_j / s_j+1 between blocks, FBGEMM's block GEMM, lmdeploy's), or inside tl.dot_scaled as "
                   "the target does (dot-scaled, recipe mx)")
    p.add_argument("--recipe", metavar="NAME", default=None,
                   help="--kind quantize: the scaling recipe, a built-in one or one this repository's pyproject.toml "
                   "declares in [tool.fp8check.recipe.NAME]; --kind gemm (required): the GEMM's scales, tensorwise, "
                   "rowwise, block-1x128-128x128, block-128x128, block-1x128-1x128 or mx")
    p.add_argument("--recipe-field", action="append", default=[], metavar="KEY=VALUE",
                   help="--kind quantize: change one field of --recipe (a key of [tool.fp8check.recipe.NAME]: "
                   "apply=multiply-reciprocal, eps=none, amax=skip-nan, ...); repeatable")
    p.add_argument("--apply", default=None, choices=("divide", "multiply-reciprocal", "multiply", "target-divide",
                                                     "multiply-target-reciprocal"),
                   help="--kind static: how the kernel applies its scale (default divide; target-divide and "
                   "multiply-target-reciprocal: x / s and x * (1.0 / s) with the Triton target's own /, which sm90 "
                   "compiles to div.full.f32); --kind dequant: how it applies its block scales (default multiply)")
    p.add_argument("--scale", type=float, default=None, metavar="S",
                   help="--kind static: check this one scale (default: scales at every boundary)")
    p.add_argument("--reference", metavar="MODULE:FUNC", default=None,
                   help="--kind fused: (x, *args) -> the values just before the kernel's cast (float32/float64); "
                   "with --kind quantize, the values before a fused quantizer's quantization")
    p.add_argument("--args", metavar="MODULE:FUNC", default=None,
                   help="--kind fused or quantize: x -> tuple of the kernel's other arguments; --kind gemm: "
                   "(a, a_scales, b, b_scales) -> the kernel's own arguments")
    p.add_argument("--ulps", type=int, default=0, metavar="K",
                   help="--kind fused, quantize or static: the value before the cast may differ from the reference's by "
                   "K ulps (quantize: the scale too; default 0: bit for bit)")
    p.add_argument("--input-dtype", metavar="DTYPES", default=None,
                   help="comma-separated dtypes of the tensors the kernel receives (default for a cast: float32, "
                   "float16, bfloat16 and float64, each one it does not refuse; the verdict names those not checked)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the input tensors live")
    p.add_argument("--triton-target", metavar="TARGET", default=None,
                   help="run a Triton kernel in fp8check's faithful interpreter with this GPU's FP8 semantics "
                   "(sm90, sm89, sm100, gfx942, gfx950): interpreter mode is switched on for you; --kind gemm on the "
                   "CPU needs one (its tensor cores judge the GEMM)")
    p.add_argument("--contiguous-only", action="store_true",
                   help="declare that the kernel takes contiguous input only (non-contiguous calls are not tried)")
    p.add_argument("--numel-multiple-of", type=int, default=1, metavar="N",
                   help="declare that the kernel takes inputs whose size is a multiple of N only")
    p.add_argument("--k-multiple-of", type=int, default=1, metavar="N",
                   help="--kind gemm: declare that the kernel takes K a multiple of N only (each case's K is rounded "
                   "up to one)")
    p.add_argument("--max-numel", type=int, default=None, metavar="N",
                   help="declare the largest input the kernel takes (the large call shrinks to it)")
    p.add_argument("--isolate", action="store_true",
                   help="run the check in a child process: a kernel that crashes it (segfault, abort) is a finding "
                   "with the inputs of its last call, not a lost run")
    p.add_argument("--max-examples", type=int, default=200, metavar="N",
                   help="Hypothesis examples on top of the sweep (default 200; 0: sweep and hazards only)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="Hypothesis seed (default 0: reproducible)")
    p.add_argument("--max-listed", type=int, default=100, metavar="N",
                   help="reproducers listed in --json (default 100, simplest of each category first; counts stay exact)")
    p.add_argument("--json", metavar="PATH", help="write the result(s) (with the environment) as JSON")
    p.add_argument("--html", metavar="OUT", help="write a self-contained HTML divergence report")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.errors import InvalidValueError
    from fp8check.terminal import console
    from fp8check.terminal.divergences import print_result

    check_outputs_and_examples(args)
    if args.numel_multiple_of < 1:
        raise InvalidValueError(f"--numel-multiple-of {args.numel_multiple_of}: must be >= 1")
    if args.k_multiple_of < 1:
        raise InvalidValueError(f"--k-multiple-of {args.k_multiple_of}: must be >= 1")
    if args.k_multiple_of > 1 and args.kind != "gemm":
        raise InvalidValueError("--k-multiple-of is only for --kind gemm")
    if args.recipe_field and args.kind != "quantize":
        raise InvalidValueError("--recipe-field is only for --kind quantize")
    if args.recipe and args.kind not in ("quantize", "gemm"):
        raise InvalidValueError("--recipe is only for --kind quantize or gemm")
    if args.epilogue and args.kind != "gemm":
        raise InvalidValueError("--epilogue is only for --kind gemm")
    if args.kind == "cast" and args.ulps:
        raise InvalidValueError("--ulps is for --kind fused, quantize or static")
    if args.ulps < 0:
        raise InvalidValueError(f"--ulps {args.ulps}: must be >= 0")
    if args.kind not in ("static", "dequant") and (args.apply or args.scale is not None):
        raise InvalidValueError("--apply and --scale are for --kind static (--apply also for --kind dequant)")
    if args.kind == "dequant" and args.scale is not None:
        raise InvalidValueError("--scale is for --kind static; a dequant kernel takes its scales as an argument")
    if args.kind != "dequant" and args.block:
        raise InvalidValueError("--block is for --kind dequant")
    if args.kind == "cast" and (args.reference or args.args):
        raise InvalidValueError("--reference and --args are for --kind fused (or a fused quantizer)")
    if args.kind not in ("decode", "dequant") and (args.code_dtype or args.output_dtype):
        raise InvalidValueError("--code-dtype and --output-dtype are for --kind decode or dequant")
    if args.kind == "gemm":  # a GEMM's check reads none of these: silently ignoring one would mislead
        unread = [flag for flag, given in (("--profile", args.profile), ("--input-dtype", args.input_dtype),
                                           ("--ulps", args.ulps), ("--numel-multiple-of", args.numel_multiple_of > 1),
                                           ("--max-numel", args.max_numel is not None)) if given]
        if unread:
            raise InvalidValueError(f"{', '.join(unread)}: not read by --kind gemm (its operands are --format codes "
                                    "and its domain --contiguous-only, --k-multiple-of)")
    out = console()
    if args.kind == "gemm":
        _say_if_compiling(out)
    with _triton_watch(args, out):
        results = (_quantize(args) if args.kind == "quantize" else _fused(args) if args.kind == "fused"
                   else _static(args) if args.kind == "static" else _decode(args) if args.kind == "decode"
                   else _dequant(args) if args.kind == "dequant" else _gemm(args) if args.kind == "gemm"
                   else _cast(args))
    for i, result in enumerate(results):
        if i:
            out.print()
        print_result(result, out)
    _write_outputs(args, results)
    return EXIT_OK if all(r.passed for r in results) else EXIT_DIVERGED


class _triton_watch:
    """Around a run: an unpatched Triton interpreter doing FP8 conversions gets a warning (one line)."""

    def __init__(self, args: argparse.Namespace, out: Any) -> None:
        self.args, self.out, self.ctx, self.w = args, out, None, None

    def __enter__(self) -> None:
        import os

        if self.args.triton_target or os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            return
        try:
            import fp8check.triton as ft

            self.ctx = ft.watch()
            self.w = self.ctx.__enter__()
        except Exception:  # no Triton, or a version the watch cannot hook: nothing to warn about
            self.ctx = None

    def __exit__(self, *exc: Any) -> None:
        if self.ctx is None:
            return
        self.ctx.__exit__(*exc)
        warning = getattr(self.w, "warning", None)
        if warning and exc[0] is None:
            from rich.text import Text

            self.out.print(Text(f"warning: {warning}", style="yellow"))


def _say_if_compiling(out: Any) -> None:
    """One line before a GEMM check's silent minute: numba compiles the tensor-core models once, at the first
    call where ``FP8CHECK_NUMBA=1`` asks for them (else a check runs on NumPy: tensorcore.COMPILED_AFTER)."""
    from rich.text import Text

    from fp8check.matmul.tensorcore import _compiled_step
    from fp8check.reference.fast import numba_asked

    compiled = _compiled_step()
    if compiled is not None and numba_asked() == "1" and compiled.cached() is False:
        out.print(Text("note: compiling fp8check's tensor-core models (numba, once: about a minute on two cores; "
                       "cached on disk for later runs)", style="dim"))


def _supports(args: argparse.Namespace) -> dict[str, Any]:
    s: dict[str, Any] = {}
    if args.contiguous_only:
        s["contiguous_only"] = True
    if args.numel_multiple_of > 1:
        s["numel_multiple_of"] = args.numel_multiple_of
    if args.max_numel is not None:
        s["max_numel"] = args.max_numel
    if args.k_multiple_of > 1:
        s["k_multiple_of"] = args.k_multiple_of
    return s


def _dtypes(args: argparse.Namespace) -> tuple[str, ...] | None:
    from fp8check import inputs

    if not args.input_dtype:
        return None
    dtypes = tuple(d.strip() for d in args.input_dtype.split(",") if d.strip())
    for d in dtypes:
        inputs.source_format(d)
    return dtypes


def _cast(args: argparse.Namespace) -> list[Any]:
    from fp8check import formats, profiles
    from fp8check.casts import engine
    from fp8check.casts.adapters import builtin_names, get_kernel
    from fp8check.checking import note_unchecked_dtypes
    from fp8check.commands._shared import require_formats
    from fp8check.declarations import cast_kernel
    from fp8check.errors import InvalidValueError, KernelCallError
    from fp8check.results import Refusal

    if not args.format:
        raise InvalidValueError("a cast check needs --format FMT (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, ...)")
    fmt = formats.get(args.format)
    requested = _dtypes(args)
    if args.kernel in builtin_names():
        kernel = get_kernel(args.kernel, device=args.device)
        require_formats(kernel, fmt)
        claimed = kernel.profile_for(fmt)
        profile = claimed if args.profile in (None, claimed.name) else profiles.get(args.profile)
        dtypes = requested or tuple(d for d in _CAST_DTYPES if d in kernel.input_dtypes)
        # A built-in adapter's float64 behaviour is the stack registry's (a known upstream divergence): the
        # verdict names it as unchecked rather than failing every default check of torch or ml_dtypes.
        unchecked = {d: f"not checked: give --input-dtype {d}" for d in kernel.input_dtypes
                     if d not in dtypes and not requested}
        for d in dtypes:
            if d not in kernel.input_dtypes:
                raise InvalidValueError(f"{kernel.name} does not take {d} inputs")
        run_one = lambda d: engine.run_check(kernel, fmt, profile, input_dtype=d,  # noqa: E731
                                             max_examples=args.max_examples, seed=args.seed,
                                             cap=args.max_listed if args.max_listed > 0 else None)[0]
    else:
        if ":" not in args.kernel:
            get_kernel(args.kernel)  # raises the one-line "unknown kernel" error
        unchecked = {}
        decl = cast_kernel(args.kernel, format=fmt.name, profile=args.profile or "ieee", device=args.device,
                           input_dtypes=requested or _TRIED_DTYPES, triton_target=args.triton_target,
                           supports=_supports(args), name=args.kernel, isolate=args.isolate)
        profiles.get(decl.profile).resolve(fmt)
        dtypes = decl.input_dtypes
        from fp8check.declarations import run_declaration

        def run_one(d: str) -> Any:
            result = run_declaration(decl, input_dtype=d, max_examples=args.max_examples, seed=args.seed,
                                     cap=args.max_listed if args.max_listed > 0 else None)
            result.kernel = args.kernel
            return result
    results, refused = [], []
    for d in dtypes:
        try:
            results.append(run_one(d))
        except KernelCallError as exc:
            if requested:  # asked for by name: its refusal is the answer
                raise
            refused.append(Refusal(condition=f"every {d} input", error=str(exc)))
            unchecked[d] = f"not checked: the kernel refuses {d} inputs"
    if not results:
        raise KernelCallError(refused[0].error)
    results[0].refusals = refused + results[0].refusals  # dtypes the kernel refuses: findings
    for result in results:
        note_unchecked_dtypes(result, unchecked)
    return results



def _quantize(args: argparse.Namespace) -> list[Any]:
    from fp8check.declarations import quantizer_kernel, run_declaration
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable
    from fp8check.profiles import get as get_profile
    from fp8check.quantizers import get as get_recipe

    from fp8check.pyproject import recipe_named

    if not args.recipe:
        raise InvalidValueError("--kind quantize needs --recipe NAME (see docs/recipes.md for the names)")
    recipe = recipe_named(args.recipe)
    if args.recipe_field:
        from fp8check.quantizers import declared_recipe

        fields = dict(_field(f) for f in args.recipe_field)
        recipe = declared_recipe(recipe.name, where="--recipe-field", recipes={recipe.name: recipe},
                                 base=recipe.name, **fields)
    get_recipe(recipe, args.format or None)
    if args.profile:
        get_profile(args.profile)
    load_callable(args.kernel)  # a kernel that cannot be imported: one line, before any work
    supports = _supports(args)
    if args.input_dtype:
        supports["input_dtypes"] = list(_dtypes(args) or ())
    decl = quantizer_kernel(args.kernel, recipe=recipe, format=args.format or None, profile=args.profile,
                            device=args.device, args=args.args, reference=args.reference,
                            triton_target=args.triton_target, supports=supports, ulps=args.ulps,
                            isolate=args.isolate)
    result = run_declaration(decl, max_examples=args.max_examples, seed=args.seed,
                             cap=args.max_listed if args.max_listed > 0 else None)
    result.kernel = args.kernel
    return [result]


def _field(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of --recipe-field as a recipe table entry (numbers, true/false, or text)."""
    from fp8check.errors import InvalidValueError

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InvalidValueError(f"--recipe-field {text!r}: give KEY=VALUE (e.g. apply=multiply-reciprocal)")
    v = value.strip()
    if v.lower() in ("true", "false"):
        return key.strip(), v.lower() == "true"
    try:
        return key.strip(), float(v) if any(c in v for c in ".eE") or v.lstrip("-").isdigit() else v
    except ValueError:
        return key.strip(), v


def _static(args: argparse.Namespace) -> list[Any]:
    from fp8check.declarations import run_declaration, static_quantizer
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable

    if not args.format:
        raise InvalidValueError("--kind static needs --format FMT")
    load_callable(args.kernel)
    decl = static_quantizer(args.kernel, format=args.format, profile=args.profile or "satfinite",
                            apply=args.apply or "divide", scale=args.scale, ulps=args.ulps, device=args.device,
                            input_dtypes=_dtypes(args) or _CAST_DTYPES, triton_target=args.triton_target,
                            isolate=args.isolate)
    results = []
    for d in decl.input_dtypes:
        result = run_declaration(decl, input_dtype=d, seed=args.seed, max_examples=args.max_examples,
                                 cap=args.max_listed if args.max_listed > 0 else None)
        result.kernel = args.kernel
        results.append(result)
    return results


def _decode(args: argparse.Namespace) -> list[Any]:
    from fp8check.declarations import decode_kernel, run_declaration
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable

    if not args.format:
        raise InvalidValueError("--kind decode needs --format FMT (the format of the codes it decodes)")
    load_callable(args.kernel)
    code_dtypes = tuple(c.strip() for c in (args.code_dtype or "").split(",") if c.strip())
    decl = decode_kernel(args.kernel, format=args.format, code_dtypes=code_dtypes, output_dtype=args.output_dtype,
                         device=args.device, triton_target=args.triton_target, isolate=args.isolate)
    result = run_declaration(decl, seed=args.seed)
    result.kernel = args.kernel
    return [result]


def _dequant(args: argparse.Namespace) -> list[Any]:
    from fp8check.declarations import dequant_kernel, run_declaration
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable

    if not args.format:
        raise InvalidValueError("--kind dequant needs --format FMT (the format of the codes it dequantizes)")
    load_callable(args.kernel)
    code_dtypes = tuple(c.strip() for c in (args.code_dtype or "").split(",") if c.strip())
    decl = dequant_kernel(args.kernel, format=args.format, block=args.block or (128, 128),
                          apply=args.apply or "multiply", code_dtypes=code_dtypes, output_dtype=args.output_dtype,
                          device=args.device, triton_target=args.triton_target, isolate=args.isolate)
    result = run_declaration(decl, seed=args.seed, cap=args.max_listed if args.max_listed > 0 else None)
    result.kernel = args.kernel
    return [result]


def _fused(args: argparse.Namespace) -> list[Any]:
    from fp8check.declarations import fused_kernel, run_declaration
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable

    if not args.format or not args.reference:
        raise InvalidValueError("--kind fused needs --format FMT and --reference MODULE:FUNC (the values before "
                                "the kernel's cast)")
    load_callable(args.kernel)
    decl = fused_kernel(args.kernel, reference=args.reference, args=args.args, format=args.format,
                        profile=args.profile or "ieee", ulps=args.ulps, device=args.device,
                        input_dtypes=_dtypes(args) or ("float32",), triton_target=args.triton_target,
                        supports=_supports(args), isolate=args.isolate)
    results = []
    for d in decl.input_dtypes:
        result = run_declaration(decl, input_dtype=d, seed=args.seed)
        result.kernel = args.kernel
        results.append(result)
    return results


def _gemm(args: argparse.Namespace) -> list[Any]:
    from fp8check.declarations import gemm_kernel, run_declaration
    from fp8check.errors import InvalidValueError
    from fp8check.loader import load_callable

    from fp8check.matmul.gemm import GEMM_RECIPES, gemm_recipe

    if not args.format or not args.recipe:
        raise InvalidValueError(f"--kind gemm needs --format FMT and --recipe NAME ({', '.join(GEMM_RECIPES)})")
    gemm_recipe(args.recipe)  # a wrong name: one line, before the kernel's module is imported
    load_callable(args.kernel)
    decl = gemm_kernel(args.kernel, recipe=args.recipe, format=args.format, epilogue=args.epilogue, args=args.args,
                       device=args.device, triton_target=args.triton_target, supports=_supports(args),
                       isolate=args.isolate)
    result = run_declaration(decl, seed=args.seed, cap=args.max_listed if args.max_listed > 0 else None)
    result.kernel = args.kernel
    return [result]


def _write_outputs(args: argparse.Namespace, results: list[Any]) -> None:
    from fp8check.outputs import write_json
    from fp8check.results import dump_results, environment

    env = environment()
    if args.json:
        if len(results) == 1:
            data = results[0].to_dict()
            data["environment"] = env
            write_json(args.json, data)
        else:
            dump_results(args.json, results, env)
    if args.html:
        from fp8check.report import Source, divergence_report, write_html

        what = "" if args.kind == "cast" else f" --kind {args.kind}"
        write_html(args.html, divergence_report([Source(name=f"fp8check check {args.kernel}{what}", environment=env,
                                                        checks=results)]))

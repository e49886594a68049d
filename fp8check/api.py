"""The Python API for a kernel author's own tests: check a function object, get a readable result.

::

    import fp8check

    report = fp8check.check_cast(my_cast, format="e4m3fnuz", profile="satfinite")
    assert report.passed, report                 # str(report): what `fp8check check` prints
    fp8check.assert_conforms(report)             # the same, as one call

    fp8check.check_quantizer(my_quant, recipe="tensorwise", format="e4m3fnuz")
    fp8check.check_fused(my_rmsnorm_quant, reference=my_rmsnorm_reference, args=my_args,
                         format="e4m3fn", profile="satfinite", ulps=2)

Every check drives the kernel the way real callers do (shapes, layouts,
input dtypes, repeated calls, writes to the input: see
:mod:`fp8check.casts.harness`) and compares bits with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from fp8check.declarations import (KernelDeclaration, cast_kernel, decode_kernel, dequant_kernel, fused_kernel,
                                   quantizer_kernel, run_declaration)
from fp8check.results import CheckResult, Divergence, Refusal

__all__ = ["Report", "check_cast", "check_quantizer", "check_fused", "check_decode", "check_dequant",
           "check_declared", "assert_conforms", "check_gemm"]


@dataclass
class Report:
    """The results of one kernel's check (one per input dtype for a cast)."""

    kernel: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def categories(self) -> dict[str, int]:
        """Divergences per category, summed over the results (exact counts)."""
        out: dict[str, int] = {}
        for r in self.results:
            for c, n in r.categories.items():
                if n:
                    out[c] = out.get(c, 0) + n
        return out

    @property
    def reproducers(self) -> list[Divergence]:
        """The simplest divergence of each category (of each result)."""
        out = []
        for r in self.results:
            seen: set[str] = set()
            for d in r.divergences:
                if d.category not in seen:
                    seen.add(d.category)
                    out.append(d)
        return out

    @property
    def refusals(self) -> list[Refusal]:
        return [x for r in self.results for x in r.refusals]

    def __str__(self) -> str:
        """What ``fp8check check`` prints for each result."""
        from fp8check.terminal.divergences import result_text

        return "\n\n".join(result_text(r) for r in self.results)

    def __bool__(self) -> bool:
        return self.passed


def check_declared(decl: KernelDeclaration, *, max_examples: int = 200, seed: int = 0,
                   thorough: bool = True) -> Report:
    """Run the check of a declaration (every input dtype of a cast)."""
    dtypes: Iterable[str | None] = decl.input_dtypes if decl.kind == "cast" else (None,)
    return Report(kernel=decl.name, results=[
        run_declaration(decl, input_dtype=d, max_examples=max_examples, seed=seed, thorough=thorough)
        for d in dtypes])


def check_cast(kernel: Any, *, format: str, profile: str = "ieee", input_dtypes: tuple[str, ...] | None = None,
               device: str = "cpu", max_examples: int = 200, seed: int = 0, name: str | None = None,
               triton_target: str | None = None, supports: dict[str, Any] | None = None) -> Report:
    """Check the cast ``kernel`` (a function ``x -> fp8 tensor or uint8 codes``, or ``"MODULE:FUNC"``)."""
    kw: dict[str, Any] = {"device": device, "name": name or "", "triton_target": triton_target,
                          "supports": supports or {}}
    if input_dtypes is not None:
        kw["input_dtypes"] = tuple(input_dtypes)
    return check_declared(cast_kernel(kernel, format=format, profile=profile, **kw), max_examples=max_examples,
                          seed=seed)


def check_quantizer(kernel: Any, *, recipe: str, format: str | None = None, profile: str | None = None,
                    device: str = "cpu", max_examples: int = 100, seed: int = 0, name: str | None = None,
                    args: Any = None, reference: Any = None, triton_target: str | None = None,
                    supports: dict[str, Any] | None = None) -> Report:
    """Check the quantizer ``kernel`` (``x -> (codes, scales)``) against ``recipe``.

    A quantizer with fused pre-processing takes ``args`` after ``x`` and
    ``reference(x, *args)`` gives the values the recipe applies to.
    """
    decl = quantizer_kernel(kernel, recipe=recipe, format=format, profile=profile, device=device, name=name or "",
                            args=args, reference=reference, triton_target=triton_target, supports=supports or {})
    return check_declared(decl, max_examples=max_examples, seed=seed)


def check_fused(kernel: Any, *, reference: Any, format: str, profile: str = "ieee", args: Any = None, ulps: int = 0,
                input_dtypes: tuple[str, ...] = ("float32",), device: str = "cpu", seed: int = 0,
                name: str | None = None, triton_target: str | None = None,
                supports: dict[str, Any] | None = None) -> Report:
    """Check the fused kernel ``kernel(x, *args)`` against ``reference(x, *args)`` (its values before the cast)."""
    decl = fused_kernel(kernel, reference=reference, format=format, profile=profile, args=args, ulps=ulps,
                        input_dtypes=tuple(input_dtypes), device=device, name=name or "",
                        triton_target=triton_target, supports=supports or {})
    return check_declared(decl, seed=seed)


def check_decode(kernel: Any, *, format: str, code_dtypes: Any = (), output_dtype: str | None = None,
                 device: str = "cpu", name: str | None = None, triton_target: str | None = None) -> Report:
    """Check the decode kernel ``kernel(codes) -> values`` on every code of ``format`` (codes as uint8 and/or the
    torch fp8 dtype, ``code_dtypes``; values float32, float16 or bfloat16, ``output_dtype`` if it must be one)."""
    decl = decode_kernel(kernel, format=format, code_dtypes=code_dtypes, output_dtype=output_dtype, device=device,
                         name=name or "", triton_target=triton_target)
    return check_declared(decl)


def check_dequant(kernel: Any, *, format: str, block: Any = (128, 128), apply: str = "multiply",
                  code_dtypes: Any = (), output_dtype: str | None = None, device: str = "cpu", seed: int = 0,
                  name: str | None = None, triton_target: str | None = None) -> Report:
    """Check the block dequant kernel ``kernel(codes, scales) -> values`` (a float32 scale per ``block`` of
    (rows, cols) elements, applied as ``apply`` says) bit for bit against the exact values."""
    decl = dequant_kernel(kernel, format=format, block=block, apply=apply, code_dtypes=code_dtypes,
                          output_dtype=output_dtype, device=device, name=name or "", triton_target=triton_target)
    return check_declared(decl, seed=seed)


def check_gemm(kernel: Any, *, recipe: str, format: str, triton_target: str | None = None,
               epilogue: str | None = None, args: Any = None, device: str = "cpu", seed: int = 0,
               name: str | None = None, supports: dict[str, Any] | None = None) -> Report:
    """Check the scaled FP8 GEMM ``kernel(a, a_scales, b, b_scales) -> out`` (or ``kernel(*args(a, a_scales, b,
    b_scales))``) against ``recipe``'s scales applied in ``epilogue`` order, under ``triton_target``'s tensor
    cores (a CUDA kernel: its device's) -- :mod:`fp8check.matmul.gemm`."""
    from fp8check.declarations import gemm_kernel

    decl = gemm_kernel(kernel, recipe=recipe, format=format, epilogue=epilogue, args=args, device=device,
                       name=name or "", triton_target=triton_target, supports=supports or {})
    return check_declared(decl, seed=seed)


def assert_conforms(report: Report | CheckResult) -> None:
    """Raise AssertionError, its message what ``fp8check check`` prints, unless ``report`` passed."""
    if not report.passed:
        if isinstance(report, CheckResult):
            from fp8check.terminal.divergences import result_text

            raise AssertionError("\n" + result_text(report))
        raise AssertionError("\n" + str(report))

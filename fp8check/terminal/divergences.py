"""The one divergence printer: a check result as terminal lines.

``fp8check check`` and ``fp8check sweep`` print these lines, and the pytest
suite's assertion messages are the same lines as plain text, so a failure
reads the same wherever it is found: per category the exact count and the
simplest reproducer (input, expected and actual code with their bit fields
and values), then a command that reproduces it.
"""

from __future__ import annotations

from typing import Any

from fp8check.codes import bit_fields
from fp8check.formats import get as get_format
from fp8check.results import (CALL_CATEGORIES, CRASH_CATEGORIES, KERNEL_FAULT_CATEGORIES, QUANTIZE_CATEGORIES,
                              CheckResult, Divergence)

__all__ = ["result_lines", "result_text", "print_result"]

Line = tuple[str, str]  # text, rich style ("" for none)


def _first_by_category(result: CheckResult) -> dict[str, Divergence]:
    first: dict[str, Divergence] = {}
    for d in result.divergences:  # listed simplest first
        if not _is_device_fault(result, d):
            first.setdefault(d.category, d)
    return first


def _device_fault(result: CheckResult) -> dict[str, Any]:
    fault = result.extra.get("device_fault")
    return fault if isinstance(fault, dict) else {}


def _is_device_fault(result: CheckResult, d: Divergence) -> bool:
    fault = _device_fault(result)
    return bool(fault) and d.category == fault.get("category") and d.detail == fault.get("detail")


def _counts(result: CheckResult) -> dict[str, int]:
    """The categories' counts without the device fault (listed by :func:`_device_fault_lines`)."""
    counts = dict(result.categories)
    cat = _device_fault(result).get("category")
    if cat in counts:
        counts[cat] -= 1
    return {c: n for c, n in counts.items() if n or c in QUANTIZE_CATEGORIES}


def _device_fault_lines(result: CheckResult) -> list[Line]:
    """A fault of the kernel on the device: the error, the call that made it, what it means for the check."""
    fault = _device_fault(result)
    if not fault:
        return []
    lines: list[Line] = [(f"DEVICE FAULT ({fault.get('category', '')}): {fault.get('error', '')}"
                          + (f" ({fault['name']})" if fault.get("name") and fault["name"] not in fault.get("error", "")
                             else ""), "bold red")]
    if fault.get("call"):
        lines.append((f"  in the call on {fault['call']}", "yellow"))
    lines.append(("  the process's CUDA context is unusable after it: the check ended at this call, and later GPU "
                  "checks in that process are skipped (isolate = true checks a kernel in a child process)", "yellow"))
    return lines


def _cast_body(result: CheckResult) -> list[Line]:
    fmt = get_format(result.format)
    lines: list[Line] = []
    first = _first_by_category(result)
    counts = _counts(result)
    width = max((len(c) for c in counts), default=8)
    pad = " " * (width + 2)
    for cat, n in counts.items():
        if cat in KERNEL_FAULT_CATEGORIES or cat in CRASH_CATEGORIES:
            continue  # listed by _fault_lines and _device_fault_lines
        d = first.get(cat)
        unit = {"in_place": "element", "nondeterministic": "element", "refused": "call"}.get(cat, "input")
        head = f"{cat:<{width}}  {n:>12,} {unit if n == 1 else unit + 's'}"
        if d is None:
            lines.append((head, "bold"))
            continue
        if cat in CALL_CATEGORIES:  # a divergence of a call, not of an input value
            lines.append((f"{head}   {d.detail}", "bold"))
            if cat == "in_place":
                lines.append((f"{pad}first: input {d.input_hex} = {d.input_value} became {d.actual_hex} = "
                              f"{d.actual_value}", "red"))
            elif cat == "nondeterministic":
                lines.append((f"{pad}input {d.input_hex} = {d.input_value}", "red"))
            if d.condition:
                lines.append((f"{pad}{d.condition}", "yellow"))
            continue
        lines.append((f"{head}   smallest: {d.input_dtype} {d.input_hex} = {d.input_value}", "bold"))
        if d.condition:  # the condition the divergence needs
            lines.append((f"{pad}{d.condition}", "yellow"))
        e, a = int(d.expected_hex, 16), int(d.actual_hex, 16)
        lines.append((f"{pad}expected {d.expected_hex} [{bit_fields(e, fmt)}] = {d.expected_value}", ""))
        lines.append((f"{pad}actual   {d.actual_hex} [{bit_fields(a, fmt)}] = {d.actual_value}", "red"))
    return lines


# What a divergence is, by the kind of kernel: (one, many, what differs).
_WHAT_DIFFERS = {"decode": ("code decodes", "codes decode", "to a different value"),
                 "dequant": ("element is", "elements are", "a different value"),
                 "gemm": ("output element differs", "output elements differ", "from the reference")}


def _summary(result: CheckResult) -> str:
    cats = _counts(result)
    values = sum(n for c, n in cats.items()
                 if c not in CALL_CATEGORIES and c not in KERNEL_FAULT_CATEGORIES and c not in CRASH_CATEGORIES)
    parts = ([f"the kernel faulted on the device ({_device_fault(result).get('error', '')})"]
             if _device_fault(result) else [])
    if values:
        what = _WHAT_DIFFERS.get(result.kind, ("input gives", "inputs give", "a different code"))
        parts.append(f"{values:,} {what[0] if values == 1 else what[1]} {what[2]}")
    if cats.get("in_place"):
        parts.append(f"the kernel wrote its input ({cats['in_place']:,} elements)")
    if cats.get("nondeterministic"):
        parts.append(f"repeated calls differ ({cats['nondeterministic']:,} elements)")
    faults = sum(cats.get(c, 0) for c in KERNEL_FAULT_CATEGORIES)
    if faults:
        parts.append(f"the kernel faults ({', '.join(c for c in KERNEL_FAULT_CATEGORIES if cats.get(c))})")
    if cats.get("refused"):
        n = cats["refused"]
        # a GEMM's case is refused when its kernel raises or returns another shape than (M, N); nothing need be
        # declared for a case to be inside its domain (supports keys only take cases out)
        parts.append(f"{n:,} case{'s' if n != 1 else ''} failed (raised, or returned another shape than (M, N))"
                     if result.kind == "gemm" else
                     f"{n:,} call{'s' if n != 1 else ''} refused inside the declared domain")
    return "; ".join(parts) or "see the categories"


def _unchecked(result: CheckResult) -> str:
    """`` (float64 not checked: the kernel refuses float64 inputs)``: the verdict line's part on input dtypes
    the kernel takes or was tried on that the check did not cover."""
    unchecked = result.extra.get("unchecked_input_dtypes") or {}
    return "".join(f" ({d} {why})" for d, why in unchecked.items())


def _refusal_lines(result: CheckResult) -> list[Line]:
    found = [r for r in result.refusals if not r.declared]
    if not found:
        return []
    first = found[0]
    return [(f"refused {len(found):,} call{'s' if len(found) != 1 else ''} (a finding, not a divergence: declare "
             f"what the kernel supports to make refusals inside it fail); first: {first.condition}: {first.error}",
             "yellow")]


def _fault_lines(result: CheckResult) -> list[Line]:
    """Faults of an interpreted Triton kernel: per category the lanes, then each fault (file:line, program,
    tensor, offsets, config), at most 4 per category."""
    lines: list[Line] = []
    counts = _counts(result)
    for cat in KERNEL_FAULT_CATEGORIES:
        n = counts.get(cat, 0)
        if not n:
            continue
        found = [d for d in result.divergences if d.category == cat and not _is_device_fault(result, d)]
        lines.append((f"  {cat:<14}{n:>9,} lane{'s' if n != 1 else ''} (kernel fault)", "bold red"))
        for d in found[:4]:
            lines.append((f"    {d.detail}", "red"))
    return lines


def _quantize_body(result: CheckResult) -> list[Line]:
    extra = result.extra
    lines: list[Line] = []
    first: dict[str, Divergence] = {}
    for d in result.divergences:  # the most minimal, preferring one that says which target the kernel used
        if d.category not in first or ("maps amax" in d.detail and "maps amax" not in first[d.category].detail):
            first[d.category] = d
    for cat in QUANTIZE_CATEGORIES:
        n = result.categories.get(cat, 0)
        line = f"  {cat:<10}{n:>9,}"
        if n and cat in first:
            d = first[cat]
            line += (f"  e.g. input {d.input_hex} ({d.input_value}): expected {d.expected_hex} ({d.expected_value}), "
                     f"got {d.actual_hex} ({d.actual_value})\n{'':21}{d.detail}"
                     + (f" ({d.condition})" if d.condition else ""))  # a stride, a shape, a previous call
        lines.append((line, "red" if n else ""))
    for cat in CALL_CATEGORIES:  # divergences of a call: the kernel wrote its input, differed, refused
        n = result.categories.get(cat, 0)
        if n:
            d = first.get(cat)
            lines.append((f"  {cat:<10}{n:>9,}" + (f"  {d.detail}" + (f" ({d.condition})" if d.condition else "")
                                                    if d is not None else ""), "red"))
    ex = extra.get("exactness")
    if ex and result.categories.get("codes"):
        lines.append((f"  exactness of the codes divergences: the kernel exact {ex['kernel_exact']:,}, the recipe exact "
                      f"{ex['recipe_exact']:,}, neither {ex['neither']:,} (against the correctly rounded x / scale)",
                      "yellow"))
    hazards = [h for h in extra.get("hazards", ()) if h["count"]]
    if hazards:
        lines.append(("hazards (reported whether or not the kernel conforms):", ""))
        for h in hazards:
            lines.append((f"  {h['name']:<28}{h['count']:>9,}  {h['example']}", ""))
    br = extra.get("blast_radius")
    if br and br["blocks_with_nonfinite"]:
        w = br["worst_case"]
        lines.append((f"blast radius: {br['finite_values_lost']:,} of {br['finite_values_in_them']:,} finite values "
                      f"in {br['blocks_with_nonfinite']} {'block' if br['blocks_with_nonfinite'] == 1 else 'blocks'} "
                      f"holding Inf/NaN were lost"
                      + (f"; worst: {w['lost']:,} of {w['finite']:,} in {w['case']}" if w["lost"] else ""), ""))
    return lines


def _scope_lines(result: CheckResult) -> list[Line]:
    return [(f"note: {note}", "yellow") for note in result.extra.get("notes", ())]


def _target_dependent_lines(result: CheckResult) -> list[Line]:
    """Outputs whose code depends on the target's approximation: not divergences, but worth knowing."""
    n = result.target_dependent
    if not n or result.kind == "gemm":  # a GEMM's are the tensor-core model's brackets: its own note says so
        return []
    ops = result.extra.get("target_dependent_ops", "")
    lines: list[Line] = [(f"target-dependent: {n:,} {'output' if n == 1 else 'outputs'} take the reference's code "
                          f"only for some results inside the documented bounds of {ops or 'approximate instructions'}"
                          f" (not divergences; a correctly rounded instruction, e.g. tl.div_rn or tl.sqrt_rn, "
                          f"makes them exact)", "yellow")]
    for d in result.target_dependent_examples[:3]:
        where = f"input {d.input_hex} ({d.input_value}): " if d.input_hex != "-" else ""
        lines.append((f"  e.g. {where}reference {d.expected_hex}; {d.detail}", "yellow"))
    return lines


def _element_counts(result: CheckResult) -> dict[str, int]:
    """The categories of a decode or dequant check's elements: its kernel faults are lanes, listed by
    :func:`_fault_lines` with their kernel line, not elements of some code."""
    return {c: n for c, n in _counts(result).items() if n and c not in KERNEL_FAULT_CATEGORIES}


def _decode_body(result: CheckResult) -> list[Line]:
    """Per category the count and its first codes (a rarer category, such as fnuz's NaN code, is not hidden
    behind eight subnormals)."""
    lines: list[Line] = []
    for cat, n in _element_counts(result).items():
        lines.append((f"  {cat:<11} {n:,} {'code' if n == 1 else 'codes'}", "red"))
        lines.extend((f"    code {d.input_hex} [{d.input_value}] -> {d.actual_value} (expected {d.expected_value})"
                      + (f"  {d.condition}" if d.condition else ""), "red")
                     for d in [d for d in result.divergences if d.category == cat][:3])
    return lines


def _dequant_body(result: CheckResult) -> list[Line]:
    """Per category the count, then its first elements (at most 3 each, so one category's many do not hide
    another's): code, block and scale, both values, why."""
    counts = _element_counts(result)
    lines: list[Line] = [(f"  {c:<11} {n:,} {'element' if n == 1 else 'elements'}", "red") for c, n in counts.items()]
    for cat in counts:
        for d in [d for d in result.divergences if d.category == cat][:3]:
            lines.append((f"  {d.category:<11} code {d.input_hex} = {d.input_value}: expected {d.expected_value} "
                          f"({d.expected_hex}), got {d.actual_value} ({d.actual_hex})", "red"))
            lines.append((f"              {d.detail}" + (f"; {d.condition}" if d.condition else ""), ""))
    return lines


def _gemm_body(result: CheckResult) -> list[Line]:
    """Per category of a GEMM's divergences: the count and the first element, where it comes from (its tile,
    K block and scales) and the call that showed it."""
    lines: list[Line] = []
    for cat, d in _first_by_category(result).items():
        if cat in KERNEL_FAULT_CATEGORIES:  # their own lines below
            continue
        count = f"  {cat:<10}{result.categories.get(cat, 0):>9,}  "
        if d.input_hex == "-":  # a refused call: no element to show, the call and its error
            lines.append((f"{count}{d.condition}", "red"))
        else:
            lines.append((f"{count}{d.input_hex}: expected {d.expected_value} (0x{d.expected_hex}), got "
                          f"{d.actual_value} (0x{d.actual_hex}); {d.condition}", "red"))
        lines.append((f"{'':21}{d.detail}", ""))
    return lines


def result_lines(result: CheckResult, *, header: bool = True) -> list[Line]:
    """The lines that show ``result``: a header (``header=False`` leaves it to the caller), the verdict, per
    category the count and the simplest reproducer, the known upstream issue, and how to reproduce it."""
    lines: list[Line] = []
    if result.categories.get("crashed") and "crash" in result.extra:  # an isolated check whose child died
        if header:
            lines.append((f"fp8check: {result.kernel}  ({result.kind}, {result.format}, {result.input_dtype} in, "
                          f"{result.device})", "bold"))
        lines.extend((n, "yellow") for n in result.extra.get("notes", ()))
        for d in result.divergences:
            lines.append((f"CRASHED: {d.detail}", "bold red"))
            if d.condition:
                lines.append((f"  {d.condition}", "yellow"))
        tail = result.extra.get("crash", {}).get("log_tail", [])
        if tail:
            lines.append(("  the child's last lines:", ""))
            lines.extend((f"    {t}", "") for t in tail[-8:])
        lines.append((f"reproduce: {result.command}", ""))
        return lines
    if _device_fault(result) and not result.checked:  # the check faulted before it had compared anything
        if header:
            lines.append((f"fp8check: {result.kernel}  ({result.kind}, {result.format}, {result.input_dtype} in, "
                          f"{result.device})", "bold"))
        lines.extend(_device_fault_lines(result))
        lines.extend(_scope_lines(result))
        lines.append((f"reproduce: {result.command}", ""))
        return lines
    if result.kind in ("quantize", "static_quantize"):
        extra = result.extra
        if header:
            lines.append((f"fp8check: {result.kernel}  recipe {extra['recipe']['name']} on {result.device}"
                          + (f" ({result.input_dtype} in)" if result.kind == "static_quantize" else ""), "bold"))
            lines.append((f"  {extra['recipe_summary']}", ""))
        verdict = "CONFORMS" if result.passed else "DIVERGES"
        if result.passed and extra.get("ulps"):
            verdict += f" within {extra['ulps']} ulps (of the float32 value before the cast, and of the scale)"
        inputs = "input" if extra["cases"] == 1 else "inputs"
        if result.kind == "static_quantize":
            inputs = "scale" if extra["cases"] == 1 else "scales"
        lines.append((f"checked {result.checked:,} values in {extra['cases']} {inputs} ({result.input_dtype}): "
                      f"{verdict}{_unchecked(result)}",
                      "bold green" if result.passed else "bold red"))
        lines.extend(_scope_lines(result))
        lines.extend(_device_fault_lines(result))
        lines.extend(_quantize_body(result))
        lines.extend(_fault_lines(result))
    else:
        if header:
            summary = result.extra.get("profile_summary", "")
            if result.kind == "gemm":  # operands in, a float matrix out, judged against a recipe
                lines.append((f"fp8check check {result.kernel}: {result.format} operands, {result.device}, recipe "
                              f"{result.profile}: {summary}", "bold"))
            else:
                lines.append((f"fp8check check {result.kernel} → {result.format} ({result.input_dtype} in, "
                              f"{result.device}), profile {result.profile}: {summary}", "bold"))
            what = result.extra.get("checked_means", "distinct inputs")
            lines.append((f"checked {result.checked:,} {what}", ""))
            lines.extend(_scope_lines(result))
        if result.passed:
            ulps = result.extra.get("fused", {}).get("ulps", 0)
            lines.append(((f"CONFORMS: every output is the code of a value within {ulps} ulps of the reference's"
                           if ulps else "CONFORMS: every output equals the reference bit for bit")
                          + (" or is target-dependent (below)" if result.target_dependent and result.kind != "gemm"
                             else " but the bracketed ones (the note above)" if result.target_dependent else "")
                          + _unchecked(result), "bold green"))
            lines.extend(_refusal_lines(result))
        else:
            lines.append((f"DIVERGES: {_summary(result)}{_unchecked(result)}", "bold red"))
            if result.expected_failure:
                lines.append((f"known upstream: {result.expected_failure}", "yellow"))
            lines.extend(_device_fault_lines(result))
            lines.extend(_decode_body(result) if result.kind == "decode" else _dequant_body(result)
                         if result.kind == "dequant" else _gemm_body(result)
                         if result.kind == "gemm" else _cast_body(result))
            lines.extend(_fault_lines(result))
            lines.extend(_refusal_lines(result))
    lines.extend(_target_dependent_lines(result))
    if not result.passed or result.kind in ("quantize", "static_quantize"):
        lines.append((f"reproduce: {result.command}", ""))
    return lines


def result_text(result: CheckResult, *, header: bool = True) -> str:
    """:func:`result_lines` as plain text (pytest assertion messages)."""
    return "\n".join(text for text, _ in result_lines(result, header=header))


def print_result(result: CheckResult, console: Any = None, *, header: bool = True) -> None:
    """Print :func:`result_lines` through ``console`` (default: :func:`fp8check.terminal.console`)."""
    from rich.text import Text

    from fp8check.terminal import console as make_console

    out = console or make_console()
    for text, style in result_lines(result, header=header):
        out.print(Text(text, style=style))

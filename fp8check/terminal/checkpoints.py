"""Terminal output of an audit (rich): renders the audit's result types only.

Everything taken from a file (tensor names, paths, metadata, messages that
quote them) is untrusted: control and format characters are shown as
escapes (no terminal escape sequences or bidi tricks get through) and rich
markup is escaped (``rich.markup.escape``) before printing.
"""

from __future__ import annotations

import os
import unicodedata
from typing import TextIO

from rich.markup import escape

from fp8check.checkpoints.audit_result import AuditResult, TensorResult
from fp8check.checkpoints.findings import CODES as FINDING_CODES
from fp8check.terminal import console as terminal_console
from fp8check.terminal import format_bytes

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
_VERDICT_STYLE = {"runs_as_is": "bold green", "runs_after_conversion": "bold yellow", "runs_emulated": "bold yellow",
                  "does_not_load_correctly": "bold red", "cannot_run": "bold red", "unknown": "bold magenta"}
_VERDICT_TEXT = {"runs_as_is": "runs natively", "runs_after_conversion": "runs after conversion",
                 "runs_emulated": "runs emulated (no native matmul for it)",
                 "does_not_load_correctly": "does not load correctly", "cannot_run": "cannot run", "unknown": "unknown (not everything was read or understood)"}


def clean(text: object, limit: int = 200) -> str:
    """Untrusted text made safe to print in a terminal through rich markup."""
    s = str(text)
    out = []
    for ch in s:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    s = "".join(out)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return escape(s)


def plain(text: object, limit: int = 400) -> str:
    """Untrusted text for a plain (non-rich) stderr line: control characters escaped."""
    s = "".join(
        (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") else ch
        for ch in str(text)
    )
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _pct(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.2%}" if x >= 1e-4 else f"{x:.1e}"


def _n(count: int, word: str, plural: str | None = None) -> str:
    """``1 error``, ``2 errors``."""
    return f"{count:,} {word if count == 1 else (plural or word + 's')}"


def print_report(result: AuditResult, *, file: TextIO | None = None, show_all: bool = False,
                 max_rows: int = 50, verbose: bool = False) -> None:
    """The terminal view of an audit. Reads the tensors once, keeping only the rows it prints."""
    from rich.table import Table

    console = terminal_console(file=file)
    summary = result.summary
    console.print(
        f"[bold]fp8check audit[/]: {_n(summary.files, 'file')}, {_n(summary.tensors, 'tensor')}, "
        f"{summary.fp8_tensors:,} FP8 ({format_bytes(summary.fp8_bytes)}), "
        + (f"{summary.packed_tensors:,} packed FP4 ({format_bytes(summary.packed_bytes)}), "
           if summary.packed_tensors else "")
        + f"{_n(summary.scale_tensors, 'scale')}, "
        f"{summary.seconds:.2f} s"
    )
    if summary.unknown:  # no verdict: said first, before anything that could read as one
        console.print("[bold magenta]verdict unknown[/]: " + clean("; ".join(summary.unknown), 600))
    for f in result.files:
        if f.status == "error":
            console.print(f"  [bold red]unreadable[/] {clean(f.path)}: {clean(f.error or '', 300)}")
        elif f.status == "skipped" and verbose:
            console.print(f"  [dim]skipped {clean(f.path)}: {clean(f.reason or '')}[/]")

    shown_severities = ("error", "warning", "info") if (show_all or verbose) else ("error", "warning")
    # picked from each row's brief (name, role, worst severity); only the rows shown are read back
    picked: list[int] = []
    n_rows = 0
    for i, b in enumerate(result.tensors.briefs()):
        if not (b.role == "fp8" or b.severity):
            continue
        if not show_all and b.severity not in shown_severities:
            continue
        n_rows += 1
        if len(picked) < max_rows:
            picked.append(i)
    rows: list[TensorResult] = result.tensors.get(picked)
    if rows:
        table = Table(title="tensors" if show_all else "tensors with findings", title_justify="left",
                      show_lines=False, header_style="bold")
        for col, kw in (("tensor", {"overflow": "fold", "max_width": 60}), ("file", {"max_width": 28}),
                        ("format", {}), ("shape", {}), ("scale", {"no_wrap": True}), ("codes used", {"justify": "right"}),
                        ("zero share", {"justify": "right"}), ("at ±max", {"justify": "right"}), ("findings", {})):
            table.add_column(col, **kw)
        for t in rows:
            s = t.stats
            gran = t.scale.granularity.name if t.scale is not None and t.scale.granularity is not None else None
            found = ", ".join(
                f"[{_SEVERITY_STYLE[f.severity]}]{f.code}[/] {f.count}"
                for f in t.findings if f.severity in shown_severities or show_all)
            table.add_row(
                clean(t.name, 120), clean(os.path.basename(t.file), 40), clean(t.format or t.dtype or "-"),
                clean(list(t.shape) if t.shape is not None else None),
                clean(gran or _no_scale(t)),
                f"{s.codes_used}" if s else "-", _pct(s.zero_share) if s else "-",
                f"{s.saturated}" if s else "-", found or ("[magenta]not read[/]" if t.note else "[green]ok[/]"),
            )
        console.print(table)
        if n_rows > max_rows:
            console.print(f"  … {n_rows - max_rows} more (see --json; --max-rows N)")

    by_code = summary.findings_by_code
    if by_code:
        table = Table(title="findings", title_justify="left", header_style="bold")
        for col in ("code", "severity", "tensors", "count", "what"):
            table.add_column(col, justify="right" if col in ("tensors", "count") else "left")
        order = sorted(by_code.items(), key=lambda kv: ({"error": 0, "warning": 1, "info": 2}[kv[1]["severity"]], kv[0]))
        for code, agg in order:
            title = FINDING_CODES[code].title if code in FINDING_CODES else ""
            table.add_row(code, f"[{_SEVERITY_STYLE[agg['severity']]}]{agg['severity']}[/]", str(agg["tensors"]),
                          str(agg["count"]), escape(title))
        console.print(table)
    elif summary.fp8_tensors:
        console.print("[green]no findings[/]")

    for p in result.portability:
        style = _VERDICT_STYLE[p.verdict]
        errors = (f": {_n(sum(p.errors.values()), 'error')} ({', '.join(p.errors)})"
                  if p.verdict == "does_not_load_correctly" else "")
        console.print(f"[bold]{escape(p.target)}[/] ({escape(', '.join(p.formats))}): "
                      f"[{style}]{_VERDICT_TEXT[p.verdict]}{errors}[/]")
        reasons = p.reasons if verbose else p.reasons[:6]
        for r in reasons:
            console.print(f"    {clean(r, 300)}")
        if len(p.reasons) > len(reasons):
            console.print(f"    … {len(p.reasons) - len(reasons)} more")

    code = summary.exit_code
    style = "bold red" if code else "bold green"
    console.print(
        f"[{style}]{_n(summary.errors, 'error')}, {_n(summary.warnings, 'warning')}, {_n(summary.infos, 'info')}; "
        f"{_n(summary.unreadable_files, 'unreadable file')}"
        + ("; verdict unknown" if summary.unknown else "") + f"; exit {code}[/]")


def _no_scale(t: TensorResult) -> str:
    """The scale column of a tensor without a paired scale: "missing", or "unpaired scale NAME"
    (NAME from the tensor's module on: ``q_proj.scale``) when a scale-like name next to it pairs with nothing."""
    if t.role != "fp8" or t.scale is not None:
        return "-"
    for f in t.findings:
        if f.code == "SCALE_UNPAIRED" and f.message.startswith("unpaired scale "):
            name = f.message[len("unpaired scale "):].partition(":")[0]
            parent = t.name.rpartition(".")[0].rpartition(".")[0]  # keep the module's own name
            return "unpaired scale " + (name[len(parent) + 1:] if parent and name.startswith(parent + ".") else name)
    return "missing"

"""Terminal output of an audit (rich): renders the audit's result types only.

Everything taken from a file (tensor names, paths, metadata, messages that
quote them) is untrusted: control and format characters are shown as
escapes (no terminal escape sequences or bidi tricks get through) and rich
markup is escaped (``rich.markup.escape``) before printing.
"""

from __future__ import annotations

import os
import unicodedata
from typing import Any, TextIO

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
                 "does_not_load_correctly": "does not load correctly", "cannot_run": "cannot run",
                 "unknown": "unknown (not everything was read or understood)"}


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
        _tensor_table(console, rows, title="tensors" if show_all else "tensors with findings",
                      shown=shown_severities)
        if n_rows > max_rows:
            console.print(f"  … {n_rows - max_rows} more (see --json; --max-rows N)")
        _finding_messages(console, rows, shown=shown_severities, limit=None if verbose else MESSAGES_SHOWN)

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


# the tensor table's columns, dropped in this order where the console is too narrow for the names to stay whole
_OPTIONAL_COLUMNS = ("codes used", "zero share", "at ±max", "shape", "file", "scale", "format")
MESSAGES_SHOWN = 10  # finding messages printed without -v (every shown row's with it)


def _tensor_table(console: Any, rows: list[TensorResult], *, title: str, shown: tuple[str, ...]) -> None:
    """The tensor table, its columns chosen so that tensor names are never broken mid-word: on a narrow
    console the optional columns go first (the JSON keeps them); a name wider than the console still folds."""
    from rich.table import Table

    columns: dict[str, list[tuple[str, str]]] = {c: [] for c in (
        "tensor", "file", "format", "shape", "scale", "codes used", "zero share", "at ±max", "findings")}
    for t in rows:
        s = t.stats
        gran = t.scale.granularity.name if t.scale is not None and t.scale.granularity is not None else None
        found = [(f"[{_SEVERITY_STYLE[f.severity]}]{f.code}[/] {f.count}", f"{f.code} {f.count}")
                 for f in t.findings if f.severity in shown]
        shape = str(list(t.shape)) if t.shape is not None else "None"
        for col, cell in (
                ("tensor", (clean(t.name, 120), plain(t.name, 120))),
                ("file", (clean(os.path.basename(t.file), 40), plain(os.path.basename(t.file), 40))),
                ("format", (clean(t.format or t.dtype or "-"), plain(t.format or t.dtype or "-"))),
                ("shape", (clean(shape), shape)), ("scale", (clean(gran or _no_scale(t)), gran or _no_scale(t))),
                ("codes used", (f"{s.codes_used}" if s else "-",) * 2),
                ("zero share", (_pct(s.zero_share) if s else "-",) * 2),
                ("at ±max", (f"{s.saturated}" if s else "-",) * 2),
                ("findings", (", ".join(r for r, _ in found), max((p for _, p in found), key=len, default="ok"))
                 if found else (("[magenta]not read[/]", "not read") if t.note else ("[green]ok[/]", "ok")))):
            columns[col].append(cell)

    def width(col: str) -> int:  # the narrowest the column can be without breaking a word of it
        words = [w for _, text in columns[col] for w in (text.split() if col not in ("tensor", "file") else [text])]
        return max(len(w) for w in words + col.split()) + 3  # padding and the border

    total = 1 + sum(width(c) for c in columns)
    for col in _OPTIONAL_COLUMNS:
        if total <= console.width:
            break
        total -= width(col)
        del columns[col]
    # what is left for the names: all of them when it fits, else they fold (a name wider than the console)
    room = console.width - (total - width("tensor")) - 3
    table = Table(title=title, title_justify="left", show_lines=False, header_style="bold")
    for col in columns:
        kw: dict[str, Any] = {"justify": "right"} if col in ("codes used", "zero share", "at ±max") else {}
        if col == "tensor":
            kw = {"overflow": "fold", "min_width": max(6, min(width(col) - 3, room, 120)), "max_width": 120}
        elif col == "file":
            kw = {"overflow": "fold", "max_width": 40}
        elif col in ("format", "shape", "scale"):
            kw = {"no_wrap": True}
        table.add_column(col, **kw)
    for i in range(len(rows)):
        table.add_row(*(columns[c][i][0] for c in columns))
    console.print(table)


def _finding_messages(console: Any, rows: list[TensorResult], *, shown: tuple[str, ...],
                      limit: int | None) -> None:
    """Each shown finding's own message (what the JSON holds: the tensor, the values, what a loader does), under
    its tensor's name, wrapped at spaces with a hanging indent; at most ``limit`` of them."""
    from rich.table import Table

    total = sum(1 for t in rows for f in t.findings if f.severity in shown)
    if not total:
        return
    console.print("[bold]what the findings say[/]")
    left = total if limit is None else limit
    for t in rows:
        mine = [f for f in t.findings if f.severity in shown][:left]
        if not mine:
            continue
        left -= len(mine)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)  # the codes, two spaces in
        grid.add_column(overflow="fold")  # the message: wrapped at spaces, folded only for a word wider than it
        for f in mine:
            grid.add_row(f"  [{_SEVERITY_STYLE[f.severity]}]{f.code}[/]", clean(f.message, 1000))
        console.print(f"[bold]{clean(t.name, 400)}[/]")
        console.print(grid)
    if limit is not None and total > limit:
        console.print(f"  … {total - limit} more (-v shows every one; --json)")


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

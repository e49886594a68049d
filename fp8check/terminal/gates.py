"""A gate report as terminal tables: one per gate, a row per defect (and view).

Works on :class:`fp8check.gates.GateReport` by its attributes; computes no verdict.
"""

from __future__ import annotations

from typing import Any

__all__ = ["print_gate_report"]

_STATUS = {"accepted": "[bold red]ACCEPTED[/]", "rejected": "[green]rejected[/]", "blind": "[yellow]blind[/]",
           "n/a": "[dim]n/a[/]"}


def print_gate_report(report: Any, out: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    r = report.recipe
    kernel = ("the recipe's reference" if report.kernel_conforms is None else
              f"{report.kernel} ({'conforms: its own output' if report.kernel_conforms else 'DIVERGES from the recipe: the reference output'})")
    out.print(f"recipe {escape(r.name)}: {escape(r.summary())}")
    out.print(f"correct output: {escape(kernel)}; compared in {report.dtype} against the "
              f"{'correct output' if report.expected == 'reference' else 'unquantized input'}; "
              f"{report.inputs} input(s) per defect, seed {report.seed}")
    for v in report.verdicts:
        accepted, judged = v.rate()
        table = Table(title=f"{escape(v.gate)}: {escape(v.title)}", title_justify="left", show_lines=False)
        for col in ("defect", "magnitude", "view", "gate", "largest accepted", "fp8check"):
            table.add_column(col)
        for o in v.outcomes:
            d = o.defect
            largest = "" if o.largest_accepted is None else (d.magnitude_text(o.largest_accepted) if d.sweep else "yes")
            fp8 = {"rejected": "rejects", "accepted": "[red]accepts[/]", "n/a": "n/a", "not run": "not run"}[o.fp8check]
            table.add_row(escape(d.name), escape(d.magnitude_text()), escape(o.view),
                          _STATUS[o.status] + (f" ({o.accepted_on}/{o.judged})" if o.status == "accepted" else ""),
                          escape(largest), fp8)
        out.print()
        out.print(table)
        out.print(f"source: {escape(v.source)}")
        out.print(f"lets through {accepted} of {judged} defects present"
                  + (f"; ESCAPES (accepted by the gate, rejected by fp8check): {', '.join(escape(o.defect.name) + ' (' + o.view + ')' for o in v.escapes)}"
                     if v.escapes else ""))
        bad = [k for k, ok in v.correct_accepted.items() if not ok]
        if bad:
            out.print(f"[yellow]the gate rejects the correct output too[/] ({', '.join(bad)})")
    if not report.passed:
        out.print()
        out.print("Replace or back the gate with fp8check's exact check of the declared recipe:")
        for line in report.replacement.splitlines():
            out.print(f"    {escape(line)}")

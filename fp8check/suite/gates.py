"""What ``pytest -m gate`` runs: a declared gate (:mod:`fp8check.gates.declared`) measured on the FP8 defect family.

A failure's message is what ``fp8check gate`` prints for that gate: the defects it lets through
beside fp8check's own check, and the assertion that replaces it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

__all__ = ["GateTarget"]


@dataclass(frozen=True)
class GateTarget:
    """What ``pytest -m gate`` runs: one declared gate measured on the defect family."""

    declaration: Any  # fp8check.gates.declared.GateDeclaration

    @property
    def id(self) -> str:
        return self.declaration.name

    def check(self) -> Any:
        from fp8check.terminal import console
        from fp8check.terminal.gates import print_gate_report

        report = self.declaration.measure()
        if not report.passed:
            buf = io.StringIO()
            print_gate_report(report, console(file=buf))
            raise AssertionError(f"\nthe gate {self.declaration.gate} lets FP8 defects through that fp8check "
                                 f"rejects:\n{buf.getvalue()}  or: {self.declaration.command()}")
        return report

"""What ``pytest -m training`` runs: a declared model's training step in one FP8 format, and its loss gates.

A :class:`TrainingTarget` is one ``[[tool.fp8check.training]]`` declaration
(:mod:`fp8check.training.declared`) in one format (``fmt``), or, with ``fmt`` None, its loss parity
(BF16 and every declared format, the anchors' gates, the golden curves found in its ``golden-dir``).
A failure's message is what ``fp8check train`` prints, with the first flagged casts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TrainingTarget"]


@dataclass(frozen=True)
class TrainingTarget:
    declaration: Any  # TrainingDeclaration
    fmt: str | None = None

    @property
    def id(self) -> str:
        return f"{self.declaration.name}-{self.fmt or 'loss'}"

    @property
    def fmt_name(self) -> str | None:
        return self.fmt

    def check_step(self) -> Any:
        from fp8check.terminal.training import flagged_lines, step_line

        step = self.declaration.check_step(self.fmt)
        if not step.passed:
            lines = [step_line(step), *flagged_lines(step)] if step.casts else \
                [f"no FP8 cast was seen in {self.declaration.name}: is it converted with convert_to_float8_training?"]
            raise AssertionError("\n" + "\n".join(lines) + f"\n  or: pytest -k '{self.id}'")
        return step

    def check_loss(self) -> Any:
        from fp8check.terminal.training import divergence_line, gate_line, golden_line

        parity, goldens = self.declaration.loss_parity()
        if not parity.passed or not all(g.passed for g in goldens):
            lines = [gate_line(g) for g in parity.gates] + [divergence_line(d) for d in parity.divergences] + \
                [golden_line(g) for g in goldens]
            raise AssertionError("\n" + "\n".join(lines) + f"\n  or: pytest -k '{self.id}'")
        return parity, goldens

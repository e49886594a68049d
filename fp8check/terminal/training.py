"""Training results as terminal lines: one helper for ``fp8check train`` and the ``-m training`` tests.

Works on the result objects of :mod:`fp8check.training` (StepConformance, Gate, Divergence,
GoldenComparison, DistributedConformance) by their attributes; imports nothing from the engine.
"""

from __future__ import annotations

from typing import Any

__all__ = ["step_line", "flagged_lines", "gate_line", "divergence_line", "golden_line", "distributed_lines"]


def _categories(result: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in result.categories.items() if v) or "none"


def step_line(s: Any) -> str:
    return (f"step {s.recipe} {s.format}: {len(s.casts)} casts, {len(s.gemms)} GEMMs, "
            f"{'conform' if s.passed else 'DIVERGE'} (flagged: {_categories(s)})")


def flagged_lines(result: Any, limit: int = 8) -> list[str]:
    """The first flagged casts and GEMMs of a step or distributed result, one line each."""
    lines = []
    bad = [c for c in result.casts if not c.passed]
    for c in bad[:limit]:
        where = f" rank {c.rank} {c.placement}" if getattr(c, "placement", "") else ""
        lines.append(f"  step {c.step}{where} layer {c.layer} {c.operand} [{c.category}] {c.detail}")
    if len(bad) > limit:
        lines.append(f"  ... and {len(bad) - limit} more flagged casts")
    for g in [g for g in result.gemms if not g.passed][:limit]:
        lines.append(f"  step {g.step} {g.layer} {g.gemm} ({g.formats}, K={g.K}) [gemm-bound] {g.violations} of "
                     f"{g.checked} outputs past the derived bound (largest error {g.max_ratio:.3g} x the bound)")
    return lines


def gate_line(g: Any) -> str:
    return f"{'pass' if g.passed else 'FAIL'}  {g.name}: {g.value:.6g} (gate {g.threshold:g}; {g.source})" + \
        (f" {g.detail}" if g.detail else "")


def divergence_line(d: Any) -> str:
    beyond = f" (beyond {d.rel_tol})" if getattr(d, "rel_tol", None) else ""
    loss = f"loss parts at step {d.step}" if d.step is not None else "loss never parts"
    layer = (f"first layer output differs at step {d.layer_step} in {d.layer}" if d.layer
             else "no layer output differs")
    return f"{d.a} vs {d.b}{beyond}: {loss}; {layer}"


def golden_line(g: Any) -> str:
    return (f"{'pass' if g.passed else 'FAIL'}  golden {g.platform}: {g.mode}, first difference at step "
            f"{g.first_difference}")


def distributed_lines(d: Any) -> list[str]:
    losses = "; ".join(f"rank {x.rank} {x.mode}: {'pass' if x.passed else 'FAIL'}"
                       + (f", first differs at step {x.first_difference}" if x.first_difference is not None else "")
                       for x in d.losses)
    lines = [f"{'pass' if d.passed else 'FAIL'}  {d.mode} {d.recipe} {d.format} on {d.nproc} processes ({d.backend}): "
             f"{len(d.casts)} casts ({d.sharded_casts} of shards), {len(d.gemms)} GEMMs, flagged: {_categories(d)}; "
             f"loss against one device: {losses}"]
    if not d.passed and d.first_divergence:
        lines.append(f"      first divergence: {d.first_divergence}")
    return lines

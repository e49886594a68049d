"""The gate page: per gate, the defect table (accepted or rejected, the largest accepted magnitude) beside
fp8check's own check, and the assertion that replaces the gate.

Built from the JSON of ``fp8check gate --json`` (collect, then render).
"""

from __future__ import annotations

from typing import Any

from fp8check.outputs import json_ready

__all__ = ["gate_context", "gate_report"]

_BADGE = {"accepted": ("fail", "ACCEPTED"), "rejected": ("pass", "rejected"), "blind": ("warning", "blind"),
          "n/a": ("none", "n/a")}


def gate_context(doc: dict[str, Any], *, title: str | None = None) -> dict[str, Any]:
    gates = []
    for g in doc.get("gates") or []:
        rows = []
        for o in g.get("outcomes") or []:
            cls, text = _BADGE.get(o.get("status"), ("none", str(o.get("status"))))
            rows.append({**o, "badge": cls, "badge_text": text})
        gates.append({**g, "rows": rows, "rate": f"{g.get('accepted', 0)} of {g.get('judged', 0)}"})
    escapes = [(g["gate"], e) for g in gates for e in g.get("escapes") or []]
    verdict = ({"status": "pass", "headline": "EVERY GATE REJECTS WHAT FP8CHECK REJECTS",
                "text": f"{len(gates)} gate(s) on {len(doc.get('defects') or [])} defects"} if doc.get("passed") else
               {"status": "fail", "headline": "A GATE LETS FP8 DEFECTS THROUGH",
                "text": "; ".join(f"{g}: {e}" for g, e in escapes[:12]) + (" ..." if len(escapes) > 12 else "")})
    summary = {"kind": "gate", "passed": bool(doc.get("passed")),
               "gates": [{"gate": g["gate"], "accepted": g.get("accepted"), "judged": g.get("judged")} for g in gates]}
    return {"title": title or f"fp8check gate: {', '.join(g['gate'] for g in gates)} on {doc.get('recipe')}",
            "doc": doc, "gates": gates, "verdict": verdict, "summary": json_ready(summary)}


def gate_report(doc: dict[str, Any], *, title: str | None = None) -> str:
    from fp8check.report.render import render

    return render("gate.html", gate_context(doc, title=title))

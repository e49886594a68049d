"""The training page: loss curves, per-layer heatmaps of the format-twin statistics, the conformance table.

Built from the JSON of ``fp8check train --json`` (collect, then render): everything drawn is inline SVG.
"""

from __future__ import annotations

import math
from typing import Any

from fp8check.outputs import json_float, json_ready

__all__ = ["training_context", "training_report"]

_COLOURS = {"bf16": "#555555", "e4m3fn": "#1f77b4", "e4m3fnuz": "#d62728", "single device": "#555555",
            "rank 0": "#1f77b4", "rank 1": "#d62728"}


def _curves(parity: dict[str, Any], width: int = 640, height: int = 260) -> dict[str, Any]:
    runs = parity.get("runs") or {}
    series = {k: [json_float(x) for x in (v.get("losses") or [])] for k, v in runs.items()}
    values = [x for s in series.values() for x in s if x is not None and math.isfinite(x)]
    if not values:
        return {"width": width, "height": height, "lines": [], "ticks": []}
    lo, hi = min(values), max(values)
    hi = hi if hi > lo else lo + 1
    n = max(len(s) for s in series.values())
    pad = 40

    def xy(i: int, v: float) -> str:
        x = pad + (width - 2 * pad) * (i / max(n - 1, 1))
        y = height - pad - (height - 2 * pad) * ((v - lo) / (hi - lo))
        return f"{x:.1f},{y:.1f}"

    lines = [{"name": k, "colour": _COLOURS.get(k, "#2ca02c"),
              "points": " ".join(xy(i, v) for i, v in enumerate(s) if v is not None and math.isfinite(v))}
             for k, s in series.items()]
    ticks = [{"y": height - pad - (height - 2 * pad) * f, "label": f"{lo + (hi - lo) * f:.3f}"} for f in (0, 0.5, 1)]
    return {"width": width, "height": height, "lines": lines, "ticks": ticks, "steps": n, "pad": pad}


def _cell_colour(value: float | None, lo: float, hi: float, reverse: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "#dddddd"
    t = min(max((value - lo) / (hi - lo), 0.0), 1.0) if hi > lo else 0.5
    if reverse:
        t = 1 - t
    return f"hsl({int(120 * t)}, 70%, 75%)"  # red (bad) to green (good)


def _heatmaps(step: dict[str, Any]) -> list[dict[str, Any]]:
    twins = [t for t in step.get("twins") or [] if t.get("step") == 0]
    layers = list(dict.fromkeys(t["layer"] for t in twins))
    operands = list(dict.fromkeys(t["operand"] for t in twins))
    by = {(t["layer"], t["operand"]): t for t in twins}
    maps = []
    for title, key, idx, lo, hi, reverse in (
            ("SQNR dB", "sqnr_db", None, 15.0, 35.0, False),
            ("underflow %", "underflow_pct", None, 0.0, 5.0, True),
            ("saturated %", "saturated_pct", None, 0.0, 1.0, True)):
        rows = []
        for layer in layers:
            cells = []
            for op in operands:
                t = by.get((layer, op))
                for i in (0, 1):
                    v = json_float(t[key][i]) if t else None
                    cells.append({"text": "" if v is None else (f"{v:.1f}" if math.isfinite(v) else str(v)),
                                  "colour": _cell_colour(v, lo, hi, reverse),
                                  "title": f"{layer} {op} {t['formats'][i] if t else ''}: {title} {v}"})
            rows.append({"layer": layer, "cells": cells})
        maps.append({"title": title, "operands": operands, "rows": rows,
                     "twins": (twins[0]["formats"] if twins else ["", ""])})
    return maps


def training_context(doc: dict[str, Any], *, title: str | None = None) -> dict[str, Any]:
    parity = doc.get("loss_parity") or {}
    steps = doc.get("step_conformance") or []
    conformance = []
    for s in steps:
        flagged = [c for c in s.get("casts") or [] if not c.get("passed")]
        conformance.append({
            "recipe": s.get("recipe"), "format": s.get("format"), "platform": s.get("platform"),
            "passed": s.get("passed"), "casts": len(s.get("casts") or []), "gemms": len(s.get("gemms") or []),
            "categories": {k: v for k, v in (s.get("categories") or {}).items() if v},
            "max_ratio": max((json_float(g.get("max_ratio")) or 0.0 for g in s.get("gemms") or []), default=0.0),
            "flagged": flagged[:50], "heatmaps": _heatmaps(s)})
    distributed = []
    for d in doc.get("distributed") or []:
        distributed.append({
            "mode": d.get("mode"), "description": d.get("description"), "format": d.get("format"),
            "recipe": d.get("recipe"), "nproc": d.get("nproc"), "backend": d.get("backend"), "steps": d.get("steps"),
            "passed": d.get("passed"), "casts": len(d.get("casts") or []), "sharded": d.get("sharded_casts"),
            "gemms": len(d.get("gemms") or []), "categories": {k: v for k, v in (d.get("categories") or {}).items() if v},
            "first": d.get("first_divergence"), "losses": d.get("losses") or [],
            "flagged": [c for c in d.get("casts") or [] if not c.get("passed")][:50],
            "curves": _curves({"runs": {"single device": {"losses": (d.get("reference_losses") or [[]])[0]},
                                        **{f"rank {r}": {"losses": x} for r, x in enumerate(d.get("rank_losses") or [])}}},
                              height=200)})
    passed = bool(doc.get("passed"))
    summary = {"kind": "training", "passed": passed,
               "gates": [{"name": g.get("name"), "passed": g.get("passed")} for g in parity.get("gates") or []]}
    failed = [g.get("name") for g in parity.get("gates") or [] if not g.get("passed")]
    failed += [f"step conformance {c['recipe']} {c['format']}" for c in conformance if not c["passed"]]
    failed += [f"golden {g.get('platform')}" for g in doc.get("goldens") or [] if not g.get("passed")]
    failed += [f"{d['mode']} on {d['nproc']} processes ({d['format']})" for d in distributed if not d["passed"]]
    verdict = {"status": "pass", "headline": "EVERY GATE PASSED",
               "text": f"{len(parity.get('gates') or [])} gates, {len(conformance)} step conformance checks, "
                       f"{len(doc.get('goldens') or [])} golden curves, {len(distributed)} distributed runs"} if passed else \
        {"status": "fail", "headline": "A GATE FAILED", "text": "; ".join(str(x) for x in failed) or "see below"}
    model = parity.get("model") or (doc.get("distributed") or [{}])[0].get("model") or {}
    return {"title": title or f"fp8check training: {parity.get('recipe', '')} on {model.get('name', '')}",
            "distributed": distributed, "has_parity": bool(parity),
            "passed": passed, "verdict": verdict, "curves": _curves(parity), "gates": parity.get("gates") or [],
            "divergences": parity.get("divergences") or [], "goldens": doc.get("goldens") or [],
            "conformance": conformance, "model": model, "summary": json_ready(summary)}


def training_report(doc: dict[str, Any], *, title: str | None = None) -> str:
    from fp8check.report.render import render

    return render("training.html", training_context(doc, title=title))

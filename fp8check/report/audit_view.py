"""What an audit report shows, as plain data for the template.

Reads ``fp8check audit --json`` documents (one or several) and derives what
is drawn: code histograms in value order, scale distributions, the
portability verdicts with their reasons. Every name, path and piece of
metadata stays a string here; the template escapes it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from fp8check import formats, reference
from fp8check.errors import FP8CheckError
from fp8check.report import graphics
from fp8check.report.views import Source

__all__ = ["audit_context", "code_order"]

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2, None: 3, "": 3}
VERDICT = {  # portability verdict -> (status class, words)
    "runs_as_is": ("pass", "runs natively"),
    "runs_after_conversion": ("known", "runs after conversion"),
    "runs_emulated": ("known", "runs emulated: no native matmul for it"),
    "does_not_load_correctly": ("fail", "does not load correctly"),
    "cannot_run": ("fail", "cannot run"),
    "unknown": ("fail", "unknown: not everything was read or understood"),
}
DEFAULT_MAX_DETAILS = 100


@lru_cache(maxsize=None)
def code_order(fmt_name: str) -> tuple[np.ndarray, list[str], list[tuple[int, str]]]:
    """The codes of a format in value order (−max … −0, +0 … +max, then NaN and Inf codes),
    a CSS class per position, and axis ticks (position, label)."""
    fmt = formats.get(fmt_name)
    values = np.asarray(reference.decode_table(fmt), dtype=np.float64)
    codes = np.arange(fmt.code_count)
    negative = (codes & fmt.sign_mask) != 0 if fmt.signed else np.zeros(codes.size, dtype=bool)
    special = ~np.isfinite(values)
    key = np.where(special, np.inf, values)
    order = np.lexsort((~negative, key))  # by value; -0 before +0; NaN/Inf last
    classes = []
    for c in order:
        c = int(c)
        mag = c & fmt.magnitude_mask
        if fmt.is_nan(c):
            classes.append("h-nan")
        elif fmt.is_inf(c):
            classes.append("h-inf")
        elif mag == fmt.max_code:
            classes.append("h-max")
        elif mag == 0 and negative[c]:
            classes.append("h-negzero")
        elif mag == 0:
            classes.append("h-zero")
        elif fmt.has_subnormals and mag < (1 << fmt.mantissa_bits):
            classes.append("h-sub")
        else:
            classes.append("h-bar")
    position = {int(c): i for i, c in enumerate(order)}
    ticks = []
    for value, label in ((-fmt.max, f"−{fmt.max:g}"), (-1.0, "−1"), (0.0, "0"), (1.0, "1"), (fmt.max, f"{fmt.max:g}")):
        hits = np.flatnonzero((values == value) & (~negative if value == 0 else True))
        if hits.size:
            ticks.append((position[int(hits[0])], label))
    first_special = int(np.flatnonzero(special[order])[0]) if special.any() else None
    if first_special is not None and all(abs(first_special - p) >= 16 for p, _ in ticks):
        ticks.append((first_special, "NaN" + ("/Inf" if fmt.has_inf else "")))
    return order, classes, ticks


def _fmt_ok(name: Any) -> bool:
    try:
        formats.get(str(name))
        return True
    except FP8CheckError:
        return False


def _histogram(t: dict[str, Any]) -> Any:
    stats = t.get("stats") or {}
    hist = stats.get("histogram")
    fmt = stats.get("format") or t.get("format")
    if not isinstance(hist, list) or not _fmt_ok(fmt):
        return None
    order, classes, ticks = code_order(str(fmt))
    if len(hist) != len(order):
        return None
    counts = np.asarray(hist, dtype=np.float64)[order]
    return graphics.histogram_svg(counts, classes=classes, x_ticks=ticks,
                                  title=f"code counts of {t.get('name', '')} ({fmt}), in value order, log scale")


def _scale_histogram(t: dict[str, Any]) -> Any:
    stats = (t.get("scale") or {}).get("stats") or t.get("scale_stats") or {}
    fine = stats.get("log2_histogram_fine") or {}
    counts, lo, per = fine.get("counts"), fine.get("min_bin"), fine.get("bins_per_octave")
    if not counts or lo is None or not per or len(counts) < 2:
        return None
    counts = [int(c) for c in counts]
    ticks = [(i, f"2^{(lo + i) // per}") for i in range(len(counts)) if (lo + i) % per == 0]
    ticks = ticks[::max(1, len(ticks) // 6)]
    if len(ticks) < 2:  # within an octave or two: the bins' lower edges, as numbers
        ticks = [(0, f"{2.0 ** (lo / per):.3g}"), (len(counts) - 1, f"{2.0 ** ((lo + len(counts) - 1) / per):.3g}")]
    return graphics.histogram_svg(counts, x_ticks=ticks, log=False, width=360, height=110,
                                  title=f"scales of {t.get('name', '')}: count per eighth of an octave")


def _scale_text(t: dict[str, Any]) -> str:
    sc = t.get("scale")
    if not sc:
        return ""
    gran = (sc.get("granularity") or {}).get("name") or "?"
    return f"{gran} · {sc.get('dtype', '')} {sc.get('shape', '')}"


def _tensor_row(t: dict[str, Any], source: Source, index: int) -> dict[str, Any]:
    stats = t.get("stats") or {}
    findings = [f for f in t.get("findings", []) if isinstance(f, dict)]
    findings.sort(key=lambda f: (SEVERITY_RANK.get(f.get("severity"), 3), str(f.get("code"))))
    file = str(t.get("file") or "")
    return {
        "anchor": f"t{index}",
        "name": str(t.get("name", "")),
        "file": file,
        "file_short": file.replace("\\", "/").rsplit("/", 1)[-1],
        "source": source.short,
        "role": str(t.get("role") or ""),
        "dtype": str(t.get("dtype") or ""),
        "format": str(t.get("format") or ""),
        "shape": t.get("shape"),
        "numel": t.get("numel"),
        "scale": _scale_text(t),
        "stats": stats,
        "severity": t.get("severity") or "",
        "rank": SEVERITY_RANK.get(t.get("severity"), 3),
        "findings": findings,
        "t": t,
    }


def _detail(row: dict[str, Any]) -> dict[str, Any]:
    t = row["t"]
    sc = t.get("scale") or {}
    scale_stats = sc.get("stats") or t.get("scale_stats") or {}
    return dict(row, histogram=_histogram(t), scale_histogram=_scale_histogram(t), scale_info=sc,
                scale_stats=scale_stats, conversions=t.get("conversions") or {})


def _n(count: int, word: str) -> str:
    return f"{count:,} {word if count == 1 else word + 's'}"


def _verdict(summary: dict[str, Any], portability: Sequence[dict[str, Any]] = ()) -> dict[str, str]:
    errors, warnings, infos = (int(summary.get(k, 0) or 0) for k in ("errors", "warnings", "infos"))
    unreadable = int(summary.get("unreadable_files", 0) or 0)
    parts = [_n(errors, "error"), _n(warnings, "warning"), _n(infos, "info")]
    where = (f" in {_n(int(summary.get('fp8_tensors', 0) or 0), 'FP8 tensor')} "
             f"({_n(int(summary.get('tensors', 0) or 0), 'tensor')}, "
             f"{_n(int(summary.get('files', 0) or 0), 'file')})")
    text = ", ".join(parts) + where
    unknown = [str(u) for u in summary.get("unknown") or []] if isinstance(summary.get("unknown"), list) else []
    if not unknown and any(p.get("verdict") == "unknown" for p in portability):
        unknown = ["not everything was read"]
    if unreadable:
        text += f"; {_n(unreadable, 'file')} could not be read safely"
    if unknown:  # no verdict: said first, whatever else was found
        return {"status": "fail", "headline": "VERDICT UNKNOWN", "text": "; ".join(unknown) + ". " + text}
    if unreadable or errors:
        head = "UNREADABLE FILES" if unreadable and not errors else "ERRORS"
        return {"status": "fail", "headline": head, "text": text}
    if warnings:
        return {"status": "known", "headline": "WARNINGS", "text": text}
    return {"status": "pass", "headline": "CLEAN", "text": text}


def _portability(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in doc.get("portability") or []:
        if not isinstance(p, dict):
            continue
        status, words = VERDICT.get(str(p.get("verdict")), ("none", str(p.get("verdict"))))
        out.append(dict(p, status=status, words=words))
    return out


def _findings_table(doc: dict[str, Any]) -> list[dict[str, Any]]:
    codes = doc.get("finding_codes") or {}
    rows = []
    for code, agg in ((doc.get("summary") or {}).get("findings_by_code") or {}).items():
        info = codes.get(code) or {}
        rows.append({"code": code, "severity": agg.get("severity", ""), "tensors": agg.get("tensors", 0),
                     "count": agg.get("count", 0), "title": info.get("title", ""), "rule": info.get("rule", "")})
    rows.sort(key=lambda r: (SEVERITY_RANK.get(r["severity"], 3), r["code"]))
    return rows


def audit_context(sources: Sequence[Source], *, title: str | None = None, max_rows: int = 2000,
                  max_details: int = DEFAULT_MAX_DETAILS) -> dict[str, Any]:
    audits = []
    rows: list[dict[str, Any]] = []
    omitted = 0
    for s in sources:
        doc = s.data
        summary = doc.get("summary") or {}
        audits.append({
            "name": s.name, "short": s.short, "paths": [str(p) for p in doc.get("paths") or []],
            "summary": summary, "verdict": _verdict(summary, _portability(doc)), "portability": _portability(doc),
            "findings": _findings_table(doc), "files": [f for f in doc.get("files") or [] if isinstance(f, dict)],
            "checkpoints": [c for c in doc.get("checkpoints") or [] if isinstance(c, dict)],
            "options": doc.get("options") or {}, "thresholds": doc.get("thresholds") or {},
            "environment": s.environment,
        })
        for t in doc.get("tensors") or []:
            if isinstance(t, dict):
                rows.append(_tensor_row(t, s, len(rows)))
        if isinstance(doc.get("tensors_omitted"), int) and doc["tensors_omitted"] > 0:
            omitted += doc["tensors_omitted"]
    rows.sort(key=lambda r: (r["rank"], r["role"] != "fp8", r["name"]))
    fp8 = [r for r in rows if r["role"] == "fp8" and isinstance(r["stats"].get("histogram"), list)]
    detailed = fp8[:max_details] if max_details >= 0 else fp8
    detailed_ids = {r["anchor"] for r in detailed}
    for r in rows:
        r["detailed"] = r["anchor"] in detailed_ids
    shown = rows[:max_rows] if max_rows >= 0 else rows
    worst = min((a["verdict"]["status"] for a in audits), key=lambda s: {"fail": 0, "known": 1, "pass": 2}[s],
                default="pass")
    verdict = next(a["verdict"] for a in audits if a["verdict"]["status"] == worst) if audits else \
        {"status": "empty", "headline": "NO AUDIT", "text": ""}
    if len(audits) > 1:
        verdict = dict(verdict, text=f"{len(audits)} audits; worst: " + verdict["text"])
    return {
        "title": title or "fp8check audit report",
        "verdict": verdict,
        "audits": audits,
        "multi_source": len(audits) > 1,
        "rows": shown,
        "total_rows": len(rows) + omitted,
        "details": [_detail(r) for r in detailed],
        "fp8_count": len(fp8),
        "roles": sorted({r["role"] for r in rows if r["role"]}),
        "one_file": len({r["file"] for r in rows}) <= 1,
        "formats_seen": sorted({r["format"] for r in rows if r["format"]}),
        "severities": [s for s in ("error", "warning", "info") if any(r["severity"] == s for r in rows)],
        "max_rows": max_rows,
        "max_details": max_details,
        "summary": {
            "fp8check_report": 1, "kind": "audit", "verdict": verdict["status"],
            "audits": [{"paths": a["paths"], "errors": a["summary"].get("errors"),
                        "warnings": a["summary"].get("warnings"), "infos": a["summary"].get("infos"),
                        "verdicts": a["summary"].get("verdicts")} for a in audits],
            "tensors": [{"name": r["name"], "severity": r["severity"] or None,
                         "findings": {f.get("code"): f.get("count") for f in r["findings"]}}
                        for r in rows if r["findings"]][:max(max_rows, 0)],
        },
    }

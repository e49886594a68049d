"""HTML reports: divergence reports, comparisons of two runs, audit reports.

Collect, then render: the suite and the audit write JSON (every count,
every reproducer listed, the per-input map of each 16-bit sweep); this
package only reads such data and renders one self-contained HTML file
(inline CSS and SVG/PNG, no network at view time, light and dark themes,
printable).

>>> html = divergence_report([Source("run.json", environment(), [result])])
>>> write_html("report.html", html)
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from fp8check.errors import InvalidValueError
from fp8check.report.documents import load_source, load_sources, source_from_audit, source_from_results
from fp8check.report.render import write_html
from fp8check.report.views import DEFAULT_MAX_ROWS, Source

__all__ = [
    "Source",
    "load_source",
    "load_sources",
    "source_from_results",
    "source_from_audit",
    "divergence_report",
    "comparison_report",
    "audit_report",
    "report_from_files",
    "write_html",
    "DEFAULT_MAX_ROWS",
]


def divergence_report(sources: Sequence[Source], *, title: str | None = None,
                      max_rows: int = DEFAULT_MAX_ROWS) -> str:
    """The divergence report of every check in ``sources`` (several files are merged)."""
    from fp8check.report.render import render
    from fp8check.report.views import divergence_context

    return render("divergence.html", divergence_context(sources, title=title, max_rows=max_rows))


def comparison_report(a: Source, b: Source, *, title: str | None = None, cap: int = 20) -> str:
    """What changed from run ``a`` to run ``b``."""
    from fp8check.report.render import render
    from fp8check.report.views import comparison_context

    return render("compare.html", comparison_context(a, b, title=title, cap=cap))


def audit_report(sources: Sequence[Source], *, title: str | None = None, max_rows: int = 2000) -> str:
    """The report of one or more ``fp8check audit --json`` documents."""
    from fp8check.report.audit_view import audit_context
    from fp8check.report.render import render

    return render("audit.html", audit_context(sources, title=title, max_rows=max_rows))


def report_from_files(paths: Sequence[str | Path], *, compare: bool = False, title: str | None = None,
                      max_rows: int | None = None) -> str:
    """Render saved JSON files: results (merged), audits (merged), one gate report, or a comparison of two results
    files."""
    sources = load_sources(paths)
    kinds = {s.kind for s in sources}
    if len(kinds) > 1:
        raise InvalidValueError(f"cannot mix {' and '.join(sorted(kinds))} files in one report: render them separately")
    if compare:
        if len(sources) != 2:
            raise InvalidValueError(f"--compare takes exactly two results files (A B), got {len(sources)}")
        if kinds != {"results"}:
            raise InvalidValueError("--compare compares two results files (of fp8check check or the pytest plugin)")
        return comparison_report(sources[0], sources[1], title=title)
    if kinds == {"gate"}:
        if len(sources) != 1:
            raise InvalidValueError("a gate report renders one gate JSON file (fp8check gate --json) on its own")
        from fp8check.report.gate_view import gate_report

        return gate_report(sources[0].data, title=title)
    if kinds == {"audit"}:
        return audit_report(sources, title=title, **({"max_rows": max_rows} if max_rows is not None else {}))
    return divergence_report(sources, title=title, **({"max_rows": max_rows} if max_rows is not None else {}))

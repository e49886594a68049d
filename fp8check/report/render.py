"""Templates to HTML: one self-contained file per report.

The templates ship inside the package (``fp8check/report/templates``) and
are rendered with autoescaping on for everything: names, metadata and
messages taken from results or checkpoints always reach the page as text.
The style sheet and the small sorting/filtering script are inlined; nothing
is loaded from the network when the page is viewed.
"""

from __future__ import annotations

import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any


__all__ = ["environment", "render", "write_html"]


@lru_cache(maxsize=1)
def environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fp8check.report", "templates"),
        autoescape=True,  # every template, whatever its extension
        # A field missing from a (hand-edited, older or newer) JSON renders empty, it does not crash.
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["count"] = _count
    env.filters["signed"] = _signed
    env.filters["bytes"] = _bytes
    env.filters["pct"] = _pct
    env.filters["wbr"] = _wbr
    env.globals["asset"] = _asset
    return env


@lru_cache(maxsize=None)
def _asset(name: str) -> Any:
    """A style sheet or script shipped next to the templates, inlined verbatim (it is ours, not data)."""
    from importlib.resources import files

    from markupsafe import Markup

    text = files("fp8check.report").joinpath("templates", name).read_text(encoding="utf-8")
    if "</" + ("style" if name.endswith(".css") else "script") in text.lower():
        raise ValueError(f"asset {name} must not close its own element")
    return Markup(text)


def _wbr(value: Any) -> Any:
    """Escaped text with line-break opportunities after dots, slashes and underscores (long tensor names)."""
    from markupsafe import Markup, escape

    text = str(escape("" if _missing(value) else value))
    for ch in "./_":
        text = text.replace(ch, ch + "<wbr>")
    return Markup(text)


def _missing(value: Any) -> bool:
    import jinja2

    return value is None or isinstance(value, jinja2.Undefined) or (isinstance(value, str) and value == "")


def _num(value: Any) -> str:
    if _missing(value):
        return ""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.4g}"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def _count(value: Any, word: str, plural: str | None = None) -> str:
    """``1 error``, ``2 errors``, ``1,024 tensors``: a number with its noun in the right number."""
    if _missing(value):
        return ""
    try:
        one = int(value) == 1 and float(value) == 1
    except (TypeError, ValueError):
        one = False
    return f"{_num(value)} {word if one else (plural or word + 's')}"


def _signed(value: Any) -> str:
    if _missing(value):
        return ""
    try:
        v = int(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{v:+,}" if v else "0"


def _bytes(value: Any) -> str:
    from fp8check.terminal import format_bytes

    if _missing(value):
        return ""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return ""
    return format_bytes(v)


def _pct(value: Any, digits: int = 2) -> str:
    if _missing(value):
        return ""
    try:
        v = float(value) * 100
    except (TypeError, ValueError):
        return ""
    if v == 0:
        return "0%"
    if abs(v) < 10 ** -digits:
        return f"<{10 ** -digits:g}%"
    return f"{v:.{digits}f}%"


def render(template: str, context: dict[str, Any]) -> str:
    from fp8check import __version__

    ctx = dict(context)
    ctx.setdefault("fp8check_version", __version__)
    ctx.setdefault("generated", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    return environment().get_template(template).render(**ctx)


def write_html(path: str | Path, html: str, what: str = "--html") -> int:
    """Write the page atomically; return its size in bytes. An unwritable path is an InvalidValueError."""
    from fp8check.outputs import write_text

    return write_text(path, html, what)

"""Helpers of the report tests: parse pages with lxml, read PNGs with Pillow, drive headless Chromium."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

lxml_html = __import__("pytest").importorskip("lxml.html")
Image = __import__("pytest").importorskip("PIL.Image")


def parse(html: str):
    """The page as an lxml tree (a real HTML parser, as a browser would read it)."""
    return lxml_html.document_fromstring(html)


def has_class(cls: str) -> str:
    """An XPath predicate: the element's class list contains ``cls``."""
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {cls} ')"


def text(el) -> str:
    return " ".join(el.text_content().split())


def card_bits(card, row: str) -> tuple[str, str]:
    """(all bits, the mask of bits marked as differing: '1' where marked) of one row of a reproducer card."""
    spans = card.xpath(f".//tr[@data-row='{row}']//span[{has_class('bits')}]//span[{has_class('b')}]")
    bits = "".join(s.text_content() for s in spans)
    marked = "".join("1" if "d" in (s.get("class") or "").split() else "0" for s in spans)
    return bits, marked


def png_from_data_uri(uri: str) -> np.ndarray:
    assert uri.startswith("data:image/png;base64,"), uri[:40]
    image = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    return np.asarray(image.convert("RGBA"))


def external_references(tree) -> list[str]:
    """Every attribute or style that would make the page load something."""
    found = []
    for el in tree.iter():
        if not isinstance(el.tag, str):
            continue
        for attr in ("src", "href", "xlink:href", "action", "data", "poster", "srcset"):
            value = el.get(attr)
            if value is not None and not (value.startswith("#") or value.startswith("data:")):
                found.append(f"<{el.tag} {attr}={value[:60]}>")
        if el.tag == "link":
            found.append("<link>")
    for style in tree.xpath("//style"):
        css = style.text_content()
        if re.search(r"@import|url\(\s*['\"]?(?!data:)", css):
            found.append("style with @import or url()")
    return found


# -- Chromium ----------------------------------------------------------------------

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
    # Nothing may leave the machine, whatever the page asks for.
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
DARK = ["--force-dark-mode", "--blink-settings=preferredColorScheme=0"]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class BrowserRun:
    dom: str
    console: list[str]  # every console message the page produced
    page_requests: list[str]  # every URL the page asked the network for
    stderr: str


def _page_requests(netlog: Path) -> list[str]:
    if not netlog.exists():
        return []
    try:
        doc = json.loads(netlog.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError:  # Chromium may leave the log unterminated
        doc = json.loads(netlog.read_text(encoding="utf-8", errors="replace").rstrip().rstrip(",") + "]}")
    out = []
    for ev in doc.get("events", []):
        p = ev.get("params") or {}
        # Requests of the page carry its (file://) origin; the browser's own carry none.
        if "url" in p and "file://" in str(p.get("network_isolation_key", "")):
            out.append(p["url"])
    return sorted(set(out))


def run_chromium(page: Path, workdir: Path, *, screenshot: Path | None = None, dark: bool = False,
                 size: tuple[int, int] = (1280, 2400), pdf: Path | None = None, timeout: int = 120) -> BrowserRun:
    """Open ``page`` in a fresh headless Chromium: the DOM after scripts ran, console messages, requests."""
    exe = chromium()
    assert exe is not None
    workdir.mkdir(parents=True, exist_ok=True)
    profile = workdir / f"profile-{os.getpid()}-{len(list(workdir.iterdir()))}"
    netlog = profile.with_suffix(".netlog.json")
    args = [exe, *FLAGS, f"--user-data-dir={profile}", f"--log-net-log={netlog}",
            f"--window-size={size[0]},{size[1]}"] + (DARK if dark else [])
    if screenshot is not None:
        args.append(f"--screenshot={screenshot}")
    elif pdf is not None:
        args += [f"--print-to-pdf={pdf}", "--no-pdf-header-footer"]
    else:
        args.append("--dump-dom")
    args.append(page.resolve().as_uri())
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return BrowserRun(dom=proc.stdout, console=console, page_requests=_page_requests(netlog), stderr=proc.stderr)


def load_png(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB")).astype(np.int32)

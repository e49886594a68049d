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
                 size: tuple[int, int] = (1280, 2400), pdf: Path | None = None, timeout: int = 120,
                 extra: tuple[str, ...] = ()) -> BrowserRun:
    """Open ``page`` in a fresh headless Chromium: the DOM after scripts ran, console messages, requests."""
    exe = chromium()
    assert exe is not None
    workdir.mkdir(parents=True, exist_ok=True)
    profile = workdir / f"profile-{os.getpid()}-{len(list(workdir.iterdir()))}"
    netlog = profile.with_suffix(".netlog.json")
    args = [exe, *FLAGS, f"--user-data-dir={profile}", f"--log-net-log={netlog}",
            f"--window-size={size[0]},{size[1]}"] + (DARK if dark else []) + list(extra)
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


# -- a generated FP8 checkpoint with planted hazards -----------------------------------

HOSTILE_TENSOR = 'model.layers.0.<script>alert("t")</script>\'".weight'
HOSTILE_META = '</style><b>meta</b>"<script>alert(2)</script>'
NAN_PLANTED = 7


def build_checkpoint(directory: Path) -> dict:
    """A DeepSeek-style checkpoint written by torch and safetensors: 128x128 block scales, one tensor
    with ``NAN_PLANTED`` NaN codes, one without a scale whose weights were clipped (saturation, beyond
    ±240), a tensor named like markup, metadata like markup, and a truncated second file.
    Returns {name: (codes as uint8 numpy, scale as float32 numpy or None)}."""
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)

    def block_quantize(w):
        o, i = w.shape
        so, si = -(-o // 128), -(-i // 128)
        pad = torch.zeros(so * 128, si * 128)
        pad[:o, :i] = w
        s = pad.reshape(so, 128, si, 128).abs().amax(dim=(1, 3)) / 448
        full = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:o, :i]
        return (w / full).clamp(-448, 448).to(torch.float8_e4m3fn), s.float()

    tensors, out = {}, {}
    for name, shape in (("model.layers.0.mlp.up_proj.weight", (384, 256)),
                        ("model.layers.0.mlp.down_proj.weight", (256, 384))):
        q, s = block_quantize(torch.randn(*shape, generator=g) * 0.02)
        if "down" in name:
            b = q.view(torch.uint8).clone()
            b.view(-1)[torch.randperm(b.numel(), generator=g)[:NAN_PLANTED]] = 0x7F
            q = b.view(torch.float8_e4m3fn)
        tensors[name], tensors[name + "_scale_inv"] = q, s
        out[name] = (q.view(torch.uint8).numpy().copy(), s.numpy().copy())
    w = torch.randn(128, 128, generator=g)
    clipped = (w / (w.abs().amax() / 448 * 0.25)).clamp(-448, 448).to(torch.float8_e4m3fn)  # scale 4x too small
    tensors[HOSTILE_TENSOR] = clipped
    out[HOSTILE_TENSOR] = (clipped.view(torch.uint8).numpy().copy(), None)
    tensors["model.embed_tokens.weight"] = torch.randn(64, 32, generator=g).to(torch.bfloat16)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(directory / "model.safetensors"),
              metadata={"note": HOSTILE_META})
    (directory / "config.json").write_text(json.dumps({
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
        "torch_dtype": "bfloat16"}))
    whole = (directory / "model.safetensors").read_bytes()
    (directory / "extra.safetensors").write_bytes(whole[: len(whole) // 3])  # truncated: unreadable
    return out

"""Pictures for reports: a palette PNG of the 16-bit input space and SVG plots.

Everything here returns :class:`markupsafe.Markup` built with
``Markup.format``, so every piece of text that came from data is escaped;
colours are CSS classes (``c-<category>``) resolved by the page's style
sheet, which is what lets one SVG follow the light and the dark theme.
The PNG's palette cannot follow the theme, so inputs that match are
transparent (the page background shows through) and categories use
mid-tones readable on both.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from typing import Iterable, Sequence

import numpy as np
from markupsafe import Markup

__all__ = ["CATEGORY_RGB", "png_palette", "map_svg", "error_plot_svg", "histogram_svg", "value_position"]

# One colour per category: the same hues as the style sheet's --c-* variables.
CATEGORY_RGB = {
    "rounding": (0x3B, 0x82, 0xF6),
    "overflow": (0xEF, 0x44, 0x44),
    "infinity": (0xA8, 0x55, 0xF7),
    "nan": (0xF5, 0x9E, 0x0B),
    "signed_zero": (0x14, 0xB8, 0xA6),
    "subnormal": (0x22, 0xC5, 0x5E),
    "other": (0xA0, 0x52, 0x2D),
    "scale": (0x06, 0xB6, 0xD4),
    "codes": (0x84, 0xCC, 0x16),
    "nonfinite": (0xF9, 0x73, 0x16),
    "accuracy": (0x63, 0x66, 0xF1),
    # comparison maps
    "appeared": (0xEF, 0x44, 0x44),
    "disappeared": (0x22, 0xC5, 0x5E),
    "changed": (0xF5, 0x9E, 0x0B),
    "unchanged": (0x8B, 0x94, 0x9E),
}
UNCHECKED_RGBA = (0x8B, 0x94, 0x9E, 0x60)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_palette(pixels: np.ndarray, palette: Sequence[tuple[int, int, int, int]]) -> bytes:
    """An 8-bit indexed PNG of ``pixels`` (2-D palette indices) with RGBA ``palette``."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.ndim != 2 or not palette or int(pixels.max(initial=0)) >= len(palette):
        raise ValueError("pixels must be a 2-D array of indices into the palette")
    h, w = pixels.shape
    rows = np.zeros((h, w + 1), dtype=np.uint8)  # filter byte 0 (none) per row
    rows[:, 1:] = pixels
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)
    plte = bytes(c for rgba in palette for c in rgba[:3])
    trns = bytes(rgba[3] for rgba in palette)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"PLTE", plte) + _chunk(b"tRNS", trns)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)) + _chunk(b"IEND", b""))


def data_uri_png(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def map_svg(indices: np.ndarray, names: Sequence[str], *, title: str, row_ticks: Iterable[tuple[int, str]],
            col_ticks: Iterable[tuple[int, str]] = ((0x00, "00"), (0x40, "40"), (0x80, "80"), (0xC0, "c0"),
                                                     (0xFF, "ff")),
            scale: int = 2, css_class: str = "map") -> Markup:
    """A 256x256 map: pixel (row, col) is input ``row << 8 | col``, coloured by ``names[index]``.

    ``names`` maps each index to a category name (a key of CATEGORY_RGB),
    ``"match"`` (transparent) or ``"unchecked"`` (translucent grey).
    """
    palette = []
    for name in names:
        if name == "match":
            palette.append((0, 0, 0, 0))
        elif name == "unchecked":
            palette.append(UNCHECKED_RGBA)
        else:
            palette.append((*CATEGORY_RGB.get(name, (0x80, 0x80, 0x80)), 0xFF))
    grid = np.asarray(indices, dtype=np.uint8).reshape(256, 256)
    uri = data_uri_png(png_palette(grid, palette))
    left, top, size = 118, 22, 256 * scale
    width, height = left + size + 8, top + size + 26
    parts = [Markup('<svg class="{}" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
                    'xmlns="http://www.w3.org/2000/svg"><title>{}</title>').format(
        css_class, width, height, width, height, title)]
    parts.append(Markup('<rect class="map-bg" x="{}" y="{}" width="{}" height="{}"/>').format(left, top, size, size))
    parts.append(Markup('<image x="{}" y="{}" width="{}" height="{}" preserveAspectRatio="none" '
                        'style="image-rendering:pixelated;image-rendering:crisp-edges" href="{}"/>').format(
        left, top, size, size, uri))
    parts.append(Markup('<rect class="frame" x="{}" y="{}" width="{}" height="{}"/>').format(
        left - 0.5, top - 0.5, size + 1, size + 1))
    for row, label in row_ticks:
        y = top + row * scale
        parts.append(Markup('<line class="axis" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                            '<text class="lbl" x="{}" y="{}" text-anchor="end">{}</text>').format(
            left - 6, left - 1, y + 0.5, y + 0.5, left - 9, y + 4, label))
    for col, label in col_ticks:
        x = left + col * scale + scale / 2
        parts.append(Markup('<text class="lbl mono" x="{}" y="{}" text-anchor="middle">{}</text>').format(
            x, top - 7, label))
    parts.append(Markup('<text class="lbl" x="{}" y="{}" text-anchor="middle">low byte of the input '
                        '(columns) · high byte (rows)</text>').format(left + size / 2, height - 8))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def value_position(bits: np.ndarray, width: int) -> np.ndarray:
    """Where each input pattern lies on a value-ordered axis, in [0, 1).

    Sign-magnitude order: -NaN, -Inf, ..., -0, +0, ..., +Inf, +NaN; equal
    steps per bit pattern, so each binade gets the same room (a log scale).
    """
    b = np.asarray(bits).astype(np.uint64)
    half = np.uint64(1) << np.uint64(width - 1)
    mag = b & (half - np.uint64(1))
    negative = (b & half) != 0
    pos = np.where(negative, (half - np.uint64(1)) - mag, half + mag).astype(np.float64)
    return pos / float(1 << width)


def _symlog(e: np.ndarray) -> np.ndarray:
    return np.sign(e) * np.log10(1.0 + np.abs(e))


def error_plot_svg(x: np.ndarray, err: np.ndarray, cats: Sequence[str], *, title: str,
                   x_ticks: Iterable[tuple[float, str]], width: int = 760, height: int = 260,
                   marks: Iterable[tuple[float, str]] = ()) -> Markup:
    """Error in ulps (symmetric log scale) against the input's place on a value axis.

    ``x`` in [0, 1), ``err`` (NaN: no finite error, drawn in a band at the
    top), ``cats`` the category of each point. Points are gathered per
    pixel column and category into one vertical segment (min to max), so
    the size does not grow with the number of divergences.
    """
    left, right, top, bottom = 58, 12, 26, 34
    pw, ph = width - left - right, height - top - bottom
    band = 14  # the band of non-finite errors, above the plot
    x = np.asarray(x, dtype=np.float64)
    err = np.asarray(err, dtype=np.float64)
    cats_arr = np.asarray(list(cats), dtype=object)
    finite = np.isfinite(err)
    t = _symlog(np.where(finite, err, 0.0))
    span = max(1.0, math.ceil(float(np.abs(t[finite]).max(initial=0.0))))
    ph_plot = ph - band - 6
    y0 = top + band + 6

    def y_of(v: np.ndarray | float) -> np.ndarray | float:
        return y0 + ph_plot / 2 - (np.asarray(v) / span) * (ph_plot / 2)

    parts = [Markup('<svg class="plot" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
                    'xmlns="http://www.w3.org/2000/svg"><title>{}</title>').format(width, height, width, height, title)]
    parts.append(Markup('<rect class="frame" x="{}" y="{}" width="{}" height="{}"/>').format(left, y0, pw, ph_plot))
    parts.append(Markup('<text class="lbl" x="{}" y="{}" text-anchor="end">no finite</text>'
                        '<text class="lbl" x="{}" y="{}" text-anchor="end">error</text>').format(
        left - 6, top + 5, left - 6, top + 15))
    # y ticks in ulps: 0 and ±1, 2, 5, 10, 20, 50, ... as far apart as the height allows
    last = -1e9
    for value in [0] + [m * 10 ** k for k in range(0, 12) for m in (1, 2, 5)]:
        v = float(_symlog(np.array([value], dtype=np.float64))[0])
        if v > span:
            break
        dy = v / span * (ph_plot / 2)
        if value and dy - last < 16:
            continue
        last = dy
        for sign in ((1,) if value == 0 else (1, -1)):
            y = float(y_of(sign * v))
            label = "0" if value == 0 else f"{sign * value:+,}"
            parts.append(Markup('<line class="grid" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/>'
                                '<text class="lbl" x="{}" y="{:.1f}" text-anchor="end">{}</text>').format(
                left, left + pw, y, y, left - 6, y + 4, label))
    for pos, label in x_ticks:
        xx = left + pos * pw
        parts.append(Markup('<line class="grid" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                            '<text class="lbl" x="{}" y="{}" text-anchor="middle">{}</text>').format(
            xx, xx, y0, y0 + ph_plot, xx, y0 + ph_plot + 14, label))
    for pos, label in marks:
        xx = left + pos * pw
        parts.append(Markup('<line class="mark" x1="{}" x2="{}" y1="{}" y2="{}"><title>{}</title></line>').format(
            xx, xx, top, y0 + ph_plot, label))
    parts.append(Markup('<text class="lbl" x="{}" y="{}" text-anchor="middle">input, in value order '
                        '(each binade the same width) · error in ulps of the expected code (symmetric log)</text>'
                        ).format(left + pw / 2, height - 6))
    cols = np.minimum((x * pw).astype(np.int64), pw - 1)
    for cat in dict.fromkeys(cats_arr.tolist()):
        sel = cats_arr == cat
        segs = []
        fin = sel & finite
        if fin.any():
            c = cols[fin]
            lo = np.full(pw, np.inf)
            hi = np.full(pw, -np.inf)
            np.minimum.at(lo, c, t[fin])
            np.maximum.at(hi, c, t[fin])
            for col in np.flatnonzero(np.isfinite(lo)):
                ya, yb = float(y_of(hi[col])), float(y_of(lo[col]))
                segs.append(f"M{left + col + 0.5:g} {ya - 1:.1f}V{yb + 1:.1f}")
        nf = sel & ~finite
        if nf.any():
            for col in np.unique(cols[nf]):
                segs.append(f"M{left + col + 0.5:g} {top:g}V{top + band:g}")
        if segs:
            parts.append(Markup('<path class="s c-{}" d="{}"><title>{}</title></path>').format(
                cat, "".join(segs), cat))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def histogram_svg(counts: Sequence[int], *, title: str, classes: Sequence[str] | None = None,
                  x_ticks: Iterable[tuple[int, str]] = (), width: int = 520, height: int = 120,
                  log: bool = True) -> Markup:
    """Bars for ``counts`` (e.g. the 256 codes of a tensor), log-scaled counts by default.

    ``classes`` gives each bar a CSS class (e.g. ``h-nan`` for NaN codes).
    """
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.size
    left, right, top, bottom = 8, 8, 8, 18
    pw, ph = width - left - right, height - top - bottom
    scaled = np.log10(1 + counts) if log else counts
    peak = float(scaled.max(initial=0.0)) or 1.0
    bw = pw / max(n, 1)
    parts = [Markup('<svg class="hist" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
                    'xmlns="http://www.w3.org/2000/svg"><title>{}</title>').format(width, height, width, height, title)]
    parts.append(Markup('<line class="axis" x1="{}" x2="{}" y1="{}" y2="{}"/>').format(
        left, left + pw, top + ph + 0.5, top + ph + 0.5))
    # One outline per run of adjacent nonzero bars of a class: "V height h width" per bar.
    by_class: dict[str, list[str]] = {}
    cls_of = list(classes) if classes is not None else ["h-bar"] * n
    base = top + ph
    i = 0
    while i < n:
        if counts[i] <= 0:
            i += 1
            continue
        cls = cls_of[i]
        seg = [f"M{left + i * bw:.1f} {base:g}"]
        while i < n and counts[i] > 0 and cls_of[i] == cls:
            h = max(1.0, scaled[i] / peak * ph)
            seg.append(f"V{base - h:.1f}h{bw:.2f}")
            i += 1
        seg.append(f"V{base:g}z")
        by_class.setdefault(cls, []).append("".join(seg))
    for cls, segs in by_class.items():
        parts.append(Markup('<path class="{}" d="{}"/>').format(cls, "".join(segs)))
    for i, label in x_ticks:
        parts.append(Markup('<text class="lbl mono" x="{}" y="{}" text-anchor="middle">{}</text>').format(
            left + (i + 0.5) * bw, height - 5, label))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)

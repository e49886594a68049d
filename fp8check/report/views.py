"""What a divergence report or a comparison shows, as plain data for the templates.

The results JSON holds everything collected; this module only derives
what is shown from it (bit fields, errors in ulps, the pictures) and caps
what is listed. Nothing here runs a kernel or the reference.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np

from fp8check import formats, inputs, reference
from fp8check.codes import field_widths
from fp8check.errors import FP8CheckError
from fp8check.formats import Format
from fp8check.report import graphics
from fp8check.results import (CATEGORIES, CRASH_CATEGORIES, KERNEL_FAULT_CATEGORIES, CheckResult, Divergence,
                              InputMap16)

__all__ = ["Source", "bit_fields", "ulp_error", "divergence_context", "comparison_context", "check_key"]

DEFAULT_MAX_ROWS = 200  # divergences listed per check in the HTML (the JSON may list more)


@dataclass
class Source:
    """One loaded results file: where it came from, its environment and checks."""

    name: str
    environment: dict[str, Any]
    checks: list[CheckResult]
    kind: str = "results"
    data: dict[str, Any] = field(default_factory=dict)  # an audit document, as read

    @property
    def short(self) -> str:
        """The name to show where space is short: a file's base name."""
        if self.name.endswith(".json") and ("/" in self.name or "\\" in self.name):
            return self.name.replace("\\", "/").rsplit("/", 1)[-1]
        return self.name


# -- bits and errors ---------------------------------------------------------


def _format(name: str) -> Format | None:
    try:
        return formats.get(name)
    except FP8CheckError:
        return None


def _int(text: str) -> int | None:
    try:
        return int(str(text), 16)
    except ValueError:
        return None


def _digits(text: str) -> int:
    t = str(text).lower()
    return len(t[2:] if t.startswith("0x") else t)


def _fmt_for_hex(text: str, *preferred: Format | None) -> Format | None:
    """The format whose width matches a hex string: the first preferred one, else an IEEE type."""
    bits = _digits(text) * 4
    for f in preferred:
        if f is not None and f.bits == bits:
            return f
    return {32: formats.FLOAT32, 64: formats.FLOAT64, 16: formats.FLOAT16}.get(bits)


def bit_fields(value: int, fmt: Format, other: int | None = None) -> list[dict[str, Any]]:
    """``value``'s bits grouped as sign | exponent | mantissa; bits that differ from ``other`` marked."""
    groups = []
    pos = fmt.bits
    for cls, width in zip(("s", "e", "m"), field_widths(fmt)):
        if not width:
            continue
        bits = []
        for _ in range(width):
            pos -= 1
            bit = (value >> pos) & 1
            differs = other is not None and ((other >> pos) & 1) != bit
            bits.append({"bit": str(bit), "differs": differs})
        groups.append({"cls": cls, "bits": bits, "title": {"s": "sign", "e": "exponent", "m": "mantissa"}[cls]})
    return groups


@lru_cache(maxsize=None)
def _tables(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(value, spacing) per code of format ``name``: spacing is the ulp at that code's magnitude."""
    fmt = formats.get(name)
    values = np.asarray(reference.decode_table(fmt), dtype=np.float64)
    spacing = np.full(values.shape, np.nan)
    mag_mask = fmt.magnitude_mask
    for code in range(fmt.code_count):
        mag = code & mag_mask
        v = values[mag]
        if not math.isfinite(v):
            continue
        up = values[mag + 1] if mag + 1 <= mag_mask else math.nan
        if math.isfinite(up) and up > v:
            spacing[code] = up - v
        elif mag > 0 and math.isfinite(values[mag - 1]):
            spacing[code] = v - values[mag - 1]
    return values, spacing


def ulp_errors(fmt: Format, expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """(actual - expected) / ulp(expected) per pair of codes; NaN where a value is not finite."""
    values, spacing = _tables(fmt.name)
    e = np.asarray(expected).astype(np.int64)
    a = np.asarray(actual).astype(np.int64)
    ev, av, sp = values[e], values[a], spacing[e]
    with np.errstate(invalid="ignore"):
        out = (av - ev) / sp
    out[~(np.isfinite(ev) & np.isfinite(av) & np.isfinite(sp))] = np.nan
    return out


def ulp_error(fmt: Format, expected: int, actual: int) -> float | None:
    e = float(ulp_errors(fmt, np.array([expected]), np.array([actual]))[0])
    return None if math.isnan(e) else e


def _ulps_text(err: float | None, expected_value: str, actual_value: str) -> str:
    if err is None:
        return f"no finite error ({actual_value} where {expected_value} was expected)"
    if err == 0:
        return "0 ulps (only the sign of zero differs)"
    text = f"{err:+.4g}"
    return f"{text} ulp" + ("" if abs(err) == 1 else "s")


# -- one check ---------------------------------------------------------------


def check_key(c: CheckResult) -> tuple[str, str, str, str, str]:
    """What identifies a check across runs: the profile may change between them (it is compared)."""
    return (c.kind, c.kernel, c.format, c.input_dtype, c.device)


def _status(c: CheckResult) -> str:
    if c.passed:
        return "pass"
    return "known" if c.expected_failure else "fail"


STATUS_TEXT = {"pass": "conforms", "fail": "diverges", "known": "known upstream"}


def _explain_command(c: CheckResult, d: Divergence) -> str | None:
    if c.kind != "cast" or d.input_dtype not in inputs.INPUT_DTYPES or _format(c.format) is None:
        return None
    parts = ["fp8check", "explain", d.input_hex, "--format", c.format, "--input-dtype", d.input_dtype]
    from fp8check import profiles

    try:
        profiles.get(c.profile)
        parts += ["--profile", c.profile]
    except FP8CheckError:
        pass  # an adapter's own profile: explain shows every named profile
    return shlex.join(parts)


def _check_command(c: CheckResult) -> str:
    if c.command.startswith("fp8check "):
        return c.command
    if c.kind != "cast":
        return c.command
    parts = ["fp8check", "check", c.kernel, "--format", c.format, "--profile", c.profile, "--input-dtype",
             c.input_dtype]
    if c.device not in ("", "cpu"):
        parts += ["--device", c.device.split(":")[0]]
    if c.seed is not None:
        parts += ["--seed", str(c.seed)]
    return shlex.join(parts)


def _code_view(text: str, value: str, fmt: Format | None, other: str | None) -> dict[str, Any]:
    v = _int(text)
    o = _int(other) if other is not None else None
    return {
        "hex": text,
        "value": value,
        "fields": bit_fields(v, fmt, o) if fmt is not None and v is not None else None,
    }


def _divergence_view(c: CheckResult, d: Divergence, fmt: Format | None, full: bool) -> dict[str, Any]:
    src = formats.SOURCE_FORMATS.get(d.input_dtype)
    if c.kind == "decode":
        in_fmt, out_fmt = fmt, formats.FLOAT32
    elif c.kind == "dequant":  # a code in, a value of the kernel's output dtype out
        in_fmt, out_fmt = fmt, formats.SOURCE_FORMATS.get(c.extra.get("output_dtype", ""), formats.FLOAT32)
    elif c.kind == "gemm":  # an output element C[m, n] of the kernel's output dtype, no input code
        in_fmt, out_fmt = None, formats.SOURCE_FORMATS.get(c.extra.get("output_dtype", ""), formats.FLOAT32)
    else:
        in_fmt = _fmt_for_hex(d.input_hex, src, formats.FLOAT32)
        out_fmt = _fmt_for_hex(d.expected_hex, fmt)
    err = None
    has_ulps = out_fmt is not None and fmt is not None and out_fmt is fmt and c.kind not in ("decode", "dequant")
    e, a = _int(d.expected_hex), _int(d.actual_hex)
    if has_ulps and e is not None and a is not None and max(e, a) < fmt.code_count:
        err = ulp_error(fmt, e, a)
    else:
        has_ulps = False
    view = {
        "category": d.category,
        "input": {"hex": d.input_hex, "value": d.input_value, "dtype": d.input_dtype},
        "expected": {"hex": d.expected_hex, "value": d.expected_value},
        "actual": {"hex": d.actual_hex, "value": d.actual_value},
        "ulps": (_ulps_text(err, d.expected_value, d.actual_value) if has_ulps else ""),
        "ulps_short": ("no finite error" if err is None else _ulps_text(err, "", "")) if has_ulps else "",
        "ulps_sort": (err if err is not None else (math.inf if has_ulps else 0.0)),
        # A cast's detail only restates the bit fields shown next to it (a kernel fault's is all there is).
        "detail": (d.detail if c.kind != "cast" or d.category in KERNEL_FAULT_CATEGORIES + CRASH_CATEGORIES
                   else ""),
        "fault": d.category in KERNEL_FAULT_CATEGORIES,  # no input, expected or actual value: its detail only
    }
    if full:
        view["input"]["fields"] = _code_view(d.input_hex, d.input_value, in_fmt, None)["fields"] if in_fmt else None
        view["expected"]["fields"] = _code_view(d.expected_hex, d.expected_value, out_fmt, d.actual_hex)["fields"] \
            if out_fmt else None
        view["actual"]["fields"] = _code_view(d.actual_hex, d.actual_value, out_fmt, d.expected_hex)["fields"] \
            if out_fmt else None
        view["explain"] = _explain_command(c, d)
        view["fields_of"] = {"input": in_fmt.name if in_fmt else "", "output": out_fmt.name if out_fmt else ""}
    return view


def _map_ticks(fmt: Format | None, input_dtype: str) -> list[tuple[int, str, int]]:
    """(bit pattern in input_dtype, label, priority) of the values worth marking on an input axis."""
    points: list[tuple[float, str, int]] = [(0.0, "0", 0), (1.0, "1", 1), (math.inf, "Inf, NaN", 0)]
    if fmt is not None and fmt.max is not None and math.isfinite(fmt.max):
        points.append((fmt.max, f"max {fmt.max:g}", 0))
        if fmt.has_subnormals and fmt.smallest_subnormal:
            points.append((fmt.smallest_subnormal, f"min sub {fmt.smallest_subnormal:.3g}", 3))
        if fmt.smallest_normal:
            points.append((fmt.smallest_normal, f"min norm {fmt.smallest_normal:.3g}", 2))
    out = []
    for value, label, prio in points:
        bits = inputs.exact_bits(value, input_dtype)
        if bits is not None:
            out.append((bits, label, prio))
    return out


def _declutter(ticks: list[tuple[float, str, int]], gap: float) -> list[tuple[float, str]]:
    """Keep ticks at least ``gap`` apart, the lowest priority number first."""
    kept: list[tuple[float, str, int]] = []
    for pos, label, prio in sorted(ticks, key=lambda t: t[2]):
        if all(abs(pos - k[0]) >= gap for k in kept):
            kept.append((pos, label, prio))
    return [(p, label) for p, label, _ in sorted(kept)]


def _map_picture(c: CheckResult, fmt: Format | None, m: InputMap16) -> dict[str, Any]:
    ticks = _map_ticks(fmt, m.input_dtype)
    rows = [(bits >> 8, label, prio) for bits, label, prio in ticks]
    rows += [((bits >> 8) | 0x80, ("−" + label) if label[0] != "0" else "−0", prio) for bits, label, prio in ticks]
    svg = graphics.map_svg(m.category, m.order, title=f"every {m.input_dtype} input of {c.kernel} → {c.format}",
                           row_ticks=_declutter(rows, 7))
    counts = m.counts()
    legend = [{"name": name, "count": counts.get(name, 0)} for name in m.order if counts.get(name, 0)]
    return {"svg": svg, "legend": legend, "checked": m.checked, "dtype": m.input_dtype,
            "complete": m.checked == 1 << 16}


def _value_ticks(fmt: Format | None, input_dtype: str, width: int) -> list[tuple[float, str]]:
    ticks = []
    for bits, label, prio in _map_ticks(fmt, input_dtype):
        short = label.split(" ")[-1] if label[0].isalpha() and label != "Inf, NaN" else label
        short = "Inf" if label == "Inf, NaN" else short
        pos = float(graphics.value_position(np.array([bits]), width)[0])
        ticks.append((pos, "±0" if label == "0" else short, prio))
        if label != "0":
            neg = bits | (1 << (width - 1))
            ticks.append((float(graphics.value_position(np.array([neg]), width)[0]), "−" + short, prio))
    return _declutter(ticks, 0.075)


def _error_plot(c: CheckResult, fmt: Format | None, m: InputMap16 | None) -> dict[str, Any] | None:
    if fmt is None or c.kind != "cast":
        return None
    if m is not None:
        cats_idx = m.category
        diverged = np.flatnonzero((cats_idx != 0) & (cats_idx != m.unchecked_index))
        if not diverged.size:
            return None
        err = ulp_errors(fmt, m.expected[diverged], m.actual[diverged])
        cats = [m.order[i] for i in cats_idx[diverged]]
        x = graphics.value_position(diverged, 16)
        width, basis = 16, f"all {diverged.size:,} divergent inputs of the {m.input_dtype} sweep"
        dtype = m.input_dtype
    else:
        rows = [d for d in c.divergences if _int(d.input_hex) is not None and _int(d.expected_hex) is not None
                and _int(d.actual_hex) is not None and max(_int(d.expected_hex), _int(d.actual_hex)) < fmt.code_count]
        src = formats.SOURCE_FORMATS.get(c.input_dtype)
        if not rows or src is None:
            return None
        width, dtype = src.bits, c.input_dtype
        bits = np.array([_int(d.input_hex) for d in rows], dtype=np.uint64)
        err = ulp_errors(fmt, np.array([_int(d.expected_hex) for d in rows]),
                         np.array([_int(d.actual_hex) for d in rows]))
        cats = [d.category for d in rows]
        x = graphics.value_position(bits, width)
        total = sum(c.categories.values())
        basis = (f"the {len(rows):,} listed {'reproducer' if len(rows) == 1 else 'reproducers'} of {total:,} "
                 f"{'divergence' if total == 1 else 'divergences'} (the list is capped; "
                 f"a 16-bit input dtype plots every input)")
    finite = np.isfinite(err)
    svg = graphics.error_plot_svg(x, err, cats, title=f"error in ulps against the input, {c.kernel} → {c.format}",
                                  x_ticks=_value_ticks(fmt, dtype, width))
    lo = float(err[finite].min()) if finite.any() else None
    hi = float(err[finite].max()) if finite.any() else None
    return {"svg": svg, "basis": basis, "min": lo, "max": hi, "nonfinite": int((~finite).sum()),
            "points": int(err.size)}


def _count(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def check_view(c: CheckResult, index: int, source: str, max_rows: int) -> dict[str, Any]:
    fmt = _format(c.format)
    status = _status(c)
    total = sum(_count(v) for v in c.categories.values())
    listed = len(c.divergences)
    firsts: dict[str, Divergence] = {}
    for d in c.divergences:
        firsts.setdefault(d.category, d)
    counted = {k: v for k, v in c.categories.items() if _count(v)}
    order = [k for k in CATEGORIES if k in counted] + [k for k in counted if k not in CATEGORIES]
    reproducers = []
    for cat in order:
        d = firsts.get(cat)
        reproducers.append({"category": cat, "count": int(c.categories[cat]),
                            "d": _divergence_view(c, d, fmt, full=True) if d is not None else None})
    map16 = None
    m = None
    if isinstance(c.extra.get("map16"), dict):
        m = InputMap16.from_dict(c.extra["map16"])
        if not c.passed or m.checked != 1 << 16:
            map16 = _map_picture(c, fmt, m)
    plot = _error_plot(c, fmt, m) if not c.passed else None
    shown = c.divergences[:max_rows] if max_rows >= 0 else c.divergences
    return {
        "anchor": f"check-{index}",
        "c": c,
        "source": source,
        "status": status,
        "status_text": STATUS_TEXT[status],
        "total": total,
        "listed": listed,
        "shown": [_divergence_view(c, d, fmt, full=False) for d in shown],
        "reproducers": reproducers,
        "command": _check_command(c),
        "profile_summary": str(c.extra.get("profile_summary", "")),
        "map": map16,
        "plot": plot,
        "faults": [_fault_view(f) for f in c.extra.get("kernel_faults", ()) if isinstance(f, dict)],
        "configs": [dict(cfg, status="pass" if cfg.get("passed") else "fail")
                    for cfg in c.extra.get("triton_configs", ()) if isinstance(cfg, dict)],
        "extra": {k: v for k, v in c.extra.items()
                  if k not in ("map16", "profile_summary", "profile_description", "listed")
                  and isinstance(v, (str, int, float, bool))},
    }


def _fault_view(f: dict[str, Any]) -> dict[str, Any]:
    """One kernel fault (fp8check.triton.sanitizer.KernelFault.to_dict()) as the report shows it."""
    offsets = ", ".join(str(o) for o in list(f.get("offsets") or ())[:6])
    return {"kind": f.get("kind", ""), "kernel": f.get("kernel", ""), "site": f.get("site", ""),
            "program": "(" + ", ".join(str(p) for p in f.get("program") or ()) + ")", "config": f.get("config", ""),
            "buffer": f.get("buffer", ""), "offsets": offsets + (", ..." if len(f.get("offsets") or ()) > 6 else ""),
            "count": int(f.get("count", 0)), "detail": f.get("detail", "")}


def _checks(n: int) -> str:
    return f"{n} check" if n == 1 else f"{n} checks"


def _verdict(views: Sequence[dict[str, Any]]) -> dict[str, str]:
    n = len(views)
    failing = [v for v in views if v["status"] == "fail"]
    known = [v for v in views if v["status"] == "known"]
    if not n:
        return {"status": "empty", "headline": "NO CHECKS", "text": "the results hold no checks"}
    if failing:
        return {"status": "fail", "headline": "DIVERGES",
                "text": f"{len(failing)} of {_checks(n)} diverge{'s' if len(failing) == 1 else ''} from the profile "
                f"{'it claims' if len(failing) == 1 else 'they claim'}"
                + (f"; {len(known)} more only by known upstream bugs" if known else "")}
    if known:
        return {"status": "known", "headline": "DIVERGES (known upstream)",
                "text": (f"{len(known)} of {_checks(n)} diverge" + ("s" if len(known) == 1 else "")
                         + ", only by known upstream bugs")}
    return {"status": "pass", "headline": "CONFORMS",
            "text": ("the check: " if n == 1 else f"all {n} checks: ") + "every output equals the reference bit for bit"}


def _profiles(checks: Iterable[CheckResult]) -> list[dict[str, str]]:
    seen: dict[str, dict[str, str]] = {}
    for c in checks:
        entry = seen.setdefault(c.profile, {"name": c.profile, "summary": "", "description": "", "formats": ""})
        summary = str(c.extra.get("profile_summary", ""))
        if summary and summary not in entry["summary"]:
            entry["summary"] = (entry["summary"] + f"; {c.format}: " if entry["summary"] else f"{c.format}: ") + summary
        if not entry["description"]:
            entry["description"] = str(c.extra.get("profile_description", ""))
    return list(seen.values())


def summary_json(views: Sequence[dict[str, Any]], verdict: dict[str, str]) -> dict[str, Any]:
    """A small machine-readable summary embedded in the page."""
    return {
        "fp8check_report": 1,
        "verdict": verdict["status"],
        "checks": [{"kernel": v["c"].kernel, "format": v["c"].format, "profile": v["c"].profile,
                    "input_dtype": v["c"].input_dtype, "device": v["c"].device, "kind": v["c"].kind,
                    "status": v["status"], "checked": v["c"].checked, "categories": dict(v["c"].categories)}
                   for v in views],
    }


def divergence_context(sources: Sequence[Source], *, title: str | None = None,
                       max_rows: int = DEFAULT_MAX_ROWS) -> dict[str, Any]:
    views = []
    for s in sources:
        for c in s.checks:
            views.append(check_view(c, len(views), s.short, max_rows))
    present = {k for v in views for k, n in v["c"].categories.items() if _count(n)}
    category_columns = [k for k in CATEGORIES if k in present] + sorted(present - set(CATEGORIES))
    verdict = _verdict(views)
    return {
        "title": title or "fp8check divergence report",
        "verdict": verdict,
        "views": views,
        "diverged": [v for v in views if v["status"] != "pass"],
        "dependent": [v for v in views if v["c"].target_dependent],
        "category_columns": category_columns,
        "kinds": sorted({v["c"].kind for v in views}),
        "devices": sorted({v["c"].device for v in views}),
        "multi_source": len(sources) > 1,
        "sources": [{"name": s.name, "short": s.short, "environment": s.environment} for s in sources],
        "profiles": _profiles(c for s in sources for c in s.checks),
        "totals": {"checks": len(views), "checked": sum(v["c"].checked for v in views),
                   "divergences": sum(v["total"] for v in views)},
        "summary": summary_json(views, verdict),
        "max_rows": max_rows,
    }


# -- comparison --------------------------------------------------------------

CHANGE_TEXT = {
    "newly_fails": "newly diverges",
    "newly_passes": "newly conforms",
    "changed": "still diverges, changed",
    "same_fail": "still diverges, unchanged",
    "same_pass": "still conforms",
    "only_a": "only in A",
    "only_b": "only in B",
}
CHANGE_RANK = {"newly_fails": 0, "changed": 1, "newly_passes": 2, "only_a": 3, "only_b": 4, "same_fail": 5,
               "same_pass": 6}
_DIFF_ORDER = ("match", "appeared", "disappeared", "changed", "unchanged", "unchecked")


def _input_changes(a: CheckResult, b: CheckResult, cap: int) -> dict[str, Any]:
    """Divergences that appeared, disappeared or changed category between ``a`` and ``b``."""
    ma = InputMap16.from_dict(a.extra["map16"]) if isinstance(a.extra.get("map16"), dict) else None
    mb = InputMap16.from_dict(b.extra["map16"]) if isinstance(b.extra.get("map16"), dict) else None
    if ma is not None and mb is not None and ma.input_dtype == mb.input_dtype and ma.order == mb.order:
        ua, ub = ma.unchecked_index, mb.unchecked_index
        both = (ma.category != ua) & (mb.category != ub)
        da, db = both & (ma.category != 0), both & (mb.category != 0)
        appeared = np.flatnonzero(db & ~da)
        disappeared = np.flatnonzero(da & ~db)
        changed = np.flatnonzero(da & db & ((ma.category != mb.category) | (ma.actual != mb.actual)))
        diff = np.zeros(1 << 16, dtype=np.uint8)
        diff[~both] = _DIFF_ORDER.index("unchecked")
        diff[np.flatnonzero(da & db)] = _DIFF_ORDER.index("unchanged")
        diff[appeared] = _DIFF_ORDER.index("appeared")
        diff[disappeared] = _DIFF_ORDER.index("disappeared")
        diff[changed] = _DIFF_ORDER.index("changed")
        fmt = _format(b.format)
        ticks = _map_ticks(fmt, ma.input_dtype)
        rows = [(bits >> 8, label, prio) for bits, label, prio in ticks]
        rows += [((bits >> 8) | 0x80, ("−" + label) if label[0] != "0" else "−0", prio) for bits, label, prio in ticks]
        svg = graphics.map_svg(diff, _DIFF_ORDER, title=f"what changed across every {ma.input_dtype} input",
                               row_ticks=_declutter(rows, 7))
        examples = []

        for kind, idx in (("appeared", appeared), ("disappeared", disappeared), ("changed", changed)):
            if idx.size:
                idx = idx[np.argsort(inputs.simplicity(idx.astype(np.uint64), ma.input_dtype), kind="stable")]
            for i in idx[:cap]:
                i = int(i)
                examples.append({
                    "kind": kind, "input": inputs.hex_bits(i, ma.input_dtype),
                    "value": inputs.describe(i, ma.input_dtype),
                    "a": (ma.order[ma.category[i]], f"0x{int(ma.expected[i]):02x}", f"0x{int(ma.actual[i]):02x}"),
                    "b": (mb.order[mb.category[i]], f"0x{int(mb.expected[i]):02x}", f"0x{int(mb.actual[i]):02x}"),
                })
        return {"exact": True, "appeared": int(appeared.size), "disappeared": int(disappeared.size),
                "changed": int(changed.size), "examples": examples, "svg": svg,
                "basis": f"every {ma.input_dtype} input checked in both runs ({int(both.sum()):,})"}
    la = {d.input_hex: d for d in a.divergences}
    lb = {d.input_hex: d for d in b.divergences}
    complete = len(la) == sum(a.categories.values()) and len(lb) == sum(b.categories.values())
    examples = []
    appeared = [k for k in lb if k not in la]
    disappeared = [k for k in la if k not in lb]
    changed = [k for k in la if k in lb and (la[k].category, la[k].actual_hex) != (lb[k].category, lb[k].actual_hex)]
    for kind, keys in (("appeared", appeared), ("disappeared", disappeared), ("changed", changed)):
        for k in keys[:cap]:
            da, db = la.get(k), lb.get(k)
            ref = db or da
            examples.append({
                "kind": kind, "input": k, "value": ref.input_value if ref else "",
                "a": (da.category, da.expected_hex, da.actual_hex) if da else ("match", "", ""),
                "b": (db.category, db.expected_hex, db.actual_hex) if db else ("match", "", ""),
            })
    basis = ("every divergence (both lists are complete)" if complete else
             "only the listed reproducers (the lists are capped: an input missing from one list may still diverge "
             "there; a 16-bit input dtype compares every input)")
    return {"exact": complete, "appeared": len(appeared), "disappeared": len(disappeared), "changed": len(changed),
            "examples": examples, "svg": None, "basis": basis}


def comparison_context(a: Source, b: Source, *, title: str | None = None, cap: int = 20) -> dict[str, Any]:
    by_a: dict[tuple, CheckResult] = {}
    by_b: dict[tuple, CheckResult] = {}
    for c in a.checks:
        by_a.setdefault(check_key(c), c)
    for c in b.checks:
        by_b.setdefault(check_key(c), c)
    keys = list(by_a) + [k for k in by_b if k not in by_a]
    rows = []
    for i, key in enumerate(keys):
        ca, cb = by_a.get(key), by_b.get(key)
        if ca is None or cb is None:
            change = "only_b" if ca is None else "only_a"
        elif ca.passed and not cb.passed:
            change = "newly_fails"
        elif not ca.passed and cb.passed:
            change = "newly_passes"
        elif ca.passed:
            change = "same_pass"
        else:
            change = "same_fail"
        cats = [k for k in CATEGORIES if (ca and k in ca.categories) or (cb and k in cb.categories)]
        counts = []
        for k in cats:
            na = int(ca.categories.get(k, 0)) if ca else 0
            nb = int(cb.categories.get(k, 0)) if cb else 0
            counts.append({"category": k, "a": na, "b": nb, "delta": nb - na})
        inputs_changed = None
        if ca is not None and cb is not None and not (ca.passed and cb.passed):
            inputs_changed = _input_changes(ca, cb, cap)
            if change == "same_fail" and (any(x["delta"] for x in counts) or inputs_changed["appeared"]
                                          or inputs_changed["disappeared"] or inputs_changed["changed"]):
                change = "changed"
        ref = cb or ca
        rows.append({
            "anchor": f"change-{i}", "key": key, "kernel": ref.kernel, "format": ref.format,
            "input_dtype": ref.input_dtype, "device": ref.device, "kind": ref.kind,
            "a": ca, "b": cb, "status_a": _status(ca) if ca else "", "status_b": _status(cb) if cb else "",
            "profile_a": ca.profile if ca else "", "profile_b": cb.profile if cb else "",
            "change": change, "change_text": CHANGE_TEXT[change], "counts": counts, "inputs": inputs_changed,
            "total_a": sum(ca.categories.values()) if ca else 0, "total_b": sum(cb.categories.values()) if cb else 0,
        })
    rows.sort(key=lambda r: (CHANGE_RANK[r["change"]], r["kernel"], r["format"], r["input_dtype"]))
    tally = {k: sum(r["change"] == k for r in rows) for k in CHANGE_TEXT}
    if rows and tally["only_a"] + tally["only_b"] == len(rows):
        # no check is in both runs: nothing was compared, so nothing can be said about regressions
        verdict = {"status": "fail", "headline": "NOTHING IN COMMON"}
    elif tally["newly_fails"]:
        verdict = {"status": "fail", "headline": "REGRESSED"}
    elif tally["changed"]:
        verdict = {"status": "known", "headline": "CHANGED"}
    else:
        verdict = {"status": "pass", "headline": "NO REGRESSION"}
    parts = [f"{tally[k]} {'check' if tally[k] == 1 else 'checks'} {CHANGE_TEXT[k]}"
             for k in ("newly_fails", "changed", "newly_passes", "only_a", "only_b") if tally[k]]
    verdict["text"] = "; ".join(parts) if parts else ("the check unchanged" if len(rows) == 1
                                                      else f"all {len(rows)} checks unchanged")
    env_keys = list(dict.fromkeys(list(a.environment) + list(b.environment)))
    env = [{"key": k, "a": str(a.environment.get(k, "")), "b": str(b.environment.get(k, "")),
            "differs": a.environment.get(k) != b.environment.get(k)} for k in env_keys]
    return {
        "title": title or "fp8check comparison",
        "verdict": verdict,
        "a": a.short, "b": b.short, "a_full": a.name, "b_full": b.name,
        "rows": rows,
        "devices": sorted({r["device"] for r in rows}),
        "tally": tally,
        "change_text": CHANGE_TEXT,
        "environment": env,
        "profiles": _profiles([c for c in a.checks] + [c for c in b.checks]),
        "summary": {"fp8check_report": 1, "comparison": [a.name, b.name], "verdict": verdict["status"],
                    "changes": [{"kernel": r["kernel"], "format": r["format"], "input_dtype": r["input_dtype"],
                                 "device": r["device"], "kind": r["kind"], "change": r["change"]} for r in rows]},
        "cap": cap,
    }

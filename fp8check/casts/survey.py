"""The survey: every built-in adapter here, every format, against what it claims.

:func:`survey` returns one row per (kernel, format): the checks of every
input dtype, the decode check and a fingerprint of what the cast really
does; :func:`verdict` says what a row means. ``fp8check survey`` prints
them.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["survey", "verdict"]

_DTYPES = ("float32", "float16", "bfloat16")


def survey(kernels: list[Any], formats: list[Any] | None, *, max_examples: int, seed: int,
           with_fingerprint: bool = True, progress: Any = None) -> list[dict[str, Any]]:
    """One row per (kernel, format): the checks of every input dtype, decode, fingerprint."""
    from fp8check.casts.adapters import KernelError

    rows = []
    for kernel in kernels:
        for fmt in kernel.formats:
            if formats is not None and fmt not in formats:
                continue
            row: dict[str, Any] = {"kernel": kernel, "format": fmt, "checks": [], "unsupported": None}
            why = kernel.unsupported_reason(fmt)
            if why is not None:
                row["unsupported"] = why
                rows.append(row)
                continue
            started = time.perf_counter()
            try:
                _survey_row(row, kernel, fmt, max_examples=max_examples, seed=seed,
                            with_fingerprint=with_fingerprint)
            except KernelError as exc:
                # A stack that cannot cast this format at all (e.g. Triton
                # 3.6's interpreter and fnuz) is reported, not fatal.
                row.update(checks=[], unsupported=f"the kernel raised: {exc}")
            row["seconds"] = time.perf_counter() - started
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def _survey_row(row: dict[str, Any], kernel: Any, fmt: Any, *, max_examples: int, seed: int,
                with_fingerprint: bool) -> None:
    from fp8check.casts import engine
    from fp8check.casts.fingerprint import fingerprint

    for dtype in _DTYPES:
        if dtype not in kernel.input_dtypes:
            continue
        result, _ = engine.run_check(kernel, fmt, None, input_dtype=dtype,
                                     max_examples=max_examples if dtype == "float32" else 0, seed=seed)
        row["checks"].append(result)
    if kernel.decode_fn is not None:
        checked, wrong = engine.decode_check(kernel, fmt)
        row["decode"] = {"checked": checked, "wrong": len(wrong), "divergences": [d.to_dict() for d in wrong]}
    if with_fingerprint:
        row["fingerprint"] = fingerprint(kernel, fmt, "float32")
    for r in row["checks"]:
        if "decode" in row:
            r.extra["decode"] = row["decode"]
        if "fingerprint" in row:
            r.extra["fingerprint"] = row["fingerprint"].to_dict()


def verdict(row: dict[str, Any]) -> tuple[str, str]:
    """(text, style) of a row's verdict."""
    if row["unsupported"]:
        return "unsupported", "dim"
    if row["kernel"].unpinned:
        # No observation covers this release or platform: what it does is a
        # finding (the fingerprint), not a pass or a failure.
        fp = row.get("fingerprint")
        return ("unpinned: " + (fp.text if fp is not None else "not fingerprinted")), "yellow"
    diverged = [r for r in row["checks"] if not r.passed]
    if not diverged:
        decode_bad = row.get("decode", {}).get("wrong", 0)
        return ("conforms" if not decode_bad else "casts conform; decode differs"), ("green" if not decode_bad else "yellow")
    if all(r.expected_failure for r in diverged):
        return "diverges: known upstream bug", "yellow"
    return "DIVERGES", "bold red"

"""``fp8check survey``: this machine's own FP8 casts against the reference.

For every installed stack (ml_dtypes; torch on the CPU, and on CUDA when a
device is present), every narrow format it casts to and every input type
(all float16 and bfloat16 inputs, the curated edge cases and samples of
float32 and float64), compares the stack's codes with the reference under
the profile the stack claims (``ml_dtypes``; ``torch-2.11`` or
``torch-2.12`` by version) and with ``ieee``. Exit 0 when every stack
matches its profile except for known upstream bugs, 1 otherwise.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "survey", help="check this machine's ml_dtypes and torch casts against the reference",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    parser.add_argument("--format", "-f", action="append", default=None,
                        help="a format to survey (repeatable; default: all)")
    parser.add_argument("--sample", type=int, default=1 << 20,
                        help="random float32 inputs per case (default 1M; float64: a quarter)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=str, default=None, metavar="PATH",
                        help="write every comparison as fp8check results JSON")
    parser.set_defaults(run=run)


def _inputs(fmt: Any, sample: int, seed: int) -> dict[str, Any]:
    import ml_dtypes
    import numpy as np

    from fp8check.reference.edges import edge_cases

    rng = np.random.default_rng(seed)
    bits16 = np.arange(1 << 16, dtype=np.uint16)
    edges32 = np.array([c.bits for c in edge_cases(fmt, "float32")], dtype=np.uint32)
    edges64 = np.array([c.bits for c in edge_cases(fmt, "float64")], dtype=np.uint64)
    random32 = rng.integers(0, 1 << 32, sample, dtype=np.uint64).astype(np.uint32)
    # float64 inputs within a float32 ulp of the format's ties: where a
    # cast through float32 rounds twice.
    values = np.array(sorted({float(v) for c in range(fmt.code_count)
                              if np.isfinite(v := float(fmt.exact_value(c))) and v >= 0}))
    ties = (values[:-1] + values[1:]) / 2
    pick = ties[rng.integers(0, ties.size, max(sample // 4, 1))]
    near = pick + rng.uniform(-1, 1, pick.size) * np.spacing(pick.astype(np.float32)).astype(np.float64)
    return {
        "float16": bits16.view(np.float16),
        "bfloat16": bits16.view(ml_dtypes.bfloat16),
        "float32": np.concatenate([edges32, random32]).view(np.float32),
        "float64": np.concatenate([edges64.view(np.float64), near]),
    }


def _stacks(formats_wanted: list[Any]) -> list[tuple[str, str, str, Callable[[Any, Any], Any], list[Any]]]:
    """(label, stack, profile name, cast(x, fmt) -> uint8 codes, formats) per installed stack."""
    import warnings

    import ml_dtypes
    import numpy as np

    from fp8check import profiles

    def ml_cast(x: Any, fmt: Any) -> Any:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return x.astype(getattr(ml_dtypes, fmt.ml_dtypes_name)).view(np.uint8)

    found = [(f"ml_dtypes {ml_dtypes.__version__}", "ml_dtypes", "ml_dtypes", ml_cast,
              [f for f in formats_wanted if f.ml_dtypes_name])]
    try:
        import torch
    except ImportError:
        return found
    profile = profiles.for_torch(torch.__version__).name
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        def torch_cast(x: Any, fmt: Any, device: str = device) -> Any:
            t = torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16) \
                if x.dtype == ml_dtypes.bfloat16 else torch.from_numpy(np.ascontiguousarray(x))
            out = t.to(device).to(getattr(torch, fmt.torch_name)).view(torch.uint8)
            return out.cpu().numpy()
        found.append((f"torch {torch.__version__} {device}", "torch", profile, torch_cast,
                      [f for f in formats_wanted if f.torch_name]))
    return found


def _why(x: Any, fmt: Any, source: str, ieee: Any, theirs: Any, off: Any, known: Any) -> str:
    """Where a stack differs from ``ieee``, the reasons, largest first."""
    import numpy as np

    import fp8check

    rest = off.copy()
    reasons = []

    def take(mask: Any, label: str) -> None:
        hit = rest & mask
        if hit.any():
            reasons.append((int(hit.sum()), label))
            rest[hit] = False

    take(known, "known bug")
    with np.errstate(all="ignore"):
        wide = x.astype(np.float64)
        take(np.isnan(wide), "NaN (the format has no NaN)" if not fmt.has_nan else "NaN code")
        if source == "float64":
            take(fp8check.encode(x.astype(np.float32), fmt, "ieee") == theirs, "double rounding via float32")
        take((theirs & fmt.magnitude_mask) == fmt.max_code, "saturated")
        if not fmt.signed:
            take(wide <= 0, "zero or negative (unsigned format)")
    take(rest, "other")
    reasons.sort(reverse=True)
    return f"{int(off.sum()):,} differ: " + ", ".join(f"{n:,} {label}" for n, label in reasons)


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.table import Table

    import fp8check
    from fp8check import formats, upstream
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.commands.explain import _console
    from fp8check.results import CheckResult, Divergence, dump_results

    wanted = [formats.get(f) for f in args.format] if args.format else list(formats.ALL_FORMATS)
    console = _console()
    console.print("fp8check survey: this machine's casts against the reference, bit for bit "
                  "(NaN codes included)")
    table = Table(show_edge=False, header_style="bold")
    for column in ("stack", "format", "input", "checked", "claimed profile", "against its profile",
                   "against ieee"):
        table.add_column(column, no_wrap=not column.startswith("against"))
    results = []
    unexpected = 0
    seen_known: dict[str, Any] = {}
    for label, stack, profile, cast, stack_formats in _stacks(wanted):
        for fmt in stack_formats:
            nan = np.array([fmt.is_nan(c) for c in range(fmt.code_count)])
            for source, x in _inputs(fmt, args.sample, args.seed).items():
                theirs = cast(x, fmt)
                ours = fp8check.encode(x, fmt, profile)
                differ = ours != theirs
                known = np.zeros(x.shape, dtype=bool)
                notes = []
                for k in upstream.known_for(stack, fmt.name):
                    hit = differ & k.affected(x)
                    if hit.any():
                        known |= hit
                        seen_known[k.name] = k
                        notes.append(f"{int(hit.sum()):,} known ({k.name})")
                new = differ & ~known
                unexpected += int(new.sum())
                verdict = "matches" if not differ.any() else "; ".join(
                    ([f"{int(new.sum()):,} DIVERGE"] if new.any() else []) + notes)
                ieee = fp8check.encode(x, fmt, "ieee")
                off = ~((ieee == theirs) | (nan[ieee] & nan[theirs]))
                versus = "matches (NaN by class)" if not off.any() else _why(x, fmt, source, ieee, theirs, off, known)
                table.add_row(label, fmt.name, source, f"{x.size:,}", profile, verdict, versus)
                width = x.dtype.itemsize * 2
                bits = x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])
                results.append(CheckResult(
                    kernel=label, format=fmt.name, profile=profile, passed=not new.any(),
                    checked=int(x.size), categories={"other": int(new.sum())} if new.any() else {},
                    divergences=[Divergence(category="other", input_hex=f"0x{int(bits[i]):0{width}x}",
                                            expected_hex=f"{int(ours[i]):#04x}", actual_hex=f"{int(theirs[i]):#04x}",
                                            input_dtype=source) for i in np.flatnonzero(new)[:20]],
                    input_dtype=source, device="cuda" if label.endswith("cuda") else "cpu",
                    expected_failure="; ".join(notes), command="fp8check survey"))
    console.print(table)
    for k in seen_known.values():
        console.print(f"known upstream bug ({k.name}): {k.summary}; {k.upstream}")
    if args.json:
        dump_results(args.json, results)
        console.print(f"results written to {args.json}")
    if unexpected:
        console.print(f"{unexpected:,} codes diverge from the profiles their stacks claim")
        return EXIT_DIVERGED
    console.print("every stack matches the profile it claims, but for the known upstream bugs listed")
    return EXIT_OK

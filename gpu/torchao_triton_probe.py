"""Probe torchao's per-group ("jagged") Triton scale kernels; print JSON.

Runs :func:`fp8check.quantizers.conformance.check_quantizer` on
``triton_fp8_per_group_rowwise_scales`` and ``..._colwise_scales`` with
inputs chosen to separate what can go wrong:

``aligned``      finite inputs whose scaled dimension is a multiple of the
                 kernel's BLOCK_SIZE and whose groups are small (two-pass
                 kernel), empty groups included: the scale logic alone;
``unaligned``    that dimension not a multiple of BLOCK_SIZE (61, 73);
``large-group``  colwise with one group larger than ceil(rows/groups)
                 rounded up to 256 (the fused one-pass kernel);
``pow2``         block maxima one ulp around ``448 * 2**k``, power-of-two scales;
``full``         the complete check (edge cases and Hypothesis inputs).

Each entry gives the divergence counts by category, the first divergences
and the bytes the kernel wrote past the end of the buffers it allocated.
Under the Triton interpreter (CPU) this must run in a process where
``TRITON_INTERPRET=1`` was set before triton was imported::

    TRITON_INTERPRET=1 python gpu/torchao_triton_probe.py [--max-examples N]

With CUDA it compiles the kernels (``--device cuda``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

import numpy as np

from fp8check import quantizers
from fp8check.quantizers.cases import QuantCase, to_dtype

__all__ = ["probe", "main"]


def _cases(kind: str, which: str, rng: np.random.Generator) -> list[QuantCase]:
    out = []

    def make(name: str, other: int, sizes: list[int], dtype: str = "float32", amax: float | None = None,
             last_largest: bool = False) -> None:
        offsets = np.cumsum(np.array(sizes, dtype=np.int64))
        split = int(offsets[-1])
        shape = (other, split) if which == "rowwise" else (split, other)
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape))).astype(np.float32)
        if amax is not None:
            x = np.clip(x, -amax / 2, amax / 2)
            x.flat[rng.integers(x.size)] = amax
        if last_largest:  # the largest value of every column in the group's last row
            x[-1, :] = 1.0e4
        out.append(QuantCase(name, to_dtype(x, dtype), dtype, offsets))

    if kind == "aligned":
        for dtype in ("float32", "bfloat16"):
            make("aligned", 64, [0, 24, 0, 40, 9, 0], dtype)
            make("aligned", 32, [50, 1, 13], dtype)
    elif kind == "unaligned":
        make("unaligned", 61, [0, 24, 0, 40, 9, 0])
        make("unaligned", 73, [20, 30])
    elif kind == "large-group":
        make("one group of 300 rows of 300", 16, [0, 300], last_largest=True)
        make("one group of 590 rows of 600", 16, [10, 590], last_largest=True)
    elif kind == "pow2":
        for k in range(-6, 7):
            v = np.float32(448.0 * 2.0 ** k)
            make(f"amax next to 448*2^{k}", 32, [16, 16], amax=float(np.nextafter(v, np.float32(np.inf))))
    return out


KINDS = ("aligned", "unaligned", "large-group", "pow2", "full")


def probe(*, device: str = "cpu", max_examples: int = 20, fmt: str = "e4m3fn",
          kinds: tuple[str, ...] = KINDS, autotune: bool = False,
          on_entry: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the probe; returns {entry: {...}} (see the module docstring).

    ``kinds`` selects the input sets: ``full`` (edge cases and Hypothesis
    inputs of many shapes) compiles the kernels for each shape, which takes
    minutes for a GPU. Compiled kernels run the interpreter's one config
    unless ``autotune``. ``on_entry(key, entry)`` is called as each entry is
    done, so a caller under a time limit keeps what finished."""
    from fp8check.quantizers import adapters
    from fp8check.quantizers.conformance import check_quantizer

    interpret = device == "cpu"
    report: dict[str, Any] = {"device": device, "interpreted": interpret, "format": fmt}
    plan = [("rowwise", False, "aligned"), ("colwise", False, "aligned"), ("rowwise", False, "unaligned"),
            ("colwise", False, "unaligned"), ("colwise", False, "large-group"), ("rowwise", True, "pow2"),
            ("colwise", True, "pow2"), ("rowwise", False, "full"), ("colwise", False, "full")]
    for which, pow2, kind in plan:
        if kind not in kinds:
            continue
        factory = adapters.torchao_triton_group_rowwise if which == "rowwise" else adapters.torchao_triton_group_colwise
        kernel = factory(fmt, pow2=pow2, interpret=interpret, autotune=autotune)
        recipe = quantizers.get(f"torchao-group-{which}" + ("-pow2" if pow2 else ""), fmt)
        rng = np.random.default_rng(0)
        if kind == "full":
            res = check_quantizer(kernel, recipe, max_examples=max_examples, device=device)
        else:
            res = check_quantizer(kernel, recipe, cases=_cases(kind, which, rng), max_examples=0, device=device)
        firsts = {}
        for d in res.divergences:
            firsts.setdefault(d.category, d.to_dict())
        key = f"{which}{'-pow2' if pow2 else ''}/{kind}"
        report[key] = {
            "kernel": res.kernel,
            "checked": res.checked,
            "categories": res.categories,
            "first": firsts,
            "bytes_past_end": int(sum(sum(o["bytes_past_end"]) for o in kernel.overruns)),
            "calls_writing_past_end": len(kernel.overruns),
            "blast_radius": res.extra["blast_radius"],
        }
        if on_entry is not None:
            on_entry(key, report[key])
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python gpu/torchao_triton_probe.py")
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-examples", type=int, default=20)
    p.add_argument("--format", default="e4m3fn")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated input sets (default: all of {KINDS})")
    p.add_argument("--autotune", action="store_true",
                   help="compiled: let Triton's autotuner pick among torchao's configs (default: one pinned config)")
    args = p.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        print(f"error: unknown --kinds {', '.join(unknown)} (known: {', '.join(KINDS)})", file=sys.stderr)
        return 2
    print(json.dumps(probe(device=args.device, max_examples=args.max_examples, fmt=args.format, kinds=kinds,
                           autotune=args.autotune), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

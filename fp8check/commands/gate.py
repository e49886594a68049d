"""``fp8check gate``: which FP8 defects a repository's acceptance test (its tolerance) lets through.

Exit 0 when the gate rejects every defect fp8check's own check rejects, 1 when it accepts one
(an escape), 2 for bad input.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "gate",
        help="measure which FP8 defects a test tolerance (a gate) lets through, beside fp8check's exact check",
        description="Apply the FP8 defect family (scale x2, 1 ulp, 4.5%, fn/fnuz max swapped, e8m0 step, "
        "saturation to NaN, NaN to max, zeroed row/block/tile, sign flips, transposed/shifted/stale scales, zeros) to "
        "a quantizer's correct output, hand it to GATE as your test does, and list what GATE accepts that "
        "fp8check's check of the same kernel rejects.")
    p.add_argument("gates", nargs="+", metavar="GATE",
                   help="MODULE:FUNCTION (a callable (actual, expected) that returns False or raises to reject), or a "
                   "built-in public gate: assert_close, assert_close-quantized, numpy.allclose, deepgemm, aiter, "
                   "kernelbench, torchao-sqnr-18, torchao-sqnr-20, torchao-sqnr-25; parameters as "
                   "'assert_close(rtol=1e-2, atol=1e-2)', 'deepgemm(t=1e-4)', 'kernelbench(tol=1e-2)'")
    p.add_argument("--kernel", metavar="MODULE:FUNC", default=None,
                   help="the quantizer under test (x -> (codes, scales)); its output is the correct one where it "
                   "conforms (default: the recipe's reference)")
    p.add_argument("--kind", choices=("quantize",), default="quantize",
                   help="what the kernel computes (quantize: tensor -> (codes, scales) under --recipe)")
    p.add_argument("--recipe", metavar="NAME", required=True,
                   help="the scaling recipe: a built-in one or one this repository declares in [tool.fp8check.recipe.NAME]")
    p.add_argument("--format", metavar="FMT", default=None, help="the recipe for this element format (e4m3fnuz, ...)")
    p.add_argument("--shape", metavar="MxK", default="256x512",
                   help="the dequantized tensor the gate compares (default 256x512; 'none' for GEMM views only)")
    p.add_argument("--gemm", metavar="MxNxK", action="append", default=[],
                   help="also compare the output of a GEMM with the defective tensor as its first operand (repeatable)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                   help="the dtype the gate compares (default: the recipe's dequantization dtype, bfloat16)")
    p.add_argument("--expected", choices=("reference", "input"), default="reference",
                   help="what the gate compares against: the correct output (default) or the unquantized input "
                   "(or its GEMM), as a test against the original tensor does")
    p.add_argument("--inputs", type=int, default=3, metavar="N", help="inputs per defect (default 3)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the inputs (default 0)")
    p.add_argument("--max-examples", type=int, default=20, metavar="N",
                   help="Hypothesis examples of fp8check's own check of each defective kernel (default 20)")
    p.add_argument("--defects", metavar="NAMES", default=None,
                   help="comma-separated defects to measure (default: the whole family; names as in docs/gates.md)")
    p.add_argument("--json", metavar="PATH", help="write the tables as JSON")
    p.add_argument("--html", metavar="OUT", help="write a self-contained HTML report")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.commands._shared import check_outputs_and_examples
    from fp8check.gates import DEFECTS, defect, measure_gates, parse_views
    from fp8check.outputs import write_json
    from fp8check.terminal import console
    from fp8check.terminal.gates import print_gate_report

    check_outputs_and_examples(args)
    from fp8check.pyproject import recipe_named

    recipe = recipe_named(args.recipe, args.format)
    views = parse_views(None if args.shape.lower() == "none" else args.shape, args.gemm)
    chosen = DEFECTS if args.defects is None else tuple(defect(n.strip()) for n in args.defects.split(",") if n.strip())
    report = measure_gates(args.gates, recipe=recipe, kernel=args.kernel, views=views, dtype=args.dtype,
                           expected=args.expected, inputs=args.inputs, seed=args.seed, max_examples=args.max_examples,
                           defects=chosen)
    print_gate_report(report, console())
    doc = report.to_json()
    if args.json:
        write_json(args.json, doc)
    if args.html:
        from fp8check.report import write_html
        from fp8check.report.gate_view import gate_report

        write_html(args.html, gate_report(doc), what="--html")
    return EXIT_OK if report.passed else EXIT_DIVERGED


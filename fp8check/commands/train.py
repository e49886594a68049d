"""``fp8check train``: FP8 training numerics of a tiny decoder (or a CONFIG.json) under torchao.

    fp8check train --model tiny-llama --recipe rowwise --formats bf16,e4m3fn,e4m3fnuz --steps 50 \
        --seed 0 --json OUT.json --html OUT.html

Checks one training step cast by cast (every FP8 format given), trains every format ``--steps``
steps, judges the loss against BF16 (DeepSeek-V3's 0.25 %) and torchao's SQNR gates, and compares
with the committed golden curves of this platform when they exist. Exit 0 when every gate passes,
1 when one fails, 2 for bad usage (one line, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "train", help="FP8 training numerics: a torchao step cast by cast, e4m3fn vs e4m3fnuz twins, loss vs BF16",
        description="Check a torchao float8 training step cast by cast and GEMM by GEMM, the format twins of every "
        "operand, and the loss of N steps in BF16 and FP8 against the anchors' gates and the golden curves.")
    p.add_argument("--model", default="tiny-llama", metavar="tiny-llama|CONFIG.json")
    p.add_argument("--recipe", default=None,
                   help="torchao recipe: tensorwise, rowwise, rowwise_with_gw_hp (default rowwise; tensorwise with --nproc)")
    p.add_argument("--formats", default="bf16,e4m3fn,e4m3fnuz", help="comma-separated: bf16, e4m3fn, e4m3fnuz")
    p.add_argument("--steps", default="50", help="training steps per format")
    p.add_argument("--seed", default="0")
    p.add_argument("--device", default="cpu", help="cpu (emulated FP8 GEMMs) or cuda (torchao's real kernels)")
    p.add_argument("--moe", action="store_true",
                   help="also a tiny MoE layer through torchao's MXFP8 grouped-GEMM path (emulated): every cast and GEMM")
    p.add_argument("--nproc", default=None, metavar="N",
                   help="run on N processes (torchrun, gloo on a CPU, NCCL on GPUs) under each --parallel mode: every "
                   "cast of every shard and the loss of every step against the single-device run")
    p.add_argument("--parallel", default="fsdp,fsdp-float8,fsdp-float8-precompute,tp", metavar="MODES",
                   help="with --nproc: comma-separated fsdp, fsdp-float8, fsdp-float8-precompute, tp")
    p.add_argument("--worker-init", default=None, metavar="MODULE:FUNC",
                   help="with --nproc: a function every rank calls before it builds the model")
    p.add_argument("--json", default=None, metavar="OUT.json")
    p.add_argument("--html", default=None, metavar="OUT.html")
    p.add_argument("--goldens", default=None, metavar="DIR", help="golden loss files (default: the shipped ones)")
    p.add_argument("--write-goldens", default=None, metavar="DIR",
                   help="write this run's curves as golden files <platform>.json into DIR")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fp8check.commands._shared import parse_int
    from fp8check.errors import InvalidValueError
    from fp8check.outputs import check_writable, write_json

    steps, seed = parse_int(args.steps, "--steps"), parse_int(args.seed, "--seed")
    if steps < 1:
        raise InvalidValueError(f"--steps {steps}: must be >= 1")
    check_writable(args.json, "--json")
    check_writable(args.html, "--html")
    for opt, d in (("--goldens", args.goldens), ("--write-goldens", args.write_goldens)):
        if d is not None and not Path(d).is_dir():
            raise InvalidValueError(f"{opt} {d}: not a directory")
    from fp8check import training
    from fp8check.training.goldens import compare_golden, golden_document, golden_path, load_golden
    from fp8check.training.run import FORMATS

    cfg = training.load_config(args.model)
    nproc = parse_int(args.nproc, "--nproc") if args.nproc is not None else None
    recipe = training.get_recipe(args.recipe or ("tensorwise" if nproc else "rowwise")).name
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise InvalidValueError(f"--formats {args.formats}: unknown {', '.join(bad) or 'empty'} (known: {', '.join(FORMATS)})")
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InvalidValueError(f"--device {args.device}: no CUDA device here")
    elif args.device != "cpu":
        raise InvalidValueError(f"--device {args.device}: give cpu or cuda")
    try:
        import torchao  # noqa: F401
    except Exception as exc:
        raise InvalidValueError(f"fp8check train needs torchao: {exc}") from None

    if nproc is not None:
        return _distributed(args, cfg, recipe, formats, steps, seed, nproc)

    total = steps * len(formats)
    done = [0]

    def progress(fmt: str, step: int) -> None:
        done[0] += 1
        width = 30
        n = width * done[0] // total
        # long runs, on a terminal only (a log file gets no carriage-return bars, as audit's progress)
        if total >= 20 and sys.stderr.isatty() and (n != width * (done[0] - 1) // total or done[0] == total):
            end = "\n" if done[0] == total else ""
            print(f"\r{fmt:>9} [{'#' * n}{'.' * (width - n)}] {done[0]}/{total} steps", end=end, file=sys.stderr,
                  flush=True)

    report = training.TrainingReport()
    for fmt in formats:
        if fmt != "bf16":
            report.step.append(training.check_step(cfg, recipe=recipe, fmt=fmt, steps=2, seed=seed, device=args.device))
    if args.moe:
        from fp8check.training.moe import check_moe_step

        report.step.append(check_moe_step(seed=seed))
    report.parity = training.loss_parity(cfg, formats=formats, recipe=recipe, steps=steps, seed=seed,
                                         device=args.device, on_step=progress)
    compared = []
    for fmt, run_ in report.parity.runs.items():
        platform = training.platform_key(fmt, args.device)
        if args.write_goldens:
            write_json(golden_path(platform, Path(args.write_goldens)),
                       golden_document(run_, cfg, platform=platform, seed=seed, device=args.device))
        path = golden_path(platform, Path(args.goldens) if args.goldens else None)
        if path.is_file():
            doc = load_golden(path)
            if doc["model"] == cfg.to_json() and doc["recipe"] == recipe and doc["seed"] == seed:
                compared.append(compare_golden(doc, run_, device=args.device, prefix=True))
                report.goldens.append(compared[-1].to_json())
    from fp8check.terminal.training import divergence_line, gate_line, golden_line, step_line

    for s in report.step:
        print(step_line(s))
    for g in report.parity.gates:
        print(gate_line(g))
    for d in report.parity.divergences:
        print(divergence_line(d))
    for g in compared:
        print(golden_line(g))
    return _write(args, report)


def _write(args: argparse.Namespace, report: Any) -> int:
    from fp8check.cli import EXIT_DIVERGED, EXIT_OK
    from fp8check.outputs import write_json

    doc = report.to_json()
    if args.json:
        write_json(args.json, doc)
    if args.html:
        from fp8check.report import write_html
        from fp8check.report.training_view import training_report

        write_html(args.html, training_report(doc), what="--html")
    return EXIT_OK if report.passed else EXIT_DIVERGED


def _distributed(args: argparse.Namespace, cfg: Any, recipe: str, formats: list[str], steps: int, seed: int,
                 nproc: int) -> int:
    from fp8check import training
    from fp8check.errors import InvalidValueError
    from fp8check.terminal.training import distributed_lines
    from fp8check.training.distributed import MODES, check_distributed, validate

    modes = [m.strip() for m in args.parallel.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InvalidValueError(f"--parallel {args.parallel}: unknown {', '.join(bad) or 'empty'} "
                                f"(known: {', '.join(MODES)})")
    fp8 = [f for f in formats if f != "bf16"]
    if not fp8:
        raise InvalidValueError("--nproc checks FP8 runs: give e4m3fn and/or e4m3fnuz in --formats")
    for mode in modes:
        for fmt in fp8:
            validate(cfg, mode, nproc, recipe, fmt)
    if args.worker_init:
        from fp8check.loader import load_callable

        load_callable(args.worker_init)  # imported here too, so that a bad one is a usage error; called in the ranks
    report = training.TrainingReport()
    for mode in modes:
        for fmt in fp8:
            print(f"{mode} {fmt}: {nproc} processes, {steps} steps ...", file=sys.stderr, flush=True)
            d = check_distributed(cfg, mode=mode, nproc=nproc, recipe=recipe, fmt=fmt, steps=steps, seed=seed,
                                  device=args.device, worker_init=args.worker_init)
            report.distributed.append(d)
            print("\n".join(distributed_lines(d)))
    return _write(args, report)

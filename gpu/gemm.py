"""Verbatim Triton FP8 GEMMs compiled on the GPU against fp8check's faithful sm90 interpreter, bit for bit.

    PYTHONPATH=.:<the unpacked projects> python gpu/gemm.py --json gemm.json

For every GEMM declared under sm90 in ``examples/real-kernels`` (its table: ``declared_kernels.py``) whose
package imports here (DeepSeek-V3's ``fp8_gemm``, transformers' and SGLang's ``w8a8_block_fp8_matmul``,
SGLang's ``triton_scaled_mm``, torchao's blockwise training GEMMs, their K rounded up to 128 as declared), the
planted block kernel of the tests (a control) and its MX kernel (``tl.dot_scaled`` of e4m3 with e8m0 scales,
which sm90 compiles as an upcast to bfloat16 and a bfloat16 wgmma): the gemm kind's contiguous cases
(:data:`fp8check.matmul.gemm.GEMM_CASES`, the same codes and scales on both sides) run compiled on the CUDA
device and interpreted under ``faithful(sm90)`` on the CPU; every output element is compared bit for bit
(NaN by class), and the compiled output is also checked against :func:`fp8check.matmul.gemm.gemm_reference`.
The JSON (commit it as ``gpu/results/gemm.json``) is read by ``tests/test_gemm_gpu_results.py``.

Without a CUDA device it prints that it skipped and exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import json
import runpy
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# the planted kernels of the tests: name -> (adapter, recipe, epilogue, K granularity)
PLANTED = {
    "planted_block_gemm": ("gemm_plants:block_gemm", "block-1x128-128x128", None, 1),
    "planted_mx_gemm_dot_scaled": ("gemm_plants:mx_gemm", "mx", "dot-scaled", 1),
    "planted_rescaled_gemm": ("gemm_plants:rescaled_gemm", "block-1x128-128x128", "rescaled", 1),
    "planted_block_gemm_k64": ("gemm_plants:block_gemm_k64", "block-1x128-128x128", None, 1),
    "planted_block_gemm_product_first": ("gemm_plants:block_gemm_product_first", "block-1x128-128x128",
                                         "k-block-product", 1),
}


def _declared() -> dict[str, tuple[str, str, str | None, int]]:
    """The sm90 GEMMs of examples/real-kernels, from its table: adapter, recipe, epilogue, and the K granularity
    it declares (k-multiple-of: its cases' K rounded up to it)."""
    table = runpy.run_path(str(ROOT / "examples" / "real-kernels" / "declared_kernels.py"))
    out = {}
    for name, (_root, kind, adapter, recipe, _fmt, target, _kernels) in table["KERNELS"].items():
        if kind == "gemm" and target == "sm90":
            keys = table["GEMM_KEYS"].get(name, {})
            out[name] = (adapter, recipe, keys.get("epilogue"), keys.get("supports", {}).get("k_multiple_of", 1))
    return out


KERNELS = {**PLANTED, **_declared()}


def _bits(t: Any) -> Any:
    import numpy as np
    import torch

    t = t.detach().cpu().contiguous()
    width = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[t.dtype]
    values = t.float().numpy()
    return t.view(width).numpy().astype(np.int64), np.isnan(values)


def _differ(x: Any, y: Any) -> int:
    (bx, nx), (by, ny) = x, y
    return int(((bx != by) & ~(nx & ny)).sum())


# the gemm kind's contiguous cases, and two larger ones (many K blocks: where accumulation order shows)
EXTRA_CASES = ((256, 256, 1024), (128, 192, 2048))
SEEDS = 2
# compiled output bits of the cases that differ from the interpreter, by "adapter|case|seed" (--dump)
DIVERGING: dict[str, Any] = {}


def _cases() -> list[Any]:
    from fp8check.matmul import gemm

    return [c for c in gemm.GEMM_CASES if c.layout == "contiguous"] + [gemm.GemmCase(*s) for s in EXTRA_CASES]


def _compiled(fn: Any, *args: Any) -> tuple[Any, list[int | None]]:
    """The compiled call's output, and the index in its own list of the config each autotuned launch chose
    (the interpreter then launches the same one: fp8check.triton.launch.pinned)."""
    import torch
    from triton.runtime.autotuner import Autotuner

    chosen: list[int | None] = []
    below = Autotuner.run

    def run(self: Any, *a: Any, **k: Any) -> Any:
        out = below(self, *a, **k)
        names = [str(c) for c in self.configs]
        chosen.append(names.index(str(self.best_config)) if str(self.best_config) in names else None)
        return out

    Autotuner.run = run
    try:
        out = fn(*(x.cuda() for x in args))
        torch.cuda.synchronize()
    finally:
        Autotuner.run = below
    return out, chosen


def _one_case(fn: Any, case: Any, recipe: str, seed: int, epilogue: str | None) -> dict[str, Any]:
    import torch

    import fp8check.triton as ft
    from fp8check.matmul import gemm, tensorcore
    from fp8check.matmul.dot_scaled import lowerings
    from fp8check.triton.launch import pinned

    a, sa, b, sb = gemm.gemm_inputs(case, "e4m3fn", recipe, seed)
    ta, tb = (torch.from_numpy(x).view(torch.float8_e4m3fn) for x in (a, b))
    tsa, tsb = torch.from_numpy(sa), torch.from_numpy(sb)
    compiled, chosen = _compiled(fn, ta, tsa, tb, tsb)
    index = next((i for i in chosen if i is not None), 0)
    with ft.interpreting(), ft.faithful("sm90"), pinned(index), tensorcore.dot_models() as dots, \
            lowerings() as how, tensorcore.dot_steps() as steps:
        interpreted = fn(ta, tsa, tb, tsb)
    try:  # Triton's own interpreter (tl.dot in float32)
        with ft.interpreting(), pinned(index):
            stock = _differ(_bits(compiled), _bits(fn(ta, tsa, tb, tsb)))
    except Exception as exc:
        stock = f"{type(exc).__name__}: {exc}"[:200]
    model = next(iter(dots)) if len(dots) == 1 else None
    lowering = next(iter(how)) if len(how) == 1 else None
    dot_k = tensorcore.dot_tile(steps)

    def against(dot_model: str | None) -> int:
        values, _ = gemm.gemm_reference("sm90", "e4m3fn", recipe, a, sa, b, sb, epilogue=epilogue, how=lowering,
                                        dot_model=dot_model, dot_k=dot_k)
        return _differ(_bits(compiled), _bits(torch.from_numpy(values).to(compiled.dtype)))

    values, dependent = gemm.gemm_reference("sm90", "e4m3fn", recipe, a, sa, b, sb, epilogue=epilogue, how=lowering,
                                            dot_model=model, dot_k=dot_k)
    expected = torch.from_numpy(values).to(compiled.dtype)
    # the contrast: the reference under sm90's other tl.dot instruction (wgmma <-> mma.sync), which must differ
    other = {"sm90-wgmma-fp8": "sm90-mma-16bit", "sm90-mma-16bit": "sm90-wgmma-fp8"}.get(model or "")
    if _differ(_bits(compiled), _bits(interpreted)):  # kept for the analysis of the residual (--dump)
        DIVERGING[f"{getattr(fn, '__name__', 'kernel')}|{case.describe()}|{seed}"] = _bits(compiled)[0]
    return {"case": case.describe(), "seed": seed, "elements": compiled.numel(), "config": index,
            "tl.dot": dict(dots), "tl.dot_scaled": dict(how),
            "compiled_vs_faithful": _differ(_bits(compiled), _bits(interpreted)),
            "compiled_vs_reference": _differ(_bits(compiled), _bits(expected)),
            "compiled_vs_other_instruction": None if other is None else {other: against(other)},
            "compiled_vs_stock_interpreter": stock, "bracketed": int(dependent.sum())}


def run_one(name: str, adapter: str, recipe: str, epilogue: str | None, step: int, only: list[int] | None = None,
            seeds: int = SEEDS) -> dict[str, Any]:
    from fp8check.loader import load_callable

    try:
        fn = load_callable(adapter)
    except Exception as exc:  # a project not carried here: listed, not a failure
        return {"kernel": name, "skipped": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    cases = []
    for i, case in enumerate(_cases()):
        if only and i not in only:
            continue
        case = replace(case, k=-(-case.k // step) * step)
        for seed in range(seeds):
            try:
                cases.append(_one_case(fn, case, recipe, 100 * i + seed, epilogue))
            except Exception as exc:  # the kernel refuses a case on both: recorded
                cases.append({"case": case.describe(), "seed": 100 * i + seed,
                              "error": f"{type(exc).__name__}: {exc}"[:300]})
    ran = [c for c in cases if "error" not in c]
    stock = [c["compiled_vs_stock_interpreter"] for c in ran if isinstance(c["compiled_vs_stock_interpreter"], int)]
    return {"kernel": name, "adapter": adapter, "recipe": recipe, "elements": sum(c["elements"] for c in ran),
            "compiled_vs_faithful": sum(c["compiled_vs_faithful"] for c in ran),
            "compiled_vs_reference": sum(c["compiled_vs_reference"] for c in ran),
            "compiled_vs_stock_interpreter": sum(stock) if stock else None, "cases": cases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--kernel", action="append", choices=sorted(KERNELS), help="only these (default: all)")
    parser.add_argument("--case", action="append", type=int, help="only these cases, by index (default: all)")
    parser.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per case (default {SEEDS})")
    parser.add_argument("--dump", default=None, help="write the compiled bits of diverging cases here (.npz)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu/gemm.py: skipped, no CUDA device")
        return 0
    sys.path.insert(0, str(ROOT / "tests"))
    importlib.import_module("fp8check")
    from fp8check.results import environment

    env, rows = environment(), []
    for name, spec in KERNELS.items():
        if args.kernel and name not in args.kernel:
            continue
        rows.append(r := run_one(name, *spec, only=args.case, seeds=args.seeds))
        # a line and the JSON so far per kernel: a run cut off by its time limit keeps what it finished
        print(f"{r['kernel']:45s} " + (f"skipped: {r['skipped']}" if "skipped" in r else
                                       f"{r['elements']:8d} elements, compiled vs faithful sm90: "
                                       f"{r['compiled_vs_faithful']} differ, vs reference: "
                                       f"{r['compiled_vs_reference']} differ (Triton's interpreter: "
                                       f"{r['compiled_vs_stock_interpreter']} differ)"), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "environment": env,
                                                   "kernels": rows}, indent=1))
    if args.dump and DIVERGING:
        import numpy as np

        np.savez_compressed(args.dump, **DIVERGING)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU run of the recipes area: quantizers, torchao's kernels, _scaled_mm and
_scaled_grouped_mm on a CUDA device, with a compact printed summary.

    PYTHONPATH=. python gpu/recipes.py [--device cuda] [--json results.json] [--max-examples N]

Sections (each prints "skipped: why" when it cannot run here), the slow one last:

1. torch quantizers built from ops, on the device, for the named recipes and
   the fp8 formats torch casts to there: conformance and blast radius.
2. torch._scaled_mm: every operand pair and output dtype the device accepts,
   tensorwise and rowwise, against the exact product and the derived float32
   bound (``accumulation="float32"`` here on every device; the Hopper model's
   bound and its bit-exactness at K=32 are tests/test_recipes_matmul.py's GPU tests); the output
   overflow behaviour; what scale_result does.
3. use_fast_accum: error / bound as K grows (tensorwise float32 out, rowwise
   bfloat16 out).
4. torch._scaled_grouped_mm with empty groups.
5. torchao (when importable): float8 tensorwise/axiswise scaling, MX to_mx,
   and the per-group Triton scale kernels compiled for the device (on the
   targeted input sets; the full Hypothesis run of them is a CPU job).

``--device cpu`` runs the same on the CPU (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPORT: dict[str, Any] = {}
JSON_PATH: Path | None = None


def _save() -> None:
    """Write what is done so far: a run cut short by a time limit keeps it."""
    if JSON_PATH is not None:
        JSON_PATH.write_text(json.dumps(REPORT, indent=1, default=str) + "\n")


def section(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> None:
            print(f"\n== {name}")
            t = time.time()
            try:
                REPORT[name] = fn(*args, **kwargs)
            except Skip as why:
                print(f"skipped: {why}")
                REPORT[name] = {"skipped": str(why)}
            except Exception as exc:  # report and go on: one broken section must not hide the others
                print(f"error: {type(exc).__name__}: {exc}")
                traceback.print_exc(limit=3, file=sys.stdout)
                REPORT[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"({time.time() - t:.1f} s)")
            _save()

        return run

    return wrap


class Skip(Exception):
    pass


def _short(result: Any) -> str:
    cats = ", ".join(f"{k} {v}" for k, v in result.categories.items() if v) or "none"
    br = result.extra.get("blast_radius", {}).get("worst_case", {})
    blast = f"; worst blast {br.get('lost', 0)}/{br.get('finite', 0)}" if br.get("lost") else ""
    return f"{'CONFORMS' if result.passed else 'DIVERGES'} ({result.checked:,} values; divergences: {cats}{blast})"


@section("1. torch quantizers from ops")
def torch_quantizers(device: str, max_examples: int) -> dict[str, Any]:
    import torch

    from fp8check import quantizers
    from fp8check.quantizers.conformance import check_quantizer
    from fp8check.quantizers.adapters import torch_quantizer

    out = {}
    names = ["tensorwise", "rowwise", "colwise", "block-1x128", "block-128x128", "group-rowwise", "group-colwise",
             "mx-e8m0-floor", "mx-e8m0-rceil", "deepseek-ue8m0", "torchao-tensorwise", "torchao-rowwise-pow2"]
    for fmt in ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"):
        try:
            torch.zeros(2, device=device).to(getattr(torch, f"float8_{fmt}"))
        except Exception as exc:
            print(f"{fmt}: skipped: torch cannot cast to it on {device}: {exc}")
            continue
        bad, values = [], 0
        for name in names:
            if name.startswith("mx") and fmt.endswith("fnuz"):
                continue
            r = quantizers.get(name, fmt)
            res = check_quantizer(torch_quantizer(r), r, device=device, max_examples=max_examples)
            values += res.checked
            if not res.passed:
                bad.append(f"{name}: {_short(res)}")
            out[f"{name}/{fmt}"] = {"passed": res.passed, "categories": res.categories,
                                    "blast_radius": res.extra["blast_radius"]}
        n = sum(1 for k in out if k.endswith("/" + fmt))
        print(f"{fmt:9} {n - len(bad)}/{n} recipes conform ({values:,} values)")
        for line in bad:
            print(f"          DIVERGES {line}")
    worst = out.get("torchao-tensorwise/e4m3fn", {}).get("blast_radius", {}).get("worst_case")
    if worst:
        print(f"torchao-tensorwise recipe, one +Inf: {worst['lost']:,} of {worst['finite']:,} finite values lost "
              f"({worst['case']})")
    return out


@section("5. torchao")
def torchao_kernels(device: str, max_examples: int) -> dict[str, Any]:
    try:
        import torchao
    except Exception as exc:
        raise Skip(f"torchao not importable ({type(exc).__name__}: {exc})") from None
    from fp8check.quantizers import adapters
    from fp8check.quantizers.conformance import check_quantizer
    from torchao_triton_probe import probe

    out: dict[str, Any] = {"version": getattr(torchao, "__version__", "?")}
    REPORT["5. torchao"] = out  # saved as it grows
    print(f"torchao {out['version']}")
    plan = [("torchao-tensorwise", lambda: adapters.torchao_tensorwise()),
            ("torchao-tensorwise-pow2", lambda: adapters.torchao_tensorwise(pow2=True)),
            ("torchao-rowwise", lambda: adapters.torchao_axiswise(dim=-1)),
            ("torchao-colwise", lambda: adapters.torchao_axiswise(dim=0)),
            ("mx-e8m0-floor", lambda: adapters.torchao_to_mx(mode="floor")),
            ("mx-e8m0-ceil", lambda: adapters.torchao_to_mx(mode="ceil")),
            ("mx-e8m0-rceil", lambda: adapters.torchao_to_mx(mode="rceil"))]
    for name, make in plan:
        try:
            res = check_quantizer(make(), name, device=device, max_examples=max_examples)
            print(f"{name:24} {_short(res)}")
            out[name] = {"passed": res.passed, "categories": res.categories}
        except Exception as exc:
            print(f"{name:24} error: {type(exc).__name__}: {exc}")
            out[name] = {"error": str(exc)}
    if device == "cpu":
        print("per-group Triton kernels: skipped: on the CPU they run interpreted "
              "(TRITON_INTERPRET=1 python gpu/torchao_triton_probe.py)")
        return out

    def show(key: str, entry: dict[str, Any]) -> None:
        cats = ", ".join(f"{k} {v}" for k, v in entry["categories"].items() if v) or "none"
        print(f"triton {key:24} {entry['checked']:>4} checked; divergences: {cats}; "
              f"bytes written past buffers: {entry['bytes_past_end']}")
        out.setdefault("triton", {})[key] = entry
        _save()

    try:
        # The targeted input sets show every kernel bug, compiled with the one
        # config the interpreter runs (pinned: autotuning compiles 36 configs
        # per shape); "full" compiles per shape and runs on the CPU, interpreted.
        probe(device=device, max_examples=max_examples, kinds=("aligned", "unaligned", "large-group", "pow2"),
              on_entry=show)
    except Exception as exc:
        print(f"per-group Triton kernels: error: {type(exc).__name__}: {exc}")
        out.setdefault("triton", {})["error"] = str(exc)
    return out


def _mm_supported(device: str, fa: str, fb: str, out_dtype: str, scaling: str) -> str | None:
    from fp8check import matmul

    try:
        matmul.check_scaled_mm(fmt_a=fa, fmt_b=fb, out_dtype=out_dtype, scaling=scaling, M=16, N=16, K=32,
                               device=device, accumulation="float32")
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"


@section("2. torch._scaled_mm")
def scaled_mm(device: str) -> dict[str, Any]:
    import torch

    from fp8check import matmul

    out: dict[str, Any] = {}
    for fa in ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"):
        for fb in ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"):
            for out_dtype in ("float32", "bfloat16", "float16", "e4m3fn", "e5m2"):
                for scaling in ("tensorwise", "rowwise"):
                    key = f"{fa}x{fb}->{out_dtype} {scaling}"
                    refused = _mm_supported(device, fa, fb, out_dtype, scaling)
                    if refused:
                        out[key] = {"refused": refused}
                        continue
                    r = matmul.check_scaled_mm(fmt_a=fa, fmt_b=fb, out_dtype=out_dtype, scaling=scaling, M=128,
                                               N=96, K=1024, device=device, spread=4.0, accumulation="float32")
                    hi = matmul.check_scaled_mm(fmt_a=fa, fmt_b=fb, out_dtype=out_dtype, scaling=scaling, M=64,
                                                N=64, K=256, device=device, spread=40.0,
                                                scale_exponents=(8.0, 12.0) if out_dtype in ("float16", "e4m3fn", "e5m2") else (61.0, 64.0),
                                                accumulation="float32")
                    out[key] = {"passed": r.passed, "violations": r.violations, "max_ratio": r.max_ratio,
                                "max_rel_error": r.max_rel_error, "scale_convention": r.scale_convention,
                                "overflow": hi.overflow_behaviour, "overflow_mismatches": hi.overflow_mismatches,
                                "pair": f"{fa}x{fb}", "out": out_dtype, "scaling": scaling}
    # One line per (output dtype, scaling) over the operand pairs.
    for out_dtype in ("float32", "bfloat16", "float16", "e4m3fn", "e5m2"):
        for scaling in ("tensorwise", "rowwise"):
            rows = {k: v for k, v in out.items() if k.endswith(f"->{out_dtype} {scaling}")}
            ran = {k: v for k, v in rows.items() if "refused" not in v}
            ok = [v for v in ran.values() if v["passed"] and not v["overflow_mismatches"]]
            line = f"{out_dtype:8} {scaling:10} {len(ok)}/{len(ran)} pairs within bound"
            if ran:
                line += (f", max err/bound {max(v['max_ratio'] for v in ran.values()):.3g}, overflow -> "
                         f"{'|'.join(sorted({v['overflow'] or '-' for v in ran.values()}))}")
                conv = sorted({v["scale_convention"] for v in ran.values() if v["scale_convention"]})
                line += f"{'; scale_a ' + '|'.join(conv) if conv else ''}"
            refused = sorted(v["pair"] if "pair" in v else k.split("->")[0] for k, v in rows.items() if "refused" in v)
            if refused:
                line += f"; refused: {', '.join(k.split('->')[0] for k in rows if 'refused' in rows[k])}"
            print(line)
            for k, v in ran.items():
                if not (v["passed"] and not v["overflow_mismatches"]):
                    print(f"    DIVERGES {k}: {v['violations']} beyond bound (max err/bound {v['max_ratio']:.3g}), "
                          f"{v['overflow_mismatches']} unexpected overflow results, scale {v['scale_convention']}")
    messages = sorted({v["refused"] for v in out.values() if "refused" in v})
    for m in messages[:4]:
        print(f"  refusal: {m}")
    # scale_result: multiply, divide or ignore?
    directions = {}
    for out_dtype in ("e4m3fn", "e4m3fnuz"):
        try:
            A = torch.full((16, 32), 1.0, device=device).to(torch.float8_e4m3fn)
            B = torch.full((16, 32), 1.0, device=device).to(torch.float8_e4m3fn).t()
            one = torch.tensor(1.0, device=device)
            dt = getattr(torch, f"float8_{out_dtype}")
            base = torch._scaled_mm(A, B, one, one, out_dtype=dt).float()[0, 0].item()
            two = torch._scaled_mm(A, B, one, one, scale_result=torch.tensor(2.0, device=device), out_dtype=dt).float()[0, 0].item()
            directions[out_dtype] = {base * 2: "multiplies by it", base / 2: "divides by it", base: "ignores it"}.get(
                two, f"gives {two} (without: {base})")
        except Exception as exc:
            directions[out_dtype] = f"refused ({type(exc).__name__})"
        print(f"scale_result=2 with a {out_dtype} output: _scaled_mm {directions[out_dtype]}")
    out["scale_result"] = directions
    return out


@section("3. use_fast_accum against the bound")
def fast_accum(device: str) -> list[dict[str, Any]]:
    from fp8check import matmul

    rows = []
    for scaling, out_dtype in (("tensorwise", "float32"), ("rowwise", "bfloat16")):
        try:
            study = matmul.accumulation_study((256, 1024, 4096, 16384), scaling=scaling, out_dtype=out_dtype,
                                              device=device, M=256, N=256, accumulation="float32")
        except Exception as exc:
            print(f"{scaling}/{out_dtype}: refused: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            continue
        print(f"{scaling} e4m3fn, {out_dtype} out:")
        print(f"{'K':>8}  fast  max err/bound  p99 err/bound  accumulation share  max |err|/max|C|  violations")
        for row in study:
            row.update(scaling=scaling, out_dtype=out_dtype)
            rows.append(row)
            print(f"{row['K']:>8}  {str(row['fast_accum']):5} {row['max_ratio']:13.3g}  {row['p99_ratio']:13.3g}"
                  f"  {row['max_acc_ratio']:18.3g}  {row['max_rel_error']:16.3g}  {row['violations']:>10}")
    print("(err/bound: of the whole derived bound; accumulation share: of its float32-accumulation part, once the "
          "output rounding is allowed for -- above 1 the sum was not accumulated in float32)")
    return rows


@section("4. torch._scaled_grouped_mm with empty groups")
def grouped(device: str) -> dict[str, Any]:
    from fp8check import matmul

    if device == "cpu":
        raise Skip("torch has no CPU _scaled_grouped_mm")
    out = {}
    for sizes in ((32, 0, 64, 16, 0), (0, 128, 0), (16, 16, 16, 16)):
        for fast in (False, True):
            key = f"groups {list(sizes)}{' fast' if fast else ''}"
            try:
                r = matmul.check_scaled_grouped_mm(group_sizes=sizes, device=device, use_fast_accum=fast,
                                                   accumulation="float32")
                out[key] = {"passed": r.passed, "violations": r.violations, "max_ratio": r.max_ratio,
                            "max_rel_error": r.max_rel_error}
                print(f"{key:36} {'within bound' if r.passed else 'DIVERGES'}: max err/bound {r.max_ratio:.3g}, "
                      f"rel {r.max_rel_error:.2g}, {r.violations} violations")
            except Exception as exc:
                out[key] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"{key:36} error: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", default=None)
    p.add_argument("--max-examples", type=int, default=30)
    args = p.parse_args()
    global JSON_PATH
    JSON_PATH = Path(args.json) if args.json else None
    import numpy
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
           "cuda": torch.version.cuda, "device": args.device}
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:
        env["triton"] = None
    if args.device.startswith("cuda"):
        if not torch.cuda.is_available():
            print("skipped: no CUDA device (run with --device cpu for a smoke test)")
            return 0
        env["gpu"] = torch.cuda.get_device_name(0)
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    print("fp8check gpu/recipes.py: " + ", ".join(f"{k} {v}" for k, v in env.items()))
    REPORT["environment"] = env
    torch_quantizers(args.device, args.max_examples)
    scaled_mm(args.device)
    fast_accum(args.device)
    grouped(args.device)
    torchao_kernels(args.device, args.max_examples)  # last: compiling torchao's Triton kernels is slow
    if JSON_PATH is not None:  # each section saved it as it ended
        print(f"\nwrote {JSON_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

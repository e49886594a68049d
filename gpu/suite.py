"""The suite on a CUDA GPU: GPU properties, exhaustive float32 sweeps, survey.

Run from the repository root on a machine with a CUDA device (fp8check on
PYTHONPATH or installed)::

    python gpu/suite.py --out gpu/results

It runs, each step isolated so that one failure does not stop the others:

1. ``pytest properties -m gpu`` (torch CUDA and compiled Triton casts, every
   format they support, all three input dtypes, plus all 2^32 float32
   inputs per kernel and format), with ``--fp8check-json`` and ``--fp8check-report`` (HTML);
2. ``fp8check sweep`` of all 2^32 float32 inputs for torch CUDA (every fp8
   format and e8m0fnu) and compiled Triton (e4m3fn, e5m2), the reference
   running on the GPU, with the time of each;
3. whether Triton compiles the fnuz casts for this GPU, probed in a child
   process (a compiler abort must not take the script down);
4. ``fp8check survey`` of every adapter available here;

and prints a short summary. Everything it prints is also written under
``--out`` (``summary.txt`` and one JSON per step).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SWEEPS = [("torch-cuda", f) for f in ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0fnu")] + [
    ("triton-cuda", f) for f in ("e4m3fn", "e5m2")
]
FNUZ_PROBE = r"""
import torch, triton, triton.language as tl

@triton.jit
def cast(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m).to(y_ptr.dtype.element_ty), mask=m)

x = torch.ones(1024, device="cuda")
y = torch.empty(1024, device="cuda", dtype=getattr(torch, "{dtype}"))
cast[(1,)](x, y, 1024, BLOCK=1024)
torch.cuda.synchronize()
print("compiled and ran; codes", y.view(torch.uint8)[:4].tolist())
"""


def run(cmd: list[str], log: list[str], timeout: int = 1800) -> subprocess.CompletedProcess:
    line = "$ " + " ".join(cmd)
    print(line, flush=True)
    log.append(line)
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        msg = f"timed out after {timeout}s"
        print(msg)
        log.append(msg)
        return subprocess.CompletedProcess(cmd, 124, exc.stdout or "", exc.stderr or "")
    out = (proc.stdout + proc.stderr).rstrip()
    print(out, flush=True)
    log.append(out)
    log.append(f"(exit {proc.returncode}, {time.perf_counter() - started:.1f}s)")
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu/results", help="where to write the results (default gpu/results)")
    parser.add_argument("--skip-properties", action="store_true")
    parser.add_argument("--skip-survey", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    py = sys.executable

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to do here (the GPU tests skip cleanly in CI)")
        return 0
    env_line = (f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)} "
                f"(sm{''.join(map(str, torch.cuda.get_device_capability(0)))})")
    try:
        import triton

        env_line += f", Triton {triton.__version__}"
    except ImportError:
        env_line += ", no Triton"
    print(env_line)
    log.append(env_line)

    from importlib.metadata import entry_points

    # fp8check on PYTHONPATH (not installed) has no pytest11 entry point: load the plugin by name.
    installed = any(ep.value.startswith("fp8check.plugin") for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "fp8check.plugin"]
    summary: list[str] = []
    if not args.skip_properties:
        proc = run([py, "-m", "pytest", "properties", *plugin, "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rfEX",
                    "--fp8check-json", str(out / "gpu-properties.json"),
                    "--fp8check-report", str(out / "gpu-properties.html")], log)
        tail = [ln for ln in proc.stdout.splitlines() if " passed" in ln or " failed" in ln or " error" in ln]
        summary.append(f"pytest properties -m gpu: {tail[-1] if tail else 'exit ' + str(proc.returncode)}")

    summary.append("")
    summary.append(f"{'kernel':<12} {'format':<9} {'inputs':>14} {'seconds':>8} {'kernel s':>9} {'ref s':>7}  verdict")
    for kernel, fmt in SWEEPS:
        path = out / f"sweep-{kernel}-{fmt}.json"
        if path.exists():
            path.unlink()
        proc = run([py, "-m", "fp8check", "sweep", kernel, "--format", fmt, "--device", "cuda", "--json", str(path)], log)
        if path.exists():
            r = json.loads(path.read_text())
            e = r["extra"]
            verdict = "conforms" if r["passed"] else "DIVERGES " + ", ".join(f"{c} {n:,}" for c, n in r["categories"].items())
            if r.get("expected_failure"):
                verdict += " (known upstream)"
            summary.append(f"{kernel:<12} {fmt:<9} {r['checked']:>14,} {e['seconds']:>8.2f} {e['kernel_seconds']:>9.2f} "
                           f"{e['reference_seconds']:>7.2f}  {verdict} vs {r['profile']}")
        else:
            last = (proc.stdout + proc.stderr).strip().splitlines()
            summary.append(f"{kernel:<12} {fmt:<9} {'-':>14} {'-':>8} {'-':>9} {'-':>7}  "
                           f"exit {proc.returncode}: {last[-1] if last else ''}")
    for fmt in ("e4m3fnuz", "e5m2fnuz"):
        summary.append(f"{'triton-cuda':<12} {fmt:<9} {'-':>14} {'-':>8} {'-':>9} {'-':>7}  unsupported: "
                       "fnuz casts do not compile for NVIDIA (not swept)")

    summary.append("")
    for dtype in ("float8_e4m3fnuz", "float8_e5m2fnuz"):
        probe = out / f"probe_{dtype}.py"  # Triton's jit reads its kernel's source from a file
        probe.write_text(FNUZ_PROBE.replace("{dtype}", dtype))
        proc = run([py, str(probe)], log, timeout=300)
        text = (proc.stdout + proc.stderr).strip().splitlines()
        outcome = "compiles" if proc.returncode == 0 else f"does not compile (exit {proc.returncode}: {text[-1][:160] if text else ''})"
        summary.append(f"Triton {dtype} cast on this GPU, probed in a child process: {outcome}")

    if not args.skip_survey:
        proc = run([py, "-m", "fp8check", "survey", "--json", str(out / "survey.json")], log)
        summary.append(f"fp8check survey: exit {proc.returncode} (table above; JSON in {out / 'survey.json'})")

    text = "\n".join(["", "=== fp8check GPU suite: summary ===", env_line, *summary])
    print(text)
    (out / "summary.txt").write_text("\n".join(log) + "\n" + text + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

"""Crash isolation: a declared kernel's check run in a child process.

A kernel outside Triton's interpreter (a C++/CUDA extension, eager code
calling one) can take the process down with it: a segfault or an abort ends
a pytest run and loses every result and report. With ``isolate = true`` in
its declaration (``fp8check check --isolate``), :func:`run_isolated` runs
the whole check in a child Python process and returns its
:class:`~fp8check.results.CheckResult`; when the child dies, the result is a
``crashed`` finding: the signal or exit status, the call it died in and the
inputs of that call (their dtype, shape, strides and first values, saved as
``.npz`` where they fit in 64 MiB), and the last lines the child wrote
(Python's :mod:`faulthandler` names the frame that crashed).

Before every call of the kernel the child writes what it is about to pass to
it (a "flight record", replaced atomically), so the record left by a crash
is the call that crashed. The declaration travels by :mod:`pickle`: its
kernel must be importable by name (``MODULE:FUNC``, or a function defined
at the top level of an importable module); the child gets this process's
``sys.path``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from fp8check.errors import InvalidValueError
from fp8check.loader import load_callable

__all__ = ["run_isolated", "FLIGHT_LIMIT"]

FLIGHT_LIMIT = 64 << 20  # inputs of a call larger than this are recorded by their first values only
_SHOWN = 8  # values shown in the finding


def run_isolated(decl: Any, *, entry: str, **kw: Any) -> Any:
    """``entry(decl, **kw)`` in a child process, ``entry`` a ``MODULE:FUNC`` entry point that checks a
    declaration (:data:`fp8check.running.ENTRY_POINT`); a crash of the child is a failed result with one
    ``crashed`` divergence."""
    from fp8check.results import CheckResult

    with tempfile.TemporaryDirectory(prefix="fp8check-isolate-") as tmp:
        job, out, flight, log = (Path(tmp) / n for n in ("job.pkl", "result.pkl", "flight.npz", "child.log"))
        try:
            job.write_bytes(pickle.dumps({"entry": entry, "decl": decl, "kw": kw, "flight": str(flight)}))
            Path(f"{job}.path").write_text(json.dumps(sys.path), encoding="utf-8")
        except Exception as exc:
            raise InvalidValueError(f"{decl.label}: isolate = true runs the check in a child process, which needs a "
                                    f"kernel importable by name (MODULE:FUNC); this one cannot be sent there: "
                                    f"{type(exc).__name__}: {exc}") from None
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        # The child runs this fp8check (its -m lookup happens before the job's sys.path is applied).
        here = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(log, "wb") as stream:
            proc = subprocess.run([sys.executable, "-m", "fp8check.isolation", str(job), str(out)],
                                  stdout=stream, stderr=subprocess.STDOUT, env=env, check=False)
        text = log.read_text(encoding="utf-8", errors="replace")
        if proc.returncode == 0 and out.is_file():
            outcome = pickle.loads(out.read_bytes())
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome.extra.get("device_fault"):
                outcome.add_note("the fault was in the child process: this process's CUDA context is unaffected, "
                                 "and its GPU checks go on")
            return outcome
        input_dtype = decl.result_dtype(kw.get("input_dtype"))
        crash = _crash(proc.returncode, flight, text)
        kept = ""
        if crash.get("saved"):  # the inputs outlive the temporary directory
            fd, kept = tempfile.mkstemp(prefix="fp8check-crash-", suffix=".npz")
            os.close(fd)
            Path(kept).write_bytes(flight.read_bytes())
            crash["inputs_file"] = kept
    from fp8check.results import Divergence

    detail = f"the kernel crashed the check's process ({crash['how']})"
    if crash.get("call"):
        detail += f" in its call {crash['call']}: {crash['inputs']}"
    else:
        detail += " before its first call"
    if crash.get("where"):
        detail += f"; {crash['where']}"
    result = CheckResult(
        kernel=decl.name, format=decl.fmt_name, profile=decl.profile or "", passed=False, checked=0,
        categories={"crashed": 1}, kind=decl.kind_row.result_kind, input_dtype=input_dtype, device=decl.device,
        seed=kw.get("seed"),
        divergences=[Divergence(category="crashed", input_hex="-", expected_hex="-", actual_hex="-",
                                input_dtype=input_dtype, detail=detail,
                                condition=f"inputs saved in {kept}" if kept else "")],
        command=decl.command(decl.command_dtype(kw.get("input_dtype")), max_examples=kw.get("max_examples"),
                             seed=kw.get("seed")),
        extra={"crash": crash})
    result.add_note("checked in a child process (isolate = true): a crash is a finding, not a lost run")
    return result


def _crash(returncode: int, flight: Path, text: str) -> dict[str, Any]:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        how = f"{name}, signal {-returncode}"
    else:
        how = f"exit status {returncode}"
    lines = [ln for ln in text.strip().splitlines() if not ln.startswith("Extension modules:")]
    crash: dict[str, Any] = {"how": how, "returncode": returncode, "log_tail": lines[-20:]}
    frames = [ln.strip() for ln in lines if ln.strip().startswith('File "')]
    if frames:  # faulthandler lists the innermost frame first: where it crashed, and what called it
        crash["where"] = "crashed in " + " <- ".join(frames[:3])
    if flight.is_file():
        try:
            with np.load(flight, allow_pickle=False) as rec:
                crash["call"] = int(rec["__call__"])
                crash["inputs"] = str(rec["__describe__"])
                crash["saved"] = bool(rec["__full__"])
        except Exception:  # a record cut short: the crash is still the finding
            pass
    return crash


# -- the child ----------------------------------------------------------------------


class _Recorder:
    """The kernel, recording what each call receives before making it."""

    def __init__(self, fn: Any, path: str) -> None:
        self.fn, self.path, self.calls = fn, path, 0
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        _record(self.path, self.calls, list(args) + list(kwargs.values()))
        return self.fn(*args, **kwargs)


def _as_numpy(t: Any, limit: int | None) -> tuple[np.ndarray, str]:
    """A host copy of ``t`` (its first ``limit`` elements when given), bit patterns for 8/16-bit floats."""
    import torch

    flat = t.detach().reshape(-1)
    if limit is not None:
        flat = flat[:limit]
    flat = flat.cpu()
    if flat.dtype in (torch.bfloat16, torch.float16) or flat.dtype.is_floating_point and flat.element_size() == 1:
        return flat.view({1: torch.uint8, 2: torch.int16}[flat.element_size()]).numpy().copy(), "bits"
    return flat.numpy().copy(), "values"


def _describe(t: Any) -> str:
    import torch

    head = t.detach().reshape(-1)[:_SHOWN]
    shown = [float(v) for v in head.float().cpu()] if t.dtype.is_floating_point else [int(v) for v in head.cpu()]
    text = f"{str(t.dtype).removeprefix('torch.')} {tuple(t.shape)}"
    if not t.is_contiguous():
        text += f" strides {tuple(t.stride())}"
    if t.storage_offset():
        text += f" storage offset {t.storage_offset()}"
    if t.device.type != "cpu":
        text += f" on {t.device}"
    if t.is_floating_point() and t.numel():
        # torch has no isfinite for fp8 dtypes (a decoder's input): widened to float32, exactly
        nonfinite = int((~torch.isfinite(t.detach() if t.element_size() > 1 else t.detach().float())).sum())
        if nonfinite:
            text += f", {nonfinite:,} non-finite"
    return text + f", first values {shown}" + (" ..." if t.numel() > _SHOWN else "")


def _record(path: str, call: int, args: list[Any]) -> None:
    import torch

    tensors = {f"arg{i}": a for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    full = size <= FLIGHT_LIMIT
    arrays: dict[str, Any] = {}
    for key, t in tensors.items():
        arrays[key], _ = _as_numpy(t, None if full else 4096)
    others = [f"arg{i} = {a!r}"[:80] for i, a in enumerate(args) if not isinstance(a, torch.Tensor)]
    describe = "; ".join([f"{k}: {_describe(t)}" for k, t in tensors.items()] + others)
    tmp = f"{path}.tmp.npz"
    np.savez(tmp, __call__=np.int64(call), __describe__=np.str_(describe), __full__=np.bool_(full), **arrays)
    os.replace(tmp, path)


def _child(job_path: str, out_path: str) -> int:
    import json

    # The parent's sys.path first, so that the kernel the job names imports here.
    sys.path[:0] = [p for p in json.loads(Path(job_path + ".path").read_text(encoding="utf-8")) if p not in sys.path]
    job = pickle.loads(Path(job_path).read_bytes())
    decl, kw = job["decl"], job["kw"]
    try:
        run = load_callable(job["entry"])
        recorder = _Recorder(decl.resolve(decl.kernel), job["flight"])
        result = run(dataclasses.replace(decl, kernel=recorder, isolate=False), **kw)
        result.command = decl.command(decl.command_dtype(kw.get("input_dtype")), max_examples=kw.get("max_examples"),
                                      seed=kw.get("seed"))
        result.add_note("checked in a child process (isolate = true)")
        outcome: Any = result
    except Exception as exc:  # the project's errors (one-line messages) cross back and are raised there
        outcome = exc
    try:
        Path(out_path).write_bytes(pickle.dumps(outcome))
    except Exception as exc:
        Path(out_path).write_bytes(pickle.dumps(InvalidValueError(
            f"{decl.label}: the isolated check's result could not be sent back: {type(exc).__name__}: {exc}")))
    from fp8check import device_faults

    if device_faults.lost() is not None:  # a CUDA context left unusable by a fault: no teardown (it may abort)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    import faulthandler

    faulthandler.enable()
    sys.exit(_child(sys.argv[1], sys.argv[2]))

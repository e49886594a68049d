"""``fp8check fuzz``: mutated checkpoints through ``fp8check audit``, judged.

    fp8check fuzz --cases 3000 --seed 1 --jobs 2

The cases come from :mod:`fp8check.checkpoints.fuzz`. Each goes through
``fp8check audit CASE --json OUT -q`` and must end with exit 0, 1 or 2, with
one line per problem on stderr and no traceback, within a time limit (no
hang) and a memory limit (nothing allocated from a size the file claims
before it is checked), and with no positive verdict when something was not
read. This is a face that drives the command line (it calls
:func:`fp8check.cli.main`), so it lives with the commands, not in the library.

The cases run in worker processes (each with its own address-space limit),
many cases per process; ``--subprocess`` runs each case in a fresh
interpreter instead (slower, closest to a user's command line). Exit code 1
when any case broke a rule (each is printed with how to reproduce it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from fp8check.checkpoints.fuzz import MANY_TENSORS, make_seeds, mutate

# -- running one case -------------------------------------------------------------------


@dataclass
class Outcome:
    case: int
    what: str
    exit_code: int | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # broken rules


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def check_case(path: str, what: str, case: int, json_out: str, timeout: float) -> Outcome:
    """Audit one case in this process and judge it."""
    from fp8check.cli import main

    out = Outcome(case, what)
    err, stdout = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout):
            out.exit_code = main(["audit", path, "--json", json_out, "-q", "--jobs", "1"])
    except _Timeout:
        out.problems.append(f"hang: no answer within {timeout:g} s")
    except MemoryError:
        out.problems.append("MemoryError: allocated from a claimed size")
    except SystemExit as exc:
        out.exit_code = int(exc.code or 0)
    except BaseException as exc:  # the one thing the CLI must never do
        out.problems.append(f"traceback: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out.seconds = time.perf_counter() - started
    _judge(out, err.getvalue(), json_out)
    return out


def _judge(out: Outcome, stderr: str, json_out: str) -> None:
    if out.exit_code is not None and out.exit_code not in (0, 1, 2):
        out.problems.append(f"exit code {out.exit_code}")
    if "Traceback" in stderr:
        out.problems.append("traceback on stderr")
    for line in stderr.splitlines():
        if line.strip() and not line.startswith("fp8check: error: "):
            out.problems.append(f"stray stderr line: {line[:120]}")
            break
    if out.exit_code is None:
        return
    try:
        doc = json.load(open(json_out))
    except (OSError, ValueError):
        if out.exit_code != 2:
            out.problems.append("no JSON report although the audit ran")
        return
    s = doc.get("summary", {})
    unread = s.get("unreadable_files") or s.get("unknown") or any(
        f.get("status") == "error" for f in doc.get("files", []))
    positive = [t for t, v in (s.get("verdicts") or {}).items() if v != "unknown"]
    if (unread or out.exit_code == 2) and positive:
        out.problems.append(f"positive verdict for {positive} although something was not read")


def _run_subprocess(path: str, what: str, case: int, json_out: str, timeout: float, memory: int) -> Outcome:
    import resource
    import subprocess

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    out = Outcome(case, what)
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "fp8check", "audit", path, "--json", json_out, "-q", "--jobs", "1"],
                              capture_output=True, text=True, timeout=timeout, preexec_fn=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        out.problems.append(f"hang: no answer within {timeout:g} s")
        return out
    out.seconds = time.perf_counter() - started
    out.exit_code = proc.returncode
    _judge(out, proc.stderr, json_out)
    return out


# -- workers ------------------------------------------------------------------------------


_STATE: dict[str, Any] = {}


def _init(seed_dir: str, memory: int) -> tuple[int, int] | None:
    """Set up a worker: the seed paths, and an address-space limit of ``memory`` bytes (the soft
    limit only, so that the caller's can be restored); the previous limits, if changed."""
    import resource

    old = None
    if memory:
        old = resource.getrlimit(resource.RLIMIT_AS)
        hard = old[1]
        resource.setrlimit(resource.RLIMIT_AS, (memory if hard == resource.RLIM_INFINITY else min(memory, hard), hard))
    _STATE["seeds"] = make_seeds(seed_dir) if not os.path.exists(os.path.join(seed_dir, "seed.pt")) else {
        "safetensors": os.path.join(seed_dir, "seed.safetensors"), "sharded": os.path.join(seed_dir, "sharded"),
        "torch-zip": os.path.join(seed_dir, "seed.pt"), "torch-legacy": os.path.join(seed_dir, "seed_legacy.pt")}
    return old


def _one(args: tuple[int, int, str, float, bool, int]) -> Outcome:
    case, seed, work, timeout, subprocess_mode, memory = args
    d = tempfile.mkdtemp(prefix=f"case{case}-", dir=work)
    try:
        path, what = mutate(_STATE["seeds"], case, seed, d)
        json_out = os.path.join(d, "out.json")
        if subprocess_mode:
            return _run_subprocess(path, what, case, json_out, timeout, memory)
        return check_case(path, what, case, json_out, timeout)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run(cases: int, seed: int, *, jobs: int = 1, timeout: float = 60.0, memory: int = 4 << 30,
        subprocess_mode: bool = False, work: str | None = None, many: list[int] | None = None) -> list[Outcome]:
    """Run ``cases`` mutated checkpoints; every outcome (with the rules it broke, if any).

    ``many``: the tensor counts of the "many tensors" header mutation (smaller in the suite, for time;
    only where the cases run in this process, ``jobs=1``)."""
    if many is not None:
        MANY_TENSORS[:] = many
    own = work is None
    work = work or tempfile.mkdtemp(prefix="fp8check-fuzz-")
    seed_dir = os.path.join(work, "seeds")
    try:
        make_seeds(seed_dir)
        items = [(c, seed, work, timeout, subprocess_mode, memory) for c in range(cases)]
        if jobs <= 1:  # in this process: its memory limit is restored afterwards
            import resource

            old = _init(seed_dir, 0 if subprocess_mode else memory)
            try:
                return [_one(i) for i in items]
            finally:
                if old is not None:
                    resource.setrlimit(resource.RLIMIT_AS, old)
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(jobs, initializer=_init, initargs=(seed_dir, 0 if subprocess_mode else memory),
                      maxtasksperchild=200) as pool:
            return list(pool.imap(_one, items, chunksize=4))
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def summarise(outcomes: list[Outcome]) -> dict[str, Any]:
    codes: dict[str, int] = {}
    for o in outcomes:
        key = str(o.exit_code) if o.exit_code is not None else "none"
        codes[key] = codes.get(key, 0) + 1
    return {
        "cases": len(outcomes),
        "exit_codes": dict(sorted(codes.items())),
        "tracebacks": sum(any(p.startswith("traceback") for p in o.problems) for o in outcomes),
        "hangs": sum(any(p.startswith("hang") for p in o.problems) for o in outcomes),
        "positive_verdicts_for_unread": sum(any(p.startswith("positive") for p in o.problems) for o in outcomes),
        "broken": sum(bool(o.problems) for o in outcomes),
        "slowest_seconds": round(max((o.seconds for o in outcomes), default=0.0), 2),
    }


def register(sub: Any) -> None:
    p = sub.add_parser("fuzz", help="fuzz the checkpoint loaders: mutated checkpoints through fp8check audit",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case (a hang past it fails)")
    p.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit per worker")
    p.add_argument("--subprocess", action="store_true", help="one fresh interpreter per case")
    p.add_argument("--json", metavar="OUT", help="write every outcome as JSON")
    p.set_defaults(run=run_command)


def run_command(args: Any) -> int:
    from fp8check.outputs import check_writable, write_json

    check_writable(args.json, "--json")
    started = time.perf_counter()
    outcomes = run(args.cases, args.seed, jobs=args.jobs, timeout=args.timeout, memory=int(args.memory_gb * (1 << 30)),
                   subprocess_mode=args.subprocess)
    summary = summarise(outcomes)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    for o in outcomes:
        if o.problems:
            print(f"case {o.case} ({o.what}): {'; '.join(o.problems)}  [reproduce: --seed {args.seed}, case {o.case}]")
    print(json.dumps(summary))
    if args.json:
        write_json(args.json, {"summary": summary, "outcomes": [o.__dict__ for o in outcomes]})
    return 1 if summary["broken"] else 0

"""What fp8check's pytest plugin costs a project that never declared a kernel, per pytest session.

    python benchmarks/plugin_overhead.py [--runs 21] [--tests 200] [--dir DIR --keep]

Writes a host project (``--tests`` trivial tests in 10 modules, a conftest.py
with a fixture, a pyproject.toml with a ``[tool.pytest.ini_options]`` table
and no ``[tool.fp8check]`` table) and runs ``python -m pytest -q -p
no:cacheprovider`` in it, each in a fresh process, alternately with the
plugin (as installed: its ``pytest11`` entry point) and under ``-p
no:fp8check`` (the same pytest, the plugin never imported). Printed: the
median and the lowest wall time and CPU time (user + system of the child) of
each, and the plugin's share: the difference of the medians, per session and
as a ratio of the run without it. Then one more session in this process under
cProfile: the time spent inside fp8check's own code (its hooks and what
they import), which machine load does not blur as much. Run with the environment's pytest and
plugins (pytest-xdist, Hypothesis' plugin) as they are: the peer is the same
run without fp8check, measured interleaved in the same loop, so machine load
affects both alike; on a shared machine take the CPU-time column.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_host(root: Path, tests: int) -> None:
    (root / "pyproject.toml").write_text('[project]\nname = "host"\nversion = "0"\n\n'
                                         '[tool.pytest.ini_options]\naddopts = "--strict-markers"\n')
    (root / "conftest.py").write_text("import pytest\n\n\n@pytest.fixture\ndef value():\n    return 3\n")
    per_module = max(1, tests // 10)
    for m in range(10):
        body = "".join(f"\n\ndef test_{m}_{i}(value):\n    assert value + {i} > {i}\n" for i in range(per_module))
        (root / f"test_host_{m}.py").write_text("import pytest\n" + body)


def one_run(root: Path, extra: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one pytest session."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra], cwd=root,
                          capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} failed in {root}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def profiled(root: Path) -> tuple[float, float, int]:
    """One session in this process under cProfile: CPU seconds inside fp8check's code (the sum over its hook
    calls of their cumulative time, and of importing the plugin module), the session's seconds, and how many
    fp8check functions were called."""
    import cProfile
    import importlib
    import pstats

    import pytest

    import fp8check

    package = str(Path(fp8check.__file__).parent)
    sys.modules.pop("fp8check.plugin", None)
    cwd = os.getcwd()
    os.chdir(root)
    profiler = cProfile.Profile(time.process_time)  # CPU time: what load on a shared machine blurs least
    try:
        t0 = time.process_time()
        profiler.enable()
        importlib.import_module("fp8check.plugin")  # as pluggy's entry-point loading does
        with contextlib.redirect_stdout(io.StringIO()):
            code = pytest.main(["-q", "-p", "no:cacheprovider"])
        profiler.disable()
        seconds = time.process_time() - t0
    finally:
        os.chdir(cwd)
    if code != 0:
        raise SystemExit(f"the in-process session failed ({code})")
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (calls, primitive calls, tottime, cumtime, callers)
    ours = {k: v for k, v in stats.items() if k[0].startswith(package)}
    # Time inside fp8check: the cumulative time of each fp8check function called from outside fp8check
    # (pluggy's hook calls, the import), which includes what it calls in turn.
    inside = sum(v[3] for k, v in ours.items()
                 if any(not caller[0].startswith(package) for caller in v[4]))
    if os.environ.get("FP8CHECK_PROFILE_TOP"):
        for k, v in sorted(ours.items(), key=lambda kv: -kv[1][3])[:int(os.environ["FP8CHECK_PROFILE_TOP"])]:
            print(f"  {v[3]:.4f} s cumulative, {v[0]:>5} calls  {Path(k[0]).name}:{k[1]} {k[2]}")
    return inside, seconds, sum(v[0] for v in ours.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=21, help="sessions of each kind (default 21)")
    ap.add_argument("--tests", type=int, default=200, help="tests in the host project (default 200)")
    ap.add_argument("--dir", help="where to write the host project (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the host project")
    ap.add_argument("--profile-only", action="store_true", help="only the in-process session under cProfile")
    args = ap.parse_args(argv)

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fp8check-host-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        write_host(root, args.tests)
        kinds = {"with fp8check": [], "-p no:fp8check": []}
        extra = {"with fp8check": [], "-p no:fp8check": ["-p", "no:fp8check"]}
        if args.profile_only:
            inside, seconds, calls = profiled(root)
            print(f"{args.tests} tests: {inside:.3f} s of CPU inside fp8check's code ({calls:,} calls) of a "
                  f"{seconds:.3f} s session ({inside / seconds:.1%})")
            return 0
        for kind in kinds:  # one warm-up each (file system caches, bytecode of the environment)
            one_run(root, extra[kind])
        for i in range(args.runs):
            order = list(kinds) if i % 2 == 0 else list(reversed(kinds))
            for kind in order:
                kinds[kind].append(one_run(root, extra[kind]))
        import pytest

        print(f"host project: {args.tests} tests in 10 modules; pytest {pytest.__version__}, Python "
              f"{sys.version.split()[0]}; {args.runs} sessions of each, interleaved")
        print(f"{'':18}{'wall median':>12}{'wall min':>10}{'CPU median':>12}{'CPU min':>10}")
        medians = {}
        for kind, runs in kinds.items():
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            medians[kind] = (statistics.median(walls), statistics.median(cpus))
            print(f"{kind:18}{medians[kind][0]:>11.3f}s{min(walls):>9.3f}s{medians[kind][1]:>11.3f}s"
                  f"{min(cpus):>9.3f}s")
        (w1, c1), (w0, c0) = medians["with fp8check"], medians["-p no:fp8check"]
        print(f"the plugin's share per session: wall {w1 - w0:+.3f} s ({w1 / w0:.3f}x), "
              f"CPU {c1 - c0:+.3f} s ({c1 / c0:.3f}x)")
        inside, seconds, calls = profiled(root)
        print(f"in process, under cProfile: {inside:.3f} s of CPU inside fp8check's code ({calls:,} calls) of a "
              f"{seconds:.3f} s session ({inside / seconds:.1%})")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

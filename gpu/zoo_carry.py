"""Build what ``gpu/zoo.py`` needs on a GPU machine that cannot download: package trees cut to the files used.

    python gpu/zoo_carry.py --site DIR [--out .whl/trees] [--project aiter ...]

``DIR`` holds one folder per project with the project's unpacked wheel(s)
and dependencies (``examples/real-kernels/fetch-packages.sh DIR`` makes it).
For each project, a fresh Python imports the zoo adapters' modules with
that folder on ``sys.path`` and builds every adapter; every file of the
project's packages that it imported (and each package's ``__init__.py`` and
``*.dist-info/METADATA``, for the version) is copied to ``OUT/<project>``.
No file is changed; only what the import did not touch is left out (aiter's
40 MB wheel becomes a few hundred KB). Third-party dependencies with
compiled code (SGLang's) must be carried as wheels for the GPU machine's
Python instead: the script lists the imported ones that are not pure Python.

Prints each tree's size (with ``--into``, the union so far). ``gpu/run_all.sh``
puts every ``.whl/trees/*`` on ``PYTHONPATH``, and ``.whl/serving/tree`` (SGLang
and vLLM, whose transformers 5 cannot share a process with the transformers
4.57 of ``.whl/``) for its ``zoo-serving`` part only, with the wheels of
``.whl/serving/*.whl``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

# project folder -> (the packages to cut from it ("*": every package in the folder the import used, the
# project's dependencies installed beside it), the zoo adapter modules whose imports decide, and functions
# called too: the GEMM adapters (gpu/gemm.py) import their project on their first call)
PROJECTS = {
    "aiter": (("aiter",), ("fp8check.zoo.aiter",), ()),
    "fbgemm": (("fbgemm_gpu",), ("fp8check.zoo.fbgemm",), ()),
    "sglang": (("*",), ("fp8check.zoo.sglang",), ("fp8check.zoo.gemm:_sglang",)),
    "vllm": (("*",), ("fp8check.zoo.vllm",), ()),
}
# data a package looks for at import (not imported itself): SGLang checks that its JIT sources exist
DATA = {"sglang": ("sglang/kernels/jit/include", "sglang/kernels/jit/csrc")}

_PROBE = r"""
import importlib, json, os, sys
from fp8check import zoo
mods = sys.argv[1].split(",")
built = []
for f in filter(None, sys.argv[2].split(",")):
    m, _, name = f.partition(":")
    getattr(importlib.import_module(m), name)()
for m in mods:
    mod = importlib.import_module(m)
    for e in zoo.entries():
        if e.adapter.startswith(m + ":") and any(x.startswith("faithful") for x in e.modes):
            try:
                zoo._factory(e)(mode=[x for x in e.modes if x.startswith("faithful")][0])
                built.append(e.id)
            except Exception as exc:
                built.append(f"{e.id}: {type(exc).__name__}: {exc}")
files = sorted({os.path.abspath(f) for f in (getattr(v, "__file__", None) for v in list(sys.modules.values())) if f})
# namespace packages (no __init__.py: SGLang's sglang.srt.layers) have no file, only their folders
namespaces = sorted({os.path.abspath(p) for v in list(sys.modules.values())  # vars(): no lazy module's __getattr__
                     if vars(v).get("__file__") is None for p in list(vars(v).get("__path__") or [])})
import importlib.metadata as md
dists = {}
for top, names in md.packages_distributions().items():
    for n in names:
        try:
            dists[top] = f"{n}=={md.version(n)}"
        except Exception:
            pass
print(json.dumps({"files": files, "namespaces": namespaces, "built": built, "dists": dists}))
"""


def cut(site: str, project: str, out: str, into: str | None = None) -> dict:
    packages, adapters, calls = PROJECTS[project]
    root = os.path.join(site, project)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
               CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", _PROBE, ",".join(adapters), ",".join(calls)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{project}: the import probe failed:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    dest = os.path.join(out, into or project)
    if into is None:
        shutil.rmtree(dest, ignore_errors=True)
    copied = 0
    root_abs = os.path.abspath(root)
    mine = [f for f in data["files"] if f.startswith(root_abs + os.sep)]
    # a package with compiled code cannot be carried as files (the GPU machine's Python may differ): a wheel
    native = {os.path.relpath(f, root_abs).split(os.sep)[0] for f in mine if f.endswith((".so", ".pyd"))}
    for f in mine:
        rel = os.path.relpath(f, root_abs)
        top = rel.split(os.sep)[0]
        if top in native or (top not in packages and "*" not in packages) or top.endswith(".py") is False and \
                os.sep not in rel:
            continue
        parts = rel.split(os.sep)
        for i in range(1, len(parts)):  # every parent package's __init__.py
            init = os.path.join(root_abs, *parts[:i], "__init__.py")
            if os.path.isfile(init):
                target = os.path.join(dest, *parts[:i], "__init__.py")
                if not os.path.exists(target):
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copy2(init, target)
                    copied += 1
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            shutil.copy2(f, target)
            copied += 1
    for folder in data["namespaces"]:  # a folder that is a package of its own (a placeholder keeps it carried)
        if folder.startswith(root_abs + os.sep):
            target = os.path.join(dest, os.path.relpath(folder, root_abs))
            os.makedirs(target, exist_ok=True)
            open(os.path.join(target, "NAMESPACE-PACKAGE"), "w").close()
    for rel in DATA.get(project, ()):
        src = os.path.join(root_abs, rel)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, rel), dirs_exist_ok=True)
    # the metadata of every distribution copied (its version is read at import: transformers checks those of
    # huggingface-hub, tokenizers, ...; the zoo reads the project's)
    copied_tops = {os.path.relpath(f, root_abs).split(os.sep)[0].removesuffix(".py") for f in mine}
    wanted = {data["dists"][t].split("==")[0] for t in copied_tops if t in data["dists"] and t not in native}
    wanted |= {p for p in (project, "amd-aiter", "fbgemm-gpu-genai")}

    def norm(n: str) -> str:
        return n.lower().replace("-", "_").replace(".", "_")

    keys = {norm(w) for w in wanted}
    for name in os.listdir(root_abs):
        if name.endswith(".dist-info") and norm(name[:-len(".dist-info")].rsplit("-", 1)[0]) in keys:
            os.makedirs(os.path.join(dest, name), exist_ok=True)  # METADATA is what a version lookup reads
            shutil.copy2(os.path.join(root_abs, name, "METADATA"), os.path.join(dest, name, "METADATA"))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    wheels = sorted({data["dists"].get(top, top) for top in native} - {data["dists"].get("numpy", "numpy")})
    return {"project": project, "files": copied, "bytes": size, "built": data["built"], "native_deps": wheels}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--site", required=True)
    p.add_argument("--out", default=os.path.join(".whl", "trees"))
    p.add_argument("--project", action="append", choices=sorted(PROJECTS))
    p.add_argument("--into", help="cut every chosen project into one tree OUT/INTO (the union of their files: "
                                  "projects sharing dependencies, e.g. SGLang and vLLM with transformers 5)")
    p.add_argument("--requirements", help="write the dependencies with compiled code (name==version) here, for "
                                          "pip download of the GPU machine's wheels")
    args = p.parse_args(argv)
    chosen = args.project or [p for p in PROJECTS if os.path.isdir(os.path.join(args.site, p))]
    if args.into:
        shutil.rmtree(os.path.join(args.out, args.into), ignore_errors=True)
    wheels: set[str] = set()
    for project in chosen:
        r = cut(args.site, project, args.out, args.into)
        wheels |= set(r["native_deps"])
        print(f"{project:8} {r['files']:5} files {r['bytes'] / 1e6:7.2f} MB   built: {'; '.join(r['built'])}"
              + (f"   carry as wheels (native code): {', '.join(r['native_deps'])}" if r["native_deps"] else ""))
    if args.requirements:
        with open(args.requirements, "w", encoding="utf-8") as f:
            f.write("".join(f"{w}\n" for w in sorted(wheels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

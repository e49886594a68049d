"""Every ```python block of the README and docs/ runs as written.

A block runs in a fresh namespace with examples/kernel-repo on the path (its
``mykernels`` is the package the docs' examples import). A block that uses a
name it does not define (an input ``x``, the reader's own kernel) gets it from
PRELUDES, keyed by the block's first line; a new block that needs one and has
none fails with a NameError here. Functions named ``test_*`` and a conftest's
``pytest_fp8check_kernels`` that a block defines are called; test classes
made by ``fp8check.kernel_tests`` are checked for what they hold. Blocks that
run a whole check (seconds per input dtype) are in the slow lane.
"""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

_CAST = """
import torch
def cast_e4m3fnuz(x):
    return x.to(torch.float32).clamp(-240.0, 240.0).to(torch.float8_e4m3fnuz)
"""

PRELUDES = {
    # the README's and core's encode/decode: any float array
    "import fp8check\ncodes = fp8check.encode(x,": "import torch\nx = torch.randn(1000) * 300\n",
    "import numpy as np, fp8check\ncodes": "import numpy as np\nx = (np.random.default_rng(0).standard_normal(999) * 300)\n",
    # the README's API example names the reader's kernel
    "import fp8check\n\nreport = fp8check.check_cast(cast_e4m3fnuz": _CAST,
    # recipes: a weight and the reader's quantizer (a correct block-1x128 one)
    "from fp8check import quantizers\n": "import torch\nw = torch.randn(256, 384)\nx = torch.randn(64, 512)\n",
    "from fp8check.quantizers.conformance import check_quantizer": (
        "from fp8check import quantizers\n"
        "def my_quant(x):\n"
        "    return quantizers.quantize(x, quantizers.get('block-1x128', 'e4m3fn'))\n"),
    # the strategies example: the reader's cast, NumPy in, codes out
    "from hypothesis import given\n\nimport fp8check\nfrom fp8check import strategies": (
        "def my_cast(x):\n"
        "    from fp8check import reference\n"
        "    return reference.encode(x, 'e4m3fnuz', 'satfinite')\n"),
    # the faithful interpreter: a Triton quantize kernel and its arguments
    "import fp8check.triton as ft": (
        "import torch, triton, triton.language as tl\n"
        "@triton.jit\n"
        "def quantize_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    v = tl.load(x_ptr + i, mask=i < n)\n"
        "    tl.store(y_ptr + i, tl.clamp(v, -240.0, 240.0).to(tl.float8e4b8), mask=i < n)\n"
        "n = 3000\n"
        "x = torch.randn(n) * 300\n"
        "y = torch.empty(n, dtype=torch.float8_e4m3fnuz)\n"
        "grid = (triton.cdiv(n, 1024),)\n"),
}
_NEEDS = {"import fp8check.triton as ft": "triton"}
# what a block needs by what it imports (the README lane installs neither torchao nor Triton)
_IMPORT_NEEDS = {"from fp8check import training": "torchao"}
_WHOLE_CHECK = re.compile(r"\bcheck_(cast|quantizer|fused|distributed)\(")


def _blocks():
    for path in DOCS:
        for i, m in enumerate(BLOCK.finditer(path.read_text())):
            code = m.group(1)
            marks = [pytest.mark.slow] if _WHOLE_CHECK.search(code) else []
            yield pytest.param(path, code, id=f"{path.relative_to(ROOT)}-{i + 1}", marks=marks)


def _prelude(code: str) -> tuple[str, str | None]:
    for start, prelude in PRELUDES.items():
        if code.startswith(start):
            return prelude, next((m for s, m in _NEEDS.items() if code.startswith(s)), None)
    return "", None


def test_every_prelude_is_used():
    codes = [p.values[1] for p in _blocks()]
    unused = [k for k in PRELUDES if not any(c.startswith(k) for c in codes)]
    assert not unused, f"preludes for blocks no document has any more: {unused}"


@pytest.mark.parametrize("path, code", list(_blocks()))
def test_the_code_block_runs_as_written(path, code, monkeypatch, tmp_path):
    import fp8check
    from fp8check.declarations import KernelDeclaration

    prelude, needs = _prelude(code)
    for need in [needs] + [m for imp, m in _IMPORT_NEEDS.items() if imp in code]:
        if need:
            pytest.importorskip(need)
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "kernel-repo"))
    monkeypatch.chdir(tmp_path)
    # a file, not exec(): triton.jit reads its kernel's source
    script = tmp_path / f"{path.stem.lower().replace('-', '_')}_block.py"
    script.write_text(prelude + "\n" + code)
    namespace = runpy.run_path(str(script), run_name="docs_block")
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value):
            value()
        elif name == "pytest_fp8check_kernels":
            declared = value()
            assert declared and all(isinstance(d, KernelDeclaration) for d in declared)
            for d in declared:
                d.resolve(d.kernel)  # the module:function it names imports
        elif isinstance(value, type) and getattr(value, "fp8check_declarations", None):
            assert any(n.startswith("test_") for n in vars(value)), name
    if "fp8check.triton" in code:
        assert "y" in namespace and namespace["y"].view(torch.uint8).any()
    assert "fp8check" in sys.modules and fp8check.__version__

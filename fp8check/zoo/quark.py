"""AMD Quark: the FP8 casts of its torch hardware emulation (``torch.ops.quark.*``).

``quark/torch/kernel/hw_emulation/hw_emulation_interface.py`` (amd-quark
0.13) defines ``quant_fp8_e4m3(x) = clamp(x, -448, 448).to(float8_e4m3fn)``
and ``quant_fp8_e5m2`` likewise with 57344: a saturating RNE cast (profile
``satfinite``). amd-quark 0.13 is pure Python (2.6 MB) and imports on a
CPU beside torch 2.13.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fp8check.zoo import ZooEntry
from fp8check.zoo._adapters import import_package

from fp8check.zoo import KnownIssue

HW = "quark.torch.kernel.hw_emulation.hw_emulation_interface"


def _cast_kernel(op: str, fmt: str) -> Any:
    import torch

    from fp8check import formats, profiles
    from fp8check.casts.adapters import CastKernel

    m = import_package(HW, "amd-quark")
    fn = getattr(m, op)

    def to_torch(x: np.ndarray) -> Any:
        if x.dtype.name == "bfloat16":
            return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(x))

    return CastKernel(name=f"quark.{op}", description=f"amd-quark {op}: clamp then .to()",
                      claims=profiles.get("satfinite"), formats=(formats.get(fmt),),
                      input_dtypes=("float32", "float16", "bfloat16"),
                      cast_fn=lambda x, f: fn(to_torch(x)), builtin=False)


def make_quant_fp8_e4m3(mode: str = "eager") -> Any:
    return _cast_kernel("quant_fp8_e4m3", "e4m3fn")


def make_quant_fp8_e5m2(mode: str = "eager") -> Any:
    return _cast_kernel("quant_fp8_e5m2", "e5m2")


def quant_fp8_e4m3(x: Any) -> Any:
    """For ``fp8check check fp8check.zoo.quark:quant_fp8_e4m3 --format e4m3fn --profile satfinite``."""
    return import_package(HW, "amd-quark").quant_fp8_e4m3(x)


def quant_fp8_e5m2(x: Any) -> Any:
    return import_package(HW, "amd-quark").quant_fp8_e5m2(x)


_CITE = ("amd-quark 0.13, quark/torch/kernel/hw_emulation/hw_emulation_interface.py: {op}: inputs = torch.clamp(inputs, "
         "min=-{m}, max={m}); return inputs.to(torch.float8_{t})")

ENTRIES = (
    ZooEntry(id="amd-quark.quant_fp8_e4m3", package="amd-quark", module=HW, versions="==0.13",
             function="torch.ops.quark.quant_fp8_e4m3 (hw_emulation_interface.quant_fp8_e4m3)", kind="cast",
             claims="satfinite", fmt="e4m3fn", citation=_CITE.format(op="quant_fp8_e4m3", m=448, t="e4m3fn"),
             adapter="fp8check.zoo.quark:quant_fp8_e4m3", modes=("eager",), dtypes=("float32", "bfloat16", "float16")),
    ZooEntry(id="amd-quark.quant_fp8_e5m2", package="amd-quark", module=HW, versions="==0.13",
             function="torch.ops.quark.quant_fp8_e5m2 (hw_emulation_interface.quant_fp8_e5m2)", kind="cast",
             claims="satfinite", fmt="e5m2", citation=_CITE.format(op="quant_fp8_e5m2", m=57344, t="e5m2"),
             adapter="fp8check.zoo.quark:quant_fp8_e5m2", modes=("eager",), dtypes=("float32", "bfloat16", "float16"),
             known=(KnownIssue(summary="NaN is encoded 0x7F/0xFF (torch's e5m2 NaN payload), the reference 0x7E/0xFE: "
                                       "a NaN payload, still NaN", upstream="torch's cast (fp8check FACTS: torch e5m2 NaN "
                                       "encoding); not Quark's", categories=frozenset({"nan"})),)),
)

"""fp8check: prove FP8 code numerically correct, bit for bit.

The core API::

    import fp8check
    codes = fp8check.encode(x, "e4m3fnuz", profile="ieee")   # uint8 codes
    values = fp8check.decode(codes, "e4m3fnuz")              # exact float64
    report = fp8check.check_cast(my_cast, format="e4m3fnuz", profile="satfinite")
    fp8check.assert_conforms(report)

Names are loaded on first use, so that ``import fp8check`` (and the pytest
plugin, which lives in this package) costs nothing in a test run that never
touches FP8.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "encode": "fp8check.reference",
    "decode": "fp8check.reference",
    "encode_tensor": "fp8check.reference",
    "Format": "fp8check.formats",
    "Profile": "fp8check.profiles",
    "FP8CheckError": "fp8check.errors",
    "InvalidValueError": "fp8check.errors",
    "UnknownFormatError": "fp8check.errors",
    "UnknownProfileError": "fp8check.errors",
    "UnsupportedDtypeError": "fp8check.errors",
    "UnsupportedFormatError": "fp8check.errors",
    "check_cast": "fp8check.api",
    "check_quantizer": "fp8check.api",
    "check_fused": "fp8check.api",
    "check_decode": "fp8check.api",
    "check_dequant": "fp8check.api",
    "check_gemm": "fp8check.api",
    "gemm_kernel": "fp8check.declarations",
    "assert_conforms": "fp8check.api",
    "Report": "fp8check.api",
    "cast_kernel": "fp8check.declarations",
    "quantizer_kernel": "fp8check.declarations",
    "fused_kernel": "fp8check.declarations",
    "static_quantizer": "fp8check.declarations",
    "decode_kernel": "fp8check.declarations",
    "dequant_kernel": "fp8check.declarations",
    "declared_recipe": "fp8check.quantizers",
    "kernel_tests": "fp8check.suite.testing",
    "measure_gates": "fp8check.gates",
}
_MODULES = ("formats", "profiles", "stacks", "quantizers")  # as the docs write them: fp8check.quantizers.get(...)

__all__ = sorted(_EXPORTS) + list(_MODULES)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(f"fp8check.{name}")
    else:
        raise AttributeError(f"module 'fp8check' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

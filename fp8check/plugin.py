"""The fp8check pytest plugin (registered through the ``pytest11`` entry point).

Declares the suite's markers and skips ``gpu`` tests cleanly where no CUDA
device is present.
"""

from __future__ import annotations

import pytest

MARKERS = {
    "fnuz": "fnuz: checks of the AMD CDNA3 formats e4m3fnuz and e5m2fnuz",
    "ocp": "ocp: checks of the OCP formats e4m3fn and e5m2",
    "e4m3fn": "e4m3fn: checks of e4m3fn",
    "e4m3fnuz": "e4m3fnuz: checks of e4m3fnuz",
    "e5m2": "e5m2: checks of e5m2",
    "e5m2fnuz": "e5m2fnuz: checks of e5m2fnuz",
    "mx": "mx: checks of OCP MX formats and scales (e8m0fnu, fp4, fp6)",
    "gpu": "gpu: needs a CUDA device; skipped cleanly without one",
    "exhaustive": "exhaustive: sweeps a whole input space (all codes, all 16-bit inputs)",
    "slow": "slow: takes more than a few seconds",
}


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS.values():
        config.addinivalue_line("markers", line)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (none found)")
        for item in gpu_items:
            item.add_marker(skip)

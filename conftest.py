"""fp8check's own test run: tests marked ``gpu`` skip cleanly without a CUDA device.

(The plugin skips only the GPU targets it generates; another project's
``gpu`` marker is that project's business.)
"""

import pytest


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    try:
        import torch

        available = torch.cuda.is_available()
    except ImportError:
        available = False
    if not available:
        skip = pytest.mark.skip(reason="needs a CUDA device (none found)")
        for item in gpu_items:
            item.add_marker(skip)

"""gemlite 0.6.0.post2: no entry runs on a CPU.

``import gemlite`` (and so ``gemlite.quant_utils``, where
``scale_activations_per_token_triton_v1`` lives) fails on a machine without
CUDA: ``gemlite/triton_kernels/utils.py`` line 10 runs
``torch.cuda.get_device_capability()`` at import ("AssertionError: Torch not
compiled with CUDA enabled"). The recipe it claims is in the catalog
(``gemlite-per-token``: ``max(amax/448, 1e-6)`` per row, the clamp on the
scale); the GPU script (gpu/zoo.py) checks it on CUDA when gemlite is carried.
"""

ENTRIES = ()

"""The Float8LinearConfig this repository trains with, per FP8 format.

``buggy_config`` is a planted bug: it casts grad_output to e4m3 where torchao's tensorwise recipe
declares e5m2 (fp8check flags it as ``format``).
"""

import torch
from torchao.float8 import CastConfig, Float8LinearConfig

_E4M3 = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
_E5M2 = {"e4m3fn": torch.float8_e5m2, "e4m3fnuz": torch.float8_e5m2fnuz}


def config(fmt: str) -> Float8LinearConfig:
    """torchao's tensorwise recipe in ``fmt``'s family (e4m3fnuz/e5m2fnuz on MI300), emulated GEMMs on a CPU."""
    e4m3, e5m2 = CastConfig(target_dtype=_E4M3[fmt]), CastConfig(target_dtype=_E5M2[fmt])
    return Float8LinearConfig(cast_config_input=e4m3, cast_config_weight=e4m3, cast_config_grad_output=e5m2,
                              emulate=not torch.cuda.is_available())


def buggy_config(fmt: str) -> Float8LinearConfig:
    e4m3 = CastConfig(target_dtype=_E4M3[fmt])
    return Float8LinearConfig(cast_config_input=e4m3, cast_config_weight=e4m3, cast_config_grad_output=e4m3,
                              emulate=not torch.cuda.is_available())

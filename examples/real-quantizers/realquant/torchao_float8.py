"""torchao 0.18's FP8 quantizers: float8 training's dynamic casts (``tensor_to_scale`` +
``hp_tensor_and_scale_to_float8``, what ``hp_tensor_to_float8_dynamic`` does; tensorwise and rowwise) and float8 inference's per-row quantization (``_choose_scale_float8`` +
``_quantize_affine_float8``, what ``Float8Tensor`` with ``PerRow()`` does)."""

from __future__ import annotations


def _training(x, rowwise: bool):
    import torch
    from torchao.float8.config import ScalingGranularity
    from torchao.float8.float8_training_tensor import hp_tensor_and_scale_to_float8
    from torchao.float8.float8_utils import tensor_to_scale

    if rowwise:
        s = tensor_to_scale(x, torch.float8_e4m3fn, scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=-1)
        t = hp_tensor_and_scale_to_float8(x, s, torch.float8_e4m3fn, axiswise_dim=-1)
    else:
        t = hp_tensor_and_scale_to_float8(x, tensor_to_scale(x, torch.float8_e4m3fn), torch.float8_e4m3fn)
    return t._data, t._scale


def training_tensorwise(x):
    return _training(x, rowwise=False)


def training_rowwise(x):
    return _training(x, rowwise=True)


def inference_per_row(x):
    import torch
    from torchao.quantization.quant_primitives import _choose_scale_float8, _quantize_affine_float8

    block = [1, x.shape[1]]
    scale = _choose_scale_float8(x, block, torch.float8_e4m3fn)
    return _quantize_affine_float8(x, scale, torch.float8_e4m3fn), scale

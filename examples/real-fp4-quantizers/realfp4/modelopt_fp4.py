"""NVIDIA ModelOpt (nvidia-modelopt 0.47.0) FP4 tensors: ``NVFP4QTensor.quantize(x, 16)`` (per-tensor
``weights_scaling_factor_2`` and per-block e4m3 ``weights_scaling_factor`` computed from x, what its export writes
as ``weight_scale_2`` / ``weight_scale``) and ``MXFP4QTensor.quantize(x, 32)`` (e8m0 exponents)."""

from __future__ import annotations


def nvfp4(x):
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor

    qtensor, block_scales, per_tensor = NVFP4QTensor.quantize(x, 16)
    return qtensor._quantized_data, block_scales, per_tensor


def mxfp4(x):
    from modelopt.torch.quantization.qtensor.mxfp4_tensor import MXFP4QTensor

    qtensor, e8m0 = MXFP4QTensor.quantize(x, 32)
    return qtensor._quantized_data, e8m0.reshape(x.shape[0], x.shape[1] // 32)

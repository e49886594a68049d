"""torchao 0.18's FP4 quantizers: MX ``to_mx`` with ``torch.float4_e2m1fn_x2`` elements (block 32, e8m0 scales,
``ScaleCalculationMode`` FLOOR or RCEIL; what ``MXTensor.to_mx`` runs with the EMULATED kernel preference) and
NVFP4 ``nvfp4_quantize`` with the per-tensor scale its dynamic activation path computes
(``per_tensor_amax_to_scale(torch.max(torch.abs(x)))``, ``NVFP4Tensor`` in nvfp4_tensor.py)."""

from __future__ import annotations


def _mx(x, mode: str):
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    scale, data = to_mx(x, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode[mode])
    return data, scale


def mxfp4_floor(x):
    return _mx(x, "FLOOR")


def mxfp4_rceil(x):
    return _mx(x, "RCEIL")


def nvfp4(x):
    import torch
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

    per_tensor = per_tensor_amax_to_scale(torch.max(torch.abs(x)))
    scales, data = nvfp4_quantize(x, 16, per_tensor)
    return data, scales, per_tensor

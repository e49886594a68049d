"""compressed-tensors 0.19.0 FP8: ``calculate_qparams`` and ``quantize`` with
``QuantizationArgs(num_bits=8, type="float", symmetric=True, strategy=...)``, the min/max taken as
its observers take them (over the tensor, or per output channel)."""

from __future__ import annotations


def _quantize(x, strategy: str):
    import torch
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.utils.helpers import calculate_qparams

    args = QuantizationArgs(num_bits=8, type="float", symmetric=True, strategy=strategy)
    if strategy == "tensor":
        lo, hi = torch.aminmax(x)
    else:
        lo, hi = x.amin(dim=1, keepdim=True), x.amax(dim=1, keepdim=True)
    scale, zero_point = calculate_qparams(lo, hi, args)
    return quantize(x, scale, zero_point, args, dtype=torch.float8_e4m3fn), scale


def per_tensor(x):
    return _quantize(x, "tensor")


def per_channel(x):
    return _quantize(x, "channel")

"""compressed-tensors 0.19.0 NVFP4 (the ``NVFP4`` preset scheme: num_bits 4, float, tensor_group, group 16,
e4m3 scales): ``generate_gparam`` over the tensor's min/max, ``calculate_qparams`` over each group's min/max (as
its min/max observer reduces them), ``quantize`` with the global scale, ``pack_fp4_to_uint8`` -- what its NVFP4
compressor stores as ``weight_packed``, ``weight_scale`` and ``weight_global_scale``."""

from __future__ import annotations


def nvfp4(x):
    import torch
    from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.quant_scheme import NVFP4
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

    args: QuantizationArgs = NVFP4["weights"]
    lo, hi = torch.aminmax(x)
    global_scale = generate_gparam(lo, hi)
    groups = x.reshape(x.shape[0], x.shape[1] // args.group_size, args.group_size)
    scale, zero_point = calculate_qparams(groups.amin(dim=-1), groups.amax(dim=-1), args, global_scale=global_scale)
    q = quantize(x, scale, zero_point, args, global_scale=global_scale)
    return pack_fp4_to_uint8(q), scale, global_scale

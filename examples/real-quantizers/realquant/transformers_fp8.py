"""transformers 5.17 fine-grained FP8: ``Fp8Quantize._quantize_one`` (integrations/finegrained_fp8.py),
what saving a model quantized with ``FineGrainedFP8Config()`` does to each 128x128-divisible weight."""

from __future__ import annotations


def fp8_quantize_weight(x):
    import types

    from transformers.integrations.finegrained_fp8 import Fp8Quantize
    from transformers.utils.quantization_config import FineGrainedFP8Config

    op = Fp8Quantize(types.SimpleNamespace(quantization_config=FineGrainedFP8Config()))
    out = op._quantize_one("w.weight", x)
    return out["w.weight"], out["w.weight_scale_inv"]

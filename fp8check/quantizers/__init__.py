"""Scaling recipes: named, frozen descriptions of how quantizers compute scales.

::

    from fp8check import quantizers
    r = quantizers.get("block-128x128")                  # DeepSeek-V3 weight blocks, e4m3fn
    codes, scales = quantizers.quantize(w, r)           # what a correct kernel returns
    w2 = quantizers.dequantize(codes, scales, r)        # float64, exact for scale_inv
    r_fnuz = quantizers.get("tensorwise", "e4m3fnuz")   # same recipe, max 240

Named recipes (``recipes.names()``), all e4m3fn unless a format is given:

==================================  ===========================================================
``tensorwise`` ``rowwise``          fp8check's recommended recipes: ``scale_inv = max(amax,
``colwise``                         1e-12) / max`` in float32, non-finite values left out of
``group-rowwise`` ``group-colwise`` amax (nothing finite is lost), satfinite elements.
``block-1x128``                     DeepSeek-V3 activation blocks (``max(amax, 1e-4)/448``,
``block-128x128``                   ``x / s``); 128x128 weight blocks with ragged edges, the
                                    ``weight_scale_inv`` layout; non-finite left out.
``deepseek-v3-act``                 DeepSeek-V3's original ``act_quant``: ``amax/448``, no eps
                                    (an all-zero block gives 0/0: NaN codes), IEEE non-finite.
``deepseek-v3.1-act``               the later ``act_quant``: ``max(amax, 1e-4)/448``.
``deepseek-ue8m0``                  the same rounded up to a power of two (``scale_fmt="ue8m0"``).
``mx-e8m0-floor``                   OCP MX v1.0: block 1x32, ``X = 2^(floor(log2 amax) - emax)``,
                                    e8m0 (clamped at 2^-127; non-finite block -> NaN scale).
``mx-e8m0-ceil``                    round-up variant ``2^(ceil(log2 amax) - emax)`` (torchao CEIL).
``mx-e8m0-rceil``                   NVIDIA/cuBLAS ``2^ceil(log2(amax / max))`` (torchao RCEIL).
``nvfp4-torchao`` ``nvfp4-ct``      NVFP4 (e2m1fn, e4m3fn scales per 16, a float32 per-tensor scale,
``nvfp4-modelopt``                  packed low-first) as torchao 0.18, compressed-tensors 0.19 and
``nvfp4-torchao-single``            ModelOpt 0.47 compute it; the MX recipes take e2m1fn/e2m3fn/e3m2fn.
``torchao-tensorwise`` ...          torchao 0.18 float8 training: ``scale = max / max(amax,
                                    1e-12)`` in float64, ``x * scale``, clamp, cast; IEEE
                                    non-finite. ``-rowwise``, ``-colwise``, ``-group-rowwise``,
                                    ``-group-colwise`` and ``-pow2`` variants (scale rounded
                                    down to a power of two).
``rowwise-bf16-scale``              rowwise with the scale stored in bfloat16 (compressed-tensors
                                    stores the model's dtype).
``transformers-fp8-weight``        recipes that third-party packages claim, checked by
``per-token-group-1x128`` (``-224``) :mod:`fp8check.zoo` (docs/zoo.md cites where each is
``gemlite-per-token`` ``coat-1x16`` stated): transformers' block weights, vLLM/SGLang
``ct-tensor`` ``ct-rowwise``        per-token-group, gemlite per-token, compressed-tensors
``ct-block-128x128`` ``ct-group-128`` (``-bf16``: bfloat16 inputs, scales in bfloat16);
``quark-tensor-bf16`` ...           AMD Quark on bfloat16 weights (``-rowwise-bf16`` too).
==================================  ===========================================================
"""

from __future__ import annotations

from fp8check.quantizers.recipe import (
    COLWISE,
    GROUP_COLWISE,
    GROUP_ROWWISE,
    ROWWISE,
    TENSORWISE,
    Granularity,
    Recipe,
    block,
)
from fp8check.quantizers.scaling import (
    FnuzConversion,
    Quantized,
    block_amax,
    convert_fn_to_fnuz,
    dequantize,
    e8m0_codes,
    expand_scales,
    quantize,
    scales_from_amax,
    applied_scales,
    apply_scale,
    element_scales,
    global_scale,
)
from fp8check.quantizers.packing import pack_codes, unpack_codes
from fp8check.quantizers.declared import declared_recipe, declared_recipes
from fp8check.quantizers.presets import RECIPES, UnknownRecipeError, get, names

__all__ = [
    "Granularity",
    "Recipe",
    "TENSORWISE",
    "ROWWISE",
    "COLWISE",
    "GROUP_ROWWISE",
    "GROUP_COLWISE",
    "block",
    "RECIPES",
    "UnknownRecipeError",
    "get",
    "names",
    "quantize",
    "dequantize",
    "Quantized",
    "block_amax",
    "scales_from_amax",
    "expand_scales",
    "e8m0_codes",
    "convert_fn_to_fnuz",
    "FnuzConversion",
    "declared_recipe",
    "declared_recipes",
    "applied_scales",
    "apply_scale",
    "element_scales",
    "global_scale",
    "pack_codes",
    "unpack_codes",
]

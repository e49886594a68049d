"""The named recipes (``quantizers.get(NAME)``): built-in presets and the ones third-party packages claim.

A leaf of :mod:`fp8check.quantizers`: :mod:`.declared` builds a repository's recipes from these, and the
package re-exports both, so nothing imports back up.
"""

from __future__ import annotations

from fp8check.errors import FP8CheckError
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

__all__ = ["RECIPES", "UnknownRecipeError", "get", "names"]


class UnknownRecipeError(FP8CheckError, LookupError):
    """A recipe name that names no known recipe."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _fp8check(name: str, granularity: Granularity, description: str, **kw: object) -> Recipe:
    kw.setdefault("eps", 1e-12)
    return Recipe(name=name, format="e4m3fn", granularity=granularity, convention="scale_inv",
                  nonfinite="finite", description=description, **kw)


def _torchao(name: str, granularity: Granularity, pow2: bool, description: str) -> Recipe:
    return Recipe(
        name=name + ("-pow2" if pow2 else ""),
        format="e4m3fn",
        granularity=granularity,
        convention="scale",
        eps=1e-12,
        scale_precision="float64",
        pow2="floor" if pow2 else None,
        nonfinite="ieee",
        description=description + (", scale rounded down to a power of two" if pow2 else ""),
    )


def _mx(name: str, description: str, **kw: object) -> Recipe:
    return Recipe(name=name, format="e4m3fn", granularity=block(1, 32), convention="scale_inv",
                  scale_dtype="e8m0", nonfinite="ieee", ragged=False, description=description, **kw)


_ALL: list[Recipe] = [
    _fp8check("tensorwise", TENSORWISE, "one scale_inv per tensor, max(amax, 1e-12)/max, non-finite left out"),
    _fp8check("rowwise", ROWWISE, "one scale_inv per row"),
    _fp8check("colwise", COLWISE, "one scale_inv per column"),
    _fp8check("group-rowwise", GROUP_ROWWISE, "one scale_inv per (MoE group of columns, row)"),
    _fp8check("group-colwise", GROUP_COLWISE, "one scale_inv per (MoE group of rows, column)"),
    _fp8check("block-1x128", block(1, 128), "DeepSeek-V3 activation blocks, max(amax, 1e-4)/448",
              eps=1e-4, ragged=False),
    _fp8check("block-128x128", block(128, 128), "DeepSeek-V3 weight blocks (weight_scale_inv), ragged edges",
              eps=1e-4),
    Recipe(name="deepseek-v3-act", format="e4m3fn", granularity=block(1, 128), convention="scale_inv",
           nonfinite="ieee", ragged=False,
           description="DeepSeek-V3 act_quant as first published: amax/448 with no eps"),
    Recipe(name="deepseek-v3.1-act", format="e4m3fn", granularity=block(1, 128), convention="scale_inv",
           eps=1e-4, nonfinite="ieee", ragged=False,
           description="DeepSeek-V3.1 act_quant: max(amax, 1e-4)/448"),
    Recipe(name="deepseek-ue8m0", format="e4m3fn", granularity=block(1, 128), convention="scale_inv",
           eps=1e-4, pow2="ceil", nonfinite="ieee", ragged=False,
           description="DeepSeek act_quant with scale_fmt='ue8m0': 2^ceil(log2(max(amax, 1e-4)/448))"),
    _mx("mx-e8m0-floor", "OCP MX v1.0 block 32: X = 2^(floor(log2 amax) - emax)", rule="mx-floor"),
    _mx("mx-e8m0-ceil", "MX block 32, round up: X = 2^(ceil(log2 amax) - emax) (torchao CEIL)",
        rule="mx-ceil"),
    _mx("mx-e8m0-rceil", "MX block 32, NVIDIA RCEIL: X = 2^ceil(log2(amax / max))", pow2="ceil"),
    Recipe(name="rowwise-bf16-scale", format="e4m3fn", granularity=ROWWISE, convention="scale_inv",
           eps=1e-12, scale_dtype="bfloat16",
           description="rowwise with the scale stored in bfloat16 (compressed-tensors style)"),
]
for _pow2 in (False, True):
    _ALL += [
        _torchao("torchao-tensorwise", TENSORWISE, _pow2, "torchao tensor_to_scale + to_fp8_saturated"),
        _torchao("torchao-rowwise", ROWWISE, _pow2, "torchao axiswise scaling over the last dim"),
        _torchao("torchao-colwise", COLWISE, _pow2, "torchao axiswise scaling over dim 0"),
        _torchao("torchao-group-rowwise", GROUP_ROWWISE, _pow2,
                 "torchao triton_fp8_per_group_rowwise_scales (groups split the columns)"),
        _torchao("torchao-group-colwise", GROUP_COLWISE, _pow2,
                 "torchao triton_fp8_per_group_colwise_scales (groups split the rows)"),
    ]

# Recipes that third-party packages claim (fp8check.zoo checks them; docs/zoo.md cites the source of each).
_ALL += [
    Recipe(name="transformers-fp8-weight", format="e4m3fn", granularity=block(128, 128), convention="scale_inv",
           nonfinite="ieee", ragged=False, zero_scale=1.0,
           description="transformers FineGrainedFP8 weight quantization (Fp8Quantize): 128x128 blocks of a weight whose "
                       "shape is a multiple of the block, weight_scale_inv = amax/448, an all-zero block stored as 1.0"),
    Recipe(name="per-token-group-1x128", format="e4m3fn", granularity=block(1, 128), convention="scale_inv",
           eps=1e-10, nonfinite="ieee", ragged=False,
           description="vLLM / SGLang per_token_group_quant_fp8 (group 128, eps 1e-10): max(amax, 1e-10)/448"),
    Recipe(name="per-token-group-1x128-224", format="e4m3fn", target=224.0, granularity=block(1, 128),
           convention="scale_inv", eps=1e-10, nonfinite="ieee", ragged=False,
           description="vLLM / SGLang per-token-group on MI300 (gfx94x, with --format e4m3fnuz): "
                       "max(amax, 1e-10)/224, the range both use for e4m3fnuz instead of 240"),
    Recipe(name="coat-1x16", format="e4m3fn", granularity=block(1, 16), convention="scale_inv", eps=1e-10,
           scale_dtype="bfloat16", nonfinite="ieee", ragged=False,
           description="fp8-coat fp8_quantize (1x16 groups): (amax + 1e-10)/448, the scale stored in bfloat16"),
    Recipe(name="gemlite-per-token", format="e4m3fn", granularity=ROWWISE, convention="scale_inv",
           nonfinite="ieee", scale_min=1e-6,
           description="gemlite scale_activations_per_token: max(amax/448, 1e-6) per row (the scale is clamped, not amax)"),
]
for _suffix, _dtype, _eps in (("", "float32", 2.0 ** -23), ("-bf16", "bfloat16", 2.0 ** -7)):
    for _name, _gran, _ragged, _what in (
            ("ct-tensor", TENSORWISE, True, "strategy tensor"),
            ("ct-rowwise", ROWWISE, True, "strategy channel (weights) or token (activations)"),
            ("ct-block-128x128", block(128, 128), True, "strategy block, block_structure [128, 128]"),
            ("ct-group-128", block(1, 128), False, "strategy group, group_size 128")):
        _ALL.append(Recipe(
            name=_name + _suffix, format="e4m3fn", granularity=_gran, convention="scale_inv", nonfinite="ieee",
            ragged=_ragged, scale_dtype=_dtype, zero_scale=_eps,
            description=f"compressed-tensors FP8 ({_what}): scale = amax/448 in the {_dtype} of the input, "
                        f"a zero scale replaced by that dtype's eps ({_eps:g})"))

for _name, _gran, _what in (("quark-tensor-bf16", TENSORWISE, "FP8E4M3PerTensorSpec"),
                            ("quark-rowwise-bf16", ROWWISE, "FP8E4M3PerChannelSpec(ch_axis=0)")):
    # float32 inputs: Quark is ct-tensor / ct-rowwise exactly (zero scale -> float32 eps).
    _ALL.append(Recipe(
        name=_name, format="e4m3fn", granularity=_gran, convention="scale_inv", nonfinite="ieee", ragged=True,
        scale_dtype="bfloat16", zero_scale=2.0 ** -23,
        description=f"AMD Quark FP8 ({_what}) on bfloat16 weights: scale = amax/448 in bfloat16 (the model's dtype), "
                    "a zero scale replaced by float32's eps (2^-23)"))

# The dynamic quantizers serving stacks ship, as their sources write them (docs/recipes.md cites each file).
# They multiply by a float32 reciprocal instead of dividing, take no eps (or clamp the scale), and take amax with
# fmaxf / tl.max, which skip NaN but keep Inf.
_ALL += [
    Recipe(name="vllm-per-token", format="e4m3fn", granularity=ROWWISE, convention="scale_inv", nonfinite="skip-nan",
           apply="multiply-reciprocal", scale_min=1.0 / (448.0 * 512.0),
           description="vLLM dynamic_per_token_scaled_fp8_quant (csrc/quantization/fp8/common.cu): amax with fmaxf, "
                       "scale = max(amax/448, 1/(448*512)), x * (1/scale), clamp, cast"),
    Recipe(name="vllm-per-tensor", format="e4m3fn", granularity=TENSORWISE, convention="scale_inv",
           nonfinite="skip-nan", apply="multiply-reciprocal",
           description="vLLM dynamic_scaled_fp8_quant (csrc/quantization/fp8/common.cu): amax with fmaxf, "
                       "scale = amax/448 (no eps), scaled_fp8_quant_kernel: x * (1/scale), clamp, cast"),
    Recipe(name="sglang-per-token", format="e4m3fn", granularity=ROWWISE, convention="scale_inv",
           nonfinite="skip-nan", apply="multiply-reciprocal",
           description="SGLang sgl-kernel per_token_quant_fp8: amax with fmaxf, scale = amax/448 (no eps), "
                       "x * (1/scale), clamp, cast"),
    Recipe(name="aiter-per-token", format="e4m3fn", granularity=ROWWISE, convention="scale_inv",
           nonfinite="skip-nan", apply="multiply-reciprocal",
           description="AMD aiter _dynamic_per_token_quant_fp8_i8_kernel (Triton): tl.max(|x|), scale = amax/max "
                       "(no eps), x * (1/scale), cast"),
    Recipe(name="aiter-per-tensor", format="e4m3fn", granularity=TENSORWISE, convention="scale_inv",
           nonfinite="skip-nan", apply="multiply-reciprocal",
           description="AMD aiter dynamic_per_tensor_quant_fp8_i8 (Triton): tl.max(|x|)/max with atomic_max, then "
                       "static_per_tensor_quant: x * (1/scale), cast"),
    Recipe(name="fbgemm-rowwise", format="e4m3fn", granularity=ROWWISE, convention="scale", eps=1e-12,
           nonfinite="skip-nan", stored="reciprocal",
           description="FBGEMM triton_quantize_fp8_row (fp8_gemm.py): tl.max(|x|), a_scale = 448/max(amax, 1e-12), "
                       "x * a_scale, clamp, cast; stores 1/a_scale (float32)"),
]

# NVFP4 (e2m1fn elements, e4m3fn scales per 16, two codes per byte, low nibble first), as each source computes it:
# the sources differ in the per-tensor scale's direction and arithmetic, so each is a recipe (docs/recipes.md, "FP4
# and FP6"; scaling._two_level cites the files).
_ALL += [
    Recipe(name="nvfp4-torchao", format="e2m1fn", granularity=block(1, 16), rule="nvfp4-torchao",
           scale_dtype="e4m3fn", scale_min=2.0 ** -6, nonfinite="ieee", ragged=False, packed="low-first",
           description="torchao 0.18 nvfp4_quantize with per_tensor_scale = amax / (448 * 6): e4m3 block scales "
                       "clamp(fl(amax_b/6)/g, 2^-6, 448), x * fl(fl(1/g)/s)"),
    Recipe(name="nvfp4-torchao-single", format="e2m1fn", granularity=block(1, 16), scale_dtype="e4m3fn",
           scale_min=2.0 ** -6, apply="multiply-reciprocal", nonfinite="ieee", ragged=False, packed="low-first",
           description="torchao 0.18 nvfp4_quantize without a per-tensor scale: e4m3(clamp(amax_b/6, 2^-6, 448)), "
                       "x * fl(1/s)"),
    Recipe(name="nvfp4-modelopt", format="e2m1fn", granularity=block(1, 16), rule="nvfp4-modelopt",
           scale_dtype="e4m3fn", zero_scale=1.0, scale_min=2.0 ** -9, nonfinite="ieee", ragged=False,
           packed="low-first",
           description="nvidia-modelopt 0.47 NVFP4QTensor.quantize: g = amax / (6 * 448), e4m3 block scales "
                       "clamp(fl(amax_b/fl(6*g)) (0 -> 1), 2^-9, 448), x / fl(s*g)"),
    Recipe(name="nvfp4-ct", format="e2m1fn", granularity=block(1, 16), rule="nvfp4-ct", scale_dtype="e4m3fn",
           zero_scale=0.125, nonfinite="ieee", ragged=False, packed="low-first",
           description="compressed-tensors 0.19 NVFP4: global_scale G = 2688 * fl(1/amax) (NaN/Inf -> 1), e4m3 "
                       "block scales e4m3(G * fl(amax_b/6)) (0 -> 0.125), x / fl(s/G)"),
]

RECIPES: dict[str, Recipe] = {r.name: r for r in _ALL}



def names() -> tuple[str, ...]:
    return tuple(RECIPES)


def get(name: object, fmt: object = None, *, declared: dict[str, Recipe] | None = None) -> Recipe:
    """The recipe ``name`` (a :class:`Recipe` is returned as is), for ``fmt`` when given.

    ``declared``: the recipes a repository declares (``declared_recipes``), looked up before the built-in ones.
    """
    if isinstance(name, Recipe):
        recipe = name
    else:
        key = str(name).strip().lower().replace("_", "-")
        if declared and key in declared:
            recipe = declared[key]
        elif key not in RECIPES:
            mine = f"declared here: {', '.join(declared)}; " if declared else ""
            raise UnknownRecipeError(f"unknown recipe {name!r}; {mine}known recipes: {', '.join(names())} "
                                     "(a repository declares its own in [tool.fp8check.recipe.NAME])")
        else:
            recipe = RECIPES[key]
    return recipe if fmt is None else recipe.with_format(fmt)

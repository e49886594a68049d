"""How each producer writes a quantized checkpoint, as data (DESIGN: "layout").

One row per layout: the element format (FP8, packed e2m1 FP4), the scaled-matmul
kind a target must execute to run it natively (``fp8``, ``mxfp8``, ``mxfp4``,
``nvfp4``), the names of the data tensor and of its scales, which way a scale is
applied, the block size and where it is declared, the config keys that select
the layout; each with the producer, the version read and the source it was read
from. The audit reads the config, picks the layout and binds its block size; a
checkpoint whose config names a method or a packed format that no row describes
gets no verdict (``unknown``, saying what was not understood).

Packed e2m1: two values per byte, the element of even index in the low nibble
(compressed-tensors ``pack_fp4_to_uint8``, gpt-oss/transformers
``convert_moe_packed_tensors``: ``lut[blk & 0x0F]`` then ``lut[blk >> 4]``);
nibble ``s.ee.m``: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (0x8 is -0).
"""

from __future__ import annotations

from dataclasses import dataclass

FP8 = "fp8"
MXFP8 = "mxfp8"
MXFP4 = "mxfp4"
NVFP4 = "nvfp4"
KINDS = (FP8, MXFP8, MXFP4, NVFP4)

MULTIPLY = "multiply"
DIVIDE = "divide"


@dataclass(frozen=True, kw_only=True)
class Layout:
    name: str
    producer: str
    version: str  # the version whose source was read
    source: str  # where the naming, the packing and the scale rule were read
    kind: str  # the scaled-matmul kind that runs it natively
    element: str  # element format of the data: e4m3fn, e5m2, e2m1 (packed two per byte)
    data: str  # suffix of the data tensor's name
    scale: str  # suffix of the block (or tensor/channel) scale, replacing ``data``
    scale_format: str  # float32/bf16/..., e8m0 (uint8 bytes 2^(b-127)), e4m3fn
    direction: str = MULTIPLY  # value = element x scale
    second_scale: str = ""  # NVFP4's per-tensor scale, replacing ``data``
    second_direction: str = MULTIPLY
    block: int | None = None  # elements per scale along the input dim when the format fixes it
    block_declared_by: str = ""  # the config key that sets the block size, or "the format"
    config: str = ""  # the config keys (and values) that select this layout
    packed_shape: str = ""  # how the data's shape relates to the logical [out, in]
    # The scales a quantized module carries besides its block scale (rules between tensors, see relations.py):
    # the static activation scale's suffix (replacing ``data``), required where the config's activation scheme
    # is static (conventions.QuantConfig.static_activations)
    input_scale: str = "input_scale"
    # scales whose value a loader takes once for the shards it fuses (q/k/v, gate/up): they must agree
    fused_shared: tuple[str, ...] = ()
    fused_loader: str = ""  # what the loader does with them, cited

    @property
    def packed(self) -> bool:
        return self.element == "e2m1"

    @property
    def scale_dtypes(self) -> tuple[str, ...]:
        """The stored dtypes its producer writes for the block (or tensor/channel) scale."""
        return SCALE_FORMAT_DTYPES.get(self.scale_format, tuple(self.scale_format.split("/")))

    @property
    def second_scale_dtypes(self) -> tuple[str, ...]:
        return ("float32",) if self.second_scale else ()


# the stored dtypes of each scale encoding: e8m0 as uint8 bytes (safetensors U8) or torch.float8_e8m0fnu
SCALE_FORMAT_DTYPES = {"e8m0": ("uint8", "float8_e8m0fnu"), "e4m3fn": ("float8_e4m3fn",), "float32": ("float32",)}
# vLLM (main, modelopt.py at 00155cde, read 2026-12-05: vllm/model_executor/layers/quantization/modelopt.py
# ModelOptNvFp4LinearMethod and ModelOptNvFp4FusedMoE.process_weights_after_loading;
# compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py)
NVFP4_FUSED_LOADER = ("vLLM takes one global scale for a fused linear (q/k/v, gate/up): weight_scale_2.max() / "
                      "weight_global_scale.max(), and for fused MoE experts the gate's (w13_weight_scale_2[:, 0], "
                      "warning 'w1_weight_scale_2 must match w3_weight_scale_2'); every other shard is dequantized "
                      "with that value")


# What the loaders do with an FP8 weight that has no scale where no config declares quantization (every scale and
# the quantization_config dropped on a re-save): read in transformers 5.17 src/transformers/core_model_loading.py
# (convert_and_load_state_dict_in_model: with no hf_quantizer the tensor is materialized with the parameter's
# dtype, _materialize_copy's tensor.to(dtype)) and vLLM main (vllm/model_executor/layers/linear.py at 0036d38d:
# LinearBase with quant_config None builds UnquantizedLinearMethod, a params_dtype weight, and weight_loader's
# param.data.copy_(loaded_weight)).
UNSCALED_LOADER = ("no loader dequantizes it: the weights are the raw FP8 values, off by the dropped scale "
                   "(with no quantization config transformers builds no FP8 quantizer and casts the float8 tensor "
                   "to the model's dtype; vLLM copies it into an unquantized linear)")

LAYOUTS: tuple[Layout, ...] = (
    Layout(name="transformers-fp8", producer="transformers FineGrainedFP8 / DeepSeek-V3", version="transformers 5.17",
           source="transformers src/transformers/integrations/finegrained_fp8.py (Fp8Dequantize: weight x "
                  "weight_scale_inv, the block taken from the scale's grid) and quantizers/quantizer_finegrained_fp8.py "
                  "(uint8 scale_inv read as ue8m0); DeepSeek-V3 inference/model.py",
           kind=FP8, element="e4m3fn", data="weight", scale="weight_scale_inv", scale_format="float32",
           block_declared_by="config.json quantization_config.weight_block_size ([128, 128])",
           config='quant_method "fp8", fmt "e4m3", weight_block_size, scale_fmt "ue8m0" (optional)'),
    Layout(name="compressed-tensors-fp8", producer="compressed-tensors (llmcompressor)", version="0.19",
           source="compressed-tensors src/compressed_tensors/quantization/quant_args.py (strategy, block_structure, "
                  "group_size), compressors/naive_quantized; written by llmcompressor 0.14 in tests/zoo",
           kind=FP8, element="e4m3fn", data="weight", scale="weight_scale", scale_format="bfloat16/float16/float32",
           block_declared_by="config_groups.*.weights.block_structure (block) or group_size (group)",
           config='quant_method "compressed-tensors", format "float-quantized", weights {num_bits 8, type "float"}'),
    Layout(name="compressed-tensors-nvfp4", producer="compressed-tensors (llmcompressor)", version="0.19",
           source="compressed-tensors src/compressed_tensors/compressors/nvfp4/base.py (NVFP4PackedCompressor: "
                  "weight_packed via pack_fp4_to_uint8, weight_scale, weight_global_scale)",
           kind=NVFP4, element="e2m1", data="weight_packed", scale="weight_scale", scale_format="e4m3fn",
           second_scale="weight_global_scale", second_direction=DIVIDE, block=16, input_scale="input_global_scale",
           fused_shared=("weight_global_scale",), fused_loader=NVFP4_FUSED_LOADER,
           block_declared_by="config_groups.*.weights.group_size (16)",
           config='quant_method "compressed-tensors", format "nvfp4-pack-quantized", weights {num_bits 4, '
                  'type "float", strategy "tensor_group", group_size 16}',
           packed_shape="[out, in/2] uint8"),
    Layout(name="compressed-tensors-mxfp4", producer="compressed-tensors (llmcompressor MXFP4A16)", version="0.19",
           source="compressed-tensors src/compressed_tensors/compressors/mxfp4/base.py (MXFP4PackedCompressor: "
                  "weight_packed, weight_scale as uint8 exponents (compress_mx_scale, bias 127), no global scale)",
           kind=MXFP4, element="e2m1", data="weight_packed", scale="weight_scale", scale_format="e8m0", block=32,
           block_declared_by="config_groups.*.weights.group_size (32)",
           config='quant_method "compressed-tensors", format "mxfp4-pack-quantized", weights {num_bits 4, '
                  'type "float", strategy "group", group_size 32}', packed_shape="[out, in/2] uint8"),
    Layout(name="compressed-tensors-mxfp8", producer="compressed-tensors (llmcompressor MXFP8A16)", version="0.19",
           source="compressed-tensors src/compressed_tensors/compressors/mxfp8/base.py (MXFP8QuantizationCompressor: "
                  "weight float8_e4m3fn, weight_scale as uint8 exponents)",
           kind=MXFP8, element="e4m3fn", data="weight", scale="weight_scale", scale_format="e8m0", block=32,
           block_declared_by="config_groups.*.weights.group_size (32)",
           config='quant_method "compressed-tensors", format "mxfp8-quantized", weights {num_bits 8, type "float", '
                  'strategy "group", group_size 32}'),
    Layout(name="modelopt-fp8", producer="NVIDIA TensorRT Model Optimizer (HF export)", version="0.47",
           source="nvidia-modelopt modelopt/torch/export/unified_export_hf.py (export_hf_checkpoint, run on a CPU in "
                  "tests/zoo: weight e4m3fn, weight_scale float32 [], hf_quant_config.json quant_algo FP8); vLLM "
                  "modelopt.py",
           kind=FP8, element="e4m3fn", data="weight", scale="weight_scale", scale_format="float32",
           block_declared_by="hf_quant_config.json quantization.quant_algo (FP8_PB_WO: 128x128, 4-D scale)",
           config='hf_quant_config.json quantization.quant_algo "FP8"'),
    Layout(name="modelopt-nvfp4", producer="NVIDIA TensorRT Model Optimizer (HF export)", version="0.47",
           source="TensorRT-Model-Optimizer modelopt/torch/export/quant_utils.py (weight_scale_2); vLLM "
                  "modelopt.py ModelOptNvFp4LinearMethod",
           kind=NVFP4, element="e2m1", data="weight", scale="weight_scale", scale_format="e4m3fn",
           second_scale="weight_scale_2", second_direction=MULTIPLY, block=16,
           fused_shared=("weight_scale_2",), fused_loader=NVFP4_FUSED_LOADER,
           block_declared_by="hf_quant_config.json quantization.group_size (16)",
           config='hf_quant_config.json quantization.quant_algo "NVFP4"', packed_shape="[out, in/2] uint8"),
    Layout(name="quark-fp8", producer="AMD Quark", version="0.13",
           source="amd-quark quark/torch/export/api.py export_safetensors (run on a CPU in tests/zoo: weight, "
                  "weight_scale, input_scale; quant_method quark, global_quant_config.weight.dtype fp8_e4m3); vLLM "
                  "quark/schemes/quark_w8a8_fp8.py",
           kind=FP8, element="e4m3fn", data="weight", scale="weight_scale", scale_format="float32",
           block_declared_by="per_tensor / per_channel (no block)",
           config='quant_method "quark", global_quant_config.weight.dtype "fp8_e4m3"'),
    Layout(name="quark-mxfp4", producer="AMD Quark (OCP MX)", version="0.13",
           source="amd-quark quark/torch/export/nn/modules/realquantizer.py (scale_format e8m0: to_e8m0_uint8); "
                  "vLLM quark/schemes/quark_ocp_mx.py (weight uint8 packed fp4, weight_scale uint8 e8m0, group 32)",
           kind=MXFP4, element="e2m1", data="weight", scale="weight_scale", scale_format="e8m0", block=32,
           block_declared_by="global_quant_config.weight.group_size (32)",
           config='quant_method "quark", weight {dtype "fp4", qscheme "per_group", group_size 32, '
                  'scale_format "e8m0"}', packed_shape="[out, in/2] uint8"),
    Layout(name="gpt-oss-mxfp4", producer="OpenAI gpt-oss (as transformers reads it)", version="transformers 5.17",
           source="transformers src/transformers/integrations/mxfp4.py convert_moe_packed_tensors "
                  "(scales - 127 as exponents, blocks.shape[:-1] == scales.shape, low nibble first)",
           kind=MXFP4, element="e2m1", data="_blocks", scale="_scales", scale_format="e8m0", block=32,
           block_declared_by="the format (16 bytes = 32 elements per scale)",
           config='quant_method "mxfp4", modules_to_not_convert',
           packed_shape="[..., out, in/32, 16] uint8, scales [..., out, in/32]"),
    Layout(name="torchao-float8", producer="torchao Float8Tensor", version="0.18",
           source="torchao torchao/quantization/quantize_/workflows/float8/float8_tensor.py",
           kind=FP8, element="e4m3fn", data="qdata", scale="scale", scale_format="float32",
           block_declared_by="the tensor's own block_size"),
    Layout(name="torchao-mx", producer="torchao MXTensor", version="0.18",
           source="torchao torchao/prototype/mx_formats/mx_tensor.py (qdata, scale e8m0, block_size 32)",
           kind=MXFP8, element="e4m3fn", data="qdata", scale="scale", scale_format="e8m0", block=32,
           block_declared_by="the tensor's own block_size"),
    Layout(name="torchao-mxfp4", producer="torchao MXTensor (fp4 elements)", version="0.18",
           source="torchao torchao/prototype/mx_formats/mx_tensor.py (qdata packed e2m1, scale e8m0, block_size 32)",
           kind=MXFP4, element="e2m1", data="qdata", scale="scale", scale_format="e8m0", block=32,
           block_declared_by="the tensor's own block_size", packed_shape="[out, in/2] uint8"),
    Layout(name="torchao-nvfp4", producer="torchao NVFP4Tensor", version="0.18",
           source="torchao torchao/prototype/mx_formats/nvfp4_tensor.py (qdata packed, scale e4m3fn, "
                  "per_tensor_scale)",
           kind=NVFP4, element="e2m1", data="qdata", scale="scale", scale_format="e4m3fn",
           second_scale="per_tensor_scale", block=16, block_declared_by="the tensor's own block_size",
           packed_shape="[out, in/2] uint8"),
)
BY_NAME = {lay.name: lay for lay in LAYOUTS}

# quant_method values (config.json quantization_config) that some row above describes
KNOWN_METHODS = ("fp8", "fbgemm_fp8", "compressed-tensors", "quark", "modelopt", "mxfp4", "torchao")


def packed_layout(config_packed: str, quant_method: str, *, name: str, scale_dtype: str | None,
                  file_packed: str = "") -> Layout | None:
    """The packed layout a tensor ``name`` of a checkpoint with this config belongs to, or None.
    ``file_packed``: what the file itself says the tensor holds (torchao's subclasses)."""
    if file_packed:
        return BY_NAME.get(f"torchao-{file_packed}")
    if name.endswith("_blocks") and quant_method == "mxfp4":
        return BY_NAME["gpt-oss-mxfp4"]
    if name.endswith("weight_packed") and config_packed == NVFP4:
        return BY_NAME["compressed-tensors-nvfp4"]
    if name.endswith("weight_packed") and config_packed == MXFP4 and quant_method == "compressed-tensors":
        return BY_NAME["compressed-tensors-mxfp4"]
    if config_packed == NVFP4 and quant_method == "modelopt":
        return BY_NAME["modelopt-nvfp4"]
    if config_packed == MXFP4 and quant_method == "quark":
        return BY_NAME["quark-mxfp4"]
    return None


def scale_names(name: str) -> list[str]:
    """The block-scale names the packed layouts give data tensor ``name``."""
    out = []
    for lay in LAYOUTS:
        if lay.packed and name.endswith(lay.data):
            cand = name[: len(name) - len(lay.data)] + lay.scale
            if cand != name and cand not in out:
                out.append(cand)
    return out


def second_scale_names(name: str) -> list[str]:
    out = []
    for lay in LAYOUTS:
        if lay.second_scale and name.endswith(lay.data):
            cand = name[: len(name) - len(lay.data)] + lay.second_scale
            if cand not in out:
                out.append(cand)
    return out


def fp8_layout(quant_method: str, config_format: str, *, name: str, scale_dtype: str | None) -> Layout | None:
    """The FP8 layout a data tensor ``name`` of a checkpoint with this config belongs to, or None (no config)."""
    if name.endswith("qdata"):  # torchao subclasses, flattened
        return BY_NAME["torchao-mx" if scale_dtype in SCALE_FORMAT_DTYPES["e8m0"] else "torchao-float8"]
    if quant_method == "fp8":
        return BY_NAME["transformers-fp8"]
    if quant_method == "compressed-tensors":
        return BY_NAME["compressed-tensors-mxfp8" if config_format == "mxfp8-quantized" else "compressed-tensors-fp8"]
    if quant_method == "modelopt":
        return BY_NAME["modelopt-fp8"]
    if quant_method == "quark":
        return BY_NAME["quark-fp8"]
    return None


def module_of(name: str, lay: Layout) -> str:
    """The module a data tensor belongs to: ``m.weight`` -> ``m``, ``m.down_proj_blocks`` -> ``m.down_proj``."""
    if not name.endswith(lay.data):
        return name.rpartition(".")[0]
    return name[: len(name) - len(lay.data)].rstrip("._")

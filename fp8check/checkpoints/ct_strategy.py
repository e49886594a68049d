"""compressed-tensors ``strategy`` keys against the scales a checkpoint stores (DESIGN: "relation between tensors").

A config group's ``weights.strategy`` and ``input_activations.strategy`` decide the shape of the scale parameters
vLLM allocates before it reads a tensor (vLLM main, read 2026-12-05):

- weights ``tensor``: one value per fused shard (``PerTensorScaleParameter``, a ``[] or [1]`` tensor per shard);
  ``channel``: ``[out, 1]`` (``ChannelQuantScaleParameter``); ``block`` [b0, b1]: ``[ceil(out/b0), ceil(in/b1)]``
  (``BlockQuantScaleParameter``) -- all from
  vllm/model_executor/layers/quantization/utils/fp8_utils.py ``create_fp8_scale_parameter``, chosen by
  compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py ``CompressedTensorsW8A8Fp8.create_weights``;
  ``group`` g: one scale per g inputs of each row, ``[out, ceil(in/g)]`` (compressed-tensors' layout, MXFP8's 32);
- static input activations (``dynamic false``, ``tensor``): one value per shard (fp8_utils.py
  ``create_fp8_input_scale``; NVFP4's ``input_global_scale`` alike).

vllm/model_executor/parameter.py loads no checkpoint tensor of another shape: ``BasevLLMParameter
._assert_and_load`` (o_proj, down_proj), ``_ColumnvLLMParameter.load_qkv_weight`` / ``load_merged_column_weight``
(narrowed to the shard, then asserted) and ``PerTensorScaleParameter._load_into_shard_id`` (``shape[0] == 1``, then
asserted against the shard's 0-d slot) assert the shape: the checkpoint does not load. MoE experts go through
vllm/model_executor/layers/fused_moe/layer.py ``FusedMoE.weight_loader``: a per-tensor scale is reduced with
``_to_scalar`` (``reshape(())``: one value in any shape loads, more raise); a per-channel one is copied into the
expert's ``[rows, 1]`` slice after ``_narrow_expert_data_for_padding`` narrows that slice to the loaded tensor's size,
so a ``[1]`` scale fills the first row only and the others keep the 1.0 the parameter was created with
(compressed_tensors_moe_w8a8_fp8.py ``CompressedTensorsW8A8Fp8MoEMethod.create_weights``: ``torch.ones``); versions
whose ``_load_w13`` narrows the checkpoint tensor to the shard raise instead. A 0-d one is broadcast to every row
(the same values; those versions raise on it).

compressed-tensors itself refuses some configs (conventions.QuantConfig.strategy_refused), and vLLM validates every
config group when it reads the config (compressed_tensors.py ``CompressedTensorsConfig
._quantization_scheme_map_from_config``: ``QuantizationArgs.model_validate``): no module of such a checkpoint loads.
"""

from __future__ import annotations

import math

from fp8check.checkpoints import conventions, findings, granularity
from fp8check.checkpoints.records import Checkpoint, Record

_DENSE_ASSERT = ("its loaders assert that shape (vllm/model_executor/parameter.py BasevLLMParameter._assert_and_load "
                 "for o_proj/down_proj, _ColumnvLLMParameter.load_qkv_weight / load_merged_column_weight and "
                 "PerTensorScaleParameter._load_into_shard_id for q/k/v and gate/up): the checkpoint does not load")
_REFUSED = ("vLLM validates every config group when it reads the config (compressed_tensors.py CompressedTensorsConfig"
            "._quantization_scheme_map_from_config: QuantizationArgs.model_validate), so it raises: the checkpoint "
            "does not load")


def strategy_findings(ck: Checkpoint) -> None:
    """STRATEGY_INVALID and STRATEGY_MISMATCH on the quantized data tensors of a compressed-tensors checkpoint."""
    cfg = ck.config
    if cfg.quant_method != "compressed-tensors":
        return
    for rec in ck.records:
        if rec.entry is None or rec.role not in (conventions.ROLE_FP8, conventions.ROLE_PACKED) \
                or rec.layout is None or not rec.layout.name.startswith("compressed-tensors"):
            continue
        if cfg.strategy_refused:  # nothing loads: the shapes are moot
            for refused in cfg.strategy_refused:
                rec.findings.append(findings.make("STRATEGY_INVALID", 1, f"{refused}: {_REFUSED}"))
            continue
        if rec.role == conventions.ROLE_FP8:
            _weight_scale(cfg, rec)
        _input_scale(ck, rec)


def _expert(name: str) -> bool:
    return ".experts." in name


def _weight_scale(cfg: conventions.QuantConfig, rec: Record) -> None:
    """STRATEGY_MISMATCH: an FP8 weight's scale whose shape is none of the declared weight strategies' shapes."""
    sc = rec.scale
    if rec.entry is None:
        return
    data = tuple(rec.entry.shape)
    declared = [s for s in cfg.weight_strategies if s.num_bits == 8 and s.type == "float"]
    if sc is None or len(data) != 2 or not declared or any(f.code == "SCALE_SHAPE" for f in rec.findings):
        return  # no scale (SCALE_MISSING), or one that fits no granularity at all (SCALE_SHAPE) says it already
    outcomes = [_weight_outcome(s, data, tuple(sc.entry.shape), _expert(rec.key[1])) for s in declared]
    misfits = [o for o in outcomes if o is not None]
    if len(misfits) < len(outcomes):
        return  # it fits a declared strategy (which group targets which module is the targets' call, not read here)
    severity = min((sev for sev, _ in misfits), key=lambda sev: findings.SEVERITY_RANK[sev])
    reads = f" (read as {sc.granularity.name})" if sc.granularity is not None else ""
    head = f"{sc.key[1]} {list(sc.entry.shape)}{reads} does not fit "
    rec.findings.append(findings.make("STRATEGY_MISMATCH", sc.entry.numel,
                                      head + "; nor does it fit ".join(text for _, text in misfits), severity))


def _weight_outcome(s: conventions.Strategy, data: tuple[int, ...], scale: tuple[int, ...],
                    expert: bool) -> tuple[str, str] | None:
    """None where a weight scale of shape ``scale`` loads under ``s``, else (severity, what vLLM does)."""
    out = data[0]
    numel = math.prod(scale)
    declared = f'{s.where} strategy "{s.strategy}"'
    if s.strategy == "tensor":
        if numel == 1 and (len(scale) <= 1 or expert):
            return None
        if expert:
            return findings.ERROR, (f"{declared}: vLLM's FusedMoE loader reduces a per-tensor scale to one value "
                                    "(fused_moe/layer.py FusedMoE._to_scalar, reshape(())), which raises for "
                                    f"{numel} values: the checkpoint does not load")
        return findings.ERROR, (f"{declared}: vLLM allocates one scale per shard, [] or [1] on disk "
                                f"(PerTensorScaleParameter), and {_DENSE_ASSERT}")
    if s.strategy == "channel":
        if scale == (out, 1):
            return None
        if not expert:
            return findings.ERROR, (f"{declared}: vLLM allocates [{out}, 1] (ChannelQuantScaleParameter) and "
                                    f"{_DENSE_ASSERT}")
        if not scale:
            return findings.WARNING, (f"{declared}: vLLM's FusedMoE loader copies a 0-d scale into every row of the "
                                      "expert's [rows, 1] scale (fused_moe/layer.py _load_w13 / "
                                      "_load_per_channel_weight_scale: the same values), but versions whose _load_w13 "
                                      "narrows the checkpoint tensor raise on it, and the dense layers' loader refuses "
                                      "it")
        if numel == 1:
            return findings.ERROR, (f"{declared}: vLLM's FusedMoE loader narrows the expert's [{out}, 1] scale to the "
                                    "one row given (fused_moe/layer.py _narrow_expert_data_for_padding in _load_w13 / "
                                    "_load_per_channel_weight_scale): the other rows keep the 1.0 the parameter was "
                                    "created with (CompressedTensorsW8A8Fp8MoEMethod.create_weights: torch.ones), and "
                                    "the expert's weights there are dequantized with scale 1 (versions that narrow "
                                    "the checkpoint tensor instead raise)")
        return findings.ERROR, (f"{declared}: vLLM's FusedMoE loader copies it into the expert's [{out}, 1] scale "
                                "(fused_moe/layer.py _load_w13 / _load_per_channel_weight_scale): it raises, or fills "
                                "only part of it")
    if s.strategy == "block" and s.block is not None:
        want = tuple(granularity.block_scale_shape(data, s.block))
        if scale == want:
            return None
        return findings.ERROR, (f"{declared} {list(s.block)}: vLLM allocates {list(want)} (BlockQuantScaleParameter) "
                                "and its loaders assert that shape (parameter.py; FusedMoE's copy raises or fills only "
                                "part of it): the checkpoint does not load")
    if s.strategy == "group" and s.group_size:
        want = tuple(granularity.block_scale_shape(data, (1, s.group_size)))
        if scale == want:
            return None
        return findings.ERROR, (f"{declared} group_size {s.group_size}: one scale per {s.group_size} inputs of each "
                                f"row is {list(want)}, the shape vLLM sizes its scale parameter to from the config: "
                                "another does not load into it")
    return None  # tensor_group: packed NVFP4, whose block scale the layout checks (SCALE_SHAPE)


def _input_scale(ck: Checkpoint, rec: Record) -> None:
    """STRATEGY_MISMATCH: a static per-tensor input scale that holds more than one value, or a shape vLLM does not
    load a single value from."""
    lay = rec.layout
    static = [s for s in ck.config.input_strategies if s.static]
    if lay is None or not static or any(s.strategy not in ("tensor", "tensor_group") for s in static):
        return
    name = rec.key[1][: len(rec.key[1]) - len(lay.data)] + lay.input_scale
    entry = next((r.entries[name] for r in ck.readers.values() if name in r.entries), None)
    if entry is None:
        return  # INPUT_SCALE_MISSING's
    shape = tuple(entry.shape)
    expert = _expert(name)
    if entry.numel == 1 and (len(shape) <= 1 or expert):
        return
    declared = " / ".join(f'{s.where} strategy "{s.strategy}" (dynamic {str(s.dynamic).lower()})' for s in static)
    if expert:
        does = ("vLLM's FusedMoE loader stores one input scale per expert (fused_moe/layer.py FusedMoE.weight_loader, "
                "_load_single_value), which a tensor of more values does not fit: the checkpoint does not load")
    else:
        does = ("vLLM allocates one input scale per shard, [] or [1] on disk (a PerTensorScaleParameter: fp8_utils.py "
                "create_fp8_input_scale; NVFP4's input_global_scale in compressed_tensors_w4a4_nvfp4.py), and "
                f"{_DENSE_ASSERT}")
    rec.findings.append(findings.make("STRATEGY_MISMATCH", entry.numel,
                                      f"{name} {list(shape)} where {declared} declares one static scale per tensor: "
                                      f"{does}"))

"""How real checkpoints name FP8 tensors and their scales, and what configs say.

Pairing (``X`` is a data tensor's full name):

- ``X_scale_inv`` (DeepSeek-V3 ``weight_scale_inv``: multiplied despite the
  name), ``X_scale`` (compressed-tensors, ModelOpt, fbgemm, Quark, AutoFP8,
  MX ``weight_scale`` in e8m0), ``X.scale_inv``, ``X.scale``;
- ``P.weights_scaling_factor`` for ``P.weight`` (TensorRT-LLM);
- ``P.scale`` for ``P.qdata`` and ``P._weight_scale`` for ``P._weight_qdata``
  (torchao tensors flattened to plain tensors).

The first candidate that exists in the same file wins, then one in another
file of the same checkpoint (for a sharded checkpoint: where the index's
``weight_map`` puts it). Every FP8 convention in use multiplies by the scale.

Standalone scales by name: activation scales (``input_scale``,
``activation_scaling_factor``) and KV-cache scales (``k_scale``, ``v_scale``,
``kv_scale``, ``q_scale``, ``prob_scale``, ``k_proj.output_scale``,
``v_proj.output_scale``, ``kv_cache_scaling_factor``); -1 there means "absent".

One-byte integer tensors are FP8 only when a name pairs them with a scale
*and* a quantization config declares FP8 weights (or ``--bytes-format``
says so): packed fp4 and e8m0 scale bytes are one byte too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from fp8check import formats
from fp8check.checkpoints import dtypes
from fp8check.checkpoints import layouts
from fp8check.formats import Format

ROLE_FP8 = "fp8"
ROLE_SCALE = "scale"
ROLE_ACTIVATION_SCALE = "activation_scale"
ROLE_KV_SCALE = "kv_scale"
ROLE_BYTES = "bytes"  # one-byte integers next to a scale, format unknown
ROLE_PACKED = "packed"  # one-byte integers a config declares packed fp4 / MX
ROLE_OTHER = "other"

_ACTIVATION_RE = re.compile(r"(^|[._])(input_scale|input_global_scale|activation_scaling_factor)$")
_KV_RE = re.compile(
    r"(^|[._])(k_scale|v_scale|kv_scale|q_scale|prob_scale|kv_cache_scaling_factor)$"
    r"|(^|\.)(k_proj|v_proj|q_proj)\.output_scale$"
)
_SCALE_RE = re.compile(r"(^|[._])(scale|scales|scale_inv|weight_scale_2|scaling_factor|global_scale)$|_scale(_inv)?$")


def scale_candidates(name: str) -> list[str]:
    """The names a scale of data tensor ``name`` may have, in priority order."""
    out = [name + "_scale_inv", name + "_scale", name + ".scale_inv", name + ".scale"]
    if name.endswith("weight"):
        out.append(name[: -len("weight")] + "weights_scaling_factor")
    if name.endswith("qdata"):
        out.append(name[: -len("qdata")] + "scale")
    out.extend(c for c in layouts.scale_names(name) if c not in out)  # X_blocks -> X_scales, weight_packed -> weight_scale
    return out


def scale_role_by_name(name: str) -> str | None:
    """``activation_scale``, ``kv_scale``, ``scale`` for a name that looks like a scale, else None."""
    if _KV_RE.search(name):
        return ROLE_KV_SCALE
    if _ACTIVATION_RE.search(name):
        return ROLE_ACTIVATION_SCALE
    if _SCALE_RE.search(name):
        return ROLE_SCALE
    return None


# -- quantization configs ------------------------------------------------------


# compressed-tensors 0.19 quant_args.py QuantizationStrategy: every value it accepts; the weight and input strategies
# whose scale shapes fp8check models (attn_head is the KV cache's, a weight or input strategy no FP8 scheme reads)
CT_STRATEGIES = ("tensor", "channel", "group", "block", "token", "tensor_group", "attn_head")
CT_MODELLED = {"weights": ("tensor", "channel", "group", "block", "tensor_group"),
               "input_activations": ("tensor", "token", "group", "tensor_group")}
# the strategies compressed-tensors accepts with dynamic true (validate_model_after)
CT_DYNAMIC = ("token", "tensor", "tensor_group", "group")


@dataclass(frozen=True)
class Strategy:
    """One config group's declared quantization of weights or input activations (compressed-tensors
    QuantizationArgs), its strategy inferred from group_size where absent, as compressed-tensors does."""

    where: str  # config_groups.NAME.weights / .input_activations
    strategy: str
    num_bits: Any = None
    type: str = ""
    block: tuple[int, int] | None = None
    group_size: int | None = None
    dynamic: bool | str = False

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "strategy": self.strategy, "block": list(self.block) if self.block else None,
                "group_size": self.group_size, "dynamic": self.dynamic}

    @property
    def static(self) -> bool:
        """A stored, calibrated scale: dynamic false, or "local" (NVFP4's stored global scale)."""
        return self.dynamic in (False, "local")


@dataclass
class QuantConfig:
    """What config.json / hf_quant_config.json declare, as far as an audit needs."""

    source: str = ""  # which file and key said it
    quant_method: str = ""
    weight_format: Format | None = None  # the FP8 format of quantized weights, if declared
    packed: str = ""  # "nvfp4", "mxfp4", ... when weights are packed narrower than FP8
    block: tuple[int, int] | None = None
    # the block is declared for every quantized weight (one config group, or all alike): a scale of another shape
    # does not load (vLLM sizes the block scale parameter from the config and copies into it)
    block_everywhere: bool = False
    group_size: int | None = None
    ue8m0_scales: bool = False
    dequant_dtype: str | None = None
    # config.json torch_dtype naming an FP8 dtype: a model saved in that dtype, its weights the stored values
    fp8_model_dtype: Format | None = None
    # a model config (config.json) was read: only then does a missing quantization config say it was dropped
    model_config_read: bool = False
    not_understood: list[str] = field(default_factory=list)  # what the config says that no layout describes
    # static activations: every quantized module carries its layout's input scale (the key that says so, or "")
    static_activations: str = ""
    # dynamic activations declared in so many words (activation_scheme "dynamic", dynamic true, is_dynamic true):
    # the loaders make no input scale parameter, so a stored one is read by nothing (the key that says so, or "")
    dynamic_activations: str = ""
    # ModelOpt MIXED_PRECISION: module prefix -> its quant_algo (FP8, NVFP4, W4A16_NVFP4), from quantized_layers
    layer_schemes: dict[str, str] = field(default_factory=dict)
    # compressed-tensors: each config group's declared strategy for weights and for input activations
    weight_strategies: list[Strategy] = field(default_factory=list)
    input_strategies: list[Strategy] = field(default_factory=list)
    # what compressed-tensors' own validation refuses in config_groups (vLLM validates every group when it reads the
    # config): where and the error it raises
    strategy_refused: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "quant_method": self.quant_method,
            "weight_format": self.weight_format.name if self.weight_format else None,
            "packed": self.packed or None,
            "block": list(self.block) if self.block else None,
            "group_size": self.group_size,
            "ue8m0_scales": self.ue8m0_scales,
            "dequant_dtype": self.dequant_dtype,
            "not_understood": list(self.not_understood),
            "strategies": [s.to_dict() for s in self.weight_strategies + self.input_strategies],
            "strategy_refused": list(self.strategy_refused),
        }


_FP8_NAMES = {"e4m3": formats.E4M3FN, "e4m3fn": formats.E4M3FN, "fp8_e4m3": formats.E4M3FN,
              "float8_e4m3fn": formats.E4M3FN, "e5m2": formats.E5M2, "fp8_e5m2": formats.E5M2,
              "float8_e5m2": formats.E5M2, "fp8": formats.E4M3FN, "fp8_e4m3fnuz": formats.E4M3FNUZ,
              "e4m3fnuz": formats.E4M3FNUZ, "e5m2fnuz": formats.E5M2FNUZ,
              "float8_e4m3fnuz": formats.E4M3FNUZ, "float8_e5m2fnuz": formats.E5M2FNUZ}
_DTYPE_NAMES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                "float": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _int_pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value):
        return int(value[0]), int(value[1])
    return None


def parse_config(docs: dict[str, Any]) -> QuantConfig:
    """Read the quantization facts out of config.json / hf_quant_config.json.

    Unknown or malformed fields are ignored: a config only sharpens the audit
    (FP8 bytes in integer tensors, the preferred block size, the dequantized
    dtype); it never decides a finding on its own.
    """
    q = QuantConfig()
    config = docs.get("config.json") or {}
    q.model_config_read = isinstance(config, dict) and bool(config)
    if isinstance(config, dict):
        dt = config.get("torch_dtype") or config.get("dtype")
        if isinstance(dt, str):
            q.dequant_dtype = _DTYPE_NAMES.get(dt.lower().removeprefix("torch."))
            if dt.lower().removeprefix("torch.").startswith("float8_"):
                q.fp8_model_dtype = _FP8_NAMES.get(dt.lower().removeprefix("torch."))
        qc = config.get("quantization_config")
        if isinstance(qc, dict):
            q.raw = qc
            q.source = "config.json quantization_config"
            method = str(qc.get("quant_method", "")).lower()
            q.quant_method = method
            if method == "fp8":  # DeepSeek / transformers FineGrainedFP8
                q.weight_format = _FP8_NAMES.get(str(qc.get("fmt", "e4m3")).lower(), formats.E4M3FN)
                q.block = _int_pair(qc.get("weight_block_size"))
                q.block_everywhere = q.block is not None
                q.ue8m0_scales = str(qc.get("scale_fmt", "")).lower() == "ue8m0"
                scheme = str(qc.get("activation_scheme", "")).lower()
                if scheme == "static":
                    q.static_activations = 'config.json quantization_config.activation_scheme "static"'
                elif scheme == "dynamic":
                    q.dynamic_activations = 'config.json quantization_config.activation_scheme "dynamic"'
            elif method in ("fbgemm_fp8",):
                q.weight_format = formats.E4M3FN
            elif method == "compressed-tensors":
                _compressed_tensors(q, qc)
            elif method == "quark":
                gq = qc.get("global_quant_config")
                w = gq.get("weight") if isinstance(gq, dict) else None
                if isinstance(w, dict):
                    d = str(w.get("dtype", "")).lower()
                    if d in _FP8_NAMES:
                        q.weight_format = _FP8_NAMES[d]
                    elif d == "fp4" and str(w.get("scale_format", "e8m0")).lower() == "e8m0":
                        q.packed = layouts.MXFP4
                    elif d:
                        q.not_understood.append(f"quark weight dtype {d!r}")
                    if isinstance(w.get("group_size"), int) and w["group_size"] > 0:
                        q.group_size = w["group_size"]
                a = gq.get("input_tensors") if isinstance(gq, dict) else None
                overrides = qc.get("layer_quant_config") or qc.get("layer_type_quant_config")  # per-layer schemes
                if isinstance(a, dict) and a.get("is_dynamic") is False and not overrides:
                    q.static_activations = "config.json global_quant_config.input_tensors is_dynamic false"
                elif isinstance(a, dict) and a.get("is_dynamic") is True and not overrides:
                    q.dynamic_activations = "config.json global_quant_config.input_tensors is_dynamic true"
            elif method == "modelopt":
                algo = str(qc.get("quant_algo", "")).upper()
                _modelopt_algo(q, algo, qc, "config.json quantization_config")
                if isinstance(qc.get("group_size"), int) and qc["group_size"] > 0:
                    q.group_size = qc["group_size"]
            elif method == "mxfp4":  # gpt-oss, as transformers reads it: e2m1 in 32-blocks, e8m0 scales
                q.packed = layouts.MXFP4
                q.group_size = 32
            elif method == "torchao":  # transformers' TorchAoConfig: the tensors are subclasses that say what they hold
                pass
            elif method:
                q.not_understood.append(f"quant_method {method!r}, a layout fp8check does not know")
    hq = docs.get("hf_quant_config.json")
    if isinstance(hq, dict):
        quant = hq.get("quantization")
        if isinstance(quant, dict):
            q.source = "hf_quant_config.json quantization"
            q.quant_method = "modelopt"
            _modelopt_algo(q, str(quant.get("quant_algo", "")).upper(), quant, "hf_quant_config.json quantization")
            if isinstance(quant.get("group_size"), int) and quant["group_size"] > 0:
                q.group_size = quant["group_size"]
    # what fp8check convert wrote beside the producer's keys (which have no spelling for fnuz)
    for doc in (config, hq):
        record = doc.get("fp8check_convert") if isinstance(doc, dict) else None
        weights = record.get("weights") if isinstance(record, dict) else None
        if isinstance(weights, dict) and q.weight_format is not None:
            new = weights.get(q.weight_format.name)
            if isinstance(new, str) and new in _FP8_NAMES:
                q.weight_format = _FP8_NAMES[new]
                q.source = f"{q.source} (fp8check_convert: {weights})"
    return q



def _compressed_tensors(q: QuantConfig, qc: dict[str, Any]) -> None:
    """compressed-tensors config_groups: the weights' format, block or group, and static activations."""
    groups = qc.get("config_groups")
    static: list[bool] = []
    dynamic: list[bool] = []
    blocks: list[tuple[int, int] | None] = []
    if isinstance(groups, dict):
        for name, grp in groups.items():
            w = grp.get("weights") if isinstance(grp, dict) else None
            if not isinstance(w, dict):
                continue
            bits, kind = w.get("num_bits"), str(w.get("type", "")).lower()
            if bits == 8 and kind == "float":
                q.weight_format = formats.E4M3FN
            elif bits == 4 and kind == "float":
                # NVFP4: e4m3 scales of 16 values and a global scale; MXFP4: e8m0 scales of 32
                q.packed = {16: layouts.NVFP4, None: layouts.NVFP4, 32: layouts.MXFP4}.get(w.get("group_size"), "fp4")
                if q.packed == "fp4":
                    q.not_understood.append(f"compressed-tensors 4-bit float weights with group_size "
                                            f"{w.get('group_size')!r} (NVFP4 uses 16, MXFP4 32)")
            elif bits is not None or kind:
                q.not_understood.append(f"compressed-tensors weights num_bits {bits!r} type {kind!r}")
            blocks.append(_block_structure(w.get("block_structure")))
            q.block = blocks[-1] or q.block
            if isinstance(w.get("group_size"), int) and w["group_size"] > 0:
                q.group_size = w["group_size"]
            a = grp.get("input_activations")
            for role, args, into in (("weights", w, q.weight_strategies), ("input_activations", a, q.input_strategies)):
                declared = _ct_strategy(q, f"config_groups.{name}.{role}", role, args) if isinstance(args, dict) else None
                if declared is not None:
                    into.append(declared)
            # dynamic false: a calibrated input_scale; "local" (NVFP4): a stored input_global_scale
            static.append(isinstance(a, dict) and a.get("dynamic") in (False, "local"))
            dynamic.append(isinstance(a, dict) and a.get("dynamic") is True)
            if static[-1]:
                q.static_activations = (f"config.json config_groups input_activations dynamic "
                                        f"{json.dumps(a.get('dynamic'))}")
    q.block_everywhere = bool(blocks) and blocks[0] is not None and len(set(blocks)) == 1
    if not all(static):  # groups of both kinds: which module is in which group is the targets' call, not read here
        q.static_activations = ""
    if dynamic and all(dynamic):
        q.dynamic_activations = "config.json config_groups input_activations dynamic true"


def _ct_strategy(q: QuantConfig, where: str, role: str, args: dict[str, Any]) -> Strategy | None:
    """The strategy one QuantizationArgs declares, inferred as compressed-tensors does where absent; what its
    validation refuses goes to ``strategy_refused``, a value it does not know (or one no scale shape is modelled for)
    to ``not_understood``."""
    raw, size, structure = args.get("strategy"), args.get("group_size"), args.get("block_structure")
    size = size if isinstance(size, int) and not isinstance(size, bool) else None
    dynamic = args.get("dynamic", False)
    dynamic = dynamic.lower() if isinstance(dynamic, str) else dynamic
    if raw is None:  # QuantizationArgs.validate_model_after: inferred from group_size
        strategy = "tensor" if size is None else "group" if size > 0 else "channel" if size == -1 else ""
        if not strategy:
            q.strategy_refused.append(f'{where}: group_size {size} without a strategy (compressed-tensors: "Invalid '
                                      'group size")')
            return None
    elif isinstance(raw, str) and raw.lower() in CT_STRATEGIES:
        strategy = raw.lower()
    else:
        q.not_understood.append(f"compressed-tensors {where}.strategy {raw!r}, a strategy compressed-tensors "
                                f"0.19 does not define")
        return None
    block = _block_structure(structure)
    refused = _ct_refusal(strategy, size, structure, block, dynamic)
    if refused:
        q.strategy_refused.append(f'{where}: strategy "{strategy}" {refused}')
    elif strategy not in CT_MODELLED[role]:
        q.not_understood.append(f'compressed-tensors {where}.strategy "{strategy}", whose scale fp8check does not model')
        return None
    return Strategy(where=where, strategy=strategy, num_bits=args.get("num_bits"), type=str(args.get("type", "")).lower(),
                    block=block, group_size=size, dynamic=dynamic)


def _block_structure(value: Any) -> tuple[int, int] | None:
    """block_structure as compressed-tensors reads it: [rows, cols], or the older "RxC" string."""
    if isinstance(value, str):
        rows, _, cols = value.partition("x")
        value = [int(rows), int(cols)] if rows.isdigit() and cols.isdigit() else None
    return _int_pair(value)


def _ct_refusal(strategy: str, size: int | None, structure: Any, block: tuple[int, int] | None,
                dynamic: Any) -> str:
    """What compressed-tensors 0.19 QuantizationArgs (quant_args.py validate_model_after and its field validators)
    raises for these arguments, or ""."""
    if structure is not None and block is None:
        return f"with block_structure {structure!r} (compressed-tensors: \"Invalid block_structure\")"
    if strategy == "token" and not dynamic:
        return "with static activations (compressed-tensors: \"Cannot perform static token quantization\")"
    if strategy in ("group", "tensor_group") and (size is None or size <= 0):
        given = "without group_size" if size is None else f"with group_size {size}"
        return f"{given} (compressed-tensors: \"requires group_size to be set to a positive value\")"
    if size is not None and size > 0 and strategy not in ("group", "tensor_group"):
        return f"with group_size {size} (compressed-tensors: \"group_size requires strategy to be set to 'group'\")"
    if strategy == "block" and block is None:
        return "without block_structure (compressed-tensors: \"Block strategy requires block structure\")"
    if block is not None and strategy != "block":
        return f"with block_structure {list(block)} (compressed-tensors: \"Block structure requires block strategy\")"
    if dynamic and strategy not in CT_DYNAMIC:
        return "with dynamic true (compressed-tensors: \"One of (token, tensor, tensor_group, group) must be used " \
               "for dynamic quant\")"
    if dynamic == "local" and strategy != "tensor_group":
        return "with dynamic \"local\" (compressed-tensors: \"local is only supported for strategy tensor_group\")"
    return ""


# ModelOpt algorithms with a calibrated (static) activation scale per module: vLLM modelopt.py creates input_scale
# for ModelOptFp8LinearMethod ("FP8") and ModelOptNvFp4LinearMethod ("NVFP4", W4A4), none for FP8_PB_WO,
# FP8_PER_CHANNEL_PER_TOKEN (dynamic per token) or W4A16_NVFP4
MODELOPT_STATIC = ("FP8", "NVFP4")
MODELOPT_FP8 = ("FP8", "FP8_PB_WO", "FP8_PER_CHANNEL_PER_TOKEN")
MODELOPT_NVFP4 = ("NVFP4", "W4A16_NVFP4")


def _modelopt_algo(q: QuantConfig, algo: str, doc: dict[str, Any] | None = None, where: str = "") -> None:
    if algo in MODELOPT_STATIC:
        q.static_activations = f'{where} quant_algo "{algo}"'
    if algo.startswith("FP8"):
        q.weight_format = formats.E4M3FN
        if "PB" in algo:  # per-block
            q.block = q.block or (128, 128)
    elif algo in MODELOPT_NVFP4:
        q.packed = layouts.NVFP4
    elif algo == "MIXED_PRECISION":
        _modelopt_mixed(q, (doc or {}).get("quantized_layers"), where)
    elif algo:
        q.not_understood.append(f"ModelOpt quant_algo {algo!r}")


def _modelopt_mixed(q: QuantConfig, layers: Any, where: str) -> None:
    """MIXED_PRECISION: the per-layer algorithm of ``quantized_layers`` ({prefix: {quant_algo, group_size}}), as
    vLLM's ModelOptMixedPrecisionConfig reads it (vllm/model_executor/layers/quantization/modelopt.py, main at
    00155cde: config.json quantization_config first, else hf_quant_config.json; a prefix not listed is loaded
    unquantized)."""
    if q.layer_schemes:  # config.json's, read first, wins (vLLM prefers it to hf_quant_config.json)
        return
    if not isinstance(layers, dict) or not layers:
        q.not_understood.append(f"{where} MIXED_PRECISION without a quantized_layers mapping")
        return
    for prefix, info in layers.items():
        algo = str(info.get("quant_algo", "") if isinstance(info, dict) else "").upper()
        if algo in MODELOPT_FP8:
            q.weight_format = formats.E4M3FN
        elif algo in MODELOPT_NVFP4:
            q.packed = layouts.NVFP4
            if isinstance(info.get("group_size"), int) and info["group_size"] > 0:
                q.group_size = info["group_size"]
        else:
            q.not_understood.append(f"{where} quantized_layers {prefix!r}: quant_algo {algo or None!r}")
            continue
        q.layer_schemes[str(prefix)] = algo


def _packed_data(config: QuantConfig, name: str) -> bool:
    """Whether the config's packed layout names ``name`` as its data tensor."""
    lay = layouts.packed_layout(config.packed, config.quant_method, name=name, scale_dtype=None) if config.packed else None
    return lay is not None and name.endswith(lay.data)


# -- roles and pairs -------------------------------------------------------------


@dataclass
class Pairing:
    """The roles of every tensor of one checkpoint and who scales whom."""

    roles: dict[tuple[str, str], str] = field(default_factory=dict)  # (file, name) -> role
    formats: dict[tuple[str, str], Format] = field(default_factory=dict)  # FP8 data -> format
    scale_of: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # data -> scale
    scaled: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # scale -> data
    ambiguous: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # data -> other candidates
    byte_format_source: dict[tuple[str, str], str] = field(default_factory=dict)
    # FP8 data without a scale -> scale-like names of the same module that pair with nothing
    unpaired: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def pair(entries_by_file: dict[str, dict[str, Any]], *, config: QuantConfig, bytes_format: Format | None,
         weight_map: dict[str, str] | None = None) -> Pairing:
    """Assign roles and pair data tensors with their scales across one checkpoint.

    ``entries_by_file``: file -> {name -> TensorEntry}. ``weight_map``: the
    index's tensor -> file (a scale in another shard is looked up there).
    """
    p = Pairing()
    # Where each name lives when it is not in the data tensor's own file.
    elsewhere: dict[str, list[str]] = {}
    for f, entries in entries_by_file.items() if len(entries_by_file) > 1 else ():  # one file: nowhere else
        for name in entries:
            elsewhere.setdefault(name, []).append(f)
    for name, f in (weight_map or {}).items():
        if f in entries_by_file and name in entries_by_file[f]:
            elsewhere[name] = [f] + [x for x in elsewhere.get(name, []) if x != f]

    def locate(name: str, own: str) -> tuple[str, str] | None:
        if name in entries_by_file[own]:
            return own, name
        holders = elsewhere.get(name, [])
        if len(holders) >= 1 and (weight_map and name in weight_map or len(holders) == 1):
            return holders[0], name
        return None

    # Pass 1: who has a scale partner (any dtype of data).
    # three regular expressions per name, once
    name_roles = {name: scale_role_by_name(name) for entries in entries_by_file.values() for name in entries}
    for f, entries in entries_by_file.items():
        for name, e in entries.items():
            by_name = name_roles[name]
            if e.dtype == dtypes.E8M0_DTYPE or by_name in (ROLE_ACTIVATION_SCALE, ROLE_KV_SCALE):
                continue
            if by_name is not None and dtypes.fp8_format_of(e.dtype) is None:
                continue  # a scale is not data (an FP8-typed "scale" may still be NVFP4's block scale)
            hinted = [e.scale_hint] if getattr(e, "scale_hint", None) else []
            found = [loc for c in hinted + scale_candidates(name) if (loc := locate(c, f)) is not None]
            found = [loc for loc in dict.fromkeys(found) if loc != (f, name)]
            if found:
                p.scale_of[(f, name)] = found[0]
                if len(found) > 1:
                    p.ambiguous[(f, name)] = [n for _, n in found[1:]]
    for data, sc in list(p.scale_of.items()):
        if sc in p.scale_of:  # a chain: the "scale" is itself scaled data; keep the outer pair only
            del p.scale_of[sc]
        p.scaled[sc] = data
    # Pass 2: roles.
    for f, entries in entries_by_file.items():
        for name, e in entries.items():
            key = (f, name)
            fmt = dtypes.fp8_format_of(e.dtype)
            by_name = name_roles[name]
            if key in p.scaled:
                p.roles[key] = ROLE_SCALE
            elif by_name in (ROLE_ACTIVATION_SCALE, ROLE_KV_SCALE):
                p.roles[key] = by_name
            elif fmt is not None and by_name == ROLE_SCALE and config.packed == layouts.NVFP4:
                p.roles[key] = ROLE_SCALE  # an NVFP4 e4m3 block scale whose packed data is missing
            elif fmt is not None:
                p.roles[key] = ROLE_FP8
                p.formats[key] = fmt
            elif e.dtype in dtypes.BYTE_DTYPES and getattr(e, "packed", ""):
                p.roles[key] = ROLE_PACKED
            elif e.dtype in dtypes.BYTE_DTYPES and by_name is None and _packed_data(config, name):
                p.roles[key] = ROLE_PACKED  # packed data whose scale is missing: a finding, not a skip
            elif e.dtype in dtypes.BYTE_DTYPES and key in p.scale_of:
                if bytes_format is not None:
                    p.roles[key] = ROLE_FP8
                    p.formats[key] = bytes_format
                    p.byte_format_source[key] = "--bytes-format"
                elif config.packed:
                    p.roles[key] = ROLE_PACKED
                elif config.weight_format is not None:
                    p.roles[key] = ROLE_FP8
                    p.formats[key] = config.weight_format
                    p.byte_format_source[key] = config.source
                else:
                    p.roles[key] = ROLE_BYTES
            elif by_name == ROLE_SCALE or e.dtype == dtypes.E8M0_DTYPE:
                p.roles[key] = ROLE_SCALE
            else:
                p.roles[key] = ROLE_OTHER
    # Pass 3: FP8 data left without a scale, next to a scale-like tensor of
    # the same module that pairs with nothing (``N.scale`` beside ``N.weight``).
    for f, entries in entries_by_file.items():
        by_module: dict[str, list[str]] = {}
        for name in entries:
            if p.roles.get((f, name)) == ROLE_SCALE and (f, name) not in p.scaled:
                by_module.setdefault(name.rpartition(".")[0], []).append(name)
        if not by_module:
            continue
        for name in entries:
            key = (f, name)
            if p.roles.get(key) == ROLE_FP8 and key not in p.scale_of:
                near = by_module.get(name.rpartition(".")[0])
                if near:
                    p.unpaired[key] = list(near)
    return p

"""Issue 33: the defects that break real checkpoints between tensors, in scale encodings and on the fnuz load path.

Each checkpoint is written in a producer's own layout (names, dtypes, shapes and configs as layouts.py cites them)
with safetensors: a small model of 2-4 layers (q/k/v/o, gate/up/down) or MoE experts. Every defect class is planted
on at least two layouts next to a clean twin; the table ``PLANTED`` says, before any audit runs, the exit code, the
finding, its severity and the tensor it names. Counts are made again from the planted bytes (numpy, ml_dtypes),
never read back from fp8check. The clean twins of every layout in ``layouts.LAYOUTS`` (torchao's made by torchao
itself) raise nothing but info on every target.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
import torch

from checkpoint_builders import codes, finite_nonzero_codes, fp8, save_st, tensor_of, write_json
from fp8check.checkpoints import layouts
from fp8check.cli import main
from test_layout_matrix import (COMPRESSED_TENSORS_CONFIG, CT_NVFP4, DEEPSEEK_CONFIG, MODELOPT_FP8,  # noqa: F401
                                MODELOPT_NVFP4, MXFP4_CONFIG, QUARK_FP8, QUARK_MXFP4, _ct, torchao_state)

TARGETS = "h100,b200,mi300,mi355"
STATIC_CT = {"quantization_config": {**COMPRESSED_TENSORS_CONFIG["quantization_config"], "config_groups": {
    "group_0": {**COMPRESSED_TENSORS_CONFIG["quantization_config"]["config_groups"]["group_0"],
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}}}}}
STATIC_CT_NVFP4 = {"quantization_config": {**CT_NVFP4["quantization_config"], "config_groups": {
    "group_0": {**CT_NVFP4["quantization_config"]["config_groups"]["group_0"],
                "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                      "dynamic": "local", "group_size": 16}}}}}
STATIC_QUARK = {"quantization_config": {**QUARK_FP8["quantization_config"], "global_quant_config": {
    **QUARK_FP8["quantization_config"]["global_quant_config"],
    "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}}}}
# (layout, config, whether the config makes every module carry its input scale)
CONFIGS = {
    "transformers-fp8": ({"config.json": DEEPSEEK_CONFIG}, False),
    "compressed-tensors-fp8": ({"config.json": STATIC_CT}, True),
    "compressed-tensors-nvfp4": ({"config.json": STATIC_CT_NVFP4}, True),
    "compressed-tensors-mxfp4": ({"config.json": _ct("mxfp4-pack-quantized", 4, 32)}, False),
    "compressed-tensors-mxfp8": ({"config.json": _ct("mxfp8-quantized", 8, 32)}, False),
    "modelopt-fp8": ({"hf_quant_config.json": MODELOPT_FP8}, True),
    "modelopt-nvfp4": ({"hf_quant_config.json": MODELOPT_NVFP4}, True),
    "quark-fp8": ({"config.json": STATIC_QUARK}, True),
    "quark-mxfp4": ({"config.json": QUARK_MXFP4}, False),
    "gpt-oss-mxfp4": ({"config.json": MXFP4_CONFIG}, False),
}
ATTENTION = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
MLP = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
E4M3_HALF = 0x30  # 0.5 as an e4m3fn code
E8M0_BYTE = 120  # 2^-7


def module(layout: str, prefix: str, seed: int, static: bool) -> dict[str, torch.Tensor]:
    """The tensors of one quantized linear [64, 64] of ``layout`` under module ``prefix``."""
    lay = layouts.BY_NAME[layout]
    rng = np.random.default_rng(seed)
    t: dict[str, torch.Tensor] = {}
    if layout == "gpt-oss-mxfp4":
        t[prefix + "_blocks"] = torch.from_numpy(rng.integers(0, 256, (64, 2, 16), dtype=np.uint8))
        t[prefix + "_scales"] = torch.full((64, 2), E8M0_BYTE, dtype=torch.uint8)
        return t
    stem = prefix + "."
    if lay.packed:
        t[stem + lay.data] = torch.from_numpy(rng.integers(0, 256, (64, 32), dtype=np.uint8))
        if lay.scale_format == "e4m3fn":
            t[stem + lay.scale] = torch.full((64, 4), E4M3_HALF, dtype=torch.uint8).view(torch.float8_e4m3fn)
            t[stem + lay.second_scale] = torch.tensor([2688.0] if lay.second_direction == layouts.DIVIDE else 0.001)
        else:
            t[stem + lay.scale] = torch.full((64, 2), E8M0_BYTE, dtype=torch.uint8)
    else:
        pool = finite_nonzero_codes("e4m3fn", max_magnitude=0x6F)  # |v| <= 240: nothing for a plain cast to lose
        t[stem + lay.data] = fp8(codes((64, 64), seed=seed, pool=pool))
        t[stem + lay.scale] = {
            "transformers-fp8": lambda: torch.full((1, 1), 0.01),
            "compressed-tensors-fp8": lambda: torch.full((64, 1), 0.01, dtype=torch.bfloat16),
            "compressed-tensors-mxfp8": lambda: torch.full((64, 2), E8M0_BYTE, dtype=torch.uint8),
        }.get(layout, lambda: torch.tensor(0.01))()
    if static:
        dtype = torch.bfloat16 if layout == "compressed-tensors-fp8" else torch.float32
        t[stem + lay.input_scale] = torch.tensor([0.02] if layout.startswith("compressed") else 0.02, dtype=dtype)
    return t


def model(layout: str, *, layers: int = 2, experts: int = 0) -> tuple[dict[str, torch.Tensor], dict, bool]:
    configs, static = CONFIGS[layout]
    t: dict[str, torch.Tensor] = {"model.embed_tokens.weight": torch.zeros(16, 64, dtype=torch.bfloat16)}
    seed = 0
    if layout == "gpt-oss-mxfp4":
        names = [f"model.layers.{i}.mlp.experts.{p}" for i in range(layers) for p in ("gate_up_proj", "down_proj")]
    elif experts:
        names = [f"model.layers.{i}.mlp.experts.{e}.{p}" for i in range(layers) for e in range(experts)
                 for p in ("gate_proj", "up_proj", "down_proj")]
    else:
        names = [f"model.layers.{i}.{m}" for i in range(layers) for m in ATTENTION + MLP]
    for name in names:
        seed += 1
        t.update(module(layout, name, seed, static))
    return t, configs, static


def audit(base, tensors, configs, *args):
    d = base / "ck"
    d.mkdir(parents=True, exist_ok=True)
    save_st(str(d / "model.safetensors"), tensors)
    for name, doc in configs.items():
        write_json(str(d / name), doc)
    out = base / "audit.json"
    rc = main(["audit", str(d), "--json", str(out), "--jobs", "1", "-q", *args])
    return rc, json.loads(out.read_text())


def found(report, name):
    return {f["code"]: (f["severity"], f["count"]) for f in tensor_of(report, name)["findings"]}


def not_info(report):
    return {(t["name"], f["code"]): f["severity"] for t in report["tensors"] for f in t["findings"]
            if f["severity"] != "info"}


# -- 0 false alarms: every layout, clean ---------------------------------------------------------------------------

SAFETENSORS = sorted(CONFIGS)


def test_the_clean_twins_cover_every_layout():
    assert sorted(SAFETENSORS + ["torchao-float8", "torchao-mx", "torchao-mxfp4", "torchao-nvfp4"]) == \
        sorted(lay.name for lay in layouts.LAYOUTS)


@pytest.mark.parametrize("layout", SAFETENSORS)
@pytest.mark.parametrize("shape", ["dense", "moe"])
def test_a_clean_checkpoint_of_every_layout_raises_nothing(tmp_path, layout, shape):
    tensors, configs, _ = model(layout, experts=4 if shape == "moe" else 0)
    for targets in ((), ("--target", TARGETS)):
        rc, r = audit(tmp_path, tensors, configs, *targets)
        assert rc == 0 and not_info(r) == {}, not_info(r)
        assert "unknown" not in r["summary"]["verdicts"].values(), r["summary"]["unknown"]


@pytest.mark.parametrize("layout", ["torchao-float8", "torchao-mx", "torchao-mxfp4", "torchao-nvfp4"])
def test_a_clean_torchao_checkpoint_raises_nothing(tmp_path, layout, torchao_state):
    made = torchao_state[layout]
    if isinstance(made, str):
        pytest.skip(made)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "model.bin").write_bytes(made[0])
    out = tmp_path / "audit.json"
    rc = main(["audit", str(tmp_path / "ck"), "--json", str(out), "--jobs", "1", "-q", "--target", TARGETS])
    r = json.loads(out.read_text())
    assert rc == 0 and not_info(r) == {}, not_info(r)
    assert "unknown" not in r["summary"]["verdicts"].values()


# -- the planted defects, with their verdicts written down first ----------------------------------------------------
# (defect, layout, the tensor named, {code: severity}, exit code)

L1 = "model.layers.1."
EXPERT2 = "model.layers.0.mlp.experts.2."
PLANTED = [
    # an unfused module without the input scale its static scheme requires: vLLM keeps float32's lowest value
    ("input_scale_o_proj", "compressed-tensors-fp8", L1 + "self_attn.o_proj.weight", {"INPUT_SCALE_MISSING": "error"}, 1),
    ("input_scale_o_proj", "modelopt-fp8", L1 + "self_attn.o_proj.weight", {"INPUT_SCALE_MISSING": "error"}, 1),
    ("input_scale_o_proj", "modelopt-nvfp4", L1 + "self_attn.o_proj.weight", {"INPUT_SCALE_MISSING": "error"}, 1),
    ("input_scale_o_proj", "quark-fp8", L1 + "self_attn.o_proj.weight", {"INPUT_SCALE_MISSING": "error"}, 1),
    ("input_scale_o_proj", "compressed-tensors-nvfp4", L1 + "self_attn.o_proj.weight_packed",
     {"INPUT_SCALE_MISSING": "error"}, 1),
    # one shard of q/k/v: the loader's max over the shards stands in for it
    ("input_scale_k_proj", "modelopt-fp8", L1 + "self_attn.k_proj.weight", {"INPUT_SCALE_MISSING": "warning"}, 0),
    ("input_scale_k_proj", "compressed-tensors-fp8", L1 + "self_attn.k_proj.weight",
     {"INPUT_SCALE_MISSING": "warning"}, 0),
    # an expert without any of its input scales
    ("expert_input_scales", "modelopt-nvfp4", EXPERT2 + "down_proj.weight", {"INPUT_SCALE_MISSING": "error"}, 1),
    ("expert_input_scales", "modelopt-fp8", EXPERT2 + "gate_proj.weight", {"INPUT_SCALE_MISSING": "error"}, 1),
    # a KV-cache scale every layer's k_proj carries but one
    ("sibling_kv_scale", "modelopt-fp8", "model.layers.2.self_attn.k_proj.weight", {"SIBLING_MISMATCH": "error"}, 1),
    ("sibling_kv_scale", "quark-fp8", "model.layers.2.self_attn.k_proj.weight", {"SIBLING_MISMATCH": "error"}, 1),
    # one expert's scale in another dtype than its siblings'
    ("sibling_dtype", "compressed-tensors-fp8", EXPERT2 + "up_proj.weight", {"SIBLING_MISMATCH": "warning"}, 0),
    ("sibling_dtype", "modelopt-fp8", EXPERT2 + "up_proj.weight", {"SIBLING_MISMATCH": "warning",
                                                                 "SCALE_ENCODING": "warning"}, 0),
    # gate/up global scales 4x apart where the loader fuses them, and 1.5x
    ("fused_4x", "modelopt-nvfp4", L1 + "mlp.up_proj.weight", {"FUSED_SCALE_MISMATCH": "error"}, 1),
    ("fused_4x", "compressed-tensors-nvfp4", L1 + "mlp.gate_proj.weight_packed", {"FUSED_SCALE_MISMATCH": "error"}, 1),
    ("fused_1.5x", "modelopt-nvfp4", L1 + "mlp.gate_proj.weight", {"FUSED_SCALE_MISMATCH": "warning"}, 0),
    ("fused_4x_experts", "modelopt-nvfp4", EXPERT2 + "gate_proj.weight", {"FUSED_SCALE_MISMATCH": "error"}, 1),
    # gate/up static input scales 10x apart: one input, two calibrations; the loader's max costs range, a warning
    ("fused_input_10x", "modelopt-fp8", L1 + "mlp.up_proj.weight", {"FUSED_SCALE_MISMATCH": "warning"}, 0),
    ("fused_input_10x", "compressed-tensors-fp8", L1 + "mlp.gate_proj.weight", {"FUSED_SCALE_MISMATCH": "warning"}, 0),
    # an expert's: vLLM's FusedMoE loader refuses them under compressed-tensors, keeps the last one loaded otherwise
    ("fused_input_10x_experts", "compressed-tensors-fp8", EXPERT2 + "up_proj.weight", {"FUSED_SCALE_MISMATCH": "error"},
     1),
    ("fused_input_10x_experts", "modelopt-fp8", EXPERT2 + "gate_proj.weight", {"FUSED_SCALE_MISMATCH": "warning"}, 0),
    # E8M0 scales written as float values (2^-7 as float32) where the layout writes bytes
    ("e8m0_as_float", "compressed-tensors-mxfp4", L1 + "mlp.down_proj.weight_packed", {"SCALE_ENCODING": "error"}, 1),
    ("e8m0_as_float", "quark-mxfp4", L1 + "mlp.down_proj.weight", {"SCALE_ENCODING": "error"}, 1),
    ("e8m0_as_float", "compressed-tensors-mxfp8", L1 + "mlp.down_proj.weight", {"SCALE_ENCODING": "error"}, 1),
    # E8M0 exponents stored as float32 numbers (120.0): read as multipliers, weights x 120
    ("e8m0_exponents_as_float", "gpt-oss-mxfp4", "model.layers.1.mlp.experts.down_proj_blocks",
     {"SCALE_ENCODING": "error"}, 1),
    # NVFP4 e4m3 block scales saved as U8
    ("e4m3_as_u8", "modelopt-nvfp4", L1 + "mlp.down_proj.weight", {"SCALE_ENCODING": "error"}, 1),
    ("e4m3_as_u8", "compressed-tensors-nvfp4", L1 + "mlp.down_proj.weight_packed", {"SCALE_ENCODING": "error"}, 1),
    # a float16 scale where the layout writes float32: converted exactly, rounded when saved
    ("float16_scale", "modelopt-fp8", L1 + "mlp.down_proj.weight", {"SCALE_ENCODING": "warning"}, 0),
    ("float16_scale", "quark-fp8", L1 + "mlp.down_proj.weight", {"SCALE_ENCODING": "warning"}, 0),
    # E8M0 bytes that are not biased exponents of real weights: 2^73
    ("e8m0_absurd", "gpt-oss-mxfp4", "model.layers.1.mlp.experts.down_proj_blocks", {"WEIGHT_MAGNITUDE": "error"}, 1),
    ("e8m0_absurd", "compressed-tensors-mxfp8", L1 + "mlp.down_proj.weight", {"WEIGHT_MAGNITUDE": "error"}, 1),
    ("e8m0_absurd", "quark-mxfp4", L1 + "mlp.down_proj.weight", {"WEIGHT_MAGNITUDE": "error"}, 1),
    # a scale stored inverted (1/0.001)
    ("inverted", "modelopt-fp8", L1 + "mlp.down_proj.weight", {"WEIGHT_MAGNITUDE": "error"}, 1),
    ("inverted", "transformers-fp8", L1 + "mlp.down_proj.weight", {"WEIGHT_MAGNITUDE": "error"}, 1),
    # one expert's (one module's) MXFP4 scales all 0x00: 2^-127, its weights zeroed
    ("scales_zero", "gpt-oss-mxfp4", "model.layers.1.mlp.experts.down_proj_blocks", {"BLOCK_ZEROED": "error"}, 1),
    ("expert_scales_zero", "compressed-tensors-mxfp4", EXPERT2 + "down_proj.weight_packed",
     {"BLOCK_ZEROED": "error"}, 1),
    # a finite scale that a fnuz loader doubles to Inf (mi300 in the targets)
    ("scale_x2_inf", "quark-fp8", L1 + "mlp.down_proj.weight", {"FNUZ_SCALE_OVERFLOW": "error"}, 1),
    ("scale_x2_inf", "compressed-tensors-fp8", L1 + "mlp.down_proj.weight", {"FNUZ_SCALE_OVERFLOW": "error"}, 1),
]


def plant(defect: str, layout: str, t: dict[str, torch.Tensor]) -> None:
    lay = layouts.BY_NAME[layout]
    down = L1 + ("mlp.experts.down_proj" if layout == "gpt-oss-mxfp4" else "mlp.down_proj")
    if defect == "input_scale_o_proj":
        del t[L1 + "self_attn.o_proj." + lay.input_scale]
    elif defect == "input_scale_k_proj":
        del t[L1 + "self_attn.k_proj." + lay.input_scale]
    elif defect == "expert_input_scales":
        for p in ("gate_proj", "up_proj", "down_proj"):
            del t[EXPERT2 + p + "." + lay.input_scale]
    elif defect == "sibling_kv_scale":
        kv = "k_scale" if layout == "modelopt-fp8" else "output_scale"
        for i in (0, 1, 3):
            t[f"model.layers.{i}.self_attn.k_proj.{kv}"] = torch.tensor(0.05)
    elif defect == "sibling_dtype":
        t[EXPERT2 + "up_proj.weight_scale"] = t[EXPERT2 + "up_proj.weight_scale"].to(
            torch.float32 if layout.startswith("compressed") else torch.float16)
    elif defect.startswith("fused_input_10x"):
        up = (EXPERT2 if defect.endswith("experts") else L1 + "mlp.") + "up_proj." + lay.input_scale
        t[up] = t[up] * 10.0
    elif defect.startswith("fused_"):
        prefix = EXPERT2 if defect == "fused_4x_experts" else L1 + "mlp."
        up = prefix + "up_proj." + lay.second_scale
        t[up] = t[up] * (1.5 if defect == "fused_1.5x" else 4.0)
    elif defect == "e8m0_as_float":
        t[down + "." + lay.scale] = torch.exp2(t[down + "." + lay.scale].float() - 127)
    elif defect == "e8m0_exponents_as_float":
        t[down + "_scales"] = t[down + "_scales"].float()
    elif defect == "e4m3_as_u8":
        t[down + "." + lay.scale] = t[down + "." + lay.scale].view(torch.uint8)
    elif defect == "float16_scale":
        t[down + ".weight_scale"] = t[down + ".weight_scale"].half()
    elif defect == "e8m0_absurd":
        key = down + ("_scales" if layout == "gpt-oss-mxfp4" else "." + lay.scale)
        t[key][0, 0] = 200  # 2^73
    elif defect in ("scales_zero", "expert_scales_zero"):
        key = (down + "_scales") if defect == "scales_zero" else EXPERT2 + "down_proj." + lay.scale
        t[key] = torch.zeros_like(t[key])
    elif defect == "inverted":
        t[down + "." + lay.scale] = 1.0 / (t[down + "." + lay.scale] / 10.0)  # 1 / 0.001
    elif defect == "scale_x2_inf":
        s = t[down + ".weight_scale"]
        if s.dim() == 0:
            t[down + ".weight_scale"] = torch.tensor(2e38)
        else:
            s[0] = 2e38  # one row of a channel scale (bfloat16 max 3.39e38)
    else:
        raise AssertionError(defect)


@pytest.mark.parametrize("defect,layout,name,want,rc_want", PLANTED, ids=[f"{p[0]}-{p[1]}" for p in PLANTED])
def test_a_planted_defect_is_found_and_its_clean_twin_is_silent(tmp_path, defect, layout, name, want, rc_want):
    experts = 4 if defect in ("expert_input_scales", "sibling_dtype", "fused_4x_experts", "expert_scales_zero",
                              "fused_input_10x_experts") else 0
    layers = 4 if defect == "sibling_kv_scale" else 2
    tensors, configs, _ = model(layout, layers=layers, experts=experts)
    if defect == "sibling_kv_scale":  # the clean twin: every layer carries its KV scale
        kv = "k_scale" if layout == "modelopt-fp8" else "output_scale"
        clean = dict(tensors, **{f"model.layers.2.self_attn.k_proj.{kv}": torch.tensor(0.05)})
    else:
        clean = dict(tensors)
    rc, r = audit(tmp_path / "clean", clean, configs, "--target", TARGETS)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    clean_verdicts = r["summary"]["verdicts"]
    assert not set(clean_verdicts.values()) & {"does_not_load_correctly", "cannot_run", "unknown"}, clean_verdicts
    planted = {k: v.clone() for k, v in tensors.items()}
    plant(defect, layout, planted)
    rc, r = audit(tmp_path / "planted", planted, configs, "--target", TARGETS)
    got = found(r, name)
    for code, severity in want.items():
        assert got.get(code, (None,))[0] == severity, (code, got)
    assert rc == rc_want, (rc, not_info(r))
    # the finding names the tensor it is about; nothing else in the checkpoint is accused of this defect
    others = {k for k, s in not_info(r).items() if k[0] != name and k[1] in want}
    assert _explained(defect, others), others
    # no "runs" verdict on a target whose loaders the error breaks (every target; FNUZ_SCALE_OVERFLOW: the fnuz one),
    # the clean twin's verdict wherever nothing breaks
    broken = {t for (_, code), severity in not_info(r).items() if severity == "error"
              for t in (("mi300",) if code == "FNUZ_SCALE_OVERFLOW" else TARGETS.split(","))}
    assert broken >= ({"mi300"} if rc_want else set())
    for target, verdict in r["summary"]["verdicts"].items():
        if target in broken:
            assert verdict in ("does_not_load_correctly", "cannot_run"), (target, verdict)
        else:
            assert verdict == clean_verdicts[target], (target, verdict, clean_verdicts[target])


def _explained(defect: str, others: set[tuple[str, str]]) -> bool:
    """Other tensors carrying the same code only where the defect concerns them too (each shard of a fused pair,
    each module of the expert)."""
    if defect.startswith("fused_"):
        return all(n.rsplit(".", 2)[-2] in ("gate_proj", "up_proj") for n, _ in others) and len(others) == 1
    if defect == "expert_input_scales":
        return all(n.startswith(EXPERT2) for n, _ in others) and len(others) == 2
    return not others


# -- ModelOpt MIXED_PRECISION: per-layer schemes ---------------------------------------------------------------------


def mixed(form: str, *, schemes: dict[str, str] | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """FP8 attention and NVFP4 MLP, with quantized_layers in hf_quant_config.json (the legacy form) or in
    config.json's quantization_config (the form vLLM's ModelOptMixedPrecisionConfig prefers)."""
    listed = {f"model.layers.{i}.{m}": "FP8" if m in ATTENTION else "NVFP4" for i in range(2) for m in ATTENTION + MLP}
    listed.update(schemes or {})
    t: dict[str, torch.Tensor] = {}
    for seed, (name, algo) in enumerate(sorted(listed.items())):
        if algo:
            t.update(module("modelopt-fp8" if algo.startswith("FP8") else "modelopt-nvfp4", name, seed,
                            static=algo in ("FP8", "NVFP4")))
    layers = {k: {"quant_algo": v, **({"group_size": 16} if "NVFP4" in v else {})} for k, v in listed.items() if v}
    quant = {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None, "quantized_layers": layers}
    if form == "hf_quant_config":
        return t, {"hf_quant_config.json": {"producer": {"name": "modelopt"}, "quantization": quant}}
    return t, {"config.json": {"quantization_config": {"quant_method": "modelopt", **quant}}}


@pytest.mark.parametrize("form", ["hf_quant_config", "config"])
def test_a_clean_mixed_precision_checkpoint_is_understood(tmp_path, form):
    tensors, configs = mixed(form)
    rc, r = audit(tmp_path, tensors, configs, "--target", TARGETS)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    # FP8 attention native on every FP8 target; NVFP4 MLP native on b200 only (layouts.py kinds)
    assert r["summary"]["verdicts"] == {"h100": "runs_emulated", "b200": "runs_as_is", "mi300": "runs_emulated",
                                        "mi355": "runs_emulated"}, r["summary"]["unknown"]
    assert r["summary"]["fp8_tensors"] == 8 and r["summary"]["packed_tensors"] == 6


def test_mixed_precision_in_both_config_files_reads_config_json_first(tmp_path):
    # real exports write both; the legacy file may carry only the algorithm (vLLM reads config.json's mapping)
    tensors, configs = mixed("config")
    configs["hf_quant_config.json"] = {"producer": {"name": "modelopt"},
                                       "quantization": {"quant_algo": "MIXED_PRECISION"}}
    rc, r = audit(tmp_path, tensors, configs)
    assert rc == 0 and not_info(r) == {} and "unknown" not in r["summary"]["verdicts"].values(), r["summary"]


MIXED_PLANTED = [
    # (what, listed schemes changed, the tensor named, code), each an error: exit 1
    ("stored NVFP4, listed FP8", {L1 + "mlp.down_proj": "FP8"}, L1 + "mlp.down_proj.weight", "LAYER_SCHEME"),
    ("not listed", {L1 + "self_attn.o_proj": ""}, L1 + "self_attn.o_proj.weight", "LAYER_SCHEME"),
    ("fused shards of two schemes", {L1 + "self_attn.q_proj": "NVFP4"}, L1 + "self_attn.k_proj.weight", "LAYER_SCHEME"),
]


@pytest.mark.parametrize("form", ["hf_quant_config", "config"])
@pytest.mark.parametrize("what,changed,name,code", MIXED_PLANTED, ids=[m[0] for m in MIXED_PLANTED])
def test_a_module_stored_unlike_its_listed_scheme_is_an_error(tmp_path, form, what, changed, name, code):
    tensors, _ = mixed(form)
    _, configs = mixed(form, schemes=changed)
    if what == "not listed":  # the module is still stored, quantized
        tensors.update(module("modelopt-fp8", L1 + "self_attn.o_proj", 99, static=True))
    rc, r = audit(tmp_path, tensors if what != "fused shards of two schemes" else mixed(form, schemes=changed)[0],
                  configs)
    assert rc == 1 and found(r, name).get(code, (None,))[0] == "error", found(r, name)


@pytest.mark.parametrize("form", ["hf_quant_config", "config"])
def test_a_mixed_precision_module_without_its_static_input_scale(tmp_path, form):
    # W4A16 has no activation scale: gate/up are written without one, and none is required
    tensors, configs = mixed(form, schemes={L1 + "mlp.gate_proj": "W4A16_NVFP4", L1 + "mlp.up_proj": "W4A16_NVFP4"})
    assert L1 + "mlp.gate_proj.input_scale" not in tensors
    rc, r = audit(tmp_path / "ok", tensors, configs)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    del tensors[L1 + "mlp.down_proj.input_scale"]  # NVFP4 (W4A4): static
    rc, r = audit(tmp_path / "missing", tensors, configs)
    assert rc == 1 and found(r, L1 + "mlp.down_proj.weight")["INPUT_SCALE_MISSING"][0] == "error"


# -- the faces: terminal, JSON and HTML show the new findings ---------------------------------------------------------


def test_the_new_findings_reach_the_terminal_the_json_and_the_html_report(tmp_path, capsys):
    from lxml import html as lxml_html

    tensors, configs, _ = model("modelopt-nvfp4", layers=2)
    plant("fused_4x", "modelopt-nvfp4", tensors)
    plant("input_scale_o_proj", "modelopt-nvfp4", tensors)
    plant("e4m3_as_u8", "modelopt-nvfp4", tensors)
    d = tmp_path / "ck"
    d.mkdir()
    save_st(str(d / "model.safetensors"), tensors)
    for name, doc in configs.items():
        write_json(str(d / name), doc)
    want = {"FUSED_SCALE_MISMATCH", "INPUT_SCALE_MISSING", "SCALE_ENCODING"}
    rc = main(["audit", str(d), "--json", str(tmp_path / "a.json"), "--html", str(tmp_path / "a.html"),
               "--jobs", "1", "--max-rows", "100"])
    terminal = capsys.readouterr().out
    assert rc == 1
    doc = json.loads((tmp_path / "a.json").read_text())
    assert want <= set(doc["summary"]["findings_by_code"]) and want <= set(doc["finding_codes"])
    for code in want:
        assert code in terminal
    page = lxml_html.document_fromstring((tmp_path / "a.html").read_text())
    shown = " ".join(page.text_content().split())
    for code in want:
        assert code in shown and doc["finding_codes"][code]["title"] in shown
    # the tensor's own message, as the JSON has it, in the report
    msg = found_message(doc, L1 + "self_attn.o_proj.weight", "INPUT_SCALE_MISSING")
    assert " ".join(msg.split()) in shown


def found_message(report, name, code):
    (f,) = [f for f in tensor_of(report, name)["findings"] if f["code"] == code]
    return f["message"]


def test_compressed_tensors_groups_of_both_activation_kinds_require_no_input_scale(tmp_path):
    # which module a group targets is the targets' call (class names, re: patterns), not read here: with a static
    # and a dynamic group, no module is required to carry an input scale (no false alarm); with the static group
    # alone, every module is
    tensors, _, _ = model("compressed-tensors-fp8")
    tensors = {k: v for k, v in tensors.items() if not k.endswith("input_scale")}
    qc = STATIC_CT["quantization_config"]
    dynamic = {**qc["config_groups"]["group_0"], "targets": ["re:.*mlp.*"],
               "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}
    both = {"config.json": {"quantization_config": {**qc, "config_groups": {**qc["config_groups"],
                                                                            "group_1": dynamic}}}}
    rc, r = audit(tmp_path / "both", tensors, both)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    rc, r = audit(tmp_path / "static", tensors, {"config.json": STATIC_CT})
    assert rc == 1 and {c for _, c in not_info(r)} == {"INPUT_SCALE_MISSING"}


# -- a re-save that dropped every scale and the quantization_config ------------------------------------------------
# Measured in issue 33: FP8 weights, no *_scale / weight_scale_inv / input_scale, config.json without its
# quantization_config: SCALE_MISSING only a warning, exit 0, h100 "runs natively". No loader dequantizes such a file
# (layouts.UNSCALED_LOADER, cited): the weights are the raw FP8 values. Written before the run, per layout:
# the clean twin exit 0 and h100 runs_as_is; the re-save exit 1, every FP8 weight SCALE_MISSING error (count 1)
# saying what the loader does, every target cannot_run and no verdict saying "native". The same tensors under a
# config that declares the model's dtype FP8 (a model saved in float8, its stored values the weights) stay as they
# were: SCALE_MISSING a warning, exit 0, h100 runs_as_is.
RESAVED = ("transformers-fp8", "compressed-tensors-fp8", "modelopt-fp8", "quark-fp8")


@pytest.mark.parametrize("layout", RESAVED)
def test_a_resave_without_scales_and_quantization_config_is_an_error(tmp_path, layout):
    tensors, configs, _ = model(layout)
    rc, r = audit(tmp_path / "clean", tensors, configs, "--target", TARGETS)
    assert rc == 0 and not_info(r) == {} and r["summary"]["verdicts"]["h100"] == "runs_as_is", not_info(r)
    weights = [k for k, v in tensors.items() if v.dtype == torch.float8_e4m3fn]
    assert len(weights) == 14  # 2 layers x q/k/v/o, gate/up/down
    resaved = {k: v for k, v in tensors.items() if k.endswith(".weight")}  # every scale dropped
    assert set(resaved) == set(weights) | {"model.embed_tokens.weight"}
    rc, r = audit(tmp_path / "resaved", resaved, {"config.json": {"torch_dtype": "bfloat16"}}, "--target", TARGETS)
    assert rc == 1
    assert not_info(r) == {(w, "SCALE_MISSING"): "error" for w in weights}, not_info(r)
    for w in weights:
        assert found(r, w) == {"SCALE_MISSING": ("error", 1)}
        assert "raw FP8 values" in found_message(r, w, "SCALE_MISSING")
    assert set(r["summary"]["verdicts"].values()) == {"cannot_run"}, r["summary"]["verdicts"]
    for v in r["portability"]:
        assert not any("native" in why for why in v["reasons"]), v["reasons"]
        assert {b["name"] for b in v["blocked"]} == set(weights)
    fp8_model = {"config.json": {"torch_dtype": "float8_e4m3fn"}}
    rc, r = audit(tmp_path / "fp8_model", resaved, fp8_model, "--target", TARGETS)
    assert rc == 0 and not_info(r) == {(w, "SCALE_MISSING"): "warning" for w in weights}, not_info(r)
    assert r["summary"]["verdicts"]["h100"] == "runs_as_is"


# -- an error finding and the verdicts: a user's report ------------------------------------------------------------
# ModelOpt FP8 (static activations) with one module's input_scale dropped: INPUT_SCALE_MISSING error, yet the verdicts
# said "mi300: runs after conversion" and "h100: runs natively", and convert said nothing. Written before the run:
# every target "does not load correctly: 1 error (INPUT_SCALE_MISSING)" (JSON does_not_load_correctly, errors
# {INPUT_SCALE_MISSING: 1}), the reason naming the tensor; convert exits 0 (DST is exact) with one warning line.


def test_an_input_scale_missing_gives_no_runs_verdict_and_convert_warns(tmp_path, capsys):
    tensors, configs, _ = model("modelopt-fp8")
    plant("input_scale_o_proj", "modelopt-fp8", tensors)
    name = L1 + "self_attn.o_proj.weight"
    d = tmp_path / "ck"
    d.mkdir()
    save_st(str(d / "model.safetensors"), tensors)
    for file, doc in configs.items():
        write_json(str(d / file), doc)
    for targets, want in ((["--target", "mi300"], ["mi300"]), ([], ["h100", "b200", "mi300", "mi355"])):
        out = tmp_path / "a.json"
        rc = main(["audit", str(d), "--jobs", "1", "--json", str(out), *targets])
        terminal = capsys.readouterr().out
        r = json.loads(out.read_text())
        assert rc == 1 and r["summary"]["verdicts"] == dict.fromkeys(want, "does_not_load_correctly"), r["summary"]
        for v in r["portability"]:
            assert v["errors"] == {"INPUT_SCALE_MISSING": 1} and name in v["reasons"][0], v["reasons"]
            line = f"{v['target']} ({', '.join(v['formats'])}): does not load correctly: 1 error (INPUT_SCALE_MISSING)"
            assert line in terminal, terminal
        assert "runs natively" not in terminal and "runs after conversion\n" not in terminal
    rc = main(["convert", str(d), str(tmp_path / "fnuz"), "--to", "e4m3fnuz", "-q", "--json", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert rc == 0
    (line,) = [x for x in err.splitlines() if x.startswith("fp8check: warning:")]
    assert "1 error finding" in line and "INPUT_SCALE_MISSING" in line and name in line and "lowest value" in line
    carried = json.loads((tmp_path / "c.json").read_text())["carried_errors"]
    assert [(c["name"], c["code"]) for c in carried] == [(name, "INPUT_SCALE_MISSING")]


def test_an_error_of_the_fnuz_load_path_breaks_only_fnuz_targets():
    # FNUZ_SCALE_OVERFLOW: vLLM/Quark double the scale in place on MI300 only; elsewhere the same bytes load right
    from fp8check import formats
    from fp8check.checkpoints import findings, targets

    hist = np.zeros(256, dtype=np.int64)
    hist[0x38] = 4  # four 1.0s: exact in e4m3fnuz at the doubled scale
    plan = targets.plan_conversion(formats.E4M3FN, formats.E4M3FNUZ, hist, scaled=True, factor_exact={"2": True})
    tensor = targets.TensorPortability(name="w", file="f", format=formats.E4M3FN, numel=4, nan=0,
                                       plans={"e4m3fnuz": plan})
    error = findings.make("FNUZ_SCALE_OVERFLOW", 4, "planted", severity="error")
    got = {}
    for name in ("h100", "mi300"):
        tally = targets.VerdictTally(targets.get_target(name))
        tally.add(tensor)
        tally.add_findings("w", [error])
        got[name] = tally.result().verdict
    assert plan.exact and got == {"h100": "runs_as_is", "mi300": "does_not_load_correctly"}


# -- the terminal: each finding's own message, names whole on a narrow console -----------------------------------


class _Terminal:
    """A text stream that says it is a terminal (the console then takes COLUMNS as its width)."""

    def __init__(self):
        import io

        self.buffer = io.StringIO()

    def write(self, text):
        return self.buffer.write(text)

    def flush(self):
        pass

    def isatty(self):
        return True


def _printed(tmp_path, tensors, configs, monkeypatch, columns, **options):
    from fp8check.checkpoints.audit import AuditOptions, audit as run_audit
    from fp8check.terminal.checkpoints import print_report

    d = tmp_path / f"ck{columns}"
    d.mkdir(parents=True)
    save_st(str(d / "model.safetensors"), tensors)
    for file, doc in configs.items():
        write_json(str(d / file), doc)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("NO_COLOR", "1")
    result = run_audit([str(d)], AuditOptions(jobs=1))
    try:
        out = _Terminal()
        print_report(result, file=out, **options)
        return result.to_dict(), out.buffer.getvalue()
    finally:
        result.close()


def _unwrapped(text):
    """The terminal's words in order, table borders and line breaks removed."""
    import re

    return " ".join(re.sub(r"\x1b\[[0-9;]*m|[│┃┏┓┗┛┡┩└┘┌┐━─╇╈┳┻┼┣┫]", " ", text).split())


@pytest.mark.parametrize("columns", [80, 160])
@pytest.mark.parametrize("verbose", [False, True])
def test_the_terminal_prints_each_finding_message_with_names_whole(tmp_path, monkeypatch, columns, verbose):
    tensors, configs, _ = model("modelopt-fp8")
    plant("input_scale_o_proj", "modelopt-fp8", tensors)
    name = L1 + "self_attn.o_proj.weight"
    doc, text = _printed(tmp_path, tensors, configs, monkeypatch, columns, verbose=verbose)
    message = found_message(doc, name, "INPUT_SCALE_MISSING")
    assert "lowest value" in message and " ".join(message.split()) in _unwrapped(text), text
    lines = text.splitlines()
    # every tensor name and the message's own tensor name sit whole on one line, never folded mid-word
    for whole in (name, L1 + "self_attn.o_proj.input_scale"):
        assert any(whole in line for line in lines), text
    import re

    assert max(len(re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip()) for line in lines if "│" in line) <= columns


def test_the_terminal_shows_ten_messages_unless_verbose(tmp_path, monkeypatch):
    tensors, configs, _ = model("modelopt-fp8")
    scales = [k for k in tensors if k.endswith(".input_scale")]
    for k in scales:
        del tensors[k]
    assert len(scales) == 14
    doc, text = _printed(tmp_path, tensors, configs, monkeypatch, 160)
    shown = [t["name"] for t in doc["tensors"] if any(f["severity"] != "info" for f in t["findings"])]
    assert len(shown) == 14
    assert _unwrapped(text).count("input_scale is missing") == 10 and "… 4 more (-v shows every one" in text
    doc, text = _printed(tmp_path / "v", tensors, configs, monkeypatch, 160, verbose=True)
    assert _unwrapped(text).count("input_scale is missing") == 14 and "more (-v" not in text


# -- a stored input scale under dynamic activations: read by no loader --------------------------------------------

DYNAMIC_CT = {"quantization_config": {**COMPRESSED_TENSORS_CONFIG["quantization_config"], "config_groups": {
    "group_0": {**COMPRESSED_TENSORS_CONFIG["quantization_config"]["config_groups"]["group_0"],
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}}
DYNAMIC_QUARK = {"quantization_config": {**QUARK_FP8["quantization_config"], "global_quant_config": {
    **QUARK_FP8["quantization_config"]["global_quant_config"],
    "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_token", "is_dynamic": True}}}}
DYNAMIC = {"transformers-fp8": DEEPSEEK_CONFIG, "compressed-tensors-fp8": DYNAMIC_CT, "quark-fp8": DYNAMIC_QUARK}


@pytest.mark.parametrize("layout", sorted(DYNAMIC))
def test_an_input_scale_under_dynamic_activations_is_a_warning_on_its_module_only(tmp_path, layout):
    tensors = {k: v for k, v in model(layout)[0].items() if not k.endswith(".input_scale")}  # dynamic: none
    configs = {"config.json": DYNAMIC[layout]}
    rc, r = audit(tmp_path / "clean", tensors, configs, "--target", TARGETS)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    planted = dict(tensors)
    planted[L1 + "mlp.down_proj.input_scale"] = torch.tensor(0.02)
    rc, r = audit(tmp_path / "planted", planted, configs, "--target", TARGETS)
    assert rc == 0 and not_info(r) == {(L1 + "mlp.down_proj.weight", "INPUT_SCALE_UNUSED"): "warning"}, not_info(r)
    assert "input_scale is stored" in tensor_of(r, L1 + "mlp.down_proj.weight")["findings"][0]["message"]
    # the same tensors where the config does not say dynamic in so many words: nothing to say
    if layout == "compressed-tensors-fp8":
        rc, r = audit(tmp_path / "unsaid", planted, {"config.json": COMPRESSED_TENSORS_CONFIG}, "--target", TARGETS)
        assert rc == 0 and "INPUT_SCALE_UNUSED" not in {c for _, c in not_info(r)}, not_info(r)

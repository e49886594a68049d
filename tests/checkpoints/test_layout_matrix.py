"""Every producer layout of ``fp8check.checkpoints.layouts``, clean and with each defect (issue 22's proof).

A table written before the audits ran says, per layout and defect, the verdict on each default target, the exit
code and the finding with its severity; its count is made again here from the planted bytes (numpy, ml_dtypes,
torch's own fnuz cast), never read back from fp8check. The safetensors layouts are written as their producers
name and shape them (``layouts.py`` cites where each was read); torchao's are written by torchao itself. A defect a
layout cannot hold (an Inf in an e8m0 scale, a torchao subclass without its scale) is left out, with the reason in
``NOT_HELD``. Real producers writing these layouts run in the slow lane (tests/zoo/test_producers.py).
"""

from __future__ import annotations

import io
import json

import ml_dtypes
import numpy as np
import pytest
import torch

from checkpoint_builders import (COMPRESSED_TENSORS_CONFIG, DEEPSEEK_CONFIG, codes, finite_nonzero_codes, fp8,
                                 save_st, tensor_of, write_json)
from fp8check.checkpoints import layouts
from fp8check.cli import main

BF16_OVERFLOW = (2 - 2 ** -8) * 2.0 ** 127

FP8 = {"h100": "runs_as_is", "b200": "runs_as_is", "mi300": "runs_after_conversion", "mi355": "runs_as_is"}
MXFP4 = {"h100": "runs_emulated", "b200": "runs_as_is", "mi300": "runs_emulated", "mi355": "runs_as_is"}
MXFP8 = MXFP4
NVFP4 = {"h100": "runs_emulated", "b200": "runs_as_is", "mi300": "runs_emulated", "mi355": "runs_emulated"}
NOWHERE = dict.fromkeys(FP8, "cannot_run")
LOADS_WRONG = dict.fromkeys(FP8, "does_not_load_correctly")  # an error finding whose defect breaks every loader
UNKNOWN = dict.fromkeys(FP8, "unknown")

QUARK_FP8 = {"quantization_config": {"quant_method": "quark", "global_quant_config": {
    "weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}}, "exclude": ["lm_head"]}}
QUARK_MXFP4 = {"quantization_config": {"quant_method": "quark", "global_quant_config": {
    "weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}}}}
MODELOPT_FP8 = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}
MODELOPT_NVFP4 = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
def _ct(fmt, bits, group):
    return {"quantization_config": {"quant_method": "compressed-tensors", "format": fmt, "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": bits, "type": "float", "strategy": "group",
                                           "group_size": group, "scale_dtype": "torch.uint8"}}}}}


MXFP4_CONFIG = {"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": []}}
CT_NVFP4 = {"quantization_config": {
    "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}}


class Built:
    """One checkpoint folder of a layout: its tensors, the data tensor's name, its scale's name and kind."""

    def __init__(self, tensors, configs, data, scale, kind, clean, *, torchao=None):
        self.tensors, self.configs, self.data, self.scale, self.kind = tensors, configs, data, scale, kind
        self.clean = clean  # verdicts of the clean checkpoint
        self.torchao = torchao  # the state dict, for torchao layouts


def fp8_layout(scale_name, scale, configs, extra=None):
    q = codes((256, 256), pool=finite_nonzero_codes("e4m3fn", max_magnitude=0x6F))  # |v| <= 240
    return Built({"l.weight": fp8(q), scale_name: scale, **(extra or {})}, configs, "l.weight", scale_name, "float",
                 FP8)


def packed(rows=64, cols=64, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(rows, cols // 2), dtype=np.uint8)


SAFETENSORS_LAYOUTS = {
    "transformers-fp8": lambda: fp8_layout("l.weight_scale_inv", torch.full((2, 2), 0.01),
                                           {"config.json": DEEPSEEK_CONFIG}),
    "compressed-tensors-fp8": lambda: fp8_layout("l.weight_scale", torch.full((256, 1), 0.01, dtype=torch.bfloat16),
                                                 {"config.json": COMPRESSED_TENSORS_CONFIG}),
    # ModelOpt's FP8 and NVFP4 (W4A4) have static activations: each module carries its input_scale
    "modelopt-fp8": lambda: fp8_layout("l.weight_scale", torch.tensor(0.01), {"hf_quant_config.json": MODELOPT_FP8},
                                       {"l.input_scale": torch.tensor(0.02)}),
    "quark-fp8": lambda: fp8_layout("l.weight_scale", torch.tensor(0.01), {"config.json": QUARK_FP8}),
    "gpt-oss-mxfp4": lambda: Built(
        {"l.down_proj_blocks": torch.from_numpy(packed(128, 64).reshape(2, 64, 2, 16)),
         "l.down_proj_scales": torch.full((2, 64, 2), 120, dtype=torch.uint8)},
        {"config.json": MXFP4_CONFIG}, "l.down_proj_blocks", "l.down_proj_scales", "e8m0", MXFP4),
    "compressed-tensors-nvfp4": lambda: Built(
        {"l.weight_packed": torch.from_numpy(packed()), "l.weight_scale": torch.full((64, 4), 0.5).to(
            torch.float8_e4m3fn), "l.weight_global_scale": torch.tensor([448.0 * 6.0])},
        {"config.json": CT_NVFP4}, "l.weight_packed", "l.weight_scale", "e4m3", NVFP4),
    "modelopt-nvfp4": lambda: Built(
        {"l.weight": torch.from_numpy(packed()), "l.weight_scale": torch.full((64, 4), 0.5).to(torch.float8_e4m3fn),
         "l.weight_scale_2": torch.tensor(0.001), "l.input_scale": torch.tensor(0.02)},
        {"hf_quant_config.json": MODELOPT_NVFP4}, "l.weight", "l.weight_scale", "e4m3", NVFP4),
    "compressed-tensors-mxfp4": lambda: Built(
        {"l.weight_packed": torch.from_numpy(packed()), "l.weight_scale": torch.full((64, 2), 120, dtype=torch.uint8)},
        {"config.json": _ct("mxfp4-pack-quantized", 4, 32)}, "l.weight_packed", "l.weight_scale", "e8m0", MXFP4),
    "compressed-tensors-mxfp8": lambda: Built(
        {"l.weight": fp8(codes((256, 256), pool=finite_nonzero_codes("e4m3fn"))),
         "l.weight_scale": torch.full((256, 8), 120, dtype=torch.uint8)},
        {"config.json": _ct("mxfp8-quantized", 8, 32)}, "l.weight", "l.weight_scale", "e8m0", MXFP8),
    "quark-mxfp4": lambda: Built(
        {"l.weight": torch.from_numpy(packed()), "l.weight_scale": torch.full((64, 2), 120, dtype=torch.uint8)},
        {"config.json": QUARK_MXFP4}, "l.weight", "l.weight_scale", "e8m0", MXFP4),
}


@pytest.fixture(scope="module")
def torchao_state():
    """The torchao layouts, made by torchao (once per module): name -> (state dict, data key, clean verdicts)."""
    q = pytest.importorskip("torchao.quantization")
    from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig, NVFP4WeightOnlyConfig

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(128, 64)).to(torch.bfloat16)

    made = {}
    for name, config, clean in (
            ("torchao-float8", q.Float8WeightOnlyConfig(), FP8),
            ("torchao-mx", MXDynamicActivationMXWeightConfig(), MXFP8),
            ("torchao-mxfp4", MXDynamicActivationMXWeightConfig(activation_dtype=torch.float4_e2m1fn_x2,
                                                                weight_dtype=torch.float4_e2m1fn_x2), MXFP4),
            ("torchao-nvfp4", NVFP4WeightOnlyConfig(), NVFP4)):
        m = model()
        try:
            q.quantize_(m, config)
        except Exception as exc:  # a config this torchao cannot apply on a CPU
            made[name] = f"torchao cannot make {name} here: {str(exc).splitlines()[0][:120]}"
            continue
        buf = io.BytesIO()
        torch.save(m.state_dict(), buf)  # each case loads its own copy to plant into
        made[name] = (buf.getvalue(), clean)
    return made


LAYOUTS = list(SAFETENSORS_LAYOUTS) + ["torchao-float8", "torchao-mx", "torchao-mxfp4", "torchao-nvfp4"]


def test_the_matrix_covers_every_layout():
    assert sorted(LAYOUTS) == sorted(lay.name for lay in layouts.LAYOUTS)


DEFECTS = ("clean", "scale_nan", "scale_zero", "scale_inf", "scale_254", "misshaped", "missing", "beyond_240",
           "neg_zero", "index_missing_shard", "truncated")
FP8_NAMES = ("transformers-fp8", "compressed-tensors-fp8", "modelopt-fp8", "quark-fp8", "torchao-float8")
E8M0_NAMES = ("gpt-oss-mxfp4", "quark-mxfp4", "compressed-tensors-mxfp4", "compressed-tensors-mxfp8", "torchao-mx",
              "torchao-mxfp4")
MX8_NAMES = ("torchao-mx", "compressed-tensors-mxfp8")
TORCHAO = ("torchao-float8", "torchao-mx", "torchao-mxfp4", "torchao-nvfp4")


def not_held(layout, defect):
    """Why a layout cannot hold a defect, or ""."""
    e8m0 = layout in E8M0_NAMES
    e4m3_scale = layout in ("compressed-tensors-nvfp4", "modelopt-nvfp4", "torchao-nvfp4")
    if defect == "scale_inf" and (e8m0 or e4m3_scale):
        return "e8m0 and e4m3 scales have no Inf"
    if defect == "scale_254" and not e8m0:
        return "254 is an e8m0 scale byte"
    if defect in ("misshaped", "missing") and layout in TORCHAO:
        return "a torchao subclass carries its own scale"
    if defect in ("beyond_240", "neg_zero") and layout not in FP8_NAMES + MX8_NAMES:
        return "packed e2m1 data: no FP8 codes (e2m1 has neither ±240 nor a -0 hazard)"
    return ""


def plant_scale(t, defect):
    """A copy of scale tensor ``t`` with element 0 made NaN / 0 / Inf / 254 in its own encoding."""
    t = t.clone()
    flat = t.reshape(-1)
    if t.dtype in (torch.uint8, torch.float8_e8m0fnu):
        flat.view(torch.uint8)[0] = {"scale_nan": 0xFF, "scale_zero": 0x00, "scale_254": 254}[defect]
    elif t.dtype == torch.float8_e4m3fn:
        flat.view(torch.uint8)[0] = {"scale_nan": 0x7F, "scale_zero": 0x00}[defect]
    else:
        flat[0] = {"scale_nan": float("nan"), "scale_zero": 0.0, "scale_inf": float("inf")}[defect]
    return t


def expected(layout, defect, clean, data_bytes):
    """(exit code, verdicts, {finding code: (severity, count)} of the data tensor, or a file error text), from the
    planted bytes alone."""
    if defect == "clean":
        return 0, clean, {}
    if defect in ("index_missing_shard", "truncated"):
        return 2, UNKNOWN, "missing shard" if defect == "index_missing_shard" else "truncated"
    if defect == "misshaped":
        return 1, NOWHERE, {"SCALE_SHAPE": ("error", None)}
    if defect == "missing":
        return 1, NOWHERE, {"SCALE_MISSING": ("error", 1)}
    if defect == "scale_nan":
        return 1, LOADS_WRONG, {"SCALE_NONFINITE": ("error", 1)}
    if defect == "scale_inf":
        return 1, LOADS_WRONG, {"SCALE_NONFINITE": ("error", 1)}
    if defect == "scale_zero":
        if layout in E8M0_NAMES:  # e8m0 0x00 is 2^-127: no zero, a subnormal in float32, which zeroes its block
            return 1, LOADS_WRONG, {"SCALE_SUBNORMAL": ("warning", 1), "BLOCK_ZEROED": ("error", block_nonzero(layout,
                                                                                                        data_bytes))}
        return 1, LOADS_WRONG, {"SCALE_NONPOSITIVE": ("error", 1)}
    if defect == "scale_254":  # every value of the first block with |v| x 2^127 >= bf16's overflow
        return 1, LOADS_WRONG, {"DEQUANT_OVERFLOW": ("error", block_overflow(layout, data_bytes))}
    if defect == "beyond_240":  # scaled: convert is exact (scale x 2), the plain fnuz cast makes them NaN
        return 0, clean, {}
    if defect == "neg_zero":
        return 0, clean, {"NEG_ZERO_FNUZ_HAZARD": ("info", int((data_bytes == 0x80).sum()))}
    raise AssertionError(defect)


def first_block(layout, data_bytes):
    """The values of the first 32-element block (the one under scale element 0), decoded by ml_dtypes."""
    if layout in MX8_NAMES:
        return data_bytes.reshape(-1)[:32].view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    b = data_bytes.reshape(-1)[:16]
    nib = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(-1)  # low nibble first
    return nib.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def block_nonzero(layout, data_bytes):
    """Nonzero values of the first block: what a scale of 2^-127 zeroes."""
    return int(np.count_nonzero(first_block(layout, data_bytes)))


def block_overflow(layout, data_bytes):
    """Values of the first 32-element block (the one under scale element 0) that overflow bfloat16 at 2^127."""
    if layout in MX8_NAMES:
        v = data_bytes.reshape(-1)[:32].view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    else:
        b = data_bytes.reshape(-1)[:16]
        nib = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(-1)  # low nibble first
        v = nib.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    return int(np.count_nonzero(np.abs(v) * 2.0 ** 127 >= BF16_OVERFLOW))


def build(layout, defect, d, torchao_state):
    """Write the folder; (clean verdicts, the data tensor's bytes as written, its name in the audit)."""
    d.mkdir()
    if layout in TORCHAO:
        made = torchao_state[layout]
        if isinstance(made, str):
            pytest.skip(made)
        pickled, clean = made
        sd = torch.load(io.BytesIO(pickled), weights_only=True)  # torchao's classes are allow-listed
        w = sd["0.weight"]
        fields = {"qdata": w.qdata.clone(), "scale": w.scale.clone()}
        raw = fields["qdata"].view(torch.uint8)
        if defect == "beyond_240":
            raw.copy_(torch.from_numpy(codes(tuple(raw.shape), pool=finite_nonzero_codes("e4m3fn"))))
        if defect == "neg_zero":
            raw.reshape(-1)[:5] = 0x80
        if defect.startswith("scale_"):
            fields["scale"] = plant_scale(fields["scale"], defect)
        w.qdata.copy_(fields["qdata"])
        w.scale.copy_(fields["scale"])
        data_bytes = fields["qdata"].view(torch.uint8).numpy().copy()
        name = "model.bin" if defect != "index_missing_shard" else "pytorch_model.bin"
        torch.save(sd, d / name)
        data_name = "0.weight.qdata"
        if defect == "index_missing_shard":
            write_json(str(d / "pytorch_model.bin.index.json"), {"weight_map": {
                "0.weight": "pytorch_model.bin", "0.bias": "pytorch_model-00002-of-00002.bin"}})
    else:
        b = SAFETENSORS_LAYOUTS[layout]()
        clean = b.clean
        t = dict(b.tensors)
        data_bytes = t[b.data].view(torch.uint8).numpy()
        if defect == "beyond_240":
            data_bytes = codes(data_bytes.shape, pool=finite_nonzero_codes("e4m3fn"))
            t[b.data] = fp8(data_bytes)
        if defect == "neg_zero":
            data_bytes = data_bytes.copy()
            data_bytes.reshape(-1)[:5] = 0x80
            t[b.data] = fp8(data_bytes)
        if defect.startswith("scale_"):
            t[b.scale] = plant_scale(t[b.scale], defect)
        if defect == "misshaped":  # one more row of scales than the data has blocks (or rows)
            s = t[b.scale]
            t[b.scale] = torch.cat([s.reshape(-1), s.reshape(-1)[:1]]) if s.dim() <= 1 else \
                torch.cat([s, s[..., :1, :]], dim=-2)
        if defect == "missing":
            del t[b.scale]
        for k, doc in b.configs.items():
            write_json(str(d / k), doc)
        if defect == "index_missing_shard":
            save_st(str(d / "model-00001-of-00002.safetensors"), t)
            write_json(str(d / "model.safetensors.index.json"), {"weight_map": {
                **{k: "model-00001-of-00002.safetensors" for k in t},
                "lm_head.weight": "model-00002-of-00002.safetensors"}})
        else:
            save_st(str(d / "model.safetensors"), t)
        data_name = b.data
    if defect == "truncated":
        path = next(p for p in d.iterdir() if p.suffix in (".safetensors", ".bin"))
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) - 64])
    return clean, data_bytes, data_name


CASES = [(lay, dfc) for lay in LAYOUTS for dfc in DEFECTS if not not_held(lay, dfc)]


def test_each_left_out_case_says_why():
    left = [(lay, dfc, not_held(lay, dfc)) for lay in LAYOUTS for dfc in DEFECTS if not_held(lay, dfc)]
    assert all(why for *_, why in left) and len(CASES) + len(left) == len(LAYOUTS) * len(DEFECTS)


@pytest.mark.parametrize("layout,defect", CASES)
def test_layout_with_defect(layout, defect, tmp_path, capsys, torchao_state):
    d = tmp_path / "ck"
    clean, data_bytes, data_name = build(layout, defect, d, torchao_state)
    rc_expected, verdicts, findings = expected(layout, defect, clean, data_bytes)
    out = tmp_path / "audit.json"
    rc = main(["audit", str(d), "--json", str(out), "--jobs", "1", "-q"])
    err = capsys.readouterr().err
    r = json.loads(out.read_text())
    assert rc == rc_expected, (err, r["summary"])
    assert r["summary"]["verdicts"] == verdicts, r["summary"].get("unknown") or r["portability"]
    if isinstance(findings, str):  # the file could not be read: said in one line, named for what it is
        assert findings in err, err
        return
    got = {f["code"]: (f["severity"], f["count"]) for f in tensor_of(r, data_name)["findings"]}
    for code, (severity, count) in findings.items():
        assert code in got, (code, got)
        assert got[code][0] == severity and (count is None or got[code][1] == count), (code, got[code], count)
    if defect in ("clean", "beyond_240", "neg_zero"):
        assert not [c for c, (s, _) in got.items() if s != "info"], got
    if defect == "beyond_240" and layout in FP8_NAMES:
        # what a plain .to(torch.float8_e4m3fnuz) does under the same scale: torch's own cast, counted
        fn = torch.from_numpy(np.ascontiguousarray(data_bytes)).view(torch.float8_e4m3fn)
        made_nan = int(torch.isnan(fn.to(torch.float8_e4m3fnuz).float()).sum() - torch.isnan(fn.float()).sum())
        mi300 = next(p for p in r["portability"] if p["target"] == "mi300")
        assert made_nan > 0 and mi300["load_paths"]["plain_cast"]["made_nan"] == made_nan
        assert mi300["load_paths"]["fp8check_convert"]["lost"] == 0

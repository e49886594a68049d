"""The producer layouts of issue 22 (gpt-oss MXFP4, compressed-tensors NVFP4, MXFP8, declared block sizes),
written with safetensors, audited, each expected verdict written here before the audit ran and every count
made again independently (numpy, ml_dtypes' e2m1 decoding, torch's own fnuz cast)."""

from __future__ import annotations

import io
import json

import ml_dtypes
import numpy as np
import pytest
import torch

from checkpoint_builders import DEEPSEEK_CONFIG, codes_of, fp8, save_st, tensor_of, write_json

ALL = {"h100", "b200", "mi300", "mi355"}
MXFP4_CONFIG = {"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": []},
                "torch_dtype": "bfloat16"}
CT_NVFP4_CONFIG = {"quantization_config": {
    "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}, "torch_dtype": "bfloat16"}
BF16_OVERFLOW = (2 - 2 ** -8) * 2.0 ** 127


def e2m1_values(codes: np.ndarray) -> np.ndarray:
    """Independent decoding: ml_dtypes' float4_e2m1fn of each 4-bit code."""
    return codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def nibbles(packed: np.ndarray) -> np.ndarray:
    return np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def gpt_oss(d, *, scales=None, blocks=None, config=True, drop_scale=False):
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, size=(2, 8, 4, 16), dtype=np.uint8) if blocks is None else blocks
    scales = rng.integers(120, 130, size=(2, 8, 4), dtype=np.uint8) if scales is None else scales
    t = {"model.layers.0.mlp.experts.down_proj_blocks": torch.from_numpy(blocks),
         "model.layers.0.mlp.experts.down_proj_bias": torch.zeros(2, 8, dtype=torch.bfloat16)}
    if not drop_scale:
        t["model.layers.0.mlp.experts.down_proj_scales"] = torch.from_numpy(scales)
    d.mkdir()
    save_st(str(d / "model.safetensors"), t)
    if config:
        write_json(str(d / "config.json"), MXFP4_CONFIG)
    return d, blocks, scales


DATA = "model.layers.0.mlp.experts.down_proj_blocks"


def test_gpt_oss_mxfp4_is_audited_and_runs_where_mxfp4_matmuls_exist(tmp_path, run_audit):
    d, blocks, _ = gpt_oss(tmp_path / "m")
    r = run_audit(d)
    t = tensor_of(r, DATA)
    assert t["role"] == "packed" and t["scale"]["name"] == "model.layers.0.mlp.experts.down_proj_scales"
    assert t["stats"]["histogram"] == np.bincount(nibbles(blocks).reshape(-1), minlength=16).tolist()
    assert r["summary"]["verdicts"] == {"h100": "runs_emulated", "b200": "runs_as_is", "mi300": "runs_emulated",
                                        "mi355": "runs_as_is"}
    assert r["summary"]["exit_code"] == 0 and r["summary"]["unknown"] == []
    # counted as packed FP4 data, not as FP8 (the header said "0 FP8 (0 B)" and nothing else)
    assert (r["summary"]["fp8_tensors"], r["summary"]["packed_tensors"]) == (0, 1)
    assert r["summary"]["packed_bytes"] == blocks.nbytes


def test_the_terminal_header_counts_packed_fp4(tmp_path):
    from fp8check.checkpoints.audit import AuditOptions, audit
    from fp8check.terminal.checkpoints import print_report

    d, blocks, _ = gpt_oss(tmp_path / "m")
    result = audit([str(d)], AuditOptions(jobs=1))
    try:
        out = io.StringIO()
        print_report(result, file=out)
    finally:
        result.close()
    header = out.getvalue().splitlines()[0]
    assert "0 FP8 (0 B), 1 packed FP4 (" in header, header


def test_gpt_oss_scale_defects_are_findings(tmp_path, run_audit):
    rng = np.random.default_rng(0)
    scales = rng.integers(120, 130, size=(2, 8, 4), dtype=np.uint8)
    scales[0, 3, 1] = 0xFF  # NaN
    scales[1, 2, 0] = 0x00  # 2^-127
    scales[1, 5, 2] = 254  # 2^127: every |v| >= 2 of this block overflows bfloat16
    d, blocks, _ = gpt_oss(tmp_path / "m", scales=scales)
    r = run_audit(d)
    c = codes_of(r, DATA)
    assert c["SCALE_NONFINITE"] == ("error", 1) and c["SCALE_SUBNORMAL"] == ("warning", 1)
    v = e2m1_values(nibbles(blocks)[1, 5, 2])  # the 32 values under the 254 scale
    expected = int(np.count_nonzero(np.abs(v) * 2.0 ** 127 >= BF16_OVERFLOW))
    assert expected > 0 and c["DEQUANT_OVERFLOW"] == ("error", expected)
    assert r["summary"]["exit_code"] == 1


@pytest.mark.parametrize("defect", ["missing", "short"])
def test_gpt_oss_missing_or_short_scale_cannot_run_anywhere(tmp_path, run_audit, defect):
    if defect == "missing":
        d, _, _ = gpt_oss(tmp_path / "m", drop_scale=True)
        code = "SCALE_MISSING"
    else:
        d, _, _ = gpt_oss(tmp_path / "m", scales=np.full((2, 8, 3), 127, dtype=np.uint8))
        code = "SCALE_SHAPE"
    r = run_audit(d)
    assert codes_of(r, DATA)[code][0] == "error"
    assert set(r["summary"]["verdicts"].values()) == {"cannot_run"} and r["summary"]["exit_code"] == 1


def test_packed_bytes_without_a_config_get_no_verdict(tmp_path, run_audit):
    d, _, _ = gpt_oss(tmp_path / "m", config=False)
    r = run_audit(d)
    assert set(r["summary"]["verdicts"].values()) == {"unknown"}
    assert codes_of(r, DATA)["BYTES_FORMAT_UNKNOWN"][0] == "info"


def test_a_quant_method_no_layout_describes_is_unknown(tmp_path, run_audit):
    d, _, _ = gpt_oss(tmp_path / "m", config=False)
    write_json(str(d / "config.json"), {"quantization_config": {"quant_method": "awq"}})
    r = run_audit(d)
    assert set(r["summary"]["verdicts"].values()) == {"unknown"}
    assert any("'awq'" in u for u in r["summary"]["unknown"]), r["summary"]["unknown"]


def ct_nvfp4(d, *, scale_byte=None):
    rng = np.random.default_rng(1)
    packed = rng.integers(0, 256, size=(32, 16), dtype=np.uint8)  # [out, in/2]: in = 32
    sb = rng.choice(np.arange(0x30, 0x48, dtype=np.uint8), size=(32, 2))  # e4m3 block scales, in/16 = 2
    if scale_byte is not None:
        sb[4, 1] = scale_byte
    d.mkdir()
    save_st(str(d / "model.safetensors"), {
        "l.weight_packed": torch.from_numpy(packed), "l.weight_scale": fp8(sb),
        "l.weight_global_scale": torch.tensor([448.0 * 6.0]), "l.input_global_scale": torch.tensor([100.0])})
    write_json(str(d / "config.json"), CT_NVFP4_CONFIG)
    return d, packed, sb


def test_compressed_tensors_nvfp4_block_scales_are_scales_not_weights(tmp_path, run_audit):
    d, packed, _ = ct_nvfp4(tmp_path / "m")
    r = run_audit(d)
    assert tensor_of(r, "l.weight_scale")["role"] == "scale"
    t = tensor_of(r, "l.weight_packed")
    assert t["role"] == "packed" and t["scale"]["name"] == "l.weight_scale"
    assert t["stats"]["histogram"] == np.bincount(nibbles(packed).reshape(-1), minlength=16).tolist()
    assert r["summary"]["fp8_tensors"] == 0
    assert r["summary"]["verdicts"] == {"h100": "runs_emulated", "b200": "runs_as_is", "mi300": "runs_emulated",
                                        "mi355": "runs_emulated"}
    # packed e2m1 is FP4: its verdict does not call it FP8 (it said "1 FP8 tensor (nvfp4) is native on b200")
    (b200,) = [v for v in r["portability"] if v["target"] == "b200"]
    assert "1 FP4 tensor (nvfp4) is native on b200" in b200["reasons"], b200["reasons"]
    bad = run_audit(ct_nvfp4(tmp_path / "nan", scale_byte=0x7F)[0])
    assert codes_of(bad, "l.weight_packed")["SCALE_NONFINITE"] == ("error", 1)


def mx8(d, *, cols_per_scale=32):
    rng = np.random.default_rng(2)
    q = rng.choice(np.arange(0x08, 0x70, dtype=np.uint8), size=(64, 128))
    s = rng.integers(118, 124, size=(64, 128 // cols_per_scale), dtype=np.uint8)
    d.mkdir()
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q), "l.weight_scale": torch.from_numpy(s).view(
        torch.float8_e8m0fnu)})
    return d


def test_mxfp8_runs_natively_only_where_mx_matmuls_exist(tmp_path, run_audit):
    r = run_audit(mx8(tmp_path / "m"))
    assert tensor_of(r, "l.weight")["scale"]["granularity"]["name"] == "mx-e8m0"
    assert r["summary"]["verdicts"] == {"h100": "runs_emulated", "b200": "runs_as_is", "mi300": "runs_emulated",
                                        "mi355": "runs_as_is"}


def test_mx_scales_of_64_wide_blocks_are_not_a_group_of_64(tmp_path, run_audit):
    r = run_audit(mx8(tmp_path / "m", cols_per_scale=64))
    assert codes_of(r, "l.weight")["SCALE_SHAPE"][0] == "error"
    assert set(r["summary"]["verdicts"].values()) == {"cannot_run"}


@pytest.mark.parametrize("scale_shape", [(4, 2), (2, 2)])
def test_a_scale_that_only_fits_other_blocks_than_declared_is_scale_shape(tmp_path, run_audit, scale_shape):
    # data [256, 512] with weight_block_size [128, 128] needs [2, 4]; [4, 2] is the transposed scale (read as
    # 64x256 blocks before), [2, 2] fits 128x256 blocks
    d = tmp_path / "m"
    d.mkdir()
    q = np.random.default_rng(3).choice(np.arange(0x08, 0x70, dtype=np.uint8), size=(256, 512))
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q), "l.weight_scale_inv": torch.full(scale_shape, 0.01)})
    write_json(str(d / "config.json"), DEEPSEEK_CONFIG)
    r = run_audit(d)
    c = codes_of(r, "l.weight")
    assert c["SCALE_SHAPE"] == ("error", scale_shape[0] * scale_shape[1]) and "SATURATION" not in c
    assert set(r["summary"]["verdicts"].values()) == {"cannot_run"}


def _ct_config(*blocks):
    """A compressed-tensors config with one FP8 weight group per entry: a block_structure, or None (channel)."""
    groups = {f"group_{k}": {"targets": [f"re:.*g{k}.*"], "weights": {
        "num_bits": 8, "type": "float", "symmetric": True, "strategy": "block" if b else "channel",
        "block_structure": list(b) if b else None}} for k, b in enumerate(blocks)}
    return {"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
                                    "config_groups": groups}, "torch_dtype": "bfloat16"}


def _block_checkpoint(d, name, scale_shape, config):
    d.mkdir()
    q = np.random.default_rng(5).choice(np.arange(0x08, 0x70, dtype=np.uint8), size=(256, 512))
    save_st(str(d / "model.safetensors"), {
        "g0.weight": fp8(q), f"g0.{name}": torch.full(scale_shape, 0.01),
        "s.weight": fp8(q[:128, :128]), f"s.{name}": torch.full((1, 1), 0.01)})
    write_json(str(d / "config.json"), config)
    return d


@pytest.mark.parametrize("config", ["deepseek", "compressed-tensors"])
@pytest.mark.parametrize("scale_shape", [(1, 1), (256, 1)])
def test_one_scale_per_tensor_or_row_where_the_config_declares_blocks_is_scale_shape(tmp_path, run_audit, config,
                                                                                    scale_shape):
    # From a new user's llmcompressor FP8_BLOCK checkpoint with its block_structure edited to [32, 32]: the
    # (1, 1) scales were read as tensorwise and the audit was clean, while a loader sizes [2, 4] from the config.
    # A (1, 1) scale of a weight no larger than one block (s) fits.
    d = _block_checkpoint(tmp_path / "m", "weight_scale_inv" if config == "deepseek" else "weight_scale",
                          scale_shape, DEEPSEEK_CONFIG if config == "deepseek" else _ct_config((128, 128)))
    r = run_audit(d)
    assert codes_of(r, "g0.weight")["SCALE_SHAPE"] == ("error", scale_shape[0] * scale_shape[1])
    detail = next(f for f in tensor_of(r, "g0.weight")["findings"] if f["code"] == "SCALE_SHAPE")
    assert "declares [128, 128] blocks for every weight: expected [2, 4]" in json.dumps(detail), detail
    assert "SCALE_SHAPE" not in codes_of(r, "s.weight")


def test_per_row_scales_beside_a_block_group_are_not_judged_by_its_block(tmp_path, run_audit):
    # a channel group and a block group: which module is in which is the targets' call, so no block is imposed
    r = run_audit(_block_checkpoint(tmp_path / "m", "weight_scale", (256, 1), _ct_config((128, 128), None)))
    assert "SCALE_SHAPE" not in codes_of(r, "g0.weight") and "SCALE_SHAPE" not in codes_of(r, "s.weight")


def test_scales_off_by_448x_or_inverted_are_outliers(tmp_path, run_audit):
    d = tmp_path / "m"
    d.mkdir()
    rng = np.random.default_rng(4)
    t = {}
    for k in range(6):
        t[f"l{k}.weight"] = fp8(rng.choice(np.arange(0x08, 0x70, dtype=np.uint8), size=(16, 32)))
        t[f"l{k}.weight_scale"] = torch.full((16, 1), 0.002 * (1 + k / 10))
    t["l4.weight_scale"] = t["l4.weight_scale"] * 448  # the amax stored, not amax / 448
    t["l5.weight_scale"] = 1 / t["l5.weight_scale"]  # the quantization multiplier stored
    save_st(str(d / "model.safetensors"), t)
    r = run_audit(d)
    by = {f["code"]: f for f in tensor_of(r, "l4.weight")["findings"]}
    factor = float(by["SCALE_OUTLIER"]["message"].split(", ")[1].split("x ")[0])
    assert 448 / 1.1 < factor < 448 * 1.1 * 1.5  # median of the siblings, to an eighth of an octave
    inv = {f["code"]: f for f in tensor_of(r, "l5.weight")["findings"]}["SCALE_OUTLIER"]["message"]
    assert "inverted" in inv
    assert all("SCALE_OUTLIER" not in codes_of(r, f"l{k}.weight") for k in range(4))


def test_fnuz_verdict_counts_what_a_plain_cast_turns_into_nan(tmp_path, run_audit):
    d = tmp_path / "m"
    d.mkdir()
    rng = np.random.default_rng(5)
    q = rng.choice(np.arange(0x08, 0x7E, dtype=np.uint8), size=(64, 64))  # up to 448, no NaN
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q), "l.weight_scale": torch.tensor(0.01)})
    r = run_audit(d, targets=("mi300",))
    # what torch's own cast does to these bytes
    nan_after_cast = int(torch.isnan(fp8(q).to(torch.float8_e4m3fnuz).float()).sum())
    conv = r["portability"][0]["conversions"][0]
    assert nan_after_cast > 0 and conv["plain_cast_nan"] == nan_after_cast
    assert r["summary"]["verdicts"] == {"mi300": "runs_after_conversion"}


def test_config_format_beside_other_tensor_format_is_remarked(tmp_path, run_audit):
    d = tmp_path / "m"
    d.mkdir()
    q = np.random.default_rng(6).choice(np.arange(0x08, 0x70, dtype=np.uint8), size=(128, 128))
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q, "e4m3fnuz"),
                                           "l.weight_scale_inv": torch.full((1, 1), 0.01)})
    write_json(str(d / "config.json"), DEEPSEEK_CONFIG)
    assert codes_of(run_audit(d), "l.weight")["CONFIG_FORMAT"] == ("warning", 128 * 128)


def _fp4_weights(bits_of_groups):
    groups = {f"group_{k}": {"targets": [f"re:.*g{k}.*"], "weights": {
        "num_bits": b, "type": "float", "symmetric": True, "strategy": "tensor_group" if b == 4 else "channel",
        "group_size": 16 if b == 4 else None}} for k, b in enumerate(bits_of_groups)}
    return {"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                                    "config_groups": groups}}


@pytest.mark.parametrize("config", ["compressed-tensors", "modelopt", "mixed"])
def test_fp8_weights_under_a_packed_fp4_config_are_remarked(tmp_path, run_audit, config):
    # From a new user's ModelOpt FP8 checkpoint whose quant_algo was edited to NVFP4 (and an llmcompressor one
    # with num_bits 4): the FP4 config declared no FP8 format, and the FP8 tensors audited clean
    d = tmp_path / "m"
    d.mkdir()
    q = np.random.default_rng(6).choice(np.arange(0x08, 0x70, dtype=np.uint8), size=(64, 128))
    save_st(str(d / "model.safetensors"), {"g0.weight": fp8(q), "g0.weight_scale": torch.full((64, 1), 0.01)})
    if config == "modelopt":
        write_json(str(d / "hf_quant_config.json"), {"quantization": {"quant_algo": "NVFP4", "group_size": 16}})
    else:
        write_json(str(d / "config.json"), _fp4_weights([4] if config == "compressed-tensors" else [8, 4]))
    c = codes_of(run_audit(d), "g0.weight")
    if config == "mixed":  # an FP8 group beside the FP4 one: the tensor may be in it
        assert "CONFIG_FORMAT" not in c
    else:
        assert c["CONFIG_FORMAT"] == ("error", 64 * 128)


def test_torchao_bin_shards_with_their_index_pair_every_tensor(tmp_path, run_audit):
    torchao_q = pytest.importorskip("torchao.quantization")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 16)).to(torch.bfloat16)
    torchao_q.quantize_(m, torchao_q.Float8WeightOnlyConfig())
    d = tmp_path / "m"
    d.mkdir()
    torch.save(m.state_dict(), d / "pytorch_model.bin")
    write_json(str(d / "pytorch_model.bin.index.json"),
               {"metadata": {}, "weight_map": {k: "pytorch_model.bin" for k in m.state_dict()}})
    r = run_audit(d)
    assert "INDEX_MISSING_TENSOR" not in r["summary"]["findings_by_code"]
    assert r["summary"]["unknown"] == [] and r["summary"]["fp8_tensors"] == 2


def test_convert_leaves_nvfp4_intact(tmp_path, capsys):
    from safetensors.torch import load_file

    from fp8check.cli import main

    src, _, _ = ct_nvfp4(tmp_path / "nv")
    assert main(["convert", str(src), str(tmp_path / "nv-out"), "--to", "e4m3fnuz", "-q"]) == 0
    a, b = load_file(str(src / "model.safetensors")), load_file(str(tmp_path / "nv-out" / "model.safetensors"))
    assert set(a) == set(b) and all(torch.equal(a[k].view(torch.uint8) if a[k].element_size() == 1 else a[k],
                                                b[k].view(torch.uint8) if b[k].element_size() == 1 else b[k])
                                    for k in a)
    assert b["l.weight_scale"].dtype == torch.float8_e4m3fn  # still NVFP4's e4m3 block scale


def _dequant(vals: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """value x scale in float64, the [2, 2] scale expanded to 128x128 blocks (torch's own decoding)."""
    s = scale.to(torch.float64).repeat_interleave(128, 0).repeat_interleave(128, 1)
    return vals.to(torch.float64) * s


def _lost(ref: torch.Tensor, got: torch.Tensor) -> torch.Tensor:
    """Positions whose dequantized value changed: NaN equals NaN, -0 equals +0."""
    return ~((torch.isnan(ref) & torch.isnan(got)) | (ref == got))


@pytest.mark.parametrize("scale_kind", ["float16 40000", "e8m0 254"])
def test_a_scale_that_cannot_double_gets_a_block_plan_and_each_load_path_is_counted(tmp_path, run_audit, capsys,
                                                                                     scale_kind):
    from checkpoint_builders import finite_nonzero_codes
    from fp8check.cli import main

    d = tmp_path / "m"
    d.mkdir()
    rng = np.random.default_rng(7)
    pool = np.concatenate([finite_nonzero_codes("e4m3fn"), np.array([0x7E, 0xFE], dtype=np.uint8)])  # up to ±448
    q = rng.choice(pool, size=(256, 256)).astype(np.uint8)
    q[3, 5], q[7, 9] = 0x7F, 0xFF  # NaN, in block (0, 0)
    q[10, 11], q[12, 13], q[14, 15] = 0x80, 0x80, 0x80  # -0, in block (0, 0)
    if scale_kind == "float16 40000":  # fp16 cannot hold 80000
        scale = torch.tensor([[0.01, 0.02], [40000.0, 0.03]], dtype=torch.float16)
    else:  # e8m0 254 = 2^127: 255 is NaN
        scale = torch.tensor([[120, 130], [254, 100]], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q), "l.weight_scale_inv": scale})
    write_json(str(d / "config.json"), DEEPSEEK_CONFIG)
    vals = fp8(q).to(torch.float64)
    src = _dequant(vals, scale)
    beyond = np.abs(np.nan_to_num(vals.numpy())) > 240
    kept_block = np.zeros((256, 256), dtype=bool)
    kept_block[128:, :128] = True
    # written before the run: only the values beyond ±240 in the one block whose scale cannot double are lost by
    # convert (before: every value beyond ±240 in the tensor); the plain cast loses every value beyond ±240;
    # vLLM makes the two NaN finite and loses the block under the doubled scale (Inf), Quark that block only
    in_block = int((beyond & kept_block).sum())
    assert 0 < in_block < int(beyond.sum())
    r = run_audit(d, targets=("mi300",))
    t = tensor_of(r, "l.weight")
    plan = t["conversions"]["e4m3fnuz"]
    assert (plan["factor"], plan["blocks_kept"], plan["inexact"]) == (2.0, 1, in_block)
    assert codes_of(r, "l.weight")["FNUZ_RANGE"] == ("error", in_block)
    paths = r["portability"][0]["load_paths"]
    # each path done here with torch on the same bytes, and its losses counted against the source's values
    plain = _dequant(fp8(q).to(torch.float8_e4m3fnuz).to(torch.float64), scale)
    as_fnuz = torch.from_numpy(np.where(q == 0x80, 0, q).astype(np.uint8)).view(torch.float8_e4m3fnuz)
    doubled = (scale.float() * 2).to(scale.dtype) if scale.dtype == torch.float16 else scale.float() * 2
    vllm = _dequant(as_fnuz.to(torch.float64), doubled)
    quark_w = (fp8(q).to(torch.float16) / 2).clamp(-224.0, 224.0).to(torch.float8_e4m3fnuz)
    quark = _dequant(quark_w.to(torch.float64), doubled)
    counted = {k: int(_lost(src, v).sum()) for k, v in (("plain_cast", plain), ("vllm", vllm), ("quark_import", quark),
                                                          ("quark_forward", vllm))}
    assert counted == {"plain_cast": int(beyond.sum()), "vllm": 2 + 128 * 128, "quark_import": 128 * 128,
                       "quark_forward": 2 + 128 * 128}
    assert {k: paths[k]["lost"] for k in counted} == counted
    assert (paths["plain_cast"]["made_nan"], paths["vllm"]["nan_made_finite"], paths["vllm"]["scale_overflow"]) == (
        int(beyond.sum()), 2, 128 * 128)
    assert paths["fp8check_convert"]["lost"] == in_block
    # convert does what the plan says: exit 1, exactly those values saturated, the rest exact
    out = tmp_path / "out"
    rc = main(["convert", str(d), str(out), "--to", "e4m3fnuz", "-q", "--json", str(tmp_path / "c.json")])
    capsys.readouterr()
    assert rc == 1
    from safetensors.torch import load_file

    b = load_file(str(out / "model.safetensors"))
    expected_scale = scale.to(torch.float64) * torch.tensor([[2.0, 2.0], [1.0, 2.0]], dtype=torch.float64)
    assert torch.equal(b["l.weight_scale_inv"].to(torch.float64), expected_scale)
    lost = _lost(src, _dequant(b["l.weight"].to(torch.float64), b["l.weight_scale_inv"])).numpy()
    assert np.array_equal(lost, beyond & kept_block)

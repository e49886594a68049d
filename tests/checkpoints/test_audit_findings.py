"""Each finding fires with its exact count on a real checkpoint where it is planted,
and stays silent on the clean twin."""

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from checkpoint_builders import (COMPRESSED_TENSORS_CONFIG, DEEPSEEK_CONFIG, codes, codes_of, finite_nonzero_codes, fp8,
                            plant, quantize, quantize_mx, save_pt, save_st, tensor_of, warned, write_json)


def clean_rowwise(fmt="e4m3fn", shape=(256, 384), seed=0):
    q, s = quantize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), fmt, "rowwise")
    return q, s


# -- clean checkpoints of every family: no errors, no warnings -------------------


def _no_warnings(report):
    bad = [(t["name"], f) for t in report["tensors"] for f in t["findings"] if f["severity"] != "info"]
    assert bad == []


def test_clean_fn_rowwise(tmp_path, run_audit):
    q, s = clean_rowwise()
    p = save_st(tmp_path / "m.safetensors", {"l.weight": q, "l.weight_scale": s,
                                             "norm.weight": torch.ones(384, dtype=torch.bfloat16)})
    r = run_audit(p)
    _no_warnings(r)
    t = tensor_of(r, "l.weight")
    assert t["format"] == "e4m3fn" and t["role"] == "fp8"
    assert t["scale"]["granularity"]["name"] == "rowwise"
    assert sum(t["stats"]["histogram"]) == 256 * 384 and len(t["stats"]["histogram"]) == 256
    assert tensor_of(r, "norm.weight")["role"] == "other"
    assert r["summary"]["fp8_tensors"] == 1 and r["summary"]["tensors"] == 3
    assert r["summary"]["exit_code"] == 0


def test_clean_fnuz(tmp_path, run_audit):
    q, s = clean_rowwise("e4m3fnuz")
    r = run_audit(save_st(tmp_path / "m.safetensors", {"l.weight": q, "l.weight_scale": s}), targets=("mi300",))
    _no_warnings(r)
    assert tensor_of(r, "l.weight")["format"] == "e4m3fnuz"
    assert r["portability"][0]["verdict"] == "runs_as_is"


def test_deepseek_blockwise_ragged(tmp_path, run_audit):
    q, s = quantize(torch.randn(300, 520), "e4m3fn", "block")
    assert tuple(s.shape) == (3, 5)
    save_st(tmp_path / "model.safetensors", {"m.down_proj.weight": q, "m.down_proj.weight_scale_inv": s})
    write_json(tmp_path / "config.json", DEEPSEEK_CONFIG)
    r = run_audit(tmp_path)
    _no_warnings(r)
    t = tensor_of(r, "m.down_proj.weight")
    assert t["scale"]["name"] == "m.down_proj.weight_scale_inv"
    assert t["scale"]["granularity"]["name"] == "block-128x128"
    assert t["scale"]["convention"] == "multiply" and t["scale"]["named_inverse"]
    assert tensor_of(r, "m.down_proj.weight_scale_inv")["role"] == "scale"
    assert r["checkpoints"][0]["config"]["block"] == [128, 128]


def test_tensorwise_with_input_and_kv_scales(tmp_path, run_audit):
    q, s = quantize(torch.randn(64, 96), "e4m3fn", "tensorwise")
    p = save_st(tmp_path / "m.safetensors", {
        "a.q_proj.weight": q, "a.q_proj.weight_scale": s, "a.q_proj.input_scale": torch.tensor(0.02),
        "a.k_proj.k_scale": torch.tensor(1.0), "a.v_proj.v_scale": torch.tensor(-1.0)})
    r = run_audit(p)
    assert tensor_of(r, "a.q_proj.weight")["scale"]["granularity"]["name"] == "tensorwise"
    assert tensor_of(r, "a.q_proj.input_scale")["role"] == "activation_scale"
    assert tensor_of(r, "a.k_proj.k_scale")["role"] == "kv_scale"
    # -1 means "absent" for KV scales: info, not SCALE_NONPOSITIVE
    assert codes_of(r, "a.v_proj.v_scale") == {"KV_SCALE_ABSENT": ("info", 1)}
    _no_warnings(r)


def test_compressed_tensors_bf16_channel_scales(tmp_path, run_audit):
    q, s = quantize(torch.randn(128, 256), "e4m3fn", "rowwise", scale_dtype=torch.bfloat16)
    save_st(tmp_path / "model.safetensors", {"l.weight": q, "l.weight_scale": s})
    write_json(tmp_path / "config.json", COMPRESSED_TENSORS_CONFIG)
    r = run_audit(tmp_path)
    _no_warnings(r)
    sc = tensor_of(r, "l.weight")["scale"]
    assert sc["dtype"] == "bfloat16" and sc["granularity"]["name"] == "rowwise"


def test_modelopt_4d_block_scales(tmp_path, run_audit):
    q, s = quantize(torch.randn(256, 384), "e4m3fn", "block")
    s4 = s.reshape(2, 1, 3, 1)
    save_st(tmp_path / "model.safetensors", {"l.weight": q, "l.weight_scale": s4,
                                             "l.k_proj.k_scale": torch.tensor(1.0)})
    write_json(tmp_path / "hf_quant_config.json", {"quantization": {"quant_algo": "FP8_PB_WO"}})
    r = run_audit(tmp_path)
    _no_warnings(r)
    g = tensor_of(r, "l.weight")["scale"]["granularity"]
    assert g["name"] == "block-128x128" and g["layout"] == "modelopt-4d"


@pytest.mark.parametrize("storage", ["uint8", "float8_e8m0fnu"])
def test_mx_e8m0_scales(tmp_path, run_audit, storage):
    q, e8 = quantize_mx(torch.randn(64, 256))
    scale = e8 if storage == "uint8" else e8.view(torch.float8_e8m0fnu)
    r = run_audit(save_st(tmp_path / "m.safetensors", {"l.weight": q, "l.weight_scale": scale}))
    t = tensor_of(r, "l.weight")
    assert t["scale"]["granularity"]["name"] == "mx-e8m0" and t["scale"]["read_as"] == "e8m0"
    _no_warnings(r)


def test_nested_torch_state_dict_and_optimizer(tmp_path, run_audit):
    q, s = clean_rowwise()
    obj = {"model": {"enc": {"l.weight": q, "l.weight_scale": s}}, "optimizer": {"state": {0: {"exp_avg": torch.zeros(3)}}},
           "step": 7}
    r = run_audit(save_pt(tmp_path / "ck.pt", obj))
    t = tensor_of(r, "model.enc.l.weight")
    assert t["scale"]["name"] == "model.enc.l.weight_scale"
    assert tensor_of(r, "optimizer.state.0.exp_avg")["role"] == "other"
    assert r["files"][0]["kind"] == "torch-zip"
    _no_warnings(r)


def test_legacy_torch_format(tmp_path, run_audit):
    # torch cannot load float8 tensors from its legacy format (see the xfail
    # below): FP8 bytes stored as uint8 with --bytes-format are what it can hold
    c = plant(codes((64, 32)), 0x7F, 3)
    r = run_audit(save_pt(tmp_path / "old.pth", {"l.weight": torch.from_numpy(c), "l.weight_scale": torch.ones(64, 1)},
                          legacy=True), bytes_format="e4m3fn")
    assert r["files"][0]["kind"] == "torch-legacy"
    assert codes_of(r, "l.weight") == {"NAN_CODES": ("error", 3)}


def test_legacy_torch_format_with_float8_is_read(tmp_path, run_audit):
    # torch itself cannot load it (the xfail below); fp8check reads the storages from the offsets the file gives
    q, s = clean_rowwise()
    c = plant(q.view(torch.uint8).numpy().copy(), 0x7F, 5)
    r = run_audit(save_pt(tmp_path / "old.pth", {"l.weight": fp8(c), "l.weight_scale": s}, legacy=True))
    assert r["files"][0]["status"] == "ok" and r["files"][0]["kind"] == "torch-legacy"
    t = tensor_of(r, "l.weight")
    assert t["stats"]["histogram"] == np.bincount(c.reshape(-1), minlength=256).tolist()
    assert t["scale"]["name"] == "l.weight_scale" and codes_of(r, "l.weight")["NAN_CODES"] == ("error", 5)


@pytest.mark.xfail(strict=True, reason="torch's legacy (non-zip) torch.save format cannot load float8 tensors: "
                                       "'UntypedStorage' has no attribute 'dtype' (pytorch/pytorch#169763)")
def test_torch_loads_float8_from_its_legacy_format(tmp_path):
    p = save_pt(tmp_path / "old.pth", {"w": torch.zeros(4, dtype=torch.float8_e4m3fn)}, legacy=True)
    torch.load(p, weights_only=True)


def test_sharded_index_with_scale_in_another_shard(tmp_path, run_audit):
    q, s = clean_rowwise()
    save_st(tmp_path / "model-00001-of-00002.safetensors", {"l.weight": q})
    save_st(tmp_path / "model-00002-of-00002.safetensors", {"l.weight_scale": s})
    write_json(tmp_path / "model.safetensors.index.json", {"metadata": {}, "weight_map": {
        "l.weight": "model-00001-of-00002.safetensors", "l.weight_scale": "model-00002-of-00002.safetensors"}})
    save_st(tmp_path / "consolidated.safetensors", {"l.weight": q})  # not in the index: skipped
    r = run_audit(tmp_path)
    t = tensor_of(r, "l.weight")
    assert t["scale"]["file"].endswith("model-00002-of-00002.safetensors")
    assert [f["status"] for f in r["files"] if f["path"].endswith("consolidated.safetensors")] == ["skipped"]
    _no_warnings(r)


def test_moe_experts_rowwise_per_expert(tmp_path, run_audit):
    c = codes((4, 32, 64))
    s = torch.rand(4, 32, 1) + 0.5
    r = run_audit(save_st(tmp_path / "m.safetensors", {"experts.w13_weight": fp8(c), "experts.w13_weight_scale": s}))
    g = tensor_of(r, "experts.w13_weight")["scale"]["granularity"]
    assert g["name"] == "rowwise" and g["batches"] == 4
    _no_warnings(r)


# -- planted hazards: exact codes and counts ----------------------------------------


def test_nan_codes_counted_exactly(tmp_path, run_audit):
    c = plant(plant(codes((128, 256)), 0x7F, 5, seed=1), 0xFF, 3, seed=2)
    assert np.count_nonzero((c & 0x7F) == 0x7F) == 8
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": fp8(c), "w_scale": torch.tensor(0.01)}))
    assert codes_of(r, "w")["NAN_CODES"] == ("error", 8)
    assert tensor_of(r, "w")["stats"]["nan"] == 8
    assert r["summary"]["exit_code"] == 1


def test_inf_codes_in_e5m2(tmp_path, run_audit):
    c = plant(codes((64, 64), "e5m2"), 0x7C, 4)
    plant(c, 0xFC, 2, seed=7, avoid=c == 0x7C)
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": fp8(c, "e5m2"), "w_scale": torch.tensor(1.0)}))
    got = codes_of(r, "w")
    assert got["INF_CODES"] == ("error", 6)
    assert "NAN_CODES" not in got


def test_negative_zero_hazard_is_counted_and_explained_for_fnuz_targets(tmp_path, run_audit):
    c = plant(codes((64, 128)), 0x80, 11)
    p = save_st(tmp_path / "m.safetensors", {"w": fp8(c), "w_scale": torch.tensor(0.5)})
    assert codes_of(run_audit(p), "w") == {"NEG_ZERO_FNUZ_HAZARD": ("info", 11)}
    r = run_audit(p, targets=("mi300", "h100"))
    beyond = int(np.count_nonzero(np.abs(c.view(ml_dtypes.float8_e4m3fn).astype(np.float64)) > 240))
    assert codes_of(r, "w") == {"NEG_ZERO_FNUZ_HAZARD": ("info", 11), "FNUZ_PLAIN_CAST": ("info", beyond)}
    mi300, h100 = r["portability"]
    assert any("11 bytes 0x80" in x and "NaN" in x for x in mi300["reasons"])
    assert not any("0x80" in x for x in h100["reasons"])


def test_fnuz_range_unscaled_values_beyond_240(tmp_path, run_audit):
    pool = finite_nonzero_codes("e4m3fn", max_magnitude=0x77)  # |v| <= 240
    c = codes((32, 64), pool=pool)
    plant(c, 0x7A, 6, seed=3)  # 320
    plant(c, 0xF8, 4, seed=4, avoid=c == 0x7A)  # -256
    p = save_st(tmp_path / "m.safetensors", {"act": fp8(c)})
    r = run_audit(p, targets=("mi300",))
    got = codes_of(r, "act")
    assert got["FNUZ_RANGE"] == ("error", 10)
    assert got["SCALE_MISSING"] == ("warning", 1)  # no config, no other scaled FP8 tensor
    v = r["portability"][0]
    assert v["verdict"] == "cannot_run" and "act" in " ".join(v["reasons"])
    assert codes_of(run_audit(p), "act")["FNUZ_RANGE"] == ("info", 10)


def test_fnuz_range_silent_when_the_scale_can_double(tmp_path, run_audit):
    c = plant(codes((32, 64)), 0x7E, 3)  # 448 is fine: the scale doubles
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": fp8(c), "w_scale": torch.tensor(0.25)}),
                  targets=("mi300",))
    assert "FNUZ_RANGE" not in codes_of(r, "w")
    assert r["portability"][0]["verdict"] == "runs_after_conversion"
    assert tensor_of(r, "w")["conversions"]["e4m3fnuz"]["factor"] == 2.0


def test_fnuz_range_when_a_fp16_scale_cannot_double(tmp_path, run_audit):
    pool = finite_nonzero_codes("e4m3fn", max_magnitude=0x77)
    c = plant(codes((32, 64), pool=pool), 0x79, 5)  # 288
    s = torch.full((32, 1), 40000.0, dtype=torch.float16)  # x2 overflows fp16
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": fp8(c), "w_scale": s}), targets=("mi300",),
                  dequant_dtype="float32")
    v = np.abs(c.view(ml_dtypes.float8_e4m3fn).astype(np.float64))
    # vLLM and Quark double every scale in place: 80000 is Inf in fp16, for all 2048 values; and 40000 x |v|
    # reaches 2^16 for |v| >= 1.6384, weights no trained model holds
    assert codes_of(r, "w") == {"FNUZ_RANGE": ("error", 5), "FNUZ_SCALE_OVERFLOW": ("error", c.size),
                                "FNUZ_PLAIN_CAST": ("info", 5),
                                "WEIGHT_MAGNITUDE": ("error", int(np.count_nonzero(v * 40000.0 >= 65536)))}


def test_ocp_range_for_fnuz_data(tmp_path, run_audit):
    # fnuz's lowest normal binade has a bit more than e4m3fn's subnormals: keep out of it
    c = codes((16, 64), "e4m3fnuz", pool=finite_nonzero_codes("e4m3fnuz", min_magnitude=0x10))
    plant(c, 0x7F, 2, seed=5)  # 240: needs scale / 2 ...
    plant(c, 0x01, 3, seed=6, avoid=c == 0x7F)  # 2^-10: ... which rules out keeping the scale
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": fp8(c, "e4m3fnuz")}), targets=("h100",))
    got = codes_of(r, "w")
    # scale / 2 is not available (no scale) and 2^-10 has no e4m3fn code at the same scale
    assert got["OCP_RANGE"] == ("error", 3)
    assert r["portability"][0]["verdict"] == "cannot_run"


def test_saturation_fires_on_clipped_weights_only(tmp_path, run_audit):
    w = torch.randn(128, 512, generator=torch.Generator().manual_seed(3))
    q_ok, s_ok = quantize(w, "e4m3fn", "rowwise")
    q_clip, s_clip = quantize(w, "e4m3fn", "rowwise", clip=0.25)
    r = run_audit(save_st(tmp_path / "m.safetensors", {"ok.weight": q_ok, "ok.weight_scale": s_ok,
                                                       "clip.weight": q_clip, "clip.weight_scale": s_clip}))
    assert "SATURATION" not in codes_of(r, "ok.weight")
    hist = np.array(tensor_of(r, "clip.weight")["stats"]["histogram"])
    expected = int(hist[0x7E] + hist[0xFE]) - 128  # one amax per row may sit at max
    independent = int(torch.count_nonzero(q_clip.float().abs() == 448))
    assert expected + 128 == independent
    assert codes_of(r, "clip.weight")["SATURATION"] == ("warning", expected)


def test_saturation_threshold_edges(tmp_path, run_audit):
    n = 100_000
    pool = finite_nonzero_codes("e4m3fn", exclude=(0x7D, 0xFD))  # nothing one step below ±max
    base = codes((n,), pool=pool)
    # k = planted - 1 (one scale element); k / n exactly at the share: silent; one more: fires
    at = plant(base.copy(), 0x7E, int(n * 1e-3) + 1, seed=2)
    over = plant(base.copy(), 0x7E, int(n * 1e-3) + 2, seed=2)
    # the same excess, but the bin one step below holds more: a smooth tail, not a pile-up
    smooth = plant(over.copy(), 0x7D, 102, seed=3, avoid=over == 0x7E)
    few = plant(base[:1000].copy(), 0x7E, 16, seed=4)  # k = 15 < 16, share 1.5%
    r = run_audit(save_st(tmp_path / "m.safetensors", {
        "at": fp8(at), "at_scale": torch.tensor(1.0), "over": fp8(over), "over_scale": torch.tensor(1.0),
        "smooth": fp8(smooth), "smooth_scale": torch.tensor(1.0), "few": fp8(few), "few_scale": torch.tensor(1.0)}))
    assert "SATURATION" not in codes_of(r, "at")
    assert codes_of(r, "over")["SATURATION"] == ("warning", 101)
    assert "SATURATION" not in codes_of(r, "smooth")
    assert "SATURATION" not in codes_of(r, "few")


def test_underflow_needs_zeros_and_subnormals(tmp_path, run_audit):
    n = 10_000
    sub = np.array([c for c in range(1, 8)] + [0x80 | c for c in range(1, 8)], dtype=np.uint8)
    under = codes((n,))
    zero_pos = np.zeros(n, bool)
    zero_pos[:200] = True  # 2% zeros
    under[zero_pos] = 0
    under[200:400] = np.resize(sub, 200)  # 2% subnormals
    sparse = codes((n,))
    sparse[: n // 2] = 0  # 50% structural zeros, no subnormals
    r = run_audit(save_st(tmp_path / "m.safetensors", {
        "under": fp8(under), "under_scale": torch.tensor(1.0),
        "sparse": fp8(sparse), "sparse_scale": torch.tensor(1.0)}))
    assert codes_of(r, "under")["UNDERFLOW"] == ("warning", 200)
    assert "UNDERFLOW" not in codes_of(r, "sparse")
    st = tensor_of(r, "under")["stats"]
    assert st["subnormals"] == 200 and st["zeros"] == 200


def test_scale_hazards(tmp_path, run_audit):
    c = fp8(codes((8, 64)))
    s_nonfinite = torch.ones(8, 1)
    s_nonfinite[1] = float("nan")
    s_nonfinite[2] = float("inf")
    s_nonfinite[3] = -float("inf")
    s_nonpos = torch.ones(8, 1)
    s_nonpos[0] = 0.0
    s_nonpos[5] = -2.0
    s_sub = torch.ones(8, 1)
    s_sub[4] = 1e-40  # float32 subnormal
    s_bf16_sub = torch.ones(8, 1, dtype=torch.bfloat16)
    s_bf16_sub[6] = 1e-39
    r = run_audit(save_st(tmp_path / "m.safetensors", {
        "a": c, "a_scale": s_nonfinite, "b": c, "b_scale": s_nonpos, "c": c, "c_scale": s_sub,
        "d": c, "d_scale": s_bf16_sub, "e": c, "e_scale": torch.ones(8, 1, dtype=torch.int32)}))
    assert codes_of(r, "a") == {"SCALE_NONFINITE": ("error", 3)}
    assert codes_of(r, "b") == {"SCALE_NONPOSITIVE": ("error", 2)}
    assert codes_of(r, "c") == {"SCALE_SUBNORMAL": ("warning", 1)}
    assert codes_of(r, "d") == {"SCALE_SUBNORMAL": ("warning", 1)}
    assert warned(r, "e") == {"SCALE_DTYPE": ("error", 1)}
    # an unusable scale leaves the data unscaled for a fnuz conversion: values beyond ±240 are noted
    assert codes_of(r, "e")["FNUZ_RANGE"][0] == "info"


def test_e8m0_scale_hazards(tmp_path, run_audit):
    c = fp8(codes((4, 128)))
    e8 = torch.full((4, 4), 127, dtype=torch.uint8)
    e8[0, 0] = 0xFF  # NaN
    e8[1, 1] = 0x00  # 2^-127: subnormal in float32
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": c, "w_scale": e8}))
    # the 32 codes of row 1 under scale (1, 1), nonzero ones: dequantized to zero by every loader
    zeroed = int(np.count_nonzero(c.view(torch.uint8)[1, 32:64].numpy() & 0x7F))
    assert codes_of(r, "w") == {"SCALE_NONFINITE": ("error", 1), "SCALE_SUBNORMAL": ("warning", 1),
                                "BLOCK_ZEROED": ("error", zeroed)} and zeroed > 0


def test_scale_shape(tmp_path, run_audit):
    c = fp8(codes((256, 512)))
    r = run_audit(save_st(tmp_path / "m.safetensors", {
        "bad.weight": c, "bad.weight_scale_inv": torch.ones(3, 5),
        "odd.weight": c, "odd.weight_scale_inv": torch.ones(256, 3),  # 512/3 is no power-of-two group
        "good.weight": c, "good.weight_scale_inv": torch.ones(2, 4)}))
    assert warned(r, "bad.weight") == {"SCALE_SHAPE": ("error", 15)}
    assert warned(r, "odd.weight") == {"SCALE_SHAPE": ("error", 768)}
    assert codes_of(r, "good.weight") == {}


def test_scale_missing_severity(tmp_path, run_audit):
    c = fp8(codes((16, 16)))
    # every scale and the quantization config dropped: no loader dequantizes it (it was a warning before issue 33)
    save_st(tmp_path / "a" / "model.safetensors", {"x.weight": c})
    write_json(tmp_path / "a" / "config.json", {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"})
    assert warned(run_audit(tmp_path / "a"), "x.weight") == {"SCALE_MISSING": ("error", 1)}
    # a file alone: nothing says what it was meant to be, so the missing scale stays a warning
    alone = save_st(tmp_path / "l" / "m.safetensors", {"x.weight": c})
    assert warned(run_audit(alone), "x.weight") == {"SCALE_MISSING": ("warning", 1)}
    # a model saved in an FP8 dtype, as its config says: the stored values are the weights
    save_st(tmp_path / "f" / "model.safetensors", {"x.weight": c})
    write_json(tmp_path / "f" / "config.json", {"torch_dtype": "float8_e4m3fn"})
    assert warned(run_audit(tmp_path / "f"), "x.weight") == {"SCALE_MISSING": ("warning", 1)}
    # a tensor that is no weight (an activation, a cache) is not read by a model loader
    act = save_st(tmp_path / "x" / "m.safetensors", {"act": c})
    assert warned(run_audit(act), "act") == {"SCALE_MISSING": ("warning", 1)}
    mixed = save_st(tmp_path / "b" / "m.safetensors", {"x.weight": c, "y.weight": c, "y.weight_scale": torch.tensor(1.0)})
    assert warned(run_audit(mixed), "x.weight") == {"SCALE_MISSING": ("error", 1)}
    save_st(tmp_path / "c" / "model.safetensors", {"x.weight": c})
    write_json(tmp_path / "c" / "config.json", DEEPSEEK_CONFIG)
    assert warned(run_audit(tmp_path / "c"), "x.weight") == {"SCALE_MISSING": ("error", 1)}


def test_dequant_overflow_tensorwise_exact_count(tmp_path, run_audit):
    pool = finite_nonzero_codes("e4m3fn", max_magnitude=0x6F)  # |v| <= 120
    c = codes((32, 32), pool=pool)
    plant(c, 0x7E, 7, seed=2)  # 448 x 200 = 89600 >= 65520
    plant(c, 0xF0, 5, seed=3, avoid=c == 0x7E)  # -256 x 200 = 51200 < 65520
    p = save_st(tmp_path / "m.safetensors", {"w": fp8(c), "w_scale": torch.tensor(200.0)})
    assert codes_of(run_audit(p, dequant_dtype="float16"), "w") == {"DEQUANT_OVERFLOW": ("error", 7)}
    # bf16 holds it, but 448 x 200 = 89600 is beyond 2^16, a weight no trained model holds; -256 x 200 is not
    assert codes_of(run_audit(p), "w") == {"WEIGHT_MAGNITUDE": ("error", 7)}


def test_dequant_overflow_per_block_not_a_bound(tmp_path, run_audit):
    c = np.full((256, 256), 0x38, dtype=np.uint8)  # 1.0 everywhere
    c[0, 0] = 0x7E  # 448 in block (0, 0), scale 100: 44800 fits fp16
    c[200, 200] = 0x7E  # 448 in block (1, 1), scale 1000: overflows
    c[130, 5] = 0x70  # 256 in block (1, 0), scale 1000: 256000 overflows
    s = torch.tensor([[100.0, 1.0], [1000.0, 1000.0]])
    p = save_st(tmp_path / "model.safetensors", {"w.weight": fp8(c), "w.weight_scale_inv": s})
    write_json(tmp_path / "config.json", {**DEEPSEEK_CONFIG, "torch_dtype": "float16"})
    r = run_audit(tmp_path)
    # every 1.0 x 1000 = 1000 fits; only the two large codes under scale 1000 overflow
    assert codes_of(r, "w.weight") == {"DEQUANT_OVERFLOW": ("error", 2)}
    assert r["checkpoints"][0]["dequant_dtype"] == "float16"
    del p


def test_dequant_overflow_threshold_is_max_plus_half_ulp(tmp_path, run_audit):
    # 0x40 = 2.0; fp16 overflows at 65520 = 2 x 32760
    c = np.full((1, 8), 0x40, dtype=np.uint8)
    below = save_st(tmp_path / "a.safetensors", {"w": fp8(c), "w_scale": torch.tensor(32759.0)})
    at = save_st(tmp_path / "b.safetensors", {"w": fp8(c), "w_scale": torch.tensor(32760.0)})
    assert torch.tensor(65518.0, dtype=torch.float16).isfinite() and not torch.tensor(65520.0).half().isfinite()
    assert codes_of(run_audit(below, dequant_dtype="float16"), "w") == {}
    assert codes_of(run_audit(at, dequant_dtype="float16"), "w") == {"DEQUANT_OVERFLOW": ("error", 8)}


def test_target_format_and_ambiguous_and_index_missing(tmp_path, run_audit):
    e5 = fp8(codes((8, 8), "e5m2"), "e5m2")
    save_st(tmp_path / "model-1.safetensors", {"w.weight": e5, "w.weight_scale": torch.tensor(1.0),
                                               "w.weight_scale_inv": torch.tensor(1.0)})
    write_json(tmp_path / "model.safetensors.index.json", {"weight_map": {
        "w.weight": "model-1.safetensors", "w.weight_scale": "model-1.safetensors", "ghost": "model-1.safetensors"}})
    r = run_audit(tmp_path, targets=("e4m3fn",))
    got = codes_of(r, "w.weight")
    assert got["TARGET_FORMAT"] == ("error", 64)
    assert got["SCALE_AMBIGUOUS"] == ("warning", 2)
    assert tensor_of(r, "w.weight")["scale"]["name"] == "w.weight_scale_inv"
    assert codes_of(r, "ghost") == {"INDEX_MISSING_TENSOR": ("error", 1)}
    # a tensor the index names was not there to read: no verdict, the reason first, then what was read
    v = r["portability"][0]
    assert v["verdict"] == "unknown" and not v["complete"]
    assert v["reasons"][:2] == ["1 tensors the index names but their shard lacks", "of what was read: cannot run"]


def test_scale_not_pow2_when_config_declares_ue8m0(tmp_path, run_audit):
    q, s = quantize(torch.randn(256, 256), "e4m3fn", "block")
    s_pow2 = torch.exp2(torch.ceil(torch.log2(s)))
    save_st(tmp_path / "model.safetensors", {"a.weight": q, "a.weight_scale_inv": s, "b.weight": q,
                                             "b.weight_scale_inv": s_pow2})
    write_json(tmp_path / "config.json", {"quantization_config": {**DEEPSEEK_CONFIG["quantization_config"],
                                                                  "scale_fmt": "ue8m0"}})
    r = run_audit(tmp_path)
    assert codes_of(r, "a.weight")["SCALE_NOT_POW2"] == ("warning", 4)
    assert "SCALE_NOT_POW2" not in codes_of(r, "b.weight")


# -- bytes stored as integers -----------------------------------------------------------


def test_uint8_bytes_are_fp8_only_with_a_config_or_flag(tmp_path, run_audit):
    c = plant(codes((16, 32)), 0x7F, 2)
    u8 = torch.from_numpy(c)
    save_st(tmp_path / "model.safetensors", {"l.weight": u8, "l.weight_scale": torch.ones(16, 1)})
    r = run_audit(tmp_path)
    t = tensor_of(r, "l.weight")
    assert t["role"] == "bytes" and codes_of(r, "l.weight") == {"BYTES_FORMAT_UNKNOWN": ("info", 1)}
    r = run_audit(tmp_path, bytes_format="e4m3fn")
    assert codes_of(r, "l.weight") == {"NAN_CODES": ("error", 2)}
    assert tensor_of(r, "l.weight")["format_source"] == "--bytes-format"
    write_json(tmp_path / "config.json", DEEPSEEK_CONFIG)
    r = run_audit(tmp_path)
    assert tensor_of(r, "l.weight")["format"] == "e4m3fn"
    # int8 (TensorRT-LLM's spelling) reads the same bytes
    # one scale: the config declares 128x128 blocks for every weight, and [16, 32] is one block
    save_st(tmp_path / "model.safetensors", {"l.weight": u8.view(torch.int8),
                                             "l.weights_scaling_factor": torch.ones(1, 1)})
    r = run_audit(tmp_path)
    assert codes_of(r, "l.weight") == {"NAN_CODES": ("error", 2)}


def test_one_byte_tensors_without_scale_are_not_fp8(tmp_path, run_audit):
    r = run_audit(save_st(tmp_path / "m.safetensors", {"ids": torch.arange(200, dtype=torch.uint8),
                                                      "mask": torch.ones(10, dtype=torch.int8)}))
    assert {t["role"] for t in r["tensors"]} == {"other"}
    assert r["summary"]["fp8_tensors"] == 0


def test_nvfp4_packed_weights_are_not_fp8(tmp_path, run_audit):
    packed = torch.randint(0, 256, (64, 32), dtype=torch.uint8)  # 2 fp4 per byte: in = 64
    block_scale = torch.ones(64, 4).to(torch.float8_e4m3fn)  # one per 16 elements
    save_st(tmp_path / "model.safetensors", {"l.weight": packed, "l.weight_scale": block_scale,
                                             "l.weight_scale_2": torch.tensor(0.5), "l.input_scale": torch.tensor(1.0)})
    write_json(tmp_path / "hf_quant_config.json", {"quantization": {"quant_algo": "NVFP4"}})
    r = run_audit(tmp_path)
    assert tensor_of(r, "l.weight")["role"] == "packed"
    assert tensor_of(r, "l.weight_scale")["role"] == "scale"  # an FP8-typed scale is not FP8 data
    assert r["summary"]["fp8_tensors"] == 0
    _no_warnings(r)


def test_statistics_from_the_histogram(tmp_path, run_audit):
    c = np.array([0x00, 0x80, 0x01, 0x81, 0x08, 0x7E, 0xFE, 0x7F, 0x38, 0x38], dtype=np.uint8)
    r = run_audit(save_st(tmp_path / "m.safetensors", {"w": fp8(c), "w_scale": torch.tensor(1.0)}))
    st = tensor_of(r, "w")["stats"]
    assert st["codes_used"] == 9
    assert (st["nan"], st["zeros"], st["neg_zeros"], st["subnormals"], st["saturated"]) == (1, 2, 1, 2, 2)
    assert (st["min"], st["max"]) == (-448.0, 448.0)
    assert st["min_abs_nonzero"] == 2.0 ** -9
    assert st["histogram"][0x38] == 2 and st["subnormal_share"] == 0.2
    assert math.isclose(st["zero_share"], 0.2)


def test_torchao_flattened_tensors_pair(tmp_path, run_audit):
    q, s = quantize(torch.randn(32, 64), "e4m3fn", "rowwise")
    r = run_audit(save_st(tmp_path / "m.safetensors", {"l._weight_qdata": q, "l._weight_scale": s,
                                                      "m.qdata": q, "m.scale": s},
                          metadata={"tensor_data": '{"l._weight": {"_type": "Float8Tensor"}}'}))
    assert tensor_of(r, "l._weight_qdata")["scale"]["name"] == "l._weight_scale"
    assert tensor_of(r, "m.qdata")["scale"]["name"] == "m.scale"
    assert r["files"][0]["metadata"]["tensor_data"].startswith('{"l._weight"')
    _no_warnings(r)


def test_pages_are_released_only_inside_the_files_own_mapping(tmp_path, run_audit):
    # A legacy torch file is read into ordinary memory: dropping its pages after
    # the first pass would zero them, and the exact overflow pass re-reads them.
    c = np.full((256, 256), 0x38, dtype=np.uint8)  # 1.0
    c[200, 200] = 0x7E  # 448 x 1000 overflows fp16
    s = torch.tensor([[1.0, 1.0], [1.0, 1000.0]])
    p = save_pt(tmp_path / "old.pth", {"w.weight": torch.from_numpy(c), "w.weight_scale_inv": s}, legacy=True)
    r = run_audit(p, bytes_format="e4m3fn", dequant_dtype="float16")
    assert codes_of(r, "w.weight") == {"DEQUANT_OVERFLOW": ("error", 1)}

"""fp8check convert: fn -> fnuz done right, checked against torch's own decoding,
and the verifier catches the converters that get it wrong."""

import json
import os

import numpy as np
import pytest
import torch
from safetensors import safe_open

from checkpoint_builders import (DEEPSEEK_CONFIG, codes, finite_nonzero_codes, fp8, plant, quantize, save_pt, save_st,
                            write_json)
from fp8check.checkpoints import dtypes, targets
from fp8check.cli import main


def convert(capsys, src, dst, *args):
    rc = main(["convert", str(src), str(dst), *map(str, args), "-q", "--json", str(dst) + ".json"])
    err = capsys.readouterr().err
    report = json.loads(open(str(dst) + ".json").read()) if os.path.exists(str(dst) + ".json") else None
    return rc, err, report


def load(path):
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def dequant(q, scale, block=128):
    """x = q * scale in float64 with torch's own fp8 decoding (not fp8check's tables)."""
    v = q.to(torch.float64)
    s = scale.to(torch.float64)
    if s.dim() == 2 and s.shape != v.shape and s.shape[1] != 1:
        s = s.repeat_interleave(block, 0).repeat_interleave(block, 1)[: v.shape[0], : v.shape[1]]
    return v * s


def same_values(a, b):
    """Equal values, NaN by position; -0 and +0 compared separately by the caller."""
    return torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


@pytest.fixture
def deepseek(tmp_path):
    q, s = quantize(torch.randn(300, 520, generator=torch.Generator().manual_seed(1)), "e4m3fn", "block")
    c = q.view(torch.uint8).numpy().copy()
    nonzero = (c & 0x7F) != 0
    plant(c, 0x7F, 3, seed=11, avoid=~nonzero)
    plant(c, 0xFF, 2, seed=12, avoid=~nonzero | (c == 0x7F))
    plant(c, 0x80, 4, seed=13, avoid=~nonzero | ((c & 0x7F) == 0x7F))
    src = tmp_path / "src"
    save_st(src / "model.safetensors", {
        "l.weight": fp8(c), "l.weight_scale_inv": s, "l.input_scale": torch.tensor(0.0123),
        "attn.k_proj.k_scale": torch.tensor(0.5), "attn.v_proj.v_scale": torch.tensor(-1.0),
        "norm.weight": torch.randn(520).to(torch.bfloat16)})
    write_json(src / "config.json", DEEPSEEK_CONFIG)
    return src, c, s


def test_fn_to_fnuz_is_exact_and_keeps_nan(tmp_path, capsys, deepseek):
    src, c, s = deepseek
    rc, err, report = convert(capsys, src, tmp_path / "fnuz.safetensors", "--to", "e4m3fnuz")
    assert rc == 0, err
    a, b = load(src / "model.safetensors"), load(tmp_path / "fnuz.safetensors")
    assert b["l.weight"].dtype == torch.float8_e4m3fnuz
    # scales doubled exactly, activation and KV scales as serving stacks do, -1 ("absent") kept
    assert torch.equal(b["l.weight_scale_inv"], a["l.weight_scale_inv"] * 2)
    assert b["l.input_scale"].item() == a["l.input_scale"].item() * 2
    assert b["attn.k_proj.k_scale"].item() == 1.0 and b["attn.v_proj.v_scale"].item() == -1.0
    assert torch.equal(b["norm.weight"].view(torch.int16), a["norm.weight"].view(torch.int16))
    # every dequantized value equal, decoded by torch itself
    va = dequant(a["l.weight"], a["l.weight_scale_inv"])
    vb = dequant(b["l.weight"], b["l.weight_scale_inv"])
    assert same_values(va, vb)
    codes_b = b["l.weight"].view(torch.uint8).numpy()
    assert np.all(codes_b[(c & 0x7F) == 0x7F] == 0x80)  # fn NaN -> fnuz NaN, not ±240
    assert np.all(codes_b[c == 0x80] == 0x00)  # -0 -> 0, not the fnuz NaN
    t = {x["name"]: x for x in report["tensors"]}["l.weight"]
    assert (t["nan_kept"], t["neg_zero_to_zero"], t["factor"], t["exact"]) == (5, 4, 2.0, True)


def test_round_trip_back_to_fn(tmp_path, capsys, deepseek):
    src, c, s = deepseek
    assert convert(capsys, src, tmp_path / "fnuz.safetensors", "--to", "e4m3fnuz")[0] == 0
    rc, err, report = convert(capsys, tmp_path / "fnuz.safetensors", tmp_path / "back.safetensors", "--to", "e4m3fn")
    assert rc == 0, err
    a, z = load(src / "model.safetensors"), load(tmp_path / "back.safetensors")
    assert torch.equal(z["l.weight_scale_inv"], a["l.weight_scale_inv"])
    assert z["l.input_scale"].item() == a["l.input_scale"].item()
    back = z["l.weight"].view(torch.uint8).numpy()
    lost = ((c & 0x7F) == 0x7F) | (c == 0x80)  # NaN sign and -0 do not survive fnuz
    assert np.array_equal(back[~lost], c[~lost])
    assert np.all(back[(c & 0x7F) == 0x7F] == 0x7F) and np.all(back[c == 0x80] == 0x00)


def _naive_table(src, dst, factor):
    # the converter deployers write by hand: reinterpret the bytes, double the scale
    table = np.arange(256, dtype=np.uint8)
    return table, np.ones(256, bool), np.zeros(256, bool)


_TABLE = targets.conversion_table


def _no_rescale_table(src, dst, factor):
    # re-encodes each value exactly but the scale is still doubled: every value halves
    table, exact, dropped = _TABLE(src, dst, 1.0)
    return table, exact, dropped


@pytest.mark.parametrize("bug,expected", [(_naive_table, 9), (_no_rescale_table, None)])
def test_the_verifier_catches_wrong_converters(tmp_path, capsys, monkeypatch, deepseek, bug, expected):
    src, c, s = deepseek
    monkeypatch.setattr(targets, "conversion_table", bug)
    rc, err, report = convert(capsys, src, tmp_path / "bad.safetensors", "--to", "e4m3fnuz")
    assert rc == 1
    t = {x["name"]: x for x in report["tensors"]}["l.weight"]
    assert not t["exact"] and "dequantized values differ" in t["reason"]
    nonzero = int(np.count_nonzero(((c & 0x7F) != 0) & ((c & 0x7F) != 0x7F)))
    assert t["mismatches"] == (expected if expected is not None else nonzero)
    assert "not exact: l.weight" in err


def test_values_beyond_240_without_scale_are_reported_not_hidden(tmp_path, capsys):
    c = codes((16, 32), pool=finite_nonzero_codes("e4m3fn", max_magnitude=0x77))
    plant(c, 0x7C, 3)  # 384
    src = save_st(tmp_path / "src.safetensors", {"act": fp8(c)})
    rc, err, report = convert(capsys, src, tmp_path / "dst.safetensors", "--to", "e4m3fnuz")
    assert rc == 1
    t = report["tensors"][0]
    assert t["mismatches"] == 3 and "±240" in t["reason"] and t["factor"] == 1.0
    out = load(tmp_path / "dst.safetensors")["act"]
    assert torch.equal(out.to(torch.float64)[torch.from_numpy(c == 0x7C)], torch.full((3,), 240.0, dtype=torch.float64))
    ok = torch.from_numpy(c != 0x7C)
    assert torch.equal(out.to(torch.float64)[ok], fp8(c).to(torch.float64)[ok])


def test_fp16_scale_that_cannot_double_keeps_the_scale(tmp_path, capsys):
    c = codes((8, 64), pool=finite_nonzero_codes("e4m3fn", max_magnitude=0x77))
    s = torch.full((8, 1), 40000.0, dtype=torch.float16)
    src = save_st(tmp_path / "src.safetensors", {"w.weight": fp8(c), "w.weight_scale": s})
    rc, err, report = convert(capsys, src, tmp_path / "dst.safetensors", "--to", "e4m3fnuz")
    assert rc == 0, err
    b = load(tmp_path / "dst.safetensors")
    assert torch.equal(b["w.weight_scale"], s)
    assert same_values(dequant(b["w.weight"], s), dequant(fp8(c), s))


def test_fnuz_to_fn_that_cannot_be_exact(tmp_path, capsys):
    c = codes((16, 64), "e4m3fnuz", pool=finite_nonzero_codes("e4m3fnuz", min_magnitude=0x10))
    plant(c, 0x7F, 2, seed=5)
    plant(c, 0x01, 3, seed=6, avoid=c == 0x7F)
    src = save_st(tmp_path / "src.safetensors", {"w": fp8(c, "e4m3fnuz")})
    rc, err, report = convert(capsys, src, tmp_path / "dst.safetensors", "--to", "e4m3fn")
    assert rc == 1 and report["tensors"][0]["mismatches"] == 3


def test_e5m2_needs_its_own_counterpart(tmp_path, capsys):
    c = codes((8, 32), "e5m2")
    src = save_st(tmp_path / "src.safetensors", {"w": fp8(c, "e5m2"), "w_scale": torch.tensor(3.0)})
    rc = main(["convert", src, str(tmp_path / "a.safetensors"), "--to", "e4m3fnuz", "-q"])
    assert rc == 2 and "--to fnuz" in capsys.readouterr().err
    rc, err, report = convert(capsys, src, tmp_path / "b.safetensors", "--to", "fnuz")
    assert rc == 0, err
    b = load(tmp_path / "b.safetensors")
    assert b["w"].dtype == torch.float8_e5m2fnuz and b["w_scale"].item() == 6.0
    assert same_values(dequant(b["w"], b["w_scale"]), dequant(fp8(c, "e5m2"), torch.tensor(3.0)))


def test_e5m2_inf_cannot_reach_fnuz(tmp_path, capsys):
    c = plant(codes((8, 32), "e5m2"), 0x7C, 2)
    src = save_st(tmp_path / "src.safetensors", {"w": fp8(c, "e5m2"), "w_scale": torch.tensor(1.0)})
    rc, err, report = convert(capsys, src, tmp_path / "b.safetensors", "--to", "e5m2fnuz")
    t = {x["name"]: x for x in report["tensors"]}["w"]
    assert rc == 1 and t["mismatches"] == 2 and not t["exact"]


def test_mx_tensors_are_kept_as_they_are(tmp_path, capsys):
    # MX is OCP: e8m0 scales over e4m3fn elements. No loader reads MX blocks of fnuz elements, and a target
    # without MX matmuls runs MXFP8 dequantized at load: convert keeps the tensor and its scale byte for byte.
    c = codes((4, 64), pool=finite_nonzero_codes("e4m3fn", max_magnitude=0x77))
    e8 = torch.tensor([[120, 130], [127, 1], [200, 0], [254, 100]], dtype=torch.uint8)
    src = save_st(tmp_path / "src.safetensors", {"w.weight": fp8(c), "w.weight_scale": e8.view(torch.float8_e8m0fnu)})
    rc, err, report = convert(capsys, src, tmp_path / "dst.safetensors", "--to", "e4m3fnuz")
    assert rc == 0, err
    t = {x["name"]: x for x in report["tensors"]}["w.weight"]
    assert t["action"] == "kept" and "MX layout" in t["reason"] and report["summary"]["kept"] == 1
    b = load(tmp_path / "dst.safetensors")
    assert b["w.weight"].dtype == torch.float8_e4m3fn
    assert torch.equal(b["w.weight"].view(torch.uint8), fp8(c).view(torch.uint8))
    assert torch.equal(b["w.weight_scale"].view(torch.uint8), e8)


def test_e8m0_block_scales_shift_their_exponent(tmp_path, capsys):
    # ue8m0 scales of 128x128 blocks (DeepSeek's scale_fmt ue8m0, stored as e8m0 bytes): x 2 is exponent + 1
    c = codes((256, 256), pool=finite_nonzero_codes("e4m3fn"))
    e8 = torch.tensor([[120, 130], [127, 253]], dtype=torch.uint8)
    src = tmp_path / "src"
    save_st(str(src / "model.safetensors"), {"w.weight": fp8(c), "w.weight_scale_inv": e8.view(torch.float8_e8m0fnu)})
    write_json(src / "config.json", DEEPSEEK_CONFIG)
    rc, err, report = convert(capsys, src, tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 0, err
    b = load(tmp_path / "dst" / "model.safetensors")
    assert torch.equal(b["w.weight_scale_inv"].view(torch.uint8), e8 + 1)
    assert b["w.weight"].dtype == torch.float8_e4m3fnuz


def test_torch_checkpoint_to_safetensors(tmp_path, capsys):
    q, s = quantize(torch.randn(64, 128), "e4m3fn", "rowwise")
    src = save_pt(tmp_path / "ck.pt", {"model": {"l.weight": q, "l.weight_scale": s}, "step": 3})
    rc, err, report = convert(capsys, src, tmp_path / "dst.safetensors", "--to", "e4m3fnuz")
    assert rc == 0, err
    b = load(tmp_path / "dst.safetensors")
    assert set(b) == {"model.l.weight", "model.l.weight_scale"}
    assert same_values(dequant(b["model.l.weight"], b["model.l.weight_scale"]), dequant(q, s))


def test_sharded_directory_to_directory(tmp_path, capsys):
    q, s = quantize(torch.randn(256, 256), "e4m3fn", "block")
    src = tmp_path / "src"
    save_st(src / "model-00001-of-00002.safetensors", {"l.weight": q})
    save_st(src / "model-00002-of-00002.safetensors", {"l.weight_scale_inv": s})
    write_json(src / "model.safetensors.index.json", {"weight_map": {
        "l.weight": "model-00001-of-00002.safetensors", "l.weight_scale_inv": "model-00002-of-00002.safetensors"}})
    rc, err, report = convert(capsys, src, tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 0, err
    index = json.load(open(tmp_path / "dst" / "model.safetensors.index.json"))
    assert index["weight_map"] == {"l.weight": "model-00001-of-00002.safetensors",
                                   "l.weight_scale_inv": "model-00002-of-00002.safetensors"}
    w = load(tmp_path / "dst" / "model-00001-of-00002.safetensors")["l.weight"]
    sc = load(tmp_path / "dst" / "model-00002-of-00002.safetensors")["l.weight_scale_inv"]
    assert torch.equal(sc, s * 2)
    assert same_values(dequant(w, sc), dequant(q, s))
    assert main(["audit", str(tmp_path / "dst"), "--target", "mi300", "-q"]) == 0


def test_activation_scales_keep(tmp_path, capsys, deepseek):
    src, _, _ = deepseek
    rc, err, _ = convert(capsys, src, tmp_path / "k.safetensors", "--to", "e4m3fnuz", "--activation-scales", "keep")
    assert rc == 0
    a, b = load(src / "model.safetensors"), load(tmp_path / "k.safetensors")
    assert b["l.input_scale"].item() == a["l.input_scale"].item()


def test_refusals(tmp_path, capsys, monkeypatch, deepseek):
    src, _, _ = deepseek
    dst = tmp_path / "out.safetensors"
    dst.write_bytes(b"x")
    assert main(["convert", str(src), str(dst), "--to", "e4m3fnuz", "-q"]) == 2
    assert "--force" in capsys.readouterr().err
    monkeypatch.setattr(dtypes, "safetensors_version", lambda: (0, 7, 0))
    assert main(["convert", str(src), str(tmp_path / "n.safetensors"), "--to", "e4m3fnuz", "-q"]) == 2
    assert "safetensors>=0.8" in capsys.readouterr().err
    monkeypatch.undo()
    bad = tmp_path / "evil.pt"
    torch.save({"x": torch.ones(1)}, bad)
    with open(bad, "r+b") as f:
        f.truncate(100)
    assert main(["convert", str(bad), str(tmp_path / "e.safetensors"), "--to", "e4m3fnuz", "-q"]) == 2
    assert "not a valid zip archive" in capsys.readouterr().err

"""The messages issue 22 found wrong, each planted in a real file and checked (verdict written before the run):
no SATURATION without the scale the data was quantized with; a scale that fits no block gives every target the
same verdict and reason; one e8m0 scale of 254 in MX data condemns only its own block; a truncated file is called
truncated; the fnuz -> OCP conversion text says what that conversion does."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from checkpoint_builders import (DEEPSEEK_CONFIG, codes, codes_of, finite_nonzero_codes, fp8, save_st, tensor_of,
                                 write_json)
from fp8check.cli import main

ALL = ("h100", "b200", "mi300", "mi355")


def piled_up(seed: int = 0) -> np.ndarray:
    """[256, 256] e4m3fn codes of which 2% sit at ±448: with the scale they were quantized with, SATURATION."""
    q = codes((256, 256), seed=seed, pool=finite_nonzero_codes("e4m3fn", max_magnitude=0x70))
    rng = np.random.default_rng(seed + 1)
    pos = rng.choice(q.size, size=q.size // 50, replace=False)
    q.reshape(-1)[pos] = rng.choice(np.array([0x7E, 0xFE], dtype=np.uint8), size=pos.size)
    return q


@pytest.mark.parametrize("scale", ["fits", "missing", "transposed"])
def test_no_saturation_without_the_scale_the_data_was_quantized_with(tmp_path, run_audit, scale):
    d = tmp_path / "m"
    d.mkdir()
    t = {"l.weight": fp8(piled_up())}
    if scale == "fits":
        t["l.weight_scale_inv"] = torch.full((2, 2), 0.01)
    elif scale == "transposed":  # data [256, 512] needs [2, 4]
        t["l.weight"] = fp8(np.concatenate([piled_up(), piled_up(3)], axis=1))
        t["l.weight_scale_inv"] = torch.full((4, 2), 0.01)
    save_st(str(d / "model.safetensors"), t)
    write_json(str(d / "config.json"), DEEPSEEK_CONFIG)
    c = codes_of(run_audit(d), "l.weight")
    if scale == "fits":  # the check can fire: the same pile-up under its own scale is clipping
        assert c["SATURATION"][0] == "warning"
    else:
        assert "SATURATION" not in c
        assert c["SCALE_MISSING" if scale == "missing" else "SCALE_SHAPE"][0] == "error"


@pytest.mark.parametrize("scale_shape", [(4, 2), (3,), None])
def test_a_scale_no_loader_can_apply_gives_every_target_the_same_reason(tmp_path, run_audit, scale_shape):
    d = tmp_path / "m"
    d.mkdir()
    q = codes((256, 512), pool=finite_nonzero_codes("e4m3fn"))  # values beyond 240 too
    t = {"l.weight": fp8(q)}
    if scale_shape is not None:
        t["l.weight_scale_inv"] = torch.full(scale_shape, 0.01)
    save_st(str(d / "model.safetensors"), t)
    write_json(str(d / "config.json"), DEEPSEEK_CONFIG)
    r = run_audit(d)
    # written before the run: cannot run anywhere, for the same reason everywhere (before: only MI300 said
    # "cannot run", for "no scale to absorb them")
    assert r["summary"]["verdicts"] == dict.fromkeys(ALL, "cannot_run")
    whys = {p["target"]: [b["why"] for b in p["blocked"]] for p in r["portability"]}
    assert len({tuple(w) for w in whys.values()}) == 1, whys
    why = whys["mi300"][0]
    assert ("has no scale" if scale_shape is None else "does not fit the data") in why
    assert not any("absorb" in reason for p in r["portability"] for reason in p["reasons"])


def test_one_e8m0_scale_of_254_in_mx_data_condemns_only_its_block(tmp_path, run_audit):
    d = tmp_path / "m"
    d.mkdir()
    q = codes((64, 128), pool=finite_nonzero_codes("e4m3fn"))
    s = np.full((64, 4), 120, dtype=np.uint8)
    s[5, 2] = 254  # 2^127
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q), "l.weight_scale": torch.from_numpy(s).view(
        torch.float8_e8m0fnu)})
    r = run_audit(d, targets=("mi300",))
    c = codes_of(r, "l.weight")
    # counted again: the 32 values of that block whose |v| x 2^127 overflows bfloat16
    block = q[5, 64:96].view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    overflow = int(np.count_nonzero(np.abs(block) * 2.0 ** 127 >= (2 - 2 ** -8) * 2.0 ** 127))
    assert overflow > 0 and c["DEQUANT_OVERFLOW"] == ("error", overflow)
    # MX elements are OCP: no fnuz conversion to fail, so nothing beyond ±240 is condemned; MI300 has no MX matmul
    assert "FNUZ_RANGE" not in c and tensor_of(r, "l.weight")["conversions"] == {}
    # its block's Inf weights break every loader: no "runs" verdict, though the format itself runs emulated there
    (mi300,) = r["portability"]
    errors = {code for code, (severity, _) in c.items() if severity == "error"}
    assert "DEQUANT_OVERFLOW" in errors and mi300["errors"] == dict.fromkeys(errors, 1)
    assert mi300["verdict"] == "does_not_load_correctly"
    assert mi300["tensors"]["emulated"] == 1 and mi300["tensors"]["cannot_run"] == 0


def test_a_truncated_file_is_called_truncated(tmp_path, capsys):
    q = codes((256, 256), pool=finite_nonzero_codes("e4m3fn"))
    whole = save_st(str(tmp_path / "whole.safetensors"), {"a.weight": fp8(q), "b.weight": fp8(q)})
    data = open(whole, "rb").read()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) - 1000])
    torch.save({"w": fp8(q)}, tmp_path / "whole.pt")
    data = (tmp_path / "whole.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    errors = {}
    for name in ("cut.safetensors", "cut.pt"):
        rc = main(["audit", str(tmp_path / name), "-q", "--json", str(tmp_path / f"{name}.json")])
        errors[name] = capsys.readouterr().err
        assert rc == 2, errors
    assert "cut.safetensors: truncated: its header describes 131,072 bytes of tensor data but only 130,072 follow " \
           "the header (1,000 missing" in errors["cut.safetensors"]
    assert "truncated" in errors["cut.pt"]


def test_the_fnuz_to_ocp_conversion_says_what_it_does(tmp_path, run_audit):
    d = tmp_path / "m"
    d.mkdir()
    q = codes((64, 64), "e4m3fnuz", pool=finite_nonzero_codes("e4m3fnuz", max_magnitude=0x6F))
    save_st(str(d / "model.safetensors"), {"l.weight": fp8(q, "e4m3fnuz"), "l.weight_scale": torch.tensor(0.01)})
    r = run_audit(d, targets=("h100",))
    text = " ".join(r["portability"][0]["reasons"])
    assert "e4m3fnuz tensor runs after conversion to e4m3fn (bytes reinterpreted, NaN 0x80 -> e4m3fn NaN, " \
           "scales x 0.5)" in text
    assert "0x80 -> 0x00" not in text and "±240" not in text

"""fp8check convert's output as a loader meets it (issue 22): torchao tensors written back as torchao tensors and
loaded with ``torch.load(weights_only=True)`` and torchao's own classes; configs that say what the tensors now
are; the folder's other files beside them. Each verdict is written here before the run; values are compared
with torchao's own ``dequantize`` (NaN by position), counts made again from the bytes with numpy."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from checkpoint_builders import (COMPRESSED_TENSORS_CONFIG, DEEPSEEK_CONFIG, codes, codes_of, finite_nonzero_codes,
                                 fp8, save_st, write_json)
from fp8check.cli import main

torchao_q = pytest.importorskip("torchao.quantization")


def convert(capsys, src, dst, *args):
    rc = main(["convert", str(src), str(dst), *map(str, args), "-q", "--json", str(dst) + ".json"])
    err = capsys.readouterr().err
    report = json.loads(open(str(dst) + ".json").read()) if os.path.exists(str(dst) + ".json") else None
    return rc, err, report


def float_bits_equal(a: torch.Tensor, b: torch.Tensor, *, neg_zero_ok: torch.Tensor | None = None) -> bool:
    """Same float32 bits, NaN compared by position only; at ``neg_zero_ok`` a -0 may have become +0."""
    a, b = a.float(), b.float()
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    if not torch.equal(nan_a, nan_b):
        return False
    ia, ib = a.view(torch.int32).clone(), b.view(torch.int32).clone()
    ia[nan_a], ib[nan_b] = 0, 0
    if neg_zero_ok is not None:
        z = neg_zero_ok & (a == 0)
        ia[z], ib[z] = 0, ib[z] & 0x7FFFFFFF
    return torch.equal(ia, ib)


PLANTED = {(0, 0): 0x7F, (0, 1): 0x80, (1, 5): 0xFF}  # NaN, -0, NaN in e4m3fn


def torchao_folder(d, *, dynamic=False):
    """A transformers-style torchao folder: pytorch_model.bin (a state dict of Float8Tensor weights), its index,
    a config, a tokenizer file; three planted bytes in the first weight."""
    from torchao.quantization.quantize_.workflows.float8.float8_tensor import QuantizeTensorToFloat8Kwargs

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.Linear(128, 64)).to(torch.bfloat16)
    if dynamic:  # what Float8DynamicActivationFloat8WeightConfig writes (it refuses to quantize on a CPU)
        for lin in m:
            lin.weight = torch.nn.Parameter(torchao_q.Float8Tensor.from_hp(
                lin.weight.detach(), granularity=torchao_q.PerRow(), act_quant_kwargs=QuantizeTensorToFloat8Kwargs(
                    float8_dtype=torch.float8_e4m3fn, granularity=torchao_q.PerRow())), requires_grad=False)
    else:
        torchao_q.quantize_(m, torchao_q.Float8WeightOnlyConfig())
    raw = m[0].weight.qdata.view(torch.uint8)
    for pos, byte in PLANTED.items():
        raw[pos] = byte
    d.mkdir()
    sd = m.state_dict()
    torch.save(sd, d / "pytorch_model.bin")
    write_json(str(d / "pytorch_model.bin.index.json"),
               {"metadata": {"total_size": 0}, "weight_map": {k: "pytorch_model.bin" for k in sd}})
    write_json(str(d / "config.json"), {"model_type": "tiny", "quantization_config": {
        "quant_method": "torchao", "quant_type": {"default": {"_type": "Float8WeightOnlyConfig"}}}})
    (d / "tokenizer.json").write_text('{"version": "1.0"}')
    return d, sd


@pytest.mark.parametrize("dynamic", [False, True], ids=["weight-only", "dynamic-activation"])
def test_torchao_weights_written_back_load_with_torchao(tmp_path, capsys, dynamic):
    src, sd = torchao_folder(tmp_path / "src", dynamic=dynamic)
    # written before the run: exit 0, every tensor exact, two Float8Tensors converted and their scales doubled
    rc, err, report = convert(capsys, src, tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 0, err
    s = report["summary"]
    assert (s["converted"], s["scaled"], s["not_exact"]) == (2, 2, 0)
    assert sorted(os.listdir(tmp_path / "dst")) == ["config.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
                                                     "tokenizer.json"]
    # the producer's loader: torch.load(weights_only=True) with torchao's classes allow-listed (importing it does)
    got = torch.load(tmp_path / "dst" / "pytorch_model.bin", weights_only=True)
    assert set(got) == set(sd)
    for k, x in sd.items():
        y = got[k]
        if not isinstance(x, torchao_q.Float8Tensor):
            assert torch.equal(x.view(torch.int16), y.view(torch.int16)), k
            continue
        assert type(y) is torchao_q.Float8Tensor and y.qdata.dtype == torch.float8_e4m3fnuz, k
        assert torch.equal(y.scale, x.scale * 2), k
        src_bytes = x.qdata.view(torch.uint8).numpy()
        neg_zero = torch.from_numpy(src_bytes == 0x80)
        assert float_bits_equal(x.dequantize(torch.float32), y.dequantize(torch.float32), neg_zero_ok=neg_zero), k
        # NaN counted again from the bytes: the fn NaNs 0x7F/0xFF are the fnuz NaN 0x80, nothing else is
        nan_src = int(np.isin(src_bytes, (0x7F, 0xFF)).sum())
        assert int((y.qdata.view(torch.uint8) == 0x80).sum()) == nan_src
        if dynamic:
            assert y.act_quant_kwargs.float8_dtype == torch.float8_e4m3fnuz  # activations quantize to fnuz too
    assert int(np.isin(sd["0.weight"].qdata.view(torch.uint8).numpy(), (0x7F, 0xFF)).sum()) == 2
    # and back to OCP: the same bytes, but -0 (gone in fnuz) and the second NaN's sign
    rc, err, _ = convert(capsys, tmp_path / "dst", tmp_path / "back", "--to", "e4m3fn")
    assert rc == 0, err
    back = torch.load(tmp_path / "back" / "pytorch_model.bin", weights_only=True)
    a, b = sd["0.weight"].qdata.view(torch.uint8).clone(), back["0.weight"].qdata.view(torch.uint8)
    assert back["0.weight"].qdata.dtype == torch.float8_e4m3fn
    a[0, 1], a[1, 5] = 0x00, 0x7F
    assert torch.equal(a, b) and torch.equal(back["0.weight"].scale, sd["0.weight"].scale)


def test_a_torch_file_whose_fp8_tensors_do_not_all_convert_is_refused(tmp_path, capsys):
    from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)).to(torch.bfloat16)
    torchao_q.quantize_(m[0], torchao_q.Float8WeightOnlyConfig())
    torchao_q.quantize_(m[1], MXDynamicActivationMXWeightConfig())  # MX: kept as e4m3fn
    (tmp_path / "src").mkdir()
    torch.save(m.state_dict(), tmp_path / "src" / "model.pt")
    rc, err, _ = convert(capsys, tmp_path / "src", tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 2 and "stays float8_e4m3fn while other float8_e4m3fn tensors" in err, err
    assert not os.path.exists(tmp_path / "dst")
    rc, err, _ = convert(capsys, tmp_path / "src" / "model.pt", tmp_path / "one.safetensors", "--to", "e4m3fnuz")
    assert rc == 2 and "give DST as a directory" in err, err


@pytest.mark.parametrize("config", ["deepseek", "compressed-tensors"])
def test_configs_say_what_the_tensors_now_are(tmp_path, capsys, run_audit, config):
    src = tmp_path / "src"
    c = codes((256, 256), pool=finite_nonzero_codes("e4m3fn", max_magnitude=0x6F))
    if config == "deepseek":
        tensors = {"l.weight": fp8(c), "l.weight_scale_inv": torch.full((2, 2), 0.01)}
        doc = DEEPSEEK_CONFIG
    else:
        tensors = {"l.weight": fp8(c), "l.weight_scale": torch.full((256, 1), 0.01, dtype=torch.bfloat16)}
        doc = COMPRESSED_TENSORS_CONFIG
    save_st(str(src / "model.safetensors"), tensors)
    write_json(str(src / "config.json"), doc)
    (src / "generation_config.json").write_text('{"do_sample": false}')
    rc, err, report = convert(capsys, src, tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 0, err
    assert report["configs"] == ["config.json"] and report["files_copied"] == ["generation_config.json"]
    out = json.loads((tmp_path / "dst" / "config.json").read_text())
    assert out["fp8check_convert"]["weights"] == {"e4m3fn": "e4m3fnuz"}
    assert out["fp8check_convert"]["weight_scale_factor"] == 2.0
    if config == "deepseek":
        assert out["quantization_config"] == {**doc["quantization_config"], "fmt": "e4m3fnuz"}
    else:  # compressed-tensors has no spelling for fnuz: its keys stay as its loader expects them
        assert out["quantization_config"] == doc["quantization_config"]
    assert (tmp_path / "dst" / "generation_config.json").read_text() == '{"do_sample": false}'
    # written before the run: the converted folder audits clean on MI300, with no CONFIG_FORMAT remark
    r = run_audit(tmp_path / "dst", targets=("mi300",))
    assert "CONFIG_FORMAT" not in codes_of(r, "l.weight")
    assert r["summary"]["verdicts"] == {"mi300": "runs_as_is"} and r["summary"]["exit_code"] == 0
    # the config copied as it was would be remarked: the check can fail
    write_json(str(tmp_path / "dst" / "config.json"), doc)
    assert codes_of(run_audit(tmp_path / "dst", targets=("mi300",)), "l.weight")["CONFIG_FORMAT"][0] == "warning"


def test_torchao_safetensors_format_loads_back_with_torchao(tmp_path, capsys):
    """torchao's own safetensors form (flatten_tensor_state_dict: X._weight_qdata, X._weight_scale and a JSON
    description per subclass in __metadata__), converted and rebuilt by unflatten_tensor_state_dict."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    support = pytest.importorskip("torchao.prototype.safetensors.safetensors_support",
                                  reason="this torchao has no safetensors form (torchao 0.18 has)")
    flatten_tensor_state_dict, unflatten_tensor_state_dict = (support.flatten_tensor_state_dict,
                                                              support.unflatten_tensor_state_dict)

    src, sd = torchao_folder(tmp_path / "pt", dynamic=True)
    tensors, metadata = flatten_tensor_state_dict(sd)
    metadata["padding"] = "x" * 5000  # past what the audit's report keeps of a metadata value
    (tmp_path / "st").mkdir()
    save_file(tensors, str(tmp_path / "st" / "model.safetensors"), metadata=metadata)
    rc, err, report = convert(capsys, tmp_path / "st", tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 0 and report["summary"]["converted"] == 2, err
    with safe_open(str(tmp_path / "dst" / "model.safetensors"), "pt") as f:
        got, left = unflatten_tensor_state_dict({k: f.get_tensor(k) for k in f.keys()}, f.metadata())
        assert f.metadata()["padding"] == "x" * 5000
    assert not left
    for k, x in sd.items():
        if isinstance(x, torchao_q.Float8Tensor):
            y = got[k]
            assert type(y) is torchao_q.Float8Tensor and y.qdata.dtype == torch.float8_e4m3fnuz
            assert y.act_quant_kwargs.float8_dtype == torch.float8_e4m3fnuz
            neg_zero = torch.from_numpy(x.qdata.view(torch.uint8).numpy() == 0x80)
            assert float_bits_equal(x.dequantize(torch.float32), y.dequantize(torch.float32), neg_zero_ok=neg_zero)


@pytest.mark.parametrize("kind", ["mx", "nvfp4"])
def test_torchao_mx_and_nvfp4_files_are_kept_and_load_the_same(tmp_path, capsys, kind):
    from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig, NVFP4WeightOnlyConfig

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(128, 64)).to(torch.bfloat16)
    torchao_q.quantize_(m, MXDynamicActivationMXWeightConfig() if kind == "mx" else NVFP4WeightOnlyConfig())
    (tmp_path / "src").mkdir()
    torch.save(m.state_dict(), tmp_path / "src" / "model.pt")
    # written before the run: nothing converted (MX has no fnuz form, NVFP4 is e2m1), the torch file written
    # back as a torch file, exit 0, every tensor the same
    rc, err, report = convert(capsys, tmp_path / "src", tmp_path / "dst", "--to", "e4m3fnuz")
    assert rc == 0, err
    assert report["summary"]["converted"] == 0 and report["summary"]["kept"] == (1 if kind == "mx" else 0)
    a = torch.load(tmp_path / "src" / "model.pt", weights_only=True)
    b = torch.load(tmp_path / "dst" / "model.pt", weights_only=True)
    x, y = a["0.weight"], b["0.weight"]
    assert type(x) is type(y)
    assert torch.equal(x.qdata.view(torch.uint8), y.qdata.view(torch.uint8)) and x.qdata.dtype == y.qdata.dtype
    assert torch.equal(x.scale.view(torch.uint8), y.scale.view(torch.uint8))

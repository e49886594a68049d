"""Checkpoints written by real producers, audited with ``fp8check audit``.

Each test builds a tiny, randomly initialised Llama from a config in code
(no download), has the producer quantize and save it, and audits the
directory through the command line: every FP8 weight paired with its scale
at the right granularity, activation scales recognised, the verdicts, and
the bytes compared with the recipe the producer claims (the known bfloat16
double rounding is a strict xfail). A scale renamed to a name no convention
knows is reported as "unpaired scale NAME".

The producers (llmcompressor, AMD Quark) are heavy to import and run, so
these tests are ``slow``; each skips naming its package where it is absent.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fp8check import quantizers
from fp8check.cli import main

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"


def tiny_llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    originals = {n: model.get_submodule(f"model.layers.0.{n}").weight.detach().clone() for n in LINEARS}
    return cfg, model, originals


def audit(path, tmp_path, capsys, *extra):
    out = tmp_path / f"audit-{os.path.basename(path)}.json"
    rc = main(["audit", str(path), "--json", str(out), "--jobs", "1", *extra])
    text = capsys.readouterr().out
    return rc, json.loads(out.read_text()), text


def tensors(doc):
    return {t["name"]: t for t in doc["tensors"]}


def assert_paired(doc, granularity, *, activation_scales):
    by = tensors(doc)
    for n in LINEARS:
        w = by[f"model.layers.0.{n}.weight"]
        assert w["role"] == "fp8" and w["format"] == "e4m3fn", w
        assert w["scale"]["name"] == f"model.layers.0.{n}.weight_scale", w["scale"]
        assert w["scale"]["granularity"]["name"] == granularity
        assert w["scale"]["convention"] == "multiply"
        assert not [f for f in w["findings"] if f["severity"] == "error"], w["findings"]
        if activation_scales:
            assert by[f"model.layers.0.{n}.input_scale"]["role"] == "activation_scale"
    assert doc["summary"]["verdicts"] == {"h100": "runs_as_is", "b200": "runs_as_is",
                                          "mi300": "runs_after_conversion", "mi355": "runs_as_is"}
    assert doc["summary"]["unknown"] == [] and doc["summary"]["errors"] == 0


def checkpoint_bytes(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def against_recipe(ckpt, originals, recipe):
    """(code divergences, scale divergences) of the checkpoint against ``recipe`` on the original weights."""
    codes = scales = 0
    for n, w in originals.items():
        ref = quantizers.quantize(w.float().numpy(), quantizers.get(recipe))
        got_q = ckpt[f"model.layers.0.{n}.weight"].view(torch.uint8).numpy()
        got_s = ckpt[f"model.layers.0.{n}.weight_scale"].float().numpy().reshape(ref.scales.shape)
        codes += int((got_q != ref.codes).sum())
        scales += int((got_s.view(np.uint32) != ref.scales.astype(np.float32).view(np.uint32)).sum())
    return codes, scales


def rename_scale(src, dst, new_suffix):
    from safetensors.torch import load_file, save_file

    d = load_file(str(src / "model.safetensors"))
    d["model.layers.0.self_attn.q_proj." + new_suffix] = d.pop("model.layers.0.self_attn.q_proj.weight_scale")
    dst.mkdir()
    save_file(d, str(dst / "model.safetensors"), metadata={"format": "pt"})
    (dst / "config.json").write_text((src / "config.json").read_text())


# -- llmcompressor ------------------------------------------------------------------------

LLMC = {"FP8_DYNAMIC": ("rowwise", "ct-rowwise-bf16", False), "FP8_BLOCK": ("block-128x128", "ct-block-128x128-bf16", False),
        "FP8": ("tensorwise", "ct-tensor-bf16", True)}


def llmcompressor_checkpoint(scheme, tmp_path):
    pytest.importorskip("llmcompressor", reason="llmcompressor is not installed")
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier

    cfg, model, originals = tiny_llama()
    base = tmp_path / "base"
    cfg.save_pretrained(base)  # oneshot reads the config from name_or_path
    model.config.name_or_path = str(base)
    kw = {}
    if scheme == "FP8":  # static activation scales: a calibration set of token ids
        from datasets import Dataset
        from tokenizers import Tokenizer, models
        from transformers import PreTrainedTokenizerFast

        ids = torch.randint(0, 256, (4, 16), generator=torch.Generator().manual_seed(1)).tolist()
        kw = dict(dataset=Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * 16] * 4}),
                  num_calibration_samples=4, max_seq_length=16,
                  processor=PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, "[UNK]"))))
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"]), **kw)
    out = tmp_path / scheme.lower()
    model.save_pretrained(out, save_compressed=True)
    return out, originals


@pytest.mark.parametrize("scheme", list(LLMC))
def test_llmcompressor_checkpoint_is_paired_and_verdicts_are_given(scheme, tmp_path, capsys):
    path, originals = llmcompressor_checkpoint(scheme, tmp_path)
    granularity, recipe, activation_scales = LLMC[scheme]
    rc, doc, text = audit(path, tmp_path, capsys)
    assert rc == 0, text
    assert doc["checkpoints"][0]["config"]["quant_method"] == "compressed-tensors"
    assert_paired(doc, granularity, activation_scales=activation_scales)
    codes, scales = against_recipe(checkpoint_bytes(path), originals, recipe)
    assert scales == 0  # amax/448 in bfloat16, bit for bit
    # The codes: exactly what compressed-tensors' own quantize gives (the zoo adapter), whose
    # bfloat16 double rounding is a known divergence (next test).
    from fp8check.zoo.compressed_tensors import _make

    kernel = _make({"rowwise": "channel", "block-128x128": "block", "tensorwise": "tensor"}[granularity])
    ckpt = checkpoint_bytes(path)
    for n, w in originals.items():
        q, _ = kernel(w)
        assert torch.equal(q.view(torch.uint8), ckpt[f"model.layers.0.{n}.weight"].view(torch.uint8)), n


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="compressed-tensors 0.19 rounds bfloat16 x / scale to bfloat16 before the fp8 cast "
                          f"(double rounding) [{NO}]")
def test_llmcompressor_fp8_dynamic_codes_equal_the_recipe(tmp_path):
    path, originals = llmcompressor_checkpoint("FP8_DYNAMIC", tmp_path)
    codes, _ = against_recipe(checkpoint_bytes(path), originals, "ct-rowwise-bf16")
    assert codes == 0, f"{codes} codes differ from ct-rowwise-bf16"


@pytest.mark.parametrize("suffix", ["w_scale", "scale"])
def test_a_scale_under_a_name_no_convention_knows_is_reported_unpaired(suffix, tmp_path, capsys, monkeypatch):
    path, _ = llmcompressor_checkpoint("FP8_DYNAMIC", tmp_path)
    renamed = tmp_path / "renamed"
    rename_scale(path, renamed, suffix)
    monkeypatch.setenv("COLUMNS", "250")
    rc, doc, text = audit(renamed, tmp_path, capsys)
    w = tensors(doc)["model.layers.0.self_attn.q_proj.weight"]
    assert w["scale"] is None
    found = {f["code"]: f["message"] for f in w["findings"]}
    assert "SCALE_MISSING" not in found
    assert found["SCALE_UNPAIRED"].startswith(f"unpaired scale model.layers.0.self_attn.q_proj.{suffix}")
    assert f"unpaired scale q_proj.{suffix}" in text  # next to the weight, in the terminal table
    assert rc == 0  # a warning, not an error


# -- AMD Quark ----------------------------------------------------------------------------


def test_quark_fp8_export_is_paired_and_verdicts_are_given(tmp_path, capsys):
    pytest.importorskip("quark", reason="amd-quark is not installed")
    from quark.torch import ModelQuantizer, export_safetensors
    from quark.torch.quantization.config.config import FP8E4M3PerTensorSpec, QConfig, QLayerConfig

    _, model, originals = tiny_llama()
    spec = FP8E4M3PerTensorSpec(observer_method="min_max", is_dynamic=False).to_quantization_spec()
    q = ModelQuantizer(QConfig(global_quant_config=QLayerConfig(weight=spec, input_tensors=spec), exclude=["lm_head"]))
    calib = [torch.randint(0, 256, (1, 16), generator=torch.Generator().manual_seed(i)) for i in range(2)]
    model = q.freeze(q.quantize_model(model, calib))
    out = tmp_path / "quark"
    export_safetensors(model, out)
    rc, doc, text = audit(out, tmp_path, capsys)
    assert rc == 0, text
    assert doc["checkpoints"][0]["config"]["quant_method"] == "quark"
    assert_paired(doc, "tensorwise", activation_scales=True)
    codes, scales = against_recipe(checkpoint_bytes(out), originals, "quark-tensor-bf16")
    assert scales == 0
    # Quark divides in bfloat16 as compressed-tensors does (a known divergence of
    # amd-quark.fp8_per_tensor.bf16): the export holds what the zoo adapter computes.
    from fp8check.zoo.quark import make_fp8_per_tensor

    kernel = make_fp8_per_tensor()
    ckpt = checkpoint_bytes(out)
    for n, w in originals.items():
        qw, _ = kernel(w)
        assert torch.equal(qw.view(torch.uint8), ckpt[f"model.layers.0.{n}.weight"].view(torch.uint8)), n


# -- convert, then the producer's own loader -------------------------------------------------
#
# What a deployer does next: fp8check convert --to e4m3fnuz, then load DST with the loader the producer
# ships. The verdict of each test is written before it was run; values are compared as bf16/float32 bits,
# NaN by position, and where they may differ the positions are counted independently with ml_dtypes.


def convert(src, dst, capsys, *args):
    out = f"{dst}.json"
    rc = main(["convert", str(src), str(dst), "--to", "e4m3fnuz", "-q", "--json", out, *args])
    err = capsys.readouterr().err
    return rc, err, json.loads(open(out).read())


def loaded(path, **kw):
    """The model's state dict as transformers' from_pretrained gives it (dequantized where the loader does)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers' quantized loaders need accelerate")
    m = transformers.AutoModelForCausalLM.from_pretrained(str(path), **kw)
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def differing(a, b):
    """Positions where two tensors differ in bits; NaN equals NaN, -0 equals +0 (fnuz has no -0)."""
    a, b = a.float(), b.float()
    nan = torch.isnan(a) & torch.isnan(b)
    return ~(nan | (a.view(torch.int32) == b.view(torch.int32)) | ((a == 0) & (b == 0)))


def not_in_e4m3fn(fnuz_bytes):
    """fnuz codes whose value e4m3fn cannot hold (ml_dtypes, independently of fp8check's tables)."""
    import ml_dtypes

    v = fnuz_bytes.view(ml_dtypes.float8_e4m3fnuz).astype(np.float32)
    back = v.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return ~((v == back) | (np.isnan(v) & np.isnan(back)))


def fine_grained_fp8(d, originals_model):
    """transformers' FineGrainedFP8 layout (quant_method fp8, 128x128 weight_scale_inv) of a real Llama, in two
    shards and an index. Written with torch casts: transformers only quantizes to this layout on a GPU
    (FineGrainedFP8HfQuantizer: "A GPU or XPU is needed for FP8 quantization"). Planted in down_proj: two fn NaN
    codes, three -0, and a block whose scale makes values beyond 240."""
    from safetensors.torch import save_file

    cfg, model = originals_model
    sd = model.state_dict()
    shards = ({}, {})
    for k, v in sd.items():
        if k.endswith("proj.weight"):
            w = v.float()
            o, i = w.shape
            s = w.reshape(o // 128, 128, i // 128, 128).abs().amax(dim=(1, 3)) / 448
            q = (w / s.repeat_interleave(128, 0).repeat_interleave(128, 1)).to(torch.float8_e4m3fn)
            if k.endswith("down_proj.weight"):
                raw = q.view(torch.uint8)
                raw[0, :2] = torch.tensor([0x7F, 0xFF], dtype=torch.uint8)
                raw[1, :3] = 0x80
            shards[0 if "mlp" in k else 1].update({k: q, k + "_scale_inv": s})
        else:
            shards[1][k] = v.clone()
    d.mkdir()
    names = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    for name, part in zip(names, shards):
        save_file(part, str(d / name), metadata={"format": "pt"})
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: n for n, part in zip(names, shards) for k in part}}))
    doc = cfg.to_dict()
    doc["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                  "weight_block_size": [128, 128]}
    doc["torch_dtype"] = "bfloat16"
    (d / "config.json").write_text(json.dumps(doc))
    return d


def test_fine_grained_fp8_converted_loads_with_from_pretrained_to_the_same_values(tmp_path, capsys):
    cfg, model, _ = tiny_llama()
    src = fine_grained_fp8(tmp_path / "fp8", (cfg, model))
    # written before the run: exit 0, every tensor exact; transformers (dequantizing on a CPU) gives the same
    # bf16 weights from both folders, NaN where the two fn NaN codes were
    rc, err, report = convert(src, tmp_path / "fnuz", capsys)
    assert rc == 0, err
    assert sorted(os.listdir(tmp_path / "fnuz")) == ["config.json", "model-00001-of-00002.safetensors",
                                                     "model-00002-of-00002.safetensors", "model.safetensors.index.json"]
    a, b = loaded(src), loaded(tmp_path / "fnuz")
    assert set(a) == set(b)
    for k in a:
        assert not differing(a[k], b[k]).any(), k
    down = b["model.layers.0.mlp.down_proj.weight"]
    assert torch.isnan(down).sum() == 2 and torch.isnan(down[0, :2]).all()


@pytest.mark.parametrize("scheme", ["FP8_DYNAMIC", "FP8_BLOCK"])
def test_compressed_tensors_converted_loads_with_from_pretrained(scheme, tmp_path, capsys):
    src, _ = llmcompressor_checkpoint(scheme, tmp_path)
    rc, err, report = convert(src, tmp_path / "fnuz", capsys)
    assert rc == 0, err
    ct = pytest.importorskip("transformers.utils.quantization_config")
    kw = {"quantization_config": ct.CompressedTensorsConfig(run_compressed=False)}  # decompressed to bf16
    a, b = loaded(src, **kw), loaded(tmp_path / "fnuz", **kw)
    # Written before the run: transformers' compressed-tensors integration makes float8_e4m3fn parameters (the
    # config's "type: float, num_bits: 8") and casts the fnuz tensors into them by value, so exactly the values
    # e4m3fn cannot hold at the doubled scale are rounded, no other; convert's report predicts their number.
    from safetensors.torch import load_file

    out = load_file(str(tmp_path / "fnuz" / "model.safetensors"))
    rows = {t["name"]: t for t in report["tensors"]}
    total = 0
    for n in LINEARS:
        k = f"model.layers.0.{n}.weight"
        expected = not_in_e4m3fn(out[k].view(torch.uint8).numpy())
        got = differing(a[k], b[k]).numpy()
        assert np.array_equal(got, expected), (k, int(got.sum()), int(expected.sum()))
        assert rows[k]["cast_back_rounded"] == int(expected.sum())
        total += int(expected.sum())
    assert report["summary"]["cast_back_rounded"] == total
    for k in a:
        if k.endswith("weight_scale"):
            assert torch.equal(b[k], a[k] * 2), k
        elif not k.endswith("proj.weight"):
            assert not differing(a[k], b[k]).any(), k

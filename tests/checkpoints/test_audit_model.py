"""An audit of a real small model: an MLP trained briefly here, quantized to FP8
with torch's own casts in the layouts real checkpoints use. The statistics are
those of real weight distributions; the clean checkpoint raises nothing, and
the two classic scale mistakes (a scale too small: clipping; too large:
underflow) are found on the same real weights."""

import numpy as np
import pytest
import torch

from checkpoint_builders import COMPRESSED_TENSORS_CONFIG, DEEPSEEK_CONFIG, codes_of, quantize, save_st, tensor_of, write_json


@pytest.fixture(scope="module")
def trained():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: intra-op threads only add overhead (10x on 2 cores)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)  # the init: the same weights whatever ran before
            return _train()
    finally:
        torch.set_num_threads(threads)


def _train():
    g = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 10))
    x = torch.randn(1024, 64, generator=g)
    teacher = torch.randn(64, 10, generator=g)
    y = (x @ teacher).argmax(dim=1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(100):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    assert accuracy > 0.8  # it learned something: these are trained weights, not an init
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    return {name: p.detach() for name, p in model.named_parameters()}


def _checkpoint(tmp_path, weights, *, scheme="rowwise", clip=None):
    tensors = {}
    for name, w in weights.items():
        if name.endswith("weight"):
            gran = "block" if scheme == "block" else "rowwise"
            q, s = quantize(w, "e4m3fn", gran, clip=(clip or {}).get(name, 1.0))
            tensors[name] = q
            tensors[name + ("_scale_inv" if scheme == "block" else "_scale")] = s
        else:
            tensors[name] = w.to(torch.bfloat16)
    save_st(tmp_path / "model.safetensors", tensors)
    # the config of a producer that writes this layout: per-row scales under DeepSeek's 128x128 blocks do not load
    write_json(tmp_path / "config.json", DEEPSEEK_CONFIG if scheme == "block" else COMPRESSED_TENSORS_CONFIG)
    return tmp_path


@pytest.mark.parametrize("scheme", ["rowwise", "block"])
def test_trained_model_quantized_is_clean(tmp_path, run_audit, trained, scheme):
    r = run_audit(_checkpoint(tmp_path, trained, scheme=scheme), targets=("mi300",))
    assert r["summary"]["errors"] == 0 and r["summary"]["warnings"] == 0, r["summary"]["findings_by_code"]
    # tiny negative weights round to -0: real checkpoints hold a few, noted as info; so are the values beyond ±240
    # a plain cast to e4m3fnuz would make NaN (full-range e4m3fn weights hold them; the loaders halve them exactly)
    assert set(r["summary"]["findings_by_code"]) <= {"NEG_ZERO_FNUZ_HAZARD", "FNUZ_PLAIN_CAST"}
    assert r["summary"]["fp8_tensors"] == 3
    for name in ("0.weight", "2.weight", "4.weight"):
        st = tensor_of(r, name)["stats"]
        q = trained[name]
        assert st["numel"] == q.numel()
        assert st["codes_used"] > 100  # a real distribution spreads over most of the format
        assert st["nan"] == 0 and st["inf"] == 0
        assert st["subnormal_share"] < 0.01 and st["zero_share"] < 0.01
        assert st["max_abs"] == 448.0  # each scale block's amax lands on max
        assert tensor_of(r, name)["scale"]["stats"]["nonpositive"] == 0
    assert r["portability"][0]["verdict"] == "runs_after_conversion"


def test_trained_model_scale_mistakes_are_found(tmp_path, run_audit, trained):
    # 2.weight quantized with a scale 4x too small (clipping), 4.weight with one 16384x too large
    r = run_audit(_checkpoint(tmp_path, trained, clip={"2.weight": 0.25, "4.weight": 16384.0}))
    assert set(codes_of(r, "0.weight")) <= {"NEG_ZERO_FNUZ_HAZARD"}
    sat = codes_of(r, "2.weight")["SATURATION"]
    hist = np.array(tensor_of(r, "2.weight")["stats"]["histogram"])
    assert sat == ("warning", int(hist[0x7E] + hist[0xFE]) - 256)
    under = codes_of(r, "4.weight")["UNDERFLOW"]
    assert under == ("warning", tensor_of(r, "4.weight")["stats"]["zeros"])
    assert r["summary"]["exit_code"] == 0  # warnings only

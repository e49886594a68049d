"""torchao tensor-subclass checkpoints (issue 13), made by torchao itself and audited in a process that
never imports torchao: Float8Tensor (weight-only, per-tensor, with activation-quantization state), MX
with swizzled e8m0 scales, NVFP4 (packed e2m1, its nibbles counted).

The four checkpoints are written and audited together, in one child process, by one test (each child
pays torch's import, and a module fixture would be built once per xdist worker); each kind is checked by
its own function below, all of them even when one fails."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from checkpoint_builders import save_pt, tensor_of

torchao_q = pytest.importorskip("torchao.quantization")

AUDIT_WITHOUT_TORCHAO = r"""
import json, sys
from fp8check.checkpoints import audit, AuditOptions
out = {}
for path in sys.argv[1:]:
    r = audit([path], AuditOptions(jobs=1, targets=("mi300",)))
    try:
        out[path] = r.to_dict()
    finally:
        r.close()
assert not any(m == "torchao" or m.startswith("torchao.") for m in sys.modules), "torchao was imported"
print(json.dumps(out))
"""


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.Linear(128, 64)).to(torch.bfloat16)


def _made(d):
    """kind -> (path, state dict as torchao made it, the audit of the path done without torchao)."""
    from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig, NVFP4WeightOnlyConfig
    from torchao.quantization.quantize_.workflows.float8.float8_tensor import QuantizeTensorToFloat8Kwargs

    files = {}
    m = _model()
    torchao_q.quantize_(m, torchao_q.Float8WeightOnlyConfig())
    files["float8_weight_only"] = (save_pt(d / "model.pt", m.state_dict()), m.state_dict())
    w = torch.randn(128, 256, dtype=torch.bfloat16)
    # what Float8DynamicActivationFloat8WeightConfig writes (it refuses to quantize on a CPU): the same tensor
    # with activation quantization kwargs in its state
    dyn = torchao_q.Float8Tensor.from_hp(w, granularity=torchao_q.PerRow(),
                                         act_quant_kwargs=QuantizeTensorToFloat8Kwargs(
                                             float8_dtype=torch.float8_e4m3fn, granularity=torchao_q.PerRow()))
    pt = torchao_q.Float8Tensor.from_hp(w, granularity=torchao_q.PerTensor())
    sd = {"dyn.weight": dyn, "pt.weight": pt}
    files["float8_per_tensor_and_dynamic"] = (save_pt(d / "m.pt", sd), sd)
    m = _model()
    torchao_q.quantize_(m, MXDynamicActivationMXWeightConfig())
    files["mx"] = (save_pt(d / "mx.pt", m.state_dict()), m.state_dict())
    m = _model()
    torchao_q.quantize_(m, NVFP4WeightOnlyConfig())
    files["nvfp4"] = (save_pt(d / "nvfp4.pt", m.state_dict()), m.state_dict())
    proc = subprocess.run([sys.executable, "-c", AUDIT_WITHOUT_TORCHAO, *(str(p) for p, _ in files.values())],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    audits = json.loads(proc.stdout)
    return {kind: (path, sd, audits[str(path)]) for kind, (path, sd) in files.items()}


def check_float8_weight_only_state_dict(made):
    _, sd, r = made["float8_weight_only"]
    assert r["summary"]["exit_code"] == 0 and r["summary"]["fp8_tensors"] == 2
    for layer in ("0", "1"):
        w = sd[f"{layer}.weight"]
        t = tensor_of(r, f"{layer}.weight.qdata")
        assert t["stats"]["histogram"] == np.bincount(w.qdata.view(torch.uint8).reshape(-1).numpy(),
                                                      minlength=256).tolist()
        assert t["scale"]["name"] == f"{layer}.weight.scale" and t["scale"]["granularity"]["name"] == "rowwise"
        assert t["scale"]["stats"]["max"] == float(w.scale.max())
    assert r["summary"]["verdicts"] == {"mi300": "runs_after_conversion"}


def check_float8_per_tensor_and_dynamic_activation_state(made):
    _, _, r = made["float8_per_tensor_and_dynamic"]
    assert tensor_of(r, "dyn.weight.qdata")["scale"]["granularity"]["name"] == "rowwise"
    assert tensor_of(r, "pt.weight.qdata")["scale"]["granularity"]["name"] == "tensorwise"
    assert r["summary"]["exit_code"] == 0


def check_mx_swizzled_scales_are_read_in_their_logical_layout(made):
    from torchao.prototype.mx_formats.utils import to_blocked

    from fp8check.checkpoints.loaders import open_checkpoint

    path, sd, r = made["mx"]
    w = sd["0.weight"]
    t = tensor_of(r, "0.weight.qdata")
    assert t["scale"]["granularity"]["name"] == "mx-e8m0" and t["scale"]["shape"] == [128, 8]
    with open_checkpoint(str(path)) as f:
        got = f.tensor("0.weight.scale").view(torch.uint8)
    # torchao's own swizzle of what fp8check read gives back the stored scale: the layout was inverted exactly
    assert torch.equal(to_blocked(got).reshape(-1), w.scale.view(torch.uint8).reshape(-1))


def check_nvfp4_is_audited_as_packed_e2m1(made):
    _, sd, r = made["nvfp4"]
    t = tensor_of(r, "0.weight.qdata")
    assert t["role"] == "packed" and t["scale"]["name"] == "0.weight.scale"
    # the 16 e2m1 code counts, counted here from torchao's own packed bytes (two nibbles a byte)
    b = sd["0.weight"].qdata.view(torch.uint8).reshape(-1).numpy()
    assert t["stats"]["histogram"] == np.bincount(np.concatenate([b & 0x0F, b >> 4]), minlength=16).tolist()
    # NVFP4 (e4m3 scales of 16-element blocks) has no matmul on MI300: it runs only emulated
    assert r["summary"]["verdicts"] == {"mi300": "runs_emulated"} and r["summary"]["exit_code"] == 0
    assert r["summary"]["unknown"] == []


def test_torchao_checkpoints_are_audited_without_torchao(tmp_path):
    made = _made(tmp_path)
    failed = []
    for check in (check_float8_weight_only_state_dict, check_float8_per_tensor_and_dynamic_activation_state,
                  check_mx_swizzled_scales_are_read_in_their_logical_layout,
                  check_nvfp4_is_audited_as_packed_e2m1):
        try:
            check(made)
        except AssertionError as exc:
            failed.append(f"{check.__name__}: {exc}")
    assert not failed, "\n".join(failed)

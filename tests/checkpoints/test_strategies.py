"""compressed-tensors ``strategy`` keys against the scales a checkpoint stores (fp8check/checkpoints/ct_strategy.py).

Each checkpoint is the compressed-tensors FP8 layout of test_relations.py (q/k/v/o, gate/up/down of [64, 64], or
MoE experts; channel scales [64, 1] bfloat16, static per-tensor input scales [1]) with one defect planted in its
config or its tensors. The table says, before any audit runs, the finding, its severity, the tensor it names and the
exit code; the consistent twin of each (the same tensors under a config that says what they are) raises nothing.
"""

from __future__ import annotations

import copy

import pytest
import torch

from fp8check.checkpoints import conventions
from test_relations import STATIC_CT, audit, found, model, not_info

L1 = "model.layers.1."
O_PROJ = L1 + "self_attn.o_proj."
Q_PROJ = L1 + "self_attn.q_proj."
EXPERT = "model.layers.0.mlp.experts.2."
DYNAMIC = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}


def config(weights: dict | None = None, inputs: dict | None = None, *, drop_strategy: bool = False) -> dict:
    """STATIC_CT with its one group's weights / input_activations updated (None: as they are)."""
    doc = copy.deepcopy(STATIC_CT)
    group = doc["quantization_config"]["config_groups"]["group_0"]
    group["weights"].update(weights or {})
    if drop_strategy:
        del group["weights"]["strategy"]
    if inputs is not None:
        group["input_activations"] = inputs
    return {"config.json": doc}


def per_tensor(t: dict[str, torch.Tensor], shape: tuple[int, ...] = (1,)) -> None:
    """Every weight scale made one value (the first row's) of ``shape``, as a per-tensor producer writes it."""
    for k in [k for k in t if k.endswith("weight_scale")]:
        t[k] = t[k].reshape(-1)[:1].reshape(shape).clone()


def blocks(t: dict[str, torch.Tensor]) -> None:
    """Every weight scale made 32x32 blocks of the [64, 64] weights: [2, 2]."""
    for k in [k for k in t if k.endswith("weight_scale")]:
        t[k] = t[k].reshape(-1)[:1].repeat(4).reshape(2, 2).clone()


def no_input_scales(t: dict[str, torch.Tensor]) -> None:
    """The input scales dropped, as a producer of dynamic activations writes none (a stored one: INPUT_SCALE_UNUSED)."""
    for k in [k for k in t if k.endswith("input_scale")]:
        del t[k]


# (defect, experts, the clean twin's config and tensors, the planted one's, the tensor named, {code: severity}, rc)
# The planted changes are applied after the clean twin is audited.
PLANTED = [
    # a scalar [1] where the config says channel: vLLM's [out, 1] parameter asserts its shape
    ("channel_scalar_o_proj", 0, lambda t: config(), lambda t: t.__setitem__(O_PROJ + "weight_scale", torch.tensor(
        [0.01], dtype=torch.bfloat16)) or config(), O_PROJ + "weight", {"STRATEGY_MISMATCH": "error"}, 1),
    ("channel_scalar_q_proj", 0, lambda t: config(), lambda t: t.__setitem__(Q_PROJ + "weight_scale", torch.tensor(
        0.01, dtype=torch.bfloat16)) or config(), Q_PROJ + "weight", {"STRATEGY_MISMATCH": "error"}, 1),
    # the config says tensor, the file holds channel scales: every weight
    ("tensor_declared_channel_stored", 0, lambda t: config(), lambda t: config({"strategy": "tensor"}),
     O_PROJ + "weight", {"STRATEGY_MISMATCH": "error"}, 1),
    # no strategy and no group_size: compressed-tensors infers tensor
    ("strategy_absent_channel_stored", 0, lambda t: config(), lambda t: config(drop_strategy=True),
     Q_PROJ + "weight", {"STRATEGY_MISMATCH": "error"}, 1),
    # [1, 1] per-tensor scales: one value, but a dense layer's loader takes [] or [1] only
    ("tensor_1x1_dense", 0, lambda t: per_tensor(t) or config({"strategy": "tensor"}),
     lambda t: per_tensor(t, (1, 1)) or config({"strategy": "tensor"}), O_PROJ + "weight",
     {"STRATEGY_MISMATCH": "error"}, 1),
    # block declared without its block_structure: compressed-tensors refuses the config
    ("block_without_structure", 0, lambda t: blocks(t) or no_input_scales(t) or config({"strategy": "block", "block_structure": [32, 32]},
                                                                 DYNAMIC),
     lambda t: config({"strategy": "block"}, DYNAMIC), O_PROJ + "weight", {"STRATEGY_INVALID": "error"}, 1),
    # block [32, 32] declared, the file holds one [1, 1] scale per weight: SCALE_SHAPE says it (the config's blocks
    # everywhere), STRATEGY_MISMATCH does not say it again
    ("block_other_size", 0, lambda t: blocks(t) or no_input_scales(t) or config({"strategy": "block", "block_structure": [32, 32]},
                                                          DYNAMIC),
     lambda t: per_tensor(t, (1, 1)) or config({"strategy": "block", "block_structure": [32, 32]}, DYNAMIC),
     O_PROJ + "weight", {"SCALE_SHAPE": "error"}, 1),
    # a static per-tensor input scale of 64 values
    ("input_scale_per_row", 0, lambda t: config(), lambda t: t.__setitem__(
        O_PROJ + "input_scale", torch.full((64, 1), 0.02, dtype=torch.bfloat16)) or config(), O_PROJ + "weight",
     {"STRATEGY_MISMATCH": "error"}, 1),
    # static token activations: compressed-tensors refuses them
    ("static_token", 0, lambda t: config(), lambda t: config(None, {**DYNAMIC, "dynamic": False}), Q_PROJ + "weight",
     {"STRATEGY_INVALID": "error"}, 1),
    # experts: a [1] scale under channel fills one row of FusedMoE's [rows, 1] parameter
    ("expert_channel_1", 4, lambda t: config(), lambda t: t.__setitem__(EXPERT + "up_proj.weight_scale", torch.tensor(
        [0.01], dtype=torch.bfloat16)) or config(), EXPERT + "up_proj.weight", {"STRATEGY_MISMATCH": "error"}, 1),
    # a 0-d one is broadcast to every row (the same values): a warning
    ("expert_channel_0d", 4, lambda t: config(), lambda t: t.__setitem__(EXPERT + "down_proj.weight_scale", torch.tensor(
        0.01, dtype=torch.bfloat16)) or config(), EXPERT + "down_proj.weight", {"STRATEGY_MISMATCH": "warning"}, 0),
    # an expert's input scale of two values: FusedMoE keeps one per expert
    ("expert_input_scale_2", 4, lambda t: config(), lambda t: t.__setitem__(EXPERT + "down_proj.input_scale",
                                                                           torch.full((2,), 0.02, dtype=torch.bfloat16))
     or config(), EXPERT + "down_proj.weight", {"STRATEGY_MISMATCH": "error"}, 1),
]


@pytest.mark.parametrize("defect,experts,clean,planted,name,want,rc_want", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_strategy_unlike_the_file_is_found_and_its_consistent_twin_is_silent(tmp_path, defect, experts, clean,
                                                                               planted, name, want, rc_want):
    tensors, _, _ = model("compressed-tensors-fp8", experts=experts)
    twin = {k: v.clone() for k, v in tensors.items()}
    configs = clean(twin)
    rc, r = audit(tmp_path / "clean", twin, configs)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    assert "unknown" not in r["summary"]["verdicts"].values(), r["summary"]["unknown"]
    configs = planted(twin)
    rc, r = audit(tmp_path / "planted", twin, configs)
    got = found(r, name)
    for code, severity in want.items():
        assert got.get(code, (None,))[0] == severity, (code, got)
    assert rc == rc_want, (rc, not_info(r))
    others = {code for (_, code) in not_info(r)} - set(want)
    assert not others, not_info(r)  # nothing else accused


def test_a_config_defect_reaches_every_quantized_tensor_and_a_file_defect_its_own(tmp_path):
    tensors, _, _ = model("compressed-tensors-fp8")
    weights = sorted(k for k, v in tensors.items() if v.dtype == torch.float8_e4m3fn)
    # the config says tensor: every channel scale [64, 1] is refused, each counted by its 64 elements
    rc, r = audit(tmp_path / "tensor", tensors, config({"strategy": "tensor"}))
    assert rc == 1 and not_info(r) == {(w, "STRATEGY_MISMATCH"): "error" for w in weights}, not_info(r)
    assert all(found(r, w)["STRATEGY_MISMATCH"] == ("error", 64) for w in weights)
    msg = [f["message"] for t in r["tensors"] if t["name"] == O_PROJ + "weight" for f in t["findings"]][0]
    assert msg.startswith(f"{O_PROJ}weight_scale [64, 1] (read as rowwise) does not fit "
                          'config_groups.group_0.weights strategy "tensor"') and "_assert_and_load" in msg, msg
    assert set(r["summary"]["verdicts"].values()) == {"does_not_load_correctly"}, r["summary"]["verdicts"]
    # block without block_structure: one STRATEGY_INVALID on every weight, quoting compressed-tensors' error
    no_input_scales(tensors)  # dynamic activations: none stored
    rc, r = audit(tmp_path / "block", tensors, config({"strategy": "block"}, DYNAMIC))
    assert rc == 1 and not_info(r) == {(w, "STRATEGY_INVALID"): "error" for w in weights}, not_info(r)
    (f,) = [f for t in r["tensors"] if t["name"] == weights[0] for f in t["findings"]]
    assert "Block strategy requires block structure" in f["message"] and f["count"] == 1


@pytest.mark.parametrize("strategy", ["rowwise", 5, ["channel"], "attn_head"])
def test_an_unknown_strategy_is_not_understood_and_gives_no_verdict(tmp_path, capsys, strategy):
    tensors, _, _ = model("compressed-tensors-fp8")
    rc, r = audit(tmp_path, tensors, config({"strategy": strategy}))
    assert rc == 1 and not_info(r) == {}, not_info(r)  # no finding it cannot back, and no verdict
    assert set(r["summary"]["verdicts"].values()) == {"unknown"}
    (reason,) = [u for u in r["summary"]["unknown"] if "strategy" in u]
    assert "config_groups.group_0.weights.strategy" in reason and "not understood" in reason, reason
    assert r["checkpoints"][0]["config"]["not_understood"], r["checkpoints"][0]["config"]


def test_through_the_cli_the_exit_codes_and_one_line_per_reason(tmp_path, capsys, monkeypatch):
    from fp8check.cli import main
    from checkpoint_builders import save_st, write_json

    monkeypatch.setenv("COLUMNS", "250")
    tensors, _, _ = model("compressed-tensors-fp8")
    cases = {"consistent": (config(), 0), "declared_tensor": (config({"strategy": "tensor"}), 1),
             "unknown": (config({"strategy": "rowwise"}), 1), "refused": (config({"strategy": "block"}, DYNAMIC), 1)}
    for case, (configs, rc_want) in cases.items():
        d = tmp_path / case
        d.mkdir()
        save_st(str(d / "model.safetensors"), tensors)
        write_json(str(d / "config.json"), configs["config.json"])
        rc = main(["audit", str(d), "--jobs", "1"])
        out, err = capsys.readouterr()
        assert rc == rc_want, (case, out, err)
        assert "Traceback" not in out + err
        if case == "declared_tensor":
            assert "STRATEGY_MISMATCH" in out
        if case == "refused":
            assert "STRATEGY_INVALID" in out
        if case == "unknown":
            # the headline names the reason in one line (each target's verdict repeats it)
            headline = out.splitlines()[1]
            assert headline.startswith("verdict unknown: ") and "strategy 'rowwise'" in headline, out


REFUSALS = [
    # (a weights' QuantizationArgs, what compressed-tensors 0.19 raises for it, "" where it accepts it)
    ({"strategy": "block"}, "Block strategy requires block structure"),
    ({"strategy": "channel", "block_structure": [128, 128]}, "Block structure requires block strategy"),
    ({"strategy": "block", "block_structure": [128]}, "Invalid block_structure"),
    ({"strategy": "group"}, "requires group_size to be set to a positive value"),
    ({"strategy": "channel", "group_size": 128}, "group_size requires strategy to be set to 'group'"),
    ({"strategy": "token"}, "Cannot perform static token quantization"),
    ({"strategy": "channel", "dynamic": True}, "must be used for dynamic quant"),
    ({"strategy": "group", "group_size": 32, "dynamic": "local"}, "local is only supported for strategy tensor_group"),
    ({"group_size": -2}, "Invalid group size"),
    ({"strategy": "channel", "group_size": -1}, ""),
    ({"strategy": "block", "block_structure": "128x128"}, ""),
    ({"group_size": 128}, ""),
]


def _parsed(args):
    return conventions.parse_config({"config.json": {"quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", **args}}}}}})


@pytest.mark.parametrize("args,refused", REFUSALS)
def test_what_compressed_tensors_refuses_is_read_as_refused(args, refused):
    q = _parsed(args)
    assert [refused in r for r in q.strategy_refused] == ([True] if refused else []), q.strategy_refused
    # told as config.json writes it: a key left out is "without", never Python's None
    assert not any("None" in r for r in q.strategy_refused), q.strategy_refused
    if not refused:
        (ours,) = q.weight_strategies
        assert ours.strategy == args.get("strategy", "group")  # inferred from group_size 128 where absent


@pytest.mark.slow
@pytest.mark.parametrize("args,refused", REFUSALS)
def test_the_refusals_are_compressed_tensors_own(args, refused):
    # the same arguments through compressed-tensors' own validation (the slow lane installs the producers)
    ct = pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
    version = getattr(ct, "__version__", "")
    if not version.startswith("0.19."):
        pytest.skip(f"compressed-tensors {version}: the refusals were read in 0.19 (quant_args.py)")
    from compressed_tensors.quantization import QuantizationArgs

    if refused:
        with pytest.raises(ValueError):
            QuantizationArgs.model_validate({"num_bits": 8, "type": "float", **args})
    else:
        declared = QuantizationArgs.model_validate({"num_bits": 8, "type": "float", **args})
        (ours,) = _parsed(args).weight_strategies
        assert ours.strategy == declared.strategy


def test_the_json_report_gives_the_strategies_read(tmp_path):
    tensors, _, _ = model("compressed-tensors-fp8")
    rc, r = audit(tmp_path, tensors, config({"strategy": "block"}, DYNAMIC))
    cfg = r["checkpoints"][0]["config"]
    assert cfg["strategies"] == [
        {"where": "config_groups.group_0.weights", "strategy": "block", "block": None, "group_size": None,
         "dynamic": False},
        {"where": "config_groups.group_0.input_activations", "strategy": "token", "block": None, "group_size": None,
         "dynamic": True}]
    assert len(cfg["strategy_refused"]) == 1 and "Block strategy requires block structure" in cfg["strategy_refused"][0]


@pytest.mark.parametrize("shape", [(64, 1), (1,)])
def test_a_group_scale_of_another_shape_is_a_mismatch(tmp_path, shape):
    # MXFP8 (group 32, e8m0 bytes [64, 2] for [64, 64] weights): one scale per row, or one for the tensor, is what
    # the file holds, not what the config's group strategy makes the loader allocate
    tensors, configs, _ = model("compressed-tensors-mxfp8")
    rc, r = audit(tmp_path / "clean", tensors, configs)
    assert rc == 0 and not_info(r) == {}, not_info(r)
    name = O_PROJ + "weight_scale"
    tensors[name] = tensors[name][:, :1].reshape(-1)[: shape[0]].reshape(shape).clone()
    rc, r = audit(tmp_path / "planted", tensors, configs)
    assert rc == 1 and not_info(r) == {(O_PROJ + "weight", "STRATEGY_MISMATCH"): "error"}, not_info(r)
    (f,) = [f for t in r["tensors"] if t["name"] == O_PROJ + "weight" for f in t["findings"]
            if f["code"] == "STRATEGY_MISMATCH"]
    assert 'strategy "group" group_size 32' in f["message"] and "[64, 2]" in f["message"], f["message"]


def test_fused_shards_with_their_own_per_tensor_scales_are_fine(tmp_path):
    # vLLM keeps one slot per shard of q/k/v under "tensor" and re-quantizes the shards to their max: no finding
    tensors, _, _ = model("compressed-tensors-fp8")
    per_tensor(tensors)
    for i, shard in enumerate(("q_proj", "k_proj", "v_proj")):
        tensors[L1 + f"self_attn.{shard}.weight_scale"] = torch.tensor([0.01 * (i + 1)], dtype=torch.bfloat16)
    rc, r = audit(tmp_path, tensors, config({"strategy": "tensor"}))
    assert rc == 0 and not_info(r) == {}, not_info(r)

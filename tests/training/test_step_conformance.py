"""A torchao float8 training step checked cast by cast (fp8check.training).

torchao 0.18's real Float8Linear runs (emulated GEMMs on the CPU). The planted bugs are put at the
names torchao calls, then the step is checked: each must be caught with its own category, and
nothing else may be flagged.
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")

from torchao.float8 import CastConfig, Float8LinearConfig, float8_linear, float8_ops, float8_utils  # noqa: E402
from torchao.float8.float8_training_tensor import GemmInputRole, hp_tensor_and_scale_to_float8  # noqa: E402

from fp8check import training  # noqa: E402
from fp8check.training.model import ModelConfig  # noqa: E402

SMALL = ModelConfig(name="tiny-1", n_layers=1, seq_len=16, batch_size=4)


def _flagged(step):
    return {c.category for c in step.casts if not c.passed}


@pytest.mark.parametrize("recipe, fmt", [("rowwise", "e4m3fn"), ("rowwise", "e4m3fnuz"), ("tensorwise", "e4m3fnuz"),
                                         pytest.param("tensorwise", "e4m3fn", marks=pytest.mark.slow),
                                         pytest.param("rowwise_with_gw_hp", "e4m3fn", marks=pytest.mark.slow),
                                         ("rowwise_with_gw_hp", "e4m3fnuz")])
def test_real_torchao_step_conforms(recipe, fmt):
    step = training.check_step(SMALL, recipe=recipe, fmt=fmt, steps=1)
    linears = 7 + 1  # wq wk wv wo w1 w2 w3 per layer, and the output head
    casts = 4 if recipe == "rowwise_with_gw_hp" else 6
    assert len(step.casts) == linears * casts and len(step.gemms) == linears * (casts // 2)
    assert step.passed, [(c.layer, c.operand, c.category, c.detail) for c in step.casts if not c.passed][:3]
    assert {c.dtype for c in step.casts if c.operand.startswith("grad_output")} == \
        {("e5m2" if recipe == "tensorwise" else "e4m3") + ("fnuz" if fmt == "e4m3fnuz" else ("fn" if recipe != "tensorwise" else ""))}
    assert all(0 < g.max_ratio < 1 for g in step.gemms)
    # Twin statistics: every cast operand quantized to both twins; the correct recipe never saturates.
    assert len(step.twins) == len(step.casts)
    assert all(t.saturated_pct == (0.0, 0.0) and t.sqnr_db[0] > 20 and t.sqnr_db[1] > 20 for t in step.twins)


def test_seed_bug_448_as_the_fnuz_max_is_caught(monkeypatch):
    orig = float8_utils.amax_to_scale

    def amax_to_scale_448(amax, float8_dtype, round_scales_to_power_of_2=False):
        # the seed's bug: the e4m3fn maximum used whatever the e4m3 dtype
        dtype = torch.float8_e4m3fn if float8_dtype == torch.float8_e4m3fnuz else float8_dtype
        return orig(amax, dtype, round_scales_to_power_of_2)

    monkeypatch.setattr(float8_utils, "amax_to_scale", amax_to_scale_448)
    step = training.check_step(SMALL, recipe="tensorwise", fmt="e4m3fnuz", steps=1)
    assert _flagged(step) == {"fnuz-max-448"}
    assert {c.operand for c in step.casts if not c.passed} == {"input", "weight", "weight_t", "input_t"}
    # and the twin statistics show what it did: elements past 240, headroom below zero
    sat = [t for t in step.twins if t.operand == "input"]
    assert all(t.headroom_240_bits < 0 for t in sat)


def test_grad_output_cast_to_e4m3_where_the_recipe_declares_e5m2_is_caught():
    config = Float8LinearConfig(cast_config_grad_output=CastConfig(target_dtype=torch.float8_e4m3fn), emulate=True)
    step = training.check_step(SMALL, recipe="tensorwise", fmt="e4m3fn", steps=1, config=config)
    bad = [c for c in step.casts if not c.passed]
    assert _flagged(step) == {"format"}
    assert {c.operand for c in bad} == {"grad_output", "grad_output_t"}
    assert "declares e5m2" in bad[0].detail


def test_weight_scale_stale_by_one_step_is_caught(monkeypatch):
    orig = float8_linear.hp_tensor_to_float8_dynamic
    last = {}

    def stale(hp_tensor, float8_dtype, linear_mm_config, *args, **kwargs):
        fresh = orig(hp_tensor, float8_dtype, linear_mm_config, *args, **kwargs)
        if kwargs.get("gemm_input_role") is not GemmInputRole.WEIGHT:
            return fresh
        key = hp_tensor.untyped_storage().data_ptr()
        old, last[key] = last.get(key), fresh._scale
        if old is None:
            return fresh
        return hp_tensor_and_scale_to_float8(hp_tensor, old, float8_dtype, linear_mm_config, GemmInputRole.WEIGHT,
                                             kwargs.get("axiswise_dim"))

    monkeypatch.setattr(float8_linear, "hp_tensor_to_float8_dynamic", stale)
    step = training.check_step(SMALL, recipe="tensorwise", fmt="e4m3fn", steps=2)
    bad = [c for c in step.casts if not c.passed]
    assert _flagged(step) == {"stale-scale"}
    assert {(c.step, c.operand) for c in bad} == {(1, "weight")}
    assert len(bad) == 8  # every linear's forward weight cast of step 1


def test_amax_before_the_all_reduce_of_a_tensor_parallel_shard_is_caught(monkeypatch):
    orig = float8_utils.tensor_to_amax

    def shard_amax(x, *args, **kwargs):
        # rank 0 of 2 takes the amax of its own half and skips the all-reduce (emulated on one process)
        x2 = x.reshape(-1, x.shape[-1])
        return orig(x2[: x2.shape[0] // 2], *args, **kwargs)

    monkeypatch.setattr(float8_utils, "tensor_to_amax", shard_amax)
    step = training.check_step(SMALL, recipe="tensorwise", fmt="e4m3fn", steps=1, tensor_parallel=2)
    assert _flagged(step) == {"amax-before-all-reduce"}
    assert sum(not c.passed for c in step.casts) > 10
    # without the declaration of the sharding the same scales are only "scale" (never guessed)
    step = training.check_step(SMALL, recipe="tensorwise", fmt="e4m3fn", steps=1)
    assert _flagged(step) == {"scale"}


def test_a_gemm_outside_the_bound_is_caught(monkeypatch):
    aten_mm = torch.ops.aten.mm.default
    orig = float8_ops.FLOAT8_OPS_TABLE[aten_mm]

    def sloppy(aten_op, args, kwargs=None):  # one part in 2**-9 too large: a bfloat16-ish accumulation
        return orig(aten_op, args, kwargs) * (1 + 2.0 ** -9)

    monkeypatch.setitem(float8_ops.FLOAT8_OPS_TABLE, aten_mm, sloppy)
    step = training.check_step(SMALL, recipe="rowwise", fmt="e4m3fn", steps=1)
    assert step.categories["gemm-bound"] > 0 and all(c.passed for c in step.casts)


def test_capture_leaves_torchao_as_it_was():
    names = (float8_linear.hp_tensor_to_float8_dynamic, float8_linear.matmul_with_hp_or_float8_args.forward,
             float8_ops.FLOAT8_OPS_TABLE[torch.ops.aten.mm.default])
    training.check_step(SMALL, recipe="rowwise", fmt="e4m3fn", steps=1)
    assert names == (float8_linear.hp_tensor_to_float8_dynamic, float8_linear.matmul_with_hp_or_float8_args.forward,
                     float8_ops.FLOAT8_OPS_TABLE[torch.ops.aten.mm.default])


def test_twin_statistics_side_by_side():
    step = training.check_step(SMALL, recipe="tensorwise", fmt="e4m3fn", steps=1)
    go = [t for t in step.twins if t.operand == "grad_output"]
    assert go and all(t.formats == ("e5m2", "e5m2fnuz") for t in go)
    inp = [t for t in step.twins if t.operand == "input"]
    assert all(t.formats == ("e4m3fn", "e4m3fnuz") for t in inp)
    # tensorwise scaling puts amax on 448 exactly: no headroom to 448, 240/448 is -0.9 bits
    assert all(abs(t.headroom_448_bits) < 1e-6 and math.isclose(t.headroom_240_bits, math.log2(240 / 448), abs_tol=1e-6)
               for t in inp)
    # e4m3fnuz has one more binade below (bias 8): never more underflow than e4m3fn under the same recipe
    assert all(t.underflow_pct[1] <= t.underflow_pct[0] for t in step.twins)


def test_torchao_s_real_scaled_mm_path_conforms_where_the_cpu_runs_it():
    """emulate=False: torchao's own GPU path (addmm_float8_unwrapped, torch._scaled_mm) run by torch's CPU
    _scaled_mm. Its rowwise output is computed in bfloat16 and converted (the bound knows it)."""
    try:
        step = training.check_step(SMALL, recipe="rowwise", fmt="e4m3fn", steps=1, emulate=False)
    except (RuntimeError, NotImplementedError) as exc:  # a CPU whose _scaled_mm refuses (FACTS: AMX machines differ)
        pytest.skip(f"torch._scaled_mm on this CPU: {str(exc).splitlines()[0][:200]}")
    assert step.passed, [(g.layer, g.gemm, g.max_ratio) for g in step.gemms if not g.passed][:3]
    assert len(step.gemms) == 8 * 3 and all(g.out_dtype == "bfloat16" for g in step.gemms)

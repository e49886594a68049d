"""torchao's MXFP8 grouped-GEMM MoE training path (emulated kernels), every cast and GEMM checked."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao.prototype.moe_training")

from fp8check.training.moe import MOE_OPERANDS, check_moe_step  # noqa: E402


def test_real_torchao_moe_step_conforms():
    s = check_moe_step(steps=2)
    assert s.passed, [c.detail for c in s.casts if not c.passed]
    # two grouped GEMMs x six casts x two steps, three GEMMs each
    assert len(s.casts) == 2 * 2 * sum(len(v) for v in MOE_OPERANDS.values())
    assert {(c.layer, c.operand) for c in s.casts} == {(f"grouped_mm.{i}", o) for i in (0, 1)
                                                       for v in MOE_OPERANDS.values() for o in v}
    assert len(s.gemms) == 2 * 2 * 3 and all(g.checked for g in s.gemms)
    # a group of 80 tokens: grad_weight's MX blocks along the tokens straddle two experts
    assert max(g.K for g in s.gemms if g.gemm == "grad_weight") == 80


def test_a_floor_scale_where_rceil_is_declared_is_caught(monkeypatch):
    from torchao.prototype.moe_training import mxfp8_grouped_mm as g
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    real = g.to_mx

    def floor_to_mx(tensor, *args, **kwargs):  # the planted bug: the scale rounds down
        scale, data = real(tensor, *args, **{**kwargs, "scaling_mode": ScaleCalculationMode.FLOOR})
        return scale, data

    monkeypatch.setattr(g, "to_mx", floor_to_mx)
    s = check_moe_step(steps=1)
    assert not s.passed
    assert s.categories["scale"] > 0  # declared by the caller's config (rceil), not by what ran
    assert all(c.declared.endswith("rceil") for c in s.casts)


def test_a_grouped_gemm_outside_the_bound_is_caught(monkeypatch):
    from torchao.prototype.moe_training import mxfp8_grouped_mm as g

    real = g._emulated_mxfp8_scaled_grouped_mm_2d_3d

    def off(*args, **kwargs):  # the planted bug: the forward output one part in 64 too large
        return real(*args, **kwargs) * (1 + 2 ** -6)

    monkeypatch.setattr(g, "_emulated_mxfp8_scaled_grouped_mm_2d_3d", off)
    s = check_moe_step(steps=1)
    assert s.categories["gemm-bound"] == 2  # both forward GEMMs, nothing else
    assert {g_.gemm for g_ in s.gemms if not g_.passed} == {"output"}
    assert all(c.passed for c in s.casts)


def test_cli_moe_adds_the_grouped_gemm_conformance(tmp_path, capsys):
    import json

    from fp8check import cli

    out = tmp_path / "t.json"
    assert cli.main(["train", "--steps", "1", "--formats", "bf16,e4m3fn", "--moe", "--json", str(out)]) == cli.EXIT_OK
    steps = json.loads(out.read_text())["step_conformance"]
    moe = [s for s in steps if s["recipe"].startswith("mxfp8")]
    assert len(moe) == 1 and moe[0]["passed"] and len(moe[0]["casts"]) == 24
    assert "mxfp8-rceil (MoE grouped GEMM, emulated) e4m3fn: 24 casts, 12 GEMMs, conform" in capsys.readouterr().out

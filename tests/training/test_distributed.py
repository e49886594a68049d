"""FP8 training across processes (fp8check.training.distributed): torchrun, gloo, 2 ranks on the CPU.

torch's own FSDP2 (``fully_shard``) and tensor parallelism (``parallelize_module`` with torchao's
``Float8ColwiseParallel``/``Float8RowwiseParallel``), torchao's real float8 all-gather and
``precompute_float8_dynamic_scale_for_fsdp``; every cast of every shard checked against the whole
tensor's reference, every loss against the single-device run. The planted bug (each rank's amax taken
from its own shard, the all-reduce skipped) is put into the ranks through ``worker_init``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)
# gloo has no float8: FSDP2's own all-gather is subclassed to move FP8 as bytes (fp8check.training.distributed)
_collectives = pytest.importorskip("torch.distributed.fsdp._fully_shard._fsdp_collectives")
if not hasattr(_collectives, "DefaultAllGather"):
    pytest.skip(f"torch {torch.__version__}: FSDP2 has no DefaultAllGather (the gloo byte all-gather derives from it)",
                allow_module_level=True)

from fp8check.cli import main  # noqa: E402
from fp8check.errors import InvalidValueError  # noqa: E402
from fp8check.training import TINY_LLAMA  # noqa: E402
from fp8check.training.distributed import MODES, check_distributed, validate  # noqa: E402


@pytest.fixture
def planted(monkeypatch):
    here = str(Path(__file__).resolve().parent)  # fp8check_plants.py, for torchrun's ranks
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    return "fp8check_plants:amax_before_all_reduce"


def test_what_cannot_run_is_refused_before_a_launch():
    for kwargs, text in (({"mode": "zero"}, "unknown parallel mode"), ({"nproc": 1}, "2 or more"),
                         ({"mode": "fsdp-float8", "recipe": "rowwise"}, "need the tensorwise recipe"),
                         ({"mode": "tp", "recipe": "rowwise"}, "need the tensorwise recipe"),
                         ({"nproc": 3}, "does not split into 3"), ({"fmt": "bf16"}, "FP8 format")):
        args = {"mode": "fsdp", "nproc": 2, "recipe": "tensorwise", "fmt": "e4m3fn", **kwargs}
        with pytest.raises(InvalidValueError, match=text):
            validate(TINY_LLAMA, args["mode"], args["nproc"], args["recipe"], args["fmt"])


def test_cli_bad_distributed_usage_is_one_line_and_exit_2(capsys):
    for argv, text in ((["train", "--nproc", "2", "--parallel", "ddp"], "unknown ddp"),
                       (["train", "--nproc", "two"], "not an integer"),
                       (["train", "--nproc", "2", "--formats", "bf16"], "FP8 runs"),
                       (["train", "--nproc", "2", "--recipe", "rowwise", "--parallel", "tp"], "tensorwise"),
                       (["train", "--nproc", "2", "--worker-init", "no_such_module_here:f"], "no_such_module_here")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and text in err[0] and "Traceback" not in err[0], err


def test_amax_before_the_all_reduce_is_caught_on_fsdp_shards(planted):
    """2 ranks, FSDP2 with torchao's float8 all-gather: each shard's scale from its own amax."""
    d = check_distributed(mode="fsdp-float8", nproc=2, steps=1, worker_init=planted)
    assert d.backend == "gloo" and not d.passed
    flagged = [c for c in d.casts if not c.passed]
    assert {c.category for c in flagged} == {"amax-before-all-reduce"}
    # exactly the weight shards FSDP casts before its all-gather, on both ranks; nothing else
    assert {(c.operand, c.placement) for c in flagged} == {("weight", "fsdp-shard")}
    assert {c.rank for c in flagged} == {0, 1}
    assert d.first_divergence["what"] == "cast" and d.first_divergence["step"] == 0
    assert all(g.passed for g in d.gemms)  # the GEMMs multiply what they were given correctly


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_ten_steps_on_two_processes_match_one_device(mode):
    d = check_distributed(mode=mode, nproc=2, steps=10)
    assert d.passed, (d.categories, d.first_divergence, [x.to_json() for x in d.losses])
    assert len(d.casts) > 100 and all(g.checked for g in d.gemms)
    if mode == "tp":
        # the row-parallel GEMM sums its partial products across ranks: not bit-exact, within the gate
        assert {x.mode.split(" (")[0] for x in d.losses} == {"within 0.25 % per step"}
        assert d.sharded_casts > 0
    else:
        # FSDP2: bit for bit, every step, every rank (torchao's own FSDP2 test asserts equal losses)
        assert all(x.mode == "bit-exact" and x.first_difference is None for x in d.losses)
        assert (d.sharded_casts > 0) == mode.startswith("fsdp-float8")


@pytest.mark.slow
def test_amax_before_the_all_reduce_is_caught_under_tensor_parallelism(planted):
    d = check_distributed(mode="tp", nproc=2, steps=2, worker_init=planted)
    flagged = [c for c in d.casts if not c.passed]
    assert {c.category for c in flagged} == {"amax-before-all-reduce"}
    assert all(c.placement.startswith("S(") for c in flagged)  # only the sharded operands can be wrong
    # the loss alone would not have told: it stays within the relative-loss gate
    assert all(x.passed for x in d.losses)


@pytest.mark.slow
def test_cli_nproc_writes_json_and_the_page(tmp_path, capsys):
    lxml_html = pytest.importorskip("lxml.html")
    out, page = tmp_path / "d.json", tmp_path / "d.html"
    rc = main(["train", "--nproc", "2", "--parallel", "fsdp-float8-precompute", "--formats", "e4m3fnuz", "--steps", "3",
               "--json", str(out), "--html", str(page)])
    doc = json.loads(out.read_text())
    assert rc == 0 and doc["passed"], capsys.readouterr()
    (d,) = doc["distributed"]
    assert d["mode"] == "fsdp-float8-precompute" and d["format"] == "e4m3fnuz" and d["sharded_casts"] > 0
    assert {c["dtype"] for c in d["casts"]} >= {"e4m3fnuz", "e5m2fnuz"}
    assert "pass  fsdp-float8-precompute tensorwise e4m3fnuz on 2 processes (gloo)" in capsys.readouterr().out
    tree = lxml_html.fromstring(page.read_text())
    assert tree.xpath("//section[@id='distributed']//tr[@class='pass']")
    assert len(tree.xpath("//polyline[@class='rank-curve']")) == 3  # the single-device run and both ranks

"""The suite's commands end to end: check, fingerprint, survey, sweep (CPU)."""

import json
import sys
from pathlib import Path

import pytest

from fp8check import cli

pytest.importorskip("torch")


def test_check_json_has_the_documented_shape(tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["check", "fp8_mutants:round_toward_zero_e4m3fnuz", "--format", "e4m3fnuz", "--input-dtype",
                     "float32", "--max-examples", "5", "--seed", "3", "--max-listed", "7", "--json", str(out)])
    assert code == 1
    r = json.loads(out.read_text())
    for key in ("kernel", "format", "profile", "passed", "checked", "categories", "divergences", "environment"):
        assert key in r
    assert r["kernel"] == "fp8_mutants:round_toward_zero_e4m3fnuz" and r["seed"] == 3
    assert len(r["divergences"]) == 7 < sum(r["categories"].values())
    assert set(r["categories"]) <= {"rounding", "overflow", "infinity", "nan", "signed_zero", "subnormal", "other"}
    for d in r["divergences"]:
        assert len(d["input_hex"]) == 10 and len(d["expected_hex"]) == 4 and len(d["actual_hex"]) == 4
    assert "--seed 3" in r["command"]


def test_check_by_default_takes_every_input_dtype_and_writes_a_results_file(tmp_path, capsys):
    """float64 too: torch's own cast (the control) rounds float64 through float32, which the default check
    catches (issue 32 item 4: it conformed unless --input-dtype float64 was given)."""
    out = tmp_path / "r.json"
    assert cli.main(["check", "fp8_mutants:correct_e4m3fnuz", "--format", "e4m3fnuz", "--max-examples", "5",
                     "--json", str(out)]) == cli.EXIT_DIVERGED
    doc = json.loads(out.read_text())
    assert doc["fp8check_results"] == 1 and "environment" in doc
    assert [c["input_dtype"] for c in doc["checks"]] == ["float32", "float16", "bfloat16", "float64"]
    assert all(c["passed"] and c["extra"]["calls"] > 50 for c in doc["checks"][:3])
    assert not doc["checks"][3]["passed"] and "rounding" in doc["checks"][3]["categories"]
    assert capsys.readouterr().out.count("CONFORMS") == 3


def test_check_of_a_builtin_adapter_and_a_16_bit_input_dtype(capsys):
    assert cli.main(["check", "ml_dtypes", "--format", "e4m3fnuz", "--input-dtype", "bfloat16",
                     "--max-examples", "0"]) == 0
    assert "CONFORMS" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["check", "fp8_mutants:raises", "--format", "e4m3fnuz"], "raised RuntimeError"),
    (["check", "nosuchmodule_q:f", "--format", "e4m3fnuz"], "cannot import kernel"),
    (["check", "fp8_mutants:correct_e4m3fnuz", "--format", "e4m3fnuz", "--profile", "nope"], "unknown profile"),
    (["check", "fp8_mutants:correct_e4m3fnuz", "--format", "e4m3fnuz", "--recipe", "tensorwise"], "only for --kind quantize"),
    (["check", "fp8_mutants:correct_e4m3fnuz", "--format", "e4m3fnuz", "--kind", "quantize"], "needs --recipe"),
    (["fingerprint", "fp8_mutants:returns_float", "--format", "e4m3fnuz"], "returned a torch.float32"),
    (["sweep", "torch-cpu", "--format", "e4m3fn", "--start", "5", "--stop", "5"], "empty"),
    (["sweep", "torch-cpu", "--format", "e4m3fn", "--limit", "zz"], "not an integer"),
    (["survey", "--kernel", "nope"], "not a built-in adapter"),
])
def test_usage_errors_are_one_line_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_check_kind_quantize_runs_the_recipe_check_end_to_end(tmp_path, capsys):
    # A correct quantizer conforms; the same without its eps clamp is caught
    # as a scale divergence, through the real CLI and the real recipes check.
    sys.path.insert(0, str(Path(__file__).parent))
    good = cli.main(["check", "quantizer_mutants:tensorwise_e4m3fn", "--kind", "quantize", "--recipe", "tensorwise",
                     "--format", "e4m3fn", "--max-examples", "5", "--seed", "1"])
    assert good == 0, capsys.readouterr()
    out = tmp_path / "q.json"
    bad = cli.main(["check", "quantizer_mutants:no_eps", "--kind", "quantize", "--recipe", "tensorwise",
                    "--format", "e4m3fn", "--max-examples", "5", "--seed", "1", "--json", str(out)])
    assert bad == 1
    result = json.loads(out.read_text())
    assert result["kind"] == "quantize" and not result["passed"] and result["categories"]["scale"] > 0


def test_fingerprint_names_what_a_mutant_really_does(tmp_path, capsys):
    out = tmp_path / "fp.json"
    assert cli.main(["fingerprint", "fp8_mutants:double_round_via_float16_e4m3fnuz", "--format", "e4m3fnuz",
                     "--json", str(out)]) == 0
    fp = json.loads(out.read_text())
    assert fp["exact"] == [] and fp["unexplained"] == 0
    assert fp["differences"] == ["rounds through float16 first (double rounding)"]
    assert cli.main(["fingerprint", "fp8_mutants:saturate_at_240_e4m3fnuz", "--format", "e4m3fnuz",
                     "--json", str(out)]) == 0
    exact = json.loads(out.read_text())["exact"]
    assert "satfinite" in exact and set(exact) <= {"satfinite", "triton-gfx942"}  # the same rules for e4m3fnuz


def test_fingerprint_of_torch_e4m3fn_names_the_registry_s_profile():
    from fp8check.casts import adapters
    from fp8check.casts.fingerprint import fingerprint

    from core_oracles import pinned

    obs = pinned("torch")
    fp = fingerprint(adapters.get_kernel("torch-cpu"), "e4m3fn", "bfloat16")
    assert obs.profile.name in fp.exact


def _with_e8m0_round_up(base):
    """A copy of ``base`` that rounds e8m0fnu subnormal inputs up, declaring that as a known upstream bug."""
    import dataclasses

    import numpy as np

    from fp8check import inputs, stacks

    def cast(x, fmt):
        codes = np.asarray(base.cast(x, fmt)).copy()
        if fmt.name == "e8m0fnu":
            name = inputs.dtype_name(x)
            codes[stacks.e8m0_subnormal_inputs(inputs.to_bits(x, name), name, fmt)] = 0x01
        return codes

    return dataclasses.replace(base, name="rounds-e8m0-up", cast_fn=cast, known=(stacks.E8M0_SUBNORMAL,))


def test_survey_says_a_known_upstream_divergence_is_one():
    from fp8check import formats
    from fp8check.casts import adapters
    from fp8check.casts.survey import survey, verdict

    planted = _with_e8m0_round_up(adapters.get_kernel("ml_dtypes"))
    rows = {r["format"].name: r for r in survey([planted], [formats.E8M0FNU, formats.E4M3FNUZ], max_examples=5,
                                                 seed=0, with_fingerprint=False)}
    assert verdict(rows["e4m3fnuz"]) == ("conforms", "green")
    assert verdict(rows["e8m0fnu"])[0] == "diverges: known upstream bug"
    by_dtype = {c.input_dtype: c for c in rows["e8m0fnu"]["checks"]}
    assert not by_dtype["float32"].passed and by_dtype["float32"].expected_failure
    assert by_dtype["float16"].passed  # float16 cannot reach 2^-127


def test_survey_of_an_unpinned_stack_reports_its_fingerprint_not_a_verdict():
    import dataclasses

    from fp8check import formats
    from fp8check.casts import adapters
    from fp8check.casts.survey import survey, verdict

    base = adapters.get_kernel("ml_dtypes")
    unpinned = dataclasses.replace(base, observation=None, unpinned="ml_dtypes 9.9.0 casts are not pinned")
    rows = survey([unpinned], [formats.E4M3FNUZ], max_examples=5, seed=0, with_fingerprint=True)
    text, _ = verdict(rows[0])
    assert text.startswith("unpinned: matches ") and "ieee" in text


def test_survey_command_exits_0_and_writes_every_check(tmp_path, capsys):
    out = tmp_path / "s.json"
    code = cli.main(["survey", "--kernel", "ml_dtypes", "--format", "e4m3fnuz", "--max-examples", "5",
                     "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "ml_dtypes:" in text and ("pinned by the stack registry" in text or "not pinned" in text)
    doc = json.loads(out.read_text())
    by = {(c["format"], c["input_dtype"]): c for c in doc["checks"]}
    assert set(by) == {("e4m3fnuz", d) for d in ("float32", "float16", "bfloat16")}
    assert "fingerprint" in by[("e4m3fnuz", "float32")]["extra"]


def test_survey_of_adapters_none_of_which_is_here_is_an_error(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert cli.main(["survey", "--kernel", "torch-cuda"]) == 2
    err = capsys.readouterr().err
    assert "nothing to survey: torch-cuda is not available here" in err and len(err.strip().splitlines()) == 1


def test_sweep_a_range_on_the_cpu_across_the_sign_bit(tmp_path):
    out = tmp_path / "sw.json"
    argv = ["sweep", "fp8_mutants:negative_zero_to_0x80_e4m3fnuz", "--format", "e4m3fnuz", "--device", "cpu",
            "--start", "0x7fff0000", "--stop", "0x80100000", "--chunk", "0x40000", "--json", str(out)]
    assert cli.main(argv) == 1
    r = json.loads(out.read_text())
    assert r["checked"] == 0x80100000 - 0x7FFF0000
    # -0.0 and every negative float32 below the tie to zero, 0x80000000..0x80100000: all 0x80
    assert r["categories"] == {"signed_zero": 0x100000}
    assert r["divergences"][0]["input_hex"] == "0x80000000"
    assert cli.main(["sweep", "torch-cpu", "--format", "e4m3fnuz", "--start", "0x3f000000",
                     "--limit", "0x100000"]) == 0


def test_sweep_takes_the_numpy_kernel_its_help_lists(tmp_path, capsys):
    # `--help` lists ml_dtypes among the kernels; on the CPU sweep calls it through its NumPy path
    assert "ml_dtypes" in cli.build_parser()._subparsers._group_actions[0].choices["sweep"].format_help()
    out = tmp_path / "sw.json"
    # around the overflow edge of e4m3fn: 464 is the tie above 448; ml_dtypes 0.6 and 0.7 agree on float32
    argv = ["sweep", "ml_dtypes", "--format", "e4m3fn", "--start", "0x43e00000", "--limit", "0x200000"]
    assert cli.main(argv + ["--profile", "ml_dtypes-0.7", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["checked"] == 0x200000 and r["device"] == "cpu" and r["passed"]
    # the same kernel against a profile it does not follow: every input past the tie 464 (0x43e80000, which
    # rounds to even, 448) is NaN from ml_dtypes and 448 under satfinite
    assert cli.main(argv + ["--profile", "satfinite", "--json", str(out)]) == 1
    r = json.loads(out.read_text())
    assert r["categories"] == {"overflow": 0x43E00000 + 0x200000 - 0x43E80001}
    assert {(d["expected_hex"], d["actual_hex"]) for d in r["divergences"]} == {("0x7e", "0x7f")}
    capsys.readouterr()


@pytest.mark.parametrize("writes_input", [False, True], ids=["", "kernel-writes-its-input"])
@pytest.mark.parametrize("profile, first", [("ieee", 0x43E00000), ("via-float16", 0x3F7F0000)])
def test_the_cpu_sweep_finds_what_encode_and_compare_find(profile, first, writes_input):
    # On the CPU the sweep compares run by run with the profile's table (ieee: torch saturates what ieee
    # makes NaN, past 464) or, without a table (a float16 intermediate), encodes and compares; either
    # way its counts and kept mismatches (in pattern order, over several blocks and both workers)
    # equal encode + compare, also when the kernel scribbles on its input after casting it.
    import dataclasses

    import numpy as np
    import torch

    from fp8check import formats, profiles, reference
    from fp8check.casts.adapters import get_kernel
    from fp8check.casts.sweep import sweep

    kernel = get_kernel("torch-cpu")
    if writes_input:
        cast = kernel.tensor_fn
        kernel = dataclasses.replace(kernel, tensor_fn=lambda x, f: (cast(x, f).clone(), x.fill_(1.0))[0])
    p = profiles.Profile(name=profile, intermediate="float16") if profile == "via-float16" else profiles.get(profile)
    fmt, stop = formats.E4M3FN, first + (3 << 18) + 5
    found = sweep(kernel, fmt, p, first, stop, device="cpu", chunk=1 << 18)
    bits = np.arange(first, stop, dtype=np.uint32)
    expected = reference.encode(bits.view(np.float32), fmt, p)
    actual = torch.from_numpy(bits.view(np.float32)).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    bad = np.flatnonzero(expected != actual)
    assert found["checked"] == bits.size and found["diverged"] == bad.size > 0
    assert found["bits"].tolist() == bits[bad].tolist()
    assert found["expected"].tolist() == expected[bad].tolist() and found["actual"].tolist() == actual[bad].tolist()


# -- every float32 input (the slow lane): the reference's float32 fast path (a table on the upper
# half plus the sticky bit) and the sweep's run-by-run comparison, judged against an independent
# implementation on all 2^32 inputs, and the sweep of torch's own cast.

@pytest.mark.slow  # about 15 s of ml_dtypes per format on one core
@pytest.mark.exhaustive
@pytest.mark.parametrize("fmt", ["e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"])
def test_every_float32_input_the_reference_equals_ml_dtypes(tmp_path, fmt):
    from core_oracles import pinned

    pinned("ml_dtypes")
    out = tmp_path / "sw.json"
    assert cli.main(["sweep", "ml_dtypes", "--format", fmt, "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["checked"] == 1 << 32 and r["passed"] and r["extra"]["diverged"] == 0


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_every_float32_input_torch_cpu_casts_as_it_claims(tmp_path, fmt):
    from core_oracles import pinned

    pinned("torch")
    out = tmp_path / "sw.json"
    assert cli.main(["sweep", "torch-cpu", "--format", fmt, "--device", "cpu", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["checked"] == 1 << 32


def test_survey_reports_a_stack_that_raises_for_one_format_and_goes_on():
    # Triton 3.6's interpreter raises for fnuz types; the survey must report
    # that format and still survey the others.
    import dataclasses

    from fp8check import formats
    from fp8check.casts import adapters
    from fp8check.casts.survey import survey

    base = adapters.get_kernel("ml_dtypes")

    def cast(x, fmt):
        if fmt.name == "e4m3fnuz":
            raise ValueError("fail to convert fp8e4b8 to ir type")
        return base.cast_fn(x, fmt)

    planted = dataclasses.replace(base, name="raises-on-fnuz", cast_fn=cast)
    rows = survey([planted], [formats.E4M3FNUZ, formats.E4M3FN], max_examples=5, seed=0, with_fingerprint=False)
    by_format = {r["format"].name: r for r in rows}
    assert "fail to convert fp8e4b8" in by_format["e4m3fnuz"]["unsupported"]
    assert by_format["e4m3fn"]["unsupported"] is None and by_format["e4m3fn"]["checks"]


def test_check_help_names_every_kind_each_option_serves():
    # a user read "--recipe ... (--kind quantize)" and "--args: --kind fused or quantize" and missed gemm
    from fp8check.matmul.gemm import EPILOGUES, GEMM_RECIPES

    check = cli.build_parser()._subparsers._group_actions[0].choices["check"]
    helps = {a.dest: " ".join((a.help or "").split()) for a in check._actions}
    assert "--kind gemm" in helps["recipe"] and "--kind quantize" in helps["recipe"]
    assert all(name in helps["recipe"] for name in GEMM_RECIPES), helps["recipe"]
    # the flag's choices are written out (importing the gemm module would slow every command's start): kept equal
    epilogue = next(a for a in check._actions if a.dest == "epilogue")
    assert tuple(epilogue.choices) == EPILOGUES and all(e in helps["epilogue"] for e in EPILOGUES)
    assert "--kind gemm" in helps["args"] and "(a, a_scales, b, b_scales)" in helps["args"]
    assert "--kind gemm" in helps["triton_target"]
    assert all(kind in helps["format"] for kind in ("decode", "dequant", "gemm")), helps["format"]


def test_the_gemm_table_keys_are_documented_and_the_readme_installs_triton():
    # docs/kernel-repo.md documented every kind's keys but [[tool.fp8check.gemm]]'s; the README never said that
    # Triton kernels need Triton installed
    from pathlib import Path

    from fp8check.declaration import KERNEL_KINDS
    from fp8check.declaration_reader import TABLE_KEYS
    from fp8check.matmul.gemm import EPILOGUES, GEMM_RECIPES

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "kernel-repo.md").read_text()
    start = doc.index("### GEMM kernels")
    section = doc[start:doc.index("\n#", start + 1)]
    assert "[[tool.fp8check.gemm]]" in section
    read = TABLE_KEYS - {k.replace("_", "-") for k in KERNEL_KINDS["gemm"].unread} - {
        "apply", "scale", "block", "code-dtypes", "output-dtype"}  # other kinds' keys, refused on a gemm
    for key in read | set(GEMM_RECIPES) | set(EPILOGUES):
        assert f"`{key}`" in section or f"{key} =" in section, key
    readme = (root / "README.md").read_text()
    assert "pip install triton" in readme

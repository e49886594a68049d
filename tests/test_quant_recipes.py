"""Recipes declared in a repository, the arithmetic real quantizers do, static-scale quantizers, and the
exactness verdict on codes divergences (issue 21). Each planted kernel is a real torch quantizer
(fp8check.quantizers.adapters.torch_quantizer) built for another arithmetic than the recipe it is held to."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fp8check import formats, profiles, quantizers  # noqa: E402
from fp8check.declarations import from_pyproject  # noqa: E402
from fp8check.errors import FP8CheckError, InvalidValueError  # noqa: E402
from fp8check.quantizers import exactness  # noqa: E402
from fp8check.quantizers.adapters import torch_quantizer  # noqa: E402
from fp8check.quantizers.conformance import check_quantizer  # noqa: E402
from fp8check.quantizers.static import check_static_quantizer  # noqa: E402

from fp8check.quantizers.cases import QuantCase  # noqa: E402



def _near_midpoints(rows: int = 64) -> np.ndarray:
    """Rows whose amax is not 448 times a power of two (so fl(1/s) is inexact) and whose other values are
    fl(midpoint * s) and its float32 neighbours: where x * fl(1/s) and x / s round to different codes."""
    v = quantizers.quantize  # noqa: F841 - the reference is what the rows are built around
    from fp8check.reference import decode

    pos = np.unique(decode(np.arange(256), formats.E4M3FN))
    pos = pos[np.isfinite(pos) & (pos > 0)]
    mids = (pos[:-1] + pos[1:]) / 2
    out = []
    rng = np.random.default_rng(7)
    for _ in range(rows):
        amax = np.float32(448 * (1 + rng.random()))
        s = np.float32(amax / np.float32(448))
        base = (mids * np.float64(s)).astype(np.float32)
        row = np.concatenate([[amax], base, np.nextafter(base, np.float32(0)), np.nextafter(base, np.float32(1e9))])
        out.append(row[row <= amax])
    width = max(len(r) for r in out)
    return np.stack([np.pad(r, (0, width - len(r))) for r in out]).astype(np.float32)


_X = _near_midpoints()
FAST = dict(max_examples=5, thorough=False)
RANDOM = dict(max_examples=0, cases=[QuantCase("random rows", _X)])


def test_exact_code_spec_equals_the_vectorised_model():
    rng = np.random.default_rng(1)
    x = np.concatenate([(rng.standard_normal(3000) * 10.0 ** rng.integers(-8, 8, 3000)),
                        [0.0, -0.0, 1e-45, 3e38]]).astype(np.float32)
    s = np.abs(rng.standard_normal(x.size) * 10.0 ** rng.integers(-20, 20, x.size)).astype(np.float32) + np.float32(1e-30)
    for fmt in (formats.E4M3FN, formats.E4M3FNUZ, formats.E5M2):
        for op in ("divide", "multiply"):
            p = profiles.get("satfinite")
            model = exactness.exact_codes(x, s, op, fmt, p)
            spec = [exactness.exact_code(float(a), float(b), op, fmt, p) for a, b in zip(x, s)]
            assert model.tolist() == spec


def test_reciprocal_multiply_kernel_diverges_from_a_dividing_recipe_and_conforms_to_its_own():
    divide = quantizers.get("rowwise")
    recip = quantizers.declared_recipe("mine", base="rowwise", apply="multiply-reciprocal")
    kernel = torch_quantizer(recip)
    r = check_quantizer(kernel, divide, **RANDOM)
    assert not r.passed and r.categories["codes"] > 0
    ex = r.extra["exactness"]
    assert ex["kernel_exact"] + ex["recipe_exact"] + ex["neither"] == r.categories["codes"]
    fv = quantizers.dequantize  # noqa: F841
    for d in (d for d in r.divergences if d.category == "codes"):
        # The verdict against the exact quotient, computed here with fractions from the shown values.
        from fractions import Fraction

        scale = float(d.detail.split("scale ")[1].split(" ")[0])
        q = Fraction(float(d.input_value)) / Fraction(scale)
        err_k, err_r = abs(Fraction(float(d.actual_value)) - q), abs(Fraction(float(d.expected_value)) - q)
        if err_k < err_r:
            assert "the kernel is exact here" in d.detail
        elif err_r < err_k:
            assert "the recipe is exact here" in d.detail
    assert check_quantizer(kernel, recip, **FAST).passed


def test_a_dividing_kernel_held_to_a_reciprocal_recipe_is_told_it_is_more_exact():
    kernel = torch_quantizer(quantizers.get("aiter-per-token").replace(apply=None))  # divides
    r = check_quantizer(kernel, "aiter-per-token", **RANDOM)
    assert not r.passed
    assert r.extra["exactness"]["kernel_exact"] > 0
    assert any("more exact than its declared recipe" in n for n in r.extra["notes"])
    assert any("the kernel is exact here" in d.detail for d in r.divergences)


def test_ulps_accepts_a_one_ulp_arithmetic_difference_and_says_within():
    kernel = torch_quantizer(quantizers.get("rowwise").replace(apply="multiply-reciprocal"))
    assert not check_quantizer(kernel, "rowwise", **RANDOM).passed
    r = check_quantizer(kernel, "rowwise", ulps=2, **RANDOM)
    assert r.passed, r.categories
    from fp8check.terminal.divergences import result_text

    assert "within 2 ulps" in str(r) and "bit for bit" not in str(r)
    assert "CONFORMS within 2 ulps" in result_text(r) and "bit for bit" not in result_text(r)
    import fp8check

    assert fp8check.declared_recipe is quantizers.declared_recipe and fp8check.static_quantizer


def test_stored_reciprocal_fbgemm_rowwise():
    fb = quantizers.get("fbgemm-rowwise")
    assert check_quantizer(torch_quantizer(fb), fb, **FAST).passed
    applied_stored = torch_quantizer(fb.replace(stored="applied"))  # the planted bug: stores what it applies
    r = check_quantizer(applied_stored, fb, **FAST)
    assert not r.passed and r.categories["scale"] > 0


def test_no_eps_recipe_catches_a_kernel_with_eps():
    no_eps = quantizers.declared_recipe("no-eps", base="rowwise", eps="none")
    assert no_eps.eps is None
    r = check_quantizer(torch_quantizer(quantizers.get("rowwise")), no_eps, **FAST)  # eps 1e-12: planted
    assert not r.passed and r.categories["scale"] > 0
    assert check_quantizer(torch_quantizer(no_eps), no_eps, **FAST).passed


def test_a_kernel_clamping_its_scale_where_the_recipe_clamps_amax_is_told_so():
    # max(amax / 448, eps) (vLLM's CUDA per-token kernel) against max(amax, eps) / 448: an all-zero or tiny row's
    # scale is eps itself; "the recipe maps amax to 4e-28, the kernel to 9e-31" said nothing of that
    rowwise = quantizers.get("rowwise")
    clamps_scale = torch_quantizer(rowwise.replace(name="clamps-scale", eps=None, scale_min=rowwise.eps))
    r = check_quantizer(clamps_scale, rowwise, **FAST)
    assert not r.passed and r.categories["scale"] > 0
    told = [d.detail for d in r.divergences if d.category == "scale"]
    assert told and all('with eps = "none", scale-min = 1e-12' in t for t in told), told
    assert any("amax 0.0" in t for t in told)  # an all-zero row's scale is the floor itself: told too
    from fp8check.terminal.divergences import result_text

    example = result_text(r).split("  scale ", 1)[1].splitlines()[1]
    assert 'with eps = "none"' in example, example  # the printed example is an explained one


def test_skip_nan_amax():
    skip = quantizers.declared_recipe("skip", base="rowwise", amax="skip-nan")
    kernel = torch_quantizer(skip)
    assert check_quantizer(kernel, skip, **FAST).passed
    r = check_quantizer(kernel, quantizers.get("rowwise").replace(nonfinite="ieee"), **FAST)
    assert not r.passed and r.categories["nonfinite"] > 0
    x = np.array([[1.0, np.nan, np.inf, 2.0]], np.float32)
    assert quantizers.block_amax(x, skip).tolist() == [[np.inf]]
    assert quantizers.block_amax(np.array([[1.0, np.nan]], np.float32), skip).tolist() == [[1.0]]


def _static_divide(x, scale):
    return (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)


def _static_reciprocal(x, scale):
    return (x.float() * (1.0 / scale)).clamp(-448, 448).to(torch.float8_e4m3fn)


def test_static_scale_quantizer():
    for dtype in ("float32", "float16", "bfloat16"):
        r = check_static_quantizer(_static_divide, format="e4m3fn", apply="divide", input_dtype=dtype)
        assert r.passed, (dtype, r.categories)
        assert r.kind == "static_quantize" and r.input_dtype == dtype
    bad = check_static_quantizer(_static_reciprocal, format="e4m3fn", apply="divide", input_dtype="float16")
    assert not bad.passed and bad.categories["codes"] > 0 and bad.input_dtype == "float16"
    d = bad.divergences[0]
    from fp8check.terminal.divergences import result_text

    assert len(d.input_hex) == 4 and "float16 in" in str(bad) and "(float16 in)" in result_text(bad)
    assert float(d.input_value) == float(np.uint16(int(d.input_hex, 16)).view(np.float16))  # the input, shown
    assert check_static_quantizer(_static_reciprocal, format="e4m3fn", apply="multiply-reciprocal",
                                  input_dtype="float32").passed
    # Every boundary scale, plus scales drawn by a Hypothesis strategy: the same ones for the same seed.
    from fp8check.quantizers.static import _drawn_scales, boundary_scales

    assert _drawn_scales(10, seed=1) == _drawn_scales(10, seed=1) != _drawn_scales(10, seed=2)
    assert r.extra["cases"] > boundary_scales().size
    given = check_static_quantizer(_static_divide, format="e4m3fn", scale=3.0 / 448, input_dtype="bfloat16")
    assert given.passed and given.extra["cases"] == 1


def test_a_static_kernels_own_division_is_declared_as_the_triton_target_divides():
    # vLLM-style static Triton kernels divide with /: sm90 compiles x * (1.0 / s) to a multiply by the hardware
    # reciprocal (div.full.f32), not fl(1/s) for every s; multiply-target-reciprocal and target-divide take the
    # target's own division (ops.divide_f32): the kernel conforms bit for bit, and a wrong one is still found
    pytest.importorskip("triton")
    from static_triton import launcher

    from fp8check.declaration_reader import static_quantizer
    from fp8check.declarations import run_declaration

    def check(fn, apply, target="sm90"):
        return run_declaration(static_quantizer(fn, format="e4m3fn", apply=apply, triton_target=target,
                                                name=f"{apply}@{target}"), max_examples=3)

    plain = check(launcher(True), "multiply-reciprocal")
    assert not plain.passed and plain.categories["codes"] > 0  # fl(1/s) is not sm90's reciprocal of every s
    own = check(launcher(True), "multiply-target-reciprocal")
    assert own.passed and own.target_dependent == 0, own.categories
    assert check(launcher(False), "target-divide").passed
    bad = check(launcher(False, bug=True), "target-divide")
    assert not bad.passed and bad.categories["codes"] > 0
    assert any('declares it (apply = "target-divide")' in n for n in bad.extra["notes"]), bad.extra["notes"]
    # sm100's div.full.f32 is bounded, not measured: its quotients are target-dependent, never divergences
    sm100 = check(launcher(True), "multiply-target-reciprocal", target="sm100")
    assert sm100.passed and sm100.target_dependent > 0



def test_a_dynamic_quantizers_own_division_is_declared_as_the_triton_target_divides():
    # a dynamic rowwise Triton quantizer divides with /: max(amax, eps) / fp8_max with fp8_max a run-time argument,
    # then x / s or x * (1.0 / s). On sm90 each is div.full.f32 (the hardware reciprocal, one multiply); the recipe's
    # target-* operations (apply, scale_divide) take the target's own division, so the kernel conforms bit for bit
    pytest.importorskip("triton")
    from static_triton import rowwise_launcher

    from fp8check.declaration_reader import quantizer_kernel
    from fp8check.declarations import run_declaration
    from fp8check.quantizers import get as get_recipe

    def check(fn, apply, scale_divide, target="sm90"):
        recipe = get_recipe("rowwise").replace(name="rowwise-own-div", eps=1e-10, nonfinite="skip-nan",
                                               apply=apply, scale_divide=scale_divide)
        return run_declaration(quantizer_kernel(fn, recipe=recipe, triton_target=target,
                                                name=f"{apply}/{scale_divide}@{target}"), max_examples=5)

    plain = check(rowwise_launcher(False), "divide", "divide")
    assert not plain.passed and plain.categories["scale"] > 0, plain.categories  # IEEE amax / 448 is not sm90's
    half = check(rowwise_launcher(False), "divide", "multiply-reciprocal")  # sm90's amax / 448: amax * fl(1/448)
    assert not half.passed and half.categories["codes"] > 0 and half.categories["scale"] == 0, half.categories
    own = check(rowwise_launcher(False), "target-divide", "target-divide")
    assert own.passed and own.target_dependent == 0, own.categories
    assert "the target's /" in own.extra["recipe_summary"]
    assert check(rowwise_launcher(True), "multiply-target-reciprocal", "target-divide").passed
    bad = check(rowwise_launcher(False, bug=True), "target-divide", "target-divide")
    assert not bad.passed and bad.categories["scale"] > 0, bad.categories
    # the note on a failed check tells how to declare the kernel's own /, unless the recipe already does
    # its scales are sm90's amax / 448, which the explanation names as the Triton kernel declares it
    scale = next(d for d in plain.divergences if d.category == "scale" and "scale-divide" in d.detail)
    assert 'the recipe\'s with scale-divide = "target-divide": the kernel divides with `/` as sm90' in scale.detail, \
        scale.detail
    plain_note = next(n for n in plain.extra["notes"] if "div.full.f32" in n)
    assert "take target-divide and multiply-target-reciprocal" in plain_note, plain_note
    bad_note = next(n for n in bad.extra["notes"] if "div.full.f32" in n)
    assert "take target-divide" not in bad_note, bad_note
    assert 'the recipe declares it (apply = "target-divide", scale-divide = "target-divide")' in bad_note, bad_note
    # AMD divides correctly rounded: the target-* operations are the IEEE ones there
    assert check(rowwise_launcher(False), "target-divide", "target-divide", target="gfx942").passed
    # sm100's div.full.f32 is bounded, not measured: its quotients are target-dependent, never divergences
    sm100 = check(rowwise_launcher(False), "target-divide", "target-divide", target="sm100")
    assert sm100.passed and sm100.target_dependent > 0, sm100.categories
    assert not any("tl.clamp" in n for n in own.extra.get("notes", ()))
    # a clamp before the cast turns NaN into a number, as the target lowers it: the failed check says which
    for target, lowering in (("sm90", "min.xorsign.abs.f32"), ("gfx942", "v_med3_f32")):
        clamped = check(rowwise_launcher(False, clamp=True), "target-divide", "target-divide", target=target)
        assert not clamped.passed and clamped.categories["nonfinite"] > 0, clamped.categories
        notes = clamped.extra.get("notes", ())
        assert any("tl.clamp turned" in n and lowering in n for n in notes), notes


def test_target_operations_are_the_correctly_rounded_ones_without_a_target():
    from fp8check.quantizers import get as get_recipe, quantize

    x = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32) * 3
    plain = get_recipe("rowwise")
    for own, rounded in (("target-divide", "divide"), ("multiply-target-reciprocal", "multiply-reciprocal")):
        q = quantize(x, plain.replace(apply=own, scale_divide=own))
        want = quantize(x, plain.replace(apply=rounded, scale_divide=rounded))
        assert np.array_equal(q.codes, want.codes) and np.array_equal(q.scales.view(np.uint32),
                                                                      want.scales.view(np.uint32))
    with pytest.raises(FP8CheckError, match="unknown Triton target .sm91."):
        plain.replace(apply="target-divide", triton_target="sm91")


def test_target_operations_without_a_target_say_they_were_correctly_rounded():
    # a recipe naming the Triton target's own / on a check without one (no triton-target, the CPU) is computed
    # correctly rounded, as documented; the result says so rather than letting "(the target's /)" stand
    r = quantizers.get("rowwise").replace(name="own-div", apply="target-divide", scale_divide="target-divide")
    res = check_quantizer(torch_quantizer(r), r, max_examples=2, thorough=False)
    assert res.passed and any("no Triton target" in n for n in res.extra.get("notes", ())), res.extra
    static = check_static_quantizer(_static_divide, format="e4m3fn", apply="target-divide", scale=3.0 / 448,
                                    input_dtype="bfloat16")
    assert any("no Triton target" in n for n in static.extra.get("notes", ())), static.extra
    plain = check_static_quantizer(_static_divide, format="e4m3fn", scale=3.0 / 448, input_dtype="bfloat16")
    assert not any("no Triton target" in n for n in plain.extra.get("notes", ()))


@pytest.mark.parametrize("value,meant", [("target_divide", "target-divide"), ("target-divid", "target-divide"),
                                         ("multiply-target-reciprocal ", "multiply-target-reciprocal")])
def test_a_misspelled_value_is_told_the_value_meant_as_a_pyproject_writes_it(value, meant):
    with pytest.raises(InvalidValueError) as err:
        quantizers.declared_recipe("mine", base="rowwise", apply=value)
    msg = str(err.value)
    assert f"did you mean '{meant}'?" in msg and "none, 'multiply'" in msg and "None" not in msg, msg


PYPROJECT = '''
[tool.fp8check.recipe.my-rowwise]
base = "rowwise"
apply = "multiply-reciprocal"
eps = "none"

[tool.fp8check.recipe.my-fnuz]
base = "my-rowwise"
format = "e4m3fnuz"

[tool.fp8check.recipe.blocky]
granularity = "block 1x128"
amax = "skip-nan"

[[tool.fp8check.quantizer]]
kernel = "mod:fn"
recipe = "my-fnuz"

[[tool.fp8check.static]]
kernel = "mod:static"
format = "e4m3fn"
apply = "multiply-reciprocal"
scale = 0.5
'''


def test_recipes_declared_in_pyproject(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text(PYPROJECT)
    decls, settings = from_pyproject(p)
    assert "recipe" not in settings
    q = decls[0]
    assert q.recipe.name == "my-fnuz" and q.recipe.format is formats.E4M3FNUZ
    assert q.recipe.element_op == "multiply-reciprocal" and q.recipe.eps is None
    assert q.fmt_name == "e4m3fnuz" and "--recipe my-fnuz" in q.command()
    s = decls[1]
    assert s.kind == "static" and s.scale == 0.5 and "--kind static" in s.command()
    for bad, says in (('[tool.fp8check.recipe.x]\nbase = "rowwise"\nwat = 1\n', "unknown key"),
                      ('[tool.fp8check.recipe.rowwise]\nbase = "tensorwise"\n', "built-in"),
                      ('[tool.fp8check.recipe.a]\nbase = "b"\n[tool.fp8check.recipe.b]\nbase = "a"\n', "cycle"),
                      ('[tool.fp8check.recipe.x]\ngranularity = "diagonal"\n', "granularity"),
                      ('[tool.fp8check.recipe.x]\nbase = "rowwise"\napply = "multiply"\n', "does not go with")):
        p.write_text(bad)
        with pytest.raises(InvalidValueError, match=says):
            from_pyproject(p)


def test_cli_recipe_from_the_repository(tmp_path, monkeypatch, capsys):
    from fp8check.cli import main

    (tmp_path / "pyproject.toml").write_text('[tool.fp8check.recipe.recip]\nbase = "tensorwise"\n'
                                             'apply = "multiply-reciprocal"\n')
    (tmp_path / "kern.py").write_text(
        "from fp8check import quantizers\nfrom fp8check.quantizers.adapters import torch_quantizer\n"
        "quant = torch_quantizer(quantizers.get('tensorwise').replace(apply='multiply-reciprocal'))\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.json"
    code = main(["check", "kern:quant", "--kind", "quantize", "--recipe", "recip", "--max-examples", "5",
                 "--json", str(out)])
    assert code == 0, capsys.readouterr().out
    assert json.loads(out.read_text())["extra"]["recipe"]["apply"] == "multiply-reciprocal"
    assert main(["check", "kern:quant", "--kind", "quantize", "--recipe", "nope"]) == 2


def test_a_recipe_of_a_pyproject_that_is_not_valid_toml_is_told_why_it_is_unknown(tmp_path, monkeypatch, capsys):
    # an unquoted value in the repository's pyproject.toml: the command line said only "unknown recipe 'r'; known
    # recipes: ..." (pytest, reading the same file, named the TOML error)
    from fp8check.cli import main

    (tmp_path / "pyproject.toml").write_text('[tool.fp8check.recipe.r]\nbase = "rowwise"\napply = target-divide\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "kern:quant", "--kind", "quantize", "--recipe", "r"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown recipe 'r'" in err and "pyproject.toml: not valid TOML" in err and "line 3" in err, err
    assert len(err.splitlines()) == 1, err


def test_max_listed_caps_quantizer_listing():
    kernel = torch_quantizer(quantizers.get("rowwise").replace(apply="multiply-reciprocal"))
    big = dict(max_examples=0, cases=[QuantCase(f"random {i}", _X * (i + 1)) for i in range(12)])
    assert len(check_quantizer(kernel, "rowwise", cap=3, **big).divergences) <= 3
    assert len(check_quantizer(kernel, "rowwise", cap=None, **big).divergences) > 50


RECIP_KERNEL = ("from fp8check import quantizers\nfrom fp8check.quantizers.adapters import torch_quantizer\n"
                "quant = torch_quantizer(quantizers.get('rowwise').replace(apply='multiply-reciprocal', eps=None))\n")


def test_a_python_api_recipe_reproduces_field_by_field(tmp_path, monkeypatch, capsys):
    from fp8check.cli import main
    from fp8check.declarations import quantizer_kernel

    (tmp_path / "kern_api_recipe.py").write_text(RECIP_KERNEL)  # a name no other test imports
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = quantizers.declared_recipe("mine", base="rowwise", apply="multiply-reciprocal", eps="none")
    cmd = quantizer_kernel("kern_api_recipe:quant", recipe=mine).command(max_examples=3, seed=0)
    # The known recipe closest to it (sglang-per-token: one field apart), changed field by field.
    assert "--recipe sglang-per-token --recipe-field nonfinite=finite " in cmd
    import shlex

    assert main(shlex.split(cmd)[1:]) == 0, capsys.readouterr().out
    assert main(["check", "kern_api_recipe:quant", "--kind", "quantize", "--recipe", "rowwise", "--max-examples", "3"]) == 1
    assert main(["check", "kern_api_recipe:quant", "--kind", "quantize", "--recipe", "rowwise", "--recipe-field", "wat"]) == 2


def test_a_conftest_declaration_names_a_recipe_of_the_pyproject(tmp_path, monkeypatch):
    from fp8check.declarations import quantizer_kernel

    (tmp_path / "pyproject.toml").write_text('[tool.fp8check.recipe.recip]\nbase = "rowwise"\n'
                                             'apply = "multiply-reciprocal"\n')
    monkeypatch.chdir(tmp_path)
    decl = quantizer_kernel("kern:quant", recipe="recip")
    assert decl.recipe.element_op == "multiply-reciprocal" and decl.command().endswith("--recipe recip")
    with pytest.raises(quantizers.UnknownRecipeError, match="declared here: recip"):
        quantizer_kernel("kern:quant", recipe="nope")


NAN_TO_MINUS_MAX = '''
import torch
from fp8check import quantizers
from fp8check.quantizers.adapters import torch_quantizer

_good = torch_quantizer(quantizers.get("rowwise"))


def quant(x):
    """FBGEMM's Triton row quantizer on a NaN: tl.clamp(NaN) gives -max (0xFE)."""
    codes, scales = _good(x)
    codes = codes.view(torch.uint8).clone()
    codes[torch.isnan(x)] = 0xFE
    return codes, scales
'''


def test_max_listed_on_the_cli_lists_every_nan_row_of_a_quantizer(tmp_path, monkeypatch, capsys):
    from fp8check.cli import main

    (tmp_path / "nanq.py").write_text(NAN_TO_MINUS_MAX)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["check", "nanq:quant", "--kind", "quantize", "--recipe", "rowwise", "--max-examples", "20"]
    assert main(args + ["--max-listed", "3", "--json", "three.json"]) == 1
    assert main(args + ["--max-listed", "0", "--json", "all.json"]) == 1
    out = capsys.readouterr().out
    three = json.loads((tmp_path / "three.json").read_text())
    every = json.loads((tmp_path / "all.json").read_text())
    assert len(three["divergences"]) == 3
    assert len(every["divergences"]) == sum(every["categories"].values()) > 3
    # Messages print plain numbers (no NumPy reprs), and a block without finite values says so.
    assert "np.float" not in out and "float32(" not in out
    assert all("0 of 0 finite" not in d["detail"] for d in every["divergences"])


def test_every_nan_row_is_listed_when_asked():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_loader("nanq_inline", loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(NAN_TO_MINUS_MAX, mod.__dict__)
    x = np.random.default_rng(3).standard_normal((120, 64)).astype(np.float32)
    x[:, 5] = np.nan  # 120 rows, each holding a NaN the kernel turns into -448
    case = dict(max_examples=0, cases=[QuantCase("NaN rows", x)])
    assert len(check_quantizer(mod.quant, "rowwise", cap=None, **case).divergences) == 120
    assert len(check_quantizer(mod.quant, "rowwise", cap=3, **case).divergences) == 3
    assert len(check_quantizer(mod.quant, "rowwise", **case).divergences) == 50  # the default cap
    one = check_quantizer(mod.quant, "rowwise", max_examples=0, cases=[QuantCase("1x1", np.full((1, 1), np.nan,
                                                                                               np.float32))])
    assert [d.detail.endswith("the block holds no finite value") for d in one.divergences] == [True]
    del sys


def test_scale_divide_and_an_all_zero_blocks_scale():
    """transformers' Fp8Quantize and FBGEMM's PyTorch path compute 448 / amax as 448 * reciprocal(amax), store
    the reciprocal, and give an all-zero block the scale 1.0: declared, they conform; the same kernel held to a
    dividing recipe diverges in its scales (planted), and so does one that divides, held to the declared one."""
    declared = quantizers.declared_recipe("hf", granularity="block 128x128", convention="scale",
                                          scale_divide="multiply-reciprocal", stored="reciprocal", zero_scale=1.0,
                                          amax="ieee", ragged=False)
    x = np.random.default_rng(5).uniform(0.1, 1.9, (512, 1024)).astype(np.float32)  # 32 blocks: ~8 differ
    x[:128, :128] = 0.0  # an all-zero block
    cases = dict(max_examples=0, cases=[QuantCase("blocks", x)])
    kernel = torch_quantizer(declared)
    assert check_quantizer(kernel, declared, **cases).passed
    assert check_quantizer(kernel, declared, max_examples=5, thorough=False).passed
    codes, scales = kernel(torch.from_numpy(x))
    assert scales[0, 0].item() == 1.0  # the zero block's stored reciprocal of 1.0
    dividing = declared.replace(scale_divide="divide")
    r = check_quantizer(kernel, dividing, **cases)
    assert not r.passed and r.categories["scale"] > 0
    # the message names the arithmetic the kernel does, not a target ("maps amax to 448, the kernel to 448")
    scale_details = [d.detail for d in r.divergences if d.category == "scale"]
    assert scale_details and all('scale-divide = "multiply-reciprocal"' in t and "maps amax" not in t
                                 for t in scale_details), scale_details[:2]
    back = check_quantizer(torch_quantizer(dividing), declared, **cases)
    assert not back.passed
    assert all('scale-divide = "divide"' in d.detail for d in back.divergences if d.category == "scale")


def test_a_kernel_writing_plus_zero_for_minus_zero_is_told_the_sign_of_zero_not_a_rounding():
    # From a new user's NVFP4 kernel: its sign bit came from x < 0, so -0.0 (and a negative value rounding to
    # zero in e4m3fn here) got +0; the detail said "the kernel rounds twice or otherwise differs: x / scale = 0".
    correct = torch_quantizer(quantizers.get("rowwise"))

    def sign_from_less_than_zero(x):
        codes, scales = correct(x)
        u8 = codes.view(torch.uint8)
        return torch.where(u8 == 0x80, torch.zeros_like(u8), u8).view(codes.dtype), scales

    x = np.array([[-0.0, 1.0, 448.0, 2.0], [3.0, -0.0, -1.0, 0.5]], np.float32)
    r = check_quantizer(sign_from_less_than_zero, "rowwise", max_examples=0, cases=[QuantCase("minus zero", x)])
    codes = [d for d in r.divergences if d.category == "codes"]
    assert r.categories["codes"] == 2 and codes
    for d in codes:
        assert "x / scale = -0 exactly, correctly rounded code 80" in d.detail, d.detail
        assert "the kernel's 00 is +0: a zero of the wrong sign, not a rounding" in d.detail, d.detail
        assert "rounds twice" not in d.detail

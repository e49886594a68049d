"""The gemm kind (fp8check.matmul.gemm): scaled FP8 GEMM kernels, interpreted under a target, checked bit for
bit against the target's tensor cores and the declared scales, each divergence located.

The planted kernels (tests/gemm_plants.py) are real Triton kernels run in the faithful interpreter: a
DeepSeek-style block-scaled GEMM and a rowwise one, each bug people ship behind a switch. Every planted bug
is a finding that names its output tile, its K block and the scale (or the accumulation); each correct twin
conforms on the same target.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm_plants as plants  # noqa: E402

import fp8check  # noqa: E402
import fp8check.triton as ft  # noqa: E402
from fp8check import cli  # noqa: E402
from fp8check.declarations import from_table  # noqa: E402
from fp8check.errors import InvalidValueError  # noqa: E402
from fp8check.matmul import gemm  # noqa: E402
from fp8check.casts.harness import Supports  # noqa: E402
from fp8check.matmul import tensorcore as tc  # noqa: E402

BLOCK = "block-1x128-128x128"
FORMAT = {"sm90": "e4m3fn", "gfx942": "e4m3fnuz"}


def checked(kernel, target, recipe=BLOCK, **kw):
    with ft.interpreting(), ft.faithful(target):
        return gemm.check_gemm(kernel, recipe=recipe, format=FORMAT[target], target=target, **kw)


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
@pytest.mark.parametrize("launcher,recipe", [(plants.block_gemm, BLOCK), (plants.row_gemm, "rowwise")])
def test_the_correct_twins_conform_bit_for_bit(launcher, recipe, target):
    r = checked(launcher, target, recipe)
    assert r.passed, [d.detail for d in r.divergences[:3]]
    assert r.kind == "gemm" and r.checked > 20000 and r.extra["gemm"]["cases"] == len(gemm.GEMM_CASES)
    # the specials case holds NaN operands: the AMD model brackets what they touch, counted and not judged
    assert (r.target_dependent > 0) == (target == "gfx942")


# bug, launcher, recipe, target, the category, what the first listed divergence says
PLANTED = [
    ("tail", plants.block_gemm, BLOCK, "sm90", "accuracy", ["K block 2 (k 256..319: the K tail)",
                                                           "products are missing"]),
    ("next-block", plants.block_gemm, BLOCK, "sm90", "scale",
     ["K block 0", "b_scales[0, 1] where a_scales[0, 0] x b_scales[0, 0] is declared"]),
    ("acc10", plants.block_gemm, BLOCK, "sm90", "accuracy",
     ["K block 0", "the declared scales a_scales[0, 0] x b_scales[0, 0], a sum other than the target's"]),
    ("ocp", plants.block_gemm, BLOCK, "gfx942", "nan", ["K block 0", "NaN in e4m3fn", "read as e4m3fn"]),
    ("axis", plants.row_gemm, "rowwise", "sm90", "scale",
     ["a_scales[1, 0] x b_scales[0, 0] where a_scales[0, 0] x b_scales[1, 0] is declared"]),
    # a bfloat16 output rounds the kernel's ratio to the block's dot to 2^-8: the scale pair is still found
    ("next-block", functools.partial(plants.block_gemm, out_dtype=torch.bfloat16), BLOCK, "sm90", "scale",
     ["K block 0", "b_scales[0, 1] where a_scales[0, 0] x b_scales[0, 0] is declared"]),
    # from a new user's wheel trial: b's scale read at the output row, a bfloat16 output; the nearest pair
    # of entries was a coincidental one (a_scales[5, 0] x b_scales[42, 0] for C[0, 32])
    ("b-by-row", functools.partial(plants.row_gemm, out_dtype=torch.bfloat16), "rowwise", "sm90", "scale",
     ["x b_scales[0, 0] where a_scales[0, 0] x b_scales[", "b's scale read at the output row 0, not at its column"]),
    ("acc10", functools.partial(plants.block_gemm, out_dtype=torch.bfloat16), BLOCK, "gfx942", "accuracy",
     ["element ("]),  # a single K block's truncation can vanish in the bfloat16 store: the sum is named
]


@pytest.mark.parametrize("bug,launcher,recipe,target,category,words", PLANTED,
                         ids=[p[0] + ("-bf16" if isinstance(p[1], functools.partial) else "") for p in PLANTED])
def test_each_planted_bug_is_a_finding_naming_tile_block_and_scale(bug, launcher, recipe, target, category, words):
    r = checked(functools.partial(launcher, bug=bug), target, recipe, cap=2)
    assert not r.passed and r.categories[category] > 0
    # the category is what the bug does, not a few elements of it: at least 9 in 10 diverging elements
    assert r.categories[category] >= 0.9 * sum(r.categories.values()), dict(r.categories)
    # every category found is listed, however late in the cases its elements come
    assert {c for c, k in r.categories.items() if k} == {d.category for d in r.divergences}
    first = next(d for d in r.divergences if d.category == category)
    assert "output tile (" in first.detail, first.detail
    for w in words:
        assert w in first.detail, first.detail
    assert first.condition.startswith("M=")


def test_a_scale_read_at_the_other_operand_s_index_is_named_on_every_element_listed():
    # b's scale read at the output row with a bfloat16 output: the nearest pair of entries within the output's
    # rounding was a coincidental one for some elements (a new user's C[0, 32]: a_scales[5, 0] x b_scales[42, 0])
    r = checked(functools.partial(plants.row_gemm, bug="b-by-row", out_dtype=torch.bfloat16), "sm90", "rowwise",
                cap=60)
    listed = [d for d in r.divergences if d.category == "scale"]
    assert len(listed) >= 30
    for d in listed:
        m, n = (int(v) for v in re.match(r"C\[(\d+), (\d+)\]", d.input_hex).groups())
        assert f"x b_scales[{m}, 0] where a_scales[{m}, 0] x b_scales[{n}, 0] is declared" in d.detail, d.detail


def test_a_kernel_that_cannot_take_the_gemm_arguments_is_one_line_and_exit_2(capsys):
    base = ["--kind", "gemm", "--recipe", BLOCK, "--format", "e4m3fn", "--triton-target", "sm90"]
    assert cli.main(["check", "gemm_plants:cast_shaped", *base]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cannot be called as a gemm kernel, kernel(a, a_scales, b, b_scales)" in err, err


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_k_tiles_shorter_than_the_scale_block_are_summed_as_the_kernel_sums_them(target, monkeypatch):
    # acc += tl.dot(a, b) * a_s * b_s over 64-wide K tiles of 128-wide scale blocks: each tile's dot from zero,
    # scaled and added on its own (the interpreter records the tiles' K); a correct kernel, not an accuracy finding
    tiles64 = functools.partial(plants.block_gemm, block_k=64)
    r = checked(tiles64, target)
    assert r.passed, [d.detail for d in r.divergences[:3]]
    next_block = checked(functools.partial(plants.block_gemm, block_k=64, bug="next-block"), target, cap=1)
    assert not next_block.passed and next_block.categories["scale"] > 0
    # without the recorded tiles the reference sums per 128-wide block: another sum, a false accuracy finding
    monkeypatch.setattr(tc, "record_dot_step", lambda k, from_zero: None)
    assert not checked(tiles64, target, cap=1).passed


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_the_scales_product_first_is_the_k_block_product_epilogue(target):
    product = functools.partial(plants.block_gemm, bug="product-first")
    assert checked(product, target, epilogue="k-block-product").passed
    other_order = checked(product, target, cap=1)  # (dot * a_s) * b_s rounds otherwise: the note says which
    assert not other_order.passed and any("epilogue k-block-product" in n for n in other_order.extra["notes"])
    assert not checked(plants.block_gemm, target, epilogue="k-block-product", cap=1).passed


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_a_rescaled_accumulator_is_an_epilogue_of_its_own(target):
    # FBGEMM's fast-accumulation block GEMM and lmdeploy's keep one chained accumulator in units of each K
    # block's scale: bit for bit under epilogue rescaled, and neither twin passes under the other's epilogue
    r = checked(plants.rescaled_gemm, target, epilogue="rescaled")
    assert r.passed, [d.detail for d in r.divergences[:3]]
    assert r.checked > 20000 and r.extra["gemm"]["epilogue"] == "rescaled"
    assert not checked(plants.rescaled_gemm, target, cap=1).passed  # under k-block
    assert not checked(plants.block_gemm, target, epilogue="rescaled", cap=1).passed
    inverted = checked(functools.partial(plants.rescaled_gemm, bug="inverted-ratio"), target, epilogue="rescaled",
                       cap=1)
    assert not inverted.passed and "M=50 N=130 K=320" in inverted.extra["gemm"]["diverging"]


def test_epilogue_rescaled_needs_float32_scales_per_k_block():
    with pytest.raises(InvalidValueError, match="needs float32 scales per K block"):
        gemm.check_epilogue(gemm.gemm_recipe("rowwise"), "rescaled")
    with pytest.raises(InvalidValueError, match="needs float32 scales per K block"):
        gemm.check_epilogue(gemm.gemm_recipe("mx"), "rescaled")
    for per_block in ("k-block", "k-block-product"):  # a recipe without K blocks (it was a ZeroDivisionError)
        with pytest.raises(InvalidValueError, match="has none .its scales are constant along K."):
            gemm.check_epilogue(gemm.gemm_recipe("rowwise"), per_block)
    with pytest.raises(InvalidValueError, match="its epilogue is k-block or k-block-product or rescaled, not end"):
        gemm.check_epilogue(gemm.gemm_recipe(BLOCK), "end")


@pytest.mark.parametrize("target", ["sm90", "gfx942"])
def test_both_operands_per_1x128_group_is_a_recipe_of_its_own(target):
    # a weight gradient's GEMM (torchao's 1x128_128x1): B's scales per row and K block, not per 128x128 block
    ones = functools.partial(plants.block_gemm, b_rows=1)
    assert checked(ones, target, "block-1x128-1x128").passed
    wrong = checked(plants.block_gemm, target, "block-1x128-1x128", cap=2)  # reads them per 128 rows
    assert not wrong.passed and wrong.categories["scale"] >= 0.9 * sum(wrong.categories.values())
    assert "b_scales[0, 0]" in next(d for d in wrong.divergences if d.category == "scale").detail


def test_a_declared_k_granularity_rounds_each_cases_k_up_and_keeps_its_m_and_n():
    # a kernel that does not mask a K tail (its callers' quantizers assert K % 128 == 0) declares it
    tail = functools.partial(plants.block_gemm, bug="tail")
    r = checked(tail, "sm90", supports=Supports(k_multiple_of=128))
    assert r.passed and r.extra["gemm"]["cases"] == len(gemm.GEMM_CASES)
    assert not checked(tail, "sm90", supports=Supports(k_multiple_of=64)).passed  # K=320 stays a tail of 64
    wrong = checked(functools.partial(plants.block_gemm, bug="next-block"), "sm90", supports=Supports(k_multiple_of=128))
    named = set(wrong.extra["gemm"]["diverging"])  # K=128 is one K block: a next-block read changes nothing there
    assert "M=50 N=130 K=384" in named and not any(k.endswith(("K=320", "K=100")) for k in named), named


def test_an_unmasked_k_tail_is_named_as_one_and_the_declaration_that_fits_it():
    unmasked = functools.partial(plants.block_gemm, bug="unmasked-tail")
    r = checked(unmasked, "sm90", cap=3)
    assert not r.passed and set(r.extra["gemm"]["diverging"]) == {"M=50 N=130 K=320"}, r.extra["gemm"]
    # the case's blocks each look like some scale pair (the next row's codes leak into every one): the note says
    # what they share, once
    note = next(n for n in r.extra["notes"] if "every divergence is in a case whose K is not a multiple of 128" in n)
    assert "M=50 N=130 K=320" in note and "--k-multiple-of 128" in note, note
    fine = checked(unmasked, "sm90", supports=Supports(k_multiple_of=128))
    assert fine.passed and fine.extra["gemm"]["k_multiple_of"] == 128
    assert any("rounded up to a multiple of 128" in n for n in fine.extra["notes"])
    # a bug in every case gets no such note
    acc10 = checked(functools.partial(plants.block_gemm, bug="acc10"), "sm90", cap=1)
    assert not acc10.passed and not any("K tail" in n for n in acc10.extra.get("notes", []))


def test_k_multiple_of_is_a_gemm_declaration_and_a_gemm_flag(capsys):
    base = ["--recipe", BLOCK, "--format", "e4m3fn", "--triton-target", "sm90", "--k-multiple-of", "128"]
    assert cli.main(["check", "gemm_plants:cast_shaped", "--kind", "cast", *base[2:]]) == 2
    assert "--k-multiple-of is only for --kind gemm" in capsys.readouterr().err
    with pytest.raises(InvalidValueError, match="k-multiple-of is for gemm kernels"):
        fp8check.cast_kernel("gemm_plants:cast_shaped", format="e4m3fn", supports={"k_multiple_of": 128})
    with pytest.raises(InvalidValueError, match="a whole number >= 1"):
        fp8check.gemm_kernel("gemm_plants:block_gemm", recipe=BLOCK, format="e4m3fn", triton_target="sm90",
                             supports={"k_multiple_of": 0})
    d = fp8check.gemm_kernel("gemm_plants:block_gemm", recipe=BLOCK, format="e4m3fn", triton_target="sm90",
                             supports={"k-multiple-of": 128})  # the pyproject spelling works in the API too
    assert "--k-multiple-of 128" in d.command()
    with pytest.raises(InvalidValueError, match="numel-multiple-of are not read by a gemm kernel's check"):
        fp8check.gemm_kernel("gemm_plants:block_gemm", recipe=BLOCK, format="e4m3fn", triton_target="sm90",
                             supports={"numel-multiple-of": 16})
    with pytest.raises(InvalidValueError, match="unknown 'supports' key.s. k-multiple-off; known: "):
        fp8check.gemm_kernel("gemm_plants:block_gemm", recipe=BLOCK, format="e4m3fn", triton_target="sm90",
                             supports={"k-multiple-off": 128})
    # flags a GEMM's check does not read are a usage error, not silently ignored
    for extra in (["--profile", "satfinite"], ["--ulps", "2"], ["--input-dtype", "float16"],
                  ["--numel-multiple-of", "16"], ["--max-numel", "100"]):
        assert cli.main(["check", "gemm_plants:block_gemm", "--kind", "gemm", *base, *extra]) == 2
        err = capsys.readouterr().err
        assert f"{extra[0]}: not read by --kind gemm" in err and "\n" not in err.strip(), err


def test_the_k_tail_is_found_only_on_shapes_with_a_tail():
    r = checked(functools.partial(plants.block_gemm, bug="tail"), "sm90")
    assert set(r.extra["gemm"]["diverging"]) == {"M=50 N=130 K=320", "M=16 N=64 K=100"}, r.extra["gemm"]


def test_the_reference_is_the_tensor_core_model_scaled_in_the_declared_order():
    # powers-of-two scales make every scaling exact: end and k-block then differ only where the chained
    # dot differs from the sum of per-block dots (sm90 truncates each chain step)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 0x78, size=(8, 256), dtype=np.uint8)
    b = rng.integers(0, 0x78, size=(16, 256), dtype=np.uint8)
    one = np.ones((1, 1), np.float32)
    values, dependent = gemm.gemm_reference("sm90", "e4m3fn", "tensorwise", a, one * 4, b, one / 8, epilogue="end")
    model = tc.mma("sm90", a, "e4m3fn", b.T, "e4m3fn")
    assert not dependent.any() and np.array_equal(values, model.values * np.float32(0.5))
    sa, sb = np.full((8, 2), 4, np.float32), np.full((1, 2), 0.125, np.float32)
    blocks, _ = gemm.gemm_reference("sm90", "e4m3fn", BLOCK, a, sa, b, sb)
    halves = [tc.mma("sm90", a[:, s], "e4m3fn", b[:, s].T, "e4m3fn").values for s in (slice(0, 128), slice(128, 256))]
    assert np.array_equal(blocks, (halves[0] * np.float32(0.5)) + (halves[1] * np.float32(0.5)))


def test_the_command_line_checks_a_gemm_kernel(tmp_path, capsys):
    base = ["--kind", "gemm", "--recipe", BLOCK, "--format", "e4m3fn", "--triton-target", "sm90"]
    assert cli.main(["check", "gemm_plants:block_gemm", *base]) == 0, capsys.readouterr()
    out = tmp_path / "g.json"
    capsys.readouterr()
    html = tmp_path / "g.html"
    assert cli.main(["check", "gemm_plants:block_gemm_next_block", *base, "--json", str(out), "--html", str(html)]) == 1
    printed = capsys.readouterr().out
    page = html.read_text()  # a GEMM's words: output elements against the reference, float32 bit fields
    assert re.search(r"[\d,]+</strong> of [\d,]+ output elements diverge from the reference of", page), page[:3000]
    assert "(e4m3fn operands; float32 out)" in page and "inputs diverge" not in page
    assert re.search(r"DIVERGES: [\d,]+ output elements differ", printed) and "output tile (0, 0)" in printed, printed
    head = printed.splitlines()[0]  # a GEMM's header: its operands and recipe, not a cast's input and profile
    assert f"e4m3fn operands, cpu, recipe {BLOCK}, epilogue k-block" in head and "profile" not in head, head
    assert "scaled by a_scales[0, 0] x b_scales[0, 1] where a_scales[0, 0] x b_scales[0, 0] is declared" in printed
    r = json.loads(out.read_text())
    assert r["kind"] == "gemm" and r["categories"]["scale"] > 0 and "b_scales[0, 1]" in r["divergences"][0]["detail"]
    assert r["command"].startswith("fp8check check gemm_plants:block_gemm_next_block --kind gemm --recipe " + BLOCK)
    # the project's own signature through an args hook
    assert cli.main(["check", "gemm_plants:block_gemm_own_signature", *base, "--args", "gemm_plants:gemm_args"]) == 0
    capsys.readouterr()
    assert cli.main(["check", "gemm_plants:block_gemm", "--kind", "gemm", "--format", "e4m3fn"]) == 2
    assert cli.main(["check", "gemm_plants:block_gemm", *base[:3], "no-such-recipe", *base[4:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no-such-recipe" in err[1], err
    assert "block-1x128-1x128" in err[0]  # every recipe named, from the one table
    # a wrong recipe is named before the kernel's module is imported (here one that does not exist)
    assert cli.main(["check", "no_such_module:kernel", *base[:3], "no-such-recipe", *base[4:]]) == 2
    err = capsys.readouterr().err
    assert "no-such-recipe" in err and "no_such_module" not in err, err


def test_a_gemm_check_says_it_compiles_before_its_silent_minute_and_only_then(capsys, monkeypatch):
    from fp8check.matmul import tensorcore

    compiled = tensorcore._compiled_step()
    if compiled is None:
        pytest.skip("numba (the fast extra) is not installed")
    assert compiled.cached() in (True, False, None)
    base = ["check", "gemm_plants:block_gemm", "--kind", "gemm", "--recipe", BLOCK, "--format", "e4m3fn",
            "--triton-target", "sm90"]
    monkeypatch.setattr(compiled, "cached", lambda: False)  # as in a fresh install
    monkeypatch.setenv("FP8CHECK_NUMBA", "1")  # compiled at the first call
    assert cli.main(base) == 0
    assert capsys.readouterr().out.startswith("note: compiling fp8check's tensor-core models")
    monkeypatch.delenv("FP8CHECK_NUMBA")  # a check's worth of products stays on NumPy: nothing compiles
    assert cli.main(base) == 0
    assert "compiling" not in capsys.readouterr().out
    monkeypatch.setenv("FP8CHECK_NUMBA", "1")
    monkeypatch.setattr(compiled, "cached", lambda: True)
    assert cli.main(base) == 0
    assert "compiling" not in capsys.readouterr().out


def test_a_pyproject_table_and_the_api_declare_a_gemm_kernel():
    decl = from_table("gemm", {"kernel": "gemm_plants:row_gemm", "recipe": "rowwise", "format": "e4m3fnuz",
                               "triton-target": "gfx942", "epilogue": "end"})
    assert decl.kind == "gemm" and decl.kind_row.result_kind == "gemm"
    with pytest.raises(InvalidValueError, match="epilogue is k-block"):
        from_table("gemm", {"kernel": "gemm_plants:block_gemm", "recipe": BLOCK, "format": "e4m3fn",
                            "epilogue": "end"})
    with pytest.raises(InvalidValueError, match="'epilogue' is for GEMM"):
        from_table("cast", {"kernel": "gemm_plants:block_gemm", "format": "e4m3fn", "epilogue": "end"})
    with pytest.raises(InvalidValueError, match="needs 'recipe'"):
        from_table("gemm", {"kernel": "gemm_plants:block_gemm", "format": "e4m3fn"})
    report = fp8check.check_gemm(plants.row_gemm, recipe="rowwise", format="e4m3fn", triton_target="sm90")
    assert report.passed and report.results[0].kind == "gemm"


def test_a_gemm_returning_another_shape_fails_each_case_saying_so():
    # not a refusal "inside the declared domain" (nothing need be declared): each case failed, naming the shape
    from fp8check.terminal.divergences import result_text

    def short(a, a_s, b, b_s):
        return plants.row_gemm(a, a_s, b, b_s)[:, :-1]

    r = fp8check.check_gemm(short, recipe="rowwise", format="e4m3fn", triton_target="sm90").results[0]
    assert not r.passed and r.categories.get("refused", 0) >= len(gemm.GEMM_CASES) // 2, r.categories
    assert "returned shape" in r.divergences[0].detail
    text = result_text(r)
    assert "returned another shape than (M, N)" in text and "declared domain" not in text, text


# -- MX GEMMs with tl.dot_scaled (the dot-scaled epilogue) ----------------------------------------------------


def mx_checked(kernel, target, cases=gemm.GEMM_CASES, epilogue="dot-scaled"):
    with ft.interpreting(), ft.faithful(target):
        return gemm.check_gemm(kernel, recipe="mx", format="e4m3fn", target=target, epilogue=epilogue, cases=cases)


@pytest.mark.parametrize("target", ["sm90", "sm100"])
def test_an_mx_gemm_with_dot_scaled_conforms_and_a_next_block_scale_is_found(target):
    # sm100: the kernel's 128 x 32 tiles lower to tcgen05's block-scaled MMA; sm90: upcast to bfloat16 + wgmma
    r = mx_checked(plants.mx_gemm, target)
    assert r.passed, [d.detail for d in r.divergences[:3]]
    assert r.checked > 20000 and r.extra["gemm"]["epilogue"] == "dot-scaled"
    assert ("sm100-tcgen05-mxf8f6f4" if target == "sm100" else "sm90-wgmma-16bit") in r.extra["profile_summary"]
    bad = mx_checked(functools.partial(plants.mx_gemm, bug="next-block"), target, gemm.GEMM_CASES[:1])
    assert not bad.passed and bad.categories["scale"] > 0
    first = next(d for d in bad.divergences if d.category == "scale")
    for words in ("output tile (0, 0)", "K block 0 (k 0..31)",
                  "scaled by a_scales[0, 0] x b_scales[0, 1] where a_scales[0, 0] x b_scales[0, 0] is declared"):
        assert words in first.detail, first.detail


def test_the_reference_follows_the_lowering_the_kernels_tiles_get():
    # 64-row tiles: Triton decomposes tl.dot_scaled on sm100 (ScaledBlockedToMMAv5 needs 128): the reference too
    r = mx_checked(functools.partial(plants.mx_gemm, block_m=64), "sm100")
    assert r.passed, [d.detail for d in r.divergences[:3]]
    assert "sm100-tcgen05-16bit, the operands upcast to bfloat16" in r.extra["profile_summary"]
    assert "mxf8f6f4" not in r.extra["profile_summary"]


def test_the_dot_scaled_epilogue_is_what_distinguishes_the_mx_kernel():
    # judged as a software MX GEMM (each 32-block's FP8 dot scaled in float32: the k-block epilogue) the same
    # correct tl.dot_scaled kernel diverges: the scales inside the instruction sum otherwise
    r = mx_checked(plants.mx_gemm, "sm90", gemm.GEMM_CASES[:1], epilogue="k-block")
    assert not r.passed and r.categories["accuracy"] > 0
    with pytest.raises(InvalidValueError, match="dot-scaled"):
        gemm.check_epilogue(gemm.gemm_recipe(BLOCK), "dot-scaled")
    with pytest.raises(InvalidValueError, match="k-block or dot-scaled"):
        gemm.check_epilogue(gemm.gemm_recipe("mx"), "end")


def test_the_command_line_checks_an_mx_gemm_kernel(capsys):
    base = ["--kind", "gemm", "--recipe", "mx", "--format", "e4m3fn", "--triton-target", "sm100",
            "--epilogue", "dot-scaled"]
    assert cli.main(["check", "gemm_plants:mx_gemm", *base]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert cli.main(["check", "gemm_plants:mx_gemm", *base[:3], BLOCK, *base[4:]]) == 2
    assert "dot-scaled" in capsys.readouterr().err


@pytest.mark.slow  # every case of a planted kernel, each divergence located (about 6 s)
def test_the_command_line_finds_an_mx_kernel_reading_the_next_blocks_scale(tmp_path, capsys):
    out = tmp_path / "mx.json"
    assert cli.main(["check", "gemm_plants:mx_gemm_next_block", "--kind", "gemm", "--recipe", "mx", "--format",
                     "e4m3fn", "--triton-target", "sm100", "--epilogue", "dot-scaled", "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "scaled by a_scales[0, 0] x b_scales[0, 1] where a_scales[0, 0] x b_scales[0, 0] is declared" in printed
    r = json.loads(out.read_text())
    assert r["kind"] == "gemm" and r["categories"]["scale"] > 0 and r["categories"]["accuracy"] == 0


def test_sm90_tiles_get_the_instruction_triton_compiles_them_to():
    # Triton 3.9 PTX of DeepSeek-V3's fp8_gemm_kernel: M 16/32 tiles mma.sync m16n8k16 f16, M 64 wgmma e4m3
    assert tc.triton_dot("sm90", 64, "e4m3fn", "e4m3fn") is None
    assert tc.triton_dot("sm90", 128, "e5m2", "e4m3fn") is None
    assert tc.triton_dot("sm90", 32, "e4m3fn", "e5m2") == tc.TritonDot(tc.MODELS["sm90-mma-16bit"], "float16",
                                                                         "float16", k_order=True)
    assert not tc.triton_dot("sm90", 16, "bfloat16", "bfloat16").k_order  # 16-bit tiles: K in increasing order
    # MMAv2's 8-bit K order (an H100's tiles: gpu/results/mma-tiles.json): per 32 k, the pairs (0, 1), (4, 5), ...
    # to one instruction, (2, 3), (6, 7), ... to the next
    order = tc.mma_k_order(64)
    assert order[:6].tolist() == [0, 1, 4, 5, 8, 9] and order[16:20].tolist() == [2, 3, 6, 7] and order[32] == 32
    assert sorted(tc.mma_k_order(100).tolist()) == list(range(128))  # a K tail padded to the group
    assert tc.triton_dot("sm100", 32, "e4m3fn", "e4m3fn") is None
    # the planted kernels' 32-row tiles: the check follows mma.sync and names it; a correct kernel conforms
    r = checked(plants.block_gemm, "sm90")
    assert r.passed and "sm90-mma-16bit, the fp8 operands widened to fp16" in r.extra["profile_summary"], \
        r.extra["profile_summary"]
    # ... and the instruction matters: the same kernel's output against the wgmma reference differs
    case = gemm.GemmCase(32, 64, 256)
    a, sa, b, sb = gemm.gemm_inputs(case, "e4m3fn", BLOCK, 7)
    import torch

    with ft.interpreting(), ft.faithful("sm90"):
        out = plants.block_gemm(torch.from_numpy(a).view(torch.float8_e4m3fn), torch.from_numpy(sa),
                                torch.from_numpy(b).view(torch.float8_e4m3fn), torch.from_numpy(sb)).numpy()
    for model, equal in (("sm90-mma-16bit", True), ("sm90-wgmma-fp8", False)):
        want, _ = gemm.gemm_reference("sm90", "e4m3fn", BLOCK, a, sa, b, sb, dot_model=model)
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32)) == equal, model

"""The check drives kernels the way real callers do (fp8check.casts.harness), and says what each bug needs.

Each planted bug of tests/fp8_mutants.py's second half hides from a check
that calls a kernel once on one sorted, contiguous batch; each is caught here
with the right category and the condition it needs, and the correct controls
pass. The default-invocation runs through ``fp8check check`` are the slow
lane's (``pytest -m slow``); the library runs here use one 16-bit input
dtype where the bug allows it, which takes a second or two.
"""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fp8_mutants as m  # noqa: E402
import fused_kernels as fk  # noqa: E402
import quantizer_mutants as qm  # noqa: E402

from fp8check import cli, formats, inputs, profiles  # noqa: E402
from fp8check.casts import engine, harness  # noqa: E402
from fp8check.casts.adapters.user import wrap_callable  # noqa: E402
from fp8check.casts.fused import allowed_codes, check_fused  # noqa: E402
from fp8check.terminal.divergences import result_text  # noqa: E402
from fp8check.quantizers.conformance import check_quantizer  # noqa: E402


def run(fn, dtype="float16", fmt="e4m3fnuz", profile="ieee", **kw):
    kernel = wrap_callable(fn, profile=profile)
    result, _ = engine.run_check(kernel, fmt, profile, input_dtype=dtype, max_examples=20, **kw)
    return result


def conditions(result, category):
    return [d.condition for d in result.divergences if d.category == category]


# -- the plan ----------------------------------------------------------------------


def test_the_plan_covers_every_remainder_mod_16_and_the_tails_of_every_block():
    bits = inputs.sweep_bits("float16")
    calls = harness.plan(bits, bits[:100], "float16", formats.E4M3FNUZ)
    sizes = {c.numel for c in calls}
    assert {n % 16 for n in sizes} == set(range(16))
    for block in (32, 64, 128, 256, 512, 1024):
        assert {block - 1, 1}.issubset({n % block for n in sizes}), block
    coverage = [c for c in calls if c.kind == "coverage"]
    assert all(c.numel % 1024 == 0 for c in coverage)
    assert np.array_equal(np.unique(np.concatenate([c.bits for c in coverage])), np.unique(bits))
    assert not np.array_equal(coverage[0].bits[:100], np.sort(coverage[0].bits[:100]))  # shuffled
    assert any(c.kind == "large" and c.numel >= 1 << 22 for c in calls)
    layouts = {c.layout for c in calls}
    assert {"transposed", "strided", "offset", "channels_last"} <= layouts
    # every pattern of a non-coverage call is a coverage pattern: a divergence only there has a cause
    covered = set(np.unique(np.concatenate([c.bits for c in coverage])).tolist())
    assert all(set(np.unique(c.bits).tolist()) <= covered for c in calls if c.kind != "coverage")


def test_layouts_have_the_strides_they_claim():
    x = np.arange(64 * 129, dtype=np.float32).reshape(64, 129)
    for layout, check in (("transposed", lambda t: t.stride() == (1, 64)),
                          ("strided", lambda t: t.stride() == (2 * 129, 2)),
                          ("offset", lambda t: t.storage_offset() == 1 * 132 + 3)):
        base, view = harness.layout_base(x, layout)
        t = view(harness.to_torch(base))
        assert check(t) and torch.equal(t, torch.from_numpy(x)), layout


# -- each planted bug, with the condition it needs ----------------------------------------


def test_controls_pass_every_call():
    result = run(m.correct_e4m3fnuz)
    assert result.passed and not result.refusals and result.extra["calls"] > 60


def test_an_unwritten_tail_needs_a_size_that_is_not_a_multiple_of_16():
    result = run(m.unwritten_tail_e4m3fnuz)
    assert not result.passed
    assert all(d.condition for d in result.divergences)  # never in a coverage call (multiples of 1024)
    assert any("only when the input has" in d.condition for d in result.divergences)


def test_a_kernel_that_ignores_strides_needs_non_contiguous_input():
    result = run(m.ignores_strides_e4m3fnuz)
    assert not result.passed
    assert all(c.startswith("only for non-contiguous input") or c.startswith("only for input with a storage offset")
               for c in (d.condition for d in result.divergences))


def test_an_input_written_in_place_is_its_own_category():
    result = run(m.clamps_input_in_place_e4m3fnuz, profile="satfinite")
    assert set(result.categories) == {"in_place"}
    (d,) = [d for d in result.divergences if d.category == "in_place"]
    assert float(d.actual_value) == 240.0 and "the kernel wrote" in d.detail


def test_a_race_shows_as_repeated_calls_that_differ():
    result = run(m.flips_a_bit_in_a_million_e4m3fnuz)
    assert result.categories.get("nondeterministic", 0) >= 1
    assert any("repeat" in d.condition or "identical copy" in d.condition for d in result.divergences
               if d.category == "nondeterministic")


def test_a_fast_path_for_finite_inputs_needs_an_all_finite_call():
    result = run(m.finite_fast_path_truncates_e4m3fnuz)
    assert result.categories.get("rounding", 0) > 0
    assert all("finite" in d.condition or "large input" in d.condition or "only" in d.condition
               for d in result.divergences)
    assert any("whole input is finite" in d.condition for d in result.divergences)


def test_a_path_for_large_inputs_needs_a_large_call():
    result = run(m.large_inputs_via_bfloat16_e4m3fnuz)
    assert not result.passed
    assert all("only for a large input" in d.condition for d in result.divergences)


def test_while_triton_interprets_the_large_call_is_smaller_and_the_result_says_so():
    """The interpreter costs milliseconds per program: the large call shrinks to 2^18 elements, and the
    result (its text too) says that a path taken only above that size was not reached."""
    pytest.importorskip("triton")
    from fp8check.triton import interpreting

    assert harness.large_numel("cpu") == (harness.LARGE_CPU, "")
    with interpreting():
        assert harness.large_numel("cpu")[0] == harness.LARGE_INTERPRETED
        assert harness.large_numel("cuda")[0] == harness.LARGE_GPU
        result = run(m.large_inputs_via_bfloat16_e4m3fnuz)
    assert result.passed  # the 2^20 path is not reached at 2^18 elements ...
    assert any("262,144 elements, not 4,194,304" in note for note in result.extra["notes"])
    assert "Triton kernels run in its interpreter" in result_text(result)  # ... and the result says so
    assert "notes" not in run(m.large_inputs_via_bfloat16_e4m3fnuz).extra


def test_a_bug_of_one_input_dtype_shows_in_that_dtype():
    assert run(m.float16_subnormals_flushed_e5m2fnuz, dtype="bfloat16", fmt="e5m2fnuz").passed
    result = run(m.float16_subnormals_flushed_e5m2fnuz, dtype="float16", fmt="e5m2fnuz")
    assert set(result.categories) == {"subnormal"}


@pytest.mark.parametrize("bit", [0, 9, 15])
def test_a_sticky_bit_the_kernel_forgets_is_found_among_the_low_bit_patterns(bit):
    kernel = wrap_callable(lambda x: m._sticky_blind(x, [bit]))
    result, _ = engine.run_check(kernel, "e4m3fnuz", "ieee", input_dtype="float32", max_examples=0, thorough=False)
    assert result.categories.get("rounding", 0) + result.categories.get("subnormal", 0) > 0, bit


@pytest.mark.slow
@pytest.mark.parametrize("bit", range(16))
def test_every_low_bit_a_kernel_could_forget_is_found(bit):
    kernel = wrap_callable(lambda x: m._sticky_blind(x, [bit]))
    result, _ = engine.run_check(kernel, "e4m3fnuz", "ieee", input_dtype="float32", max_examples=0, thorough=False)
    assert not result.passed, bit


def test_a_refused_layout_is_a_finding_and_the_rest_is_still_checked():
    def contiguous_only(x):
        if not x.is_contiguous():
            raise ValueError("expected a contiguous tensor")
        return x.to(torch.float8_e4m3fnuz)

    result = run(contiguous_only)
    assert result.passed and result.refusals and all(not r.declared for r in result.refusals)
    assert "expected a contiguous tensor" in result.refusals[0].error
    declared = run(contiguous_only, supports=harness.Supports(contiguous_only=True))
    assert declared.passed and not declared.refusals  # non-contiguous calls are not tried
    # a refusal inside the declared domain is a divergence
    inside = run(contiguous_only, supports=harness.Supports(input_dtypes=("float16",)))
    assert inside.categories.get("refused", 0) > 0 and not inside.passed


# -- quantizers ---------------------------------------------------------------------------


def test_a_quantizer_dividing_its_input_in_place_is_caught_and_the_reference_is_not_fooled():
    result = check_quantizer(qm.divides_input_in_place, "tensorwise", max_examples=5)
    assert result.categories.get("in_place", 0) > 0
    assert result.categories["scale"] == 0 and result.categories["codes"] == 0  # a private copy for the reference


def test_a_quantizer_ignoring_strides_needs_non_contiguous_input():
    result = check_quantizer(qm.rowwise_ignores_strides, "rowwise", max_examples=5)
    assert not result.passed
    assert all(d.condition.startswith("only for non-contiguous input") for d in result.divergences)
    # the terminal says so beside each example, as for a cast: without it, a scale of 1e35 for amax 7.0 reads
    # as a wrong formula, not as a stride the kernel ignores
    lines = result_text(result).splitlines()
    for cat in (c for c in ("scale", "codes") if result.categories[c]):
        i = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(cat))
        assert "only for non-contiguous input" in lines[i + 1], lines[i:i + 2]


def test_a_quantizer_reading_past_its_view_is_caught_on_views_only():
    # The storage around a view holds large values (fp8check.casts.harness.layout_base): zeros there
    # would hide a whole-storage amax.
    result = check_quantizer(qm.tensorwise_amax_of_whole_storage, "tensorwise", max_examples=5)
    assert result.categories["scale"] > 0
    assert all(d.condition.startswith("only for non-contiguous input") for d in result.divergences)


def test_a_quantizer_path_from_2_22_elements_needs_the_large_inputs():
    result = check_quantizer(qm.tensorwise_big_path_bf16_scale, "tensorwise", max_examples=5)
    assert result.categories["scale"] > 0
    assert all(d.condition.startswith("only for a large input") for d in result.divergences)


def test_a_quantizer_chunking_its_rows_from_4096_needs_the_tall_large_input():
    result = check_quantizer(qm.rowwise_chunks_rows_from_4096, "rowwise", max_examples=5)
    assert not result.passed
    assert all("8192x512" in d.condition for d in result.divergences)


def test_a_quantizer_refusing_ragged_shapes_is_still_checked_on_the_rest():
    from fp8check import quantizers
    from fp8check.quantizers.adapters import torch_quantizer

    r = quantizers.get("block-128x128")
    good = torch_quantizer(r)

    def refuses_ragged(x):
        if x.shape[0] % 128 or x.shape[1] % 128:
            raise AssertionError("weight dims must be multiples of 128")
        return good(x)

    result = check_quantizer(refuses_ragged, r, max_examples=5)
    assert result.passed and result.refusals and "multiples of 128" in result.refusals[0].error


# -- fused kernels ---------------------------------------------------------------------------


def test_allowed_codes_keep_saturation_nan_and_fnuz_zero_exact():
    fn, fnuz = formats.E4M3FN, formats.E4M3FNUZ
    y = np.array([1000.0, -1e-30, np.nan, 1.0625], np.float32)
    sat = profiles.SATFINITE
    # 1000 saturates to 448 (0x7e), never NaN; a tiny negative is fnuz 0x00, never 0x80; NaN is 0x80
    assert allowed_codes(y[:1], np.array([0x7E], np.uint8), fn, sat, 4).all()
    assert not allowed_codes(y[:1], np.array([0x7F], np.uint8), fn, sat, 4).any()
    assert allowed_codes(y[1:2], np.array([0x00], np.uint8), fnuz, sat, 4).all()
    assert not allowed_codes(y[1:2], np.array([0x80], np.uint8), fnuz, sat, 4).any()
    assert allowed_codes(y[2:3], np.array([0x80], np.uint8), fnuz, sat, 4).all()
    # 1.0625 is the tie between 0x38 and 0x39: within 1 ulp both are codes of nearby values
    assert allowed_codes(y[3:], np.array([0x39], np.uint8), fn, sat, 1).all()
    assert not allowed_codes(y[3:], np.array([0x39], np.uint8), fn, sat, 0).any()


def test_a_fused_kernel_passes_within_its_declared_ulps_and_not_without():
    exact = check_fused(fk.rmsnorm_quant_exact_e4m3fn, reference_fn=fk.rmsnorm_reference, args=fk.rmsnorm_args,
                        format="e4m3fn", profile="satfinite", thorough=False)
    assert exact.passed, str(exact)
    reordered = check_fused(fk.rmsnorm_quant_e4m3fn, reference_fn=fk.rmsnorm_reference, args=fk.rmsnorm_args,
                            format="e4m3fn", profile="satfinite", ulps=4, thorough=False)
    assert reordered.passed, str(reordered)
    strict = check_fused(fk.rmsnorm_quant_e4m3fn, reference_fn=fk.rmsnorm_reference, args=fk.rmsnorm_args,
                         format="e4m3fn", profile="satfinite", ulps=0, thorough=False)
    assert set(strict.categories) <= {"rounding"}  # summation order alone: ties decided the other way


@pytest.mark.parametrize("kernel, fmt, category", [
    (fk.rmsnorm_quant_sat448_e4m3fnuz, "e4m3fnuz", "overflow"),
    (fk.rmsnorm_quant_via_half_e4m3fn, "e4m3fn", "rounding"),
])
def test_a_fused_kernel_with_a_cast_bug_fails_with_the_right_category(kernel, fmt, category):
    result = check_fused(kernel, reference_fn=fk.rmsnorm_reference, args=fk.rmsnorm_args, format=fmt,
                         profile="satfinite", ulps=4, thorough=False)
    assert result.categories.get(category, 0) > 0, result.categories


def test_fused_check_through_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path.parent)
    out = tmp_path / "f.json"
    code = cli.main(["check", "fused_kernels:rmsnorm_quant_sat448_e4m3fnuz", "--kind", "fused", "--format",
                     "e4m3fnuz", "--profile", "satfinite", "--reference", "fused_kernels:rmsnorm_reference",
                     "--args", "fused_kernels:rmsnorm_args", "--ulps", "4", "--json", str(out)])
    assert code == 1
    doc = json.loads(out.read_text())
    assert doc["categories"].get("overflow", 0) > 0 and doc["extra"]["fused"]["ulps"] == 4
    assert "reproduce: fp8check check fused_kernels:rmsnorm_quant_sat448_e4m3fnuz --format e4m3fnuz" \
        in capsys.readouterr().out


# -- the default invocation, as a user runs it (CI's slow lane) ---------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mutant, category, condition", [
    ("sticky_bits_8_12_e4m3fnuz", "rounding", ""),
    ("unwritten_tail_e4m3fnuz", None, "only when the input has"),
    ("ignores_strides_e4m3fnuz", None, "only for non-contiguous input"),
    ("clamps_input_in_place_e4m3fnuz", "in_place", ""),
    ("flips_a_bit_in_a_million_e4m3fnuz", "nondeterministic", ""),
    ("finite_fast_path_truncates_e4m3fnuz", "rounding", "only when the whole input is finite"),
    ("float16_subnormals_flushed_e5m2fnuz", "subnormal", ""),
    ("large_inputs_via_bfloat16_e4m3fnuz", None, "only for a large input"),
])
def test_fp8check_check_defaults_catch_each_new_kind_of_bug(mutant, category, condition, tmp_path, capsys):
    out = tmp_path / "r.json"
    profile = "satfinite" if "clamps" in mutant else "ieee"
    fmt = mutant.rsplit("_", 1)[1]
    assert cli.main(["check", f"fp8_mutants:{mutant}", "--format", fmt, "--profile", profile,
                     "--json", str(out)]) == 1
    checks = json.loads(out.read_text())["checks"]
    found = {c for r in checks for c in r["categories"]}
    if category:
        assert category in found, found
    if condition:
        assert any(condition in d["condition"] for r in checks for d in r["divergences"])
        assert condition in capsys.readouterr().out

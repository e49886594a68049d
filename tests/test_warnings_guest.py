"""fp8check is a good guest (issue 21, smaller items): the IEEE arithmetic it means (a division by zero in an
interpreted Triton kernel, a float16 overflow among the fused check's inputs) leaves no RuntimeWarning in the
user's warnings summary. And a failed check of a kernel that divides with ``/`` on sm90 says how sm90 divides."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from fp8check.casts.fused import check_fused  # noqa: E402
from fp8check.declarations import quantizer_kernel, run_declaration  # noqa: E402
from fused_kernels import rmsnorm_args, rmsnorm_quant_e4m3fn, rmsnorm_reference  # noqa: E402


@triton.jit
def _rowwise_no_eps(x_ptr, y_ptr, s_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    s = tl.max(tl.abs(x)) / 448.0  # an all-zero row: s = 0, x / s = 0 / 0 (NaN), meant
    tl.store(s_ptr + row, s)
    tl.store(y_ptr + row * n + offs, tl.clamp(x / s, -448.0, 448.0).to(tl.float8e4nv), mask=offs < n)


def rowwise_no_eps(x):
    x = x.contiguous()
    m, n = x.shape
    y = torch.empty((m, n), dtype=torch.float8_e4m3fn)
    s = torch.empty((m, 1), dtype=torch.float32)
    _rowwise_no_eps[(m,)](x, y, s, n, BLOCK=triton.next_power_of_2(n))
    return y, s


def _runtime_warnings(record):
    return [f"{w.category.__name__}: {w.message} ({w.filename})" for w in record if issubclass(w.category, RuntimeWarning)]


def test_the_fused_check_leaves_no_runtime_warning():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        check_fused(rmsnorm_quant_e4m3fn, reference_fn=rmsnorm_reference, args=rmsnorm_args, format="e4m3fn",
                    profile="satfinite", ulps=2, input_dtype="float16", thorough=False)
    assert not _runtime_warnings(record)


def test_an_interpreted_kernel_dividing_by_zero_leaves_no_runtime_warning():
    from fp8check import quantizers

    recipe = quantizers.get("rowwise").replace(eps=None, nonfinite="ieee")
    decl = quantizer_kernel(rowwise_no_eps, recipe=recipe, triton_target="sm90", name="rowwise_no_eps")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run_declaration(decl, max_examples=2, thorough=False)
    assert not _runtime_warnings(record)


def test_a_failed_check_of_a_kernel_dividing_with_slash_on_sm90_says_how_sm90_divides():
    # amax / 448.0 is fl(amax * fl(1/448)) on sm90, x / s div.full.f32: every quotient known (the measured
    # reciprocals), so no bracket and no bracket note; the recipe's correctly rounded scales differ, and the
    # result says where such divergences come from
    from fp8check import quantizers

    recipe = quantizers.get("rowwise").replace(eps=None, nonfinite="ieee")
    r = run_declaration(quantizer_kernel(rowwise_no_eps, recipe=recipe, triton_target="sm90", name="rowwise_no_eps"),
                        max_examples=2, thorough=False)
    assert not r.passed and r.categories.get("scale") and r.target_dependent == 0
    notes = [n for n in r.extra.get("notes", []) if "div.full.f32" in n]
    assert len(notes) == 1 and "tl.div_rn" in notes[0] and "correctly rounded" in notes[0], r.extra.get("notes")

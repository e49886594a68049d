"""mykernels' own tests: shapes, dtypes, layouts (fp8check checks the numbers)."""

import importlib.util

import pytest
import torch

from mykernels import casts, fused, quant

CASTS = [(casts.cast_e4m3fnuz, torch.float8_e4m3fnuz), (casts.cast_e4m3fn, torch.float8_e4m3fn),
         (casts.cast_e5m2, torch.float8_e5m2)]


@pytest.mark.parametrize("cast,dtype", CASTS, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (2, 3, 129)])
def test_casts_keep_the_shape(cast, dtype, shape):
    x = torch.randn(shape)
    y = cast(x)
    assert y.dtype == dtype and y.shape == x.shape


def test_quantizers_return_codes_and_scales_of_the_documented_shapes():
    x = torch.randn(4, 300)
    codes, scale = quant.tensorwise_fnuz(x)
    assert codes.dtype == torch.float8_e4m3fnuz and codes.shape == x.shape and scale.shape == ()
    codes, scales = quant.per_token_group_quant_fnuz(x)
    assert codes.shape == x.shape and scales.shape == (4, 3)


def test_quantizers_leave_their_input_alone():
    x = torch.randn(8, 256)
    before = x.clone()
    quant.tensorwise_fnuz(x)
    quant.per_token_group_quant_fnuz(x)
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))


def test_rmsnorm_quant_matches_a_cast_of_its_reference_bit_for_bit():
    x = torch.randn(16, 512)
    weight, eps = fused.rmsnorm_args(x)
    expected = casts.cast_e4m3fn(fused.rmsnorm_reference(x, weight, eps))
    assert torch.equal(fused.rmsnorm_quant(x, weight, eps).view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_the_triton_cast_equals_the_torch_cast_on_a_cpu():
    # Runs the kernel in Triton's interpreter with gfx942's FP8 conversions (fp8check.triton).
    import fp8check.triton as ft

    from mykernels.triton_cast import cast_e4m3fnuz_triton

    x = torch.randn(3, 1000) * 100
    with ft.interpreting(), ft.faithful("gfx942"):
        y = cast_e4m3fnuz_triton(x.T)
    assert torch.equal(y.view(torch.uint8), casts.cast_e4m3fnuz(x.T).view(torch.uint8))

"""Quantize kernels with planted bugs (and one correct one), written the way
users write them: plain torch. tests/test_recipes_check.py shows that
``check_quantizer`` catches each with the right category; the CLI tests load
them as ``quantizer_mutants:NAME``."""

import torch

from fp8check import quantizers
from fp8check.quantizers.adapters import torch_quantizer


def _amax_finite(x):
    a = x.float().abs()
    return torch.where(torch.isfinite(a), a, torch.zeros_like(a)).amax()


def _cast(y, dtype):
    m = torch.finfo(dtype).max
    return y.clamp(-m, m).to(dtype)


def tensorwise_e4m3fn(x):
    """Correct for recipe ``tensorwise`` (e4m3fn)."""
    d = _amax_finite(x).clamp(min=1e-12) / 448.0
    return _cast(x.float() / d, torch.float8_e4m3fn), d


def no_eps(x):
    """Recipe ``tensorwise``, without the eps clamp: amax 0 gives scale 0 and 0/0."""
    d = _amax_finite(x) / 448.0
    return _cast(x.float() / d, torch.float8_e4m3fn), d


def fnuz_with_448(x):
    """Recipe ``tensorwise`` for e4m3fnuz, with e4m3fn's max in the scale."""
    d = _amax_finite(x).clamp(min=1e-12) / 448.0
    return _cast(x.float() / d, torch.float8_e4m3fnuz), d


def fnuz_with_224(x):
    """Recipe ``tensorwise`` for e4m3fnuz, with 224 (a value seen in ROCm code)."""
    d = _amax_finite(x).clamp(min=1e-12) / 224.0
    return _cast(x.float() / d, torch.float8_e4m3fnuz), d


def scale_in_float16(x):
    """Recipe ``torchao-tensorwise``, the scale computed in float16 (overflows past 65504)."""
    amax = x.float().abs().amax()
    s = (torch.tensor(448.0, dtype=torch.float16) / amax.clamp(min=1e-12).half()).float()
    return _cast(x.float() * s, torch.float8_e4m3fn), s


def divides_by_scale(x):
    """Recipe ``torchao-tensorwise`` (quantize multiplies by scale), but divides."""
    amax = x.float().abs().amax().double()
    s = (448.0 / amax.clamp(min=1e-12)).float()
    return _cast(x.float() / s, torch.float8_e4m3fn), s


def nonfinite_in_amax(x):
    """Recipe ``tensorwise`` (non-finite values left out of amax), but amax includes them."""
    d = x.float().abs().amax().clamp(min=1e-12) / 448.0
    return _cast(x.float() / d, torch.float8_e4m3fn), d


mx_ceil_where_floor_is_required = torch_quantizer(quantizers.get("mx-e8m0-ceil"))


def group_rowwise_skips_empty_groups(x, offsets):
    """Recipe ``group-rowwise``, but an empty group writes no scale row: the
    scales of the later groups land one row early."""
    m = x.shape[0]
    ends = offsets.tolist()
    scales = torch.zeros(len(ends), m)
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    row, start = 0, 0
    for end in ends:
        if end == start:
            continue
        part = x[:, start:end].float()
        d = torch.where(torch.isfinite(part.abs()), part.abs(), torch.zeros_like(part)).amax(dim=1).clamp(min=1e-12) / 448.0
        scales[row] = d
        out[:, start:end] = _cast(part / d[:, None], torch.float8_e4m3fn)
        row += 1
        start = end
    return out, scales


def rowwise_amax_without_abs(x):
    """Recipe ``rowwise``, amax taken without ``abs()``: a row whose largest magnitude is negative gets the
    scale of a smaller amax (or of eps)."""
    xf = x.float()
    finite = torch.where(torch.isfinite(xf), xf, torch.zeros_like(xf))
    d = finite.amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
    return _cast(xf / d, torch.float8_e4m3fn), d


def rowwise_stores_amax_over_max(x):
    """Recipe ``fbgemm-rowwise`` (codes of ``x * fl(448 / amax)``), but the scale stored is ``fl(amax / 448)``
    computed directly, not the float32 reciprocal of the one applied: 1 ulp off for some rows."""
    xf = x.float()
    a = xf.abs()
    amax = torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(dim=1, keepdim=True).clamp(min=1e-12)
    applied = torch.full_like(amax, 448.0) / amax
    return _cast(xf * applied, torch.float8_e4m3fn), amax / torch.tensor(448.0)


def raises(x):
    raise ValueError("this kernel is broken")


def wrong_scale_count(x):
    q, d = tensorwise_e4m3fn(x)
    return q, torch.stack([d, d])


not_callable = 42


def divides_input_in_place(x):
    """A correct tensorwise scale, but the scaling divides the caller's tensor in place."""
    xf = x.float()
    amax = torch.where(torch.isfinite(xf), xf.abs(), torch.zeros_like(xf)).amax().clamp(min=1e-12)
    scale = amax / 448.0
    q = x.div_(scale.to(x.dtype)) if x.dtype == torch.float32 else (xf / scale)
    return q.clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale.reshape(())


def rowwise_ignores_strides(x):
    """A rowwise quantizer that reads its input's storage as contiguous rows."""
    flat = torch.as_strided(x, x.shape, (x.shape[1], 1), x.storage_offset()).float()
    amax = torch.where(torch.isfinite(flat), flat.abs(), torch.zeros_like(flat)).amax(dim=1, keepdim=True)
    scale = amax.clamp(min=1e-12) / 448.0
    return (flat / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale


def tensorwise_amax_of_whole_storage(x):
    """A tensorwise quantizer that takes amax over the input's whole storage, not the view it was given."""
    storage = torch.tensor([], dtype=x.dtype).set_(x.untyped_storage()).float()
    amax = torch.where(torch.isfinite(storage), storage.abs(), torch.zeros_like(storage)).amax().clamp(min=1e-12)
    scale = amax / 448.0
    return _cast(x.float() / scale, torch.float8_e4m3fn), scale


def tensorwise_big_path_bf16_scale(x):
    """Recipe ``tensorwise``: from 2^22 elements a "big tensor" path computes the scale in bfloat16."""
    if x.numel() < 1 << 22:
        return tensorwise_e4m3fn(x)
    d = (_amax_finite(x).to(torch.bfloat16).clamp(min=1e-12) / 448.0).to(torch.bfloat16).float()
    return _cast(x.float() / d, torch.float8_e4m3fn), d


def rowwise_chunks_rows_from_4096(x):
    """Recipe ``rowwise``: from 4,096 rows it works in chunks of 1,024 rows and skips each chunk's last
    row (an inclusive end written as ``s + 1023``), which keeps torch.empty's bytes."""
    if x.shape[0] < 4096:
        return torch_quantizer(quantizers.get("rowwise", "e4m3fn"))(x)
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    scales = torch.empty(x.shape[0], 1)
    for s in range(0, x.shape[0], 1024):
        rows = slice(s, min(s + 1023, x.shape[0]))
        d = torch.where(torch.isfinite(x[rows].float().abs()), x[rows].float().abs(), 0).amax(dim=1, keepdim=True)
        d = d.clamp(min=1e-12) / 448.0
        out[rows], scales[rows] = _cast(x[rows].float() / d, torch.float8_e4m3fn), d
    return out, scales


def stale_scale(recipe_name):
    """A quantizer of recipe ``recipe_name`` whose scale buffer is read before this batch's amax lands: this
    batch's codes with the previous call's scales where the previous call had scales of this shape."""
    correct = torch_quantizer(quantizers.get(recipe_name))
    previous = []  # the last call's scales, one buffer

    def kernel(x, *rest):
        codes, scales, *more = correct(x, *rest)
        stale = previous[0] if previous and previous[0].shape == scales.shape else scales
        previous[:] = [scales]
        return (codes, stale, *more)

    kernel.__name__ = f"stale_scale[{recipe_name}]"
    return kernel

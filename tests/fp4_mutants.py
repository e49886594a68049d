"""FP4 quantize kernels with planted bugs, and their fixed twins, written the way users write them: torch for
the scales, ml_dtypes for the e2m1fn cast (an encoder independent of fp8check's), packing by hand.
tests/test_fp4_quantizers.py shows that ``check_quantizer`` names each bug's category and example.

- ``mxfp4`` / ``mxfp4_scale_one_step_low``: recipe ``mx-e8m0-floor`` for e2m1fn, packed low-first;
  the bug takes ``floor(log2 amax) - emax - 1`` for the e8m0 exponent (one step low).
- ``nvfp4`` / ``nvfp4_global_twice``: recipe ``nvfp4-ct``; the bug divides the element divisor
  ``scale / global`` by the global scale again (the global scale applied twice).
- ``mxfp4_high_first``: ``mxfp4`` packing element 2j in the high nibble (recipe declares low-first).
- ``mxfp4_ties_away``: ``mxfp4`` rounding each element's ties away from zero (a hand-written encoder).
"""

import ml_dtypes
import numpy as np
import torch

E2M1_EMAX = 2  # 6 = 1.5 * 2^2


def _e2m1_codes(y):
    """One e2m1fn code per element (uint8): RNE, saturating at +-6, through ml_dtypes."""
    return torch.from_numpy(y.detach().cpu().float().numpy().astype(ml_dtypes.float4_e2m1fn).view(np.uint8).copy())


def _e2m1_codes_ties_away(y):
    """One e2m1fn code per element, ties rounded away from zero (the planted bug: ``>=`` at every midpoint
    where round-to-nearest-even needs ``>`` at half of them), saturating at +-6."""
    a = y.detach().cpu().float().abs()
    code = sum((a >= t).to(torch.uint8) for t in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0))
    return code | (torch.signbit(y.detach().cpu().float()).to(torch.uint8) << 3)


def _pack(codes, high_first=False):
    first, second = codes[:, 0::2], codes[:, 1::2]
    low, high = (second, first) if high_first else (first, second)
    return (low | (high << 4)).to(torch.uint8)


def _mx(x, *, step=0, high_first=False, ties_away=False):
    m, n = x.shape
    xb = x.float().reshape(m, n // 32, 32)
    amax = xb.abs().amax(-1, keepdim=True)
    _, e = torch.frexp(amax)  # amax = f * 2^e, f in [0.5, 1): floor(log2 amax) = e - 1
    k = (e - 1 - E2M1_EMAX + step).clamp(min=-127)
    k = torch.where(amax == 0, torch.full_like(k, -127), k)
    bad = ~torch.isfinite(amax) | (k > 127)
    scale = torch.where(bad, torch.full_like(amax, float("nan")), torch.ldexp(torch.ones_like(amax), k))
    codes = (_e2m1_codes_ties_away if ties_away else _e2m1_codes)((xb / scale).reshape(m, n))
    biased = torch.where(bad, torch.full_like(k, 255), k + 127).to(torch.uint8).reshape(m, n // 32)
    return _pack(codes, high_first), biased


def mxfp4(x):
    """Correct for ``mx-e8m0-floor`` on e2m1fn, packed low-first: (packed codes, e8m0 scale bytes)."""
    return _mx(x)


def mxfp4_scale_one_step_low(x):
    """The planted bug: the e8m0 exponent one below the OCP rule's (every block scale halved)."""
    return _mx(x, step=-1)


def mxfp4_high_first(x):
    """The planted bug: element 2j packed in the high nibble."""
    return _mx(x, high_first=True)


def mxfp4_ties_away(x):
    """The planted bug: each element's code rounds ties away from zero (x / scale = 2.5 gives 3, not 2)."""
    return _mx(x, ties_away=True)


def _nvfp4(x, *, twice=False):
    m, n = x.shape
    xf = x.float()
    amax = xf.abs().max()
    g = 448.0 * 6.0 / torch.clamp(amax, min=torch.finfo(torch.float32).tiny)
    g = torch.nan_to_num(g, nan=1.0, posinf=1.0, neginf=1.0)
    xb = xf.reshape(m, n // 16, 16)
    block = xb.abs().amax(-1, keepdim=True) / 6.0
    s = torch.clamp(g * block, -448.0, 448.0).to(torch.float8_e4m3fn).float()
    s = torch.where(s == 0, torch.full_like(s, 0.125), s)
    divisor = s / g
    if twice:
        divisor = divisor / g
    codes = _e2m1_codes((xb / divisor).reshape(m, n))
    return _pack(codes), s.reshape(m, n // 16).to(torch.float8_e4m3fn), g.reshape(1)


def nvfp4(x):
    """Correct for ``nvfp4-ct``: (packed codes, e4m3fn block scales, float32 global scale)."""
    return _nvfp4(x)


def nvfp4_global_twice(x):
    """The planted bug: x / (scale / global / global)."""
    return _nvfp4(x, twice=True)

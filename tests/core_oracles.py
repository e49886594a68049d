"""Independent oracles for the core's tests: ml_dtypes, torch and gfloat.

Each function here turns an input array into what one real implementation
produces for it, so that a test can compare the reference with it bit for
bit. Nothing here calls fp8check's encode or decode.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np

from fp8check import formats, inputs, profiles, stacks
from fp8check.stacks import e8m0_subnormal_inputs

SIXTEEN_BIT = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def e8m0_subnormal_round_up(x: np.ndarray) -> np.ndarray:
    """Mask of the inputs ml_dtypes and torch round up into e8m0fnu 0x01 (the
    known upstream bug, :mod:`fp8check.stacks`)."""
    name = inputs.dtype_name(x)
    return e8m0_subnormal_inputs(inputs.to_bits(x, name), name, formats.E8M0FNU)


def installed_observation(stack: str, operation: str = "cast", device: str = "cpu"):
    """The stack registry's observation of ``stack`` as installed here, or None (unpinned or absent)."""
    return stacks.lookup(stack, operation=operation, device=device)


def pinned(stack: str, operation: str = "cast", device: str = "cpu"):
    """The observation of ``stack`` as installed here; skips the test naming what is unpinned."""
    import pytest

    obs = installed_observation(stack, operation, device)
    if obs is None:
        pytest.skip(stacks.unpinned_reason(stack, operation=operation, device=device))
    return obs


def known_mask(obs, x: np.ndarray, fmt: formats.Format, kind: str = "cast") -> np.ndarray:
    """Inputs of ``x`` that a known upstream bug of ``obs`` explains, input by input."""
    name = inputs.dtype_name(x)
    bits = inputs.to_bits(x, name)
    mask = np.zeros(x.shape, dtype=bool)
    for k in obs.known:
        if k.affects is not None and k.applies(fmt, name, kind):
            mask |= k.affects(bits, name, fmt)
    return mask


def all_16bit(source: str) -> np.ndarray:
    """Every bit pattern of a 16-bit source type, as an array of that type."""
    return np.arange(1 << 16, dtype=np.uint16).view(SIXTEEN_BIT[source])


def bits_of(x: np.ndarray) -> np.ndarray:
    return x.view(UNSIGNED[x.dtype.itemsize])


def random_float32(n: int, seed: int, fmt: formats.Format | None = None) -> np.ndarray:
    """n float32 inputs: half uniformly random bit patterns, half with
    exponents around ``fmt``'s range (where its rounding decisions are)."""
    rng = np.random.default_rng(seed)
    anywhere = rng.integers(0, 1 << 32, n // 2, dtype=np.uint64).astype(np.uint32)
    lo, hi = (-30, 20) if fmt is None else (fmt.emin - fmt.mantissa_bits - 3, fmt.emax + 3)
    exps = rng.integers(max(lo, -149), min(hi, 127) + 1, n - n // 2)
    mant = rng.integers(0, 1 << 23, exps.size)
    # Inputs whose low 16 bits are zero put the float32 fast path's sticky
    # bit to work: some ties of the format are exact here.
    mant[::3] &= 0x7F0000
    sign = rng.integers(0, 2, exps.size).astype(np.uint32) << 31
    near = sign | (((exps + 127).clip(0, 254).astype(np.uint32)) << 23) | mant.astype(np.uint32)
    return np.concatenate([anywhere, near]).view(np.float32)


def random_float64(n: int, seed: int, fmt: formats.Format) -> np.ndarray:
    """n float64 inputs near ``fmt``'s rounding ties: each tie of the format
    moved by a random offset of up to a float32 ulp (where rounding through
    float32 first goes wrong), plus random values across its range."""
    rng = np.random.default_rng(seed)
    values = np.array(sorted({float(v) for c in range(fmt.code_count)
                              if np.isfinite(v := float(fmt.exact_value(c))) and v >= 0}))
    ties = (values[:-1] + values[1:]) / 2
    pick = ties[rng.integers(0, ties.size, n // 2)]
    ulp32 = np.spacing(pick.astype(np.float32)).astype(np.float64)
    offsets = rng.uniform(-1.0, 1.0, pick.size) * ulp32
    offsets[::4] = np.spacing(pick[::4]) * rng.integers(-3, 4, offsets[::4].size)
    near = (pick + offsets) * np.where(rng.integers(0, 2, pick.size) == 1, -1.0, 1.0)
    wide = np.ldexp(rng.uniform(1.0, 2.0, n - n // 2),
                    rng.integers(fmt.emin - fmt.mantissa_bits - 4, fmt.emax + 4, n - n // 2))
    return np.concatenate([near, wide])


# -- ml_dtypes and torch ------------------------------------------------

def ml_dtypes_type(fmt: formats.Format):
    return getattr(ml_dtypes, fmt.ml_dtypes_name)


def ml_dtypes_codes(x: np.ndarray, fmt: formats.Format) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return x.astype(ml_dtypes_type(fmt)).view(np.uint8)


def ml_dtypes_decode(fmt: formats.Format) -> np.ndarray:
    codes = np.arange(fmt.code_count, dtype=np.uint8)
    return codes.view(ml_dtypes_type(fmt)).astype(np.float64)


def torch_tensor(x: np.ndarray):
    import torch

    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def torch_codes(x: np.ndarray, fmt: formats.Format) -> np.ndarray:
    import torch

    return torch_tensor(x).to(getattr(torch, fmt.torch_name)).view(torch.uint8).numpy()


def torch_decode(fmt: formats.Format) -> np.ndarray:
    import torch

    codes = torch.arange(fmt.code_count, dtype=torch.int32).to(torch.uint8)
    return codes.view(getattr(torch, fmt.torch_name)).to(torch.float64).numpy()


# -- gfloat ---------------------------------------------------------------

def gfloat_format(fmt: formats.Format):
    """gfloat's description of ``fmt`` (gfloat 0.5.2 lacks the fnuz formats:
    they are built here from their definition)."""
    from gfloat import Domain, FormatInfo
    from gfloat import formats as gf

    known = {
        "e4m3fn": gf.format_info_ocp_e4m3,
        "e5m2": gf.format_info_ocp_e5m2,
        "e8m0fnu": gf.format_info_ocp_e8m0,
        "e2m1fn": gf.format_info_ocp_e2m1,
        "e2m3fn": gf.format_info_ocp_e2m3,
        "e3m2fn": gf.format_info_ocp_e3m2,
    }
    if fmt.name in known:
        return known[fmt.name]
    # fnuz: no Inf, no -0; the -0 pattern is the one NaN.
    return FormatInfo(name=fmt.name, k=8, precision=fmt.mantissa_bits + 1, bias=fmt.bias,
                      is_signed=True, domain=Domain.Finite, has_nz=False, num_high_nans=0,
                      has_subnormals=True, is_twos_complement=False)


def gfloat_values(x: np.ndarray, fmt: formats.Format, profile, random_bits=None) -> np.ndarray:
    """The float64 values gfloat rounds ``x`` to under ``profile``'s rules.

    gfloat decides the rounding (RNE, RTZ, RNA, stochastic) and finite
    overflow; the profile's special-value rules (what ±Inf, NaN, zero and
    negatives into e8m0 become; fp4/fp6 NaN) are applied here as the
    profile states them, since gfloat has one fixed choice for each.
    """
    from gfloat import RoundMode, round_ndarray

    p = profiles.get(profile).resolve(fmt)
    with np.errstate(all="ignore"):
        v = x.astype(np.float64)
    if p.intermediate is not None:
        assert p.intermediate == "float32"
        with np.errstate(all="ignore"):
            v = v.astype(np.float32).astype(np.float64)  # NumPy rounds RNE, once
    fi = gfloat_format(fmt)
    rnd = {"rne": RoundMode.TiesToEven, "rtz": RoundMode.TowardZero,
           "rna": RoundMode.TiesToAway, "stochastic": RoundMode.StochasticFastest}[p.rounding]
    # Without Inf or NaN gfloat must saturate; so do the profiles (fp4/fp6).
    sat = p.overflow == "satfinite" or not (fmt.has_inf or fmt.has_nan)
    finite = np.isfinite(v)
    srbits = None if random_bits is None else np.asarray(random_bits, dtype=np.int64)
    # gfloat ignores the sign bit of an unsigned format but rounds the
    # negative value itself; the profiles that keep negatives take |x|.
    rounded_input = np.where(finite, v if fmt.signed else np.abs(v), 1.0)
    with np.errstate(all="ignore"):
        out = round_ndarray(fi, rounded_input, rnd, sat, srbits, p.stochastic_bits)
    negative = np.signbit(v) & fmt.signed
    top = fmt.max

    def signed(value: float) -> np.ndarray:
        return np.where(negative, -value, value)

    def nan_value() -> np.ndarray:
        if fmt.has_nan:
            return np.full(v.shape, np.nan)
        if p.nan_without_code == "max":
            return signed(top)
        flip = p.nan_without_code == "flipped_zero"
        return np.where(negative != flip, -0.0, 0.0)

    if p.infinity == "satfinite" or not (fmt.has_inf or fmt.has_nan):
        inf_value = signed(top)
    elif p.infinity == "nan" or not fmt.has_inf:
        inf_value = nan_value()
    else:
        inf_value = signed(np.inf)
    out = np.where(np.isinf(v), inf_value, out)
    out = np.where(np.isnan(v), nan_value(), out)
    if p.subnormals == "flush" and fmt.has_zero:
        zero = np.where(np.signbit(out) & fmt.has_negative_zero, -0.0, 0.0)
        out = np.where(np.abs(out) < fmt.smallest_normal, zero, out)
    if not fmt.signed:  # e8m0fnu: no sign, no zero
        negative_input = np.signbit(v) & (v != 0) & ~np.isnan(v)
        if p.unsigned_negative == "nan":
            out = np.where(negative_input, np.nan, out)
        elif p.unsigned_negative == "min":
            out = np.where(negative_input, fmt.smallest_normal, out)
        out = np.where(v == 0, np.nan if p.unsigned_zero == "nan" else fmt.smallest_normal, out)
    return out


def e8m0_expected_differences(x, ours, theirs, profile):
    """The inputs where gfloat 0.5.2 and fp8check differ on e8m0fnu, by cause.

    - Ties 1.5 * 2**e: gfloat rounds a tie to the even *code* (it has no
      mantissa bit to make even); fp8check, like torch and ml_dtypes, rounds
      it up to 2**(e+1), the OCP value rule's tie away from the smaller.
    - Inputs gfloat rounds below 2**-127: gfloat 0.5.2 returns values the
      format cannot hold (graphcore-research/gfloat#62, fixed by #66 after
      0.5.2); fp8check gives the smallest code, 2**-127, as ml_dtypes and
      torch do.
    """
    p = profiles.get(profile).resolve(formats.E8M0FNU)
    with np.errstate(invalid="ignore", over="ignore"):
        v = x.astype(np.float64)
        if p.intermediate == "float32":
            v = v.astype(np.float32).astype(np.float64)
    v = np.abs(v) if p.unsigned_negative == "magnitude" else v
    m, e = np.frexp(v)  # v = m * 2**e; a tie is 0.75 * 2**e = 1.5 * 2**(e-1)
    lower_code = e - 1 + 127
    tie = (p.rounding == "rne") & (m == 0.75) & (lower_code >= 0) & (lower_code <= 254) & (lower_code % 2 == 0)
    underflow = np.isfinite(theirs) & (np.abs(theirs) > 0) & (np.abs(theirs) < 2.0**-127)
    up = tie & (lower_code < 254)
    assert (ours[up] == np.ldexp(1.0, lower_code[up] - 126)).all()
    # The tie above max (1.5 * 2**127) overflows: NaN, or max when saturating.
    beyond = ours[tie & (lower_code == 254)]
    assert (np.isnan(beyond) | (beyond == 2.0**127)).all()
    assert (ours[underflow] == 2.0**-127).all()
    return tie | underflow


# -- comparison -------------------------------------------------------------

def same_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal bit patterns, or both NaN (-0.0 != +0.0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


def nan_mask(fmt: formats.Format) -> np.ndarray:
    return np.array([fmt.is_nan(c) for c in range(fmt.code_count)])


def same_code(ours: np.ndarray, theirs: np.ndarray, fmt: formats.Format) -> np.ndarray:
    """Elementwise: the same code, or two NaN codes."""
    nan = nan_mask(fmt)
    return (ours == theirs) | (nan[ours] & nan[theirs])


def first_differences(inputs: np.ndarray, ours, theirs, where: np.ndarray, limit: int = 5) -> list[str]:
    """A few differing inputs in hex, for an assertion message."""
    bits = bits_of(inputs) if inputs.dtype.kind == "f" or inputs.dtype == ml_dtypes.bfloat16 else inputs
    width = inputs.dtype.itemsize * 2
    idx = np.flatnonzero(where)[:limit]
    return [f"0x{int(bits[i]):0{width}x}: ours {_show(ours[i])}, theirs {_show(theirs[i])}" for i in idx]


def _show(v) -> str:
    if isinstance(v, (np.integer, int)):
        return f"{int(v):#04x}"
    return repr(float(v))

"""Planted bugs: FP8 cast kernels that are each wrong in one known way.

Each is a plausible kernel built on torch's own ``.to()`` cast (which is
exact once a value is on the fp8 grid) with one mistake that real kernels
make. The suite's power is tested by checking that ``fp8check check`` and
the pytest properties catch every one with the right category, and that
the correct controls pass (no false alarms).

All take a torch tensor (float32, float16 or bfloat16) and return an fp8
tensor or uint8 codes.
"""

import torch

FNUZ = torch.float8_e4m3fnuz
E4M3FNUZ_EMIN = -7  # smallest normal 2^-7 (bias 8)
E4M3_MANTISSA = 3


def _quantum(x, emin, mantissa_bits):
    """The spacing of the fp8 grid at each |x| (the subnormal spacing below 2^emin)."""
    _, e = torch.frexp(x)  # x = m * 2**e with 0.5 <= |m| < 1
    binade = torch.clamp(e - 1, min=emin)
    return torch.ldexp(torch.ones_like(x), binade - mantissa_bits)


def correct_e4m3fnuz(x):
    """The control: torch's own cast (RNE, non-saturating): passes under ieee."""
    return x.to(FNUZ)


def saturate_at_240_e4m3fnuz(x):
    """The control for satfinite: clamp to the fnuz max, then cast."""
    return x.clamp(-240.0, 240.0).to(FNUZ)


def round_toward_zero_e4m3fnuz(x):
    """Truncates onto the grid instead of rounding to nearest."""
    x = x.float()
    q = _quantum(x, E4M3FNUZ_EMIN, E4M3_MANTISSA)
    return (torch.trunc(x / q) * q).to(FNUZ)


def round_ties_away_e4m3fnuz(x):
    """Rounds half away from zero (floor(|x|/q + 0.5)), as a hand-written kernel might."""
    x = x.float()
    q = _quantum(x, E4M3FNUZ_EMIN, E4M3_MANTISSA)
    return torch.copysign(torch.floor(x.abs() / q + 0.5) * q, x).to(FNUZ)


def saturate_at_448_e4m3fnuz(x):
    """Saturates with the e4m3fn maximum (448) on an fnuz target (max 240)."""
    return x.clamp(-448.0, 448.0).to(FNUZ)


def negative_zero_to_0x80_e4m3fnuz(x):
    """Encodes |x| and ORs the sign bit back in: -0.0 and tiny negatives become 0x80 (NaN in fnuz)."""
    codes = x.abs().to(FNUZ).view(torch.uint8)
    return codes | (torch.signbit(x).to(torch.uint8) << 7)


def flush_subnormals_e4m3fnuz(x):
    """Flushes inputs below the smallest normal (2^-7) to signed zero."""
    return torch.where(x.abs() < 2.0**E4M3FNUZ_EMIN, x * 0, x).to(FNUZ)


def double_round_via_float16_e4m3fnuz(x):
    """Rounds to float16 first, then to fp8: double rounding."""
    return x.to(torch.float16).to(FNUZ)


def inf_to_max_e5m2(x):
    """Maps ±Inf to ±57344 before casting: wrong for a non-saturating profile (Inf must stay Inf)."""
    return torch.where(torch.isinf(x), torch.sign(x) * 57344.0, x).to(torch.float8_e5m2)


def correct_e5m2(x):
    """The control for inf_to_max_e5m2 (torch's e5m2 cast: NaN is 0x7F/0xFF, as torch-2.12 says)."""
    return x.to(torch.float8_e5m2)


# Kernels that cannot be used at all: the CLI must say so in one line, exit 2.
def raises(x):
    raise RuntimeError("kernel exploded\nsecond line of the message")


def returns_float(x):
    return x * 2


def returns_wrong_shape(x):
    return x[:1].to(FNUZ)


def returns_wrong_fp8_type(x):
    return x.to(torch.float8_e4m3fn)


not_callable = 42


# -- bugs that hide in how a kernel is called (the harness finds them) ---------------


def _sticky_blind(x, bits):
    """float32 -> e4m3fnuz that clears mantissa ``bits`` before rounding: a sticky-bit mask typo."""
    b = x.float().contiguous().view(torch.int32)
    mask = 0
    for i in bits:
        mask |= 1 << i
    return (b & ~mask).view(torch.float32).to(FNUZ)


def sticky_bits_8_12_e4m3fnuz(x):
    """Forgets mantissa bits 8..12 when deciding to round up (float32 only: 16-bit inputs have none)."""
    if x.dtype != torch.float32:
        return x.to(FNUZ)
    return _sticky_blind(x, range(8, 13))


def unwritten_tail_e4m3fnuz(x):
    """Converts whole blocks of 16 and never writes the last partial block (torch.empty leftovers)."""
    flat = x.reshape(-1)
    out = torch.empty(flat.shape, dtype=torch.uint8)
    full = flat.numel() - flat.numel() % 16
    out[:full] = flat[:full].to(FNUZ).view(torch.uint8)
    out[full:] = 0x55
    return out.reshape(x.shape)


def ignores_strides_e4m3fnuz(x):
    """Reads its input's storage as if it were contiguous (a raw-pointer kernel without a .contiguous())."""
    flat = torch.as_strided(x, (x.numel(),), (1,), x.storage_offset())
    return flat.to(FNUZ).reshape(x.shape)


def clamps_input_in_place_e4m3fnuz(x):
    """Saturates correctly, but by clamping the caller's tensor in place."""
    return x.clamp_(-240.0, 240.0).to(FNUZ)


_CALLS = [0]


def flips_a_bit_in_a_million_e4m3fnuz(x):
    """A race: one element in about a million gets its lowest bit flipped, at a different place each call."""
    c = x.to(FNUZ).view(torch.uint8).reshape(-1).clone()
    _CALLS[0] += 1
    if c.numel() >= 1 << 20:
        g = torch.Generator().manual_seed(_CALLS[0])
        idx = torch.randint(0, c.numel(), (c.numel() >> 20,), generator=g)
        c[idx] ^= 1
    return c.reshape(x.shape)


def finite_fast_path_truncates_e4m3fnuz(x):
    """A fast path for all-finite inputs that rounds toward zero; the slow path is right."""
    if torch.isfinite(x).all():
        return round_toward_zero_e4m3fnuz(x)
    return x.to(FNUZ)


def float16_subnormals_flushed_e5m2fnuz(x):
    """Flushes float16 subnormal inputs (a DAZ intrinsic); float32 and bfloat16 are right. (e5m2fnuz's
    subnormals reach down to 2^-17, so float16 subnormals have codes of their own.)"""
    if x.dtype == torch.float16:
        x = torch.where(x.abs() < 2.0 ** -14, x * 0, x)
    return x.to(torch.float8_e5m2fnuz)


def large_inputs_via_bfloat16_e4m3fnuz(x):
    """A path for inputs of 2^20 elements or more that rounds through bfloat16 first."""
    if x.numel() >= 1 << 20:
        return x.to(torch.bfloat16).to(FNUZ)
    return x.to(FNUZ)

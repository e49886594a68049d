"""MMA-Sim (``mmasim`` 2.1.1, a test-only dependency) as the oracle of :mod:`fp8check.matmul.tensorcore`.

Each ``KIND`` names one MMA-Sim instruction and the fp8check model that must agree with it; ``draw``
makes random-bit dot-product instances (one output element each: K operand codes per side, a float32
accumulator, block scales), ``oracle`` runs MMA-Sim's arithmetic (``dpa``: what every output element
of the instruction computes) on them and ``ours`` runs :func:`fp8check.matmul.tensorcore.dot_instances`.
Used by tests/test_matmul_tensorcore.py and benchmarks/mma_models.py.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import numpy as np

from fp8check.matmul import tensorcore as tc

HAVE_MMASIM = importlib.util.find_spec("mmasim") is not None


def unusable() -> str | None:
    """Why mmasim cannot run here (None when it can): it builds a small C++ extension with torch on its
    first import, which needs a compiler."""
    if not HAVE_MMASIM:
        return "mmasim (MMA-Sim 2.1.1) not installed: pip install mmasim==2.1.1 (the 'mmasim' extra)"
    try:
        import mmasim.amd  # noqa: F401
        import mmasim.nv_ptx  # noqa: F401
    except Exception as exc:  # its import compiles C++: no compiler, no ninja
        return f"mmasim is installed but does not import here ({type(exc).__name__}: {exc})"
    return None

_TORCH_FP8 = {"e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
              "e5m2fnuz": "float8_e5m2fnuz", "bfloat16": "bfloat16", "float16": "float16"}
_PTX = {"e4m3fn": "e4m3", "e5m2": "e5m2", "e2m1fn": "e2m1", "e3m2fn": "e3m2", "e2m3fn": "e2m3"}
_AMD = {"e4m3fnuz": "fp8", "e5m2fnuz": "bf8"}


@dataclass(frozen=True)
class Kind:
    """One MMA-Sim instruction beside the fp8check model for it."""

    name: str
    model: str
    a_fmt: str
    b_fmt: str
    k: int
    scale_fmt: str | None = None
    block: int | None = None

    def simulator(self):  # the MMA-Sim operation object
        if self.model == "sm90-wgmma-fp8":
            from mmasim.nv_ptx import WGMMA
            return WGMMA("Hopper", f"m64n8k32.f32.{_PTX[self.a_fmt]}.{_PTX[self.b_fmt]}")
        if self.model == "sm90-wgmma-16bit":
            t = {"bfloat16": "bf16", "float16": "f16"}[self.a_fmt]
            from mmasim.nv_ptx import WGMMA
            return WGMMA("Hopper", f"m64n8k16.f32.{t}.{t}")
        if self.model == "sm89-mma-fp8":
            from mmasim.nv_ptx import MMA
            return MMA("Ada Lovelace", f"m16n8k32.f32.{_PTX[self.a_fmt]}.{_PTX[self.b_fmt]}.f32")
        if self.model == "sm100-tcgen05-f8f6f4":
            from mmasim.nv_ptx import TCGen05MMA
            return TCGen05MMA("Blackwell", f"m128n8k32.kind::f8f6f4.f32.{_PTX[self.a_fmt]}.{_PTX[self.b_fmt]}")
        if self.model == "sm100-tcgen05-mxf8f6f4":
            from mmasim.nv_ptx import TCGen05MMABlockScale
            return TCGen05MMABlockScale(
                "Blackwell", f"m128n8k32.kind::mxf8f6f4.block32.f32.{_PTX[self.a_fmt]}.{_PTX[self.b_fmt]}.ue8m0")
        if self.model == "sm100-tcgen05-mxf4":
            from mmasim.nv_ptx import TCGen05MMABlockScale
            s = "ue4m3" if self.scale_fmt == "e4m3fn" else "ue8m0"
            kind = "mxf4nvf4" if self.block == 16 else "mxf4"
            return TCGen05MMABlockScale("Blackwell", f"m128n8k64.kind::{kind}.block{self.block}.f32.e2m1.e2m1.{s}")
        if self.model == "gfx942-mfma-fp8":
            from mmasim.amd import MFMA
            return MFMA("CDNA3", f"f32_16x16x32_{_AMD[self.a_fmt]}_{_AMD[self.b_fmt]}")
        if self.model == "gfx942-mfma-16bit":
            t = {"bfloat16": "bf16", "float16": "f16"}[self.a_fmt]
            from mmasim.amd import MFMA
            return MFMA("CDNA3", f"f32_32x32x8_{t}")
        raise LookupError(self.model)


def _fp8_kinds(model, fmts, k):
    return [Kind(f"{model}:{a}x{b}", model, a, b, k) for a in fmts for b in fmts]


KINDS = tuple(
    _fp8_kinds("sm90-wgmma-fp8", ("e4m3fn", "e5m2"), 32)
    + _fp8_kinds("sm89-mma-fp8", ("e4m3fn", "e5m2"), 32)
    + _fp8_kinds("sm100-tcgen05-f8f6f4", ("e4m3fn", "e5m2"), 32)
    + _fp8_kinds("gfx942-mfma-fp8", ("e4m3fnuz", "e5m2fnuz"), 32)
    + [Kind(f"sm100-tcgen05-mxf8f6f4:{a}x{b}", "sm100-tcgen05-mxf8f6f4", a, b, 32, "e8m0fnu", 32)
       for a in ("e4m3fn", "e5m2") for b in ("e4m3fn", "e5m2")]
    + [Kind("sm100-tcgen05-nvf4", "sm100-tcgen05-mxf4", "e2m1fn", "e2m1fn", 64, "e4m3fn", 16),
       Kind("sm100-tcgen05-mxf4", "sm100-tcgen05-mxf4", "e2m1fn", "e2m1fn", 64, "e8m0fnu", 32)]
)
WIDE_KINDS = tuple(Kind(f"{m}:{t}", m, t, t, k) for m, k in (("sm90-wgmma-16bit", 16), ("gfx942-mfma-16bit", 16))
                   for t in ("bfloat16", "float16"))
BY_NAME = {k.name: k for k in KINDS + WIDE_KINDS}


@dataclass
class Instances:
    a: np.ndarray  # (T, K) codes
    b: np.ndarray
    c: np.ndarray  # (T,) float32
    sa: np.ndarray | None = None  # (T, K / block) scale codes
    sb: np.ndarray | None = None


def _codes(rng, kind_fmt, shape, finite_share):
    wide = kind_fmt in ("bfloat16", "float16")
    top = 1 << 16 if wide else (16 if kind_fmt == "e2m1fn" else 256)
    codes = rng.integers(0, top, size=shape, dtype=np.int64)
    if wide:  # random bits of 16-bit floats are mostly huge or tiny: keep most exponents near 1
        near = rng.random(shape) < 0.8
        sign_man = codes & (0x8000 | (0x7F if kind_fmt == "bfloat16" else 0x3FF))
        exp = rng.integers(-12, 12, size=shape)
        bias_shift = (127, 7) if kind_fmt == "bfloat16" else (15, 10)
        codes = np.where(near, sign_man | ((exp + bias_shift[0]) << bias_shift[1]), codes)
    values = tc.operand_values(codes, kind_fmt)
    finite = rng.random(shape[:1]) < finite_share  # these rows get finite codes only
    bad = ~np.isfinite(values) & finite[:, None]
    codes = np.where(bad, 0, codes)
    zeros = rng.random(shape) < 0.1
    return np.where(zeros, 0, codes).astype(np.uint16 if wide else np.uint8)


def draw(kind: Kind, count: int, seed: int) -> Instances:
    """``count`` random-bit instances: operand codes uniform over every code (a quarter of the rows
    with NaN/Inf codes replaced by zeros, a tenth of the codes zero), ``c`` zero, random float32 bits,
    or random signs and mantissas at exponents around the products'; scales uniform over every code
    (e8m0 around 2**0 in most rows so that products stay inside float32)."""
    rng = np.random.default_rng(seed)
    shape = (count, kind.k)
    a = _codes(rng, kind.a_fmt, shape, 0.75)
    b = _codes(rng, kind.b_fmt, shape, 0.75)
    family = rng.integers(0, 4, size=count)
    mant = rng.integers(0, 1 << 23, size=count, dtype=np.uint32)
    sign = rng.integers(0, 2, size=count, dtype=np.uint32) << 31
    exp = np.clip(rng.integers(-40, 40, size=count) + 127, 0, 254).astype(np.uint32)
    near = sign | (exp << 23) | mant
    anybits = rng.integers(0, 1 << 32, size=count, dtype=np.uint64).astype(np.uint32)
    cbits = np.select([family == 0, family == 1], [np.zeros(count, np.uint32), anybits], near).astype(np.uint32)
    c = cbits.view(np.float32)
    sa = sb = None
    if kind.scale_fmt:
        kb = kind.k // kind.block
        if kind.scale_fmt == "e8m0fnu":
            sa = np.where(rng.random((count, kb)) < 0.8, rng.integers(107, 148, size=(count, kb)),
                          rng.integers(0, 256, size=(count, kb))).astype(np.uint8)
            sb = np.where(rng.random((count, kb)) < 0.8, rng.integers(107, 148, size=(count, kb)),
                          rng.integers(0, 256, size=(count, kb))).astype(np.uint8)
        else:
            sa = rng.integers(0, 256, size=(count, kb)).astype(np.uint8)
            sb = rng.integers(0, 256, size=(count, kb)).astype(np.uint8)
    return Instances(a, b, c, sa, sb)


def _torch_operand(torch, codes, fmt, k_packed_fp4=False):
    t = torch.from_numpy(np.ascontiguousarray(codes))
    if fmt in _TORCH_FP8:
        if fmt in ("bfloat16", "float16"):
            return t.view(torch.int16).view(getattr(torch, _TORCH_FP8[fmt]))
        return t.view(getattr(torch, _TORCH_FP8[fmt]))
    if k_packed_fp4:  # kind::mxf4*: two e2m1 per byte, element 2i in the high nibble
        c = codes.astype(np.uint8)
        return torch.from_numpy(np.ascontiguousarray((c[:, 0::2] << 4) | c[:, 1::2]))
    shift = {"e2m1fn": 2, "e3m2fn": 0, "e2m3fn": 0}[fmt]  # MMA-Sim holds fp4 in bits 5:2 of a byte
    return torch.from_numpy(np.ascontiguousarray(codes.astype(np.uint8) << shift))


def oracle(kind: Kind, inst: Instances) -> np.ndarray:
    """MMA-Sim's results (float32) for the instances."""
    import torch

    sim = kind.simulator()
    packed = kind.model == "sm100-tcgen05-mxf4"
    a = _torch_operand(torch, inst.a, kind.a_fmt, packed)
    b = _torch_operand(torch, inst.b, kind.b_fmt, packed)
    c = torch.from_numpy(inst.c.copy())
    if kind.scale_fmt is None:
        out = sim.dpa(a, b, c)
    else:
        st = torch.float8_e8m0fnu if kind.scale_fmt == "e8m0fnu" else torch.float8_e4m3fn
        sa = torch.from_numpy(inst.sa.copy()).view(st)
        sb = torch.from_numpy(inst.sb.copy()).view(st)
        out = sim.dpa(a, b, c, sa, sb)
    return out.numpy().astype(np.float32)


def ours(kind: Kind, inst: Instances) -> tc.MMAResult:
    return tc.dot_instances(tc.MODELS[kind.model], inst.a, kind.a_fmt, inst.b, kind.b_fmt, inst.c,
                            a_scales=inst.sa, b_scales=inst.sb, scale_fmt=kind.scale_fmt or "e8m0fnu")


def compare(kind: Kind, inst: Instances) -> dict:
    """Counts: instances, compared, target-dependent (skipped), mismatches (bits; NaN by class), and the
    first mismatching instance's index."""
    want = oracle(kind, inst)
    res = ours(kind, inst)
    got = res.values
    both_nan = np.isnan(want) & np.isnan(got)
    same = both_nan | (want.view(np.uint32) == got.view(np.uint32))
    judged = ~res.target_dependent
    bad = judged & ~same
    first = int(np.flatnonzero(bad)[0]) if bad.any() else None
    return {"kind": kind.name, "instances": int(len(want)), "compared": int(judged.sum()),
            "target_dependent": int(res.target_dependent.sum()), "mismatches": int(bad.sum()), "first": first,
            "nan": int(both_nan.sum())}

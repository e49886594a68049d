"""What compiled Triton does for every FP8 conversion, per GPU target, as data.

A :class:`Target` maps each conversion a Triton kernel can contain to the
semantics compiled Triton gives it on that GPU:

- a *downcast* ``(source dtype, fp8 format, rounding)`` to a
  :class:`Downcast`: the :class:`~fp8check.profiles.Profile` the lowering
  implements, or a bit rule where no profile describes it (taking the upper
  byte of a float16 is one), or ``None`` when Triton does not compile it;
- an *upcast* ``(fp8 format, destination dtype)`` to an :class:`Upcast`:
  exact, or with the NaN/Inf codes decoded as if they were ordinary numbers
  (what the bit-trick lowerings to bfloat16 do);
- fp8 to fp8 and float64 to or from fp8: not compiled by the Triton
  versions these tables were made for.

The tables were made for Triton 3.9.0 and checked against 3.8.0 and 3.6.0
by compiling every conversion for each target on a CPU (Triton lowers to
PTX and AMDGCN without a GPU) and reading the instructions emitted. The
``sm90`` rules are pinned on an H200 (compiled Triton 3.6); the AMD rules
are **derived from source, not pinned on hardware** (see docs/triton.md for
the files, commits and instructions behind every entry).

This module is frozen data: the stack registry can take :data:`TARGETS`
and the named profiles as they are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Mapping

from fp8check import profiles
from fp8check.errors import FP8CheckError, UnknownProfileError
from fp8check.profiles import Profile

__all__ = [
    "Downcast", "Upcast", "Target", "OpRules", "ErrorBound", "Approx", "OP_SOURCES", "TARGETS", "get", "names",
    "TRITON_SM90", "TRITON_SM90_RTZ", "TRITON_GFX942", "TRITON_GFX950", "RTZ_TRUNCATE",
    "SOURCES", "DESTINATIONS", "FP8", "TL_NAMES", "UnknownTargetError",
]

SOURCES = ("float32", "float16", "bfloat16")
DESTINATIONS = ("float32", "float16", "bfloat16")
FP8 = ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz")
#: Triton's name of each fp8 type (``tl.float8e4nv`` has ``name == "fp8e4nv"``).
TL_NAMES = MappingProxyType({"fp8e4nv": "e4m3fn", "fp8e5": "e5m2", "fp8e4b8": "e4m3fnuz", "fp8e5b16": "e5m2fnuz"})
OCP = ("e4m3fn", "e5m2")
FNUZ = ("e4m3fnuz", "e5m2fnuz")

Rounding = Literal["rtne", "rtz"]
BitRule = Literal["f16_upper_byte", "f32_rtz_f16_upper_byte"]
Specials = Literal["exact", "finite", "fnuz_nan_negative_zero", "as_e5m2"]


class UnknownTargetError(FP8CheckError, LookupError):
    """A Triton target name fp8check has no table for."""


# -- the profiles -------------------------------------------------------------

TRITON_SM90 = profiles.TRITON_SM90
TRITON_SM90_RTZ = profiles.TRITON_SM90_RTZ
TRITON_GFX942 = profiles.TRITON_GFX942
TRITON_GFX950 = profiles.TRITON_GFX950
RTZ_TRUNCATE = profiles.TRITON_AMD_RTZ


# -- the table entries ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Downcast:
    """One downcast: what compiled Triton does, or why it does not compile.

    ``profile``: the semantics (None with ``bits`` set or when unsupported).
    ``bits``: a bit rule no profile describes: ``f16_upper_byte`` (the code
    is the upper byte of the float16 bits, NaN payloads and all, whatever
    the fp8 format's bias), ``f32_rtz_f16_upper_byte`` (float32 rounded
    toward zero to float16, NaN keeping its sign and top payload bits, then
    the upper byte). ``lowering``: the instructions or software sequence.
    ``unsupported``: why Triton does not compile it (then nothing else).
    """

    profile: Profile | None = None
    bits: BitRule | None = None
    lowering: str = ""
    unsupported: str = ""

    @property
    def supported(self) -> bool:
        return not self.unsupported


@dataclass(frozen=True, kw_only=True)
class Upcast:
    """One upcast: ``exact``, or ``finite`` (the NaN/Inf codes decode as if
    their exponent field were an ordinary binade: e5m2 +Inf 0x7C -> 65536,
    e4m3fn NaN 0x7F -> 480), ``fnuz_nan_negative_zero`` (the fnuz NaN 0x80
    decodes to -0.0: triton-lang/triton#10745), ``as_e5m2`` (the byte is
    decoded as OCP e5m2: an e5m2fnuz value doubled, 0x7C.. Inf/NaN), or
    ``unsupported`` with the reason."""

    specials: Specials = "exact"
    lowering: str = ""
    unsupported: str = ""

    @property
    def supported(self) -> bool:
        return not self.unsupported


@dataclass(frozen=True)
class ErrorBound:
    """How far from the exact result an unspecified instruction may land:
    ``ulps`` ulp of the correctly rounded result, ``rel`` relative or ``abs``
    absolute error (the widest applies). ``source``: where the bound is stated."""

    ulps: int = 0
    rel: float = 0.0
    abs: float = 0.0
    source: str = ""


@dataclass(frozen=True)
class Approx:
    """One float32 function as a target compiles it: ``lowering`` (the
    instructions), ``bound`` (None: correctly rounded, bit-exact), ``ftz``
    (subnormal inputs read as zero of their sign), ``status``: ``pinned`` (on
    hardware), ``derived`` (from source) or ``bracketed`` (its results lie in
    the bound; codes that depend on where are target-dependent)."""

    lowering: str
    bound: ErrorBound | None = None
    ftz: bool = False
    status: str = "derived"


@dataclass(frozen=True, kw_only=True)
class OpRules:
    """The float semantics of compiled Triton on a target, beyond FP8 conversions (fp8check.triton.ops)."""

    minmax_zeros: Literal["ordered", "either"]  # ordered: -0 < +0; either: unspecified (bracketed)
    nan_pattern: Literal["canonical_nvidia", "quiet"]  # the NaN an op creates: 0x7FFFFFFF or 0x7FC00000
    clamp: Literal["xorsign_abs", "med3", "minmax"]  # symmetric tl.clamp; the others are always min(max())
    fma_contraction: bool  # a * b + c compiled to one fma (enable_fp_fusion, on by default)
    fdiv: ErrorBound | None  # float32 `/` (None: correctly rounded)
    sqrt: Approx
    rsqrt: Approx
    exp2: Approx
    log2: Approx
    log: Approx
    bf16_nan: int | None  # the NaN float32 -> bfloat16 writes (None: quiet, sign and top payload kept)
    int_to_bf16: Literal["direct", "via_f32"]  # one rounding, or int -> float32 -> bfloat16
    lowerings: Mapping[str, str] = field(default_factory=dict)  # op -> instructions and status, for docs
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Target:
    """A GPU target's FP8 semantics under compiled Triton."""

    name: str
    description: str
    provenance: str
    profile: Profile
    formats: frozenset[str]
    downcasts: Mapping[tuple[str, str, str], Downcast]
    upcasts: Mapping[tuple[str, str], Upcast]
    triton_versions: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    # What float32 ``/`` compiles to when it is not correctly rounded ("" when it is): the interpreter
    # divides exactly, so quotients can differ in the last bit from the compiled kernel's.
    approximate_fp32_division: str = ""
    ops: OpRules | None = None  # the float semantics of everything else (None: the interpreter's NumPy)

    def downcast(self, source: str, fmt: str, rounding: str) -> Downcast:
        """The entry for ``source`` -> ``fmt`` with ``rounding`` (``rtne``/``rtz``)."""
        if fmt not in self.formats:
            return Downcast(unsupported=f"Triton does not compile {fmt} ({_tl(fmt)}) for {self.name}")
        entry = self.downcasts.get((source, fmt, rounding))
        if entry is None:
            what = f"{source} -> {fmt}" + (f" with fp_downcast_rounding={rounding!r}" if rounding != "rtne" else "")
            return Downcast(unsupported=f"Triton does not compile {what} for {self.name}")
        return entry

    def upcast(self, fmt: str, dest: str) -> Upcast:
        if fmt not in self.formats:
            return Upcast(unsupported=f"Triton does not compile {fmt} ({_tl(fmt)}) for {self.name}")
        entry = self.upcasts.get((fmt, dest))
        if entry is None:
            return Upcast(unsupported=f"Triton does not compile {fmt} -> {dest} for {self.name}")
        return entry

    def fp8_to_fp8(self, src: str, dst: str) -> str:
        """Why fp8 -> fp8 does not compile (every pair, on every target here)."""
        return (f"Triton does not compile {src} -> {dst} (fp8 to fp8) for {self.name}: cast through float32 "
                f"(x.to(tl.float32).to(...))")

    def profile_for(self, source: str, fmt: str, rounding: str = "rtne") -> Profile | None:
        """The profile of one downcast (None where a bit rule or nothing applies)."""
        return self.downcast(source, fmt, rounding).profile


def _tl(fmt: str) -> str:
    return "tl." + {v: k for k, v in TL_NAMES.items()}[fmt].replace("fp8", "float8")


def _freeze(d: dict) -> Mapping:
    return MappingProxyType(dict(d))


_VERSIONS = ("3.6.0", "3.8.0", "3.9.0")


# -- float ops beyond FP8 conversions ----------------------------------------------

#: Where the op rules come from (file and commit of each source read).
OP_SOURCES = MappingProxyType({
    "triton-nvidia": "triton-lang/triton third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/ElementwiseOpToLLVM.cpp "
                     "@ d9fd6ed18eece1ecdf839e91c9329858a782f252 (ClampFOpConversion.isClipPattern: "
                     "min.xorsign.abs for computeCapability >= 90; ExpOpConversionApprox: x * log2e then "
                     "ex2.approx.f; math::SqrtOp -> llvm.sqrt afn; math::RsqrtOp -> NVVM rsqrt)",
    "triton-common": "triton-lang/triton lib/Conversion/TritonGPUToLLVM/ElementwiseOpToLLVM.cpp "
                     "(ClampFOpConversion: maxnum/minnum, maximum/minimum with propagate_nan ALL; "
                     "MinNumF/MaxNumF -> llvm.minnum/maxnum)",
    "triton-amd": "triton-lang/triton third_party/amd/lib/TritonAMDGPUToLLVM/ElementwiseOpToLLVM.cpp "
                  "@ 00a287a7530fdc5fe89a2a01ac1de19f66aca85a (FDivOpConversion: plain llvm fdiv; "
                  "bf16 add/sub/mul via float32 and RTNE; SIToFP -> float32 -> bfloat16 RTNE; "
                  "ExpOpConversionApprox: x * log2e then llvm.exp2.f32; SqrtOpConversion: v_sqrt_f32, "
                  "1 ulp, denormals scaled; ClampFOpConversion: v_med3_f32, NaN -> the minimum)",
    "ptx-isa": "NVIDIA PTX ISA, floating-point instructions: div.full.f32 (max 2 ulp), sqrt.approx.f32 "
               "(max relative error 2^-23), rsqrt.approx.f32 (2^-22.9), ex2.approx.f32 (2^-22.5), "
               "lg2.approx.f32 (absolute error 2^-22.6); min/max: +0.0 > -0.0, a NaN operand loses, "
               "min.NaN/max.NaN return the canonical NaN",
    "llvm-langref": "LLVM LangRef llvm.maxnum/minnum: operands comparing equal (+0, -0) return either",
    "h200": "gpu/results/ops-table.json: every op x special values, compiled Triton 3.6 for sm90 on an H200",
})

_PTX = OP_SOURCES["ptx-isa"]


def _nvidia_ops(arch: str) -> OpRules:
    return OpRules(
        minmax_zeros="ordered", nan_pattern="canonical_nvidia",
        clamp="xorsign_abs" if arch == "sm90" else "minmax",
        fma_contraction=True,
        fdiv=ErrorBound(ulps=2, source=_PTX),
        sqrt=Approx("sqrt.approx.ftz.f32", ErrorBound(rel=2.0 ** -23, source=_PTX), ftz=True, status="bracketed"),
        rsqrt=Approx("rsqrt.approx.ftz.f32", ErrorBound(rel=2.0 ** -22.9, source=_PTX), ftz=True,
                     status="bracketed"),
        exp2=Approx("ex2.approx.f32", ErrorBound(rel=2.0 ** -22.5, source=_PTX), status="bracketed"),
        log2=Approx("lg2.approx.f32", ErrorBound(ulps=1, abs=2.0 ** -22.6, source=_PTX), status="bracketed"),
        log=Approx("lg2.approx.f32 * ln 2", ErrorBound(ulps=2, abs=2.0 ** -22.0, source=_PTX), status="bracketed"),
        bf16_nan=0x7FFF, int_to_bf16="direct",
        lowerings=MappingProxyType({
            "tl.maximum / tl.minimum": "max.f32 / min.f32 (NaN loses, +0 > -0); propagate_nan=ALL: max.NaN.f32",
            "tl.clamp": ("min.xorsign.abs.f32 x, hi when lo is -hi (sm90: NaN -> +hi); else max.f32 then min.f32"
                         if arch == "sm90" else "max.f32 then min.f32 (no xorsign before sm90 in Triton)"),
            "tl.max / tl.min": "max.f32 / min.f32 combine (NaN ignored, +0 > -0)",
            "tl.argmax / tl.argmin": "compare-and-select combine (a NaN row's index follows the reduction order)",
            "a * b + c": "fma.rn.f32 (LLVM fp-contract=fast, Triton's enable_fp_fusion default)",
            "/ (float32)": "div.full.f32 (bracketed, 2 ulp)", "tl.div_rn": "div.rn.f32 (exact)",
            "tl.sqrt": "sqrt.approx.ftz.f32 (bracketed)", "tl.sqrt_rn": "sqrt.rn.f32 (exact)",
            "tl.rsqrt": "rsqrt.approx.ftz.f32 (bracketed)", "tl.exp": "mul.f32 by log2(e), ex2.approx.f32",
            "tl.exp2": "ex2.approx.f32 (bracketed)", "tl.log2": "lg2.approx.f32 (bracketed)",
            "bfloat16 + - * /": "one rounding to nearest even (float32 then cvt.rn.bf16.f32)",
            "int -> bfloat16": "cvt.rn.bf16.s32: one rounding",
        }),
        sources=("triton-nvidia", "triton-common", "ptx-isa", "h200"),
    )


_AMD_1ULP = ErrorBound(ulps=1, source="v_sqrt_f32: 1 ulp (Triton AMD SqrtOpConversion)")
_AMD_2ULP = ErrorBound(ulps=2, source="AMD does not state a per-instruction bound; 2 ulp assumed (derived, not pinned)")
AMD_OPS = OpRules(
    minmax_zeros="either", nan_pattern="quiet", clamp="med3", fma_contraction=True,
    fdiv=None,
    sqrt=Approx("v_sqrt_f32, inputs below 2^-96 scaled", _AMD_1ULP, status="bracketed"),
    rsqrt=Approx("__ocml_rsqrt_f32", _AMD_2ULP, status="bracketed"),
    exp2=Approx("llvm.exp2.f32 (v_exp_f32, denormals handled)", _AMD_2ULP, status="bracketed"),
    log2=Approx("llvm.log2.f32 (v_log_f32)", _AMD_2ULP, status="bracketed"),
    log=Approx("llvm.log.f32", _AMD_2ULP, status="bracketed"),
    bf16_nan=None, int_to_bf16="via_f32",
    lowerings=MappingProxyType({
        "tl.maximum / tl.minimum": "llvm.maxnum/minnum (v_max_f32: NaN loses, +0/-0 either); ALL: llvm.maximum",
        "tl.clamp": "v_med3_f32 (NaN -> lo); propagate_nan=ALL: select on x != x",
        "tl.max / tl.min": "maxnum combine (NaN ignored; +0/-0 either)",
        "a * b + c": "fma (fp-contract=fast; AMDGPU prefers v_fma_f32 for float32) -- derived, not pinned",
        "/ (float32)": "llvm fdiv without fast-math flags: correctly rounded",
        "bfloat16 + - * /": "float32 op, RTNE to bfloat16", "int -> bfloat16": "sitofp to float32, RTNE (two roundings)",
    }),
    sources=("triton-amd", "triton-common", "llvm-langref"),
)


def _sm(arch: str) -> Target:
    down: dict[tuple[str, str, str], Downcast] = {}
    for src in SOURCES:
        for fmt in OCP:
            insn = {"float32": f"cvt.rn.satfinite.{fmt[:4]}x2.f32",
                    "float16": f"cvt.rn.satfinite.{fmt[:4]}x2.f16x2",
                    "bfloat16": f"cvt.f32.bf16 + cvt.rn.satfinite.{fmt[:4]}x2.f32"}[src]
            down[(src, fmt, "rtne")] = Downcast(profile=TRITON_SM90, lowering=insn)
    down[("float32", "e5m2", "rtz")] = Downcast(profile=TRITON_SM90_RTZ,
                                                lowering="cvt.rz.f16.f32 + upper byte")
    up: dict[tuple[str, str], Upcast] = {}
    for fmt in OCP:
        cvt = f"cvt.rn.f16x2.{fmt[:4]}x2"
        up[(fmt, "float16")] = Upcast(lowering=cvt)
        up[(fmt, "float32")] = Upcast(lowering=cvt + " + cvt.f32.f16")
    up[("e4m3fn", "bfloat16")] = Upcast(lowering="cvt.rn.f16x2.e4m3x2 + " + (
        "cvt.bf16.f16" if arch == "sm90" else "cvt.f32.f16 + cvt.rn.bf16.f32"))
    up[("e5m2", "bfloat16")] = Upcast(specials="finite",
                                      lowering="bit shift + mul.rn.bf16x2 by 2^112 (Inf/NaN codes become finite)")
    return Target(
        name=arch,
        description=f"NVIDIA {'Hopper' if arch == 'sm90' else 'Ada'} ({arch})",
        provenance=("pinned on an H200 against compiled Triton 3.6 (downcasts); the upcasts and the sm89 lowering "
                    "read from the PTX Triton emits" if arch == "sm90" else
                    "the same instructions as sm90 (PTX Triton emits for sm89); not pinned on an Ada GPU"),
        profile=TRITON_SM90,
        formats=frozenset(OCP),
        downcasts=_freeze(down),
        upcasts=_freeze(up),
        triton_versions=_VERSIONS,
        approximate_fp32_division="div.full.f32 (within 2 ulp; triton-lang/triton#10661)",
        ops=_nvidia_ops(arch),
        notes=("fnuz types do not compile on NVIDIA (\"type fp8e4b8 not supported in this architecture\")",
               "fp_downcast_rounding='rtz' compiles only for float32 -> e5m2",
               "e5m2 -> bfloat16 decodes +Inf 0x7C to 65536 and NaN codes to finite values"),
    )


def _gfx942() -> Target:
    down: dict[tuple[str, str, str], Downcast] = {}
    for src in SOURCES:
        pre = {"float32": "", "float16": "v_cvt_f32_f16 + ", "bfloat16": "shift to float32 + "}[src]
        down[(src, "e4m3fnuz", "rtne")] = Downcast(profile=TRITON_GFX942, lowering=pre + "v_cvt_pk_fp8_f32 (clamp)")
        down[(src, "e5m2fnuz", "rtne")] = Downcast(profile=TRITON_GFX942, lowering=pre + "v_cvt_pk_bf8_f32 (clamp)")
        down[(src, "e4m3fn", "rtne")] = Downcast(profile=TRITON_GFX942,
                                                 lowering="software downcastToFp8rtneOneValue")
        down[(src, "e5m2", "rtne")] = Downcast(profile=TRITON_GFX942, lowering={
            "float32": "software Fp32ToFp8E5M2rtneSW", "float16": "software Fp16ToFp8E5M2rtneSW",
            "bfloat16": "software Bf16ToFp8E5M2SW"}[src])
    _amd_rtz(down)
    up: dict[tuple[str, str], Upcast] = {}
    for fmt, insn in (("e4m3fnuz", "v_cvt_pk_f32_fp8"), ("e5m2fnuz", "v_cvt_pk_f32_bf8")):
        up[(fmt, "float32")] = Upcast(lowering=insn)
        up[(fmt, "float16")] = Upcast(lowering=insn + " + v_cvt_f16_f32")
        up[(fmt, "bfloat16")] = Upcast(lowering=insn + " + truncation to bfloat16")
    up[("e4m3fn", "float16")] = Upcast(lowering="software Fp8E4M3fnToFp16SW")
    up[("e4m3fn", "float32")] = Upcast(lowering="software Fp8E4M3fnToFp16SW + v_cvt_f32_f16")
    up[("e4m3fn", "bfloat16")] = Upcast(specials="finite",
                                        lowering="software OcpF8ToBf16SW (shift, multiply by 2^120; NaN -> ±480)")
    up[("e5m2", "float16")] = Upcast(lowering="byte placed in the upper half of a float16")
    up[("e5m2", "float32")] = Upcast(lowering="upper half of a float16 + v_cvt_f32_f16")
    up[("e5m2", "bfloat16")] = Upcast(specials="finite",
                                      lowering="software OcpF8ToBf16SW (shift, multiply by 2^112; Inf -> ±65536)")
    return Target(
        name="gfx942",
        description="AMD CDNA3 (MI300)",
        provenance="derived from source, not pinned on hardware",
        ops=AMD_OPS,
        profile=TRITON_GFX942,
        formats=frozenset(FP8),
        downcasts=_freeze(down),
        upcasts=_freeze(up),
        triton_versions=_VERSIONS,
        notes=("float16 -> e5m2fnuz with fp_downcast_rounding='rtz' takes the upper byte of the float16 bits: "
               "the result is off by a factor of 2 (e5m2fnuz has bias 16, float16 bias 15)",
               "e4m3fn/e5m2 -> bfloat16 decode NaN/Inf codes to finite values"),
    )


def _amd_rtz(down: dict) -> None:
    down[("float32", "e5m2", "rtz")] = Downcast(profile=RTZ_TRUNCATE, bits="f32_rtz_f16_upper_byte",
                                                lowering="v_cvt_pkrtz_f16_f32 + upper byte")
    down[("float16", "e5m2", "rtz")] = Downcast(bits="f16_upper_byte", lowering="upper byte of the float16")
    down[("float16", "e5m2fnuz", "rtz")] = Downcast(
        bits="f16_upper_byte", lowering="upper byte of the float16 (the OCP e5m2 truncation, applied to e5m2fnuz)")


def _gfx950() -> Target:
    down: dict[tuple[str, str, str], Downcast] = {}
    for src in SOURCES:
        s = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[src]
        down[(src, "e4m3fn", "rtne")] = Downcast(profile=TRITON_GFX950, lowering=f"v_cvt_scalef32_pk_fp8_{s} (clamp)")
        down[(src, "e5m2", "rtne")] = Downcast(profile=TRITON_GFX950, lowering=f"v_cvt_scalef32_pk_bf8_{s} (clamp)")
        for fmt in FNUZ:
            down[(src, fmt, "rtne")] = Downcast(profile=TRITON_GFX950, lowering="software downcastToFp8rtneOneValue"
                                                + (" (via float32)" if src == "float16" and fmt == "e5m2fnuz" else ""))
    _amd_rtz(down)
    up: dict[tuple[str, str], Upcast] = {}
    for fmt, t in (("e4m3fn", "fp8"), ("e5m2", "bf8")):
        for dest, d in (("float32", "f32"), ("float16", "f16"), ("bfloat16", "bf16")):
            up[(fmt, dest)] = Upcast(lowering=f"v_cvt_scalef32_pk_{d}_{t} (scale 1.0)")
    for fmt in FNUZ:
        sw = "Fp8E4M3fnuzToFp16OneValue" if fmt == "e4m3fnuz" else "Fp8E5M2fnuzToFp16OneValue"
        up[(fmt, "float16")] = Upcast(lowering=f"software {sw}")
        up[(fmt, "float32")] = Upcast(lowering=f"software {sw} + v_cvt_f32_f16")
        up[(fmt, "bfloat16")] = Upcast(lowering="software Fp8E4M3fnuzToBf16SW" if fmt == "e4m3fnuz"
                                       else f"software {sw} + float32 + truncation")
    return Target(
        name="gfx950",
        description="AMD CDNA4 (MI355)",
        provenance="derived from source, not pinned on hardware",
        ops=AMD_OPS,
        profile=TRITON_GFX950,
        formats=frozenset(FP8),
        downcasts=_freeze(down),
        upcasts=_freeze(up),
        triton_versions=_VERSIONS,
        notes=("fnuz conversions are emulated in software (no fnuz hardware on CDNA4)",
               "float16 -> e5m2fnuz with fp_downcast_rounding='rtz' takes the upper byte of the float16 bits "
               "(off by a factor of 2)"),
    )


TARGETS: Mapping[str, Target] = MappingProxyType({t.name: t for t in (_sm("sm90"), _sm("sm89"), _gfx942(), _gfx950())})
#: The named profiles of the targets, for the stack registry.
PROFILES: Mapping[str, Profile] = MappingProxyType(
    {p.name: p for p in (TRITON_SM90, TRITON_SM90_RTZ, TRITON_GFX942, TRITON_GFX950, RTZ_TRUNCATE)})


def for_triton(target: Target, version: str) -> Target:
    """``target`` as compiled by Triton ``version`` (the tables are for
    3.9.0; what 3.6.0 and 3.8.0 emit differently, read from their PTX and
    AMDGCN, is applied here)."""
    base = version.split("+")[0]
    if base == "3.9.0" or not target.name.startswith("gfx"):
        return target
    down, up = dict(target.downcasts), dict(target.upcasts)
    if base == "3.6.0":
        down.pop(("float16", "e5m2fnuz", "rtz"), None)
    if target.name == "gfx950":
        # Before triton-lang/triton#10747 (in 3.9.0) the software fnuz
        # decoders turned the NaN 0x80 into -0.0 (triton-lang/triton#10745).
        for fmt in FNUZ:
            for dest in DESTINATIONS:
                up[(fmt, dest)] = dataclasses.replace(up[(fmt, dest)], specials="fnuz_nan_negative_zero")
        if base == "3.6.0":  # before triton-lang/triton#10458: the OCP bf8 instruction decodes e5m2fnuz
            up[("e5m2fnuz", "bfloat16")] = Upcast(specials="as_e5m2",
                                                  lowering="v_cvt_pk_f32_bf8 (OCP on CDNA4) + truncation")
    return dataclasses.replace(target, downcasts=_freeze(down), upcasts=_freeze(up),
                               description=f"{target.description}, as Triton {base} compiles it")


def names() -> tuple[str, ...]:
    return tuple(TARGETS)


def get(name: object) -> Target:
    """The target ``name`` (``"sm90"``, ``"gfx942"``, ...; a :class:`Target` is returned as is)."""
    if isinstance(name, Target):
        return name
    key = str(name).strip().lower().removeprefix("triton-")
    if key not in TARGETS:
        raise UnknownTargetError(f"unknown Triton target {name!r}; known targets: {', '.join(TARGETS)}")
    return TARGETS[key]


def profile(name: str) -> Profile:
    """One of the target profiles by name (``triton-gfx942``, ...)."""
    if name not in PROFILES:
        raise UnknownProfileError(f"unknown Triton target profile {name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[name]


def _check_profiles() -> None:  # the overrides resolve for every format they name
    for p in PROFILES.values():
        for fmt in (p.formats or FP8):
            if fmt in FP8:
                p.resolve(fmt)


_check_profiles()

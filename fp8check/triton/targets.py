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
    (subnormal inputs read as zero of their sign, subnormal results written
    as zero of their sign), ``status``: ``pinned`` (on hardware), ``derived``
    (from source and the compiled code) or ``bracketed`` (its results lie in
    the bound; codes that depend on where are target-dependent)."""

    lowering: str
    bound: ErrorBound | None = None
    ftz: bool = False
    status: str = "derived"


ClampRule = Literal["xorsign_abs", "med3", "minmax"]
#: The forms of ``lo`` the compiler recognises as ``-hi`` in ``tl.clamp(x, lo, hi)`` (NVIDIA's
#: ClampFOpConversion.isClipPattern): ``negf`` (lo = negf(hi)), ``splat_negf`` (lo = splat(negf(s)),
#: hi = splat(s): a negated scalar), ``sub0`` (lo = 0 - hi), ``const`` (two constants, lo == -hi).
ClipPattern = Literal["negf", "splat_negf", "sub0", "const"]


@dataclass(frozen=True, kw_only=True)
class OpRules:
    """The float semantics of compiled Triton on a target, beyond FP8 conversions (fp8check.triton.ops).

    Every field is what the target's lowering does, read from the Triton
    backend's source and the PTX/AMDGCN it emits (docs/triton.md says which
    entries the H200 pinned)."""

    minmax_zeros: Literal["ordered", "either"]  # ordered: -0 < +0; either: unspecified (bracketed)
    nan_pattern: Literal["canonical_nvidia", "quiet"]  # the NaN min/max create: 0x7FFFFFFF or 0x7FC00000
    # NaN results of + - * / fma sqrt: "canonical" (NVIDIA: always 0x7FFFFFFF / 0x7FFF), "propagate"
    # (IEEE: an input NaN comes out quieted, a new one is the positive default NaN 0x7FC00000)
    arith_nan: Literal["canonical", "propagate"]
    clamp: ClampRule  # tl.clamp of float32/float16 when its bounds match clip_patterns (else "minmax")
    clip_patterns: tuple[ClipPattern, ...]  # () : every bound pair (AMD's v_med3 takes any)
    bf16_clamp: ClampRule  # tl.clamp of bfloat16
    fma_contraction: tuple[str, ...]  # dtypes whose a * b + c is compiled to one fma (enable_fp_fusion)
    fma_pair: Literal["first", "either"]  # a * b + c * d: the first product fused, or either (bracketed)
    fdiv: ErrorBound | None  # float32 `/` of run-time values (None: correctly rounded)
    # float32 `/` by a compile-time constant C: "divide" (as fdiv), "reciprocal" (x * r, r = 1/C to within
    # `fdiv_const_bound`, rounded once: the product is bit-exact for a given r)
    fdiv_const: Literal["divide", "reciprocal"]
    fdiv_const_bound: ErrorBound | None  # how far r may be from 1/C (None: r = fl(1/C))
    sqrt: Approx
    rsqrt: Approx
    exp2: Approx
    exp: Approx  # applied to fl(x * log2(e)) on every target here
    log2: Approx
    log: Approx
    bf16_nan: int | None  # the NaN float32 -> bfloat16 writes (None: quiet, sign and top payload kept)
    int_to_bf16: Literal["direct", "via_f32"]  # one rounding, or int -> float32 -> bfloat16
    lowerings: Mapping[str, str] = field(default_factory=dict)  # op -> instructions and status, for docs
    # "sm90": float32 `/` and the .approx functions as an sm90 GPU executes them (fp8check.triton.nvidia_approx:
    # div.full.f32 is MUFU.RCP and one multiply, exact where the divisor's reciprocal was measured; a
    # compile-time divisor folded by ptxas to fl(1/C); the inputs of sqrt/rsqrt/ex2/log2 whose result is known
    # are exact); the rest stays bracketed. "": `fdiv`/`fdiv_const`'s bounds and the Approx bounds alone.
    approx_model: str = ""
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Allocator:
    """How the target's PyTorch allocator places a tensor's storage: every storage starts at a multiple of
    ``alignment`` bytes (what a kernel's pointer-alignment hints can rely on)."""

    name: str
    alignment: int
    source: str


#: PyTorch's CUDA caching allocator: a storage is a block whose size is rounded up to a multiple of
#: ``kMinBlockSize = 512`` ("all sizes are rounded to at least 512 bytes"), carved from the start of a
#: cudaMalloc'd segment (2 MiB ``kSmallBuffer`` for small allocations, larger ones rounded to 2 MiB,
#: ``kRoundLarge``), so at a multiple of 512 bytes from it.
CUDA_CACHING_ALLOCATOR = Allocator(
    name="PyTorch's CUDA caching allocator", alignment=512,
    source="c10/cuda/CUDACachingAllocator.cpp kMinBlockSize = 512, "
           "pytorch/pytorch@001074d25084fdb87a799823e395a50f5ec044d3")
#: PyTorch's ROCm builds compile the same file hipified (c10/hip/HIPCachingAllocator.cpp); kMinBlockSize and
#: the block rounding have no USE_ROCM branch there.
ROCM_CACHING_ALLOCATOR = Allocator(
    name="PyTorch's HIP caching allocator (the CUDA caching allocator hipified)", alignment=512,
    source="c10/cuda/CUDACachingAllocator.cpp kMinBlockSize = 512 (no USE_ROCM branch), compiled hipified "
           "for ROCm, pytorch/pytorch@001074d25084fdb87a799823e395a50f5ec044d3")


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
    allocator: Allocator = CUDA_CACHING_ALLOCATOR  # where a tensor's storage starts (pointer hints)

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
                     "@ 0043a8d80d60f9a791d43161189aa13e0db00353 (ClampFOpConversion::isClipPattern: "
                     "min.xorsign.abs for computeCapability >= 90 when lo is negf(hi), splat(negf(s)) beside "
                     "splat(s), 0 - hi, or constants with lo == -hi; FDivOpConversion: llvm.nvvm.div.full for "
                     "32 bits; ExpOpConversionApprox: x * log2e then llvm.nvvm.ex2.approx.f32; add/sub/mul of "
                     "every float type as plain LLVM fadd/fsub/fmul)",
    "triton-common": "triton-lang/triton lib/Conversion/TritonGPUToLLVM/ElementwiseOpToLLVM.cpp "
                     "@ f646e549463aa992736eff316b3dcd1a3da1f419 (ClampFOpConversion without the pattern: "
                     "llvm.maxnum then llvm.minnum; propagate_nan ALL: llvm.maximum then llvm.minimum where the "
                     "target has them, else a select of NaN on x != x; MinNumF/MaxNumF -> llvm.minnum/maxnum)",
    "triton-amd": "triton-lang/triton third_party/amd/lib/TritonAMDGPUToLLVM/ElementwiseOpToLLVM.cpp "
                  "@ 00a287a7530fdc5fe89a2a01ac1de19f66aca85a (ClampFOpConversion: ROCDL fmed3 for f16/f32, "
                  "'v_med3 returns the min if any operand is NaN', ALL: select on x != x; FDivOpConversion: "
                  "plain llvm fdiv; bf16 add/sub/mul through float32 and RTNE (EmitDualBF16ElementwiseOp); "
                  "SIToFP to bf16 through float32; Exp2OpConversion with ftz: llvm.amdgcn.exp2 (v_exp_f32, "
                  "flushes input and output denormals); SqrtOpConversion with ftz: llvm.amdgcn.sqrt "
                  "(v_sqrt_f32, 1 ulp, flushes); RsqrtOpConversion with ftz: v_rsq_f32; "
                  "ExpOpConversionApprox: x * log2e then llvm.exp2.f32, denormals kept)",
    "triton-reduce": "triton-lang/triton lib/Conversion/TritonGPUToLLVM/ReduceOpToLLVM.cpp "
                     "@ 9c3434b30044b60341290c17859541593df92084 (reduceWithinThreads: "
                     "acc = combine(acc, x) over a thread's registers; warpReduce: shuffleXor with offsets n/2 ... 1, "
                     "acc = combine(acc, partner)); the PTX of a 16-element tl.argmin compiled by the 3.6.0 and 3.9.0 "
                     "wheels for sm90: shfl.sync.bfly 8, 4, 2, 1, the result stored by thread 0",
    "triton-llvm": "triton-lang/triton python/src/llvm.cc @ 02978abfbc6f279df55a86978c284543661bafad "
                   "(createTargetMachine: enable_fp_fusion sets TargetOptions.AllowFPOpFusion = Fast: LLVM's "
                   "DAG combiner then fuses fmul + fadd into fma; Triton 3.9 warns the default flips to "
                   "off in 3.10, TRITON_DEFAULT_FP_FUSION)",
    "compiled": "the op table's kernels (tests/triton_faithful/op_kernels.py) compiled on a CPU for cuda:90, "
                "hip:gfx942 and hip:gfx950 with the Triton 3.6.0, 3.8.0 and 3.9.0 wheels, PTX/AMDGCN read "
                "(python gpu/ops_table.py --lowering TARGET)",
    "ptx-isa": "NVIDIA PTX ISA, floating-point instructions: div.full.f32 (max 2 ulp), div.approx.f32 (max 2 ulp), "
               "sqrt.approx.f32 (max relative error 2^-23), rsqrt.approx.f32 (2^-22.9), ex2.approx.f32 "
               "(2^-22.5 relative), fma.rn (one rounding); min/max: +0.0 > -0.0, a NaN operand loses, "
               "min.NaN/max.NaN and every arithmetic NaN result are the canonical NaN 0x7FFFFFFF",
    "cuda-math": "CUDA Math API, single precision: log2f, logf max 1 ulp (libdevice __nv_log2f/__nv_logf, "
                 "which Triton links for tl.log2/tl.log with nvvm-reflect-ftz; the PTX of Triton 3.6 and 3.9 "
                 "scales a subnormal input by 2^23 before the polynomial)",
    "llvm-langref": "LLVM LangRef (llvm/docs/LangRef.rst) llvm.maxnum/minnum: operands comparing equal (+0, -0) "
                    "may return either; llvm/llvm-project#112852 specified -0 < +0, #168838 reverted it, #170067 "
                    "specified it again: which LLVM a Triton wheel bundles decides, so AMD's +0/-0 is bracketed",
    "amd-isa": "AMD CDNA3 ISA: v_med3_f32 (NaN in any operand: v_min3_f32), v_max/v_min in IEEE mode (a quiet "
               "NaN operand loses), v_sqrt_f32/v_rsq_f32/v_exp_f32/v_log_f32 (1 ulp)",
    "h200": "gpu/results/ops-table.json: every op x special values, compiled Triton 3.6 for sm90 on an H200",
    "sass": "the SASS ptxas 12.9 and 13.4 (the Triton 3.9 wheel's) emit for sm_90, read with nvdisasm "
            "(python gpu/approx_ops.py --sass): div.full.f32 is FSETP |b| > 2^126 / >= 2^-126, FMUL of both "
            "operands by 0.25 / 2^24, MUFU.RCP, FMUL; a compile-time divisor is folded to FMUL x, fl(1/C); "
            "rcp/sqrt/rsqrt/ex2/lg2.approx.ftz.f32 are one MUFU each",
    "h200-rcp": "MUFU.RCP per divisor mantissa: fp8check/triton/data/sm90-rcp.npz, every one of the 2^23 "
                "mantissas measured on an H200 (gpu/approx_ops.py, 2026-12-05: rcp.approx.ftz.f32 of every float32, "
                "0 off the table; div.full.f32 on 2^30 random pairs, 0 off the model; gpu/results/approx-ops.json)",
})

_PTX = OP_SOURCES["ptx-isa"]
_CUDA_MATH = OP_SOURCES["cuda-math"]
_AMD_ISA = OP_SOURCES["amd-isa"]


def _nvidia_ops(arch: str) -> OpRules:
    hopper = arch == "sm90"  # measured on an H200 (the approximate division's reciprocals, SASS)
    xorsign = arch in ("sm90", "sm100")  # min.xorsign.abs needs sm90 (in the PTX of cuda:90 and cuda:100)
    return OpRules(
        minmax_zeros="ordered", nan_pattern="canonical_nvidia", arith_nan="canonical",
        clamp="xorsign_abs" if xorsign else "minmax",
        clip_patterns=("negf", "splat_negf", "sub0", "const") if xorsign else (),
        bf16_clamp="xorsign_abs" if xorsign else "minmax",
        fma_contraction=("float32", "float16", "bfloat16"), fma_pair="first",
        fdiv=ErrorBound(ulps=2, source=_PTX),
        fdiv_const="reciprocal", fdiv_const_bound=ErrorBound(ulps=2, source=_PTX + " (div.approx.f32 1.0, C)"),
        approx_model="sm90" if hopper else "",
        # sm90: MUFU.SQRT/RSQ measured for every input (nvidia_approx.mufu_root); elsewhere the PTX bound
        sqrt=Approx("sqrt.approx.ftz.f32", ErrorBound(rel=2.0 ** -23, source=_PTX), ftz=True,
                    status="pinned" if hopper else "bracketed"),
        rsqrt=Approx("rsqrt.approx.ftz.f32", ErrorBound(rel=2.0 ** -22.9, source=_PTX), ftz=True,
                     status="pinned" if hopper else "bracketed"),
        exp2=Approx("ex2.approx.ftz.f32", ErrorBound(rel=2.0 ** -22.5, source=_PTX), ftz=True, status="bracketed"),
        exp=Approx("mul.f32 by log2(e), ex2.approx.f32", ErrorBound(rel=2.0 ** -22.5, source=_PTX),
                   status="bracketed"),
        # libdevice scales a subnormal input by 2^23 first (setp.lt.f32 |x|, 2^-126; mul.f32 by 2^23; the
        # exponent less 23) even in Triton's ftz build: only its polynomial's fma.rn.ftz flush, on normal values
        log2=Approx("libdevice __nv_log2f (subnormal inputs scaled by 2^23)", ErrorBound(ulps=1, source=_CUDA_MATH),
                    status="bracketed"),
        log=Approx("libdevice __nv_logf (subnormal inputs scaled by 2^23)", ErrorBound(ulps=1, source=_CUDA_MATH),
                   status="bracketed"),
        bf16_nan=0x7FFF, int_to_bf16="direct",
        lowerings=MappingProxyType({
            "tl.maximum / tl.minimum": "max.f32 / min.f32 (NaN loses, +0 > -0); propagate_nan=ALL: max.NaN.f32",
            "tl.clamp": ("min.xorsign.abs.f32 x, hi when lo is -hi (NaN -> hi with the NaN's sign: +NaN -> +hi, "
                         "-NaN -> -hi; ALL: min.NaN.xorsign.abs); "
                         "else max.f32 then min.f32" if xorsign else
                         "max.f32 then min.f32 (min.xorsign.abs needs sm90)"),
            "tl.max / tl.min": "max.f32 / min.f32 combine (NaN ignored, +0 > -0)",
            "tl.argmax / tl.argmin": "setp + selp combine; a NaN row's index follows the reduction order "
                                     "(bracketed: NaN ignored, the shuffle tree, the in-thread order)",
            "tl.where": "selp (exact)",
            "a * b + c": "fma.rn.f32 / fma.rn.bf16 (enable_fp_fusion, on by default); a*b + c*d: the first product",
            "/ (float32)": ("div.full.f32: |b| > 2^126 or < 2^-126 scaled by 1/4 or 2^24, MUFU.RCP, one FMUL "
                            "(SASS); exact where MUFU.RCP of the divisor's mantissa was measured (H200), else "
                            "bracketed (1 ulp in the reciprocal)" if hopper else "div.full.f32 (bracketed, 2 ulp)"),
            "/ by a constant": ("Triton 3.9: div.approx.f32 1.0, C then mul.f32; 3.6, 3.8: div.full.f32; ptxas folds "
                                "both to FMUL x, fl(1/C) for 2^-126 <= |C| <= 2^126 (exact)" if hopper else
                                "Triton 3.9: div.approx.f32 1.0, C then mul.f32 (rn: x * fl(1/C)); 3.6, 3.8: "
                                "div.full.f32"),
            "tl.div_rn": "div.rn.f32 (exact)",
            "tl.sqrt": ("sqrt.approx.ftz.f32 (MUFU.SQRT: every input measured on an H200, exact)" if hopper else
                        "sqrt.approx.ftz.f32 (bracketed)"),
            "tl.sqrt_rn": "sqrt.rn.f32 (exact)",
            "tl.rsqrt": ("rsqrt.approx.ftz.f32 (MUFU.RSQ: every input measured on an H200, exact)" if hopper else
                         "rsqrt.approx.ftz.f32 (bracketed)"),
            "tl.exp": "mul.f32 by log2(e), ex2.approx.f32 (bracketed)",
            "tl.exp2": "ex2.approx.ftz.f32 (MUFU.EX2; exact for integer inputs, else bracketed; subnormal results "
                       "flushed)",
            "tl.log2 / tl.log": "libdevice __nv_log2f / __nv_logf: a subnormal input scaled by 2^23 first, not "
                                "flushed (log2(2^-149) = -149); a polynomial in fma.rn.ftz.f32 (bracketed, 1 ulp)",
            "bfloat16 + - * fma": "add/sub/mul/fma.rn.bf16: one rounding" if xorsign else "one rounding",
            "bfloat16 /": "the frontend divides in float32 (div.full.f32)",
            "int -> bfloat16": "cvt.rn.bf16.s32: one rounding", "float -> int": "cvt.rzi: NaN -> 0, saturating",
            "NaN results": "the canonical NaN 0x7FFFFFFF (bfloat16 0x7FFF)",
        }),
        sources=("triton-nvidia", "triton-common", "triton-reduce", "triton-llvm", "compiled", "ptx-isa", "cuda-math",
                 "h200") + (("sass", "h200-rcp") if hopper else ()),
    )


_AMD_1ULP = ErrorBound(ulps=1, source=_AMD_ISA)
_AMD_2ULP = ErrorBound(ulps=2, source="llvm.log.f32 on AMDGPU: v_log_f32 and a float32 multiply by ln 2 "
                                      "(no bound stated; 2 ulp assumed)")
AMD_OPS = OpRules(
    minmax_zeros="either", nan_pattern="quiet", arith_nan="propagate", clamp="med3", clip_patterns=(),
    bf16_clamp="minmax", fma_contraction=("float32", "float16"), fma_pair="either",
    fdiv=None, fdiv_const="divide", fdiv_const_bound=None,
    sqrt=Approx("v_sqrt_f32 (ftz)", _AMD_1ULP, ftz=True, status="bracketed"),
    rsqrt=Approx("v_rsq_f32 (ftz)", _AMD_1ULP, ftz=True, status="bracketed"),
    exp2=Approx("v_exp_f32 (llvm.amdgcn.exp2, ftz)", _AMD_1ULP, ftz=True, status="bracketed"),
    exp=Approx("v_mul_f32 by log2(e), llvm.exp2.f32 (v_exp_f32 with denormal scaling)", _AMD_1ULP,
               status="bracketed"),
    log2=Approx("llvm.log2.f32 (v_log_f32 with denormal scaling)", _AMD_1ULP, status="bracketed"),
    log=Approx("llvm.log.f32 (v_log_f32, multiply by ln 2 in extra precision)", _AMD_2ULP, status="bracketed"),
    bf16_nan=0x7FFF, int_to_bf16="via_f32",
    lowerings=MappingProxyType({
        "tl.maximum / tl.minimum": "llvm.maxnum/minnum (v_max_f32 on canonicalized operands: NaN loses; "
                                   "+0/-0 either: bracketed); ALL: llvm.maximum/minimum",
        "tl.clamp": "Triton 3.8, 3.9: v_med3_f32 x, lo, hi for any bounds (NaN -> min(lo, hi)); ALL: select on "
                    "x != x; 3.6: v_max_f32 then v_min_f32 (NaN -> lo); bfloat16: max then min",
        "tl.max / tl.min": "v_max_f32 / v_min_f32 combine (NaN ignored; +0/-0 either)",
        "tl.argmax / tl.argmin": "v_cmp + v_cndmask combine (a NaN row's index follows the reduction order)",
        "tl.where": "v_cndmask (exact)",
        "a * b + c": "v_fma_f32 / v_fmac_f32 (enable_fp_fusion); a*b + c*d: either product, per element "
                     "(the SLP vectorizer packs some products into v_pk_mul_f32: bracketed); bfloat16: not fused",
        "/ (float32)": "llvm fdiv: v_div_scale/v_rcp/v_fma/v_div_fmas/v_div_fixup, correctly rounded",
        "tl.sqrt": "v_sqrt_f32 (ftz, 1 ulp: bracketed)", "tl.sqrt_rn": "llvm.sqrt: correctly rounded",
        "tl.rsqrt": "v_rsq_f32 (ftz, 1 ulp: bracketed)", "tl.exp2": "v_exp_f32 (ftz, 1 ulp: bracketed)",
        "tl.exp": "x * log2(e), v_exp_f32 with denormal scaling (bracketed)",
        "tl.log2 / tl.log": "v_log_f32 with denormal scaling (bracketed)",
        "bfloat16 + - *": "float32 op, software RNE to bfloat16 (gfx950: v_cvt_pk_bf16_f32): one rounding each, "
                          "no fma", "int -> bfloat16": "v_cvt_f32_i32, RNE (two roundings)",
        "float -> int": "v_cvt_i32_f32: NaN -> 0, saturating",
        "NaN results": "IEEE: an input NaN quieted, a new NaN 0x7FC00000; float32 -> bfloat16 NaN 0x7FFF "
                       "(gfx942 software RNE; gfx950 v_cvt_pk_bf16_f32: not tabulated, NaN by class)",
    }),
    sources=("triton-amd", "triton-common", "triton-llvm", "compiled", "llvm-langref", "amd-isa"),
)


_NVIDIA_NAMES = {"sm89": "Ada", "sm90": "Hopper", "sm100": "Blackwell"}


def _sm(arch: str) -> Target:
    down: dict[tuple[str, str, str], Downcast] = {}
    for src in SOURCES:
        for fmt in OCP:
            insn = {"float32": f"cvt.rn.satfinite.{fmt[:4]}x2.f32",
                    "float16": f"cvt.rn.satfinite.{fmt[:4]}x2.f16x2",
                    "bfloat16": f"cvt.rn.satfinite.{fmt[:4]}x2.bf16x2" if arch == "sm100" else
                    f"cvt.f32.bf16 + cvt.rn.satfinite.{fmt[:4]}x2.f32"}[src]
            down[(src, fmt, "rtne")] = Downcast(profile=TRITON_SM90, lowering=insn)
    down[("float32", "e5m2", "rtz")] = Downcast(profile=TRITON_SM90_RTZ,
                                                lowering="cvt.rz.f16.f32 + upper byte")
    up: dict[tuple[str, str], Upcast] = {}
    for fmt in OCP:
        cvt = f"cvt.rn.f16x2.{fmt[:4]}x2"
        up[(fmt, "float16")] = Upcast(lowering=cvt)
        up[(fmt, "float32")] = Upcast(lowering=cvt + " + cvt.f32.f16")
    up[("e4m3fn", "bfloat16")] = Upcast(lowering="cvt.rn.bf16x2.e4m3x2" if arch == "sm100" else (
        "cvt.rn.f16x2.e4m3x2 + " + ("cvt.bf16.f16" if arch == "sm90" else "cvt.f32.f16 + cvt.rn.bf16.f32")))
    up[("e5m2", "bfloat16")] = Upcast(specials="finite",
                                      lowering="bit shift + mul.rn.bf16x2 by 2^112 (Inf/NaN codes become finite)")
    return Target(
        name=arch,
        description=f"NVIDIA {_NVIDIA_NAMES[arch]} ({arch})",
        provenance=("pinned on an H200 against compiled Triton 3.6 (downcasts); the upcasts and the sm89 lowering "
                    "read from the PTX Triton emits" if arch == "sm90" else
                    "the PTX Triton 3.9.0 emits for cuda:100: sm90's instructions, bfloat16 <-> fp8 direct "
                    "(cvt.rn.satfinite.*x2.bf16x2, cvt.rn.bf16x2.e4m3x2: the same values); not pinned on a Blackwell "
                    "GPU" if arch == "sm100" else
                    "the same instructions as sm90 (PTX Triton emits for sm89); not pinned on an Ada GPU"),
        profile=TRITON_SM90,
        formats=frozenset(OCP),
        downcasts=_freeze(down),
        upcasts=_freeze(up),
        triton_versions=_VERSIONS,
        approximate_fp32_division=(
            "div.full.f32 (triton-lang/triton#10661), the hardware reciprocal and one multiply, whose reciprocal "
            "of this divisor was not measured: within 1 ulp of fl(1/b)" if arch == "sm90" else
            "div.full.f32 (within 2 ulp; triton-lang/triton#10661)"),
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
        allocator=ROCM_CACHING_ALLOCATOR,
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
        allocator=ROCM_CACHING_ALLOCATOR,
        description="AMD CDNA4 (MI355)",
        provenance="derived from source, not pinned on hardware",
        ops=dataclasses.replace(AMD_OPS, bf16_nan=None),  # v_cvt_pk_bf16_f32: its NaN is not tabulated
        profile=TRITON_GFX950,
        formats=frozenset(FP8),
        downcasts=_freeze(down),
        upcasts=_freeze(up),
        triton_versions=_VERSIONS,
        notes=("fnuz conversions are emulated in software (no fnuz hardware on CDNA4)",
               "float16 -> e5m2fnuz with fp_downcast_rounding='rtz' takes the upper byte of the float16 bits "
               "(off by a factor of 2)"),
    )


TARGETS: Mapping[str, Target] = MappingProxyType({t.name: t for t in (_sm("sm90"), _sm("sm89"), _sm("sm100"), _gfx942(),
                                                                      _gfx950())})
#: The named profiles of the targets, for the stack registry.
PROFILES: Mapping[str, Profile] = MappingProxyType(
    {p.name: p for p in (TRITON_SM90, TRITON_SM90_RTZ, TRITON_GFX942, TRITON_GFX950, RTZ_TRUNCATE)})


def for_triton(target: Target, version: str) -> Target:
    """``target`` as compiled by Triton ``version`` (the tables are for
    3.9.0; what 3.6.0 and 3.8.0 emit differently, read from their PTX and
    AMDGCN, is applied here)."""
    base = version.split("+")[0]
    ops = _ops_for_triton(target.ops, target.name, base)
    if base == "3.9.0" or not target.name.startswith("gfx"):
        return target if ops is target.ops else dataclasses.replace(target, ops=ops)
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
    return dataclasses.replace(target, downcasts=_freeze(down), upcasts=_freeze(up), ops=ops,
                               description=f"{target.description}, as Triton {base} compiles it")


def _ops_for_triton(ops: OpRules | None, name: str, base: str) -> OpRules | None:
    """What Triton 3.6 and 3.8 compile differently from 3.9 (read from the PTX/AMDGCN of each wheel)."""
    if ops is None or base == "3.9.0":
        return ops
    if name in ("sm90", "sm100") and base == "3.6.0":
        # 3.6 negates with 0 - x: `-h` of a scalar is a splat of (0 - h), which isClipPattern does not match
        return dataclasses.replace(ops, clip_patterns=("negf", "sub0", "const"))
    if name.startswith("gfx") and base == "3.6.0":
        return dataclasses.replace(ops, clamp="minmax")  # 3.6: v_max_f32 then v_min_f32; 3.8 has v_med3_f32
    return ops


def of_device(device: object = "cuda") -> str:
    """The target name of the GPU ``device`` (a CUDA or ROCm torch device): sm89, sm90, sm100, gfx942, gfx950, or
    ``sm<major><minor>`` / the ROCm architecture for one fp8check has no target of."""
    import torch

    dev = torch.device(str(device))
    arch = getattr(torch.cuda.get_device_properties(dev), "gcnArchName", "") or ""
    if arch:
        return arch.split(":")[0]
    major, minor = torch.cuda.get_device_capability(dev)
    return f"sm{major}{minor}"


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

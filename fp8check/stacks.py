"""The stack registry: what each real FP8 stack was observed to do, as data.

A real stack (torch on a CPU or a CUDA GPU, ml_dtypes, compiled Triton, the
Triton interpreter) changes its FP8 semantics between releases and with the
platform it runs on (the CPU's instruction set picks torch's oneDNN path;
the GPU architecture picks Triton's conversion instructions). fp8check never
asserts such behaviour unconditionally: each :class:`Observation` says what
a stack did, for which release series and platform, which run pinned it,
which of its divergences are upstream bugs (:class:`KnownDivergence`, the
properties' strict xfails) and which earlier bugs a release fixed.

:func:`lookup` finds the observation covering what is installed here. Where
none does, the stack is *unpinned*: the built-in adapters still claim the
nearest profile, but the tests that pin the stack skip with
:func:`unpinned_reason`, and ``fp8check survey`` reports the stack's
fingerprint instead of a verdict. An unpinned environment is a finding about
the environment, never a failed test of fp8check.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fp8check import inputs, profiles
from fp8check.formats import Format
from fp8check.profiles import Profile

__all__ = [
    "KnownDivergence",
    "Platform",
    "Observation",
    "Environment",
    "OBSERVATIONS",
    "environment",
    "lookup",
    "nearest",
    "Claim",
    "claim",
    "unpinned_reason",
    "installed_version",
]


# -- known upstream divergences -------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class KnownDivergence:
    """A divergence of a real stack from what it claims that is an upstream bug.

    ``hazards``: the hazard sets (:data:`fp8check.hazards.HAZARDS`) on which
    it shows (None: the stack diverges broadly; tests of other hazards must
    still pass). ``affects``: when given, a function ``(bits, input_dtype,
    fmt) -> bool mask`` telling exactly which inputs it concerns; the general
    properties then excuse those inputs and one dedicated property expects
    them to fail. ``kind``: ``cast`` (against the claimed profile),
    ``decode``, or ``exact`` (the claimed profile models the bug, e.g.
    double rounding through float32, and only a cast that rounds once
    exposes it).
    """

    formats: frozenset[str]
    input_dtypes: frozenset[str]
    reason: str
    hazards: frozenset[str] | None = None
    affects: Callable[[np.ndarray, str, Format], np.ndarray] | None = field(default=None, compare=False)
    kind: str = "cast"

    def applies(self, fmt: Format, input_dtype: str | None, kind: str = "cast") -> bool:
        return (
            self.kind == kind
            and fmt.name in self.formats
            and (input_dtype is None or input_dtype in self.input_dtypes)
        )


def e8m0_subnormal_inputs(bits: np.ndarray, input_dtype: str, fmt: Format) -> np.ndarray:
    """Mask of the inputs the e8m0fnu subnormal round-up concerns.

    Those whose float32 value (float64 inputs are rounded to float32 first by
    the stacks that show it) lies strictly between 2^-127 and 1.5 * 2^-127,
    either sign (torch takes |x|; ml_dtypes gives NaN for negatives).
    """
    b = np.asarray(bits)
    if fmt.name != "e8m0fnu" or input_dtype == "float16":
        return np.zeros(b.shape, dtype=bool)
    with np.errstate(all="ignore"):
        f32 = inputs.from_bits(b, input_dtype).astype(np.float32)
    mag = f32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (mag > np.uint32(0x00400000)) & (mag < np.uint32(0x00600000))


def torch_cuda_fp16_negative_nan_inputs(bits: np.ndarray, input_dtype: str, fmt: Format) -> np.ndarray:
    """Mask of the inputs whose NaN sign torch CUDA drops: float16 NaNs with
    the sign bit set, into a format that has a NaN of each sign."""
    b = np.asarray(bits)
    if input_dtype != "float16" or fmt.name not in ("e4m3fn", "e5m2"):
        return np.zeros(b.shape, dtype=bool)
    return inputs.is_nan_bits(b, "float16") & ((b.astype(np.uint16) >> 15) == 1)


_FP8 = frozenset({"e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"})
_TORCH_FORMATS = _FP8 | {"e8m0fnu"}
_ML_DTYPES_FORMATS = _TORCH_FORMATS | {"e2m1fn", "e2m3fn", "e3m2fn"}
_SIXTEEN_AND_32 = frozenset({"float32", "float16", "bfloat16"})

# e8m0fnu inputs strictly between 2^-127 (code 0x00) and the midpoint
# 1.5 * 2^-127: RNE gives 0x00; torch (c10 Float8_e8m0fnu) and ml_dtypes 0.6
# round them up to 0x01. They are float32/bfloat16 subnormals.
E8M0_SUBNORMAL_REASON = (
    "e8m0fnu rounds float32 subnormal inputs (from float32, bfloat16 or float64) in (2^-127, 1.5*2^-127) up to 0x01 "
    "(RNE gives 0x00); torch: no upstream issue found in pytorch/pytorch; ml_dtypes: fixed in 0.7.0 by "
    "jax-ml/ml_dtypes#434"
)
E8M0_SUBNORMAL = KnownDivergence(
    formats=frozenset({"e8m0fnu"}),
    input_dtypes=frozenset({"float32", "bfloat16", "float64"}),
    reason=E8M0_SUBNORMAL_REASON,
    hazards=frozenset({"input_subnormal"}),
    affects=e8m0_subnormal_inputs,
)
FLOAT64_TORCH = KnownDivergence(
    formats=_TORCH_FORMATS,
    input_dtypes=frozenset({"float64"}),
    reason="torch casts float64 to fp8 through float32 (double rounding: inputs just off an fp8 "
    "midpoint round the wrong way); no upstream issue found in pytorch/pytorch",
    kind="exact",
)
FLOAT64_ML_DTYPES = KnownDivergence(
    formats=_ML_DTYPES_FORMATS,
    input_dtypes=frozenset({"float64"}),
    reason="ml_dtypes casts float64 to fp8 through float32 (double rounding); upstream: "
    "jax-ml/ml_dtypes#401 (fixed in ml_dtypes 0.7.0)",
    kind="exact",
)
TORCH_CUDA_FP16_NAN = KnownDivergence(
    formats=frozenset({"e4m3fn", "e5m2"}),
    input_dtypes=frozenset({"float16"}),
    reason="torch CUDA casts float16 NaN of either sign to +NaN 0x7F (e4m3fn, e5m2), where torch on the CPU and torch "
    "CUDA from float32/bfloat16 keep the sign (measured on an H200, torch 2.11); no upstream issue found",
    hazards=frozenset({"nan"}),
    affects=torch_cuda_fp16_negative_nan_inputs,
)
TRITON_INTERPRETER_REASON = (
    "Triton interpreter fp8 downcasts round ties away, lose the mantissa carry, keep mantissa "
    "bits on overflow and truncate subnormals; upstream: triton-lang/triton#8322 "
    "(fix pending in triton-lang/triton#11897)"
)
TRITON_INTERPRETER_DECODE_REASON = (
    "Triton interpreter decodes fp8 NaN/Inf codes to finite values and fnuz 0x80 to -0.0; "
    "upstream: triton-lang/triton#8322 (interpreter fp8 conversions; fix pending in #11897)"
)
# Measured with Triton 3.9.0's interpreter: every hazard set but the exact
# values diverges for every format and input dtype; from float16 to the e5m2
# types even exact values do (float16 subnormals are truncated).
TRITON_INTERPRETER_KNOWN = (
    KnownDivergence(
        formats=_FP8,
        input_dtypes=_SIXTEEN_AND_32,
        reason=TRITON_INTERPRETER_REASON,
        hazards=frozenset({"rounding_ties", "mantissa_carry", "overflow", "infinity", "nan", "signed_zero",
                           "subnormal", "input_subnormal"}),
    ),
    KnownDivergence(
        formats=frozenset({"e5m2", "e5m2fnuz"}),
        input_dtypes=frozenset({"float16"}),
        reason=TRITON_INTERPRETER_REASON,
        hazards=frozenset({"exact_values"}),
    ),
    KnownDivergence(formats=_FP8, input_dtypes=_SIXTEEN_AND_32, reason=TRITON_INTERPRETER_DECODE_REASON,
                    kind="decode"),
)


# -- where an observation holds ---------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Platform:
    """The platform conditions an observation was made under.

    ``device``: ``cpu`` or ``cuda``. ``cpu_flags``: CPU features that must
    all be present; ``without_cpu_flags``: features of which none may be
    (the flags are Linux ``/proc/cpuinfo`` names: ``amx_tile``,
    ``avx512_fp16``, ...). ``gpu``: the CUDA architecture (``sm90``).
    """

    device: str = "cpu"
    cpu_flags: frozenset[str] = frozenset()
    without_cpu_flags: frozenset[str] = frozenset()
    gpu: str | None = None

    def matches(self, env: Environment) -> bool:
        if self.device == "cuda":
            return env.gpu is not None and (self.gpu is None or env.gpu == self.gpu)
        return self.cpu_flags <= env.cpu_flags and not (self.without_cpu_flags & env.cpu_flags)

    def describe(self) -> str:
        if self.device == "cuda":
            return f"CUDA {self.gpu}" if self.gpu else "CUDA"
        parts = ["CPU"]
        if self.cpu_flags:
            parts.append("with " + ", ".join(sorted(self.cpu_flags)))
        if self.without_cpu_flags:
            parts.append("without " + ", ".join(sorted(self.without_cpu_flags)))
        return " ".join(parts)


@dataclass(frozen=True, kw_only=True)
class Observation:
    """What one stack did, for some release series on some platform.

    ``stack``: ``torch``, ``ml_dtypes``, ``triton`` (compiled) or
    ``triton-interpreter``; ``package``: the distribution whose version
    keys it; ``series``: the ``major.minor`` release series measured.
    ``operation``: ``cast`` (``profile`` is what the casts conform to) or
    ``scaled_mm`` (``facts`` say what ``torch._scaled_mm`` does).
    ``fixed``: upstream bugs of earlier series that this one no longer
    shows, one line each ("fixed upstream in VERSION").
    """

    stack: str
    package: str
    series: tuple[str, ...]
    platform: Platform
    measured: str
    pinned_by: str
    operation: str = "cast"
    profile: Profile | None = None
    known: tuple[KnownDivergence, ...] = ()
    fixed: tuple[str, ...] = ()
    facts: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """``'ml_dtypes 0.7 (CPU)'``: which entry matched, for the survey."""
        return f"{self.stack} {'/'.join(self.series)} ({self.platform.describe()})"

    def fact(self, name: str, default: Any = None) -> Any:
        return dict(self.facts).get(name, default)

    def covers(self, version: str, env: Environment) -> bool:
        return _series(version) in self.series and self.platform.matches(env)


# -- what is installed here -------------------------------------------------------


@dataclass(frozen=True)
class Environment:
    """The facts :func:`lookup` keys on: CPU flags and the CUDA architecture."""

    cpu_flags: frozenset[str]
    gpu: str | None
    machine: str

    def describe(self) -> str:
        notable = sorted(self.cpu_flags & {"amx_tile", "amx_bf16", "amx_int8", "avx512_fp16", "avx512f", "avx2"})
        gpu = f", CUDA {self.gpu}" if self.gpu else ""
        return f"{self.machine} CPU ({', '.join(notable) or 'no AVX2/AVX-512/AMX'}){gpu}"


def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _gpu_arch() -> str | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available() or torch.version.hip is not None:
            return None
        major, minor = torch.cuda.get_device_capability(0)
    except Exception:  # a broken driver is no GPU for the registry
        return None
    return f"sm{major}{minor}"


@functools.lru_cache(maxsize=None)
def _environment(gpu_key: bool) -> Environment:
    import platform

    return Environment(cpu_flags=_cpu_flags(), gpu=_gpu_arch() if gpu_key else None, machine=platform.machine())


def environment() -> Environment:
    """This machine's CPU flags and, where torch is imported and sees one, the CUDA architecture."""
    return _environment("torch" in sys.modules)


def installed_version(package: str) -> str | None:
    """The installed version of ``package`` (its distribution), or None."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _series(version: str) -> str:
    release = version.split("+")[0].split(".")
    return ".".join(part for part in release[:2])


# -- the registry -------------------------------------------------------------------

_CPU = Platform()
# torch's CPU _scaled_mm takes oneDNN with tensorwise scales where
# cpuinfo_has_x86_amx_int8() (same operand dtypes) or _amx_fp16() (mixed)
# holds (at::native::_scaled_mm_out_cpu, aten/src/ATen/native/Blas.cpp;
# read from the 2.13.0 and 2.14.1 binaries). That path behaves differently
# and is not pinned here.
_CPU_WITHOUT_ONEDNN_FP8 = Platform(without_cpu_flags=frozenset({"amx_int8", "amx_fp16"}))
# Measured on CPUs with AVX2 only; AVX512-FP16 and AMX change torch's CPU kernels.
_CPU_AVX2_ONLY = Platform(without_cpu_flags=frozenset({"amx_tile", "avx512_fp16"}))
_SM90 = Platform(device="cuda", gpu="sm90")

OBSERVATIONS: tuple[Observation, ...] = (
    Observation(
        stack="torch", package="torch", series=("2.11",), platform=_CPU, profile=profiles.TORCH_2_11,
        known=(E8M0_SUBNORMAL, FLOAT64_TORCH),
        measured="torch 2.11.0 on the CPU of an H200 host, every 16-bit input, 2^24 float32, 2026-11",
        pinned_by="tests/test_real_stacks.py (on the GPU host: gpu/run_all.sh tests-gpu)",
    ),
    Observation(
        stack="torch", package="torch", series=("2.11",), platform=_SM90, profile=profiles.TORCH_2_11,
        known=(E8M0_SUBNORMAL, FLOAT64_TORCH, TORCH_CUDA_FP16_NAN),
        measured="torch 2.11.0+cu130 on an H200: every 16-bit input, all 2^32 float32 inputs, 2026-11",
        pinned_by="properties on torch-cuda and tests/test_gpu_stacks.py (gpu/run_all.sh tests-gpu)",
    ),
    Observation(
        stack="torch", package="torch", series=("2.13",), platform=_CPU, profile=profiles.TORCH_2_12,
        known=(E8M0_SUBNORMAL, FLOAT64_TORCH),
        measured="torch 2.13.0+cpu on x86-64 CPUs with and without AMX: every 16-bit input, 2^20 float32, "
        "2^18 float64 near midpoints, 2026-12-01",
        pinned_by="tests/test_real_stacks.py and the properties on torch-cpu (CI, pinned lane)",
    ),
    Observation(
        stack="torch", package="torch", series=("2.14",), platform=_CPU_AVX2_ONLY, profile=profiles.TORCH_2_12,
        known=(E8M0_SUBNORMAL, FLOAT64_TORCH),
        measured="torch 2.14.1+cu130 on an AVX2 CPU: every 16-bit input, all 2^32 float32 inputs, 3.5M float64 "
        "near midpoints, byte-identical to 2.13.0 on all of them, 2026-12-01",
        pinned_by="tests/test_real_stacks.py and the properties on torch-cpu (CI, newest lane)",
    ),
    Observation(
        stack="torch", package="torch", series=("2.13", "2.14"), platform=_CPU_WITHOUT_ONEDNN_FP8,
        operation="scaled_mm",
        measured="torch 2.13.0+cpu and 2.14.1+cu130 on an x86-64 CPU without AMX (the emulated path): 448 operand "
        "x output x scale combinations bit-identical to the float32 product of the scaled inputs, 2026-12-01",
        pinned_by="tests/test_recipes_matmul.py (CI, pinned and newest lanes)",
        facts=(
            ("operands", tuple(sorted(_FP8))),
            ("accumulation", "float32, scales applied to the inputs"),
            ("overflow", (("float32", "Inf,NaN"), ("bfloat16", "Inf,NaN"), ("float16", "Inf"), ("e4m3fn", "448"),
                          ("e5m2", "Inf"), ("e4m3fnuz", "NaN"), ("e5m2fnuz", "NaN"))),
            ("fast_accum", "ignored"),
            ("scale_result_fnuz", "torch CPU _scaled_mm applies scale_result only to e4m3fn/e5m2 outputs; for "
             "e4m3fnuz/e5m2fnuz it is ignored (CPU and CUDA also disagree on its direction: pytorch/pytorch#190449)"),
        ),
    ),
    Observation(
        stack="ml_dtypes", package="ml_dtypes", series=("0.6",), platform=_CPU, profile=profiles.ML_DTYPES_0_6,
        known=(E8M0_SUBNORMAL, FLOAT64_ML_DTYPES),
        measured="ml_dtypes 0.6.0: every 16-bit input and all 2^32 float32 inputs, float64 near midpoints, "
        "2026-11 and again 2026-12-01",
        pinned_by="tests/test_real_stacks.py and the properties on ml_dtypes (CI, pinned lane)",
    ),
    Observation(
        stack="ml_dtypes", package="ml_dtypes", series=("0.7",), platform=_CPU, profile=profiles.ML_DTYPES_0_7,
        measured="ml_dtypes 0.7.0: every 16-bit input, all 2^32 float32 inputs, 3.65M float64 near midpoints, "
        "every code decoded, 2026-12-01 (differs from 0.6.0 only by the two fixes below)",
        pinned_by="tests/test_real_stacks.py and the properties on ml_dtypes (CI, README and newest lanes)",
        fixed=(
            "float64 is rounded once, not through float32: fixed upstream in ml_dtypes 0.7.0 (jax-ml/ml_dtypes#401)",
            "float32 subnormals round to nearest into e8m0fnu: fixed upstream in ml_dtypes 0.7.0 "
            "(jax-ml/ml_dtypes#434)",
        ),
    ),
    Observation(
        stack="triton", package="triton", series=("3.6",), platform=_SM90, profile=profiles.TRITON_SM90,
        measured="Triton 3.6.0 compiled for an H200 (sm90): all 2^32 float32 inputs, every 16-bit input, 2026-11",
        pinned_by="properties on triton-cuda (gpu/run_all.sh tests-gpu)",
    ),
    Observation(
        stack="triton-interpreter", package="triton", series=("3.9",), platform=_CPU,
        profile=profiles.TRITON_INTERPRETER, known=TRITON_INTERPRETER_KNOWN,
        measured="Triton 3.9.0's interpreter (TRITON_INTERPRET=1) on the CPU, 2026-11",
        pinned_by="properties on triton-interpreter (strict xfails), CI",
    ),
    Observation(
        stack="triton-faithful", package="triton", series=("3.6", "3.8", "3.9"), platform=_CPU,
        profile=profiles.TRITON_SM90,
        measured="fp8check's faithful Triton interpreter, target sm90: its tables pinned against Triton 3.6 compiled "
        "for an H200 (gpu/triton_faithful.py: every float32 input, both directions)",
        pinned_by="properties on triton-faithful (CI) and gpu/run_all.sh triton-faithful (H200)",
    ),
    Observation(
        stack="triton-interpreter", package="triton", series=("3.6",), platform=_CPU,
        profile=profiles.TRITON_INTERPRETER, known=TRITON_INTERPRETER_KNOWN,
        measured="Triton 3.6.0's interpreter on the CPU of an H200 host: cannot build the fnuz types, 2026-11",
        pinned_by="properties on triton-interpreter (gpu/run_all.sh tests-gpu)",
    ),
)


def lookup(stack: str, *, operation: str = "cast", device: str = "cpu", version: str | None = None,
           env: Environment | None = None) -> Observation | None:
    """The observation covering ``stack`` as installed here (None: unpinned).

    ``version`` defaults to the installed version of the stack's package;
    ``env`` to :func:`environment`.
    """
    env = env or environment()
    for obs in OBSERVATIONS:
        if obs.stack != stack or obs.operation != operation or obs.platform.device != device:
            continue
        v = version or installed_version(obs.package)
        if v is not None and obs.covers(v, env):
            return obs
    return None


def nearest(stack: str, *, operation: str = "cast", device: str = "cpu", version: str | None = None) -> Observation | None:
    """The observation of ``stack`` from the newest series at or below ``version`` (the
    same device preferred), or the oldest observed where ``version`` precedes them all."""
    candidates = [o for o in OBSERVATIONS if o.stack == stack and o.operation == operation]
    if not candidates:
        return None
    v = version or installed_version(candidates[0].package) or "0"

    def key(o: Observation) -> tuple[tuple[int, ...], bool]:
        newest = max(tuple(int(p) if p.isdigit() else 0 for p in s.split(".")) for s in o.series)
        return newest, o.platform.device == device

    mine = tuple(int(p) if p.isdigit() else 0 for p in _series(v).split("."))
    below = [o for o in candidates if key(o)[0] <= mine]
    return max(below, key=key) if below else min(candidates, key=key)


@dataclass(frozen=True)
class Claim:
    """What a built-in adapter of a stack claims here: a profile and its known upstream bugs,
    from the observation covering it (``observation``), or from the nearest one with
    ``unpinned`` saying why none covers it."""

    profile: Profile
    known: tuple[KnownDivergence, ...]
    observation: Observation | None
    unpinned: str | None


def claim(stack: str, *, device: str = "cpu", version: str | None = None) -> Claim:
    """The :class:`Claim` of ``stack``'s casts as installed here."""
    obs = lookup(stack, device=device, version=version)
    if obs is not None and obs.profile is not None:
        return Claim(obs.profile, obs.known, obs, None)
    near = nearest(stack, device=device, version=version)
    if near is None or near.profile is None:
        raise LookupError(f"the stack registry has no cast observation of {stack!r}")
    reason = unpinned_reason(stack, device=device, version=version) or f"{stack} is not pinned"
    return Claim(near.profile, near.known, None, f"{reason}; its adapter claims {near.profile.name}, the profile "
                                                 f"of the nearest observed release ({near.label})")


def unpinned_reason(stack: str, *, operation: str = "cast", device: str = "cpu", version: str | None = None,
                    env: Environment | None = None) -> str | None:
    """None where :func:`lookup` finds an observation; else one line naming what is unpinned."""
    env = env or environment()
    package = next((o.package for o in OBSERVATIONS if o.stack == stack), stack)
    v = version or installed_version(package)
    if v is None:
        return f"{package} is not installed"
    if lookup(stack, operation=operation, device=device, version=v, env=env) is not None:
        return None
    covered = sorted({f"{s} ({o.platform.describe()})" for o in OBSERVATIONS
                      if o.stack == stack and o.operation == operation and o.platform.device == device
                      for s in o.series})
    what = {"cast": "casts", "scaled_mm": "_scaled_mm"}.get(operation, operation)
    where = env.describe() if device == "cpu" else (f"CUDA {env.gpu}" if env.gpu else "CUDA")
    return (f"{stack} {v} {what} on {where} are not pinned by fp8check's stack registry "
            f"(pinned: {', '.join(covered) or 'nothing'}); `fp8check survey` shows what it does")


"""Profiles: the semantics a cast claims, as data.

A :class:`Profile` says how a conversion into a narrow format rounds, what it
does with finite values beyond the largest code, with ±Inf and NaN, with
results in the subnormal range, and whether a wide input is first rounded
through a narrower type (the double rounding torch and ml_dtypes do for
float64). Some stacks treat formats differently (torch >= 2.12 saturates
e4m3fn only); a profile carries such per-format rules as ``overrides`` and
:meth:`Profile.resolve` gives the rules for one format.

The named profiles (which real stack follows which, in which release and on
which platform, is the stack registry's business: :mod:`fp8check.stacks`):

============== ===============================================================
``ieee``       RNE, non-saturating, exact from any input precision. The
               default, and OCP OFP8's non-saturating mode.
``satfinite``  RNE; finite overflow and ±Inf go to ±max; NaN stays NaN
               (NVIDIA ``cvt.rn.satfinite``, OCP OFP8's saturating mode);
               into e8m0fnu zero and negatives give the smallest code.
``rtz``        round toward zero (Triton ``fp_downcast_rounding="rtz"``):
               finite overflow gives ±max (IEEE 754 7.4), ±Inf stays Inf
               where the format has it, else NaN.
``ml_dtypes-0.6`` ml_dtypes up to 0.6 ``astype``: RNE, non-saturating, float64
               inputs rounded to float32 first; e8m0fnu zero and negatives are
               NaN; fp4/fp6 NaN becomes the zero of the opposite sign.
``ml_dtypes-0.7`` ml_dtypes 0.7: as ml_dtypes-0.6, but float64 is rounded once.
``torch-2.11``  torch eager up to 2.11 (CPU and CUDA): as ml_dtypes, but e5m2
               NaN is 0x7F/0xFF and e8m0fnu takes |x| and maps 0 to 0x00.
``torch-2.12``  torch eager from 2.12 (measured on 2.13): as torch-2.11, but
               e4m3fn saturates finite overflow and ±Inf to ±448.
``triton-sm90`` Triton compiled for Hopper: ``cvt.rn.satfinite`` for e4m3fn
               and e5m2, every NaN to +NaN 0x7F (measured on an H200);
               fnuz types do not compile on NVIDIA.
``triton-interpreter`` what Triton's interpreter claims to emulate: the
               triton-sm90 rules for e4m3fn/e5m2; for fnuz, RNE, finite
               overflow saturates, ±Inf becomes NaN.
``triton-gfx942``, ``triton-gfx950``, ``triton-sm90-rtz``, ``triton-amd-rtz``
               what compiled Triton does on MI300 / MI355 and with
               ``fp_downcast_rounding="rtz"`` (the AMD ones derived from
               Triton's source, not pinned on hardware; docs/triton.md).
``ocp-mx``     OCP MX v1.0 element conversion: RNE, saturating to ±max for
               finite values, Inf and NaN become NaN where the format has it.
============== ===============================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from fp8check.errors import InvalidValueError, UnknownProfileError, UnsupportedFormatError
from fp8check.formats import Format, get as get_format

__all__ = ["Profile", "get", "names", "PROFILES", "FIELDS", "IEEE", "SATFINITE", "RTZ",
           "PHRASES", "ML_DTYPES_0_6", "ML_DTYPES_0_7", "TORCH_2_11", "TORCH_2_12", "TRITON_SM90", "TRITON_INTERPRETER",
           "TRITON_SM90_RTZ", "TRITON_GFX942", "TRITON_GFX950", "TRITON_AMD_RTZ",
           "OCP_MX"]

Rounding = Literal["rne", "rtz", "rna", "stochastic"]
Overflow = Literal["nonsat", "satfinite"]
Infinity = Literal["nonsat", "satfinite", "nan"]
NanCode = Literal["quiet", "all_ones", "quiet_positive", "all_ones_positive"]
NanWithoutCode = Literal["zero", "flipped_zero", "max"]
Subnormals = Literal["keep", "flush"]
Intermediate = Literal["float32", "float16", "bfloat16"]
UnsignedNegative = Literal["nan", "magnitude", "min"]
UnsignedZero = Literal["nan", "min"]

# The profile vocabulary: every rule a profile sets and the values it can
# take (the fingerprint searches these, the plugin serialises them).
FIELDS: dict[str, tuple[Any, ...]] = {
    "rounding": ("rne", "rtz", "rna", "stochastic"),
    "overflow": ("nonsat", "satfinite"),
    "infinity": ("nonsat", "satfinite", "nan"),
    "nan": ("quiet", "all_ones", "quiet_positive", "all_ones_positive"),
    "nan_without_code": ("zero", "flipped_zero", "max"),
    "subnormals": ("keep", "flush"),
    "intermediate": (None, "float32", "float16", "bfloat16"),
    "unsigned_negative": ("nan", "magnitude", "min"),
    "unsigned_zero": ("nan", "min"),
}

# The same vocabulary in words (fingerprints and explanations).
PHRASES: dict[tuple[str, Any], str] = {
    ("rounding", "rne"): "rounds to nearest, ties to even",
    ("rounding", "rtz"): "rounds toward zero",
    ("rounding", "rna"): "rounds ties away from zero",
    ("overflow", "nonsat"): "finite overflow → Inf/NaN",
    ("overflow", "satfinite"): "finite overflow saturates to ±max",
    ("infinity", "nonsat"): "±Inf → Inf (NaN without Inf)",
    ("infinity", "satfinite"): "±Inf → ±max",
    ("infinity", "nan"): "±Inf → NaN",
    ("nan", "quiet"): "NaN → the quiet NaN code",
    ("nan", "all_ones"): "NaN → the all-ones NaN code",
    ("nan", "quiet_positive"): "NaN → the positive quiet NaN code",
    ("nan", "all_ones_positive"): "NaN → the positive all-ones NaN code",
    ("subnormals", "keep"): "keeps subnormals",
    ("subnormals", "flush"): "flushes subnormal results to zero",
    ("intermediate", None): "rounds once",
    ("intermediate", "float32"): "rounds through float32 first",
    ("intermediate", "float16"): "rounds through float16 first (double rounding)",
    ("intermediate", "bfloat16"): "rounds through bfloat16 first (double rounding)",
    ("unsigned_negative", "nan"): "negative inputs → NaN",
    ("unsigned_negative", "magnitude"): "negative inputs → |x|",
    ("unsigned_zero", "nan"): "zero → NaN",
    ("unsigned_negative", "min"): "negative inputs → the smallest code",
    ("unsigned_zero", "min"): "zero → the smallest code",
    ("nan_without_code", "zero"): "NaN → signed zero",
    ("nan_without_code", "flipped_zero"): "NaN → zero of the opposite sign",
    ("nan_without_code", "max"): "NaN → ±max",
}


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The semantics of a conversion into a narrow format.

    rounding
        ``rne`` nearest, ties to even; ``rna`` nearest, ties away from zero;
        ``rtz`` toward zero; ``stochastic``: with ``stochastic_bits`` = n and
        caller-supplied random integers r in [0, 2^n), round away from zero
        iff floor(f * 2^n) + r >= 2^n, where f in [0, 1) is the exact
        fraction of the value below the kept bits (gfloat's
        ``StochasticFastest``).
    overflow
        finite values that round beyond the largest code: ``nonsat`` to Inf
        where the format has it, else NaN, else (fp4/fp6) ±max;
        ``satfinite`` to ±max. Under ``rtz`` a finite overflow always gives
        ±max, as IEEE 754 (7.4) prescribes for round toward zero: truncation
        never increases a magnitude.
    infinity
        what ±Inf becomes: ``nonsat`` (as overflow under nonsat),
        ``satfinite`` (±max) or ``nan``.
    nan
        the NaN code produced: ``quiet`` (mantissa MSB, sign kept: e5m2
        0x7E/0xFE), ``all_ones`` (mantissa all ones, sign kept: 0x7F/0xFF),
        ``quiet_positive`` / ``all_ones_positive`` (the sign cleared: 0x7E /
        0x7F whatever the input's sign, as compiled Triton does). fnuz has one
        NaN, 0x80, whatever this says.
    nan_without_code
        NaN into a format without NaN (fp4/fp6): ``zero`` (signed zero),
        ``flipped_zero`` (the zero of the opposite sign, as ml_dtypes does)
        or ``max``.
    subnormals
        ``keep``, or ``flush`` results in the subnormal range to signed zero
        (decided after rounding).
    intermediate
        every finite input is first rounded to this type (RNE, overflow to
        Inf; a no-op for an input type it contains): the double rounding of
        torch and ml_dtypes from float64.
    unsigned_negative, unsigned_zero
        negative inputs and zero into an unsigned format without zero
        (e8m0fnu): NaN; |x| (negatives) or the smallest code. -Inf is a
        negative input.
    formats
        the formats the profile defines (None: all); a cast into another
        raises :class:`~fp8check.errors.UnsupportedFormatError`.
    overrides
        per-format rules, as ``((format_name, ((field, value), ...)), ...)``;
        build them with :meth:`with_overrides`.
    """

    name: str
    rounding: Rounding = "rne"
    stochastic_bits: int = 0
    overflow: Overflow = "nonsat"
    infinity: Infinity = "nonsat"
    nan: NanCode = "quiet"
    nan_without_code: NanWithoutCode = "zero"
    subnormals: Subnormals = "keep"
    intermediate: Intermediate | None = None
    unsigned_negative: UnsignedNegative = "nan"
    unsigned_zero: UnsignedZero = "nan"
    formats: frozenset[str] | None = None
    overrides: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for key, allowed in FIELDS.items():
            value = getattr(self, key)
            if value not in allowed:
                raise InvalidValueError(
                    f"profile {self.name!r}: {key}={value!r} is not one of "
                    f"{', '.join(repr(a) for a in allowed)}"
                )
        if self.rounding == "stochastic" and not 1 <= self.stochastic_bits <= 24:
            raise InvalidValueError(
                f"profile {self.name!r}: stochastic rounding needs 1 <= stochastic_bits <= 24, "
                f"got {self.stochastic_bits}"
            )
        if self.formats is not None and not isinstance(self.formats, frozenset):
            object.__setattr__(self, "formats", frozenset(self.formats))
        for fmt_name, changes in self.overrides:
            get_format(fmt_name)  # an unknown format name raises here
            for key, _ in changes:
                if key not in FIELDS and key != "stochastic_bits":
                    raise InvalidValueError(f"profile {self.name!r}: cannot override {key!r} for {fmt_name}")
            # The overridden rules must be valid themselves.
            dataclasses.replace(self, name=f"{self.name} for {fmt_name}", overrides=(), **dict(changes))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (lists for the frozen sets and tuples); :meth:`from_dict` reverses it."""
        data = dataclasses.asdict(self)
        data["formats"] = sorted(self.formats) if self.formats is not None else None
        data["overrides"] = [[f, [list(c) for c in changes]] for f, changes in self.overrides]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        data = dict(data)
        data["formats"] = frozenset(data["formats"]) if data.get("formats") is not None else None
        data["overrides"] = tuple((f, tuple(tuple(c) for c in changes)) for f, changes in data.get("overrides", ()))
        return cls(**data)

    def with_overrides(self, fmt: object, **changes: Any) -> Profile:
        """A copy whose rules for ``fmt`` differ by ``changes``."""
        name = get_format(fmt).name
        kept = tuple(o for o in self.overrides if o[0] != name)
        return dataclasses.replace(self, overrides=kept + ((name, tuple(sorted(changes.items()))),))

    def supports(self, fmt: object) -> bool:
        return self.formats is None or get_format(fmt).name in self.formats

    def resolve(self, fmt: object) -> Profile:
        """The rules this profile applies to ``fmt`` (overrides folded in)."""
        return _resolve(self, get_format(fmt))

    def summary(self, fmt: Format | None = None) -> str:
        """One line: 'RNE, satfinite, Inf -> max, NaN quiet, ...'."""
        p = self.resolve(fmt) if fmt is not None else self
        parts = [p.rounding.upper() + (f"/{p.stochastic_bits}b" if p.rounding == "stochastic" else "")]
        if p.overflow == "satfinite":
            parts.append("satfinite")
        else:  # IEEE 754 7.4: toward zero, a finite overflow gives max
            parts.append("finite overflow → ±max" if p.rounding == "rtz" else "non-saturating")
        infinity = {"nonsat": "±Inf → Inf/NaN", "satfinite": "±Inf → ±max", "nan": "±Inf → NaN"}[p.infinity]
        nan = f"NaN {p.nan}"
        if fmt is not None:  # say what happens in this format
            f = get_format(fmt)
            if p.infinity != "satfinite" and not f.has_nan:
                infinity = "±Inf → ±max"  # fp4/fp6: nothing else to give
            elif p.infinity == "nonsat":
                infinity = "±Inf → ±Inf" if f.has_inf else "±Inf → NaN"
            if not f.has_nan:
                nan = {"zero": "NaN → ±0", "flipped_zero": "NaN → ∓0", "max": "NaN → ±max"}[p.nan_without_code]
            elif f.nan_encoding == "negative_zero":
                nan = f"NaN {f.canonical_nan():#04x}"
        parts.append(infinity)
        parts.append(nan)
        if p.subnormals == "flush":
            parts.append("flush subnormals")
        if p.intermediate:
            parts.append(f"via {p.intermediate}")
        return ", ".join(parts)


@lru_cache(maxsize=None)
def _resolve(profile: Profile, f: Format) -> Profile:
    # Cached: the scalar spec resolves once per value.
    if not profile.supports(f):
        raise UnsupportedFormatError(
            f"profile {profile.name!r} does not define {f.name}; it defines "
            f"{', '.join(sorted(profile.formats or ()))}"
        )
    for fmt_name, changes in profile.overrides:
        if fmt_name == f.name:
            return dataclasses.replace(profile, overrides=(), **dict(changes))
    return profile


IEEE = Profile(
    name="ieee",
    description="RNE, non-saturating, exact from any input precision (the default; OCP OFP8 non-saturating mode)",
)
SATFINITE = Profile(
    name="satfinite",
    overflow="satfinite",
    infinity="satfinite",
    nan_without_code="zero",
    # Into e8m0fnu, zero and negatives clamp to the smallest code, as CUDA's
    # satfinite e8m0 conversions do: only NaN becomes NaN.
    unsigned_negative="min",
    unsigned_zero="min",
    description="RNE; finite overflow and ±Inf to ±max; NaN stays NaN (NVIDIA cvt.rn.satfinite, OCP OFP8 saturating mode)",
)
RTZ = Profile(
    name="rtz",
    rounding="rtz",
    description="round toward zero (Triton fp_downcast_rounding='rtz'); a finite overflow gives ±max "
    "(IEEE 754 7.4), ±Inf stays Inf where the format has it, else NaN",
)
ML_DTYPES_0_6 = Profile(
    name="ml_dtypes-0.6",
    intermediate="float32",
    nan_without_code="flipped_zero",
    description="ml_dtypes up to 0.6 astype: RNE, non-saturating, float64 rounded to float32 first",
)
ML_DTYPES_0_7 = dataclasses.replace(
    ML_DTYPES_0_6,
    name="ml_dtypes-0.7",
    intermediate=None,
    description="ml_dtypes 0.7 astype: RNE, non-saturating, float64 rounded once",
)
TORCH_2_11 = Profile(
    name="torch-2.11",
    intermediate="float32",
    nan="quiet",
    unsigned_negative="magnitude",
    unsigned_zero="min",
    formats=frozenset({"e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0fnu"}),
    description="torch eager up to 2.11 (CPU and CUDA): RNE, non-saturating, float64 via float32, e5m2 NaN 0x7F/0xFF",
).with_overrides("e5m2", nan="all_ones")
TORCH_2_12 = dataclasses.replace(
    TORCH_2_11.with_overrides("e4m3fn", overflow="satfinite", infinity="satfinite"),
    name="torch-2.12",
    description="torch eager from 2.12 (measured on 2.13): as torch-2.11, but e4m3fn saturates finite overflow and ±Inf to ±448",
)
TRITON_SM90 = Profile(
    name="triton-sm90",
    overflow="satfinite",
    infinity="satfinite",
    nan="all_ones_positive",
    formats=frozenset({"e4m3fn", "e5m2"}),
    description="Triton compiled for sm90: cvt.rn.satfinite to float8e4nv/float8e5, every NaN to +NaN 0x7F "
    "(measured on an H200, Triton 3.6); fnuz types do not compile on NVIDIA",
)
# What Triton's interpreter claims: the sm90 rules for the OCP types (the
# interpreter emulates compiled Triton), and for the fnuz types the policy
# Triton documents for its AMD targets (finite overflow saturates to ±max,
# ±Inf becomes NaN; triton-lang/triton#11667's table).
TRITON_INTERPRETER = dataclasses.replace(
    TRITON_SM90,
    name="triton-interpreter",
    formats=frozenset({"e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"}),
    description="Triton's interpreter: the triton-sm90 rules for e4m3fn/e5m2; for fnuz RNE, "
    "finite overflow saturates, ±Inf → NaN",
).with_overrides("e4m3fnuz", infinity="nan").with_overrides("e5m2fnuz", infinity="nan")
# What compiled Triton does on other targets (fp8check.triton.targets maps
# each conversion to one of these; docs/triton.md cites the sources).
TRITON_SM90_RTZ = Profile(
    name="triton-sm90-rtz",
    rounding="rtz",
    nan="all_ones_positive",
    formats=frozenset({"e5m2"}),
    description="Triton compiled for sm90, float32 -> e5m2 with fp_downcast_rounding='rtz': cvt.rz.f16.f32 "
    "then the upper byte (finite overflow -> ±max, ±Inf -> ±Inf, every NaN -> +0x7F)",
)
TRITON_GFX942 = Profile(
    name="triton-gfx942",
    overflow="satfinite",
    infinity="satfinite",
    nan="quiet",
    description="Triton compiled for gfx942 (MI300), derived from source, not pinned on hardware: RNE; finite "
    "overflow and ±Inf -> ±max; fnuz through v_cvt_pk_fp8/bf8_f32 with MODE.FP16_OVFL clamping (NaN -> 0x80, "
    "-0 -> 0x00), e4m3fn/e5m2 in software (NaN keeps its sign: 0x7F/0xFF, 0x7E/0xFE)",
)
TRITON_GFX950 = Profile(
    name="triton-gfx950",
    overflow="satfinite",
    infinity="satfinite",
    nan="all_ones",
    description="Triton compiled for gfx950 (MI355), derived from source, not pinned on hardware: RNE; e4m3fn/e5m2 "
    "through v_cvt_scalef32_pk_* with MODE.FP16_OVFL clamping (finite overflow and ±Inf -> ±max, NaN -> 0x7F/0xFF); "
    "fnuz in software (finite overflow -> ±max, ±Inf -> NaN 0x80, -0 -> 0x00)",
).with_overrides("e4m3fnuz", infinity="nan").with_overrides("e5m2fnuz", infinity="nan")
TRITON_AMD_RTZ = Profile(
    name="triton-amd-rtz",
    rounding="rtz",
    nan="quiet",
    formats=frozenset({"e5m2"}),
    description="Triton on AMD, float32 -> e5m2 with fp_downcast_rounding='rtz': v_cvt_pkrtz_f16_f32 then the "
    "upper byte (finite overflow -> ±max, ±Inf -> ±Inf; NaN keeps sign and its top payload bits)",
)
OCP_MX = Profile(
    name="ocp-mx",
    overflow="satfinite",
    infinity="nan",
    nan_without_code="max",
    description="OCP MX v1.0 element conversion: RNE, finite overflow clamps to ±max, Inf/NaN become NaN where the format has it",
)

PROFILES: dict[str, Profile] = {
    p.name: p for p in (IEEE, SATFINITE, RTZ, ML_DTYPES_0_6, ML_DTYPES_0_7, TORCH_2_11, TORCH_2_12, TRITON_SM90,
                        TRITON_INTERPRETER, TRITON_SM90_RTZ, TRITON_GFX942, TRITON_GFX950, TRITON_AMD_RTZ, OCP_MX)
}


def names() -> tuple[str, ...]:
    return tuple(PROFILES)


def get(name: object) -> Profile:
    """The profile ``name`` refers to (a :class:`Profile` is returned as is)."""
    if isinstance(name, Profile):
        return name
    key = str(name).strip().lower().replace("_", "-") if name is not None else ""
    key = key.replace("ml-dtypes", "ml_dtypes")
    aliases = {"default": "ieee", "rne": "ieee", "sat": "satfinite"}
    key = aliases.get(key, key)
    if key == "ml_dtypes":
        raise UnknownProfileError(f"profile {name!r} is versioned: ml_dtypes-0.6 (float64 via float32) or "
                                  f"ml_dtypes-0.7 (float64 rounded once)")
    if key not in PROFILES:
        raise UnknownProfileError(f"unknown profile {name!r}; known profiles: {', '.join(names())}")
    return PROFILES[key]

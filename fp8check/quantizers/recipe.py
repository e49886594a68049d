"""Scaling recipes as frozen data.

A :class:`Recipe` says, completely, how a quantizer turns a 2-D float32 or
bfloat16 tensor into FP8 codes and scales: which elements share a scale
(:class:`Granularity`), how the scale is computed from the block's absolute
maximum (``amax``), what the stored number means (``convention``), how the
scaled elements are rounded into the target format (``format`` and
``profile``), and what happens to a block that holds Inf or NaN
(``nonfinite``). :func:`fp8check.quantizers.quantize` is the reference that
computes, bit for bit, the codes and scales a correct kernel must produce.

Scale conventions -- which direction each name means
=====================================================

``convention="scale"``
    The stored number ``s`` MULTIPLIES the input when quantizing and DIVIDES
    the codes when dequantizing: ``code = cast(x * s)``, ``x ~ code / s``,
    with ``s = target / amax``. torchao's ``Float8TrainingTensor._scale``,
    ``tensor_to_scale`` and its per-group Triton kernels use this.

``convention="scale_inv"``
    The stored number ``d`` DIVIDES the input when quantizing and MULTIPLIES
    the codes when dequantizing: ``code = cast(x / d)``, ``x ~ code * d``,
    with ``d = amax / target``. This is the number a GEMM consumes
    (``torch._scaled_mm``'s ``scale_a``/``scale_b``), the OCP MX block scale
    ``X``, and what checkpoints store: DeepSeek-V3's ``weight_scale_inv`` is
    the inverse of the *quantize* scale, so it is multiplied at dequant,
    "despite the name"; compressed-tensors', ModelOpt's, fbgemm's and
    Quark's ``weight_scale`` / ``input_scale`` are the same kind of number
    under the other name. Names in checkpoints are not a convention: the
    recipe is.

The scale rules, exactly
========================

``rule="amax"`` (tensorwise, rowwise, blockwise, per-group)::

    a = max(amax, eps)                      # eps skipped when None; NaN stays NaN
    q = target / a   or   a / target        # in scale_precision, then RNE to float32
    q = 2**floor(log2 q) or 2**ceil(log2 q) # when pow2 is "floor"/"ceil", exactly
    q = max(q, scale_min)                   # when scale_min is set (gemlite clamps the scale, not amax)
    S = round(q, scale_dtype)               # what is stored, and what is applied
    S = zero_scale if S == 0                # when zero_scale is set (scale convention: if amax == 0, where
                                            # target/amax is Inf); compressed-tensors: the scale
                                            # dtype's eps; transformers' Fp8Quantize: 1.0)

``scale_precision="float64"`` divides in float64 and rounds the quotient to
float32 (what torchao does); ``"float32"`` clamps with ``float32(eps)`` and
divides in float32. The two quotients agree whenever ``amax >= eps``
(double rounding of a quotient of float32 numbers through float64 is
innocuous), but ``eps`` itself differs between the two.

``rule="mx-floor"`` (OCP MX v1.0, section 6.3) and ``rule="mx-ceil"``::

    E = floor(log2 amax)   (mx-ceil: ceil(log2 amax))
    k = E - emax(format)   # emax: exponent of the format's largest value (8 for e4m3fn)
    k < -127 -> -127;  k > 127, amax Inf or NaN -> NaN scale (0xFF);  amax 0 -> -127

as the OCP reference emulation (microsoft/microxcaling) computes it; the
round-up MX variant of cuBLAS/NVIDIA ("RCEIL", ``2**ceil(log2(amax/max))``)
is the ``amax`` rule with ``pow2="ceil"``, ``convention="scale_inv"`` and
``scale_dtype="e8m0"``.

The elements are then computed in float32 (IEEE, round to nearest even) as
``x * S`` or ``x / S`` with the *stored* scale, and encoded with
:func:`fp8check.encode` under ``profile`` (default ``satfinite``: RNE,
finite overflow and ±Inf to ±max, NaN stays NaN -- what a clamp before the
cast gives).

How the scale is applied and what is stored
===========================================

``apply`` (default: the convention's own operation) says what the kernel does
with the scale ``S`` it computed: ``"multiply"`` (``x * S``, the ``scale``
convention), ``"divide"`` (``x / S``, ``scale_inv``) or
``"multiply-reciprocal"`` (``scale_inv`` only: ``x * fl(1/S)``, a float32
reciprocal then a multiply, as vLLM's and AMD aiter's kernels do to avoid a
division). ``stored`` says what the kernel returns: ``"applied"`` (``S``
itself) or ``"reciprocal"`` (``fl(1/S)`` in float32, as FBGEMM's rowwise
quantizer stores the dequant multiplier of the ``scale`` it applied). The
reference rounds exactly these operations (each one IEEE float32, round to
nearest even); the exactness verdict of a ``codes`` divergence says whether
the kernel's or the recipe's code is the correctly rounded ``x / S``.

Clamping: ``eps`` clamps amax before the division (``max(amax, eps)``),
``scale_min`` clamps the scale after it (``max(amax / target, scale_min)``);
the element clamp to the format's range after the scaling is the
``satfinite`` profile (``ieee``: no clamp).

FP4 and FP6 elements, packing, NVFP4
====================================

``format`` may be ``e2m1fn`` (FP4), ``e2m3fn`` or ``e3m2fn`` (FP6) as well as
an FP8 format; the MX rules use the format's emax (2, 2, 4). ``packed``
(e2m1fn only) says the kernel returns two codes per byte along each row,
element 2j in the low nibble (``"low-first"``) or the high one
(:mod:`fp8check.quantizers.packing`). ``scale_dtype="e4m3fn"`` rounds the
scale to e4m3fn (RNE, Inf and overflow to 448).

The ``nvfp4-*`` rules are two-level: e4m3fn block scales (scale_inv) under a
float32 per-tensor scale, each rule the arithmetic of one source
(``scaling._two_level`` cites them; docs/recipes.md tabulates them).

Non-finite input
================

``nonfinite="ieee"``: the formulas above applied literally with IEEE
arithmetic. An Inf in a block makes amax Inf, the ``scale`` convention's
scale 0 (``scale_inv``: Inf) and every finite value of the block 0; a NaN
makes the scale NaN and every code NaN. torchao and most kernels do this.

``nonfinite="finite"``: amax is taken over the finite elements only; the
finite elements are quantized as if the non-finite ones were absent, and
the non-finite ones go through the element cast (``satfinite``: ±Inf to
±max, NaN to NaN). Nothing finite is lost.

``nonfinite="skip-nan"``: Triton's ``tl.max`` and CUDA's ``fmaxf``: a NaN
is left out of amax but an Inf is kept (so an Inf makes the ``scale``
convention's scale 0 and a ``scale_inv`` one Inf, as under ``ieee``); the NaN
elements themselves go through the element cast (NaN).

When the expected and the actual scale of a block are both NaN the codes of
that block are not compared: a NaN scale makes the whole block NaN.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from fp8check.errors import InvalidValueError
from fp8check.formats import E2M1FN, E2M3FN, E3M2FN, E8M0FNU, FP8_FORMATS, Format, get as get_format
from fp8check.profiles import Profile, get as get_profile

__all__ = [
    "Granularity",
    "Recipe",
    "TENSORWISE",
    "ROWWISE",
    "COLWISE",
    "GROUP_ROWWISE",
    "GROUP_COLWISE",
    "block",
]

GranularityKind = Literal["tensorwise", "rowwise", "colwise", "block", "group_rowwise", "group_colwise"]
Convention = Literal["scale", "scale_inv"]
Rule = Literal["amax", "mx-floor", "mx-ceil", "nvfp4-torchao", "nvfp4-ct", "nvfp4-modelopt"]
Pow2 = Literal["floor", "ceil"]
ScaleDtype = Literal["float32", "bfloat16", "float16", "e8m0", "e4m3fn"]
Packed = Literal["low-first", "high-first"]
NonFinite = Literal["ieee", "finite", "skip-nan"]
Apply = Literal["divide", "multiply", "multiply-reciprocal", "target-divide", "multiply-target-reciprocal"]
Stored = Literal["applied", "reciprocal"]
Precision = Literal["float32", "float64"]

# The element formats a recipe may target: FP8, and the OCP MX FP6/FP4 formats (NVFP4's element is e2m1fn too).
ELEMENT_FORMATS: tuple[Format, ...] = FP8_FORMATS + (E2M3FN, E3M2FN, E2M1FN)
RULES = ("amax", "mx-floor", "mx-ceil", "nvfp4-torchao", "nvfp4-ct", "nvfp4-modelopt")
SCALE_DTYPES = ("float32", "bfloat16", "float16", "e8m0", "e4m3fn")

# A Triton kernel's own float32 ``/`` is not correctly rounded on every target (sm90: div.full.f32, the hardware
# reciprocal and one multiply): these divide as the target the check runs under does; each stands for the correctly
# rounded operation it names, which it is without a target (and on targets that divide correctly).
TARGET_OPS = {"target-divide": "divide", "multiply-target-reciprocal": "multiply-reciprocal"}
_DIVISIONS = ("divide", "multiply-reciprocal", *TARGET_OPS)


def untargeted_note(declared: str) -> str:
    """The note of a check whose declaration names a target-* operation (``declared``: which) but that runs
    under no Triton target: what its quotients were, and how to give them the kernel's target."""
    return (f"{declared} names a Triton target's own `/`, but this check runs under no Triton target: its "
            f"quotients are the correctly rounded ones; declare triton-target = \"sm90\" (or gfx942, sm100, ...; "
            f"--triton-target) to check them as the kernel's GPU divides")


_KINDS = ("tensorwise", "rowwise", "colwise", "block", "group_rowwise", "group_colwise")


@dataclass(frozen=True, kw_only=True)
class Granularity:
    """Which elements of an (M, N) tensor share one scale.

    ================= ============================== ==========================
    kind              one scale per                  scale shape
    ================= ============================== ==========================
    ``tensorwise``    tensor                         ``()``
    ``rowwise``       row                            ``(M, 1)``
    ``colwise``       column                         ``(1, N)``
    ``block``         ``rows x cols`` tile; the last ``(ceil(M/rows), ceil(N/cols))``
                      tiles of a ragged tensor are
                      partial
    ``group_rowwise`` (group, row); groups split the ``(G, M)``
                      columns at ``offsets``
    ``group_colwise`` (group, column); groups split  ``(G, N)``
                      the rows at ``offsets``
    ================= ============================== ==========================

    ``offsets`` are the cumulative end indices of the groups (torchao's and
    ``torch._scaled_grouped_mm``'s convention): group g spans
    ``[offsets[g-1], offsets[g])``, an equal pair is an empty group, and the
    last offset is the length of the split dimension.
    """

    kind: GranularityKind
    rows: int = 0  # block only
    cols: int = 0

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidValueError(f"granularity kind {self.kind!r} is not one of {', '.join(_KINDS)}")
        if self.kind == "block":
            if self.rows < 1 or self.cols < 1:
                raise InvalidValueError(f"a block granularity needs rows >= 1 and cols >= 1, got {self.rows}x{self.cols}")
        elif self.rows or self.cols:
            raise InvalidValueError(f"granularity {self.kind!r} takes no block size (got {self.rows}x{self.cols})")

    @property
    def grouped(self) -> bool:
        return self.kind in ("group_rowwise", "group_colwise")

    def scale_shape(self, shape: tuple[int, int], groups: int = 0) -> tuple[int, ...]:
        m, n = shape
        if self.kind == "tensorwise":
            return ()
        if self.kind == "rowwise":
            return (m, 1)
        if self.kind == "colwise":
            return (1, n)
        if self.kind == "block":
            return (-(-m // self.rows), -(-n // self.cols))
        return (groups, m) if self.kind == "group_rowwise" else (groups, n)

    def __str__(self) -> str:
        return f"block {self.rows}x{self.cols}" if self.kind == "block" else self.kind


TENSORWISE = Granularity(kind="tensorwise")
ROWWISE = Granularity(kind="rowwise")
COLWISE = Granularity(kind="colwise")
GROUP_ROWWISE = Granularity(kind="group_rowwise")
GROUP_COLWISE = Granularity(kind="group_colwise")


def block(rows: int, cols: int) -> Granularity:
    """A ``rows x cols`` block granularity (1x128 activations, 128x128 weights, 1x32 MX)."""
    return Granularity(kind="block", rows=rows, cols=cols)


def _choice(name: str, value: Any, allowed: tuple[Any, ...], recipe: str) -> None:
    if value not in allowed:
        # written as a pyproject.toml writes them ("none" clears a field), with the value a typo meant
        names = [a for a in allowed if isinstance(a, str)]
        meant = difflib.get_close_matches(str(value).strip().replace("_", "-"), names, n=1, cutoff=0.75)
        raise InvalidValueError(
            f"recipe {recipe!r}: {name}={value!r} is not one of "
            f"{', '.join('none' if a is None else repr(a) for a in allowed)}"
            + (f"; did you mean {meant[0]!r}?" if meant else ""))


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A scaling recipe: everything a quantizer must do, as data.

    See the module docstring for the exact meaning of every field. Build
    variants with :meth:`replace` (``recipe.replace(eps=None)``) or
    :meth:`with_format`; ``target`` left as None follows the format's
    largest value (448 for e4m3fn, 240 for e4m3fnuz).
    """

    name: str
    format: Format
    granularity: Granularity
    convention: Convention = "scale_inv"
    rule: Rule = "amax"
    target: float | None = None
    eps: float | None = None
    scale_precision: Precision = "float32"
    pow2: Pow2 | None = None
    scale_dtype: ScaleDtype = "float32"
    profile: Profile = field(default_factory=lambda: get_profile("satfinite"))
    nonfinite: NonFinite = "finite"
    ragged: bool = True
    dequant_dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    scale_min: float | None = None
    zero_scale: float | None = None
    apply: Apply | None = None  # None: the convention's own operation (scale: multiply, scale_inv: divide)
    stored: Stored = "applied"
    # How the scale's own quotient is computed: "divide" (one IEEE division) or "multiply-reciprocal"
    # (numerator * fl(1/denominator): torch's `scalar / tensor`, and CUDA's `tensor / scalar`, do this).
    scale_divide: Apply = "divide"
    # The Triton target whose `/` the target-* operations take: set by the check from the kernel's declaration
    # (its triton-target, or the CUDA device it runs on), not part of what a recipe declares.
    triton_target: str | None = None
    # Two 4-bit codes per byte along the rows (e2m1fn only): element 2j in the low nibble ("low-first": torchao,
    # compressed-tensors, ModelOpt, the PTX cvt.rn.satfinite.e2m1x2 register order) or in the high nibble.
    packed: Packed | None = None
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "format", get_format(self.format))
        object.__setattr__(self, "profile", get_profile(self.profile))
        if isinstance(self.granularity, str):
            raise InvalidValueError(f"recipe {self.name!r}: granularity must be a Granularity, got {self.granularity!r}")
        _choice("convention", self.convention, ("scale", "scale_inv"), self.name)
        _choice("rule", self.rule, RULES, self.name)
        _choice("pow2", self.pow2, (None, "floor", "ceil"), self.name)
        _choice("scale_dtype", self.scale_dtype, SCALE_DTYPES, self.name)
        _choice("packed", self.packed, (None, "low-first", "high-first"), self.name)
        _choice("scale_precision", self.scale_precision, ("float32", "float64"), self.name)
        _choice("nonfinite", self.nonfinite, ("ieee", "finite", "skip-nan"), self.name)
        _choice("apply", self.apply, (None, "multiply", *_DIVISIONS), self.name)
        _choice("stored", self.stored, ("applied", "reciprocal"), self.name)
        _choice("scale_divide", self.scale_divide, _DIVISIONS, self.name)
        if self.triton_target is not None:
            from fp8check.triton import targets

            targets.get(self.triton_target)  # raises, naming the known targets
        if self.scale_divide != "divide" and (self.rule != "amax" or self.scale_precision != "float32"):
            raise InvalidValueError(f"recipe {self.name!r}: scale_divide={self.scale_divide!r} is for amax-rule "
                                    "recipes computing their scale in float32")
        if self.apply is not None and TARGET_OPS.get(self.apply, self.apply) != self.natural_apply and not (
                self.convention == "scale_inv" and self.apply in ("multiply-reciprocal", "multiply-target-reciprocal")):
            raise InvalidValueError(
                f"recipe {self.name!r}: apply={self.apply!r} does not go with convention={self.convention!r} "
                f"(scale: 'multiply'; scale_inv: 'divide' or 'multiply-reciprocal', x * fl(1/scale_inv), or their "
                f"target-* forms)")
        _choice("dequant_dtype", self.dequant_dtype, ("float32", "bfloat16", "float16"), self.name)
        if self.format not in ELEMENT_FORMATS:
            raise InvalidValueError(f"recipe {self.name!r}: target format must be an fp8, fp6 or fp4 element format "
                                    f"({', '.join(f.name for f in ELEMENT_FORMATS)}), got {self.format.name}")
        self.profile.resolve(self.format)  # raises for a profile that does not define the format
        if self.packed is not None and self.format.bits != 4:
            raise InvalidValueError(f"recipe {self.name!r}: packed = {self.packed!r} packs two 4-bit codes per byte; "
                                    f"{self.format.name} codes are {self.format.bits} bits (one per byte)")
        if self.two_level:
            self._check_two_level()
        elif self.rule != "amax":
            if self.convention != "scale_inv":
                raise InvalidValueError(f"recipe {self.name!r}: the MX rules define a scale_inv (dequant multiplier) scale")
            if self.scale_dtype != "e8m0" or self.pow2 is not None or self.target is not None:
                raise InvalidValueError(f"recipe {self.name!r}: an MX rule stores e8m0 scales and takes no pow2 or target")
        elif self.scale_dtype == "e8m0" and self.pow2 is None:
            raise InvalidValueError(f"recipe {self.name!r}: e8m0 scales hold powers of two only; set pow2='floor' or 'ceil'")
        if (self.stored == "reciprocal" or self.rounded_op == "multiply-reciprocal") and (
                self.rule != "amax" or self.scale_dtype == "e8m0"):
            raise InvalidValueError(f"recipe {self.name!r}: a reciprocal (apply='multiply-reciprocal' or "
                                    "stored='reciprocal') is for amax-rule recipes with float scales")
        if self.target is not None and not (math.isfinite(self.target) and self.target > 0):
            raise InvalidValueError(f"recipe {self.name!r}: target must be a positive finite number, got {self.target!r}")
        if self.eps is not None and not (math.isfinite(self.eps) and self.eps > 0):
            raise InvalidValueError(f"recipe {self.name!r}: eps must be a positive finite number or None, got {self.eps!r}")
        for name in ("scale_min", "zero_scale"):
            v = getattr(self, name)
            if v is None:
                continue
            if not (math.isfinite(v) and v > 0):
                raise InvalidValueError(f"recipe {self.name!r}: {name} must be a positive finite number or None, got {v!r}")
            if self.rule.startswith("mx") or self.scale_dtype == "e8m0" or (name == "scale_min" and self.convention != "scale_inv"):
                raise InvalidValueError(f"recipe {self.name!r}: {name} is for amax-rule recipes with float scales"
                                        + (" (scale_inv)" if name == "scale_min" else ""))

    def _check_two_level(self) -> None:
        """NVFP4's two-level rules fix what their sources fix: e2m1fn elements, e4m3fn block scales (scale_inv,
        stored as computed) over a float32 per-tensor scale, the element arithmetic of the variant."""
        wrong = [f"{k}={getattr(self, k)!r}" for k, ok in (
            ("format", self.format is E2M1FN), ("scale_dtype", self.scale_dtype == "e4m3fn"),
            ("convention", self.convention == "scale_inv"), ("apply", self.apply is None),
            ("stored", self.stored == "applied"), ("pow2", self.pow2 is None), ("target", self.target is None),
            ("eps", self.eps is None), ("scale_precision", self.scale_precision == "float32"),
            ("scale_divide", self.scale_divide == "divide")) if not ok]
        if wrong:
            raise InvalidValueError(f"recipe {self.name!r}: rule {self.rule!r} (NVFP4, two-level) takes e2m1fn elements "
                                    f"and e4m3fn scale_inv block scales, its own arithmetic; not {', '.join(wrong)}")

    @property
    def two_level(self) -> bool:
        """NVFP4: a float32 per-tensor scale over the e4m3fn block scales (the kernel returns it third)."""
        return self.rule.startswith("nvfp4")

    @property
    def natural_apply(self) -> str:
        return "multiply" if self.convention == "scale" else "divide"

    @property
    def element_op(self) -> str:
        """How the applied scale meets x: ``multiply`` (x * s), ``divide`` (x / s) or ``multiply-reciprocal``
        (x * fl(1/s), one float32 reciprocal then one multiply)."""
        if self.rule == "nvfp4-torchao":  # x * fl(fl(1/global) / s): one multiplier per block
            return "multiply"
        return self.apply or self.natural_apply

    @property
    def rounded_op(self) -> str:
        """:attr:`element_op` with a target-* operation read as the correctly rounded one it stands for."""
        return TARGET_OPS.get(self.element_op, self.element_op)

    @property
    def divides_as_target(self) -> bool:
        """Whether a quotient of this recipe is the Triton target's ``/`` (it then needs :attr:`triton_target`)."""
        return self.element_op in TARGET_OPS or self.scale_divide in TARGET_OPS

    @property
    def stored_convention(self) -> str:
        """The convention of the number the kernel returns (the other one when it stores the reciprocal)."""
        if self.stored == "applied":
            return self.convention
        return "scale_inv" if self.convention == "scale" else "scale"

    @property
    def amax_target(self) -> float:
        """The value a block's amax is mapped to (``target``, else the format's max)."""
        return self.format.max if self.target is None else float(self.target)

    @property
    def grouped(self) -> bool:
        return self.granularity.grouped

    def replace(self, **changes: Any) -> Recipe:
        return dataclasses.replace(self, **changes)

    def with_format(self, fmt: object) -> Recipe:
        """The same recipe for another target format (``target`` follows it when None)."""
        f = get_format(fmt)
        return self if f is self.format else dataclasses.replace(self, format=f)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "format": self.format.name,
            "granularity": str(self.granularity),
            "convention": self.convention,
            "rule": self.rule,
            "target": self.amax_target if self.rule == "amax" else None,
            "eps": self.eps,
            "scale_precision": self.scale_precision,
            "pow2": self.pow2,
            "scale_dtype": self.scale_dtype,
            "profile": self.profile.name,
            "nonfinite": self.nonfinite,
            "ragged": self.ragged,
            "dequant_dtype": self.dequant_dtype,
            "scale_min": self.scale_min,
            "zero_scale": self.zero_scale,
            "apply": self.element_op,
            "stored": self.stored,
            "scale_divide": self.scale_divide,
            "packed": self.packed,
            **({"triton_target": self.triton_target} if self.triton_target else {}),
        }

    def summary(self) -> str:
        """One line: 'block 1x128, scale_inv = max(amax, 0.0001)/448 (float32), e4m3fn satfinite'."""
        if self.rule == "amax":
            a = f"max(amax, {self.eps:g})" if self.eps is not None else "amax"
            t = f"{self.amax_target:g}"
            formula = f"{t}/{a}" if self.convention == "scale" else f"{a}/{t}"
            if self.scale_divide in ("multiply-reciprocal", "multiply-target-reciprocal"):
                formula = f"{t}*fl(1/{a})" if self.convention == "scale" else f"{a}*fl(1/{t})"
            if self.scale_divide in TARGET_OPS:
                formula += " (the target's /)"
            if self.pow2:
                formula = f"2^{self.pow2}(log2({formula}))"
            if self.scale_min is not None:
                formula = f"max({formula}, {self.scale_min:g})"
        elif self.rule == "nvfp4-torchao":
            formula = "e4m3(max(fl(amax/6)/g, 2^-6)), g = fl(tensor amax/2688) stored, x * fl(fl(1/g)/scale_inv)"
        elif self.rule == "nvfp4-modelopt":
            formula = "e4m3(max(fl(amax/fl(6*g)) (0 -> 1), 2^-9)), g = fl(tensor amax/2688) stored, x / fl(scale_inv*g)"
        elif self.rule == "nvfp4-ct":
            formula = "e4m3(G*fl(amax/6)) (0 -> 0.125), G = 2688*fl(1/tensor amax) stored, x / fl(scale_inv/G)"
        else:
            formula = f"2^({self.rule.split('-')[1]}(log2 amax) - {self.format.emax})"
        # The precision qualifies the formula, so it follows it directly; the
        # zero-scale rule is a separate clause after it.
        zero = ((f", a zero scale stored as {self.zero_scale:g}" if self.convention == "scale_inv"
                 else f", an all-zero block's scale {self.zero_scale:g}") if self.zero_scale is not None else "")
        # The arithmetic is named only where it is not the convention's own (x * scale, x / scale_inv, stored as is).
        op = {"multiply-reciprocal": ", applied as x * fl(1/s)", "target-divide": ", applied as x / s (the target's /)",
              "multiply-target-reciprocal": ", applied as x * (1/s) (the target's /)"}.get(self.element_op, "")
        stored = ", its float32 reciprocal stored" if self.stored == "reciprocal" else ""
        amax = {"finite": "finite", "ieee": "ieee", "skip-nan": "skip-nan (NaN left out of amax, Inf kept)"}
        packed = f" packed {self.packed}" if self.packed else ""
        return (f"{self.granularity}, {self.convention} = {formula} ({self.scale_precision}, stored "
                f"{self.scale_dtype}){zero}{op}{stored}, {self.format.name}{packed} {self.profile.name}, "
                f"non-finite {amax[self.nonfinite]}")

    def __str__(self) -> str:
        return self.name

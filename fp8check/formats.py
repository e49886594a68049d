"""Narrow floating-point formats as data.

A :class:`Format` holds the bit-level facts of one format, written from the
spec tables (OCP OFP8 v1.0, OCP MX v1.0, the AMD/Graphcore fnuz definitions
that LLVM and ml_dtypes follow). Everything else (largest value, smallest
subnormal, which codes are NaN) is derived from those facts, with names that
follow ``numpy.finfo``.

One module-level constant per format::

    >>> from fp8check import formats
    >>> formats.E4M3FNUZ.max
    240.0
    >>> formats.get("float8_e4m3fn") is formats.E4M3FN
    True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any, Literal

from fp8check.errors import UnknownFormatError

__all__ = [
    "Format",
    "E4M3FN",
    "E4M3FNUZ",
    "E5M2",
    "E5M2FNUZ",
    "E8M0FNU",
    "E2M1FN",
    "E2M3FN",
    "E3M2FN",
    "FP8_FORMATS",
    "ALL_FORMATS",
    "get",
    "names",
]

NanEncoding = Literal["ieee", "all_ones", "negative_zero", "none"]


@dataclass(frozen=True, kw_only=True)
class Format:
    """The bit-level definition of one narrow floating-point format.

    Codes are laid out sign | exponent | mantissa from the most significant
    bit (no sign bit when ``signed`` is False). A code whose exponent field
    is 0 is subnormal when ``has_subnormals``; otherwise every exponent field
    is a normal binade.

    ``nan_encoding`` says which codes are NaN:

    - ``"ieee"``: exponent field all ones and mantissa non-zero (IEEE 754;
      the all-ones exponent with zero mantissa is Inf). e5m2.
    - ``"all_ones"``: only the code(s) whose magnitude bits are all ones
      (e4m3fn's S.1111.111, e8m0fnu's 0xFF).
    - ``"negative_zero"``: only the code that would be -0 (the fnuz 0x80).
    - ``"none"``: no NaN (fp4, fp6).
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_inf: bool
    has_negative_zero: bool
    nan_encoding: NanEncoding
    signed: bool = True
    has_zero: bool = True
    has_subnormals: bool = True
    description: str = field(default="", compare=False)
    torch_name: str | None = field(default=None, compare=False)
    ml_dtypes_name: str | None = field(default=None, compare=False)
    aliases: tuple[str, ...] = field(default=(), compare=False)

    def __hash__(self) -> int:
        # equal formats have equal names; the generated hash of every field costs more than the
        # lookups keyed by a format (an audit makes several per tensor)
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        if self is other:  # the usual case: the module's own instances
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared == other._compared  # type: ignore[attr-defined]

    @functools.cached_property
    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if f.compare)

    # -- layout -----------------------------------------------------------

    @property
    def bits(self) -> int:
        """Width of a code in bits."""
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def code_count(self) -> int:
        return 1 << self.bits

    @property
    def sign_mask(self) -> int:
        """The sign bit of a code (0 for an unsigned format)."""
        return 1 << (self.bits - 1) if self.signed else 0

    @property
    def magnitude_mask(self) -> int:
        return (1 << (self.exponent_bits + self.mantissa_bits)) - 1

    @property
    def mantissa_mask(self) -> int:
        return (1 << self.mantissa_bits) - 1

    @property
    def min_exponent_field(self) -> int:
        """The smallest exponent field of a normal number."""
        return 1 if self.has_subnormals else 0

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number (``numpy.finfo.minexp``)."""
        return self.min_exponent_field - self.bias

    @property
    def max_code(self) -> int:
        """The positive code of the largest finite value."""
        if self.nan_encoding == "ieee":
            top = (1 << self.exponent_bits) - 2  # all ones is Inf/NaN
            return (top << self.mantissa_bits) | self.mantissa_mask
        if self.nan_encoding == "all_ones":
            return self.magnitude_mask - 1
        return self.magnitude_mask

    @property
    def emax(self) -> int:
        """Exponent of the largest finite value."""
        return (self.max_code >> self.mantissa_bits) - self.bias

    def is_nan(self, code: int) -> bool:
        """Whether ``code`` decodes to NaN (decided from its bit fields)."""
        mag = code & self.magnitude_mask
        if self.nan_encoding == "ieee":
            return mag >> self.mantissa_bits == (1 << self.exponent_bits) - 1 and bool(mag & self.mantissa_mask)
        if self.nan_encoding == "all_ones":
            return mag == self.magnitude_mask
        if self.nan_encoding == "negative_zero":
            return code == self.sign_mask
        return False

    def is_inf(self, code: int) -> bool:
        return self.has_inf and (code & self.magnitude_mask) == ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def nan_codes(self) -> tuple[int, ...]:
        """Every code that decodes to NaN, ascending (narrow formats only)."""
        if self.bits > 16:
            raise ValueError(f"{self.name} has too many NaN codes to list")
        return tuple(c for c in range(self.code_count) if self.is_nan(c))

    @property
    def inf_codes(self) -> tuple[int, ...]:
        """The codes of +Inf and -Inf (empty when the format has no Inf)."""
        if not self.has_inf:
            return ()
        pos = ((1 << self.exponent_bits) - 1) << self.mantissa_bits
        return (pos, pos | self.sign_mask)

    @property
    def has_nan(self) -> bool:
        return self.nan_encoding != "none"

    def canonical_nan(self, negative: bool = False, *, all_ones: bool = False) -> int | None:
        """The NaN code a conversion produces: quiet (mantissa MSB) or all ones.

        The sign is kept where the format has a NaN of each sign; returns
        None for a format without NaN.
        """
        if self.nan_encoding == "none":
            return None
        if self.nan_encoding == "negative_zero":
            return self.sign_mask
        if self.nan_encoding == "all_ones":
            code = self.magnitude_mask
        else:
            top = ((1 << self.exponent_bits) - 1) << self.mantissa_bits
            quiet = self.mantissa_mask if all_ones else 1 << (self.mantissa_bits - 1)
            code = top | quiet
        return code | (self.sign_mask if negative else 0)

    # -- values (exact) ---------------------------------------------------

    def exact_value(self, code: int) -> Fraction | float:
        """The exact value of ``code``: a Fraction, or a float Inf/NaN."""
        if not 0 <= code < (1 << self.bits):
            raise ValueError(f"code {code:#x} is out of range for {self.name}")
        if self.is_nan(code):
            return math.nan
        negative = bool(code & self.sign_mask)
        if self.is_inf(code):
            return -math.inf if negative else math.inf
        mag = code & self.magnitude_mask
        e_field = mag >> self.mantissa_bits
        frac = mag & self.mantissa_mask
        if self.has_subnormals and e_field == 0:
            value = Fraction(frac, 1 << self.mantissa_bits) * Fraction(2) ** self.emin
        else:
            significand = Fraction((1 << self.mantissa_bits) + frac, 1 << self.mantissa_bits)
            value = significand * Fraction(2) ** (e_field - self.bias)
        return -value if negative else value

    @functools.cached_property
    def max(self) -> float:
        """The largest finite value (``numpy.finfo.max``)."""
        return float(self.exact_value(self.max_code))

    @property
    def min(self) -> float:
        """The most negative finite value; for an unsigned format the smallest."""
        return -self.max if self.signed else self.smallest_normal

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    tiny = smallest_normal

    @property
    def smallest_subnormal(self) -> float:
        """The smallest positive value (the smallest normal when no subnormals)."""
        if not self.has_subnormals:
            return self.smallest_normal
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def eps(self) -> float:
        """The gap between 1.0 and the next larger value."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def epsneg(self) -> float:
        """The gap between 1.0 and the next smaller value."""
        below = max(
            v
            for c in range(self.code_count)
            if isinstance(v := self.exact_value(c), Fraction) and v < 1
        )
        return float(1 - below)

    @property
    def maxexp(self) -> int:
        """The smallest power of two that overflows (``numpy.finfo.maxexp``)."""
        return self.emax + 1

    minexp = emin

    @property
    def machep(self) -> int:
        """The exponent of ``eps``."""
        return -self.mantissa_bits

    @property
    def negep(self) -> int:
        """The exponent of ``epsneg``."""
        return math.frexp(self.epsneg)[1] - 1

    @property
    def iexp(self) -> int:
        return self.exponent_bits

    @property
    def nmant(self) -> int:
        return self.mantissa_bits

    @property
    def nexp(self) -> int:
        return self.exponent_bits

    def __str__(self) -> str:
        return self.name


# The spec tables. Values in the docstrings are exact.

E4M3FN = Format(
    name="e4m3fn",
    exponent_bits=4,
    mantissa_bits=3,
    bias=7,
    has_inf=False,
    has_negative_zero=True,
    nan_encoding="all_ones",
    description="OCP FP8 E4M3: max 448, NaN S.1111.111, has -0, no Inf",
    torch_name="float8_e4m3fn",
    ml_dtypes_name="float8_e4m3fn",
    aliases=("f8e4m3fn", "float8e4nv", "fp8e4nv", "f8_e4m3", "fp8_e4m3", "e4m3"),
)
E4M3FNUZ = Format(
    name="e4m3fnuz",
    exponent_bits=4,
    mantissa_bits=3,
    bias=8,
    has_inf=False,
    has_negative_zero=False,
    nan_encoding="negative_zero",
    description="AMD CDNA3 FP8 E4M3: max 240, bias 8, 0x80 the only NaN, no -0, no Inf",
    torch_name="float8_e4m3fnuz",
    ml_dtypes_name="float8_e4m3fnuz",
    aliases=("f8e4m3fnuz", "float8e4b8", "fp8e4b8", "f8_e4m3fnuz", "fp8_e4m3fnuz"),
)
E5M2 = Format(
    name="e5m2",
    exponent_bits=5,
    mantissa_bits=2,
    bias=15,
    has_inf=True,
    has_negative_zero=True,
    nan_encoding="ieee",
    description="OCP FP8 E5M2: IEEE-like, max 57344, has Inf and -0",
    torch_name="float8_e5m2",
    ml_dtypes_name="float8_e5m2",
    aliases=("f8e5m2", "float8e5", "fp8e5", "f8_e5m2", "fp8_e5m2"),
)
E5M2FNUZ = Format(
    name="e5m2fnuz",
    exponent_bits=5,
    mantissa_bits=2,
    bias=16,
    has_inf=False,
    has_negative_zero=False,
    nan_encoding="negative_zero",
    description="AMD CDNA3 FP8 E5M2: max 57344, bias 16, 0x80 the only NaN, no -0, no Inf",
    torch_name="float8_e5m2fnuz",
    ml_dtypes_name="float8_e5m2fnuz",
    aliases=("f8e5m2fnuz", "float8e5b16", "fp8e5b16", "f8_e5m2fnuz", "fp8_e5m2fnuz"),
)
E8M0FNU = Format(
    name="e8m0fnu",
    exponent_bits=8,
    mantissa_bits=0,
    bias=127,
    signed=False,
    has_zero=False,
    has_subnormals=False,
    has_inf=False,
    has_negative_zero=False,
    nan_encoding="all_ones",
    description="OCP MX scale E8M0: powers of two 2^-127..2^127, unsigned, no zero, 0xFF NaN",
    torch_name="float8_e8m0fnu",
    ml_dtypes_name="float8_e8m0fnu",
    aliases=("f8e8m0fnu", "f8_e8m0", "e8m0", "ue8m0"),
)
E2M1FN = Format(
    name="e2m1fn",
    exponent_bits=2,
    mantissa_bits=1,
    bias=1,
    has_inf=False,
    has_negative_zero=True,
    nan_encoding="none",
    description="OCP MX FP4 E2M1: values 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf or NaN",
    ml_dtypes_name="float4_e2m1fn",
    aliases=("f4e2m1fn", "f4", "fp4", "fp4_e2m1", "float4_e2m1fn_x2"),
)
E2M3FN = Format(
    name="e2m3fn",
    exponent_bits=2,
    mantissa_bits=3,
    bias=1,
    has_inf=False,
    has_negative_zero=True,
    nan_encoding="none",
    description="OCP MX FP6 E2M3: max 7.5; no Inf or NaN",
    ml_dtypes_name="float6_e2m3fn",
    aliases=("f6e2m3fn", "f6_e2m3", "fp6_e2m3"),
)
E3M2FN = Format(
    name="e3m2fn",
    exponent_bits=3,
    mantissa_bits=2,
    bias=3,
    has_inf=False,
    has_negative_zero=True,
    nan_encoding="none",
    description="OCP MX FP6 E3M2: max 28; no Inf or NaN",
    ml_dtypes_name="float6_e3m2fn",
    aliases=("f6e3m2fn", "f6_e3m2", "fp6_e3m2"),
)

FP8_FORMATS: tuple[Format, ...] = (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ)
ALL_FORMATS: tuple[Format, ...] = FP8_FORMATS + (E8M0FNU, E2M1FN, E2M3FN, E3M2FN)

# IEEE source types, described in the same terms so that the reference can
# round into them (double rounding through float32 is modelled this way).
FLOAT64 = Format(name="float64", exponent_bits=11, mantissa_bits=52, bias=1023,
                 has_inf=True, has_negative_zero=True, nan_encoding="ieee")
FLOAT32 = Format(name="float32", exponent_bits=8, mantissa_bits=23, bias=127,
                 has_inf=True, has_negative_zero=True, nan_encoding="ieee")
FLOAT16 = Format(name="float16", exponent_bits=5, mantissa_bits=10, bias=15,
                 has_inf=True, has_negative_zero=True, nan_encoding="ieee")
BFLOAT16 = Format(name="bfloat16", exponent_bits=8, mantissa_bits=7, bias=127,
                  has_inf=True, has_negative_zero=True, nan_encoding="ieee")
SOURCE_FORMATS: dict[str, Format] = {f.name: f for f in (FLOAT64, FLOAT32, FLOAT16, BFLOAT16)}


def _key(text: str) -> str:
    text = text.strip().lower()
    for prefix in ("torch.", "ml_dtypes.", "numpy.", "np.", "tl."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


_BY_NAME: dict[str, Format] = {}
for _f in ALL_FORMATS:
    for _n in (_f.name, _f.torch_name, _f.ml_dtypes_name, *_f.aliases):
        if _n:
            _BY_NAME[_key(_n)] = _f
# "float8_" + our name is what torch and ml_dtypes print.
for _f in ALL_FORMATS:
    _BY_NAME.setdefault(f"float8_{_f.name}", _f)


def names() -> tuple[str, ...]:
    """Our names of every known format."""
    return tuple(f.name for f in ALL_FORMATS)


def get(name: object) -> Format:
    """The format a name, dtype or string refers to.

    Accepts a :class:`Format`, our names (``"e4m3fnuz"``), torch dtypes
    (``torch.float8_e4m3fn``), ml_dtypes types and dtypes, their string forms
    (``"float8_e4m3fnuz"``, ``"torch.float8_e5m2"``), safetensors dtype codes
    (``"F8_E4M3"``) and Triton types and names (``tl.float8e4nv``,
    ``"float8e4nv"``, ``"fp8e4nv"``).

    Raises :class:`~fp8check.errors.UnknownFormatError` naming the known
    formats otherwise.
    """
    if isinstance(name, Format):
        return name
    text: str | None = None
    if isinstance(name, str):
        text = name
    else:
        # torch.dtype prints "torch.float8_e4m3fn"; a numpy dtype has .name;
        # an ml_dtypes scalar type has __name__.
        for attr in ("name", "__name__"):
            candidate = getattr(name, attr, None)
            if isinstance(candidate, str):
                text = candidate
                break
        if text is None or _key(text) not in _BY_NAME:
            text = str(name)
    found = _BY_NAME.get(_key(text))
    if found is None:
        raise UnknownFormatError(
            f"unknown format {text!r}; known formats: {', '.join(names())}"
        )
    return found

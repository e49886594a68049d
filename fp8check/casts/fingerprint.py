"""Profile fingerprints: which semantics does a cast kernel actually implement?

:func:`fingerprint` runs a kernel over the exhaustive sweep of an input
dtype and searches the space of profile variants (rounding x finite
overflow x Inf x NaN code x subnormals x intermediate rounding, plus the
unsigned and no-NaN rules where the format has them) for the one that
reproduces it. It names the known profiles the kernel matches exactly, or
the nearest one and how the kernel deviates from it ("nearest satfinite,
but ±Inf → NaN"), and how many inputs no variant explains.

The search runs on a subset (every hazard input and a fixed sample of the
sweep); the best candidates are then scored on the whole sweep, so counts
are exact.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fp8check import hazards, inputs, profiles, reference
from fp8check.casts import engine
from fp8check.formats import Format, get as get_format
from fp8check.profiles import Profile

__all__ = ["Fingerprint", "fingerprint", "variants", "describe_differences"]

_FIELD_ORDER = tuple(k for k in profiles.FIELDS if k != "stochastic_bits")
_WIDTH = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16}


def _dims(fmt: Format, input_dtype: str) -> dict[str, tuple[Any, ...]]:
    """The rules of the profile vocabulary (:data:`fp8check.profiles.FIELDS`) that can change a cast of
    ``input_dtype`` into ``fmt``, each with the values the search tries."""
    F = profiles.FIELDS
    dims: dict[str, tuple[Any, ...]] = {
        "rounding": tuple(r for r in F["rounding"] if r != "stochastic"),  # needs caller-supplied random bits
        "overflow": F["overflow"],
        "infinity": F["infinity"] if fmt.has_nan or fmt.has_inf else ("nonsat",),
    }
    if fmt.has_nan and fmt.nan_encoding != "negative_zero":
        dims["nan"] = F["nan"]
    if not fmt.has_nan:
        dims["nan_without_code"] = F["nan_without_code"]
    if fmt.has_subnormals:
        dims["subnormals"] = F["subnormals"]
    # Only an intermediate narrower than the input rounds anything.
    dims["intermediate"] = tuple(t for t in F["intermediate"] if t is None or _WIDTH[t] < _WIDTH[input_dtype]
                                 or (input_dtype == "float16" and t == "bfloat16"))
    if not fmt.signed:
        dims["unsigned_negative"] = tuple(v for v in F["unsigned_negative"] if v != "min")
        dims["unsigned_zero"] = F["unsigned_zero"]
    return dims


def variants(fmt: object, input_dtype: str = "float32") -> list[Profile]:
    """Every profile variant the search considers for ``fmt`` and ``input_dtype``."""
    f = get_format(fmt)
    dims = _dims(f, input_dtype)
    out = []
    for values in itertools.product(*dims.values()):
        changes = dict(zip(dims, values))
        out.append(dataclasses.replace(profiles.IEEE, name="variant", description="", **changes))
    return out


def _fields(p: Profile, fmt: Format) -> dict[str, Any]:
    r = p.resolve(fmt)
    return {k: getattr(r, k) for k in _FIELD_ORDER}


def describe_differences(variant: Profile, base: Profile, fmt: Format, input_dtype: str) -> list[str]:
    """Phrases for the rules in which ``variant`` differs from ``base`` (only rules that matter here)."""
    dims = _dims(fmt, input_dtype)
    a, b = _fields(variant, fmt), _fields(base, fmt)
    out = []
    for key in _FIELD_ORDER:
        if key not in dims or a[key] == b[key]:
            continue
        if key == "intermediate" and {a[key], b[key]} <= {None, "float32"} and input_dtype != "float64":
            continue  # rounding through float32 is exact for 32-bit and narrower inputs
        out.append(profiles.PHRASES.get((key, a[key]), f"{key}={a[key]}"))
    return out


@dataclass
class Fingerprint:
    kernel: str
    format: str
    input_dtype: str
    checked: int
    exact: list[str]  # named profiles that reproduce the kernel on every input
    nearest: str  # the named profile closest to the best variant
    differences: list[str]  # how the best variant differs from ``nearest``
    best: Profile
    unexplained: int  # inputs on which even the best variant differs
    unexplained_categories: dict[str, int] = field(default_factory=dict)
    named_mismatches: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        if self.exact:
            return "matches " + ", ".join(self.exact)
        how = ", ".join(self.differences) if self.differences else "same rules"
        head = f"{self.nearest}, but {how}" if self.differences else self.nearest
        if self.unexplained == 0:
            return f"nearest {head}"
        cats = ", ".join(f"{c} {n:,}" for c, n in self.unexplained_categories.items())
        return f"no profile variant matches; nearest {head}; {self.unexplained:,} inputs still differ ({cats})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "format": self.format, "input_dtype": self.input_dtype,
            "checked": self.checked, "exact": self.exact, "nearest": self.nearest,
            "differences": self.differences, "best": self.best.summary(get_format(self.format)),
            "unexplained": self.unexplained, "unexplained_categories": self.unexplained_categories,
            "named_mismatches": self.named_mismatches, "text": self.text,
        }


def _codes(bits: np.ndarray, input_dtype: str, fmt: Format, p: Profile) -> np.ndarray:
    return reference.encode(inputs.from_bits(bits, input_dtype), fmt, p)


def fingerprint(kernel: Any, fmt: object, input_dtype: str = "float32", *, sample: int = 16384,
                seed: int = 0) -> Fingerprint:
    """Fingerprint ``kernel`` (a :class:`~fp8check.casts.adapters.CastKernel`) on ``fmt``."""
    f = get_format(fmt)
    bits = inputs.unique(np.concatenate([inputs.sweep_bits(input_dtype), hazards.all_hazard_bits(f, input_dtype)]))
    actual = kernel.cast(inputs.from_bits(bits, input_dtype), f)

    rng = np.random.default_rng(seed)
    hz = np.isin(bits, hazards.all_hazard_bits(f, input_dtype))
    pick = np.flatnonzero(hz)
    rest = np.flatnonzero(~hz)
    if rest.size > sample:
        rest = rng.choice(rest, size=sample, replace=False)
    subset = np.sort(np.concatenate([pick, rest]))
    sub_bits, sub_actual = bits[subset], actual[subset]

    scored = []
    for v in variants(f, input_dtype):
        mism = int(np.count_nonzero(_codes(sub_bits, input_dtype, f, v) != sub_actual))
        scored.append((mism, v))
    scored.sort(key=lambda t: t[0])
    lowest = scored[0][0]
    # Re-score the candidates that tie or nearly tie on the whole sweep.
    finalists = [v for m, v in scored if m <= lowest + max(2, lowest // 100)][:24]
    full = []
    for v in finalists:
        full.append((int(np.count_nonzero(_codes(bits, input_dtype, f, v) != actual)), v))
    full.sort(key=lambda t: t[0])
    best_count = full[0][0]
    best_variants = [v for m, v in full if m == best_count]

    named = [p for p in profiles.PROFILES.values() if p.supports(f)]
    extra_claim = getattr(kernel, "claims", None)
    if extra_claim is not None and extra_claim.name not in profiles.PROFILES and extra_claim.supports(f):
        named.append(extra_claim)
    named_mismatches = {p.name: int(np.count_nonzero(_codes(bits, input_dtype, f, p) != actual)) for p in named}
    exact = sorted((name for name, m in named_mismatches.items() if m == 0),
                   key=lambda n: (n != getattr(extra_claim, "name", None), n))

    # Nearest named profile: fewest differing rules from some best variant,
    # then fewest mismatching inputs.
    choice = None
    claimed = extra_claim.name if extra_claim is not None else None
    for v in best_variants:
        for p in named:
            diffs = describe_differences(v, p, f, input_dtype)
            key = (len(diffs), named_mismatches[p.name], p.name != claimed)
            if choice is None or key < choice[0]:
                choice = (key, p, v, diffs)
    assert choice is not None
    _, nearest, best, diffs = choice

    unexplained_categories: dict[str, int] = {}
    if best_count:
        expected = _codes(bits, input_dtype, f, best)
        diff = expected != actual
        cats = engine.classify(bits[diff], expected[diff], actual[diff], input_dtype, f, best)
        names, counts = np.unique(cats.astype(str), return_counts=True)
        unexplained_categories = {str(n): int(c) for n, c in sorted(zip(names, counts), key=lambda t: -t[1])}
    return Fingerprint(
        kernel=getattr(kernel, "name", str(kernel)), format=f.name, input_dtype=input_dtype,
        checked=int(bits.size), exact=exact, nearest=nearest.name, differences=diffs, best=best,
        unexplained=best_count, unexplained_categories=unexplained_categories,
        named_mismatches=named_mismatches,
    )

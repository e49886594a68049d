"""The check engine: run a kernel against the reference, classify what differs.

``run_check`` is ``fp8check check`` without the terminal: the exhaustive
sweep of the input dtype (:func:`fp8check.inputs.sweep_bits`) plus
Hypothesis-drawn inputs (:mod:`fp8check.strategies`), every output compared
with :func:`fp8check.reference.encode` bit for bit, every divergence
classified into one of the cast categories of :mod:`fp8check.results`, and
a :class:`~fp8check.results.CheckResult` with exact counts and a capped list
of reproducers, the simplest of each category first.

Categories, decided from the input and the two codes, first match wins:

``nan``          the input is a NaN.
``infinity``     the input is ±Inf.
``signed_zero``  the input is ±0, or the reference gives a zero and the
                 kernel the zero pattern of the other sign (in fnuz: 0x80,
                 which is NaN).
``overflow``     a finite input beyond the format's largest value.
``subnormal``    a non-zero input below the smallest normal, an input that
                 is subnormal in its own dtype, or a subnormal code on
                 either side.
``rounding``     a finite input in range where the kernel returned the other
                 neighbour of the input on the format's grid.
``other``        anything else (e.g. a result that is not a neighbour at
                 all: a lost mantissa carry).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from fp8check import brackets, device_faults, hazards, inputs, reference
from fp8check.codes import bit_fields, code_class
from fp8check.formats import Format, get as get_format
from fp8check.profiles import Profile, get as get_profile
from fp8check.errors import KernelCallError
from fp8check.results import (CALL_CATEGORIES, CAST_CATEGORIES, MAP16_DTYPES, MAP16_ORDER, CheckResult, Divergence,
                              InputMap16, Refusal)

__all__ = [
    "classify",
    "compare",
    "Divergences",
    "run_check",
    "decode_check",
    "describe_code",
    "hypothesis_bits",
    "DEFAULT_CAP",
]

DEFAULT_CAP = 100  # reproducers listed per check (counts stay exact)

_CATEGORY_INDEX = {c: i for i, c in enumerate(CAST_CATEGORIES)}
_MAP16_INDEX = {c: i for i, c in enumerate(MAP16_ORDER)}


def code_value(code: int, fmt: Format) -> str:
    """The exact value of ``code`` as text (``'448.0'``, ``'-0.0'``, ``'nan'``)."""
    value = float(reference.decode_table(fmt)[code])
    return "nan" if math.isnan(value) else repr(value)


def describe_code(code: int, fmt: Format) -> str:
    """``'0x7e (448.0)'``: the code in hex and its exact value."""
    return f"0x{code:02x} ({code_value(code, fmt)})"


def _rtz_probe(profile: Profile, fmt: Format) -> Profile:
    """Round-toward-zero, otherwise like ``profile``: the lower neighbour of an input."""
    p = profile.resolve(fmt)
    return dataclasses.replace(p, name=f"{p.name}-rtz-probe", rounding="rtz", stochastic_bits=0,
                               subnormals="keep", overflow="nonsat")


def _values(bits: np.ndarray, input_dtype: str) -> np.ndarray:
    x = inputs.from_bits(bits, input_dtype)
    with np.errstate(all="ignore"):
        return x.astype(np.float64)


def classify(bits: np.ndarray, expected: np.ndarray, actual: np.ndarray, input_dtype: str,
             fmt: object, profile: object) -> np.ndarray:
    """Category names (array of str) for inputs where ``expected != actual``."""
    f, p = get_format(fmt), get_profile(profile)
    bits = np.asarray(bits)
    expected = np.asarray(expected).astype(np.int64)
    actual = np.asarray(actual).astype(np.int64)
    v = _values(bits, input_dtype)
    a = np.abs(v)
    src = inputs.source_format(input_dtype)
    b64 = bits.astype(np.uint64)
    nan_in = np.isnan(v)
    inf_in = np.isinf(v)
    finite = ~nan_in & ~inf_in
    zero_in = finite & (v == 0)
    mag_mask = f.magnitude_mask
    nan_codes = np.zeros(f.code_count, dtype=bool)
    nan_codes[list(f.nan_codes)] = True
    exp_zero = f.has_zero & ((expected & mag_mask) == 0) & ~nan_codes[expected]
    act_zero_like = (actual & mag_mask) == 0
    signed_zero = (zero_in & f.has_zero) | (f.signed & exp_zero & act_zero_like)
    inf_codes = np.zeros(f.code_count, dtype=bool)
    inf_codes[list(f.inf_codes)] = True
    # Overflow: beyond max, or an input that rounds to max made Inf or NaN (the kernel's overflow bound is wrong).
    at_max = (expected & mag_mask) == f.max_code
    overflow = finite & ((a > f.max) | (at_max & (nan_codes[actual] | inf_codes[actual])))
    input_subnormal = finite & ~zero_in & (((b64 & np.uint64(src.magnitude_mask)) >> np.uint64(src.mantissa_bits)) == 0)

    def subnormal_code(c: np.ndarray) -> np.ndarray:
        if not f.has_subnormals:
            return np.zeros(c.shape, dtype=bool)
        mag = c & mag_mask
        return (mag > 0) & (mag < (1 << f.mantissa_bits)) & ~nan_codes[c]

    subnormal = finite & ~zero_in & (
        (a < f.smallest_normal) | input_subnormal | subnormal_code(expected) | subnormal_code(actual)
    )
    lower = reference.encode(inputs.from_bits(bits, input_dtype), f, _rtz_probe(p, f)).astype(np.int64)
    if f.signed:
        same_sign = ((actual & f.sign_mask) != 0) == (v < 0)
    else:
        same_sign = np.ones(v.shape, dtype=bool)
    neighbour = same_sign & ~nan_codes[actual] & ~inf_codes[actual] & (
        ((actual & mag_mask) == (lower & mag_mask)) | ((actual & mag_mask) == (lower & mag_mask) + 1)
    )
    rounding = finite & (a <= f.max) & neighbour
    if not f.signed:
        rounding &= v > 0
    out = np.full(v.shape, "other", dtype=object)
    # Saturation at a wrong bound: an input that rounds to ±max given a smaller finite code of its sign (e4m3fnuz
    # 236 or 240 -> 224, a clamp at 224 before the cast): not a rounding neighbour, nor 'other'.
    low_bound = (finite & at_max & same_sign & ((actual & mag_mask) < f.max_code) & ~nan_codes[actual]
                 & ~inf_codes[actual])
    # Assign in reverse priority so that the first rule in the docstring wins.
    for mask, name in ((rounding, "rounding"), (subnormal, "subnormal"), (overflow | low_bound, "overflow"),
                       (signed_zero, "signed_zero"), (inf_in, "infinity"), (nan_in, "nan")):
        out[mask] = name
    return out


@dataclass
class Divergences:
    """The divergences of one kernel, format and input dtype: unique by input, counted exactly."""

    fmt: Format
    profile: Profile
    input_dtype: str
    bits: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    expected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    actual: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    categories: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    conditions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    checked_count: int = 0
    # 16-bit input dtypes: every compared input, its codes and category (for reports).
    input_map: InputMap16 | None = None
    # Divergences of a call rather than of an input (results.CALL_CATEGORIES):
    # category -> [count, the first one as a Divergence].
    calls: dict[str, list[Any]] = field(default_factory=dict)
    _sorted_bits: np.ndarray | None = field(default=None, repr=False, compare=False)

    def add(self, bits: np.ndarray, expected: np.ndarray, actual: np.ndarray, condition: str = "",
            *, record_map: bool = True) -> np.ndarray:
        """Record a batch of compared inputs; return the mask of those that diverge.

        ``condition``: what the call that gave ``actual`` needed (see
        :mod:`fp8check.casts.harness`); an input keeps the first record made
        of it, so inputs already seen diverging keep theirs.
        """
        bits = np.asarray(bits).astype(np.uint64, copy=False)
        expected, actual = np.asarray(expected), np.asarray(actual)
        if record_map:
            self.checked_count += int(bits.size)
        diff = expected != actual
        mapping = bool(record_map and self.input_dtype in MAP16_DTYPES and bits.size)
        idx = np.flatnonzero(diff)
        if not mapping and idx.size and self.bits.size:
            # Inputs already recorded keep their first record: classify only the new ones
            # (a kernel wrong on millions of inputs is called ~100 times by the harness).
            idx = idx[~self._recorded(bits[idx])]
        cats = None
        if idx.size:
            cats = classify(bits[idx], expected[idx], actual[idx], self.input_dtype, self.fmt, self.profile)
        if mapping:
            self._map(bits, expected, actual, diff, cats)
        if cats is not None:
            self.extend(bits[idx], expected[idx], actual[idx], cats, np.full(cats.size, condition, dtype=object))
        return diff

    def _sorted_index(self) -> np.ndarray:
        """The recorded input bits, sorted (rebuilt when the record was changed from outside)."""
        if self._sorted_bits is None or self._sorted_bits.size != self.bits.size:
            self._sorted_bits = np.sort(self.bits)
        return self._sorted_bits

    def _recorded(self, bits: np.ndarray) -> np.ndarray:
        """Mask of ``bits`` already in the record."""
        index = self._sorted_index()
        if not index.size:
            return np.zeros(bits.size, dtype=bool)
        i = np.minimum(np.searchsorted(index, bits), index.size - 1)
        return index[i] == bits

    def extend(self, bits: np.ndarray, expected: np.ndarray, actual: np.ndarray, categories: np.ndarray,
               conditions: np.ndarray | None = None) -> None:
        """Add classified divergences, keeping the first record of each input."""
        bits = np.asarray(bits).astype(np.uint64).reshape(-1)
        if conditions is None:
            conditions = np.full(bits.size, "", dtype=object)
        keep = inputs.first_occurrences(bits)  # first within the batch ...
        keep = keep[~self._recorded(bits[keep])]  # ... and not recorded before
        if not keep.size:
            return
        index = self._sorted_index()
        self.bits = np.concatenate([self.bits, bits[keep]])
        self.expected = np.concatenate([self.expected, np.asarray(expected).astype(np.uint8).reshape(-1)[keep]])
        self.actual = np.concatenate([self.actual, np.asarray(actual).astype(np.uint8).reshape(-1)[keep]])
        self.categories = np.concatenate([self.categories, np.asarray(categories, dtype=object).reshape(-1)[keep]])
        self.conditions = np.concatenate([self.conditions, np.asarray(conditions, dtype=object).reshape(-1)[keep]])
        self._sorted_bits = np.sort(np.concatenate([index, bits[keep]]), kind="stable")  # a merge of sorted runs

    def add_call(self, category: str, count: int, divergence: Divergence) -> None:
        """Record ``count`` divergences of a call (in_place, nondeterministic, refused); the first is shown."""
        entry = self.calls.setdefault(category, [0, divergence])
        entry[0] += int(count)

    def merge(self, other: Divergences) -> None:
        """Add everything ``other`` recorded (another test or another pytest-xdist worker)."""
        self.checked_count += other.checked_count
        if len(other):
            self.extend(other.bits, other.expected, other.actual, other.categories, other.conditions)
        for category, (count, first) in other.calls.items():
            self.add_call(category, count, first)
        if other.input_map is not None:
            if self.input_map is None:
                self.input_map = InputMap16.empty(self.input_dtype)
            self.input_map.merge(other.input_map)

    def to_state(self) -> dict[str, Any]:
        """Plain data (bytes, ints) for pytest-xdist's workeroutput; :meth:`from_state` reverses it."""
        return {"checked": self.checked_count, "bits": self.bits.astype(np.uint64).tobytes(),
                "expected": self.expected.tobytes(), "actual": self.actual.tobytes(),
                "categories": np.array([_CATEGORY_INDEX[str(c)] for c in self.categories], np.uint8).tobytes(),
                "conditions": [str(c) for c in self.conditions],
                "calls": {k: [n, d.to_dict()] for k, (n, d) in self.calls.items()},
                "map16": self.input_map.to_dict() if self.input_map is not None else None}

    @classmethod
    def from_state(cls, fmt: Format, profile: Profile, input_dtype: str, state: dict[str, Any]) -> Divergences:
        rec = cls(fmt=fmt, profile=profile, input_dtype=input_dtype, checked_count=state["checked"])
        cats = np.frombuffer(state["categories"], dtype=np.uint8)
        rec.extend(np.frombuffer(state["bits"], dtype=np.uint64), np.frombuffer(state["expected"], dtype=np.uint8),
                   np.frombuffer(state["actual"], dtype=np.uint8),
                   np.array([CAST_CATEGORIES[i] for i in cats], dtype=object),
                   np.array(state.get("conditions", [""] * cats.size), dtype=object))
        for category, (count, first) in state.get("calls", {}).items():
            rec.add_call(category, count, Divergence.from_dict(first))
        if state.get("map16") is not None:
            rec.input_map = InputMap16.from_dict(state["map16"])
        return rec

    def _map(self, bits: np.ndarray, expected: np.ndarray, actual: np.ndarray, diff: np.ndarray,
             cats: np.ndarray | None) -> None:
        if self.input_map is None:
            self.input_map = InputMap16.empty(self.input_dtype)
        index = np.zeros(bits.size, dtype=np.uint8)  # 0: matches the reference
        if cats is not None:
            index[diff] = [_MAP16_INDEX[str(c)] for c in cats]
        self.input_map.record(bits, expected, actual, index)

    def drop(self, mask: np.ndarray) -> None:
        keep = ~mask
        self.bits, self.expected, self.actual, self.categories, self.conditions = (
            self.bits[keep], self.expected[keep], self.actual[keep], self.categories[keep], self.conditions[keep])
        self._sorted_bits = None

    def __len__(self) -> int:
        """Divergent inputs plus divergences of calls."""
        return int(self.bits.size) + sum(n for n, _ in self.calls.values())

    def counts(self) -> dict[str, int]:
        out = {c: 0 for c in CAST_CATEGORIES + CALL_CATEGORIES}
        names, n = np.unique(self.categories.astype(str), return_counts=True) if self.bits.size else ((), ())
        for name, k in zip(names, n):
            out[str(name)] = int(k)
        for category, (count, _) in self.calls.items():
            out[category] += count
        return {c: k for c, k in out.items() if k}

    def order(self) -> np.ndarray:
        """Indices, the simplest reproducer of each category first, then the next of each, ..."""
        if not self.bits.size:
            return np.zeros(0, dtype=np.int64)
        key = inputs.simplicity(self.bits, self.input_dtype)
        cat = np.array([_CATEGORY_INDEX.get(str(c), len(CAST_CATEGORIES)) for c in self.categories])
        by = np.lexsort((key, cat))  # by category, then simplest first
        sorted_cat = cat[by]
        rank = np.empty(by.size, dtype=np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_cat)) + 1, by.size]
        for s, e in zip(starts[:-1], starts[1:]):
            rank[s:e] = np.arange(e - s)
        return by[np.lexsort((sorted_cat, rank))]  # round robin over categories

    def result(self, *, kernel: str, checked: int, command: str, device: str = "cpu", seed: int | None = None,
               cap: int | None = DEFAULT_CAP) -> CheckResult:
        """These divergences as a :class:`~fp8check.results.CheckResult` (counts exact, ``cap`` listed)."""
        result = CheckResult(kernel=kernel, format=self.fmt.name, profile=self.profile.name, passed=len(self) == 0,
                             checked=int(checked), categories=self.counts(), divergences=self.to_list(cap),
                             kind="cast", input_dtype=self.input_dtype, device=device, seed=seed, command=command)
        result.extra["profile_summary"] = self.profile.summary(self.fmt)
        result.extra["profile_description"] = self.profile.description
        result.extra["listed"] = len(result.divergences)
        if self.input_map is not None:
            result.extra["map16"] = self.input_map.to_dict()
        return result

    def to_list(self, cap: int | None = DEFAULT_CAP) -> list[Divergence]:
        """The divergences of calls, then the inputs' (see :meth:`order`), at most ``cap``."""
        idx = self.order()
        listed = [first for _, first in self.calls.values()]
        if cap is not None and cap > 0:
            idx = idx[:max(0, cap - len(listed))]
        return listed + [self.divergence(int(i)) for i in idx]

    def divergence(self, i: int) -> Divergence:
        b, e, a = int(self.bits[i]), int(self.expected[i]), int(self.actual[i])
        p = self.profile.resolve(self.fmt)
        return Divergence(
            category=str(self.categories[i]),
            input_hex=inputs.hex_bits(b, self.input_dtype),
            expected_hex=f"0x{e:02x}",
            actual_hex=f"0x{a:02x}",
            input_dtype=self.input_dtype,
            input_value=inputs.describe(b, self.input_dtype),
            expected_value=code_value(e, self.fmt),
            actual_value=code_value(a, self.fmt),
            detail=(
                f"{self.fmt.name} under {p.name}: expected {bit_fields(e, self.fmt)}, "
                f"got {bit_fields(a, self.fmt)}"
            ),
            condition=str(self.conditions[i]),
        )


def expected_codes(bits: np.ndarray, input_dtype: str, fmt: Format, profile: Profile) -> np.ndarray:
    return reference.encode(inputs.from_bits(bits, input_dtype), fmt, profile)


def compare(kernel: Any, fmt: object, profile: object, input_dtype: str, bits: np.ndarray,
            into: Divergences | None = None) -> Divergences:
    """Cast the inputs ``bits`` with ``kernel`` and record where it differs from the reference."""
    f, p = get_format(fmt), get_profile(profile)
    into = into if into is not None else Divergences(fmt=f, profile=p, input_dtype=input_dtype)
    bits = np.asarray(bits)
    if bits.size == 0:
        return into
    x = inputs.from_bits(bits, input_dtype)
    actual = kernel.cast(x, f)
    expected = expected_codes(bits, input_dtype, f, p)
    into.add(bits, expected, actual)
    return into


def hypothesis_bits(fmt: Format, input_dtype: str, *, max_examples: int, seed: int | None,
                    max_size: int = 256) -> np.ndarray:
    """Input patterns drawn by Hypothesis from :func:`fp8check.strategies.cast_input_arrays`.

    Hypothesis only generates here (no shrinking: nothing fails); the
    kernel is called once on everything drawn. ``seed`` None: derandomized.
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from fp8check.strategies import cast_input_arrays, without_local_constants

    drawn: list[np.ndarray] = []

    @settings(max_examples=max_examples, database=None, deadline=None, derandomize=seed is None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(cast_input_arrays(fmt, dtype=input_dtype, max_size=max_size))
    def draw(x: np.ndarray) -> None:
        drawn.append(inputs.to_bits(x, input_dtype).copy())

    if seed is not None:
        draw = hypothesis_seed(seed)(draw)
    with without_local_constants():  # the same seed, the same inputs, whatever the user's modules hold
        draw()
    if not drawn:
        return np.zeros(0, dtype=inputs.bits_dtype(input_dtype))
    return inputs.unique(np.concatenate(drawn))


def _command(kernel_name: str, fmt: Format, profile: Profile, input_dtype: str, device: str,
             max_examples: int, seed: int | None) -> str:
    parts = ["fp8check", "check", kernel_name, "--format", fmt.name, "--profile", profile.name,
             "--input-dtype", input_dtype]
    if device != "cpu":
        parts += ["--device", device]
    parts += ["--max-examples", str(max_examples)]
    if seed is not None:
        parts += ["--seed", str(seed)]
    return shlex.join(parts)


def run_check(kernel: Any, fmt: object, profile: object | None = None, *, input_dtype: str = "float32",
              max_examples: int = 200, seed: int | None = 0, cap: int | None = DEFAULT_CAP,
              sweep: bool = True, hypothesis: bool = True, extra_bits: Iterable[np.ndarray] = (),
              thorough: bool = True, supports: Any = None, huge: bool | None = None,
              huge_numel: int | None = None) -> tuple[CheckResult, Divergences]:
    """Check ``kernel`` (a :class:`~fp8check.casts.adapters.CastKernel`) on ``fmt`` from ``input_dtype``.

    The inputs: the sweep of the dtype (for float32 with structured low
    halves too, :func:`fp8check.inputs.low_bit_patterns`), every hazard
    input and ``max_examples`` Hypothesis examples, driven through the calls
    of :mod:`fp8check.casts.harness` (``thorough=False``: the coverage calls
    only). ``profile`` None: what the kernel claims. ``supports``: a
    :class:`~fp8check.casts.harness.Supports` the kernel's author declared.
    ``huge``: the huge calls of :mod:`fp8check.casts.huge` (past 2^31
    elements, more than 65,535 rows): None (default) on a CUDA device with
    room for them, True anywhere (``huge_numel`` elements, for tests), False
    never; a note says when they were not made.
    Returns the result and the full divergence record (for fingerprints and
    reports). A kernel that refuses every coverage call raises its error.
    A fault of the device (:mod:`fp8check.device_faults`) ends the check at
    the call that made it: the result holds what the calls before it found,
    and the fault, first.
    """
    from fp8check.casts import harness

    f = get_format(fmt)
    p = kernel.profile_for(f) if profile is None else get_profile(profile)
    p.resolve(f)
    inputs.source_format(input_dtype)
    supports = supports or harness.Supports()
    rec = Divergences(fmt=f, profile=p, input_dtype=input_dtype)
    bdt = inputs.bits_dtype(input_dtype)
    hazard = hazards.all_hazard_bits(f, input_dtype) if sweep else np.zeros(0, bdt)
    batches: list[np.ndarray] = [hazard]
    if sweep:
        batches.append(inputs.sweep_bits(input_dtype))
        if input_dtype == "float32":
            batches.append(inputs.low_bit_patterns())
    if hypothesis and max_examples > 0:
        batches.append(hypothesis_bits(f, input_dtype, max_examples=max_examples, seed=seed))
    batches.extend(np.asarray(b).astype(bdt) for b in extra_bits)
    bits = inputs.unique(np.concatenate(batches).astype(bdt))
    calls = harness.plan(bits, hazard, input_dtype, f, seed=seed or 0, device=getattr(kernel, "device", "cpu"),
                         thorough=thorough, max_numel=supports.max_numel)
    alternates: dict[int, tuple[list[np.ndarray], tuple[str, ...]]] = {}

    def call_kernel(x: Any, call: Any) -> Any:
        # under a faithful Triton target whose instructions are bracketed: three runs, rn first
        outs, op_names = brackets.runs_on(lambda xx: kernel.call(xx, f), x)
        if len(outs) > 1:
            alternates[call.number] = ([np.asarray(o).reshape(-1) for o in outs[1:]], op_names)
        return outs[0]

    device = getattr(kernel, "device", "cpu")
    device_faults.require_usable(device, f"{kernel.name} on {device}")
    outcomes = harness.run(calls, call_kernel, use_torch=kernel.tensor_fn is not None, device=device,
                           supports=supports, on_error=lambda exc, call: _one_line(exc), name=kernel.name)
    fault = next((o.fault for o in outcomes if o.fault is not None), None)
    outcomes = [o for o in outcomes if o.fault is None]
    coverage = [o for o in outcomes if o.call.kind == "coverage" and not o.skipped]
    if fault is None and coverage and all(o.error for o in coverage):
        kind, _, message = coverage[0].error.partition(": ")
        raise KernelCallError(f"{kernel.name} raised {kind} casting {input_dtype} to {f.name}: {message}")
    tally = brackets.Tally()
    refusals = _record(rec, outcomes, f, p, input_dtype, supports, alternates, tally)
    huge_note, huge_calls = "", 0
    if thorough and kernel.tensor_fn is not None and fault is None:
        huge_note, huge_calls, fault = _huge_calls(kernel, f, p, input_dtype, bits, rec, refusals, device, supports,
                                                   force=huge, numel=huge_numel)
    result = rec.result(kernel=kernel.name, checked=int(bits.size), device=device, seed=seed, cap=cap,
                        command=_command(kernel.name, f, p, input_dtype, device, max_examples, seed))
    result.refusals = refusals
    if fault is not None:  # the check ended at the call that faulted: its finding, first
        dataclasses.replace(fault, kernel=kernel.name).apply(result)
    tally.apply(result)
    known = _known_reasons(kernel, f, input_dtype, rec)
    if known:
        result.expected_failure = "; ".join(known)
    result.extra["checked_means"] = _checked_means(input_dtype, sweep, hypothesis and max_examples > 0, seed)
    result.extra["calls"] = sum(not o.skipped for o in outcomes) + huge_calls + (fault is not None)
    if thorough:
        result.add_note(harness.large_numel(device)[1])
        result.add_note(huge_note)
    result.add_note(_through_float32(result, f, p, input_dtype))
    return result, rec


def _through_float32(result: Any, fmt: Format, profile: Profile, input_dtype: str) -> str | None:
    """Where every listed float64 divergence is what the cast gives after rounding its input to float32 first
    (``x.to(torch.float32)`` in the kernel: a double rounding), the words that say so."""
    from fp8check import reference

    listed = [d for d in result.divergences if d.input_hex.startswith("0x") and d.actual_hex.startswith("0x")]
    if input_dtype != "float64" or result.passed or not listed:
        return None
    x = np.array([int(d.input_hex, 16) for d in listed], dtype=np.uint64).view(np.float64)
    with np.errstate(all="ignore"):
        codes = reference.encode(x.astype(np.float32), fmt, profile)
    if any(int(c) != int(d.actual_hex, 16) for c, d in zip(codes, listed)):
        return None
    return (f"every float64 divergence listed is the {profile.name} cast of the input rounded to float32 first "
            "(double rounding, as x.to(torch.float32) before the cast gives): cast from float64 in one rounding, or "
            "leave float64 out of the kernel's input-dtypes if its callers never pass it")


def _huge_calls(kernel: Any, fmt: Format, profile: Profile, input_dtype: str, bits: np.ndarray, rec: Divergences,
                refusals: list[Refusal], device: str, supports: Any, *, force: bool | None,
                numel: int | None) -> tuple[str, int, Any]:
    """Make the huge calls (:mod:`fp8check.casts.huge`) on a tile of the checked patterns; their wrong codes go
    into ``rec`` with the call as their condition, a refusal into ``refusals``. (note, calls made, the
    :class:`~fp8check.device_faults.DeviceFault` that ended them or None)."""
    from fp8check.casts import harness, huge

    width = inputs.source_format(input_dtype).bits // 8
    calls, note = huge.plan(device, bytes_per_element=2 * width + 4 + 2, max_numel=supports.max_numel,
                            numel_multiple_of=supports.numel_multiple_of, force=force,
                            numel=numel or huge.HUGE_NUMEL, virtual=True)
    if not calls or not bits.size:
        return note, 0, None
    rng = np.random.default_rng(0)
    tile_bits = bits[rng.permutation(bits.size)[:1 << 16]]
    tile_expected = expected_codes(tile_bits, input_dtype, fmt, profile)
    tile = harness.to_torch(inputs.from_bits(tile_bits, input_dtype), device)
    made = 0
    for call in calls:
        x = None
        try:
            if call.virtual:  # a Triton kernel on a CPU: its last programs, the input never allocated
                actual, judged, what = _virtual_call(kernel, fmt, call, tile)
                note = "; ".join(filter(None, [what, note]))
                if actual is None:
                    continue
            else:
                x = huge.tiled(tile, call.shape)
                actual, judged = kernel.call(x, fmt).reshape(-1), None
                device_faults.settle(device)
        except Exception as exc:  # the kernel refused the huge call, or faulted on the device
            fault = device_faults.fault_of(exc, device=device, call=call.condition().removeprefix("only for "),
                                           kernel=kernel.name)
            if fault is not None:
                return note, made, fault
            declared = supports.declared and supports.allows_shape(call.shape)
            refusals.append(Refusal(condition=call.condition(), error=_one_line(exc), declared=declared))
            if declared:
                rec.add_call("refused", 1, Divergence(
                    category="refused", input_hex="-", expected_hex="-", actual_hex="-", input_dtype=input_dtype,
                    detail=_one_line(exc), condition=f"inside the declared domain: {call.condition()}"))
            continue
        finally:
            del x
        made += 1
        if judged is None:
            count, idx = huge.compare_tiled(actual, tile_expected, lambda e, a: e == a)
        else:  # only what the interpreted programs stored
            idx = judged[actual[judged] != tile_expected[judged % tile_bits.size]]
            count = int(idx.size)
        if count:
            pos = idx % tile_bits.size
            rec.add(tile_bits[pos], tile_expected[pos], actual[idx],
                    f"{call.condition()}: {count:,} wrong codes, the first at element {int(idx[0]):,}",
                    record_map=False)
    return note, made, None


def _virtual_call(kernel: Any, fmt: Format, call: Any, tile: Any) -> tuple[Any, Any, str]:
    """The past-2^31 call of a Triton kernel interpreted on a CPU without allocating it
    (:mod:`fp8check.triton.virtual`): (the codes, the indices of those its last programs stored, a note);
    (None, None, why) where the launcher would compute on the whole input. What the wrapped offsets of an
    int32 kernel do outside the tensors is the sanitizer's fault; what the kernel raises propagates."""
    from fp8check.triton import virtual

    try:
        with virtual.virtual_call(tile, call.shape) as v:
            actual = kernel.call(v.input, fmt).reshape(-1)
    except virtual.VirtualInputError as exc:
        return None, None, f"the call past 2^31 elements was not made: {exc}"
    judged = v.stored(actual)
    return actual, judged, (f"the call past 2^31 elements ({call.numel:,}) was made on the CPU: {v.describe()}; "
                            f"{judged.size:,} output codes stored there judged")


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _record(rec: Divergences, outcomes: list[Any], fmt: Format, profile: Profile, input_dtype: str,
            supports: Any, alternates: dict[int, Any] | None = None, tally: Any = None) -> list[Refusal]:
    """Compare every call's codes with the reference into ``rec``; the refusals, in call order.
    ``alternates``: per call, the ``lo``/``hi`` runs' codes and the bracketed ops (codes that differ between
    the runs and match the reference in one of them go to ``tally``, target-dependent, not to ``rec``)."""
    refusals: list[Refusal] = []
    codes_of: dict[int, np.ndarray] = {}
    # Coverage first: an input that diverges there needs no condition.
    ordered = sorted(outcomes, key=lambda o: (o.call.kind != "coverage", o.call.number))
    for o in ordered:
        call = o.call
        if o.skipped:
            continue
        if o.error:
            declared = supports.declared and supports.allows(call)
            refusals.append(Refusal(condition=call.describe(), error=o.error, declared=declared))
            if declared:
                rec.add_call("refused", 1, Divergence(
                    category="refused", input_hex="-", expected_hex="-", actual_hex="-", input_dtype=input_dtype,
                    detail=o.error, condition=f"inside the declared domain: {call.describe()}"))
            continue
        bits = call.bits.reshape(-1).astype(np.uint64, copy=False)
        actual = o.codes.reshape(-1)
        codes_of[call.number] = actual
        if o.mutated is not None:
            changed, before, after = o.mutated
            width = inputs.source_format(input_dtype).bits // 4
            rec.add_call("in_place", changed, Divergence(
                category="in_place", input_hex=f"0x{before:0{width}x}", expected_hex=f"0x{before:0{width}x}",
                actual_hex=f"0x{after:0{width}x}", input_dtype=input_dtype,
                input_value=inputs.describe(before, input_dtype),
                expected_value=inputs.describe(before, input_dtype), actual_value=inputs.describe(after, input_dtype),
                detail=f"the kernel wrote {changed:,} elements of its input", condition=call.describe()))
        if call.kind == "repeat" and call.repeat_of in codes_of:
            first = codes_of[call.repeat_of]
            differ = np.flatnonzero(first != actual)
            if not differ.size:  # the same codes as the call it repeats: compared there already
                continue
            i = int(differ[0])
            rec.add_call("nondeterministic", int(differ.size), Divergence(
                category="nondeterministic", input_hex=inputs.hex_bits(int(bits[i]), input_dtype),
                expected_hex=f"0x{int(first[i]):02x}", actual_hex=f"0x{int(actual[i]):02x}",
                input_dtype=input_dtype, input_value=inputs.describe(int(bits[i]), input_dtype),
                expected_value=code_value(int(first[i]), fmt), actual_value=code_value(int(actual[i]), fmt),
                detail=f"element {i:,}: call {call.repeat_of} gave {int(first[i]):#04x}, this call "
                       f"{int(actual[i]):#04x} ({differ.size:,} elements differ)",
                condition=call.describe()))
        expected = expected_codes(bits, input_dtype, fmt, profile)
        if alternates and call.number in alternates:
            others, op_names = alternates[call.number]
            cands = [actual] + others
            actual, dependent = brackets.resolve(expected, cands)
            if tally is not None:
                tally.add(bits, lambda i: _dependent_example(bits, expected, cands, i, input_dtype, fmt, op_names),
                          dependent, op_names)
        coverage = call.kind == "coverage"
        rec.add(bits, expected, actual, "" if coverage else call.condition(), record_map=coverage)
    return refusals


def _dependent_example(bits: np.ndarray, expected: np.ndarray, cands: list[np.ndarray], i: int, input_dtype: str,
                       fmt: Format, op_names: tuple[str, ...]) -> Divergence:
    rn, lo, hi = (int(c[i]) for c in cands[:3])
    return Divergence(
        category="target_dependent", input_hex=inputs.hex_bits(int(bits[i]), input_dtype),
        expected_hex=f"0x{int(expected[i]):02x}", actual_hex=f"0x{rn:02x}", input_dtype=input_dtype,
        input_value=inputs.describe(int(bits[i]), input_dtype), expected_value=code_value(int(expected[i]), fmt),
        actual_value=code_value(rn, fmt),
        detail=(f"correctly rounded {', '.join(op_names)}: 0x{rn:02x}; at the low end of the bound: 0x{lo:02x}; "
                f"at the high end: 0x{hi:02x}"))


def _checked_means(input_dtype: str, sweep: bool, hypothesis: bool, seed: int | None) -> str:
    """What ``CheckResult.checked`` counted, in words."""
    parts = []
    if sweep:
        parts.append({"float16": "every float16 input", "bfloat16": "every bfloat16 input",
                      "float32": "a float32 sweep (every upper 16-bit half with structured lower halves: each "
                                 "single bit, each run of low and of high bits; every float16 value)",
                      "float64": "a float64 sweep (the float32 sweep widened, and each pattern's neighbours)"}
                     [input_dtype])
        parts.append("every hazard input")
    if hypothesis:
        parts.append(f"Hypothesis examples (seed {seed})" if seed is not None else "Hypothesis examples")
    text = "distinct inputs: " + ", ".join(parts) if parts else "distinct inputs"
    return text + "; shuffled, in calls of many sizes, shapes, layouts and contents"


def _known_reasons(kernel: Any, fmt: Format, input_dtype: str, rec: Divergences) -> list[str]:
    """The upstream reasons that explain every divergence found (empty if any is unexplained)."""
    known = getattr(kernel, "known_divergences", lambda *a, **k: ())(fmt, input_dtype)
    if not len(rec) or not known:
        return []
    explained = np.zeros(len(rec), dtype=bool)
    reasons = []
    for k in known:
        mask = np.ones(len(rec), dtype=bool) if k.affects is None else k.affects(rec.bits, input_dtype, fmt)
        if mask.any():
            reasons.append(k.reason)
        explained |= mask
    return reasons if explained.all() else []


# A wrong decode, by the class of the code decoded.
_DECODE_CATEGORY = {"nan": "nan", "infinity": "infinity", "zero": "signed_zero", "subnormal": "subnormal",
                    "normal": "other"}


def decode_check(kernel: Any, fmt: object) -> tuple[int, list[Divergence]]:
    """Decode every code with ``kernel`` and compare with the exact values (NaN by class, -0 distinct).

    Returns (codes checked, divergences) with ``input_hex`` the code and
    the hex fields float32 bit patterns.
    """
    f = get_format(fmt)
    codes = np.arange(f.code_count, dtype=np.uint8)
    actual = kernel.decode(codes, f).astype(np.float32)
    expected = reference.decode(codes, f).astype(np.float32)
    a_bits, e_bits = actual.view(np.uint32), expected.view(np.uint32)
    same = (np.isnan(actual) & np.isnan(expected)) | (a_bits == e_bits)
    out = []
    for c in np.flatnonzero(~same):
        code = int(c)
        cat = _DECODE_CATEGORY[code_class(code, f)]
        out.append(Divergence(
            category=cat, input_hex=f"0x{code:02x}", expected_hex=f"0x{int(e_bits[c]):08x}",
            actual_hex=f"0x{int(a_bits[c]):08x}", input_dtype=f.name,
            input_value=bit_fields(code, f), expected_value=repr(float(expected[c])),
            actual_value=repr(float(actual[c])), detail=f"decode of {f.name} code 0x{code:02x}",
        ))
    return int(codes.size), out

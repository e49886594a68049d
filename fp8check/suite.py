"""What the property suite runs: targets (kernel x format x input dtype) and their results.

A :class:`Target` is one kernel cast into one format from one input dtype,
judged against one profile. The properties in ``properties/`` call
:meth:`Target.check` with input bit patterns; it casts them, compares with
the reference bit for bit, records every divergence in a :class:`Collector`
(the ``--fp8check-json`` file) and fails with a readable message. Known
upstream bugs narrow enough to be described input by input
(:class:`~fp8check.stacks.KnownDivergence` with ``affects``) are recorded
but excused; broad ones are strict xfails set by the plugin.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from fp8check import engine, inputs
from fp8check.formats import Format
from fp8check.kernels import CastKernel
from fp8check.stacks import KnownDivergence
from fp8check.profiles import Profile
from fp8check.results import CAST_CATEGORIES, CheckResult, InputMap16

__all__ = ["Target", "DecodeTarget", "Collector", "targets_for", "hypothesis_settings", "HYPOTHESIS_PROFILES",
           "FNUZ", "OCP", "MX"]

FNUZ = frozenset({"e4m3fnuz", "e5m2fnuz"})
OCP = frozenset({"e4m3fn", "e5m2"})
MX = frozenset({"e8m0fnu", "e2m1fn", "e2m3fn", "e3m2fn"})


# fp8check's own Hypothesis settings, by name. Never registered as Hypothesis
# profiles: they decorate fp8check's properties only, so nothing in other
# tests of the same run changes (Hypothesis loads its own "ci" profile when
# $CI is set; that one stays in force for them).
HYPOTHESIS_PROFILES = {
    "fp8check-ci": dict(max_examples=60, derandomize=True, database=None, deadline=None, print_blob=False),
    "fp8check-thorough": dict(max_examples=2000, derandomize=False, deadline=None),
}


def hypothesis_settings(name: str | None = None, *, shrink: bool = True) -> Any:
    """The Hypothesis settings fp8check's properties run under.

    ``name``: ``fp8check-ci`` (None: the default), ``fp8check-thorough``, or
    the name of a profile registered with Hypothesis. Each of fp8check's own
    starts from Hypothesis's ``default`` profile, never from whatever profile
    is loaded. ``shrink=False`` skips shrinking (for strict xfails).
    """
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.errors import InvalidArgument

    from fp8check.errors import InvalidValueError

    name = name or "fp8check-ci"
    if name in HYPOTHESIS_PROFILES:
        health = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                  HealthCheck.filter_too_much]
        base = settings(settings.get_profile("default"), suppress_health_check=health, **HYPOTHESIS_PROFILES[name])
    else:
        try:
            base = settings.get_profile(name)
        except InvalidArgument:
            raise InvalidValueError(f"Hypothesis profile {name!r} is not registered; fp8check's own are "
                                    f"{', '.join(HYPOTHESIS_PROFILES)}") from None
    return base if shrink else settings(base, phases=[Phase.explicit, Phase.generate])


class Collector:
    """Every divergence the properties found, unique per input, per check key.

    The key is (kernel, format, profile, input dtype, device). Plain data
    (``to_state``/``merge_state``) so that pytest-xdist workers can send
    theirs to the controller.
    """

    def __init__(self) -> None:
        self.checks: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
        # Decodes: (kernel, format, device) -> {"checked": n, "divergences": {code: dict}}
        self.decodes: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add_decode(self, key: tuple[str, str, str], checked: int, divergences: list[Any]) -> None:
        e = self.decodes.setdefault(key, {"checked": 0, "divergences": {}, "reasons": set()})
        e["checked"] = max(e["checked"], checked)
        for d in divergences:
            e["divergences"][d.input_hex] = d.to_dict()

    def _entry(self, key: tuple[str, str, str, str, str]) -> dict[str, Any]:
        if key not in self.checks:
            self.checks[key] = {
                "compared": 0,
                "tests": 0,
                "failed_tests": 0,
                "bits": np.zeros(0, dtype=np.uint64),
                "expected": np.zeros(0, dtype=np.uint8),
                "actual": np.zeros(0, dtype=np.uint8),
                "categories": np.zeros(0, dtype=np.uint8),
                "reasons": set(),
                "map16": None,  # InputMap16 of a 16-bit input dtype
            }
        return self.checks[key]

    @staticmethod
    def _merge_map(e: dict[str, Any], input_map: InputMap16 | None) -> None:
        if input_map is None:
            return
        if e["map16"] is None:
            e["map16"] = InputMap16.empty(input_map.input_dtype)
        e["map16"].merge(input_map)

    def add(self, key: tuple[str, str, str, str, str], rec: engine.Divergences, compared: int) -> None:
        e = self._entry(key)
        e["compared"] += compared
        self._merge_map(e, rec.input_map)
        if len(rec):
            cats = np.array([CAST_CATEGORIES.index(str(c)) for c in rec.categories], dtype=np.uint8)
            self._append(e, rec.bits.astype(np.uint64), rec.expected, rec.actual, cats)

    @staticmethod
    def _append(e: dict[str, Any], bits: np.ndarray, expected: np.ndarray, actual: np.ndarray, cats: np.ndarray) -> None:
        b = np.concatenate([e["bits"], bits])
        ex = np.concatenate([e["expected"], expected.astype(np.uint8)])
        ac = np.concatenate([e["actual"], actual.astype(np.uint8)])
        ca = np.concatenate([e["categories"], cats.astype(np.uint8)])
        _, first = np.unique(b, return_index=True)
        e["bits"], e["expected"], e["actual"], e["categories"] = b[first], ex[first], ac[first], ca[first]

    def note_decode_test(self, key: tuple[str, str, str], reason: str = "") -> None:
        """A decode property ran; ``reason``: the known upstream bug it is expected to fail by."""
        e = self.decodes.setdefault(key, {"checked": 0, "divergences": {}, "reasons": set()})
        if reason:
            e["reasons"].add(reason)

    def note_test(self, key: tuple[str, str, str, str, str], failed: bool, reason: str = "") -> None:
        e = self._entry(key)
        e["tests"] += 1
        e["failed_tests"] += int(failed)
        if reason:
            e["reasons"].add(reason)

    def to_state(self) -> list[dict[str, Any]]:
        """Plain data (bytes, ints, strings) for pytest-xdist's workeroutput."""
        decodes = [{"decode_key": list(k), "checked": e["checked"], "divergences": list(e["divergences"].values()),
                    "reasons": sorted(e["reasons"])} for k, e in self.decodes.items()]
        return decodes + [
            {
                "key": list(key),
                "compared": e["compared"],
                "tests": e["tests"],
                "failed_tests": e["failed_tests"],
                "bits": e["bits"].astype(np.uint64).tobytes(),
                "expected": e["expected"].tobytes(),
                "actual": e["actual"].tobytes(),
                "categories": e["categories"].tobytes(),
                "reasons": sorted(e["reasons"]),
                "map16": e["map16"].to_dict() if e["map16"] is not None else None,
            }
            for key, e in self.checks.items()
        ]

    def merge_state(self, state: Iterable[dict[str, Any]]) -> None:
        from fp8check.results import Divergence

        for item in state:
            if "decode_key" in item:
                self.add_decode(tuple(item["decode_key"]), item["checked"],  # type: ignore[arg-type]
                                [Divergence.from_dict(d) for d in item["divergences"]])
                for reason in item.get("reasons", ()):
                    self.note_decode_test(tuple(item["decode_key"]), reason)  # type: ignore[arg-type]
                continue
            key = tuple(item["key"])
            e = self._entry(key)  # type: ignore[arg-type]
            e["compared"] += item["compared"]
            e["tests"] += item["tests"]
            e["failed_tests"] += item["failed_tests"]
            e["reasons"].update(item["reasons"])
            if item.get("map16") is not None:
                self._merge_map(e, InputMap16.from_dict(item["map16"]))
            self._append(
                e,
                np.frombuffer(item["bits"], dtype=np.uint64),
                np.frombuffer(item["expected"], dtype=np.uint8),
                np.frombuffer(item["actual"], dtype=np.uint8),
                np.frombuffer(item["categories"], dtype=np.uint8),
            )

    def results(self, profiles_by_name: dict[str, Profile], cap: int | None = 1000) -> list[CheckResult]:
        from fp8check import formats, profiles

        out = []
        for key in sorted(self.checks):
            kernel, fmt_name, profile_name, input_dtype, device = key
            e = self.checks[key]
            fmt = formats.get(fmt_name)
            profile = profiles_by_name.get(profile_name) or profiles.get(profile_name)
            rec = engine.Divergences(fmt=fmt, profile=profile, input_dtype=input_dtype)
            rec.bits = e["bits"].astype(inputs.bits_dtype(input_dtype)).astype(np.uint64)
            rec.expected, rec.actual = e["expected"], e["actual"]
            rec.categories = np.array([CAST_CATEGORIES[i] for i in e["categories"]], dtype=object)
            result = CheckResult(
                kernel=kernel, format=fmt_name, profile=profile_name, passed=len(rec) == 0,
                checked=int(e["compared"]), categories=rec.counts(), divergences=rec.to_list(cap),
                kind="cast", input_dtype=input_dtype, device=device, seed=None,
                command=f"pytest properties --fp8check-kernel {kernel} --fp8check-format {fmt_name} "
                        f"--fp8check-profile {profile_name}" if ":" in kernel else "pytest properties",
                expected_failure="; ".join(sorted(e["reasons"])),
            )
            result.extra.update(
                tests=e["tests"], failed_tests=e["failed_tests"], listed=len(result.divergences),
                checked_means="inputs compared, summed over the properties run",
                profile_summary=profile.summary(fmt), profile_description=profile.description,
            )
            if e["map16"] is not None:
                result.extra["map16"] = e["map16"].to_dict()
            out.append(result)
        from fp8check.results import Divergence

        for (kernel, fmt_name, device), e in sorted(self.decodes.items()):
            divs = [Divergence.from_dict(d) for _, d in sorted(e["divergences"].items())]
            counts: dict[str, int] = {}
            for d in divs:
                counts[d.category] = counts.get(d.category, 0) + 1
            result = CheckResult(
                kernel=kernel, format=fmt_name, profile="exact", passed=not divs, checked=e["checked"],
                categories=counts, divergences=divs, kind="decode", input_dtype=fmt_name, device=device,
                command="pytest properties -k decodes_every_code",
                expected_failure="; ".join(sorted(e["reasons"])) if divs else "",
            )
            result.extra["checked_means"] = "codes decoded (input_hex: the code; expected/actual_hex: float32 bits)"
            out.append(result)
        return out


@dataclass(frozen=True)
class Target:
    """One kernel, format and input dtype, judged against ``profile``."""

    kernel: CastKernel
    fmt: Format
    input_dtype: str
    profile: Profile
    collector: Collector | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return f"{self.kernel.name}-{self.fmt.name}-{self.input_dtype}"

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.kernel.name, self.fmt.name, self.profile.name, self.input_dtype, self.kernel.device)

    def known(self, kind: str = "cast") -> tuple[KnownDivergence, ...]:
        return self.kernel.known_divergences(self.fmt, self.input_dtype, kind)

    def broad_known(self, hazards: Iterable[str] | None = None) -> KnownDivergence | None:
        """The known upstream bug that makes a property over ``hazards`` fail (None: all inputs)."""
        wanted = None if hazards is None else set(hazards)
        for k in self.known():
            if k.affects is not None:
                continue
            if wanted is None or k.hazards is None or wanted & k.hazards:
                return k
        return None

    def compare(self, bits: np.ndarray) -> engine.Divergences:
        """Cast ``bits`` and return the divergences not excused by a narrow known bug."""
        bits = np.asarray(bits).astype(inputs.bits_dtype(self.input_dtype))
        rec = engine.compare(self.kernel, self.fmt, self.profile, self.input_dtype, bits)
        if self.collector is not None:
            self.collector.add(self.key, rec, int(bits.size))
        for k in self.known():
            if k.affects is not None and len(rec):
                rec.drop(k.affects(rec.bits, self.input_dtype, self.fmt))
        return rec

    def check(self, bits: np.ndarray, what: str) -> None:
        """Fail (AssertionError) with the divergences found on ``bits``."""
        rec = self.compare(bits)
        if len(rec):
            raise AssertionError(self.message(rec, what))

    def message(self, rec: engine.Divergences, what: str, shown: int = 6) -> str:
        counts = ", ".join(f"{c} {n}" for c, n in rec.counts().items())
        lines = [
            f"{self.kernel.name} casting {self.input_dtype} to {self.fmt.name} diverges from profile "
            f"{self.profile.name!r} ({self.profile.summary(self.fmt)}) on {len(rec)} {what}: {counts}"
        ]
        for d in rec.to_list(shown):
            lines.append(
                f"  {d.category:<11} input {d.input_hex} ({d.input_value}): expected {d.expected_hex} "
                f"({d.expected_value}) [{engine.code_fields(int(d.expected_hex, 16), self.fmt)}], "
                f"got {d.actual_hex} ({d.actual_value}) [{engine.code_fields(int(d.actual_hex, 16), self.fmt)}]"
            )
        lines.append(f"  reproduce: fp8check explain / {self.command()}")
        return "\n".join(lines)

    def command(self) -> str:
        return (f"fp8check check {self.kernel.name} --format {self.fmt.name} --profile {self.profile.name} "
                f"--input-dtype {self.input_dtype}")


@dataclass(frozen=True)
class DecodeTarget:
    """One kernel decoding one format (all codes), compared with the exact values."""

    kernel: CastKernel
    fmt: Format
    collector: Collector | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return f"{self.kernel.name}-{self.fmt.name}"

    @property
    def decode_key(self) -> tuple[str, str, str]:
        return (self.kernel.name, self.fmt.name, self.kernel.device)

    def check(self) -> None:
        checked, wrong = engine.decode_check(self.kernel, self.fmt)
        if self.collector is not None:
            self.collector.add_decode(self.decode_key, checked, wrong)
        assert checked == self.fmt.code_count
        if wrong:
            raise AssertionError(
                f"{self.kernel.name} decodes {len(wrong)} {self.fmt.name} codes wrongly: " + "; ".join(
                    f"{d.input_hex} [{d.input_value}] -> {d.actual_value} (expected {d.expected_value})"
                    for d in wrong[:8]))


def targets_for(kernels: Iterable[CastKernel], *, input_dtypes: Iterable[str] | None = None,
                formats: Iterable[Format] | None = None, collector: Collector | None = None,
                profile: Profile | None = None) -> list[Target]:
    """Every (kernel, format, input dtype) a kernel supports, judged against what it claims."""
    wanted_dtypes = tuple(input_dtypes) if input_dtypes is not None else inputs.CAST_INPUT_DTYPES
    wanted_formats = None if formats is None else {f.name for f in formats}
    out = []
    for k in kernels:
        for f in k.formats:
            if wanted_formats is not None and f.name not in wanted_formats:
                continue
            if not k.supports(f):
                continue
            p = profile or k.profile_for(f)
            for d in wanted_dtypes:
                if d in k.input_dtypes:
                    out.append(Target(kernel=k, fmt=f, input_dtype=d, profile=p, collector=collector))
    return out


def exact_variant(profile: Profile) -> Profile:
    """``profile`` without its intermediate rounding (what a float64 cast should do)."""
    return dataclasses.replace(profile, name=f"{profile.name}-exact", intermediate=None,
                               overrides=tuple((f, tuple(c for c in ch if c[0] != "intermediate"))
                                               for f, ch in profile.overrides))

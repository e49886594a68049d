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

from fp8check import device_faults, inputs
from fp8check.casts import engine
from fp8check.formats import Format
from fp8check.casts.adapters import CastKernel
from fp8check.stacks import KnownDivergence
from fp8check.profiles import Profile
from fp8check.results import CheckResult

__all__ = ["Target", "DecodeTarget", "DeclaredTarget", "Collector", "targets_for", "hypothesis_settings", "HYPOTHESIS_PROFILES",
           "FNUZ", "OCP", "MX"]

FNUZ = frozenset({"e4m3fnuz", "e5m2fnuz"})
OCP = frozenset({"e4m3fn", "e5m2", "e2m1fn", "e2m3fn", "e3m2fn"})  # OFP8, and the OCP MX v1.0 FP4/FP6 elements
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
    """Every divergence the properties found, per check key, unique per input.

    The key is (kernel, format, profile, input dtype, device); each holds
    one :class:`~fp8check.casts.engine.Divergences` and the tests that fed
    it. Plain data (``to_state``/``merge_state``) so that pytest-xdist
    workers can send theirs to the controller.
    """

    def __init__(self) -> None:
        self.checks: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
        # Decodes: (kernel, format, device) -> {"checked": n, "divergences": {code: dict}, "reasons": set}
        self.decodes: dict[tuple[str, str, str], dict[str, Any]] = {}
        # Whole checks of declared kernels (quantizers, fused kernels, casts driven by the harness).
        self.whole: list[CheckResult] = []

    def add_result(self, result: CheckResult) -> None:
        self.whole.append(result)

    def add_decode(self, key: tuple[str, str, str], checked: int, divergences: list[Any]) -> None:
        e = self.decodes.setdefault(key, {"checked": 0, "divergences": {}, "reasons": set()})
        e["checked"] = max(e["checked"], checked)
        for d in divergences:
            e["divergences"][d.input_hex] = d.to_dict()

    def _entry(self, key: tuple[str, str, str, str, str], rec: engine.Divergences | None = None) -> dict[str, Any]:
        if key not in self.checks:
            self.checks[key] = {"rec": None, "tests": 0, "failed_tests": 0, "reasons": set(), "triton": {}}
        e = self.checks[key]
        if e["rec"] is None and rec is not None:
            e["rec"] = engine.Divergences(fmt=rec.fmt, profile=rec.profile, input_dtype=rec.input_dtype)
        return e

    def add(self, key: tuple[str, str, str, str, str], rec: engine.Divergences) -> None:
        self._entry(key, rec)["rec"].merge(rec)

    def note_triton(self, key: tuple[str, str, str, str, str], extra: dict[str, Any]) -> None:
        """What a declared cast's check found beyond divergent inputs: a Triton kernel's faults, its autotune
        configs' verdicts, a fault of the device (:mod:`fp8check.device_faults`) and the notes
        (``CheckResult.extra``), kept for the check's result."""
        t = self._entry(key)["triton"]
        if extra.get("device_fault") and not t.get("device_fault"):
            t["device_fault"] = dict(extra["device_fault"])
        t.setdefault("kernel_faults", []).extend(extra.get("kernel_faults", ()))
        if extra.get("triton_configs"):
            t["triton_configs"] = list(extra["triton_configs"])
        t.setdefault("notes", [])
        t["notes"] += [n for n in extra.get("notes", ()) if n not in t["notes"]]

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
        whole = [{"whole": r.to_dict()} for r in self.whole]
        return decodes + whole + [
            {"key": list(key), "tests": e["tests"], "failed_tests": e["failed_tests"], "reasons": sorted(e["reasons"]),
             "triton": e["triton"],
             "profile": e["rec"].profile.to_dict() if e["rec"] is not None else None,
             "divergences": e["rec"].to_state() if e["rec"] is not None else None}
            for key, e in self.checks.items()
        ]

    def merge_state(self, state: Iterable[dict[str, Any]]) -> None:
        from fp8check import formats
        from fp8check.results import Divergence

        for item in state:
            if "whole" in item:
                self.add_result(CheckResult.from_dict(item["whole"]))
                continue
            if "decode_key" in item:
                self.add_decode(tuple(item["decode_key"]), item["checked"],  # type: ignore[arg-type]
                                [Divergence.from_dict(d) for d in item["divergences"]])
                for reason in item.get("reasons", ()):
                    self.note_decode_test(tuple(item["decode_key"]), reason)  # type: ignore[arg-type]
                continue
            key = tuple(item["key"])
            e = self._entry(key)  # type: ignore[arg-type]
            e["tests"] += item["tests"]
            e["failed_tests"] += item["failed_tests"]
            e["reasons"].update(item["reasons"])
            self.note_triton(key, item.get("triton", {}))  # type: ignore[arg-type]
            if item["divergences"] is not None:
                rec = engine.Divergences.from_state(formats.get(key[1]), Profile.from_dict(item["profile"]), key[3],
                                                    item["divergences"])
                self.add(key, rec)  # type: ignore[arg-type]

    def results(self, cap: int | None = 1000) -> list[CheckResult]:
        out = []
        for key in sorted(self.checks):
            kernel, fmt_name, profile_name, input_dtype, device = key
            e = self.checks[key]
            rec = e["rec"]
            if rec is None:  # a test that ran no comparison
                continue
            command = (f"pytest --fp8check-kernel {kernel} --fp8check-format {fmt_name} "
                       f"--fp8check-profile {profile_name}" if ":" in kernel else "pytest properties")
            result = rec.result(kernel=kernel, checked=rec.checked_count, device=device, cap=cap, command=command)
            result.expected_failure = "; ".join(sorted(e["reasons"]))
            result.extra.update(tests=e["tests"], failed_tests=e["failed_tests"],
                                checked_means="inputs compared, summed over the properties run")
            if e["triton"]:
                from fp8check.declarations import add_faults

                add_faults(result, e["triton"].get("kernel_faults", ()))
                if e["triton"].get("triton_configs"):
                    result.extra["triton_configs"] = e["triton"]["triton_configs"]
                if e["triton"].get("device_fault"):
                    from fp8check.device_faults import DeviceFault

                    DeviceFault.from_dict(e["triton"]["device_fault"]).apply(result)
                for note in e["triton"].get("notes", ()):
                    result.add_note(note)
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
        return out + self.whole


@dataclass(frozen=True)
class Target:
    """One kernel, format and input dtype, judged against ``profile``."""

    kernel: CastKernel
    fmt: Format
    input_dtype: str
    profile: Profile
    collector: Collector | None = field(default=None, compare=False, repr=False)
    declaration: Any = field(default=None, compare=False, repr=False)  # a repository's declared kernel

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
        try:
            rec = engine.compare(self.kernel, self.fmt, self.profile, self.input_dtype, bits)
        except device_faults.DeviceFaultError as exc:  # the check's finding, in the JSON and report too
            if self.collector is not None:
                self.collector.add(self.key, engine.Divergences(fmt=self.fmt, profile=self.profile,
                                                                input_dtype=self.input_dtype))
                self.collector.note_triton(self.key, {"device_fault": exc.fault.to_dict()})
            raise
        if self.collector is not None:
            self.collector.add(self.key, rec)
        for k in self.known():
            if k.affects is not None and len(rec):
                rec.drop(k.affects(rec.bits, self.input_dtype, self.fmt))
        return rec

    def check(self, bits: np.ndarray, what: str) -> None:
        """Fail (AssertionError) with the divergences found on ``bits``."""
        __tracebackhide__ = True  # pytest: the message is the report, fp8check's own frames are noise
        rec = self.compare(bits)
        if len(rec):
            raise AssertionError(self.message(rec, what))

    def message(self, rec: engine.Divergences, what: str, shown: int = 6) -> str:
        """What ``fp8check check`` prints for these divergences, under one line saying which inputs they are."""
        from fp8check.terminal.divergences import result_text

        head = (f"{self.kernel.name} casting {self.input_dtype} to {self.fmt.name} diverges from profile "
                f"{self.profile.name!r} ({self.profile.summary(self.fmt)}) on {len(rec)} {what}")
        result = rec.result(kernel=self.kernel.name, checked=len(rec), device=self.kernel.device, cap=shown,
                            command=self.command())
        return head + "\n" + result_text(result, header=False)

    def command(self) -> str:
        if self.declaration is not None:
            return self.declaration.command(self.input_dtype)
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


@dataclass(frozen=True)
class DeclaredTarget:
    """A repository's declared kernel (and, for casts and fused kernels, one input dtype), checked whole:
    the kernel driven as real callers drive it (:func:`fp8check.declarations.run_declaration`)."""

    declaration: Any
    input_dtype: str | None = None
    collector: Collector | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return self.declaration.name + (f"-{self.input_dtype}" if self.input_dtype else "")

    @property
    def fmt_name(self) -> str:
        return self.declaration.fmt_name

    def check(self, *, max_examples: int = 60) -> CheckResult:
        """Run the check; fail (AssertionError) with what ``fp8check check`` prints. A declaration whose
        ``requires`` cannot be imported skips; one with a ``known_divergence`` fails outright (``pytest.fail``,
        not an AssertionError) on a divergence of another category."""
        from fp8check.declarations import missing_requirement
        from fp8check.errors import KernelError
        from fp8check.loader import no_driver_hint, without_triton
        from fp8check.terminal.divergences import result_text

        import pytest

        decl = self.declaration
        if decl.max_examples is not None:  # a slow kernel (an interpreted Triton one) may declare fewer
            max_examples = decl.max_examples
        why = missing_requirement(decl)
        if why:
            pytest.skip(why)
        known = decl.known_divergence
        unjudged = ""
        try:
            result = self._run(max_examples)
        except ImportError as exc:  # Triton not installed: docs/kernel-repo.md says these tests skip
            why = without_triton(exc)
            if not why:
                raise
            pytest.skip(f"{decl.label}: {why}")
        except KernelError as exc:  # no call could be judged (every one refused, or none could be made): one line
            beyond = (f"diverges beyond its known divergence ({', '.join(known['categories'])}: {known['reason']}): "
                      if known is not None else "")
            told = no_driver_hint(str(exc), 'declare it with triton-target = "sm90" (or gfx942, sm100, ...) to '
                                            "check it in fp8check's faithful interpreter")
            unjudged = f"{decl.label}: {beyond}{told}"
        if unjudged:  # failed outside the handler: one message, not the kernel's error again as its context
            pytest.fail(unjudged, pytrace=False)
        if known is not None and not result.passed:
            other = sorted(c for c, n in result.categories.items() if n and c not in known["categories"])
            if other:
                pytest.fail(f"diverges beyond its known divergence ({', '.join(known['categories'])}: "
                            f"{known['reason']}) in {', '.join(other)}\n" + result_text(result), pytrace=False)
            # within its known categories: the AssertionError its strict xfail expects
            raise AssertionError("\n" + result_text(result) + f"\n  or: pytest -k '{self.id}'")
        if not result.passed:  # the report is the message: no source of fp8check's own above it
            pytest.fail(result_text(result) + f"\n  or: pytest -k '{self.id}'", pytrace=False)
        return result

    def _run(self, max_examples: int) -> CheckResult:
        from fp8check.declarations import run_cast_declaration, run_declaration

        decl = self.declaration
        if decl.kind == "cast" and not decl.isolate:
            # One check per kernel, format and input dtype: the properties' record and this one merge.
            result, record = run_cast_declaration(decl, input_dtype=self.input_dtype, max_examples=max_examples)
            if self.collector is not None:
                key = (decl.name, record.fmt.name, record.profile.name, record.input_dtype, decl.device)
                self.collector.add(key, record)
                if decl.triton_target or result.extra.get("device_fault"):
                    self.collector.note_triton(key, result.extra)
                self.collector.note_test(key, failed=not result.passed)
        else:
            result = run_declaration(decl, input_dtype=self.input_dtype, max_examples=max_examples)
            if self.collector is not None:
                self.collector.add_result(result)
        return result


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

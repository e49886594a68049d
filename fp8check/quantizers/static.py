"""Static-scale quantizers: ``kernel(x, scale) -> fp8 codes``, the scale an input.

The kernel receives a 2-D tensor ``x`` (float32, float16 or bfloat16) and a
float32 tensor ``scale`` of shape (1,), and applies the scale as declared
(``apply``): ``divide`` (x / scale), ``multiply-reciprocal`` (x * fl(1/scale),
vLLM's and aiter's static kernels) or ``multiply`` (x * scale). The reference
computes the same float32 operations and encodes under ``profile``. A Triton
kernel's own ``/`` is not a correctly rounded division on every target (sm90
compiles it to div.full.f32, the hardware reciprocal and one multiply):
``target-divide`` (``x / scale``) and ``multiply-target-reciprocal``
(``x * (1.0 / scale)``) divide as the Triton target the check runs under
does (:func:`fp8check.triton.ops.divide_f32`: sm90 through its measured
reciprocals, AMD correctly rounded; where the target leaves a quotient
unknown, its codes are target-dependent, not divergences); without a Triton
target they are ``divide`` and ``multiply-reciprocal``.

The scales: the one given, or every boundary a kernel can trip on (powers of
two and their float32 neighbours from the subnormal 2^-149 to 2^127, tiny
(1e-30) and huge (1e30, float32's max) ones and scales of the form amax/448)
and ``max_examples`` more drawn by the Hypothesis strategy
:func:`static_scales` (any positive finite float32, subnormals included).
For each, float16 and bfloat16 inputs are swept whole (all 65,536 values);
float32 inputs are every fp8 value and rounding midpoint times the scale, their
float32 neighbours, the special values and random ones. Each ``codes``
divergence shows the input value and says which side is exact (:mod:`.exactness`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fp8check import checking, device_faults
from fp8check.errors import InvalidValueError, KernelError
from fp8check.formats import get as get_format
from fp8check.profiles import get as get_profile
from fp8check.quantizers import exactness
from fp8check.quantizers.recipe import TARGET_OPS, untargeted_note
from fp8check.quantizers.scaling import quotient32
from fp8check.quantizers.edge_cases import nan_code_table
from fp8check.reference import decode, encode
from fp8check.results import CheckResult, Divergence

__all__ = ["check_static_quantizer", "boundary_scales", "static_scales", "check_options", "APPLY"]

APPLY = ("divide", "multiply-reciprocal", "multiply", *TARGET_OPS)


def check_options(apply: Any, scale: Any, label: str) -> None:
    if (apply or "divide") not in APPLY:
        raise InvalidValueError(f"{label}: apply = {apply!r}: use one of {', '.join(APPLY)}")
    if scale is not None and not (np.isfinite(np.float32(scale)) and np.float32(scale) > 0):
        raise InvalidValueError(f"{label}: scale = {scale!r}: a static scale must be a positive finite float32")


def boundary_scales() -> np.ndarray:
    """Scales at every boundary: powers of two (subnormal to 2^127) and their neighbours, tiny, huge, amax/448."""
    out = [2.0 ** -149, 2.0 ** -140, 2.0 ** -127, 1e-30, 1e30, float(np.finfo(np.float32).max), 1.0 / 448, 3.0 / 448]
    for e in (-126, -100, -20, -9, -1, 0, 1, 7, 20, 100, 127):
        p = np.float32(2.0 ** e)
        out += [float(p), float(np.nextafter(p, np.float32(0))), float(np.nextafter(p, np.float32(np.inf)))]
    s = np.unique(np.array(out, dtype=np.float32))
    return s[np.isfinite(s) & (s > 0)]


def static_scales() -> Any:
    """A Hypothesis strategy of static scales: a boundary scale (:func:`boundary_scales`) or any positive finite
    float32, subnormals included, as often as each other."""
    from hypothesis import strategies as st

    tiny = float(np.float32(2.0 ** -149))
    return st.one_of(st.sampled_from([float(v) for v in boundary_scales()]),
                     st.floats(min_value=tiny, max_value=float(np.finfo(np.float32).max), width=32,
                               allow_subnormal=True))


def _drawn_scales(max_examples: int, seed: int) -> list[float]:
    """``max_examples`` scales drawn from :func:`static_scales` (reproducible for a seed)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from fp8check.strategies import without_local_constants

    drawn: list[float] = []

    @hypothesis_seed(seed)
    @settings(max_examples=max_examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(static_scales())
    def draw(s: float) -> None:
        drawn.append(s)

    with without_local_constants():  # the same seed, the same scales, whatever the user's modules hold
        draw()
    return drawn


def _applied(x32: np.ndarray, s: np.float32, apply: str, target: str | None) -> tuple[np.ndarray, np.ndarray]:
    """``x32`` with the scale ``s`` applied as ``apply`` says, in float32, and the mask of the elements known bit for
    bit (all but those whose quotient the Triton ``target`` leaves unknown)."""
    if apply == "multiply":
        with np.errstate(all="ignore"):
            return (x32 * s).astype(np.float32), np.ones(x32.shape, dtype=bool)
    return quotient32(x32, s, apply, target)


def _inputs(fmt: Any, dtype: str, s: np.float32, apply: str, rng: np.random.Generator) -> np.ndarray:
    import ml_dtypes

    if dtype in ("float16", "bfloat16"):
        bits = np.arange(1 << 16, dtype=np.uint16)
        return (bits.view(np.float16) if dtype == "float16" else bits.view(ml_dtypes.bfloat16)).astype(np.float32)
    v = decode(np.arange(256), fmt)
    pos = np.unique(v[np.isfinite(v) & (v >= 0)])
    grid = np.concatenate([pos, (pos[:-1] + pos[1:]) / 2, [pos[-1] * 1.0625, pos[-1] * 2]])
    with np.errstate(all="ignore"):
        unit = 1.0 / float(s) if apply == "multiply" else float(s)
        base = (grid * unit).astype(np.float32)
        near = np.concatenate([base, np.nextafter(base, np.float32(0)), np.nextafter(base, np.float32(np.inf))])
        rand = (rng.standard_normal(2048) * pos[-1] / 4 * unit).astype(np.float32)
    special = np.array([0.0, np.inf, np.nan, 2.0 ** -149, np.finfo(np.float32).max], np.float32)
    x = np.concatenate([near, rand, special])
    return np.concatenate([x, -x]).astype(np.float32)


def _codes_of(out: Any, n: int, name: str) -> np.ndarray:
    import torch

    if isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor) or out.element_size() != 1:
        raise KernelError(f"kernel {name} returned {type(out).__name__}; a static quantizer returns fp8 codes")
    arr = out.detach().cpu().contiguous().view(torch.uint8).numpy().reshape(-1)
    if arr.size != n:
        raise KernelError(f"kernel {name} returned {arr.size} codes for {n} inputs")
    return arr


@dataclass(frozen=True, kw_only=True)
class StaticOptions(checking.CheckOptions):
    """The parameters of :func:`check_static_quantizer` (its docstring says what each does), format and profile
    resolved."""

    fmt: Any
    profile: Any
    apply: str = "divide"
    scale: float | None = None
    input_dtype: str = "float32"
    max_examples: int = 10
    triton_target: str | None = None  # the target whose / the target-* applies take


def check_static_quantizer(kernel: Callable[..., Any], *, format: object, profile: object = "satfinite",
                           apply: str = "divide", scale: float | None = None, input_dtype: str = "float32",
                           device: str = "cpu", seed: int = 0, name: str | None = None, ulps: int = 0,
                           cap: int | None = 100, supports: Any = None, max_examples: int = 10,
                           triton_target: str | None = None) -> CheckResult:
    """Check ``kernel(x, scale) -> codes`` on ``input_dtype`` inputs; a :class:`CheckResult` of kind
    ``static_quantize`` labelled with the input dtype, each divergence showing the input. The scales: ``scale``
    alone when given, else every boundary scale and ``max_examples`` drawn by :func:`static_scales`.
    ``triton_target``: the Triton target the kernel runs under, whose ``/`` the ``target-*`` applies take
    (None: a correctly rounded division)."""
    f, p = get_format(format), get_profile(profile)
    p.resolve(f)
    check_options(apply, scale, name or "kernel")
    options = StaticOptions(name=checking.kernel_name(kernel, name), device=device, seed=seed, cap=cap, ulps=ulps,
                            supports=supports, fmt=f, profile=p, apply=apply, scale=scale, input_dtype=input_dtype,
                            max_examples=max_examples, triton_target=triton_target)
    rng = np.random.default_rng(seed)
    if scale is not None:
        scales = np.array([scale], np.float32)
    else:
        drawn = np.array(_drawn_scales(max_examples, seed) if max_examples > 0 else [], np.float32)
        scales = np.unique(np.concatenate([boundary_scales(), drawn]).astype(np.float32))
    run = StaticRun(kernel, options)
    for s in scales:
        run.one(np.float32(s), rng)
    return run.result(scales)


class StaticRun:
    """One check of a static-scale quantizer in progress: the kernel, its options, and what the scales so far
    found."""

    def __init__(self, kernel: Callable[..., Any], options: StaticOptions) -> None:
        self.kernel, self.options = kernel, options
        self.tally = checking.Tally(counts={"codes": 0, "nonfinite": 0, "scale": 0})
        self.verdicts: list[np.ndarray] = []  # the exactness verdicts of the codes divergences
        self.nan_tab = nan_code_table(options.fmt)
        self.values = decode(np.arange(256), options.fmt)
        self.dependent = 0  # codes whose quotient the Triton target leaves unknown (target-dependent)

    def call(self, x32: np.ndarray, s: np.float32) -> np.ndarray:
        """The kernel's codes of ``x32`` (in rows of 256, padded) under the scale ``s``."""
        import torch

        o = self.options
        cols = 256
        padded = np.zeros(-(-x32.size // cols) * cols, np.float32)
        padded[:x32.size] = x32
        xt = torch.from_numpy(padded.reshape(-1, cols)).to(getattr(torch, o.input_dtype)).to(o.device)
        st = torch.tensor([float(s)], dtype=torch.float32, device=o.device)
        try:
            out = self.kernel(xt, st)
            device_faults.settle(o.device)  # a fault on the device is this call's
        except Exception as exc:
            device_faults.check_call(exc, device=o.device, call=f"scale {float(s)!r} ({o.input_dtype} input of shape "
                                     f"{tuple(xt.shape)})", kernel=o.name)
            raise KernelError(f"kernel {o.name} raised {type(exc).__name__} with scale {float(s)!r}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
        return _codes_of(out, padded.size, o.name)[:x32.size]

    def one(self, s: np.float32, rng: np.random.Generator) -> None:
        """The inputs for the scale ``s``, the kernel's codes of them against the declared arithmetic's."""
        from fp8check.casts.fused import allowed_codes

        o, t = self.options, self.tally
        x32 = _inputs(o.fmt, o.input_dtype, s, o.apply, rng)
        actual = self.call(x32, s)
        y, known = _applied(x32, s, o.apply, o.triton_target)
        expected = encode(y, o.fmt, o.profile)
        same = (expected == actual) | (self.nan_tab[expected] & self.nan_tab[actual]) | ~known
        if o.ulps:
            same |= allowed_codes(y, actual, o.fmt, o.profile, o.ulps)
        bad = np.flatnonzero(~same)
        self.dependent += int((~known).sum())
        t.checked += int(known.sum())
        if not bad.size:
            return
        finite = np.isfinite(x32[bad])
        t.counts["codes"] += int(finite.sum())
        t.counts["nonfinite"] += int((~finite).sum())
        fin = bad[finite]
        v = exactness.verdicts(x32[fin], np.full(fin.size, s, np.float32), expected[fin], actual[fin],
                               TARGET_OPS.get(o.apply, o.apply), o.fmt, o.profile, self.nan_tab)
        self.verdicts.append(v)
        for i in bad[:4]:
            t.found.append(checking.Found((0, 0, 0), self.divergence(x32, y, expected, actual, s, i, fin, v)))

    def divergence(self, x32: np.ndarray, y: np.ndarray, expected: np.ndarray, actual: np.ndarray, s: np.float32,
                   i: int, fin: np.ndarray, v: np.ndarray) -> Divergence:
        o = self.options
        xi = float(x32[i])
        bits = int(np.float32(xi).view(np.uint32))
        hex_in = f"{bits:08X}" if o.input_dtype == "float32" else (
            f"{bits >> 16:04X}" if o.input_dtype == "bfloat16" else f"{int(np.float16(xi).view(np.uint16)):04X}")
        tail = ""
        if np.isfinite(xi):
            j = int(np.searchsorted(fin, i))
            tail = "; " + exactness.verdict_text(int(v[j]), xi, float(s), TARGET_OPS.get(o.apply, o.apply), o.fmt,
                                                 o.profile, actual=int(actual[i]))
        return Divergence(
            category="codes" if np.isfinite(xi) else "nonfinite", input_hex=hex_in,
            expected_hex=f"{int(expected[i]):02X}", actual_hex=f"{int(actual[i]):02X}", input_dtype=o.input_dtype,
            input_value=repr(xi), expected_value=repr(float(self.values[expected[i]])),
            actual_value=repr(float(self.values[actual[i]])),
            detail=f"scale {float(s)!r} ({o.apply}), the value before the cast {float(y[i])!r}{tail}")

    def result(self, scales: np.ndarray) -> CheckResult:
        o, t, f, p = self.options, self.tally, self.options.fmt, self.options.profile
        found = [x.divergence for x in t.found]
        limit = len(found) if o.cap is None else o.cap
        cmd = (f"fp8check check {o.name} --kind static --format {f.name} --profile {p.name} --apply {o.apply} "
               f"--input-dtype {o.input_dtype}" + (f" --scale {float(o.scale)!r}" if o.scale is not None else "")
               + (f" --ulps {o.ulps}" if o.ulps else ""))
        result = CheckResult(kernel=o.name, format=f.name, profile=p.name, passed=t.passed,
                             checked=t.checked, categories=t.counts, divergences=found[:limit], kind="static_quantize",
                             input_dtype=o.input_dtype, device=o.device, seed=o.seed, command=cmd,
                             target_dependent=self.dependent,
                             extra={"recipe": {"name": f"static scale ({o.apply})"},
                                    "recipe_summary": (f"(x, scale) -> codes: {o.apply} by the given scale, "
                                                       f"{f.name} {p.name}; {scales.size} scales"),
                                    "cases": int(scales.size), "hazards": [], "ulps": o.ulps})
        if o.apply in TARGET_OPS and o.triton_target is None:
            result.add_note(untargeted_note(f'apply = "{o.apply}"'))
        if self.verdicts:
            tallied = exactness.count(np.concatenate(self.verdicts))
            result.extra["exactness"] = tallied.to_dict()
            if tallied.kernel_exact:
                result.add_note(f"{tallied.kernel_exact:,} of {t.counts['codes']:,} codes divergences have the "
                                "kernel's code the correctly rounded value where the declared arithmetic's is not: "
                                "the kernel is more exact than declared")
        return result

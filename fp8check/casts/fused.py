"""Fused kernels: FP8 codes that follow other arithmetic (RMSNorm + cast, scale + cast, SiLU·mul + cast).

A fused kernel ``kernel(x, *args)`` returns FP8 codes of values it computed
itself; its author gives a *pre-cast reference* ``reference(x, *args)``
returning those values just before the cast (float32 or float64). The codes
must equal the reference's values encoded under the claimed profile, bit for
bit. Where the author declares that the arithmetic before the cast may differ
by up to ``ulps`` units in the last place of the pre-cast dtype, a code
passes when it is one that some value within that interval encodes to:
encoding is monotone, so those are the codes of the interval's two ends and
every code whose value lies strictly between them. Saturation, NaN, -0,
fnuz and rounding-policy bugs stay exact failures (no value within a few
ulps of 1000.0 encodes to 448, and no tiny negative to fnuz 0x80), while a
different summation order passes.

The inputs: 2-D activations of many shapes and layouts (see
:mod:`fp8check.casts.harness`), whose values cover the format's hazards
scaled into ordinary magnitudes and also plain normal draws, rows with
NaN, ±Inf, zeros and huge values, one large tensor called twice (the
second call must give the same bytes); ``args(x)`` gives the other
arguments for each input. The kernel always receives a private copy: a
write to ``x`` is an ``in_place`` divergence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fp8check import brackets, checking, device_faults, hazards, inputs, reference
from fp8check.casts import harness
from fp8check.casts.adapters.kernel import codes_from_output
from fp8check.casts.engine import DEFAULT_CAP, Divergences, _one_line
from fp8check.errors import KernelCallError, KernelOutputError
from fp8check.formats import Format, get as get_format
from fp8check.profiles import Profile, get as get_profile
from fp8check.results import CheckResult, Divergence

__all__ = ["check_fused", "allowed_codes"]

_SHAPES = ((1, 1), (3, 64), (7, 129), (16, 1024), (1, 4099), (33, 257))


def _step(y: np.ndarray, k: int) -> np.ndarray:
    """``y`` moved ``k`` ulps of its own dtype (k < 0: down), through ±0 and at most to ±Inf; NaN and ±Inf stay."""
    width = y.dtype.itemsize * 8
    uint = {32: np.uint32, 64: np.uint64}[width]
    sign_bit = uint(1) << uint(width - 1)
    inf_bits = np.array([np.inf], dtype=y.dtype).view(uint)[0]
    u = y.view(uint)
    mag = (u & ~sign_bit).astype(np.int64)
    moved = np.where((u & sign_bit) != 0, -mag, mag) + k  # a monotone line through ±0
    out_mag = np.minimum(np.abs(moved), np.int64(inf_bits)).astype(uint)
    out = (out_mag | np.where(moved < 0, sign_bit, uint(0))).view(y.dtype)
    return np.where(np.isfinite(y), out, y)


def allowed_codes(y: np.ndarray, actual: np.ndarray, fmt: Format, profile: Profile, ulps: int) -> np.ndarray:
    """Mask of the ``actual`` codes that some value within ``ulps`` of ``y`` encodes to under ``profile``."""
    exact = reference.encode(y, fmt, profile)
    ok = actual == exact
    if ulps <= 0:
        return ok
    lo, hi = reference.encode(_step(y, -ulps), fmt, profile), reference.encode(_step(y, ulps), fmt, profile)
    ok |= (actual == lo) | (actual == hi)
    table = reference.decode_table(fmt)
    with np.errstate(invalid="ignore"):
        vlo, vhi, va = table[lo], table[hi], table[actual.astype(np.intp)]
        finite_ends = np.isfinite(vlo) & np.isfinite(vhi)
        between = finite_ends & np.isfinite(va) & (va > np.minimum(vlo, vhi)) & (va < np.maximum(vlo, vhi))
    # A zero strictly inside is produced only where the interval has values of both signs.
    zero = between & (va == 0)
    ok |= between & ~zero
    ok |= zero & (np.minimum(vlo, vhi) < 0) & (np.maximum(vlo, vhi) > 0)
    return ok


def _activations(rng: np.random.Generator, fmt: Format, dtype: str, hazard: np.ndarray) -> list[np.ndarray]:
    """2-D inputs: hazard values and normal draws at many scales, rows of specials, many shapes (overflow to
    Inf in a 16-bit dtype is intended: no RuntimeWarning reaches the user's warnings summary)."""
    with np.errstate(all="ignore"):
        return _activations_drawn(rng, fmt, dtype, hazard)


def _activations_drawn(rng: np.random.Generator, fmt: Format, dtype: str, hazard: np.ndarray) -> list[np.ndarray]:
    hz = inputs.from_bits(hazard, dtype).astype(np.float32)
    hz = hz[np.isfinite(hz)]
    out = []
    for shape in _SHAPES:
        x = rng.standard_normal(shape).astype(np.float32) * np.float32(10.0 ** rng.integers(-3, 3))
        if hz.size:
            flat = x.reshape(-1)
            k = min(flat.size, 64)
            flat[-k:] = hz[rng.integers(0, hz.size, k)] / np.float32(max(float(fmt.max), 1.0))
        out.append(x)
    specials = rng.standard_normal((8, 64)).astype(np.float32)
    specials[0, 3], specials[1, 5], specials[2, 7] = np.nan, np.inf, -np.inf
    specials[3] = 0.0
    specials[4, :] = -0.0
    specials[5, 9] = 1e30
    specials[6] *= 1e-30
    specials[7, 0] = 3e38
    out.append(specials)
    spikes = np.zeros((4, 4099), np.float32)  # one large value per row: normalisations peak there
    spikes[np.arange(4), rng.integers(0, 4099, 4)] = np.float32([1.0, -3.0, 1e20, -1e-20])
    out.append(spikes)
    scaled = rng.standard_normal((64, 256)).astype(np.float32)
    out.extend(scaled * np.float32(s) for s in (1e-6, 1e-2, 1e2, 1e4))
    return [inputs.from_bits(inputs.to_bits(x.astype(inputs.numpy_dtype(dtype)), dtype), dtype) for x in out]


@dataclass(frozen=True, kw_only=True)
class FusedOptions(checking.CheckOptions):
    """The parameters of :func:`check_fused` (its docstring says what each does), format and profile resolved."""

    fmt: Format
    profile: Profile
    reference_fn: Callable[..., Any]
    args: Any = None
    input_dtype: str = "float32"
    thorough: bool = True


def check_fused(kernel: Callable[..., Any], *, reference_fn: Callable[..., Any], format: object,
                profile: object = "ieee", args: Any = None, ulps: int = 0, input_dtype: str = "float32",
                device: str = "cpu", seed: int = 0, name: str | None = None, cap: int | None = DEFAULT_CAP,
                supports: harness.Supports | None = None, thorough: bool = True) -> CheckResult:
    """Check the fused kernel ``kernel(x, *args)`` against ``reference_fn(x, *args)`` (values before its cast).

    ``args``: a tuple of the other arguments, or a function of ``x`` giving
    one (called on a private copy of each input), or None. ``ulps``: how far
    the kernel's arithmetic before the cast may stray from the reference's,
    in ulps of the reference's dtype. Returns a cast
    :class:`~fp8check.results.CheckResult` whose inputs are the pre-cast
    values.
    """
    f, p = get_format(format), get_profile(profile)
    p.resolve(f)
    options = FusedOptions(name=checking.kernel_name(kernel, name), device=device, seed=seed, cap=cap, ulps=ulps,
                           supports=supports or harness.Supports(), fmt=f, profile=p, reference_fn=reference_fn,
                           args=args, input_dtype=input_dtype, thorough=thorough)
    run = FusedRun(kernel, options)
    for number, (layout, x, condition) in enumerate(_fused_calls(options), 1):
        run.one(number, layout, x, condition)
    return run.result()


def _fused_calls(o: FusedOptions) -> list[tuple[str, np.ndarray, str]]:
    """(layout, input, condition) of every call: the activations, and with ``thorough`` two of them in
    non-contiguous layouts and a large input called twice (the same bytes)."""
    rng = np.random.default_rng(o.seed)
    xs = _activations(rng, o.fmt, o.input_dtype, hazards.all_hazard_bits(o.fmt, o.input_dtype))
    calls = [("contiguous", x, "") for x in xs]
    if o.thorough:
        two_d = [x for x in xs if x.shape[0] > 1 and x.shape[1] > 1][:2]
        calls += [(lay, x, f"only for non-contiguous input ({lay})") for x in two_d
                  for lay in ("transposed", "strided", "offset")]
        side = math.isqrt(harness.large_numel(o.device, gpu=1 << 24)[0])
        big = rng.standard_normal((side, side)).astype(np.float32) * np.float32(3.0)
        calls += [("contiguous", big.astype(inputs.numpy_dtype(o.input_dtype)),
                   f"only for a large input ({side}x{side})")] * 2  # called twice: the same bytes
    return calls


def _clones(values: tuple[Any, ...]) -> list[Any]:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


class FusedRun:
    """One check of a fused kernel in progress: the kernel, its options, and what the calls so far found
    (element divergences in a cast's :class:`~fp8check.casts.engine.Divergences` record, the rest in a tally)."""

    def __init__(self, kernel: Callable[..., Any], options: FusedOptions) -> None:
        self.kernel, self.options = kernel, options
        self.tally = checking.Tally(counts={})
        self.record: Divergences | None = None
        self.pre_dtype: str | None = None  # the reference's dtype (the first call's)
        self.previous: dict[int, np.ndarray] = {}  # the codes of the last call on each input
        self.dependent = brackets.Tally()

    def arguments(self, x_private: Any) -> tuple[Any, ...]:
        args = self.options.args
        if args is None:
            return ()
        return tuple(args(x_private)) if callable(args) else tuple(args)

    def reference(self, x: np.ndarray, x_ref: Any, a: tuple[Any, ...]) -> np.ndarray:
        """The reference's values before the cast (float32 or float64)."""
        import torch

        y = self.options.reference_fn(x_ref.clone(), *_clones(a))
        y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if y.dtype not in (np.float32, np.float64):
            y = y.astype(np.float32)
        if tuple(y.shape) != tuple(x.shape):
            raise KernelOutputError(f"the pre-cast reference returned shape {tuple(y.shape)} for an input of shape "
                                    f"{tuple(x.shape)}")
        return y

    def one(self, number: int, layout: str, x: np.ndarray, condition: str) -> None:
        """Call the kernel on ``x`` laid out as ``layout`` (inside its declared domain) and compare its codes."""
        o = self.options
        if not o.supports.allows_shape(x.shape, layout):
            return
        describe = f"{o.input_dtype} input of shape {x.shape}, {layout}, call {number}"
        x_ref = harness.to_torch(np.ascontiguousarray(x), o.device)
        a = self.arguments(x_ref.clone())
        y = self.reference(x, x_ref, a)
        self.pre_dtype = self.pre_dtype or y.dtype.name
        if self.record is None:
            self.record = Divergences(fmt=o.fmt, profile=o.profile, input_dtype=self.pre_dtype)
        base_np, view = harness.layout_base(np.ascontiguousarray(x), layout)
        base = harness.to_torch(base_np, o.device)
        snapshot = base.clone()
        try:
            # under a faithful Triton target with bracketed instructions: rn, lo and hi runs on the input
            outs, op_names = brackets.runs_on(lambda xx: codes_from_output(
                self.kernel(xx, *_clones(a)), tuple(x.shape), o.fmt, o.name).reshape(-1), view(base))
            device_faults.settle(o.device)  # a fault on the device is this call's
        except Exception as exc:
            device_faults.check_call(exc, device=o.device, call=describe, kernel=o.name)
            refused = self.tally.refuse(describe, _one_line(exc), declared=o.supports.declared,
                                        input_dtype=o.input_dtype, describe=describe)
            if refused is not None:
                self.record.add_call("refused", 1, refused)
            return
        self.side_effects(x, harness.mutation(snapshot, base), outs[0], describe)
        self.compare(y, outs, op_names, describe, condition)

    def side_effects(self, x: np.ndarray, moved: Any, codes: np.ndarray, describe: str) -> None:
        """A write the kernel made to its input, and a repeated call that gave other codes than the last."""
        rec, dtype = self.record, self.options.input_dtype
        if moved is not None:
            changed, before, after = moved
            rec.add_call("in_place", changed, Divergence(
                category="in_place", input_hex=f"{before:#x}", expected_hex=f"{before:#x}", actual_hex=f"{after:#x}",
                input_dtype=dtype, detail=f"the kernel wrote {changed:,} elements of its input",
                condition=describe))
        key = id(x)
        if key in self.previous:
            differ = np.flatnonzero(self.previous[key] != codes)
            if differ.size:
                i = int(differ[0])
                rec.add_call("nondeterministic", int(differ.size), Divergence(
                    category="nondeterministic", input_hex="-", expected_hex=f"0x{int(self.previous[key][i]):02x}",
                    actual_hex=f"0x{int(codes[i]):02x}", input_dtype=dtype,
                    detail=f"a repeated call on an identical copy gave {differ.size:,} other codes",
                    condition=describe))
        self.previous[key] = codes

    def compare(self, y: np.ndarray, outs: list[Any], op_names: tuple[str, ...], describe: str,
                condition: str) -> None:
        """The codes against the reference's values encoded (an allowed code counts as the reference's)."""
        f, p, ulps, pre_dtype = self.options.fmt, self.options.profile, self.options.ulps, self.pre_dtype
        codes = outs[0]
        with np.errstate(all="ignore"):  # the reference's and the comparison's Inf/NaN arithmetic is intended
            yf = y.reshape(-1).astype(pre_dtype)
            ok = allowed_codes(yf, codes, f, p, ulps)
            want = reference.encode(yf, f, p)
        expected = np.where(ok, codes, want)  # an allowed code counts as the reference's
        ybits = inputs.to_bits(yf, pre_dtype)
        if len(outs) > 1:
            cands = [codes] + [np.asarray(o).reshape(-1) for o in outs[1:]]
            # target-dependent: the runs differ and one of them gives an allowed code (or the reference's)
            differ = np.logical_or.reduce([c != codes for c in cands[1:]])
            with np.errstate(all="ignore"):
                fine = np.logical_or.reduce([allowed_codes(yf, c, f, p, ulps) | (c == want) for c in cands])
            dependent = differ & fine
            codes = np.where(dependent, want, codes)
            expected = np.where(dependent, want, expected)
            self.dependent.add(ybits, lambda i: Divergence(
                category="target_dependent", input_hex=inputs.hex_bits(int(ybits[i]), pre_dtype),
                expected_hex=f"0x{int(expected[i]):02x}", actual_hex=f"0x{int(cands[0][i]):02x}",
                input_dtype=pre_dtype, input_value=inputs.describe(int(ybits[i]), pre_dtype),
                detail=(f"{describe}, element {i:,}: correctly rounded {', '.join(op_names)}: 0x{int(cands[0][i]):02x}; "
                        f"low end 0x{int(cands[1][i]):02x}; high end 0x{int(cands[2][i]):02x}")), dependent, op_names)
        self.record.add(ybits, expected, codes, condition, record_map=False)
        self.tally.checked += yf.size

    def result(self) -> CheckResult:
        o, t = self.options, self.tally
        if self.record is None:
            raise KernelCallError(f"{o.name}: every call was refused or outside the declared domain"
                                  + (f" ({t.refusals[0].error})" if t.refusals else ""))
        if t.checked == 0 and t.refusals:
            raise KernelCallError(f"{o.name} raised on every input: {t.refusals[0].error}")
        result = self.record.result(kernel=o.name, checked=t.checked, device=o.device, seed=o.seed, cap=o.cap,
                                    command=f"fp8check check {o.name} --kind fused --format {o.fmt.name} "
                                            f"--profile {o.profile.name}" + (f" --ulps {o.ulps}" if o.ulps else ""))
        result.kind = "cast"
        result.refusals = t.refusals
        result.extra["checked_means"] = (f"output values, compared with the pre-cast reference's {self.pre_dtype} "
                                         "values" + (f" (within {o.ulps} ulps)" if o.ulps else " (exactly)"))
        result.extra["fused"] = {"ulps": o.ulps, "precast_dtype": self.pre_dtype}
        if o.thorough:
            result.add_note(harness.large_numel(o.device)[1])
        self.dependent.apply(result)
        return result

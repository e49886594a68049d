r"""FP8 matmul checked against an exact product and a derived error bound.

``torch._scaled_mm(A, B, scale_a, scale_b, scale_result=None, out_dtype=...)``
computes ``(A * scale_a) @ (B * scale_b)``: the scales are ``scale_inv``
numbers (dequant multipliers), per tensor or per row of A / column of B.
fp8check compares a kernel's output with the exact product of the
dequantized operands and allows exactly the error that float32 arithmetic
and the output rounding can make -- no guessed tolerance.

The bound
=========

Let ``a_ik = qa_ik * sa_i`` and ``b_kj = qb_kj * sb_j`` be the dequantized
operands (exact in float64: an fp8 value has at most 4 significant bits, a
float32 scale 24), ``C_ij = sum_k a_ik b_kj`` the exact product and
``P_ij = sum_k |a_ik b_kj|``. A correct kernel computes ``C`` with float32
arithmetic, u = 2**-24, in any order: each operand may be scaled before the
products or the scales applied to the accumulated sum (one float32 multiply
each, 2 roundings), the products may be rounded (1), and the K products are
summed in float32 along any summation tree (at most K - 1 additions on the
path of one term). Every term of the sum thus carries at most n = K + 2
relative roundings, and by the standard analysis of floating-point dot
products (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
Lemma 3.1 and eq. 3.5, which holds for any order of summation)

.. math::  |\hat{C}_{ij} - C_{ij}| \le \gamma_{n} P_{ij},\qquad \gamma_n = \frac{n u}{1 - n u},

to which float32 underflow adds at most ``n * K * 2**-150`` (half a float32
subnormal spacing per operation). ``scale_result`` (an output divisor,
applied as a reciprocal and a multiply) adds 2 to n. The final rounding to
the output dtype, with unit roundoff ``u_out`` (2**-8 bfloat16, 2**-11
float16, 2**-24 float32, 2**-(m+1) for an fp8 output) and absolute
subnormal error ``eta_out`` (half its smallest subnormal), adds
``u_out * (|C| + E32) + eta_out``. The reference itself is computed in
float64 (``numpy.matmul``): its own error, at most ``gamma_{K+1}(2**-53) P``,
is added too. So, element by element::

    E32   = gamma_n(2**-24) * P + n*K*2**-150
    bound = E32 + u_out * (|C| + E32) + eta_out + gamma_{K+1}(2**-53) * P

An element whose ``|C| + bound`` reaches the output dtype's overflow
threshold (max + half an ulp) is checked instead for the declared overflow
behaviour (Inf, or ±max for a saturating fp8 output) when ``|C| - bound``
is past it, and skipped in between. The bound assumes no float32
intermediate overflows: where ``P`` itself reaches float32's threshold a
product or partial sum may be ±Inf and ``Inf - Inf`` NaN, so such an
element is only required to be non-finite (an intermediate Inf absorbs
later terms of the other sign) when it must overflow, and is otherwise
skipped (``undetermined``).

This is a worst-case bound: a kernel that accumulates in float32 can never
exceed it, whatever the data.

Accumulation per target
=======================

:mod:`fp8check.matmul.tensorcore` models each target's matrix instruction bit for bit
(MMA-Sim's models: sm89/sm90/sm100 NVIDIA, gfx942 AMD, gfx950 bracketed) and computes whole
GEMMs with it: :func:`mma` (``matmul.mma(target, a_codes, a_fmt, b_codes, b_fmt, acc=...,
a_scales=..., b_scales=...)`` returns float32 values and a target-dependent mask). The faithful
Triton interpreter's ``tl.dot`` uses it, and its ``tl.dot_scaled`` :mod:`fp8check.matmul.dot_scaled`
(sm100's block-scaled MMA, or the operands upcast to bfloat16 with their scales and the bfloat16
model, as Triton lowers it per target and tile). The bound below is the older, model-level view of
Hopper's accumulation used by :func:`check_scaled_mm`.


Hopper's FP8 tensor cores do not accumulate in float32: each ``wgmma``
instruction aligns its 32 products and the accumulator to the largest
exponent, truncates them to 13 fractional bits and truncates its result to
13 fractional bits (MMA-Sim's model, measured on an H200: FACTS.md). So the
accumulation is a model per target, as data
(:mod:`fp8check.matmul.accumulation`): ``float32`` (the bound above: the CPU,
torchao's emulation) and ``sm90-wgmma-fp8``, whose own bound, derived in that
module from the model (any grouping into instructions, any promotion
schedule into float32), replaces ``E32``::

    bound = E_model + u_out * (|C| + E_model) + eta_out + gamma_{K+1}(2**-53) * P

:func:`check_scaled_mm` picks the model of the device the matmul ran on
(``accumulation=`` names another); :func:`accumulation_study` measures how
far ``use_fast_accum`` goes towards the bound as K grows.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from fp8check.formats import Format, get as get_format
from fp8check.matmul.accumulation import (FLOAT32, SM90_WGMMA_FP8, AccumulationModel, accumulation_error,
                                          get_model, model_for_device)
from fp8check.matmul.tensorcore import MMAModel, MMAResult, mma
from fp8check.reference import decode, encode
from fp8check.results import CheckResult, Divergence

__all__ = [
    "gamma",
    "unit_roundoff",
    "error_bound",
    "exact_product",
    "MatmulCheck",
    "check_scaled_mm",
    "check_scaled_grouped_mm",
    "accumulation_study",
    "random_fp8",
    "AccumulationModel",
    "FLOAT32",
    "SM90_WGMMA_FP8",
    "get_model",
    "model_for_device",
    "accumulation_bound",
    "mma",
    "MMAModel",
    "MMAResult",
]

_OUT = {  # name: (u_out, eta_out, overflow threshold, torch dtype name)
    "float32": (2.0 ** -24, 2.0 ** -150, 2.0 ** 128 - 2.0 ** 103),
    "bfloat16": (2.0 ** -8, 2.0 ** -134, 2.0 ** 128 - 2.0 ** 119),
    "float16": (2.0 ** -11, 2.0 ** -25, 65520.0),
}


def gamma(n: int | np.ndarray, u: float) -> Any:
    """gamma_n = n u / (1 - n u) (Higham's notation)."""
    nu = np.asarray(n, dtype=np.float64) * u
    return nu / (1 - nu)


def _out_params(out_dtype: str) -> tuple[float, float, float]:
    if out_dtype in _OUT:
        return _OUT[out_dtype]
    f = get_format(out_dtype)
    u = 2.0 ** -(f.mantissa_bits + 1)
    eta = f.smallest_subnormal / 2
    threshold = f.max + 2.0 ** (f.emax - f.mantissa_bits - 1)
    return u, eta, threshold


def unit_roundoff(out_dtype: str) -> float:
    return _out_params(out_dtype)[0]


def _float32_accumulation(P: np.ndarray, K: int, scale_result: bool) -> np.ndarray:
    n = K + 2 + (2 if scale_result else 0)
    return gamma(n, 2.0 ** -24) * P + n * K * 2.0 ** -150


def error_bound(C: np.ndarray, P: np.ndarray, K: int, out_dtype: str, *, scale_result: bool = False,
                accumulation: np.ndarray | None = None) -> np.ndarray:
    """The per-element bound on |kernel - C| derived in the module docstring.

    ``accumulation``: the bound on the float32 result before the output rounding, from a target's
    accumulation model (:func:`accumulation_bound`); default: float32 arithmetic (``E32``)."""
    u_out, eta_out, _ = _out_params(out_dtype)
    e32 = _float32_accumulation(P, K, scale_result) if accumulation is None else accumulation
    return e32 + u_out * (np.abs(C) + e32) + eta_out + gamma(K + 1, 2.0 ** -53) * P


def accumulation_bound(model: object, qa: Any, fmt_a: object, sa: Any, qb: Any, fmt_b: object, sb: Any,
                       P: np.ndarray, *, roundings: int = 2, scale_result: float | None = None) -> np.ndarray | None:
    """The bound on the float32 result of ``(qa * sa) @ (qb * sb)`` (before the output rounding) under
    ``model``: None for ``float32`` (:func:`error_bound` derives it); for a fused-instruction model,
    the code-domain bound of :mod:`fp8check.matmul.accumulation` times the scales, and ``roundings``
    float32 roundings of the epilogue (2: the scale product and the scaling; 2 more for
    ``scale_result``)."""
    m = get_model(model)
    if not m.fused:
        return None
    s = _scale_array(sa, rows=True) * _scale_array(sb, rows=False)
    if scale_result is not None:
        s = s / abs(float(np.float32(scale_result)))
        roundings += 2
    return accumulation_error(decode(qa, fmt_a), fmt_a, decode(qb, fmt_b), fmt_b, s, P, m, roundings=roundings)


def exact_product(qa: Any, fmt_a: object, sa: Any, qb: Any, fmt_b: object, sb: Any) -> tuple[np.ndarray, np.ndarray]:
    """(C, P): the float64 product of the dequantized operands and sum_k |a b|.

    ``qa`` (M, K) and ``qb`` (K, N) are codes (uint8 or fp8 tensors); ``sa``
    is a scalar or (M, 1), ``sb`` a scalar or (1, N).
    """
    a = decode(qa, fmt_a) * _scale_array(sa, rows=True)
    b = decode(qb, fmt_b) * _scale_array(sb, rows=False)
    with np.errstate(all="ignore"):
        return a @ b, np.abs(a) @ np.abs(b)


def _scale_array(s: Any, *, rows: bool) -> Any:
    v = np.asarray(_np(s), dtype=np.float64)
    if v.size == 1:
        return float(v.reshape(-1)[0])
    return v.reshape(-1, 1) if rows else v.reshape(1, -1)


def _np(t: Any) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(t, torch.Tensor):
        return t.detach().cpu().to(torch.float64).numpy()
    return t


def random_fp8(shape: tuple[int, ...], fmt: object, rng: np.random.Generator, *, spread: float = 1.0) -> np.ndarray:
    """uint8 codes of normal random data (std ``spread``) rounded (RNE, satfinite) into ``fmt``."""
    x = (rng.standard_normal(shape) * spread).astype(np.float32)
    return encode(x, fmt, "satfinite")


def _torch_codes(codes: np.ndarray, fmt: Format, device: str) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(codes)).view(getattr(torch, fmt.torch_name)).to(device)


def _out_values(out: Any, out_dtype: str) -> np.ndarray:
    import torch

    if out_dtype in _OUT:
        return out.detach().cpu().to(torch.float64).numpy()
    return decode(out.detach().cpu().contiguous().view(torch.uint8).numpy(), out_dtype)


@dataclass
class MatmulCheck:
    """What one matmul check found. Ratios are |kernel - C| / bound over the
    elements that are in range (a ratio above 1 breaks the float32 bound)."""

    kernel: str
    fmt_a: str
    fmt_b: str
    out_dtype: str
    scaling: str
    M: int
    N: int
    K: int
    device: str
    use_fast_accum: bool
    checked: int = 0
    violations: int = 0
    max_ratio: float = 0.0
    p99_ratio: float = 0.0
    max_rel_error: float = 0.0  # max |kernel - C| / max |C|
    max_acc_ratio: float = 0.0  # error beyond the output rounding's share, / the float32 accumulation allowance
    overflow_checked: int = 0
    overflow_mismatches: int = 0
    undetermined: int = 0  # near the overflow threshold, or float32 intermediates may overflow
    overflow_behaviour: str = ""
    nan_mismatches: int = 0
    scale_convention: str = ""  # what doubling scale_a did to the output
    empty_group_errors: int = 0
    accumulation: str = "float32"  # the accumulation model judged against (fp8check.matmul.accumulation)
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not (self.violations or self.overflow_mismatches or self.nan_mismatches or self.empty_group_errors
                    or self.scale_convention not in ("", "multiplies"))

    def to_check_result(self) -> CheckResult:
        cats = {"accuracy": self.violations, "overflow": self.overflow_mismatches, "nan": self.nan_mismatches,
                "scale": int(self.scale_convention not in ("", "multiplies")), "other": self.empty_group_errors}
        extra = {k: v for k, v in asdict(self).items() if k not in ("divergences",)}
        return CheckResult(kernel=self.kernel, format=f"{self.fmt_a}x{self.fmt_b}", profile=f"out {self.out_dtype}",
                           passed=self.passed, checked=self.checked, categories=cats, divergences=self.divergences[:50],
                           kind="matmul", input_dtype=self.out_dtype, device=self.device, extra=extra)


def _compare(res: MatmulCheck, out: np.ndarray, C: np.ndarray, P: np.ndarray, K: int, *, scale_result: bool,
             overflow: str, accumulation: np.ndarray | None = None) -> None:
    bound = error_bound(C, P, K, res.out_dtype, scale_result=scale_result, accumulation=accumulation)
    threshold = _out_params(res.out_dtype)[2]
    f32_threshold = _OUT["float32"][2]
    with np.errstate(all="ignore"):
        err = np.abs(out - C)
        # A float32 intermediate (a product, a partial sum) may overflow once sum|ab| does:
        # then Inf - Inf makes NaN, and the bound says nothing.
        intermediate_ok = P * (1 + gamma(K + 4, 2.0 ** -24)) < f32_threshold
        in_range = np.isfinite(C) & (np.abs(C) + bound < threshold) & intermediate_ok
        must_overflow = np.isfinite(C) & (np.abs(C) - bound >= threshold)
    nan_expected = np.isnan(C)
    res.checked += int(in_range.sum())
    ok = in_range & (err <= bound)
    bad = in_range & ~ok
    res.violations += int(bad.sum())
    if in_range.any():
        # The share of the float32 accumulation allowance used, once the output rounding is set aside.
        u_out, eta_out, _ = _out_params(res.out_dtype)
        e32 = _float32_accumulation(P, K, scale_result) if accumulation is None else accumulation
        acc = np.maximum(err - u_out * (np.abs(C) + e32) - eta_out - gamma(K + 1, 2.0 ** -53) * P, 0) / np.where(e32 > 0, e32, 1)
        res.max_acc_ratio = max(res.max_acc_ratio, float(np.max(np.where(in_range, acc, 0))))
        ratio = np.where(in_range, err / np.where(bound > 0, bound, 1), 0)
        res.max_ratio = max(res.max_ratio, float(np.nanmax(ratio)))
        res.p99_ratio = max(res.p99_ratio, float(np.nanpercentile(ratio[in_range], 99)))
        cmax = float(np.max(np.abs(C[in_range])))
        if cmax > 0:
            res.max_rel_error = max(res.max_rel_error, float(np.max(err[in_range])) / cmax)
    for i, j in zip(*np.nonzero(bad)):
        if len(res.divergences) >= 20:
            break
        res.divergences.append(Divergence(
            category="accuracy", input_hex=f"{i},{j}", expected_hex=float(C[i, j]).hex(), actual_hex=float(out[i, j]).hex(),
            input_dtype=res.out_dtype, expected_value=repr(float(C[i, j])), actual_value=repr(float(out[i, j])),
            detail=f"|error| {float(err[i, j]):.6g} > bound {float(bound[i, j]):.6g} (K={K}, sum|ab| {float(P[i, j]):.6g}, "
                   f"{res.accumulation} accumulation)"))
    # Overflow: declared behaviour is "inf" or "saturate" (±max of an fp8 output) or "nan".
    if must_overflow.any():
        res.overflow_checked += int(must_overflow.sum())
        sign = np.sign(C)
        if overflow == "inf":
            expect = sign * np.inf
        elif overflow == "saturate":
            expect = sign * get_format(res.out_dtype).max
        else:
            expect = np.full(C.shape, np.nan)
        same = (out == expect) | (np.isnan(out) & np.isnan(expect))
        # Past float32's range an intermediate may be ±Inf (of either sign: Inf absorbs what follows) or NaN.
        same |= ~intermediate_ok & ~np.isfinite(out)
        mism = must_overflow & ~same
        res.overflow_mismatches += int(mism.sum())
        seen = {("Inf" if np.isinf(v) else "NaN" if np.isnan(v) else f"{v:g}") for v in np.abs(out[must_overflow]).tolist()[:1000]}
        res.overflow_behaviour = ",".join(sorted(seen | set(filter(None, res.overflow_behaviour.split(",")))))
        for i, j in zip(*np.nonzero(mism)):
            if len(res.divergences) >= 40:
                break
            res.divergences.append(Divergence(
                category="overflow", input_hex=f"{i},{j}", expected_hex=float(expect[i, j]).hex(),
                actual_hex=float(out[i, j]).hex(), input_dtype=res.out_dtype, expected_value=repr(float(expect[i, j])),
                actual_value=repr(float(out[i, j])), detail=f"exact {float(C[i, j]):.6g} overflows {res.out_dtype} ({overflow})"))
    nan_bad = (nan_expected & ~np.isnan(out)) | (~nan_expected & np.isnan(out) & in_range)
    res.undetermined += int((np.isfinite(C) & ~in_range & ~must_overflow).sum())
    res.nan_mismatches += int(nan_bad.sum())


def _call_mm(mm: Callable[..., Any], A: Any, B: Any, sa: Any, sb: Any, out_dtype: str, fast: bool,
             scale_result: Any = None) -> Any:
    import torch

    dt = getattr(torch, out_dtype if out_dtype in _OUT else get_format(out_dtype).torch_name)
    kw = {"out_dtype": dt, "use_fast_accum": fast}
    if scale_result is not None:
        kw["scale_result"] = scale_result
    return mm(A, B, sa, sb, **kw)


def check_scaled_mm(*, fmt_a: object = "e4m3fn", fmt_b: object = "e4m3fn", out_dtype: str = "float32",
                    scaling: str = "tensorwise", M: int = 64, N: int = 48, K: int = 256, device: str = "cpu",
                    use_fast_accum: bool = False, seed: int = 0, mm: Callable[..., Any] | None = None,
                    overflow: str | None = None, spread: float = 1.0, scale_result: float | None = None,
                    nan_row: bool = False, name: str | None = None,
                    scale_exponents: tuple[float, float] = (-4.0, 4.0),
                    accumulation: object = None) -> MatmulCheck:
    """Check ``mm`` (default ``torch._scaled_mm``) on random fp8 operands.

    ``scaling``: ``tensorwise`` (scalar scales) or ``rowwise`` ((M,1) and
    (1,N)); scales are random non-powers of two ``2**uniform(*scale_exponents)``. B is
    passed column-major (what CUDA requires; the CPU accepts it too).
    ``overflow``: the declared out-of-range behaviour (default: Inf for
    float outputs, the torch cast of the float32 result for fp8 outputs:
    ``saturate`` for e4m3fn, ``inf`` for e5m2, ``nan`` for fnuz).
    ``nan_row``: put a NaN code into one row of A (where the format has NaN).
    Also checks, exactly, that doubling ``scale_a`` doubles a float32 output
    (the scale multiplies; it does not divide and is not ignored).
    ``accumulation``: the accumulation model to judge against (a name or an
    :class:`AccumulationModel`); default: the device's (:func:`model_for_device`:
    ``sm90-wgmma-fp8`` on a Hopper GPU, ``float32`` elsewhere).
    """
    import torch

    mm = mm or torch._scaled_mm
    fa, fb = get_format(fmt_a), get_format(fmt_b)
    rng = np.random.default_rng(seed)
    qa = random_fp8((M, K), fa, rng, spread=spread)
    qb = random_fp8((K, N), fb, rng, spread=spread)
    if nan_row and fa.has_nan:
        qa[M // 2, K // 3] = fa.canonical_nan()
    if scaling == "tensorwise":
        lo, hi = scale_exponents
        sa_np = np.float32(2.0 ** rng.uniform(lo, hi))
        sb_np = np.float32(2.0 ** rng.uniform(lo, hi))
        sa, sb = torch.tensor(sa_np), torch.tensor(sb_np)
    elif scaling == "rowwise":
        lo, hi = scale_exponents
        sa_np = (2.0 ** rng.uniform(lo, hi, size=(M, 1))).astype(np.float32)
        sb_np = (2.0 ** rng.uniform(lo, hi, size=(1, N))).astype(np.float32)
        sa, sb = torch.from_numpy(sa_np), torch.from_numpy(sb_np)
    else:
        raise ValueError(f"scaling must be 'tensorwise' or 'rowwise', got {scaling!r}")
    A = _torch_codes(qa, fa, device)
    B = _torch_codes(np.ascontiguousarray(qb.T), fb, device).t()  # (K, N), column-major
    sa, sb = sa.to(device), sb.to(device)
    model = get_model(accumulation) if accumulation is not None else model_for_device(device)
    res = MatmulCheck(kernel=name or getattr(mm, "__name__", "mm"), fmt_a=fa.name, fmt_b=fb.name, out_dtype=out_dtype,
                      scaling=scaling, M=M, N=N, K=K, device=device, use_fast_accum=use_fast_accum,
                      accumulation=model.name)
    sr = None if scale_result is None else torch.tensor(np.float32(scale_result), device=device)
    out = _out_values(_call_mm(mm, A, B, sa, sb, out_dtype, use_fast_accum, sr), out_dtype)
    C, P = exact_product(qa, fa, sa_np, qb, fb, sb_np)
    if scale_result is not None:
        C, P = C / np.float64(np.float32(scale_result)), P / abs(np.float64(np.float32(scale_result)))
    if overflow is None:
        overflow = "inf" if out_dtype in _OUT else {"e4m3fn": "saturate", "e5m2": "inf"}.get(out_dtype, "nan")
    acc = accumulation_bound(model, qa, fa, sa_np, qb, fb, sb_np, P, scale_result=scale_result)
    _compare(res, out, C, P, K, scale_result=scale_result is not None, overflow=overflow, accumulation=acc)
    if out_dtype == "float32" and not nan_row:
        out2 = _out_values(_call_mm(mm, A, B, sa * 2, sb, out_dtype, use_fast_accum, sr), out_dtype)
        finite = np.isfinite(out) & np.isfinite(out2) & (np.abs(out) < 2.0 ** 126) & (np.abs(out) > 2.0 ** -100)
        if np.array_equal(out2[finite], 2 * out[finite]):
            res.scale_convention = "multiplies"
        elif np.array_equal(out2[finite], out[finite] / 2):
            res.scale_convention = "divides"
        elif np.array_equal(out2[finite], out[finite]):
            res.scale_convention = "ignored"
        else:
            res.scale_convention = "inexact"
        if res.scale_convention != "multiplies":
            res.divergences.append(Divergence(
                category="scale", input_hex="scale_a*2", expected_hex="x2", actual_hex=res.scale_convention,
                input_dtype=out_dtype, detail=f"doubling scale_a should double the output exactly; the output {res.scale_convention}"))
    return res


def check_scaled_grouped_mm(*, fmt: object = "e4m3fn", group_sizes: tuple[int, ...] = (32, 0, 64, 16, 0),
                            N: int = 64, K: int = 128, out_dtype: str = "bfloat16", device: str = "cuda",
                            use_fast_accum: bool = False, seed: int = 0, mm: Callable[..., Any] | None = None,
                            name: str | None = None, accumulation: object = None) -> MatmulCheck:
    """Check ``torch._scaled_grouped_mm`` (2-D A x 3-D B, MoE forward) with
    empty groups: A (M, K) rowwise scales (M,), B (G, K, N) column-major per
    group with scales (G, N), ``offs`` the cumulative group ends over M.
    Every group's rows are checked against its exact product and the bound;
    rows of no group (none here) and empty groups produce no output."""
    import torch

    mm = mm or torch._scaled_grouped_mm
    f = get_format(fmt)
    rng = np.random.default_rng(seed)
    G = len(group_sizes)
    offs_np = np.cumsum(np.array(group_sizes, dtype=np.int64))
    M = int(offs_np[-1])
    qa = random_fp8((M, K), f, rng)
    qb = random_fp8((G, K, N), f, rng)
    sa_np = (2.0 ** rng.uniform(-4, 4, size=(M,))).astype(np.float32)
    sb_np = (2.0 ** rng.uniform(-4, 4, size=(G, N))).astype(np.float32)
    A = _torch_codes(qa, f, device)
    B = _torch_codes(np.ascontiguousarray(qb.transpose(0, 2, 1)), f, device).transpose(-2, -1)  # (G, K, N) col-major
    sa, sb = torch.from_numpy(sa_np).to(device), torch.from_numpy(sb_np).to(device)
    offs = torch.from_numpy(offs_np.astype(np.int32)).to(device)
    model = get_model(accumulation) if accumulation is not None else model_for_device(device)
    res = MatmulCheck(kernel=name or "torch._scaled_grouped_mm", fmt_a=f.name, fmt_b=f.name, out_dtype=out_dtype,
                      scaling=f"rowwise, groups {list(group_sizes)}", M=M, N=N, K=K, device=device,
                      use_fast_accum=use_fast_accum, accumulation=model.name)
    dt = getattr(torch, out_dtype)
    out = _out_values(mm(A, B, sa, sb, offs=offs, out_dtype=dt, use_fast_accum=use_fast_accum), out_dtype)
    if out.shape != (M, N):
        res.empty_group_errors += 1
        res.divergences.append(Divergence(category="other", input_hex="shape", expected_hex=f"{M}x{N}",
                                          actual_hex="x".join(map(str, out.shape)), detail="output shape"))
        return res
    start = 0
    for g, end in enumerate(offs_np.tolist()):
        if end > start:
            C, P = exact_product(qa[start:end], f, sa_np[start:end, None], qb[g], f, sb_np[g][None, :])
            acc = accumulation_bound(model, qa[start:end], f, sa_np[start:end, None], qb[g], f, sb_np[g][None, :], P)
            _compare(res, out[start:end], C, P, K, scale_result=False, overflow="inf", accumulation=acc)
        start = end
    return res


def accumulation_study(Ks: tuple[int, ...] = (256, 1024, 4096, 16384), *, fmt: object = "e4m3fn",
                       scaling: str = "tensorwise", out_dtype: str = "float32", device: str = "cpu",
                       M: int = 128, N: int = 128, seed: int = 0,
                       mm: Callable[..., Any] | None = None, accumulation: object = None) -> list[dict[str, Any]]:
    """Error against the derived float32 bound as K grows, with and without
    ``use_fast_accum``: one row per (K, fast) with the largest and 99th
    percentile |error| / bound, the largest share of the float32
    accumulation allowance used beyond the output rounding (``max_acc_ratio``:
    above 1 the accumulation is not float32), and the largest error relative
    to max |C|."""
    rows = []
    for K in Ks:
        for fast in (False, True):
            r = check_scaled_mm(fmt_a=fmt, fmt_b=fmt, out_dtype=out_dtype, scaling=scaling, M=M, N=N, K=K,
                                device=device, use_fast_accum=fast, seed=seed, mm=mm, accumulation=accumulation)
            rows.append({"K": K, "fast_accum": fast, "accumulation": r.accumulation, "max_ratio": r.max_ratio, "p99_ratio": r.p99_ratio,
                         "max_acc_ratio": r.max_acc_ratio, "max_rel_error": r.max_rel_error,
                         "violations": r.violations, "checked": r.checked})
    return rows

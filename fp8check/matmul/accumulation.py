r"""How a target accumulates an FP8 matmul, as data: a model per target, its exact emulation, and the bound derived from it.

Two models:

``float32``
    IEEE float32 arithmetic in any order (CPU ``_scaled_mm``, torchao's emulation, the CPU
    reference path). Bounded by Higham's dot-product analysis in :mod:`fp8check.matmul`.

``sm90-wgmma-fp8``
    NVIDIA Hopper's FP8 ``wgmma.mma_async`` (K = 32 per instruction), as MMA-Sim models it
    bit for bit (P. Xie, Y. Wang, F. Yang, M. Yang, *MMA-Sim: Bit-Accurate Reference Model of
    Tensor Cores and Matrix Cores*, arXiv:2511.10909, 2025; its package ``mmasim`` 2.1.1 on PyPI,
    ``mmasim/nv_ptx/sim.py`` class ``WGMMA`` (F = 13, "RZ-E8M13", L_max = 32, e_zero = -133) and
    ``mmasim/arithmetic/fdpa.py`` ``t_fdpa``; repository microsoft/MMA-Sim). One instruction
    computes ``D = C + sum_{k<32} a_k b_k`` for each output element:

    1. every term (the float32 ``C`` and the 32 exact products) is split into a significand and
       an exponent (an fp8 operand's exponent clamped to its format's ``emin``; a product's
       exponent is the sum of its operands', its significand the product of theirs, in [1, 4) for
       normal operands; a zero term's exponent is -133, below every other);
    2. ``E`` = the largest exponent of the 33 terms; each term is truncated (toward zero) to a
       multiple of ``2**(E - 13)`` (13 fractional bits) and the truncated terms are summed exactly;
    3. the sum is normalised and truncated (toward zero) to 13 fractional bits -- a float32 with
       its 10 low mantissa bits zero ("f32_e8m13"); NaN/Inf inputs give what a float64 sum gives
       (NaN as 0x7FFFFFFF).

    A GEMM chains the instructions along K through that accumulator. With
    ``use_fast_accum=False`` a kernel may add the accumulator into a separate float32 register
    every few instructions (CUTLASS's "promotion", every 4 by default); cuBLASLt's schedule is not
    documented, so the bound below holds for any schedule, including none. The scales are applied
    to the accumulated float32 sum in the epilogue.

What is derived and what is measured
====================================

- Derived from MMA-Sim's model (this module): :func:`wgmma_fp8` (vectorised) and
  :func:`wgmma_fp8_spec` (scalar, Python integers: the spec), tested equal; the GEMM emulation
  :func:`emulate_accumulation` for a stated promotion schedule; and :func:`accumulation_error`,
  the bound below.
- Measured on an H200 (torch 2.11, cuBLASLt, FACTS.md): ``torch._scaled_mm`` keeps
  ``256 + 31 * 2**-5`` exactly and turns ``256 + 31 * 2**-6`` into 256.0 in a K = 32 row, as
  step 2 predicts; GEMMs of a training step exceed the float32 bound by up to 75x. On
  2026-12-04 (``tests/test_recipes_matmul.py``, ``-m gpu``): at K = 32 with unit scales and
  float32 out, ``_scaled_mm`` equals :func:`emulate_accumulation` bit for bit on 128x128 outputs
  of random finite codes (e4m3fn x e4m3fn, e5m2 x e4m3fn, e4m3fn x e5m2, with and without fast
  accumulation), and tensorwise and rowwise GEMMs at K = 64, 256, 4096 and the training step's
  180 GEMMs are within the bound below (largest 0.82 of it). Not measured: whether cuBLASLt's
  whole GEMM at larger K equals the emulation for some promotion schedule, and its epilogue's
  order of operations (the bound does not depend on either).

The bound (code domain: the fp8 values' own products, before the scales)
=========================================================================

Let ``p_k`` be the K exact products of one output element, ``P = sum |p_k|``, ``X_k`` the power of
two of ``p_k``'s exponent (``2**(e_a + e_b)``), ``X* = max X_k`` over non-zero products,
``F = 13`` the fractional bits kept while aligning, ``G = 13`` those kept in the result,
``J = ceil(K / 32)`` the instructions (a kernel's K tiles are multiples of 32; zero padding is
exact), and ``m_a + m_b`` the fractional bits of a product's significand. For instruction ``j``
with input accumulator ``c`` and largest exponent ``E_j``:

- every accumulator value is at most the ``P`` of the products summed so far (truncation toward
  zero never grows a magnitude), so ``2**E_j <= max(|c|, X*) <= B``, ``B`` = the largest power of
  two not above ``max(P, X*)``;
- a product is truncated by less than ``min(|p_k|, 2**(E_j - F))``, and not at all when
  ``X_k * 2**(F - m_a - m_b) >= 2**E_j``: together at most
  ``Q = sum_k [X_k 2**(F - m_a - m_b) < B] min(|p_k|, 2**-F B)``;
- ``c`` (a previous result: ``G`` fractional bits at its own exponent) is exact unless a product
  sets ``E_j``, and then loses less than ``2**-F X*``: at most ``(J - 1) 2**-F X*`` over a chain;
- the result's truncation loses less than ``2**-G`` times the power of two of its magnitude,
  which is at most ``P``: at most ``J 2**-G P2`` (``P2`` = the largest power of two not above
  ``P``), plus ``2**(-126 - G)`` per instruction below float32's normal range;
- chains (between promotions) are added in float32: ``gamma_{J-1}(2**-24) P`` at most.

So ``|acc - sum p| <= Q + (J-1) 2**-F X* + J 2**-G P2 + J 2**(-126-G) + gamma_{J-1}(2**-24) P``
for any grouping of the products into instructions and any promotion schedule. The epilogue's
``r`` float32 roundings (the scale product, the scaling; torchao's reciprocals of its scales)
add ``gamma_r (P + acc error)`` relatively, in the real domain (:func:`accumulation_error`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from fp8check.errors import InvalidValueError
from fp8check.formats import Format, get as get_format
from fp8check.reference import decode

__all__ = ["AccumulationModel", "FLOAT32", "SM90_WGMMA_FP8", "MODELS", "get_model", "model_for_device",
           "wgmma_fp8", "wgmma_fp8_spec", "emulate_accumulation", "emulate_scaled_mm", "accumulation_error", "code_domain_error"]


@dataclass(frozen=True, kw_only=True)
class AccumulationModel:
    """How a target sums the products of an FP8 matmul.

    ``instruction_k``: products fused per instruction (None: plain float32 arithmetic, any order);
    ``fraction_bits``: fractional bits kept when a term is aligned to the largest exponent
    (truncated toward zero); ``result_fraction_bits``: fractional bits of each instruction's
    result (truncated toward zero)."""

    name: str
    summary: str
    source: str
    instruction_k: int | None = None
    fraction_bits: int | None = None
    result_fraction_bits: int | None = None

    @property
    def fused(self) -> bool:
        return self.instruction_k is not None


FLOAT32 = AccumulationModel(
    name="float32", summary="IEEE float32 arithmetic, round to nearest even, any order of summation",
    source="Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., Lemma 3.1 and eq. 3.5")
SM90_WGMMA_FP8 = AccumulationModel(
    name="sm90-wgmma-fp8",
    summary="Hopper wgmma FP8 (K=32 per instruction): terms aligned to the largest exponent and truncated to "
            "13 fractional bits, summed exactly, the result truncated to 13 fractional bits (f32_e8m13)",
    source="MMA-Sim (arXiv:2511.10909; mmasim 2.1.1, nv_ptx/sim.py WGMMA, arithmetic/fdpa.py t_fdpa); "
           "measured on an H200 by the K=32 row of FACTS.md",
    instruction_k=32, fraction_bits=13, result_fraction_bits=13)
MODELS = {m.name: m for m in (FLOAT32, SM90_WGMMA_FP8)}


def get_model(model: object) -> AccumulationModel:
    if isinstance(model, AccumulationModel):
        return model
    if isinstance(model, str) and model in MODELS:
        return MODELS[model]
    raise InvalidValueError(f"unknown accumulation model {model!r}; known: {', '.join(MODELS)}")


def model_for_device(device: Any) -> AccumulationModel:
    """The model of the FP8 matmuls ``torch._scaled_mm`` runs on ``device``: ``sm90-wgmma-fp8`` on a
    compute-capability 9.x GPU, ``float32`` on the CPU. Other GPUs are not modelled (float32)."""
    name = str(device)
    if not name.startswith("cuda"):
        return FLOAT32
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return FLOAT32
    major, _ = torch.cuda.get_device_capability(torch.device(name))
    return SM90_WGMMA_FP8 if major == 9 else FLOAT32


# -- the instruction ---------------------------------------------------------------------------------

ZERO_EXPONENT = -133  # the exponent MMA-Sim gives a zero term (a float32 result): below every other term's


def wgmma_fp8(c: np.ndarray, a: np.ndarray, fmt_a: object, b: np.ndarray, fmt_b: object,
              model: AccumulationModel = SM90_WGMMA_FP8) -> np.ndarray:
    """One fused instruction for every output element: ``c`` (M, N) float32, ``a`` (M, k) and ``b``
    (k, N) the float64 values of fp8 operands (k <= the model's ``instruction_k``); float32 (M, N).
    Computed by :func:`fp8check.matmul.tensorcore.mma` (the tensor-core models' one implementation) with
    this model's fractional bits, on the operands' codes (exact: the values are fp8 values)."""
    from dataclasses import replace

    from fp8check.matmul import tensorcore
    from fp8check.reference import encode

    fa, fb = get_format(fmt_a), get_format(fmt_b)
    f, g = model.fraction_bits, model.result_fraction_bits
    if f is None or g is None:
        raise InvalidValueError(f"{model.name} is not a fused-instruction model")
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    k = max(a.shape[1], 1)
    step = replace(tensorcore.SM90_WGMMA_FP8, name=model.name, operands=(fa.name, fb.name), instruction_k=k,
                   chunk=k, fraction_bits=f, result_bits=g)
    return tensorcore.mma(step, encode(a, fa), fa.name, encode(b, fb), fb.name,
                          acc=np.asarray(c, dtype=np.float32)).values


def _spec_split(x: Fraction, emin: int) -> tuple[Fraction, int]:
    if x == 0:
        return Fraction(0), ZERO_EXPONENT
    e = math.floor(math.log2(abs(x)))
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    e = max(e, emin)
    return x / Fraction(2) ** e, e


def _trunc(x: Fraction) -> int:
    return int(x)  # int() of a Fraction truncates toward zero


def wgmma_fp8_spec(c: float, a: list[float], fmt_a: object, b: list[float], fmt_b: object,
                   model: AccumulationModel = SM90_WGMMA_FP8) -> float:
    """The same instruction for one output element, in exact rationals (the spec:
    :func:`wgmma_fp8` is tested equal to it). Returns a Python float holding a float32 value."""
    fa, fb = get_format(fmt_a), get_format(fmt_b)
    f, g = model.fraction_bits, model.result_fraction_bits
    assert f is not None and g is not None
    wide = sum((x * y for x, y in zip(a, b)), 0.0) + c  # NaN/Inf in, NaN/Inf out (finite products cannot overflow)
    if not math.isfinite(wide):
        return wide
    terms = [_spec_split(Fraction(c), -126)]
    for x, y in zip(a, b):
        (s1, e1), (s2, e2) = _spec_split(Fraction(x), fa.emin), _spec_split(Fraction(y), fb.emin)
        terms.append((s1 * s2, e1 + e2 if s1 * s2 else ZERO_EXPONENT))
    top = max(e for _, e in terms)
    units = sum(_trunc(s * Fraction(2) ** (f + e - top)) for s, e in terms)  # in units of 2**(top - f)
    if units == 0:
        return 0.0
    value = Fraction(units) * Fraction(2) ** (top - f)
    _, ev = _spec_split(value, -126)
    grid = Fraction(2) ** (ev - g)
    kept = _trunc(value / grid) * grid
    return float(np.float32(float(kept))) if abs(kept) < 2 ** 128 else math.copysign(math.inf, units)


# -- a GEMM ------------------------------------------------------------------------------------------

def emulate_accumulation(a: np.ndarray, fmt_a: object, b: np.ndarray, fmt_b: object,
                         model: AccumulationModel = SM90_WGMMA_FP8, *, promotion_interval: int | None = None
                         ) -> np.ndarray:
    """The float32 accumulator of ``a @ b`` (values of fp8 operands, (M, K) and (K, N), before any
    scale) under ``model``: instructions over consecutive K slices of ``instruction_k``, chained
    through the instruction's accumulator; with ``promotion_interval`` R, the chain is added into a
    float32 accumulator (round to nearest) after every R instructions and restarted from zero
    (CUTLASS's FP8 "promotion"; None: never, as with ``use_fast_accum=True``)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    M, K = a.shape
    if not model.fused:
        return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32)
    step = model.instruction_k
    assert step is not None
    c = np.zeros((M, b.shape[1]), dtype=np.float32)
    total = np.zeros_like(c)
    for j, k0 in enumerate(range(0, K, step)):
        c = wgmma_fp8(c, a[:, k0:k0 + step], fmt_a, b[k0:k0 + step], fmt_b, model)
        if promotion_interval and (j + 1) % promotion_interval == 0:
            total = (total + c).astype(np.float32)
            c = np.zeros_like(c)
    return (total + c).astype(np.float32) if promotion_interval else c


def emulate_scaled_mm(qa: Any, fmt_a: object, sa: Any, qb: Any, fmt_b: object, sb: Any, *, out_dtype: str = "float32",
                      model: AccumulationModel = SM90_WGMMA_FP8, promotion_interval: int | None = None) -> np.ndarray:
    """``_scaled_mm`` as ``model`` computes it: the accumulator of :func:`emulate_accumulation` on the
    codes, then an epilogue ``fl32(fl32(sa * sb) * acc)`` rounded to nearest even into ``out_dtype``
    (float32, bfloat16, float16). The epilogue's order is an assumption (cuBLASLt does not document
    it); the derived bound does not depend on it. Returns the output's values as float64."""
    import ml_dtypes

    a, b = decode(qa, fmt_a), decode(qb, fmt_b)
    acc = emulate_accumulation(a, fmt_a, b, fmt_b, model, promotion_interval=promotion_interval)
    sa32 = np.asarray(sa, dtype=np.float32).reshape(-1, 1) if np.size(sa) > 1 else np.float32(np.asarray(sa).reshape(-1)[0])
    sb32 = np.asarray(sb, dtype=np.float32).reshape(1, -1) if np.size(sb) > 1 else np.float32(np.asarray(sb).reshape(-1)[0])
    with np.errstate(all="ignore"):
        out = (np.float32(1) * sa32 * sb32).astype(np.float32) * acc
    dt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}.get(out_dtype)
    if dt is None:
        raise InvalidValueError(f"emulate_scaled_mm: out_dtype float32, bfloat16 or float16, got {out_dtype!r}")
    with np.errstate(all="ignore"):
        return out.astype(np.float32).astype(dt).astype(np.float64)


def _exponents(values: np.ndarray, fmt: Format) -> np.ndarray:
    """The exponent of each fp8 value (clamped to emin); zeros and non-finite values a large negative number."""
    _, e = np.frexp(np.where(np.isfinite(values), values, 0.0))
    exp = np.maximum(e.astype(np.int64) - 1, fmt.emin)
    return np.where((values == 0) | ~np.isfinite(values), -(1 << 20), exp)


def _floor_pow2(x: np.ndarray) -> np.ndarray:
    m, e = np.frexp(x)
    return np.where(x > 0, np.ldexp(0.5, e), 0.0)


def code_domain_error(a: np.ndarray, fmt_a: object, b: np.ndarray, fmt_b: object,
                      model: AccumulationModel = SM90_WGMMA_FP8) -> np.ndarray:
    """The bound of the module docstring on |accumulator - sum_k a_ik b_kj| (operand values before
    any scale), (M, N) float64: instructions over 32-aligned slices of K taken in increasing k, any
    promotion schedule (or split of K into contiguous chains)."""
    fa, fb = get_format(fmt_a), get_format(fmt_b)
    f, g, step = model.fraction_bits, model.result_fraction_bits, model.instruction_k
    if f is None or g is None or step is None:
        raise InvalidValueError(f"{model.name} is not a fused-instruction model")
    a = np.where(np.isfinite(a), a, 0.0).astype(np.float64)
    b = np.where(np.isfinite(b), b, 0.0).astype(np.float64)
    M, K = a.shape
    N = b.shape[1]
    J = -(-K // step)
    ea, eb = _exponents(a, fa).astype(np.int32), _exponents(b, fb).astype(np.int32)
    with np.errstate(over="ignore", invalid="ignore"):
        P = np.abs(a) @ np.abs(b)
        slack = 2.0 * K * 2.0 ** -53 * P  # float64's own error in the sums below
        P = P + slack
    # A chain (instructions between promotions) over slices s+1..j holds the exact partial sum
    # T_j - T_s (T: prefix sums at slice boundaries, in increasing k), so its size is at most the
    # running range max(T_j - min T_s, max T_s - T_j) over s <= j.
    t = np.zeros((M, N))
    hi, lo = t.copy(), t.copy()
    shift = f - fa.mantissa_bits - fb.mantissa_bits  # a product is exact when its exponent + shift >= E
    e = np.zeros((M, N))
    for j, k0 in enumerate(range(0, K, step)):
        pe = (ea[:, k0:k0 + step, None] + eb[None, k0:k0 + step, :])  # (M, k, N)
        p = np.abs(a[:, k0:k0 + step, None] * b[None, k0:k0 + step, :])
        before = np.maximum(t - lo, hi - t) + slack
        with np.errstate(over="ignore", invalid="ignore"):
            t = t + a[:, k0:k0 + step] @ b[k0:k0 + step]
        np.maximum(hi, t, out=hi)
        np.minimum(lo, t, out=lo)
        after = np.maximum(t - lo, hi - t) + slack
        xg_exp = pe.max(axis=1)
        xg = np.where(xg_exp < -1000, 0.0, np.ldexp(1.0, np.clip(xg_exp, -1074, 1023).astype(np.int32)))
        cmax = before + e  # |the chain's accumulator| before this instruction
        top = _floor_pow2(np.maximum(cmax, xg))  # 2**E_j is at most this
        _, top_exp = np.frexp(top)
        top_exp = (top_exp - 1).astype(np.int32) - shift
        grid = top * 2.0 ** -f
        tau = np.where(pe < top_exp[:, None, :], np.minimum(p, grid[:, None, :]), 0.0).sum(axis=1)
        ctr = xg * 2.0 ** -f if j else 0.0  # the accumulator realigned below a larger product
        value = np.minimum(cmax + p.sum(axis=1), after + e + tau + ctr)
        e = e + tau + ctr + 2.0 ** -g * _floor_pow2(value) + 2.0 ** (-126 - g)
    return e + ((J - 1) * 2.0 ** -24 / (1 - (J - 1) * 2.0 ** -24)) * (P + e)


def accumulation_error(a: np.ndarray, fmt_a: object, b: np.ndarray, fmt_b: object, scale: Any, P: np.ndarray,
                       model: AccumulationModel, *, roundings: int) -> np.ndarray:
    """The real-domain bound on |float32 result - exact product| of a fused-instruction model:
    ``scale`` (|sa_i sb_j|, broadcastable to (M, N)) times the code-domain bound, and ``roundings``
    float32 roundings of the epilogue (each scaled term: relative ``gamma_r``, plus half a float32
    subnormal spacing per rounding). ``P``: sum |a b| of the dequantized operands."""
    u = 2.0 ** -24
    gam = roundings * u / (1 - roundings * u)
    code = code_domain_error(a, fmt_a, b, fmt_b, model)
    s = np.abs(np.asarray(scale, dtype=np.float64))
    with np.errstate(all="ignore"):
        return s * code * (1 + gam) + gam * P + roundings * 2.0 ** -150

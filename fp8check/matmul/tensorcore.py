r"""Tensor-core models per target, as data, and one vectorised exact implementation.

A GPU's matrix instruction does not compute ``C + sum a_k b_k`` with float32 FMAs: it aligns the
products to the largest exponent, keeps a fixed number of bits, and rounds once (or truncates).
The models here are MMA-Sim's (P. Xie, Y. Wang, F. Yang, M. Yang, *MMA-Sim: Bit-Accurate
Reference Model of Tensor Cores and Matrix Cores*, arXiv:2511.10909, 2025; package ``mmasim``
2.1.1 on PyPI, repository microsoft/MMA-Sim), written as parameters (:class:`MMAModel`, one
frozen record per target and operand kind) and computed by one NumPy implementation
(:func:`mma`) whose every step is exact: products of the operands' float64 values (at most 8
significant bits each, so exact), scaling by powers of two, ``trunc``/``floor`` of integers below
2**53, and the final rounding from the float64 bit pattern. Where numba is installed (the ``fast``
extra) every model measured by MMA-Sim whose operands have at most 256 codes (FP8, FP6, FP4, block
scales included) runs as one compiled pass per output element over the whole K chain, in integers
(:mod:`fp8check.matmul._compiled`, the same models, tested equal bit for bit; a call of 2**22 products
or more through a kernel compiled for its kind, and every later call of that kind in the process; a process
with no compilation on disk stays on NumPy until it has modelled :data:`COMPILED_AFTER` products, about as
long as a compilation; ``FP8CHECK_NUMBA=1`` compiles at the first call, ``=0`` never); 16-bit operands and the
gfx950 bracket run on NumPy.

The agreement with MMA-Sim is tested in tests/test_matmul_tensorcore.py (random-bit instances of every
instruction kind here against ``mmasim`` 2.1.1, 10^6 per FP8 kind in the slow lane, 0 mismatches) and
the speed measured by benchmarks/mma_models.py.

The algorithms (MMA-Sim's names; ``F`` fractional bits, ``E`` the largest exponent of a step)
==========================================================================================

``aligned`` (NVIDIA, MMA-Sim ``t_fdpa``; ``st_fdpa`` with block scales)
    Every term of one step -- the float32 accumulator ``c`` and ``chunk`` exact products (times
    their block scales) -- has an exponent: an operand's exponent clamped to its format's
    ``emin``, a product's the sum of its operands' (and scales'), a zero term's
    ``zero_exponent``. Each term is truncated toward zero to a multiple of ``2**(E - F)``, the
    truncated terms are summed exactly, and the sum is truncated toward zero to ``result_bits``
    fractional bits (13: Hopper/Ada FP8's "e8m13"; 23: float32) with float32's exponent range
    (past it: Inf). A zero result is +0.

``grouped-scaled`` (Blackwell ``kind::mxf4``/``mxf4nvf4``, MMA-Sim ``gst_fdpa``)
    The products of each group of 16 are summed exactly, multiplied by their block's two scales'
    significands and given the scales' exponent sum (``zero_exponent`` for an all-zero group or a
    zero scale); the group terms and ``c`` are then aligned as above with ``F = 35``.

``two-stage`` (AMD CDNA3, MMA-Sim ``gtr_fdpa`` for FP8, ``tr_fdpa`` for bf16/fp16)
    The products of a step (FP8: its even and its odd products as two groups) are truncated
    toward zero to ``F = 24`` bits below their group's largest exponent and summed; the groups
    are rounded down (floor) to ``F`` bits below the larger group exponent and added; that dot is
    rounded down to ``F2 + 1 = 32`` bits and ``c`` to ``F`` bits below ``max(dot, c)``'s exponent
    (FP8: a ``c`` more than ``F + 1`` binades below is dropped), added, rounded down to
    ``F2 = 31`` fractional bits, and rounded to nearest even into float32.

A GEMM (:func:`mma`) runs the instructions along K in increasing k, each taking the previous
result as its ``c`` (Triton lowers a ``tl.dot`` to ``numRepK`` instructions chained through the
accumulator: ``third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/DotOpToLLVM/WGMMA.cpp``
``convertDot``); ``promotion`` K-instructions at a time it adds the chain into a float32
accumulator, as Triton does for FP8 on sm90 when ``max_num_imprecise_acc`` is below the dot's K
(``requireAddAccumulator`` there; compiled Triton's sm90 default is 2**30: no promotion).

Special values
==============

NVIDIA (MMA-Sim's ``frexp``-based model): NaN and Inf propagate as in a float64 sum of the
products and ``c`` (``0 * Inf`` and ``Inf - Inf`` are NaN); every NaN result is 0x7FFFFFFF.
AMD: MMA-Sim's CDNA3 model leaves NaN/Inf as TODO (its two-stage code can drop a NaN ``c`` as a
tiny term). fp8check does not guess: an output element whose step saw a NaN or Inf operand, a
non-finite ``c`` or (bf16/fp16) a product past float32's range is **target-dependent**:
:attr:`MMAResult.target_dependent` marks it (its value is a candidate: the float-sum NaN/Inf), and
the caller counts it.

Targets without a measured model
================================

``gfx950`` (CDNA4: OCP fp8/bf8 MFMA) is not in MMA-Sim 2.1.1. Its model is a **bracket**: the
value is CDNA3's two-stage datapath applied to OCP operands (an assumption), and every element
whose result could depend on the unknown datapath is target-dependent -- every element except
those where all terms of each step lie on the grid ``2**(E - 23)`` and the exact sum is a float32
(any datapath keeping float32's 23 bits gives that sum; below 23 bits -- Hopper keeps 13 -- even
this could differ, which is the bracket's premise, stated here).
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Iterator, Literal, NamedTuple

import numpy as np

from fp8check.errors import InvalidValueError
from fp8check.formats import SOURCE_FORMATS, Format, get as get_format, names as format_names
from fp8check.reference import decode_table, fast

__all__ = ["MMAModel", "MMAResult", "MODELS", "TARGETS", "model", "models_for", "mma", "dot_instances",
           "operand_values", "TritonDot", "triton_dot", "fed", "triton_operands", "mma_k_order", "float16_codes", "Recorder",
           "dot_models", "record_dot_model", "dot_steps", "record_dot_step", "dot_tile"]

MMASIM = "MMA-Sim (arXiv:2511.10909), package mmasim 2.1.1"
Algorithm = Literal["aligned", "grouped-scaled", "two-stage"]
Status = Literal["mmasim", "bracketed"]

_FP8_OCP = ("e4m3fn", "e5m2")
_FP8_FNUZ = ("e4m3fnuz", "e5m2fnuz")
_F6F4 = ("e3m2fn", "e2m3fn", "e2m1fn")
_WIDE = ("bfloat16", "float16")


@dataclass(frozen=True, kw_only=True)
class MMAModel:
    """One matrix instruction's arithmetic (see the module docstring for the algorithms).

    ``instruction_k``: K of the instruction Triton emits; ``chunk``: products fused per step
    (MMA-Sim's ``L_max``; an instruction of larger K is ``instruction_k / chunk`` chained steps);
    ``fraction_bits``: F; ``result_bits``: fractional bits of an ``aligned`` step's truncated
    result; ``second_fraction_bits``: F2 of ``two-stage``; ``pairs``: two-stage over the even and
    the odd products separately; ``drop_tiny_c``: two-stage drops a ``c`` more than F + 1 binades
    below the dot; ``scale_block``/``scale_formats``/``scale_group``: block scaling (K per scale,
    the scale formats, products summed exactly per group before scaling)."""

    name: str
    target: str
    instruction: str
    operands: tuple[str, ...]
    algorithm: Algorithm
    instruction_k: int
    chunk: int
    fraction_bits: int
    result_bits: int = 23
    zero_exponent: int = -133
    second_fraction_bits: int = 0
    pairs: bool = False
    drop_tiny_c: bool = False
    scale_block: int | None = None
    scale_formats: tuple[str, ...] = ()
    scale_group: int | None = None
    status: Status = "mmasim"
    specials: Literal["ieee-sum", "target-dependent"] = "ieee-sum"
    source: str = MMASIM
    summary: str = field(default="", compare=False)

    @property
    def scaled(self) -> bool:
        return self.scale_block is not None


def _nv(name: str, target: str, instruction: str, operands: tuple[str, ...], k: int, chunk: int, f: int,
        result_bits: int, zero: int, where: str, summary: str, **kw: Any) -> MMAModel:
    return MMAModel(name=name, target=target, instruction=instruction, operands=operands, algorithm="aligned",
                    instruction_k=k, chunk=chunk, fraction_bits=f, result_bits=result_bits, zero_exponent=zero,
                    source=f"{MMASIM}: {where}", summary=summary, **kw)


SM90_WGMMA_FP8 = _nv("sm90-wgmma-fp8", "sm90", "wgmma.mma_async.sp?.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}", _FP8_OCP,
                     32, 32, 13, 13, -133, "nv_ptx/sim.py WGMMA (F=13, RZ-E8M13, L_max=32, e_zero=-133)",
                     "Hopper FP8: 32 products and c aligned to the largest exponent, truncated to 13 fractional "
                     "bits, summed, the sum truncated to 13 fractional bits")
SM90_WGMMA_16 = _nv("sm90-wgmma-16bit", "sm90", "wgmma.mma_async.m64nNk16.f32.{bf16,f16}", _WIDE,
                    16, 16, 25, 23, -133, "nv_ptx/sim.py WGMMA (F=25, RZ-FP32, L_max=16, e_zero=-133)",
                    "Hopper bf16/fp16: 16 products aligned, 25 fractional bits, truncated into float32")
SM90_MMA_16 = replace(
    SM90_WGMMA_16, name="sm90-mma-16bit", instruction="mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32",
    source=f"{MMASIM}: nv_ptx/sim.py MMA, Hopper (F=25, RZ-FP32, L_max=32 bytes / 2 = 16, e_zero=-133)",
    summary="Hopper mma.sync bf16/fp16 (Triton's MMAv2, for tiles wgmma does not take; fp8 operands upcast to fp16 "
            "exactly, K in MMAv2's 8-bit order): 16 products aligned, 25 fractional bits, truncated into float32")
SM89_MMA_FP8 = _nv("sm89-mma-fp8", "sm89", "mma.sync.m16n8k32.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32", _FP8_OCP,
                   32, 16, 13, 13, -132, "nv_ptx/sim.py MMA, Ada Lovelace FP8 (F=13, RZ-E8M13, L_max=16, e_zero=-132)",
                   "Ada FP8: two steps of 16 products per k32 instruction, 13 fractional bits, truncation")
SM89_MMA_16 = _nv("sm89-mma-16bit", "sm89", "mma.sync.m16n8k16.f32.{bf16,f16}.{bf16,f16}.f32", _WIDE,
                  16, 8, 24, 23, -132, "nv_ptx/sim.py MMA, Ada Lovelace (F=24, RZ-FP32, L_max=8, e_zero=-132)",
                  "Ada bf16/fp16: steps of 8 products, 24 fractional bits, truncated into float32")
SM100_TCGEN05_F8F6F4 = _nv("sm100-tcgen05-f8f6f4", "sm100", "tcgen05.mma.cta_group::1.kind::f8f6f4 (k32, f32)",
                           _FP8_OCP + _F6F4, 32, 32, 25, 23, -133,
                           "nv_ptx/sim.py TCGen05MMA (F=25, RZ-FP32, L_max=32, e_zero=-133)",
                           "Blackwell FP8/FP6/FP4: 32 products aligned, 25 fractional bits, truncated into float32")
SM100_TCGEN05_16 = _nv("sm100-tcgen05-16bit", "sm100", "tcgen05.mma.cta_group::1.kind::f16 (k16, f32)", _WIDE,
                       16, 16, 25, 23, -133, "nv_ptx/sim.py TCGen05MMA (F=25, RZ-FP32, L_max=16, e_zero=-133)",
                       "Blackwell bf16/fp16: 16 products aligned, 25 fractional bits, truncated into float32")
SM100_TCGEN05_MXF8F6F4 = _nv("sm100-tcgen05-mxf8f6f4", "sm100",
                             "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 (k32, ue8m0)",
                             _FP8_OCP + _F6F4, 32, 32, 25, 23, -133,
                             "nv_ptx/sim.py TCGen05MMABlockScale k32 -> arithmetic/fdpa.py st_fdpa "
                             "(F=25, RZ-FP32, L_max=32, e_zero=-133)",
                             "Blackwell MXFP8/MXFP6/MXFP4 (one e8m0 scale per 32 for each operand): each product "
                             "times both scales, aligned with 25 fractional bits, truncated into float32",
                             scale_block=32, scale_formats=("e8m0fnu",))
SM100_TCGEN05_MXF4 = MMAModel(
    name="sm100-tcgen05-mxf4", target="sm100",
    instruction="tcgen05.mma.cta_group::1.kind::{mxf4,mxf4nvf4}.block_scale (k64; block32 ue8m0, block16 ue8m0/ue4m3)",
    operands=("e2m1fn",), algorithm="grouped-scaled", instruction_k=64, chunk=64, fraction_bits=35, result_bits=23,
    zero_exponent=-139, scale_block=16, scale_formats=("e8m0fnu", "e4m3fn"), scale_group=16,
    source=f"{MMASIM}: nv_ptx/sim.py TCGen05MMABlockScale k64 -> arithmetic/fdpa.py gst_fdpa "
           "(G=16, F=35, RZ-FP32, L_max=64, e_zero=-139); e4m3 scales read as ue4m3 (sign bit ignored)",
    summary="Blackwell NVFP4 (e4m3 scale per 16) and MXFP4 (e8m0 per 32): groups of 16 fp4 products summed "
            "exactly, scaled, aligned with 35 fractional bits, truncated into float32")
GFX942_MFMA_FP8 = MMAModel(
    name="gfx942-mfma-fp8", target="gfx942",
    instruction="v_mfma_f32_{16x16x32,32x32x16}_{fp8,bf8}_{fp8,bf8}", operands=_FP8_FNUZ, algorithm="two-stage",
    instruction_k=32, chunk=16, fraction_bits=24, second_fraction_bits=31, pairs=True, drop_tiny_c=True,
    zero_exponent=-999, specials="target-dependent",
    source=f"{MMASIM}: amd/sim.py MFMA CDNA3 fp8 -> arithmetic/fdpa.py gtr_fdpa (F=24, F2=31, RNE-FP32, "
           "L_max=16); NaN/Inf marked TODO by MMA-Sim: bracketed",
    summary="CDNA3 FP8 (fnuz): groups of 16 as even and odd halves, truncated to 24 bits, rounded down twice, "
            "rounded to nearest even into float32")
GFX942_MFMA_16 = MMAModel(
    name="gfx942-mfma-16bit", target="gfx942", instruction="v_mfma_f32_{32x32x8,16x16x16}_{bf16,f16}",
    operands=_WIDE, algorithm="two-stage", instruction_k=16, chunk=8, fraction_bits=24, second_fraction_bits=31,
    zero_exponent=-999, specials="target-dependent",
    source=f"{MMASIM}: amd/sim.py MFMA CDNA3 bf16/f16 -> arithmetic/fdpa.py tr_fdpa (F=24, F2=31, RNE-FP32, "
           "L_max=8); NaN/Inf marked TODO by MMA-Sim: bracketed",
    summary="CDNA3 bf16/fp16: steps of 8 products truncated to 24 bits, rounded down twice, rounded to nearest "
            "even into float32")
GFX950_MFMA_FP8 = replace(
    GFX942_MFMA_FP8, name="gfx950-mfma-fp8", target="gfx950", operands=_FP8_OCP,
    instruction="v_mfma_f32_{16x16x128,32x32x64}_f8f6f4 and the CDNA3 fp8 shapes, OCP operands",
    status="bracketed",
    source="not in MMA-Sim 2.1.1 (no CDNA4): CDNA3's datapath assumed, every element it cannot fix bracketed",
    summary="CDNA4 OCP FP8: bracketed (CDNA3's datapath assumed; elements that depend on it target-dependent)")
GFX950_MFMA_SCALE = replace(
    GFX950_MFMA_FP8, name="gfx950-mfma-scale-f8f6f4", operands=_FP8_OCP + _F6F4, scale_block=32,
    scale_formats=("e8m0fnu",), instruction="v_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4 (e8m0 per 32)",
    source="not in MMA-Sim 2.1.1 (no CDNA4): CDNA3's datapath assumed with each product times both scales, "
           "every element it cannot fix bracketed (tl.dot_scaled's native gfx950 lowering)",
    summary="CDNA4 MXFP8/MXFP4: bracketed (CDNA3's datapath assumed; elements that depend on it target-dependent)")

MODELS: dict[str, MMAModel] = {m.name: m for m in (
    SM90_WGMMA_FP8, SM90_WGMMA_16, SM90_MMA_16, SM89_MMA_FP8, SM89_MMA_16, SM100_TCGEN05_F8F6F4, SM100_TCGEN05_16,
    SM100_TCGEN05_MXF8F6F4, SM100_TCGEN05_MXF4, GFX942_MFMA_FP8, GFX942_MFMA_16, GFX950_MFMA_FP8,
    GFX950_MFMA_SCALE)}
TARGETS = ("sm89", "sm90", "sm100", "gfx942", "gfx950")


class TritonDot(NamedTuple):
    """The instruction compiled Triton gives a ``tl.dot`` tile where it is not the target's own for the operands
    (:func:`triton_dot`): its model, the formats it takes the operands in, and whether K reaches its chained
    instructions in MMAv2's 8-bit order (:func:`mma_k_order`)."""

    model: MMAModel
    a_fmt: str
    b_fmt: str
    k_order: bool = False


def triton_dot(target: str, m: int, a_fmt: str, b_fmt: str) -> TritonDot | None:
    """The instruction compiled Triton gives a ``tl.dot`` of an (m, K) tile on ``target`` where it is not the
    target's own model for the operands (:func:`model`), with the operand formats it runs on (convert with
    :func:`triton_operands`); None where it is.

    gfx942: CDNA3 has no OCP fp8 MFMA; Triton converts e4m3fn/e5m2 operands to float16 (exactly,
    docs/triton.md) and runs the f16 MFMA. sm90: wgmma (MMAv3) takes tiles whose M is a multiple of 64 (a warp
    group's 64 rows; num_warps a multiple of 4); any other tile gets MMAv2, ``mma.sync.m16n8k16`` -- with fp8
    operands converted to fp16 (exactly), K fed in :func:`mma_k_order`: the Triton 3.9 PTX of DeepSeek-V3's
    ``fp8_gemm_kernel`` at BLOCK_SIZE_M 16 and 32 (num_warps 8) is
    ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``, at 64 ``wgmma.mma_async...m64n64k32.f32.e4m3.e4m3``;
    an H100 (Triton 3.6) gave this model's bits on 2^20 elements of each kind (gpu/results/mma-tiles.json)."""
    if target == "gfx942" and a_fmt in _FP8_OCP and b_fmt in _FP8_OCP:
        return fed(GFX942_MFMA_16, a_fmt, b_fmt)
    if target == "sm90" and m % 64 != 0 and a_fmt in _FP8_OCP + _WIDE and b_fmt in _FP8_OCP + _WIDE:
        return fed(SM90_MMA_16, a_fmt, b_fmt)
    return None


def fed(model: MMAModel, a_fmt: str, b_fmt: str) -> TritonDot:
    """How Triton feeds operands of ``a_fmt`` and ``b_fmt`` to ``model``'s instruction: fp8 operands of a 16-bit
    instruction converted to float16, and, on sm90's MMAv2, K in :func:`mma_k_order` when one is 8-bit."""
    wide = [f if f in model.operands else "float16" for f in (a_fmt, b_fmt)]
    eight_bit = any(f not in _WIDE for f in (a_fmt, b_fmt))
    return TritonDot(model, wide[0], wide[1], k_order=model is SM90_MMA_16 and eight_bit)


def mma_k_order(k: int) -> np.ndarray:
    """The order in which sm90's MMAv2 feeds a tile's K to its chained ``mma.sync.m16n8k16`` when the operands
    are 8-bit, converted to fp16 in registers: K in groups of 32 (an 8-bit operand's register holds 4 k, of
    which the first two go to one instruction and the last two to the next), the instruction of group g's
    even pairs -- k (0, 1), (4, 5), ..., (28, 29) -- then that of its odd pairs, group by group. The fp16 tile
    of the same values chains k in increasing order. Measured: on an H100 (Triton 3.6) this order gives
    every one of 2^20 elements of e4m3 and e5m2 tiles at K = 32 and 128, the increasing order 5-10% of them
    1 to 5 ulp off (gpu/results/mma-tiles.json). ``k`` is padded to a multiple of 32 (zero codes)."""
    quads = np.arange(-(-k // 32) * 32).reshape(-1, 8, 4)
    return np.concatenate([quads[:, :, :2].reshape(-1, 16), quads[:, :, 2:].reshape(-1, 16)], axis=1).ravel()


def triton_operands(dot: TritonDot, a: np.ndarray, a_fmt: str, b: np.ndarray,
                    b_fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """A (..., M, K) and B (..., K, N) codes as the instruction of ``dot`` takes them: converted to its formats
    (:func:`float16_codes`) and, where ``dot.k_order``, K padded with zero codes and permuted to
    :func:`mma_k_order` (the chain of instructions then sees K in the hardware's order)."""
    a = a if a_fmt == dot.a_fmt else float16_codes(a, a_fmt)
    b = b if b_fmt == dot.b_fmt else float16_codes(b, b_fmt)
    if not dot.k_order:
        return a, b
    order = mma_k_order(a.shape[-1])
    pad = len(order) - a.shape[-1]
    a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,), a.dtype)], axis=-1) if pad else a
    b = np.concatenate([b, np.zeros(b.shape[:-2] + (pad,) + b.shape[-1:], b.dtype)], axis=-2) if pad else b
    return a[..., order], b[..., order, :]


def float16_codes(codes: np.ndarray, fmt: str) -> np.ndarray:
    """fp8 ``codes`` of ``fmt`` as float16 bit patterns (uint16): the exact conversion Triton makes for an
    instruction that takes fp16 operands (:func:`triton_dot`)."""
    from fp8check.reference import decode

    return decode(codes, fmt).astype(np.float16).view(np.uint16)


class Recorder:
    """What the faithful interpreter's matrix ops chose while a kernel ran (the instruction of each ``tl.dot``,
    the lowering of each ``tl.dot_scaled``), counted by name inside :meth:`counting` blocks: the gemm kind's
    reference then follows what the kernel's tiles got."""

    def __init__(self) -> None:
        self._open: list[Counter[str]] = []

    @contextlib.contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        seen: Counter[str] = Counter()
        self._open.append(seen)
        try:
            yield seen
        finally:
            self._open.remove(seen)

    def record(self, name: str) -> None:
        for seen in self._open:
            seen[name] += 1


DOT_MODELS = Recorder()  # the models of tl.dot calls
DOT_STEPS = Recorder()  # the K extent of tl.dot calls from a zero accumulator ("k64"), and "chained" for the others


def dot_models() -> contextlib.AbstractContextManager[Counter[str]]:
    """Count the models the faithful interpreter's ``tl.dot`` calls use inside the block (by name)."""
    return DOT_MODELS.counting()


def record_dot_model(name: str) -> None:
    DOT_MODELS.record(name)


def dot_steps() -> contextlib.AbstractContextManager[Counter[str]]:
    """Count the K extents of the faithful interpreter's ``tl.dot`` calls from a zero accumulator (``"k64"``),
    and the calls that chain an accumulator (``"chained"``), inside the block: a GEMM whose scaled dots are
    each one ``tl.dot(a, b)`` over a K tile shorter than its scales' block sums them tile by tile."""
    return DOT_STEPS.counting()


def record_dot_step(k: int, from_zero: bool) -> None:
    DOT_STEPS.record(f"k{k}" if from_zero else "chained")


def dot_tile(steps: Counter[str]) -> int | None:
    """The one K tile of the counted ``tl.dot`` calls (:func:`dot_steps`) where every call starts from zero, or
    None (several tiles, or an accumulator chained through a call)."""
    tiles = {int(s[1:]) for s in steps if s != "chained"}
    return tiles.pop() if len(tiles) == 1 and "chained" not in steps else None


def models_for(target: str) -> tuple[MMAModel, ...]:
    if target not in TARGETS:
        raise InvalidValueError(f"no tensor-core model for target {target!r}; known: {', '.join(TARGETS)}")
    return tuple(m for m in MODELS.values() if m.target == target)


def model(target: str, a_fmt: object, b_fmt: object, *, scaled: bool = False) -> MMAModel:
    """The model of ``target``'s instruction for operands of formats ``a_fmt`` and ``b_fmt`` (``scaled``:
    the block-scaled kind, ``tl.dot_scaled``). Raises InvalidValueError naming what the target has."""
    names = (_fmt_name(a_fmt), _fmt_name(b_fmt))
    found = [m for m in models_for(target) if m.scaled == scaled and all(n in m.operands for n in names)]
    if scaled and names[0] == names[1] == "e2m1fn":
        found = [m for m in found if m.algorithm == "grouped-scaled"] or found
    if not found:
        kind = "block-scaled " if scaled else ""
        have = "; ".join(f"{m.name}: {', '.join(m.operands)}" for m in models_for(target) if m.scaled == scaled)
        raise InvalidValueError(f"{target} has no {kind}matrix instruction for {names[0]} x {names[1]} "
                                f"operands ({have or 'none'})")
    return found[0]


# -- operands ----------------------------------------------------------------------------------------

_NAMES = frozenset(SOURCE_FORMATS) | frozenset(format_names())


def _fmt_name(fmt: object) -> str:
    if isinstance(fmt, str) and fmt in _NAMES:  # already a name (the common call): no lookup
        return fmt
    return get_format(fmt).name


_ZERO = -(1 << 20)


@lru_cache(maxsize=None)
def _tables(fmt_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(value with NaN/Inf as 0, exponent clamped to emin, special (NaN/Inf), value, emin) for every code of
    a format; 16-bit formats (float16, bfloat16) by their bit patterns."""
    if fmt_name in SOURCE_FORMATS:
        fmt: Format = SOURCE_FORMATS[fmt_name]
        codes = np.arange(1 << 16, dtype=np.uint32)
        if fmt_name == "float16":
            raw = codes.astype(np.uint16).view(np.float16).astype(np.float64)
        else:
            with np.errstate(invalid="ignore"):  # NaN bit patterns
                raw = (codes << 16).view(np.float32).astype(np.float64)
    else:
        fmt = get_format(fmt_name)
        raw = decode_table(fmt).copy()
    special = ~np.isfinite(raw)
    values = np.where(special, 0.0, raw)
    _, e = np.frexp(values)
    # a zero's exponent lies below every product's: the zero rule or the largest exponent never sees it
    exps = np.where(values == 0, _ZERO, np.maximum(e.astype(np.int32) - 1, fmt.emin)).astype(np.int32)
    for t in (values, exps, special, raw):
        t.setflags(write=False)
    return values, exps, special, raw, fmt.emin


def operand_values(codes: Any, fmt: object) -> np.ndarray:
    """The exact float64 values of ``codes`` of ``fmt`` (an fp8/fp6/fp4 format, or ``"float16"``/``"bfloat16"``
    with uint16 bit patterns); NaN and Inf as such."""
    return _tables(_fmt_name(fmt))[3][np.asarray(codes).astype(np.intp)]


# -- the exact steps ---------------------------------------------------------------------------------

def _f32_exponent(c: np.ndarray) -> np.ndarray:
    """float32 exponent clamped to -126 (a subnormal's and a zero's -126)."""
    field_ = (c.view(np.uint32) >> 23) & 0xFF
    return np.maximum(field_.astype(np.int32) - 127, -126)


def _pow2(e: np.ndarray) -> np.ndarray:
    return np.ldexp(1.0, np.clip(e, -1074, 1023).astype(np.int32))


def _truncate_result(v: np.ndarray, g: int) -> np.ndarray:
    """float32 of ``v`` (finite float64) truncated toward zero to ``g`` fractional bits at its own exponent,
    float32's exponent range (below 2**-126 the grid stays 2**(-126-g); from 2**128: Inf)."""
    bits = v.view(np.int64)
    e = ((bits >> 52) & 0x7FF).astype(np.int32) - 1023
    normal = (bits & ~np.int64((1 << (52 - g)) - 1)).view(np.float64)
    tiny = np.trunc(v * 2.0 ** (126 + g)) * 2.0 ** -(126 + g)
    with np.errstate(over="ignore"):
        return np.where(e >= -126, normal, tiny).astype(np.float32)


def _aligned(m: MMAModel, c: np.ndarray, pv: np.ndarray, pe: np.ndarray) -> np.ndarray:
    """One ``aligned`` step: c (B, N) float32, pv/pe (B, L, N) exact terms and their exponents."""
    ec = np.where(c == 0, m.zero_exponent, _f32_exponent(c))
    top = np.maximum(pe.max(axis=1), ec)
    scale = _pow2(m.fraction_bits - top)
    if pv.dtype == np.float32:  # exact in float32 (_narrow); a step of zero products needs no scale
        t = pv * _pow2(m.fraction_bits - np.maximum(top, -100)).astype(np.float32)[:, None, :]
    else:
        t = pv * scale[:, None, :]
    np.trunc(t, out=t)
    total = t.sum(axis=1).astype(np.float64) + np.trunc(c.astype(np.float64) * scale)
    return _truncate_result(total / scale, m.result_bits) + np.float32(0)  # -0 -> +0


def _two_stage(m: MMAModel, c: np.ndarray, pv: np.ndarray, pe: np.ndarray) -> np.ndarray:
    f, f2 = m.fraction_bits, m.second_fraction_bits
    groups = ((pv[:, 0::2], pe[:, 0::2]), (pv[:, 1::2], pe[:, 1::2])) if m.pairs else ((pv, pe),)
    tops, sums = [], []
    for gv, ge in groups:
        top = ge.max(axis=1)
        t = gv * _pow2(f - top)[:, None, :]
        np.trunc(t, out=t)
        tops.append(top)
        sums.append(t.sum(axis=1) + 0.0)  # units 2**(top - f)
    e_dot = np.maximum.reduce(tops) if len(tops) > 1 else tops[0]
    s_dot = sum(np.floor(s * _pow2(t - e_dot)) for s, t in zip(sums, tops))  # units 2**(e_dot - f)
    ec = _f32_exponent(c)
    e_max = np.maximum(e_dot, ec)
    sd = np.floor(s_dot * _pow2(e_dot - e_max + f2 + 1 - f))  # units 2**(e_max - f2 - 1)
    sc = np.floor(c.astype(np.float64) * _pow2(f - e_max))  # units 2**(e_max - f)
    if m.drop_tiny_c:
        sc = np.where(ec < e_max - f - 1, 0.0, sc)
    v = (sd + sc * 2.0 ** (f2 + 1 - f)) * _pow2(e_max - f2 - 1)
    ev = np.maximum(((v.view(np.int64) >> 52) & 0x7FF).astype(np.int32) - 1023, -126)
    grid = _pow2(ev - f2)
    with np.errstate(over="ignore"):
        return (np.floor(v / grid) * grid).astype(np.float32) + np.float32(0)


@dataclass(frozen=True)
class MMAResult:
    """What :func:`mma` returns: ``values`` float32 (``bits`` is their uint32 view), ``target_dependent``
    bool: the elements the model brackets, and the model. A bracketed element's value is one candidate
    (NaN/Inf as a float sum; gfx950: CDNA3's datapath), not a verdict: judge it as target-dependent."""

    values: np.ndarray
    target_dependent: np.ndarray
    model: MMAModel

    @property
    def bits(self) -> np.ndarray:
        return self.values.view(np.uint32)


_Scales = tuple[np.ndarray, np.ndarray, np.ndarray]  # value, exponent, NaN; 3-D, K blocks on axis 1


def _scale_terms(m: MMAModel, scales: Any, fmt: object, k_blocks: int, k_axis: int) -> _Scales:
    """(value, exponent, NaN) of block scales, K blocks moved to axis 1 of a 3-D array; ue4m3 scales
    ignore the sign bit (MMA-Sim's ``truncate_e4m3_to_ue4m3``)."""
    name, codes = _scale_codes(m, scales, fmt, k_blocks, k_axis)
    codes = codes.astype(np.intp)
    if name == "e4m3fn":
        codes = codes & 0x7F
    codes = codes[:, :, None] if k_axis == 1 else codes[None, :, :]
    values, exps, special, _, _ = _tables(name)
    return values[codes], exps[codes], special[codes]


def _scale_codes(m: MMAModel, scales: Any, fmt: object, k_blocks: int, k_axis: int) -> tuple[str, np.ndarray]:
    """The scale format's name and the codes (2-D, ``k_blocks`` along ``k_axis``), checked."""
    name = _fmt_name(fmt)
    if name not in m.scale_formats:
        raise InvalidValueError(f"{m.name}: scales of {name} not supported ({', '.join(m.scale_formats)})")
    codes = np.asarray(scales)
    if codes.ndim != 2 or codes.shape[k_axis] != k_blocks:
        raise InvalidValueError(f"{m.name}: {k_blocks} scale blocks along K expected, got scales of shape "
                                f"{codes.shape}")
    return name, codes


def _block(m: MMAModel, K: int, k_blocks: int, scale_fmt: object) -> int:
    block = -(-K // k_blocks)
    allowed = (32,) if m.algorithm == "aligned" else ((16,) if _fmt_name(scale_fmt) == "e4m3fn" else (16, 32))
    if block not in allowed or k_blocks * block < K:
        raise InvalidValueError(f"{m.name}: K={K} with {k_blocks} scale blocks is a block of {block}; "
                                f"{_fmt_name(scale_fmt)} scales need blocks of {' or '.join(map(str, allowed))}")
    return block


def _as_float32(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    return arr.view(np.float32) if arr.dtype == np.uint32 else arr.astype(np.float32, copy=False)


def mma(target_or_model: str | MMAModel, a_codes: Any, a_fmt: object, b_codes: Any, b_fmt: object, *,
        acc: Any = None, a_scales: Any = None, b_scales: Any = None, scale_fmt: object = "e8m0fnu",
        promotion: int | None = None) -> MMAResult:
    """``acc + A @ B`` as ``target``'s matrix instructions compute it, bit for bit where the model is known.

    ``a_codes`` (M, K) and ``b_codes`` (K, N): codes of ``a_fmt``/``b_fmt`` (uint8 for fp8, fp6, fp4 one
    per byte in the low bits; uint16 bit patterns for ``"bfloat16"``/``"float16"``). ``acc``: (M, N)
    float32 (values, or uint32 bits), zeros when None. K is split into the instruction's K in increasing
    k, zero-padded at the tail (Triton's masked loads give zeros), chained through the accumulator; with
    ``promotion`` R (sm90 FP8 under ``max_num_imprecise_acc = 32 R``), a chain from zero is added into
    the float32 ``acc`` every R instructions and at the end. Block-scaled kinds (``target`` sm100):
    ``a_scales`` (M, K / block) and ``b_scales`` (K / block, N), codes of ``scale_fmt`` (``e8m0fnu``, or
    ``e4m3fn`` for NVFP4's blocks of 16).

    Returns :class:`MMAResult`: float32 values and the target-dependent mask (AMD NaN/Inf, gfx950)."""
    a_name, b_name = _fmt_name(a_fmt), _fmt_name(b_fmt)
    scaled = a_scales is not None or b_scales is not None
    m = target_or_model if isinstance(target_or_model, MMAModel) else model(target_or_model, a_name, b_name,
                                                                             scaled=scaled)
    a, b = np.asarray(a_codes), np.asarray(b_codes)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise InvalidValueError(f"mma: A (M, K) and B (K, N) expected, got shapes {a.shape} and {b.shape}")
    M, K = a.shape
    N = b.shape[1]
    c = np.zeros((M, N), dtype=np.float32) if acc is None else np.broadcast_to(_as_float32(acc), (M, N)).copy()
    if m.scaled and (a_scales is None or b_scales is None):
        raise InvalidValueError(f"{m.name} needs a_scales and b_scales")
    _check_operands(m, (a_name, a), (b_name, b))
    kb = np.shape(a_scales)[1] if m.scaled else 0
    block = _block(m, K, kb, scale_fmt) if m.scaled else 0
    if m.scaled:
        sa, sb = _scale_codes(m, a_scales, scale_fmt, kb, 1)[1], _scale_codes(m, b_scales, scale_fmt, kb, 0)[1].T
        fused = _fused(m, (a, a_name), (b.T, b_name), c, (sa, sb, _fmt_name(scale_fmt), block), promotion)
    else:
        fused = _fused(m, (a, a_name), (b.T, b_name), c, None, promotion)
    if fused is not None:
        return fused
    scales = None
    if m.scaled:
        scales = (_scale_terms(m, a_scales, scale_fmt, kb, 1), _scale_terms(m, b_scales, scale_fmt, kb, 0), block)
    return _run(m, (a[:, :, None], a_name), (b[None, :, :], b_name), c, scales, promotion)


def dot_instances(target_or_model: str | MMAModel, a_codes: Any, a_fmt: object, b_codes: Any, b_fmt: object,
                  c: Any, *, a_scales: Any = None, b_scales: Any = None, scale_fmt: object = "e8m0fnu") -> MMAResult:
    """T independent dot products: row t of ``a_codes`` (T, K) with row t of ``b_codes`` (T, K), from
    ``c[t]`` (T,) float32 -- what one output element of the instructions computes (MMA-Sim's ``dpa``).
    Scales: (T, K / block) each. Returns values and mask of shape (T,)."""
    a_name, b_name = _fmt_name(a_fmt), _fmt_name(b_fmt)
    m = target_or_model if isinstance(target_or_model, MMAModel) else model(target_or_model, a_name, b_name,
                                                                             scaled=a_scales is not None)
    a, b = np.asarray(a_codes), np.asarray(b_codes)
    cc = _as_float32(c).reshape(-1, 1)
    _check_operands(m, (a_name, a), (b_name, b))
    kb = np.shape(a_scales)[1] if m.scaled else 0
    block = _block(m, a.shape[1], kb, scale_fmt) if m.scaled else 0
    if m.scaled:
        sa, sb = _scale_codes(m, a_scales, scale_fmt, kb, 1)[1], _scale_codes(m, b_scales, scale_fmt, kb, 1)[1]
        res = _fused(m, (a, a_name), (b, b_name), cc, (sa, sb, _fmt_name(scale_fmt), block), None, paired=True)
    else:
        res = _fused(m, (a, a_name), (b, b_name), cc, None, None, paired=True)
    if res is None:
        scales = None
        if m.scaled:
            scales = (_scale_terms(m, a_scales, scale_fmt, kb, 1), _scale_terms(m, b_scales, scale_fmt, kb, 1),
                      block)
        res = _run(m, (a[:, :, None], a_name), (b[:, :, None], b_name), cc.copy(), scales, None)
    return MMAResult(res.values[:, 0], res.target_dependent[:, 0], m)


def tile_instances(a_codes: Any, b_codes: Any) -> tuple[np.ndarray, np.ndarray]:
    """A batch of independent tiles, ``a_codes`` (T, M, K) and ``b_codes`` (T, K, N), as the rows of
    :func:`dot_instances`: (T * M * N, K) each, output element (t, i, j) at row ``(t * M + i) * N + j``
    (row i of tile t's A against its column j of B); pass the accumulators as ``c.reshape(-1)`` and
    reshape the values to (T, M, N)."""
    a, b = np.asarray(a_codes), np.asarray(b_codes)
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise InvalidValueError(f"tile_instances: A (T, M, K) and B (T, K, N) expected, got shapes {a.shape} and "
                                f"{b.shape}")
    (T, M, K), N = a.shape, b.shape[2]
    rows = np.broadcast_to(a[:, :, None, :], (T, M, N, K)).reshape(-1, K)
    cols = np.broadcast_to(np.swapaxes(b, 1, 2)[:, None, :, :], (T, M, N, K)).reshape(-1, K)
    return rows, cols


def _run(m: MMAModel, a: tuple[np.ndarray, str], b: tuple[np.ndarray, str], c: np.ndarray,
         scales: tuple[_Scales, _Scales, int] | None, promotion: int | None) -> MMAResult:
    """The chain along K: ``a`` (B, K, 1)-like and ``b`` (1, K, N)-like broadcastable code arrays."""
    (ac, an), (bc, bn) = a, b
    at, bt = _tables(an), _tables(bn)
    _check_codes(m, (an, ac, len(at[0])), (bn, bc, len(bt[0])))
    K = ac.shape[1]
    # a product whose exponent can fall below the zero exponent needs the zero rule term by term
    zero_rule = at[4] + bt[4] <= m.zero_exponent or m.scaled or m.algorithm == "two-stage"
    small = len(at[0]) <= 256 and len(bt[0]) <= 256
    pair = _pair_tables(an, bn, m.zero_exponent, _narrow(m)) if small and m.algorithm != "grouped-scaled" else None
    if pair is not None and not m.scaled:
        zero_rule = False  # the pair tables hold the zero exponent
    dependent = np.zeros(c.shape, dtype=bool)
    steps = -(-K // m.instruction_k)
    total, chain = (c, np.zeros_like(c)) if promotion else (None, c)
    for j in range(steps):
        for s0 in range(j * m.instruction_k, (j + 1) * m.instruction_k, m.chunk):
            ai, bi = _padded(ac, s0, m.chunk), _padded(bc, s0, m.chunk)
            chain, dep = _chunk(m, chain, ai, bi, at, bt, scales, s0, zero_rule, pair)
            dependent |= dep
        if promotion and ((j + 1) % promotion == 0 or j == steps - 1):
            total = (total + chain).astype(np.float32)  # Triton's fadd of the partial accumulator (RNE)
            chain = np.zeros_like(chain)
    out = (chain if total is None else total).copy()
    nan = np.isnan(out)
    if nan.any():
        out.view(np.uint32)[nan] = 0x7FFFFFFF  # MMA-Sim's NaN
    return MMAResult(out, dependent, m)


def _check_operands(m: MMAModel, *operands: tuple[str, np.ndarray]) -> None:
    for name, codes in operands:
        if name not in m.operands:
            raise InvalidValueError(f"{m.name} takes {', '.join(m.operands)} operands, not {name}")
        if codes.dtype.kind not in "iub":
            raise InvalidValueError(f"{m.name}: {name} operands are codes (integers; 16-bit formats as uint16 "
                                    f"bit patterns), got an array of {codes.dtype}")


def _check_codes(m: MMAModel, *operands: tuple[str, np.ndarray, int]) -> None:
    """Codes within their format (``count`` codes), or a signed array of its width (int8 for 8-bit formats: the
    same bytes). Asked on the NumPy steps only: the compiled kernels decline a code outside its format."""
    for name, codes, count in operands:
        signed_view = codes.dtype.kind == "i" and 1 << (8 * codes.dtype.itemsize) == count
        if codes.size == 0 or signed_view:
            continue
        low, high = int(codes.min()), int(codes.max())
        if low < 0 or high >= count:
            bad = low if low < 0 else high
            raise InvalidValueError(f"{m.name}: {name} codes lie in 0..{count - 1}, got {bad} (a packed array, or "
                                    f"another format's codes?)")


def _padded(codes: np.ndarray, s0: int, width: int) -> np.ndarray:
    """codes[:, s0:s0+width], zero codes (0: +0 in every format) past K."""
    part = codes[:, s0:s0 + width]
    if part.shape[1] == width:
        return part
    pad = np.zeros(part.shape[:1] + (width - part.shape[1],) + part.shape[2:], dtype=part.dtype)
    return np.concatenate([part, pad], axis=1)


# -- the compiled engine ------------------------------------------------------------------------------

_COMPILED: list[Any] = []


def _compiled_step() -> Any:
    """The numba-compiled steps (:mod:`fp8check.matmul._compiled`), or None (numba missing, or
    ``FP8CHECK_NUMBA=0``): they give the NumPy steps' bits."""
    if fast.numba_asked() == "0":
        return None
    if not _COMPILED:
        try:
            from fp8check.matmul import _compiled
            _COMPILED.append(_compiled)
        except ImportError:  # no numba (the 'fast' extra)
            _COMPILED.append(None)
        except Exception as exc:  # a numba that cannot load beside this NumPy must not break the model
            warnings.warn(f"fp8check: numba could not be loaded ({type(exc).__name__}: {exc}); the tensor-core "
                          "models run on NumPy", RuntimeWarning, stacklevel=2)
            _COMPILED.append(None)
    return _COMPILED[0]


@lru_cache(maxsize=None)
def _bit_layout(fmt_name: str) -> np.ndarray | None:
    """How the compiled engine decodes a code of a format of at most 256 codes by its bit fields: (mantissa
    bits, exponent mask, bias, sign shift, special mask, special value, code bits, magnitude mask, Inf mask,
    Inf value), a code being special (NaN/Inf) when ``code & mask == value``, Inf when ``code & Inf mask == Inf
    value``; checked here against the format's decode table (None: a format the layout does not describe -- its
    models run on NumPy)."""
    if fmt_name in SOURCE_FORMATS:
        return None
    fmt = get_format(fmt_name)
    if not fmt.signed or fmt.min_exponent_field != 1 or fmt.bits > 8:
        return None
    exp_field = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
    special = {"ieee": (exp_field, exp_field), "all_ones": (fmt.magnitude_mask, fmt.magnitude_mask),
               "negative_zero": ((1 << fmt.bits) - 1, fmt.sign_mask), "none": (0, 1)}[fmt.nan_encoding]
    inf = (fmt.magnitude_mask, exp_field) if fmt.nan_encoding == "ieee" else (0, 1)
    lay = np.array([fmt.mantissa_bits, (1 << fmt.exponent_bits) - 1, fmt.bias, fmt.bits - 1, *special, fmt.bits,
                    fmt.magnitude_mask, *inf], dtype=np.int64)
    values, exps, is_special, raw, _ = _tables(fmt_name)
    codes = np.arange(len(values), dtype=np.int64)
    ef = (codes >> lay[0]) & lay[1]
    sig = (codes & ((1 << lay[0]) - 1)) | ((ef != 0).astype(np.int64) << lay[0])
    e = np.maximum(ef, 1) - lay[2]
    decoded = np.where((codes >> lay[3]) & 1, -1.0, 1.0) * np.ldexp(sig.astype(np.float64), e - lay[0])
    flagged = (codes & lay[4]) == lay[5]
    infinite = (codes & lay[8]) == lay[9]
    nonzero = ~is_special & (values != 0)
    finite = ~is_special
    if not (np.array_equal(flagged, is_special) and np.array_equal(decoded[finite], values[finite])
            and np.array_equal(e[nonzero], exps[nonzero])
            and np.array_equal(((codes & lay[7]) != 0)[finite], nonzero[finite])
            and np.array_equal(infinite, np.isinf(raw))
            and np.array_equal(((codes >> lay[3]) & 1)[infinite] == 1, raw[infinite] < 0)):
        return None
    lay.setflags(write=False)
    return lay


@lru_cache(maxsize=None)
def _scale_table(fmt_name: str) -> tuple[np.ndarray, int]:
    """Per scale code: (significand, exponent, NaN) as int64 rows, ue4m3 reading e4m3 codes without their sign
    bit; and the format's mantissa bits (a scale is ``sig * 2**(exponent - mantissa bits)``)."""
    fmt = get_format(fmt_name)
    values, exps, special, _, _ = _tables(fmt_name)
    codes = np.arange(256) & (0x7F if fmt_name == "e4m3fn" else 0xFF)
    sig = np.where(values[codes] == 0, 0, np.ldexp(values[codes], fmt.mantissa_bits - exps[codes]))
    table = np.stack([sig.astype(np.int64), exps[codes].astype(np.int64), special[codes].astype(np.int64)])
    if not np.array_equal(table[0], sig):  # an integer significand: always for fp8 scales
        raise AssertionError(f"{fmt_name}: scale significands are not integers")
    table.setflags(write=False)
    return table, fmt.mantissa_bits


def _as_codes(codes: np.ndarray, count: int) -> np.ndarray | None:
    """Codes as a C-contiguous uint8 array, or None where some lie outside 0..255 (NumPy decides those)."""
    if codes.dtype != np.uint8:
        if codes.dtype.kind not in "iu" or (codes.size and (codes.min() < 0 or codes.max() >= count)):
            return None
        codes = codes.astype(np.uint8)
    return np.ascontiguousarray(codes)


def _read_only(x: np.ndarray) -> np.ndarray:
    """A read-only view of ``x`` (no copy)."""
    view = x.view()
    view.flags.writeable = False
    return view


_SPECIALISE_FROM = 1 << 22  # products of one call from which a kernel compiled for the kind pays for its compilation
_THREADS_FROM = 1 << 21  # products of one call from which it runs on every core (fp8check.reference.fast.threads)
# The compiled engine's first compilation costs about 45 s on two cores (then it is cached on disk); the NumPy
# steps model about 10^8 products a second. So a process with no compilation on disk or made already stays on
# NumPy until it has modelled COMPILED_AFTER products (about as long: a check, a test run or a docs
# example never waits for numba, a long run switches), as the reference's lookups do (fast.COMPILED_AFTER).
# FP8CHECK_NUMBA=1 compiles at the first call, =0 never.
COMPILED_AFTER = 1 << 32
_modelled = 0  # products modelled so far in this process (a heuristic's input: approximate under threads)


def _compiled_now(compiled: Any, products: int) -> bool:
    """Whether a call of ``products`` runs on the compiled engine: asked for, a compilation this process can use
    without compiling (its own, or one on disk), or enough modelled on NumPy already."""
    global _modelled
    _modelled += products
    if fast.numba_asked() == "1" or _modelled >= COMPILED_AFTER:
        return True
    return compiled.made() or compiled.cached() is True


def _fused(m: MMAModel, a: tuple[np.ndarray, str], b: tuple[np.ndarray, str], c: np.ndarray,
           scales: tuple[np.ndarray, np.ndarray, str, int] | None, promotion: int | None, *,
           paired: bool = False) -> MMAResult | None:
    """The whole chain by the compiled engine (:func:`fp8check.matmul._compiled.chain`): ``a`` (M, K) and
    ``b`` (N, K) codes (row i of each when ``paired``), ``c`` (M, N); None where it does not apply (no
    numba, a 16-bit format, a bracketed model, codes outside 0..255): the NumPy steps then run."""
    compiled = _compiled_step()
    lay_a, lay_b = _bit_layout(a[1]), _bit_layout(b[1])
    if compiled is None or lay_a is None or lay_b is None or m.status != "mmasim":
        return None
    ac, bc = _as_codes(a[0], 256), _as_codes(b[0], 256)
    if ac is None or bc is None:
        return None
    K = ac.shape[1]
    pad = -K % m.instruction_k
    if pad:  # zero codes past K (+0 in every format), as Triton's masked loads
        ac, bc = np.pad(ac, ((0, 0), (0, pad))), np.pad(bc, ((0, 0), (0, pad)))
    algorithm = {"aligned": compiled.ALIGNED, "two-stage": compiled.TWO_STAGE, "grouped-scaled": compiled.GROUPED}
    g = m.second_fraction_bits if m.algorithm == "two-stage" else m.result_bits
    lift = m.fraction_bits - lay_a[0] - lay_b[0]
    sa = sb = np.zeros((1, 1), np.uint8)
    block, table = 0, np.zeros((3, 1), np.int64)
    if scales is not None:
        sa, sb, scale_name, block = scales
        sa, sb = _as_codes(sa, 256), _as_codes(sb, 256)
        if sa is None or sb is None or sa.shape[1] * block < K + pad:
            return None
        table, scale_bits = _scale_table(scale_name)
        if m.algorithm == "aligned" and (scale_name != "e8m0fnu" or block % m.chunk):
            return None
        if m.algorithm == "grouped-scaled":  # a group term's units: both operands' values made integers, both scales'
            lift = m.fraction_bits - 2 * scale_bits - (lay_a[0] + lay_a[2] - 1) - (lay_b[0] + lay_b[2] - 1)
    group = m.scale_group or 0
    two_stage = m.algorithm == "two-stage"
    if lift < 0 or (two_stage and (g + 1 < m.fraction_bits or not m.pairs)) or (group and m.chunk % group):
        return None
    if m.fraction_bits > 28 and not group:  # a truncated term must fit int32 (below 2**(f + 2))
        return None
    if two_stage and (m.chunk // 2) << (m.fraction_bits + 2) > 1 << 31:  # and a group's sum of chunk / 2 of them
        return None
    params = np.array([m.chunk, m.instruction_k, m.fraction_bits, g, m.zero_exponent, promotion or 0, m.drop_tiny_c,
                       m.specials == "target-dependent", block, group, lift], dtype=np.int64)
    out = np.empty(c.shape, np.float32)
    dep = np.empty(c.shape, bool)
    c_bits = np.ascontiguousarray(np.broadcast_to(c, out.shape), dtype=np.float32).view(np.uint32)
    products = out.size * (K + pad)
    if not _compiled_now(compiled, products):
        return None
    # a large call: the kind's own kernel (compiled once, cached); a small one: that kernel where this process has it
    kernel = compiled.specialised(algorithm[m.algorithm], lay_a, lay_b, params, make=products >= _SPECIALISE_FROM)
    out_bits, scaled = out.view(np.uint32), scales is not None
    # every input read-only (numba types a read-only array apart: one kind of call is one compilation, not one per
    # mix of cached tables and fresh arrays)
    ac, bc, sa, sb, table, params, c_bits = (_read_only(x) for x in (ac, bc, sa, sb, table, params, c_bits))
    outside: list[int] = []

    def rows(r0: int, r1: int) -> None:  # output rows r0:r1 (the kernels release the GIL: one span per thread)
        a_, c_, o_, d_ = ac[r0:r1], c_bits[r0:r1], out_bits[r0:r1], dep[r0:r1]
        b_ = bc[r0:r1] if paired else bc
        sa_, sb_ = (sa[r0:r1], sb[r0:r1] if paired else sb) if scaled else (sa, sb)
        if kernel is not None:
            outside.append(kernel(a_, b_, paired, sa_, sb_, table, promotion or 0, c_, o_, d_))
        else:
            outside.append(compiled.chain(algorithm[m.algorithm], a_, b_, paired, lay_a, lay_b, sa_, sb_, table, params,
                                          c_, o_, d_))

    per_row = out.shape[1] * (K + pad)
    if products >= _THREADS_FROM and out.shape[0] > 1:  # the threads take spans of whole rows
        fast.parallel(products, lambda lo, hi: rows(-(-lo // per_row), -(-hi // per_row)))
    else:
        rows(0, out.shape[0])
    if any(outside):
        return None  # a code outside its format: the NumPy steps say what that is
    return MMAResult(out, dep, m)


_NAN, _POS_INF, _NEG_INF = 1, 2, 4  # special flags of a product


def _flags(raw: np.ndarray) -> np.ndarray:
    return ((np.isnan(raw) * _NAN) | ((raw == np.inf) * _POS_INF) | ((raw == -np.inf) * _NEG_INF)).astype(np.uint8)


@lru_cache(maxsize=None)
def _pair_tables(a_name: str, b_name: str, zero_exponent: int, narrow: bool) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray, int]:
    """For formats of at most 256 codes, indexed by ``a_code * n_b + b_code``: the exact product (float32
    when ``narrow``: at most 8 significant bits), its exponent (``zero_exponent`` for a zero product), its
    special flags; and ``n_b``."""
    av, ae, _, araw, _ = _tables(a_name)
    bv, be, _, braw, _ = _tables(b_name)
    pv = np.multiply.outer(av, bv).ravel()
    pe = np.add.outer(ae.astype(np.int64), be.astype(np.int64)).ravel()
    pe[pv == 0] = zero_exponent
    with np.errstate(invalid="ignore"):
        flags = _flags(np.multiply.outer(araw, braw).ravel())
    out = (pv.astype(np.float32 if narrow else np.float64), pe.astype(np.int16), flags)
    for t in out:
        t.setflags(write=False)
    return out + (len(bv),)


def _narrow(m: MMAModel) -> bool:
    """Whether a step's truncated terms and their sum are exact in float32 (< 2**24 units)."""
    return m.algorithm == "aligned" and not m.scaled and m.fraction_bits + 2 + (m.chunk + 1).bit_length() <= 24


def _resolve_specials(flags: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(special, value) of a step whose products' OR-ed flags are ``flags``: NaN and Inf as a float sum of the
    products and ``c`` gives them (finite products cannot overflow float64)."""
    pos = ((flags & _POS_INF) != 0) | (c == np.inf)
    neg = ((flags & _NEG_INF) != 0) | (c == -np.inf)
    nan = ((flags & _NAN) != 0) | np.isnan(c) | (pos & neg)
    value = np.where(nan, np.float32(np.nan), np.where(pos, np.float32(np.inf), np.float32(-np.inf)))
    return (flags != 0) | ~np.isfinite(c), value


def _chunk(m: MMAModel, c: np.ndarray, ai: np.ndarray, bi: np.ndarray, at: tuple, bt: tuple,
           scales: tuple[_Scales, _Scales, int] | None, k0: int, zero_rule: bool,
           pair: tuple | None) -> tuple[np.ndarray, np.ndarray]:
    """One step of ``m.chunk`` products for every output element: (new c, target-dependent elements)."""
    if m.algorithm == "grouped-scaled":
        assert scales is not None
        return _grouped_chunk(m, c, at[0][ai.astype(np.intp)] * bt[0][bi.astype(np.intp)], scales, k0)
    ai, bi = ai.astype(np.intp), bi.astype(np.intp)
    has_special = at[2][ai].any() or bt[2][bi].any()
    if pair is not None:  # one gather per table
        idx = ai * pair[3] + bi
        pv, pe = pair[0][idx], pair[1][idx]
        flags = np.bitwise_or.reduce(pair[2][idx], axis=1) if has_special else np.zeros(c.shape, np.uint8)
    else:
        pv = at[0][ai] * bt[0][bi]
        pe = at[1][ai] + bt[1][bi]
        if has_special:
            with np.errstate(invalid="ignore"):
                flags = np.bitwise_or.reduce(_flags(at[3][ai] * bt[3][bi]), axis=1)
        else:
            flags = np.zeros(c.shape, np.uint8)
    if scales is not None:
        (sav, sae, san), (sbv, sbe, sbn), block = scales
        kb = slice(k0 // block, k0 // block + 1)
        pv = pv * (sav[:, kb] * sbv[:, kb])  # exact: scales are powers of two (e8m0)
        pe = pe + sae[:, kb] + sbe[:, kb]
        flags = flags | ((san[:, kb] | sbn[:, kb])[:, 0] * _NAN).astype(np.uint8)
    if zero_rule:
        pe = np.where(pv == 0, m.zero_exponent, pe)
    special, special_value = _resolve_specials(flags, c)
    finite_c = np.where(np.isfinite(c), c, np.float32(0))
    out = _two_stage(m, finite_c, pv, pe) if m.algorithm == "two-stage" else _aligned(m, finite_c, pv, pe)
    out = np.where(special, special_value, out)
    if m.specials == "ieee-sum":
        return out, np.zeros(out.shape, dtype=bool)
    dep = special
    if m.operands == _WIDE:  # a product past float32's range (MMA-Sim tr_fdpa's overflow rule)
        dep = dep | (np.abs(pv) >= 2.0 ** 128).any(axis=1)
    if m.status == "bracketed":
        dep = dep | ~_grid_exact(finite_c, pv, pe)
    return out, np.broadcast_to(dep, out.shape)


def _grid_exact(c: np.ndarray, pv: np.ndarray, pe: np.ndarray) -> np.ndarray:
    """Whether every term of a step lies on 2**(E - 23) and their exact sum is a float32: any datapath
    keeping float32's 23 fractional bits gives that sum (the bracket's sure elements)."""
    top = np.maximum(np.where(pv == 0, -999, pe).max(axis=1), np.where(c == 0, -999, _f32_exponent(c)))
    scale = _pow2(23 - top)
    t = pv * scale[:, None, :]
    cs = c.astype(np.float64) * scale
    on_grid = (np.trunc(t) == t).all(axis=1) & (np.trunc(cs) == cs)
    exact = pv.sum(axis=1) + c.astype(np.float64)  # exact when on the grid: < 2**31 units
    return on_grid & (exact.astype(np.float32).astype(np.float64) == exact)


def _grouped_chunk(m: MMAModel, c: np.ndarray, pv: np.ndarray, scales: tuple[_Scales, _Scales, int],
                   k0: int) -> tuple[np.ndarray, np.ndarray]:
    """A ``grouped-scaled`` step (fp4 operands: no special codes): the products of each group of
    ``scale_group`` summed exactly, each sum scaled and aligned at its scales' exponent."""
    (sav, sae, san), (sbv, sbe, sbn), block = scales
    g = m.scale_group
    assert g is not None
    B, L, N = pv.shape
    groups = pv.reshape(B, L // g, g, N)
    zero_group = (groups == 0).all(axis=2)
    p = groups.sum(axis=2)  # exact: at most 16 * 36, in quarters
    blocks = (k0 + np.arange(L // g) * g) // block
    s_val = sav[:, blocks] * sbv[:, blocks]
    terms = p * s_val
    exps = np.where(zero_group | (s_val == 0), m.zero_exponent, sae[:, blocks] + sbe[:, blocks])
    nan = (san[:, blocks] | sbn[:, blocks]).any(axis=1)
    finite_c = np.where(np.isfinite(c), c, np.float32(0))
    out = _aligned(m, finite_c, terms, np.broadcast_to(exps, terms.shape))
    special = nan | ~np.isfinite(c)
    if special.any():
        with np.errstate(all="ignore"):
            wide = (terms.sum(axis=1) + c.astype(np.float64)).astype(np.float32)
        out = np.where(special, np.where(nan, np.float32(np.nan), wide), out)
    return out, np.zeros(out.shape, dtype=bool)

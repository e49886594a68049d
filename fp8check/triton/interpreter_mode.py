"""The faithful interpreter: Triton's interpreter with fp8check's FP8 conversions.

Triton's interpreter (``TRITON_INTERPRET=1``) converts FP8 values with its own
bit arithmetic (``triton/runtime/interpreter.py``: ``_convert_float``), which
rounds ties away from zero, loses the mantissa carry, keeps mantissa bits on
overflow and decodes NaN/Inf codes to finite values (triton-lang/triton#8322).
:func:`faithful` replaces every FP8 conversion the interpreter performs with
:mod:`fp8check.reference` under a :class:`~fp8check.triton.targets.Target`:

==================================== =========================================
hook (``triton.runtime.interpreter``) what goes through it
==================================== =========================================
``InterpreterBuilder.create_fp_to_fp`` every ``x.to(fp8)`` (with
                                     ``fp_downcast_rounding``), ``fp8.to(...)``,
                                     fp8 -> fp8, and the implicit casts of
                                     ``tl.store`` into an fp8 pointer
``InterpreterBuilder.create_dot``    ``tl.dot`` of fp8, bf16 and fp16 operands
                                     with a float32 accumulator: the target's
                                     tensor-core model
                                     (:mod:`fp8check.matmul.tensorcore`);
                                     otherwise the decoding of fp8 operands
``InterpreterBuilder.create_dot_scaled`` ``tl.dot_scaled`` (Triton >= 3.8; 3.6's
                                     interpreter has none) as the target
                                     lowers it
                                     (:mod:`fp8check.matmul.dot_scaled`)
``_mxfp_value_handle_to_float32``    the decoding of fp8 ``tl.dot_scaled``
                                     operands where nothing is modelled
==================================== =========================================

Everything else (loads and stores of fp8 bytes, bitcasts, ``tl.where``) moves
codes without converting them and is left alone, as are conversions that
involve no fp8 type. The patch is installed only while a :func:`faithful`
block is open, only for the Triton versions in
:data:`SUPPORTED_TRITON_VERSIONS`, and removed on exit.

Interpreter mode (:func:`interpreted`, :func:`interpreting`) is
:class:`InterpreterMode`: an ordered list of layers (``TRITON_INTERPRET``,
jit twins, the ``triton.language`` snapshot, :mod:`.launch`,
:mod:`.batched`, :mod:`.sanitizer`, :mod:`.batched`'s memory ops),
installed in order and removed in reverse (:mod:`.layer`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from fp8check import reference
from fp8check.errors import FP8CheckError
from fp8check.patching import LOCK, PatchScope
from fp8check.triton import alignment, batched, boolops, launch, releases, sanitizer, upcasts, virtual
from fp8check.triton import ops as _ops
from fp8check.triton import targets as _targets
from fp8check.triton.layer import BuilderOps, Layer, LayerStack, interpreter
from fp8check.triton.targets import TL_NAMES, Target

__all__ = [
    "SUPPORTED_TRITON_VERSIONS", "TritonVersionError", "TritonUnavailableError", "UnsupportedConversionError",
    "faithful", "interpreted", "interpreter_active", "uses_unpatched_interpreter", "watch", "Watch",
    "triton_version", "check_triton_version", "active_target", "is_patched",
]

#: The Triton releases the patch was tested with (the interpreter's hooks and
#: the target tables were checked for each): the table of the faithful block's
#: layers and of interpreter mode's own (the batched fast path has its own).
SUPPORTED_TRITON_VERSIONS = ("3.6.0", "3.8.0", "3.9.0")


class TritonUnavailableError(FP8CheckError, ImportError):
    """Triton is not installed here."""


class TritonVersionError(FP8CheckError, RuntimeError):
    """The installed Triton is not one the faithful interpreter was tested with."""


class UnsupportedConversionError(FP8CheckError, TypeError):
    """A conversion compiled Triton does not compile for the target (the
    faithful interpreter refuses it, as the compiler would)."""


def triton_version() -> str:
    """The installed Triton's version (``"3.9.0"``); raises if Triton is missing."""
    try:
        import triton
    except ImportError:
        raise TritonUnavailableError("the faithful Triton interpreter needs triton (pip install triton)") from None
    return str(getattr(triton, "__version__", "?"))


def check_triton_version() -> str:
    """The installed Triton's version, or :class:`TritonVersionError` naming the supported ones."""
    version = triton_version()
    base = version.split("+")[0]
    if base not in SUPPORTED_TRITON_VERSIONS:
        raise TritonVersionError(
            f"fp8check's faithful Triton interpreter supports Triton {', '.join(SUPPORTED_TRITON_VERSIONS)}; "
            f"this is Triton {version}")
    return base


# -- state ------------------------------------------------------------------------

_LOCK = LOCK  # the patching layers' one lock


@dataclass
class _Active:
    target: Target
    strict: bool


_STACK: list[_Active] = []
_WATCHES: list["Watch"] = []


def active_target() -> Target | None:
    """The target of the innermost open :func:`faithful` block (None outside one)."""
    with _LOCK:
        return _STACK[-1].target if _STACK else None


def is_patched() -> bool:
    """Whether the faithful patch is installed now."""
    with _LOCK:
        return bool(_STACK)


# -- conversions --------------------------------------------------------------------


def _fp8_name(dtype: Any) -> str | None:
    return TL_NAMES.get(getattr(dtype, "name", None))


_WIDE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}


def _wide_name(dtype: Any) -> str | None:
    return _WIDE.get(getattr(dtype, "name", None))


def _rounding(mode: Any) -> str:
    if mode is None:
        return "rtne"
    name = getattr(mode, "name", str(mode)).upper()
    return "rtz" if "RTZ" in name else "rtne"


def _source_array(data: np.ndarray, source: str) -> np.ndarray:
    if source == "bfloat16":
        import ml_dtypes

        return np.ascontiguousarray(data).view(np.uint16).view(ml_dtypes.bfloat16)
    return np.ascontiguousarray(data).astype({"float32": np.float32, "float16": np.float16,
                                               "float64": np.float64}[source], copy=False)


def _refuse(active: _Active, why: str) -> None:
    if active.strict:
        raise UnsupportedConversionError(f"{why} (Triton {triton_version()}); the faithful interpreter refuses "
                                         f"what the compiler refuses (faithful(..., strict=False) computes it "
                                         f"exactly instead)")


def encode_for_target(x: np.ndarray, source: str, fmt: str, rounding: str, target: Target,
                      *, strict: bool = True) -> np.ndarray:
    """The codes compiled Triton produces for ``target`` (uint8, shaped like ``x``).

    ``x``: float32/float16/float64 values, or bfloat16 as an ml_dtypes array
    or its uint16 bits. The library entry point the interpreter patch uses,
    usable on its own (and on any array: the GPU script compares it with
    compiled kernels)."""
    active = _Active(target, strict)
    if source == "float64":
        _refuse(active, f"Triton does not compile float64 -> {fmt} (triton-lang/triton#11897 is pending)")
        return reference.encode(_source_array(x, source), fmt, "ieee" if rounding == "rtne" else "rtz")
    entry = target.downcast(source, fmt, rounding)
    if not entry.supported:
        _refuse(active, entry.unsupported)
        profile = target.profile if rounding == "rtne" and target.profile.supports(fmt) else (
            "ieee" if rounding == "rtne" else "rtz")
        return reference.encode(_source_array(x, source), fmt, profile)
    arr = _source_array(x, source)
    if entry.bits == "f16_upper_byte":
        return (arr.view(np.uint16) >> np.uint16(8)).astype(np.uint8)
    codes = reference.encode(arr, fmt, entry.profile)
    if entry.bits == "f32_rtz_f16_upper_byte":
        bits = arr.view(np.uint32)
        nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        if nan.any():
            nan_code = (((bits >> np.uint32(24)) & np.uint32(0x80)) | np.uint32(0x7E)
                        | ((bits >> np.uint32(21)) & np.uint32(1))).astype(np.uint8)
            codes = np.where(nan, nan_code, codes)
    return codes


def decode_for_target(codes: np.ndarray, fmt: str, dest: str, target: Target, *, strict: bool = True) -> np.ndarray:
    """The values compiled Triton gives ``codes`` in ``dest`` (float32,
    float16, or bfloat16 as uint16 bits), for ``target``
    (:func:`fp8check.triton.upcasts.upcast_values`); a conversion the target
    does not compile is refused (``strict``) or done exactly."""
    active = _Active(target, strict)
    if dest == "float64":
        _refuse(active, f"Triton does not compile {fmt} -> float64 (triton-lang/triton#11897 is pending)")
        return reference.decode(np.ascontiguousarray(codes).view(np.uint8), fmt)
    entry = target.upcast(fmt, dest)
    if not entry.supported:
        _refuse(active, entry.unsupported)
    return upcasts.upcast_values(codes, fmt, dest, target)


def _convert(active: _Active, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
    interp = interpreter()
    src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
    src8, dst8 = _fp8_name(src_ty), _fp8_name(dst_ty)
    target = active.target
    if src8 and dst8:
        _refuse(active, target.fp8_to_fp8(src8, dst8))
        values = reference.decode(np.ascontiguousarray(src.data).view(np.uint8), src8)
        prof = target.profile if target.profile.supports(dst8) else "ieee"
        codes = reference.encode(values, dst8, prof)
        return interp.TensorHandle(codes.reshape(np.shape(src.data)), dst_ty)
    if dst8:
        source = _wide_name(src_ty)
        codes = encode_for_target(src.data, source, dst8, _rounding(rounding_mode), target, strict=active.strict)
        return interp.TensorHandle(codes.reshape(np.shape(src.data)), dst_ty)
    dest = _wide_name(dst_ty)
    out = decode_for_target(np.asarray(src.data), src8, dest, target, strict=active.strict)
    return interp.TensorHandle(out.reshape(np.shape(src.data)), dst_ty)


def _active_now() -> _Active | None:
    with _LOCK:
        return _STACK[-1] if _STACK else None


def _note_division(target: Target, known: bool) -> None:
    """A float32 ``/`` the target compiles to an approximate division ran (for :class:`Watch`); ``known``: every
    quotient of it known bit for bit (sm90's, through its measured reciprocals)."""
    with _LOCK:
        for w in _WATCHES:
            if known:
                w.known_divisions += 1
            else:
                w.approximate_divisions += 1
            w.division_target = target


def _note_nan_clamp(target: Target, rule: str, count: int) -> None:
    """A ``tl.clamp`` turned ``count`` NaN elements into numbers under ``rule`` (for :class:`Watch`)."""
    with _LOCK:
        for w in _WATCHES:
            w.nan_clamps += count
            w.nan_clamp_rule, w.clamp_target = rule, target


def _involves_fp8(*dtypes: Any) -> bool:
    return any(_fp8_name(d) for d in dtypes)


def _supported_pair(*dtypes: Any) -> bool:
    # fp8e4b15 and anything else unknown stays with Triton
    names = [getattr(d, "name", "") for d in dtypes]
    return all(n in TL_NAMES or n in _WIDE for n in names)


class ConversionOps(BuilderOps):
    """The builder's FP8 conversions under the open faithful block's target (the originals run outside
    one): ``x.to(fp8)``, ``fp8.to(...)``, the implicit casts of ``tl.store``, and ``tl.dot``: by the
    target's tensor-core model where it has one for the operands (:func:`_tensor_core_dot`), else with
    the fp8 operands decoded for the float32 path. Every conversion is counted for :func:`watch`."""

    def __init__(self, interp: Any) -> None:
        self.interp = interp

    def table(self) -> dict[str, Callable[..., Any]]:
        return {"create_fp_to_fp": self.create_fp_to_fp, "create_dot": self.create_dot,
                "create_dot_scaled": self.create_dot_scaled}

    def create_fp_to_fp(self, inner: Any, builder: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        active = _active_now()
        handled = active is not None and _involves_fp8(s, d) and _supported_pair(s, d)
        _note(handled, s, d)
        if not handled:
            return inner(builder, src, dst_type, rounding_mode)
        return _convert(active, src, dst_type, rounding_mode)

    def dot_operand(self, active: _Active, h: Any) -> Any:
        """An fp8 ``tl.dot`` operand as the float16 values the target decodes it to."""
        name = _fp8_name(h.dtype.scalar)
        if name is None:
            return h
        if name not in active.target.formats:
            _refuse(active, f"Triton does not compile tl.dot with {name} operands for {active.target.name}")
        values = reference.decode(np.ascontiguousarray(h.data).view(np.uint8), name)
        import triton.language as tl

        return self.interp.TensorHandle(values.astype(np.float16).reshape(np.shape(h.data)), tl.float16)

    def create_dot(self, inner: Any, builder: Any, a: Any, b: Any, d: Any, *args: Any, **kwargs: Any) -> Any:
        active = _active_now()
        _note(active is not None, a.dtype.scalar, b.dtype.scalar)
        if active is not None:
            if all(_fp8_name(h.dtype.scalar) in (None, *active.target.formats) for h in (a, b)):
                out = _tensor_core_dot(active.target.name, a, b, d, *args)
                if out is not None:
                    return self.interp.TensorHandle(out, d.dtype.scalar)
            a, b = self.dot_operand(active, a), self.dot_operand(active, b)  # refuses what Triton does not compile
        return inner(builder, a, b, d, *args, **kwargs)

    def create_dot_scaled(self, inner: Any, builder: Any, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any,
                          rhs_scale: Any, rhs_format: Any, fast_math: Any, *rest: Any) -> Any:
        """``tl.dot_scaled`` (Triton >= 3.8) by the target's lowering (:func:`_tensor_core_dot_scaled`); outside
        a faithful block, or where nothing is modelled, the interpreter's own (fp8 operands decoded exactly by
        :meth:`mxfp_value_to_float32`, float32 sums)."""
        active = _active_now()
        if active is not None:
            out = _tensor_core_dot_scaled(active, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math,
                                          rest)
            if out is not None:
                _note(True, lhs.dtype.scalar, rhs.dtype.scalar)
                return self.interp.TensorHandle(out, rest[-1].dtype.scalar)
        return inner(  # its fp8 decoding is counted by mxfp_value_to_float32
            builder, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math, *rest)

    @staticmethod
    def mxfp_value_to_float32(orig_mx: Any, value_handle: Any) -> Any:
        """The decoding of fp8 ``tl.dot_scaled`` operands (Triton >= 3.8)."""
        active = _active_now()
        name = _fp8_name(value_handle.dtype)
        _note(active is not None, value_handle.dtype)
        if active is None or name is None:
            return orig_mx(value_handle)
        if name not in active.target.formats:
            _refuse(active, f"Triton does not compile tl.dot_scaled with {name} operands for "
                            f"{active.target.name}")
        return reference.decode(np.ascontiguousarray(value_handle.data).view(np.uint8), name).astype(np.float32)


def _patch_lang_core(orig_core: Any, lang: Any, scope: Any) -> Any:
    """Triton 3.6's interpreter cannot build the fnuz types ("fail to convert fp8e4b8 to ir type"): its
    dtype.to_ir lacks them although its builder has get_fp8e4b8_ty/get_fp8e5b16_ty. Add them (a no-op
    where to_ir has them already)."""
    result = orig_core(lang, scope)
    below = lang.dtype.to_ir

    def to_ir(self: Any, builder: Any) -> Any:
        if self.name == "fp8e4b8" and hasattr(builder, "get_fp8e4b8_ty"):
            return builder.get_fp8e4b8_ty()
        if self.name == "fp8e5b16" and hasattr(builder, "get_fp8e5b16_ty"):
            return builder.get_fp8e5b16_ty()
        return below(self, builder)

    scope.set_attr(lang.dtype, "to_ir", to_ir)
    # Triton 3.6 converts a loaded scalar to an index with int() of its 1-element array,
    # which NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python
    # scalars": a `range(tl.load(ptr), ...)` loop fails); later Tritons squeeze it first.
    scope.set_attr(lang.tensor, "__index__", lambda self: int(np.asarray(self.handle.data).squeeze()))
    return result


class _Conversions(Layer):
    """FP8 conversions by the target's tables (one set of hooks serves :func:`faithful` and :func:`watch`)."""

    name = "fp8 conversions"
    triton_versions = SUPPORTED_TRITON_VERSIONS

    def install(self, scope: PatchScope, interp: Any) -> None:
        ConversionOps(interp).install_ops(scope, interp.InterpreterBuilder)
        orig_core = getattr(interp, "_patch_lang_core", None)
        if orig_core is not None:
            scope.set(interp, "_patch_lang_core", functools.partial(_patch_lang_core, orig_core))
        orig_mx = getattr(interp, "_mxfp_value_handle_to_float32", None)
        if orig_mx is not None:
            scope.set(interp, "_mxfp_value_handle_to_float32",
                      functools.partial(ConversionOps.mxfp_value_to_float32, orig_mx))


class _FloatOps(Layer):
    """Every other float op by the target's :class:`~fp8check.triton.targets.OpRules` (:mod:`.ops`)."""

    name = "float ops"
    triton_versions = SUPPORTED_TRITON_VERSIONS

    def install(self, scope: PatchScope, interp: Any) -> None:
        _ops.FloatOps(interp, _active_now, _note_division, _note_nan_clamp).install(scope, interp.InterpreterBuilder)


#: The faithful block's layers, installed while :func:`faithful` or :func:`watch` is in use.
_FAITHFUL = LayerStack([_Conversions(), _FloatOps()])
_USERS = 0


_DOT_FORMATS = {**TL_NAMES, "bf16": "bfloat16", "fp16": "float16"}


def _tensor_core_dot(target: str, a: Any, b: Any, d: Any, input_precision: Any = None,
                     max_num_imprecise_acc: Any = None) -> np.ndarray | None:
    """``tl.dot(a, b, d)`` as ``target``'s matrix instructions compute it (:func:`fp8check.matmul.tensorcore.mma`:
    K split into instructions in increasing k, the float32 accumulator chained), or None where no model
    applies (other operand types, a float16 accumulator, a target without one): the float32 path then.
    On sm90 an fp8 dot with ``max_num_imprecise_acc`` set adds the chain into the accumulator every
    ``max_num_imprecise_acc / 32`` instructions (Triton's WGMMA lowering); the interpreter passes 0 for
    "not set", read as compiled Triton's sm90 default (2**30: never). Elements the model brackets (AMD
    NaN/Inf, gfx950) are counted as a bracketed op and are NaN in the ``lo`` run of a bracketed check."""
    from fp8check.errors import InvalidValueError
    from fp8check.matmul import tensorcore

    names = [_DOT_FORMATS.get(getattr(h.dtype.scalar, "name", "")) for h in (a, b)]
    if None in names or getattr(d.dtype.scalar, "name", "") != "fp32" or target not in tensorcore.TARGETS:
        return None
    width = [np.uint16 if n in ("bfloat16", "float16") else np.uint8 for n in names]
    ca, cb = (np.ascontiguousarray(h.data).view(w) for h, w in zip((a, b), width))
    # the instruction Triton compiles this tile to where it is not the target's own for the operands (gfx942's
    # f16 MFMA for OCP fp8, sm90's mma.sync for tiles wgmma cannot take), the operands converted for it
    other = tensorcore.triton_dot(target, ca.shape[-2], names[0], names[1])
    if other is not None:
        model = other.model
        ca, cb = tensorcore.triton_operands(other, ca, names[0], cb, names[1])
        names = [other.a_fmt, other.b_fmt]
    else:
        try:
            model = tensorcore.model(target, names[0], names[1])
        except InvalidValueError:
            return None
    tensorcore.record_dot_model(model.name)
    acc = np.asarray(d.data, dtype=np.float32)
    tensorcore.record_dot_step(int(ca.shape[-1]), not acc.any())
    imprecise = int(max_num_imprecise_acc or 0)
    promotion = -(-imprecise // 32) if model.name == "sm90-wgmma-fp8" and 0 < imprecise <= ca.shape[-1] else None
    return _by_gemm("tl.dot", lambda x, y, z: tensorcore.mma(model, x, names[0], y, names[1], acc=z,
                                                                promotion=promotion), acc, ca, cb)


def _by_gemm(op: str, gemm: Callable[..., Any], acc: np.ndarray, *operands: np.ndarray | None) -> np.ndarray:
    """``gemm(*operands, acc)`` (an :class:`~fp8check.matmul.tensorcore.MMAResult`) once per index of the leading
    axes (a batched dot, the batched interpreter's programs), which broadcast; the elements its model brackets
    (AMD NaN/Inf, gfx950) counted as a bracketed op and NaN in the ``lo`` run of a bracketed check."""
    present = [x for x in operands if x is not None]
    lead = np.broadcast_shapes(*(x.shape[:-2] for x in present), acc.shape[:-2])
    flat = [None if x is None else np.broadcast_to(x, lead + x.shape[-2:]).reshape((-1,) + x.shape[-2:])
            for x in operands]
    accs = np.broadcast_to(acc, lead + acc.shape[-2:]).reshape((-1,) + acc.shape[-2:])
    parts = [gemm(*(None if x is None else x[i] for x in flat), accs[i]) for i in range(accs.shape[0])]
    values = np.stack([p.values for p in parts]).reshape(lead + acc.shape[-2:])
    dependent = np.stack([p.target_dependent for p in parts]).reshape(values.shape)
    if dependent.any():
        _ops._counted(f"{op} ({parts[0].model.name}, target-dependent)")  # the checks then run lo and hi too
        if _ops.bracket_mode() == "lo":
            values = np.where(dependent, np.float32(np.nan), values)
    return values


def _unpacked_fp4(data: np.ndarray, axis: int) -> np.ndarray:
    """e2m1 codes two per byte (the low nibble first, as Triton's ``Fp4ToFp``) along ``axis`` -> one per byte."""
    from fp8check.quantizers.packing import unpack_codes

    d = np.moveaxis(np.asarray(data).view(np.uint8), axis, -1)
    out = unpack_codes(d.reshape(-1, d.shape[-1]), "low-first").reshape(d.shape[:-1] + (2 * d.shape[-1],))
    return np.moveaxis(out, -1, axis)


def _tensor_core_dot_scaled(active: _Active, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any,
                            rhs_format: Any, fast_math: Any, rest: tuple[Any, ...]) -> np.ndarray | None:
    """``tl.dot_scaled`` as the target compiles it (:func:`fp8check.matmul.dot_scaled.dot_scaled`: the native
    block-scaled instruction for the tiles Triton gives it, else the upcast to bfloat16 and the target's
    bfloat16 ``tl.dot``), or None where nothing is modelled (an fp16 operand, a target without a tensor-core
    model): the interpreter's float32 path then. ``rest``: ``(lhs_k_pack, rhs_k_pack, acc)`` (3.9) or
    ``(acc,)``."""
    from fp8check.errors import InvalidValueError
    from fp8check.matmul import dot_scaled as ds, tensorcore

    acc_h = rest[-1]
    k_pack = tuple(rest[:-1]) or (True, True)
    names = [ds.FORMATS.get(getattr(f, "name", str(f)).lower()) for f in (lhs_format, rhs_format)]
    target = active.target.name
    if None in names or "float16" in names or target not in tensorcore.TARGETS:
        return None
    for name in names:
        if name in TL_NAMES.values() and name not in active.target.formats:
            _refuse(active, f"Triton does not compile tl.dot_scaled with {name} operands for {target}")
    a, b = (np.asarray(h.data).view(np.uint16 if n == "bfloat16" else np.uint8) for h, n in zip((lhs, rhs), names))
    if names[0] == "e2m1fn":
        a = _unpacked_fp4(a, -1 if k_pack[0] else -2)
    if names[1] == "e2m1fn":
        b = _unpacked_fp4(b, -2 if k_pack[1] else -1)
    scales = [None if h is None else np.asarray(h.data).view(np.uint8) for h in (lhs_scale, rhs_scale)]
    kinds = {"e4m3fn" if _fp8_name(h.dtype.scalar) == "e4m3fn" else "e8m0fnu" for h in (lhs_scale, rhs_scale)
             if h is not None}
    scale_fmt = kinds.pop() if len(kinds) == 1 else "e8m0fnu"

    def gemm(x: np.ndarray, y: np.ndarray, sx: np.ndarray | None, sy: np.ndarray | None, z: np.ndarray) -> Any:
        return ds.dot_scaled(target, x, names[0], y, names[1], a_scales=sx, b_scales=sy, scale_fmt=scale_fmt, acc=z,
                             fast_math=bool(fast_math))

    try:
        return _by_gemm("tl.dot_scaled", gemm, np.asarray(acc_h.data, dtype=np.float32), a, b, *scales)
    except InvalidValueError as exc:  # scales or a kind fp8check has no model of: said, never summed in float32
        if active.strict:
            raise UnsupportedConversionError(f"tl.dot_scaled of {names[0]} x {names[1]} with {scale_fmt} scales on "
                                             f"{target}: {exc} (faithful(..., strict=False) runs the interpreter's "
                                             f"float32 sums instead)") from None
        return None


def _acquire() -> None:
    global _USERS
    with _LOCK:
        if _USERS == 0:
            _FAITHFUL.install()
        _USERS += 1


def _release() -> None:
    global _USERS
    with _LOCK:
        _USERS -= 1
        if _USERS == 0:
            _FAITHFUL.remove()


@contextlib.contextmanager
def faithful(target: object = "sm90", *, strict: bool = True) -> Iterator[Target]:
    """Run Triton's interpreter with the FP8 semantics of compiled Triton on ``target``.

    ``target``: ``"sm90"``, ``"sm89"``, ``"sm100"``, ``"gfx942"``, ``"gfx950"`` (or a
    :class:`~fp8check.triton.targets.Target`). Inside the block every FP8
    conversion an interpreted kernel performs follows the target's table,
    and every other float op its ``OpRules`` (:mod:`fp8check.triton.ops`:
    clamp and min/max NaN rules, fma contraction, bracketed approximate
    instructions, bfloat16 arithmetic);
    a conversion compiled Triton does not compile for the target (fp8 ->
    fp8, ``rtz`` where only RNE is lowered, fnuz types on NVIDIA, float64)
    raises :class:`UnsupportedConversionError`, unless ``strict=False``,
    which computes it exactly. Blocks nest (the innermost target wins) and
    everything is restored when the outermost one exits. Raises
    :class:`TritonVersionError` for a Triton it was not tested with.

    Kernels must run interpreted: wrap them with :func:`interpreted` (or set
    ``TRITON_INTERPRET=1`` before importing triton)::

        with fp8check.triton.faithful("gfx942"):
            interpreted(my_kernel)[grid](x, y, n, BLOCK=1024)
    """
    version = check_triton_version()
    t = _targets.for_triton(_targets.get(target), version)
    if version not in t.triton_versions:
        raise TritonVersionError(f"target {t.name} was tabulated for Triton {', '.join(t.triton_versions)}; "
                                 f"this is Triton {version}")
    with _LOCK:
        _acquire()
        _STACK.append(_Active(t, strict))
    try:
        yield t
    finally:
        with _LOCK:
            _STACK.pop()
            _release()


# -- interpreter mode for the user ---------------------------------------------------


class _TritonInterpret(Layer):
    """``TRITON_INTERPRET=1`` while interpreter mode is on (kernels decorated inside are interpreted)."""

    name = "TRITON_INTERPRET"
    triton_versions = SUPPORTED_TRITON_VERSIONS

    def install(self, scope: PatchScope, interp: Any) -> None:
        scope.set_item(os.environ, "TRITON_INTERPRET", "1")


class _JitTwins(Layer):
    """A compiled-mode ``@triton.jit`` function (a user's helper, or ``tl.max`` when triton was imported
    without ``TRITON_INTERPRET``) called or launched runs as its interpreted twin."""

    name = "jit twins"
    triton_versions = SUPPORTED_TRITON_VERSIONS

    def __init__(self) -> None:
        self.twins: dict[Any, Any] = {}  # kept across activations, as the twins' caches are

    def twin_of(self, fn: Any) -> Any:
        twin = self.twins.get(fn)
        if twin is None:
            from triton.runtime.interpreter import InterpretedFunction

            twin = self.twins[fn] = InterpretedFunction(fn)
        return twin

    def install(self, scope: PatchScope, interp: Any) -> None:
        from triton.runtime.jit import JITFunction

        twin_of = self.twin_of

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            return twin_of(self.fn)(*args, **kwargs)

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            return twin_of(self.fn).run(*args, grid=grid, warmup=warmup, **kwargs)

        scope.set(JITFunction, "__call__", __call__)
        scope.set(JITFunction, "run", run)


class _LanguageRestore(Layer):
    """Undo what the interpreter left patched in ``triton.language``. Its device-function calls
    (``tl.max`` inside a kernel, a user's ``@triton.jit`` helper) patch it without restoring it, so after
    an interpreted launch, compiling a kernel in the same process failed ("'block_argument' object has
    no attribute 'dtype'")."""

    name = "triton.language snapshot"
    triton_versions = SUPPORTED_TRITON_VERSIONS

    def __init__(self) -> None:
        self.snapshot: list[tuple[Any, dict[str, Any]]] = []

    def install(self, scope: PatchScope, interp: Any) -> None:
        self.snapshot = [(obj, dict(vars(obj))) for obj in _language_objects()]

    def remove(self, scope: PatchScope) -> None:
        scope.restore()
        for obj, before in self.snapshot:
            now = vars(obj)
            for name in [n for n in now if n not in before and not isinstance(now[n], types.ModuleType)]:
                delattr(obj, name)  # (a submodule imported meanwhile stays)
            for name, value in before.items():
                if now.get(name, _ABSENT) is not value:
                    setattr(obj, name, value)
        self.snapshot = []


_ABSENT = object()


def _language_objects() -> list[Any]:
    """What Triton's interpreter patches in ``triton.language`` to run a kernel."""
    import triton.language as tl

    objs: list[Any] = [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype]
    base = getattr(tl.core, "tensor_descriptor_base", None)
    return objs + ([base] if base is not None else [])


class InterpreterMode:
    """Interpreter mode, re-entrant: its layers installed in order when the outermost block opens and
    removed in reverse when it closes. While a kernel runs interpreted, ``TRITON_INTERPRET=1`` and a
    compiled-mode ``@triton.jit`` helper called from it runs as an interpreted device function;
    autotuned kernels run every config (:mod:`.launch`), programs of a launch run together
    (:mod:`.batched`, under the sanitizer), loads, stores and hints are checked (:mod:`.sanitizer`), and
    the batched memory ops and hints run program by program around the sanitizer."""

    def __init__(self, layers: Sequence[Layer]) -> None:
        self.stack = LayerStack(layers)
        self.depth = 0

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with _LOCK:
            if self.depth == 0:
                self.stack.install()
            self.depth += 1
        try:
            yield
        finally:
            with _LOCK:
                self.depth -= 1
                if self.depth == 0:
                    self.stack.remove()


_MODE = InterpreterMode([_TritonInterpret(), _JitTwins(), _LanguageRestore(), releases.LAYER, boolops.LAYER,
                         launch.LAYER, batched.LAYER, sanitizer.LAYER, batched.OUTER_LAYER, virtual.LAYER])
alignment.use_target_of(active_target)  # pointer hints judged on the open faithful block's target


@contextlib.contextmanager
def _unwrapped() -> Iterator[None]:
    """fp8check's own errors raised inside an interpreted kernel come out as
    themselves (one line), not wrapped in Triton's ``InterpreterError``."""
    try:
        yield
    except Exception as exc:
        cause = exc
        while cause is not None and not isinstance(cause, FP8CheckError):
            cause = cause.__cause__
        if cause is not None and cause is not exc:
            raise cause from None
        raise


class InterpretedKernel:
    """An interpreted twin of a ``@triton.jit`` kernel: ``twin[grid](*args)``."""

    def __init__(self, fn: Any) -> None:
        from triton.runtime.interpreter import InterpretedFunction

        self.fn = getattr(fn, "fn", fn)
        self.original = fn
        self._interp = fn if isinstance(fn, InterpretedFunction) else InterpretedFunction(self.fn)
        self.__name__ = getattr(self.fn, "__name__", "kernel")
        self.__doc__ = getattr(self.fn, "__doc__", None)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def launch(*args: Any, **kwargs: Any) -> Any:
            with _MODE.active(), _unwrapped():
                return self._interp[grid](*args, **kwargs)

        return launch

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        return self[grid](*args, **kwargs)

    def __repr__(self) -> str:
        return f"<interpreted {self.__name__}>"


def interpreted(fn: Any) -> InterpretedKernel:
    """The interpreted twin of ``fn`` (a ``@triton.jit`` function, an
    already interpreted one, or the plain Python function): launch it as
    ``interpreted(fn)[grid](args...)``; it runs in Triton's interpreter
    whatever ``TRITON_INTERPRET`` says, helpers included. Inputs are CPU
    tensors. Combine with :func:`faithful` for the target's FP8 semantics."""
    check_triton_version()
    return InterpretedKernel(fn)


@contextlib.contextmanager
def interpreting() -> Iterator[None]:
    """Interpreter mode for everything launched inside the block: kernels
    decorated inside it are interpreted, and compiled-mode ``@triton.jit``
    helpers run as device functions of interpreted kernels."""
    check_triton_version()
    with _MODE.active(), _unwrapped():
        yield


# -- detection of an unpatched interpreter run --------------------------------------


def interpreter_active() -> bool:
    """Whether Triton kernels launched now run in Triton's interpreter
    (``TRITON_INTERPRET`` set, or an :func:`interpreted` launch under way)."""
    value = os.environ.get("TRITON_INTERPRET", "").strip().lower()
    return value in ("1", "true", "yes", "on") or _MODE.depth > 0


def uses_unpatched_interpreter(fn: Any = None) -> bool:
    """Whether ``fn`` (a Triton kernel, or None for "whatever runs now")
    would run in Triton's interpreter with its own FP8 conversions, i.e.
    without a :func:`faithful` block open: an ``InterpretedFunction``, or
    any kernel while :func:`interpreter_active`. For a plain Python callable
    that launches kernels, run it under :func:`watch` instead, which sees
    the conversions themselves."""
    if is_patched():
        return False
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except Exception:  # triton missing or broken: nothing can run interpreted
        return False
    if fn is not None and isinstance(fn, (InterpretedFunction, InterpretedKernel)):
        return True
    return interpreter_active()


UNPATCHED_WARNING = ("Triton's interpreter FP8 conversions are known to be wrong (triton-lang/triton#8322); "
                     "use --triton-target")


@dataclass
class Watch:
    """What :func:`watch` saw: FP8 conversions by Triton's own interpreter code."""

    unpatched_conversions: int = 0
    faithful_conversions: int = 0
    examples: list[str] = field(default_factory=list)
    approximate_divisions: int = 0  # float32 ``/`` the target compiles to an approximate division, bracketed
    known_divisions: int = 0  # and those whose every quotient is known bit for bit (sm90's measured reciprocals)
    division_target: Target | None = None  # the target they were counted under
    nan_clamps: int = 0  # NaN elements a tl.clamp turned into numbers (the target's lowering, without PropagateNan.ALL)
    nan_clamp_rule: str = ""  # its lowering (targets.ClampRule)
    clamp_target: Target | None = None

    @property
    def division_note(self) -> str | None:
        """What to tell the user when the kernel divided float32 values that the target divides
        approximately (the interpreter's quotient is correctly rounded, the compiled one may not be)."""
        t = self.division_target
        if not self.approximate_divisions or t is None:
            return None
        return (f"the kernel divides float32 values with `/`, which Triton compiles for {t.name} to "
                f"{t.approximate_fp32_division}: the check ran it correctly rounded and at both ends of that "
                f"bound, and counts codes that depend on where the GPU lands as target-dependent "
                f"(tl.div_rn makes them exact)")

    @property
    def known_division_note(self) -> str | None:
        """What to tell the user of a failed check when the kernel divided float32 values with ``/`` that the
        target divides approximately but the check knows bit for bit: the divergences may come from there."""
        return self.known_division_note_for({})

    def known_division_note_for(self, declared: dict[str, str]) -> str | None:
        """:attr:`known_division_note` for a check whose declaration names ``declared`` (``{"apply":
        "target-divide", "scale-divide": "divide"}``): where each is already a target-* operation, the note
        says so instead of asking for them."""
        t = self.division_target
        if not self.known_divisions or self.approximate_divisions or t is None:
            return None
        from fp8check.quantizers.recipe import TARGET_OPS

        note = (f"the kernel divides float32 values with `/`, which Triton compiles for {t.name} to div.full.f32, "
                f"the hardware reciprocal and one multiply (a compile-time divisor: the product with fl(1/C)), "
                f"not a correctly rounded division: the check computed every quotient as the GPU does (its "
                f"measured reciprocals), so a divergence that follows from a quotient is what the GPU writes; "
                f"tl.div_rn divides correctly rounded; ")
        if declared and all(v in TARGET_OPS for v in declared.values()):
            named = ", ".join(f'{k} = "{v}"' for k, v in declared.items())
            return note + (f"the recipe declares it ({named}): its reference divides as {t.name} does too, so "
                           f"these divergences are not the division's")
        return note + ("to declare the division the kernel does, a recipe's apply and scale-divide (and a static "
                       "kernel's apply) take target-divide and multiply-target-reciprocal")

    @property
    def nan_clamp_note(self) -> str | None:
        """What to tell the user of a check with NaN divergences when a ``tl.clamp`` of the kernel turned NaN
        into numbers: the target's lowering of the clamp decides which number."""
        t = self.clamp_target
        if not self.nan_clamps or t is None:
            return None
        becomes = {
            "xorsign_abs": ("min.xorsign.abs.f32 (bounds -hi and hi), which gives hi with the NaN's sign: "
                            "+NaN -> +hi, -NaN -> -hi (the GPU's own NaN, of Inf / Inf or Inf * 0, is +NaN)"),
            "med3": "v_med3_f32, which gives the smaller bound for a NaN",
            "minmax": "max then min of numbers (maxnum, minnum), which gives the lower bound for a NaN",
        }.get(self.nan_clamp_rule, self.nan_clamp_rule)
        return (f"the kernel's tl.clamp turned {self.nan_clamps:,} NaN elements into numbers: Triton compiles it "
                f"for {t.name} to {becomes}; where NaN is due, tl.clamp(..., "
                f"propagate_nan=tl.PropagateNan.ALL) keeps it")

    @property
    def warning(self) -> str | None:
        """The one-line warning to print, or None when nothing unpatched ran."""
        return UNPATCHED_WARNING if self.unpatched_conversions else None


@contextlib.contextmanager
def watch() -> Iterator[Watch]:
    """Count the FP8 conversions interpreted kernels perform inside the block.

    ``w.unpatched_conversions`` > 0 means Triton's own interpreter
    converted FP8 values (its known-wrong code ran); ``w.warning`` is the
    line to show. Works with or without :func:`faithful` (conversions the
    faithful patch handles count as ``faithful_conversions``) and installs
    nothing when Triton is absent."""
    w = Watch()
    try:
        interpreter()
    except Exception:
        yield w
        return
    with _LOCK:
        _acquire()
        _WATCHES.append(w)
    try:
        yield w
    finally:
        with _LOCK:
            _WATCHES.remove(w)
            _release()


def _note(handled: bool, *dtypes: Any) -> None:
    if not _WATCHES or not _involves_fp8(*dtypes):
        return
    faithful_now = handled and _supported_pair(*dtypes)
    with _LOCK:
        for w in _WATCHES:
            if faithful_now:
                w.faithful_conversions += 1
            else:
                w.unpatched_conversions += 1
                if len(w.examples) < 3:
                    w.examples.append(" -> ".join(getattr(d, "name", str(d)) for d in dtypes))

"""AMD aiter: its Triton FP8 quantizers (``aiter.ops.triton.quant``), run as MI300 and as sm90 run them.

aiter ships no wheel for pip beside a CPU torch, and ``import aiter`` reads
the ROCm version ("ROCm version file not found" without ROCm), but its Triton
kernels live in plain modules: unpack the wheel (``pip download --no-deps
amd-aiter==0.1.7.post2.dev18``, 40 MB, ``py3-none-any``; unzip ``aiter/``
onto ``sys.path``) and the adapters import ``aiter.ops.triton.quant``
without running ``aiter/__init__.py``
(:func:`fp8check.zoo._adapters.import_skipping_init`).

The functions take the output tensor from the caller, so the adapters give
them e4m3fnuz outputs under ``faithful:gfx942`` (what aiter's
``dtypes.fp8`` is on gfx942) and e4m3fn under ``faithful:sm90`` and
``compiled``. Their kernels start with ``tl.assume(pid > 0)``, which is false
for program 0: on a GPU that is undefined behaviour the compiler may act on;
the faithful interpreter reports it (a ``false_hint`` fault) and goes on.
"""

from __future__ import annotations

from typing import Any

from fp8check.zoo import KnownIssue, ZooEntry
from fp8check.zoo._adapters import example, import_skipping_init, lazy
from fp8check.zoo._triton import faithful_target, mode_context, require_mode

NO = "no upstream issue found (searched the issues corpus, 2026-12-04)"
QUANT = "aiter.ops.triton.quant"
_HINT = "unpack the amd-aiter wheel onto sys.path; see fp8check.zoo.aiter's docstring"


def _module() -> Any:
    return import_skipping_init(QUANT, "aiter", "amd-aiter", _HINT)


def _fp8(mode: str) -> Any:
    import torch

    return torch.float8_e4m3fnuz if faithful_target(mode) == "gfx942" else torch.float8_e4m3fn


def _rows(x: Any) -> Any:
    return x.reshape(1, -1) if x.dim() < 2 else x.reshape(-1, x.shape[-1])


def make_per_token(mode: str = "faithful:sm90") -> Any:
    """``dynamic_per_token_quant_fp8_i8(qx, x, scale_out)``: one scale per row, ``amax / DTYPE_MAX``."""
    require_mode(mode)
    import torch

    m = _module()

    def kernel(x: Any) -> tuple[Any, Any]:
        x2 = _rows(x)
        qx = torch.empty(x2.shape, dtype=_fp8(mode), device=x.device)
        s = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
        if x2.numel():
            with mode_context(mode):
                m.dynamic_per_token_quant_fp8_i8(qx, x2, s)
        return qx.reshape(x.shape), s.reshape(-1, 1)

    kernel.__name__ = f"aiter.dynamic_per_token_quant_fp8_i8[{mode}]"
    return kernel


def make_per_tensor(mode: str = "faithful:sm90") -> Any:
    """``dynamic_per_tensor_quant_fp8_i8(qx, x, scale_out)``: an atomic-max amax pass, then the static kernel."""
    require_mode(mode)
    import torch

    m = _module()

    def kernel(x: Any) -> tuple[Any, Any]:
        x2 = _rows(x)
        qx = torch.empty(x2.shape, dtype=_fp8(mode), device=x.device)
        s = torch.zeros(1, dtype=torch.float32, device=x.device)  # atomic_max's start, as aiter's callers zero it
        if x2.numel():
            with mode_context(mode):
                m.dynamic_per_tensor_quant_fp8_i8(qx, x2, s)
        return qx.reshape(x.shape), s.reshape(())

    kernel.__name__ = f"aiter.dynamic_per_tensor_quant_fp8_i8[{mode}]"
    return kernel


def make_static_cast(mode: str = "faithful:sm90") -> Any:
    """``static_per_tensor_quant_fp8_i8(qx, x, scale=1)``: with a unit scale, a plain cast (x * 1/1 -> fp8)."""
    require_mode(mode)
    import torch

    m = _module()

    def kernel(x: Any) -> Any:
        x2 = _rows(x)
        qx = torch.empty(x2.shape, dtype=_fp8(mode), device=x.device)
        one = torch.ones(1, dtype=torch.float32, device=x.device)
        if x2.numel():
            with mode_context(mode):
                m.static_per_tensor_quant_fp8_i8(qx, x2, one)
        return qx.reshape(x.shape)

    kernel.__name__ = f"aiter.static_per_tensor_quant_fp8_i8[{mode}]"
    return kernel


def make_per_token_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_per_token(mode)


def make_per_tensor_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_per_tensor(mode)


def make_static_cast_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_static_cast(mode)


_M = "fp8check.zoo.aiter:"
per_token = lazy(make_per_token, "faithful:sm90", _M + "per_token")
per_token_compiled = lazy(make_per_token, "compiled", _M + "per_token_compiled")
per_token_mi300 = lazy(make_per_token, "faithful:gfx942", _M + "per_token_mi300")
per_tensor = lazy(make_per_tensor, "faithful:sm90", _M + "per_tensor")
per_tensor_compiled = lazy(make_per_tensor, "compiled", _M + "per_tensor_compiled")
per_tensor_mi300 = lazy(make_per_tensor, "faithful:gfx942", _M + "per_tensor_mi300")
static_cast = lazy(make_static_cast, "faithful:sm90", _M + "static_cast")
static_cast_compiled = lazy(make_static_cast, "compiled", _M + "static_cast_compiled")
static_cast_mi300 = lazy(make_static_cast, "faithful:gfx942", _M + "static_cast_mi300")

_V = "==0.1.7.post2.dev18"
_SRC = "amd-aiter 0.1.7.post2.dev18, aiter/ops/triton/_triton_kernels/quant.py"
PACKAGE = "amd-aiter"


def _entry(eid: str, adapter: str, function: str, kind: str, claims: str, fmt: str, modes: tuple[str, ...],
           citation: str, known: tuple[KnownIssue, ...] = (), note: str = "") -> ZooEntry:
    if not known:
        known = (_STRIDE,) if kind == "cast" else (_NO_EPS, _INF, _STRIDE)
    note = "; ".join(n for n in (note, _ASSUME) if n)
    return ZooEntry(id=eid, package=PACKAGE, module=QUANT, versions=_V, function=function, kind=kind,
                    claims=claims, fmt=fmt, citation=citation, adapter=_M + adapter, modes=modes, known=known,
                    note=note, dtypes=("float32", "bfloat16") if kind == "quantize" else ("float32",))


_ALL = frozenset({"faithful:sm90", "faithful:gfx942", "compiled"})
_NO_EPS = KnownIssue(summary="scale = max|x| / DTYPE_MAX with no eps: an all-zero row gets scale 0 and NaN codes "
                             "(0 * (1/0)); a subnormal amax a scale that underflows to 0; and codes are "
                             "x * fl(1/scale), not x / scale, one code off where the rounded reciprocal moves a "
                             "value across a rounding midpoint (the kernel's formula)",
                     upstream=NO, categories=frozenset({"scale", "codes"}), modes=_ALL,
                     example=lambda: example("all-zero row", [[0.0, 0.0]]), shown_by="a row of zeros")
_INF = KnownIssue(summary="an Inf in the input makes the scale Inf and every code of the row (or tensor) 0 or NaN "
                          "(x * (1/Inf))", upstream=NO, categories=frozenset({"nonfinite", "scale"}), modes=_ALL,
                  example=lambda: example("row holding +Inf", [[1.0, float("inf"), -2.0]]),
                  shown_by="a row holding 1.0, +Inf, -2.0")
_STRIDE = KnownIssue(summary="the kernel indexes its output with the input's row stride (offs = pid * x_in_stride_r "
                             "for both): on a strided or row-padded input it writes past the output and over other "
                             "rows; under fp8check.triton these are out_of_bounds and race faults, and the codes land "
                             "in the wrong places", upstream=NO,
                     categories=frozenset({"codes", "scale", "nonfinite", "overflow", "infinity", "nan", "rounding",
                                           "signed_zero", "subnormal", "other"}), modes=_ALL,
                     example=lambda: _strided(), shown_by="a 4x256 input read every other column (row stride 512)")


def _strided() -> Any:
    import numpy as np

    from fp8check.quantizers.cases import QuantCase

    x = (np.arange(4 * 256, dtype=np.float32).reshape(4, 256) % 17) - 8.0
    return [QuantCase(name="every other column", x=x, dtype="float32", layout="strided")]
_ASSUME = ("every kernel starts with tl.assume(pid > 0), false for program 0 (undefined behaviour once compiled): "
           "a false_hint fault under a declared triton-target")
KNOWN: dict[str, tuple[KnownIssue, ...]] = {}

ENTRIES: tuple[ZooEntry, ...] = (
    _entry("aiter.dynamic_per_token_quant_fp8_i8", "per_token",
           "dynamic_per_token_quant_fp8_i8(qx, x, scale_out) -> _dynamic_per_token_quant_fp8_i8_kernel (Triton)",
           "quantize", "rowwise", "e4m3fn", ("faithful:sm90", "compiled"),
           f"{_SRC}: scale_out = max|x| / DTYPE_MAX, qx = (x * (1 / scale_out)).to(fp8); rowwise, one program a row"),
    _entry("aiter.dynamic_per_token_quant_fp8_i8.mi300", "per_token_mi300",
           "the same kernel with an e4m3fnuz output (aiter's dtypes.fp8 on gfx942), DTYPE_MAX 240",
           "quantize", "rowwise", "e4m3fnuz", ("faithful:gfx942",), f"{_SRC}; aiter/utility/dtypes.py: gfx942 fp8 = "
           "float8_e4m3fnuz", note="gfx942 derived from Triton's AMD backend; MI300 hardware not measured"),
    _entry("aiter.dynamic_per_tensor_quant_fp8_i8", "per_tensor",
           "dynamic_per_tensor_quant_fp8_i8(qx, x, scale_out) -> _dynamic_per_tensor_quant_fp8_i8_kernel "
           "(atomic_max of max|x| / DTYPE_MAX per row) then _static_per_tensor_quant_fp8_i8_kernel",
           "quantize", "tensorwise", "e4m3fn", ("faithful:sm90", "compiled"),
           f"{_SRC}: tl.atomic_max(scale_out, max|x| / DTYPE_MAX); qx = (x * (1 / scale)).to(fp8)"),
    _entry("aiter.dynamic_per_tensor_quant_fp8_i8.mi300", "per_tensor_mi300",
           "the same kernels with an e4m3fnuz output, DTYPE_MAX 240", "quantize", "tensorwise", "e4m3fnuz",
           ("faithful:gfx942",), f"{_SRC}", note="gfx942 derived; MI300 hardware not measured"),
    _entry("aiter.static_per_tensor_quant_fp8_i8", "static_cast",
           "static_per_tensor_quant_fp8_i8(qx, x, scale=1.0) -> _static_per_tensor_quant_fp8_i8_kernel: "
           "(x * (1 / 1)).to(fp8), no clamp", "cast", "satfinite", "e4m3fn", ("faithful:sm90", "compiled"),
           f"{_SRC}: qx = (x * scale_recip).to(qx_ptr.dtype.element_ty) (the conversion's own saturation)"),
    _entry("aiter.static_per_tensor_quant_fp8_i8.mi300", "static_cast_mi300",
           "the same kernel with an e4m3fnuz output", "cast", "satfinite", "e4m3fnuz", ("faithful:gfx942",),
           f"{_SRC}", note="gfx942 derived; MI300 hardware not measured"),
)

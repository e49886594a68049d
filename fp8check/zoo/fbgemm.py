"""FBGEMM (Meta): the Triton rowwise FP8 quantizer of ``fbgemm_gpu.experimental.gemm.triton_gemm.fp8_gemm``.

``fbgemm-gpu-genai`` 1.9.0 is a 34 MB cp311 wheel whose ``fbgemm_gpu/__init__.py``
loads its CUDA library; its Triton kernels are in plain modules. Unpack the
wheel (``pip download --no-deps fbgemm-gpu-genai==1.9.0``, unzip
``fbgemm_gpu/``: 179 MB unpacked, of which the Triton GEMM package is 0.3 MB)
onto ``sys.path``; the adapters import ``fp8_gemm`` without running
``fbgemm_gpu/__init__.py`` (:func:`fp8check.zoo._adapters.import_skipping_init`).

``quantize_fp8_row`` falls back to torch code for CPU tensors; the adapters
call the function it calls on a GPU, ``triton_quantize_fp8_row(a)``, which
launches ``_kernel_quantize_fp8_row`` (autotuned over ``BLOCK_SIZE`` 512 to
8192: every config is checked). On ROCm gfx942, ``get_fp8_constants()``
gives ``(float8_e4m3fnuz, tl.float8e4b8, 240.0, 1e-12)``; the ``mi300``
adapter sets exactly that (the module's function, for the call) and runs
under ``faithful:gfx942``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from fp8check.zoo import KnownIssue, ZooEntry
from fp8check.zoo._adapters import example, import_skipping_init, lazy
from fp8check.zoo._triton import faithful_target, mode_context, require_mode

NO = "no upstream issue found (searched the issues corpus, 2026-12-04)"
FP8_GEMM = "fbgemm_gpu.experimental.gemm.triton_gemm.fp8_gemm"
_HINT = "unpack the fbgemm-gpu-genai wheel onto sys.path; see fp8check.zoo.fbgemm's docstring"


def _module() -> Any:
    return import_skipping_init(FP8_GEMM, "fbgemm_gpu", "fbgemm-gpu-genai", _HINT)


@contextlib.contextmanager
def _as_mi300(m: Any) -> Iterator[None]:
    """What ``get_fp8_constants()`` returns on ROCm gfx942 (``supports_float8_fnuz()`` is true there)."""
    import torch
    import triton.language as tl

    saved = m.get_fp8_constants
    m.get_fp8_constants = lambda: (torch.float8_e4m3fnuz, tl.float8e4b8, torch.finfo(torch.float8_e4m3fnuz).max, 1e-12)
    try:
        yield
    finally:
        m.get_fp8_constants = saved


@contextlib.contextmanager
def _cpu_device_index() -> Iterator[None]:
    """``torch.cuda.device(None)`` (what the launcher enters for a CPU tensor, ``a.device.index``) is a no-op
    in CUDA builds of torch (index -1) but raises in CPU builds ("'<' not supported between 'NoneType' and
    'int'"): for the call, a None index is the no-op it is on a GPU machine."""
    import torch

    real = torch.cuda.device

    class device(real):  # type: ignore[misc, valid-type]
        def __enter__(self) -> Any:
            return None if self.idx is None else super().__enter__()

        def __exit__(self, *exc: Any) -> Any:
            return False if self.idx is None else super().__exit__(*exc)

    torch.cuda.device = device
    try:
        yield
    finally:
        torch.cuda.device = real


def make_quantize_fp8_row(mode: str = "faithful:sm90") -> Any:
    """``triton_quantize_fp8_row(a) -> (a_fp8, a_scale)``: a_scale = 1 / (MAX_FP8 / max(amax, 1e-12)) per row."""
    require_mode(mode)
    m = _module()
    mi300 = faithful_target(mode) == "gfx942"

    def kernel(x: Any) -> tuple[Any, Any]:
        x2 = x.reshape(1, -1) if x.dim() < 2 else x
        with mode_context(mode), (_as_mi300(m) if mi300 else contextlib.nullcontext()), (
                _cpu_device_index() if x.device.type == "cpu" else contextlib.nullcontext()):
            q, s = m.triton_quantize_fp8_row(x2)
        return q.reshape(x.shape), s.reshape(-1, 1)

    kernel.__name__ = f"fbgemm.triton_quantize_fp8_row[{mode}]"
    return kernel


def make_quantize_fp8_row_mi300(mode: str = "faithful:gfx942") -> Any:
    return make_quantize_fp8_row(mode)


_M = "fp8check.zoo.fbgemm:"
quantize_fp8_row = lazy(make_quantize_fp8_row, "faithful:sm90", _M + "quantize_fp8_row")
quantize_fp8_row_compiled = lazy(make_quantize_fp8_row, "compiled", _M + "quantize_fp8_row_compiled")
quantize_fp8_row_mi300 = lazy(make_quantize_fp8_row, "faithful:gfx942", _M + "quantize_fp8_row_mi300")

PACKAGE = "fbgemm-gpu-genai"
_V = "==1.9.0"
_SRC = "fbgemm-gpu-genai 1.9.0, fbgemm_gpu/experimental/gemm/triton_gemm/fp8_gemm.py"

_ALL = frozenset({"faithful:sm90", "faithful:gfx942", "compiled"})
KNOWN = (
    KnownIssue(summary="the kernel's own formula: the scale stored is 1.0 / (MAX_FP8 / max(amax, 1e-12)), two "
                       "roundings, 1 ulp off max(amax, 1e-12) / MAX_FP8 in part of the rows (amax 1.8125, e4m3fnuz: "
                       "0x3BF77778, correctly rounded 0x3BF77777); codes are a * fl(MAX_FP8 / amax), not a / scale; "
                       "and +Inf in a row gives MAX_FP8 / Inf = 0: the scale is Inf and every code of the row 0 "
                       "(the recipe keeps the finite values). On sm90 the two divisions are div.full.f32: codes and "
                       "scales that depend on where it lands are target-dependent, the rest divergences",
               upstream="by design (the kernel's formula); +Inf: " + NO,
               categories=frozenset({"scale", "codes", "nonfinite"}), modes=_ALL,
               example=lambda: example("row holding +Inf", [[1.0, float("inf"), -2.0]]),
               shown_by="a row holding 1.0, +Inf, -2.0"),
)

ENTRIES: tuple[ZooEntry, ...] = (
    ZooEntry(id="fbgemm.triton_quantize_fp8_row", package=PACKAGE, module=FP8_GEMM, versions=_V,
             function="triton_quantize_fp8_row(a) -> _kernel_quantize_fp8_row (Triton, autotuned BLOCK_SIZE "
                      "512..8192)", kind="quantize", claims="rowwise", fmt="e4m3fn",
             citation=f"{_SRC}: 'Scale per row i is computed as MAX_FP8 / max(abs(A[i, :]))', cur_max = "
                      "max(amax, EPS=1e-12), a_scale = MAX_FP8 / cur_max, stores 1.0 / a_scale, "
                      "a_fp8 = clamp(a * a_scale, -MAX_FP8, MAX_FP8)",
             adapter=_M + "quantize_fp8_row", modes=("faithful:sm90", "compiled"), known=KNOWN),
    ZooEntry(id="fbgemm.triton_quantize_fp8_row.mi300", package=PACKAGE, module=FP8_GEMM, versions=_V,
             function="the same kernel as on ROCm gfx942: get_fp8_constants() = (float8_e4m3fnuz, "
                      "tl.float8e4b8, 240.0, 1e-12)", kind="quantize", claims="rowwise", fmt="e4m3fnuz",
             citation=f"{_SRC}: get_fp8_constants: supports_float8_fnuz() (gfx942) -> float8_e4m3fnuz",
             adapter=_M + "quantize_fp8_row_mi300", modes=("faithful:gfx942",), known=KNOWN,
             note="gfx942 derived; MI300 hardware not measured"),
)

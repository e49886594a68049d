"""Quantize kernels under test, each a callable ``kernel(x[, offsets]) -> (fp8, scales)``.

A quantize kernel takes a 2-D float32 or bfloat16 torch tensor (and, for a
per-group recipe, the int group ``offsets``) and returns the fp8 tensor (a
torch float8 tensor, or uint8 codes) and its scales in the recipe's
convention (float32, or e8m0 / uint8 for MX).

- :func:`torch_quantizer` builds a quantizer for any recipe from plain torch
  ops (amax, one float32 multiply or divide, clamp, ``.to(fp8)``): runs
  wherever torch runs (CPU, CUDA). Powers of two are taken with
  ``torch.frexp`` and built from bits, never from ``log2``.
- ``torchao_*`` wrap torchao 0.18's real functions: float8 training scaling
  (``tensor_to_scale`` + ``hp_tensor_and_scale_to_float8``), MX ``to_mx``
  and the Triton per-group ("jagged") scale kernels of its MoE training
  prototype, which :func:`load_torchao_jagged_kernels` loads either
  compiled (CUDA) or under the Triton interpreter on the CPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any, Callable

from fp8check.errors import FP8CheckError, UnsupportedFormatError
from fp8check.formats import get as get_format
from fp8check.quantizers.recipe import TARGET_OPS, Recipe

__all__ = [
    "torch_dtype",
    "torch_quantizer",
    "torchao_tensorwise",
    "torchao_axiswise",
    "torchao_to_mx",
    "torchao_triton_group_rowwise",
    "torchao_triton_group_colwise",
    "load_torchao_jagged_kernels",
    "TorchaoUnavailableError",
    "GuardedAllocations",
]


class TorchaoUnavailableError(FP8CheckError, ImportError):
    """torchao (or the part of it a kernel needs) cannot be imported here."""


def torch_dtype(fmt: object) -> Any:
    import torch

    f = get_format(fmt)
    if not f.torch_name:
        raise UnsupportedFormatError(f"torch has no dtype for {f.name}")
    return getattr(torch, f.torch_name)


# -- torch reference quantizers ------------------------------------------------


def _pow2_from_exponent(k: Any) -> Any:
    """2**k as float32 built from bits (exact; Inf above 2**127, 0 below 2**-149)."""
    import torch

    k = k.to(torch.int32)
    normal = ((k.clamp(-126, 127) + 127) << 23).view(torch.float32)
    sub = (torch.ones_like(k) << (k.clamp(-149, -127) + 149)).view(torch.float32)
    out = torch.where(k >= -126, normal, sub)
    out = torch.where(k > 127, torch.full_like(out, float("inf")), out)
    return torch.where(k < -149, torch.zeros_like(out), out)


def _exponent(q: Any, mode: str) -> Any:
    """floor/ceil(log2 q) of positive finite float32 values, via frexp (exact)."""
    import torch

    mant, exp = torch.frexp(q)
    k = exp.to(torch.int32) - 1
    if mode == "ceil":
        k = k + (mant != 0.5).to(torch.int32)
    return k


def _block_amax(a: Any, recipe: Recipe, offsets: Any) -> Any:
    import torch
    import torch.nn.functional as F

    g = recipe.granularity
    m, n = a.shape
    if g.kind == "tensorwise":
        return a.amax() if a.numel() else a.new_zeros(())
    if g.kind == "rowwise":
        return a.amax(dim=1, keepdim=True)
    if g.kind == "colwise":
        return a.amax(dim=0, keepdim=True)
    if g.kind == "block":
        mb, nb = -(-m // g.rows), -(-n // g.cols)
        p = F.pad(a, (0, nb * g.cols - n, 0, mb * g.rows - m))
        return p.view(mb, g.rows, nb, g.cols).amax(dim=(1, 3))
    ends = [int(e) for e in offsets.tolist()]
    starts = [0] + ends[:-1]
    out = []
    for s, e in zip(starts, ends):
        part = a[:, s:e] if g.kind == "group_rowwise" else a[s:e, :]
        dim = 1 if g.kind == "group_rowwise" else 0
        out.append(part.amax(dim=dim) if e > s else a.new_zeros(m if dim == 1 else n))
    return torch.stack(out)


def _expand(s: Any, recipe: Recipe, shape: tuple[int, int], offsets: Any) -> Any:
    import torch

    g = recipe.granularity
    m, n = shape
    if g.kind in ("tensorwise", "rowwise", "colwise"):
        return s
    if g.kind == "block":
        return s.repeat_interleave(g.rows, dim=0).repeat_interleave(g.cols, dim=1)[:m, :n]
    off = offsets.to(device=s.device, dtype=torch.int64)
    if g.kind == "group_rowwise":
        group = torch.searchsorted(off, torch.arange(n, device=s.device), right=True)
        return s[group].T  # (G, M) -> (N, M) -> (M, N)
    group = torch.searchsorted(off, torch.arange(m, device=s.device), right=True)
    return s[group]  # (G, N) -> (M, N)


def _scales(amax: Any, recipe: Recipe) -> tuple[Any, Any]:
    """(applied float32 scales, stored scales) from float32 amax."""
    import torch

    nan = torch.full_like(amax, float("nan"))
    if recipe.rule != "amax":
        a = amax if recipe.eps is None else amax.clamp(min=recipe.eps)
        ok = torch.isfinite(a) & (a > 0)
        e = _exponent(torch.where(ok, a, torch.ones_like(a)), "ceil" if recipe.rule == "mx-ceil" else "floor")
        k = torch.where(a == 0, torch.full_like(e, -127), e - recipe.format.emax)
        bad = ~torch.isfinite(a) | (k > 127)
        k = k.clamp(min=-127)
        value = torch.where(bad, nan, _pow2_from_exponent(k))
        codes = torch.where(bad, torch.full_like(k, 255), k + 127).to(torch.uint8)
        return value, codes.view(torch.float8_e8m0fnu)
    # The target is a tensor, not a Python float: on CUDA `tensor / 448.0`
    # is a reciprocal multiply, not an IEEE division (pytorch/pytorch#191495),
    # and `448.0 / tensor` is reciprocal() * 448 on every device.
    if recipe.scale_precision == "float64":
        a = amax.double()
        if recipe.eps is not None:
            a = a.clamp(min=recipe.eps)
        target = torch.full_like(a, recipe.amax_target)
        q = (target / a if recipe.convention == "scale" else a / target).float()
    else:
        a = amax if recipe.eps is None else amax.clamp(min=recipe.eps)
        target = torch.full_like(a, recipe.amax_target)
        num, den = (target, a) if recipe.convention == "scale" else (a, target)
        # torch has no Triton target: a target-* quotient is the correctly rounded one it stands for
        reciprocal = TARGET_OPS.get(recipe.scale_divide, recipe.scale_divide) == "multiply-reciprocal"
        q = num * (torch.ones_like(den) / den) if reciprocal else num / den
    if recipe.pow2 is not None:
        ok = torch.isfinite(q) & (q > 0)
        k = _exponent(torch.where(ok, q, torch.ones_like(q)), recipe.pow2)
        q = torch.where(ok, _pow2_from_exponent(k), q)
    if recipe.scale_min is not None:
        q = torch.where(q < recipe.scale_min, torch.full_like(q, recipe.scale_min), q)
    if recipe.scale_dtype == "e8m0":
        ok = torch.isfinite(q) & (q > 0)
        k = torch.where(ok, _exponent(torch.where(ok, q, torch.ones_like(q)), "floor"), torch.full_like(q, -127, dtype=torch.int32))
        bad = ~torch.isfinite(q) | (k > 127)
        k = k.clamp(min=-127)
        value = torch.where(bad, nan, _pow2_from_exponent(k))
        codes = torch.where(bad, torch.full_like(k, 255), k + 127).to(torch.uint8)
        return value, codes.view(torch.float8_e8m0fnu)
    stored = q.to(getattr(torch, recipe.scale_dtype)) if recipe.scale_dtype in ("bfloat16", "float16") else q
    if recipe.zero_scale is not None:  # scale_inv: a zero scale; scale: an all-zero block's (Inf) scale
        zero = (stored == 0) if recipe.convention == "scale_inv" else (amax == 0)
        stored = torch.where(zero, torch.full_like(stored, recipe.zero_scale), stored)
    return stored.float(), stored


def torch_quantizer(recipe: Recipe) -> Callable[..., tuple[Any, Any]]:
    """A quantizer for ``recipe`` built from torch ops (CPU or CUDA).

    The element cast is a clamp to ±max followed by ``.to(fp8)`` (RNE),
    i.e. the ``satfinite`` profile; other element profiles are refused.
    """
    p = recipe.profile.resolve(recipe.format)
    if (p.rounding, p.overflow, p.infinity, p.subnormals, p.intermediate) != ("rne", "satfinite", "satfinite", "keep", None):
        raise UnsupportedFormatError(
            f"torch_quantizer casts with clamp + .to() (satfinite); recipe {recipe.name!r} asks for profile {p.name!r}"
        )
    dtype = torch_dtype(recipe.format)
    fmax = recipe.format.max

    def kernel(x: Any, offsets: Any = None) -> tuple[Any, Any]:
        import torch

        x32 = x.to(torch.float32)
        a = x32.abs()
        if recipe.nonfinite == "finite":
            a = torch.where(torch.isfinite(a), a, torch.zeros_like(a))
        elif recipe.nonfinite == "skip-nan":
            a = torch.where(torch.isnan(a), torch.zeros_like(a), a)
        amax = _block_amax(a, recipe, offsets)
        applied, stored = _scales(amax, recipe)
        s = _expand(applied, recipe, tuple(x.shape), offsets)
        if recipe.rounded_op == "multiply":
            y = x32 * s
        elif recipe.rounded_op == "divide":
            y = x32 / s
        else:  # a float32 reciprocal, then a multiply
            y = x32 * (torch.ones_like(s) / s)
        if recipe.stored == "reciprocal":
            stored = torch.ones_like(stored) / stored
        return y.clamp(-fmax, fmax).to(dtype), stored

    kernel.__name__ = f"torch_quantizer[{recipe.name}/{recipe.format.name}]"
    kernel.__qualname__ = kernel.__name__
    return kernel


# -- torchao --------------------------------------------------------------------


def _torchao(what: str) -> Any:
    try:
        import torchao  # noqa: F401
    except Exception as exc:  # torchao may fail at import for many reasons
        raise TorchaoUnavailableError(f"{what} needs torchao, which cannot be imported here: {exc}") from None
    return torchao


def torchao_tensorwise(fmt: object = "e4m3fn", *, pow2: bool = False) -> Callable[..., tuple[Any, Any]]:
    """torchao float8 training, tensorwise: ``tensor_to_scale`` then
    ``hp_tensor_and_scale_to_float8`` (x * scale, clamp, cast). Recipe: ``torchao-tensorwise[-pow2]``."""
    _torchao("torchao_tensorwise")
    from torchao.float8.float8_training_tensor import hp_tensor_and_scale_to_float8
    from torchao.float8.float8_utils import tensor_to_scale

    dtype = torch_dtype(fmt)

    def kernel(x: Any) -> tuple[Any, Any]:
        s = tensor_to_scale(x, dtype, round_scales_to_power_of_2=pow2)
        t = hp_tensor_and_scale_to_float8(x, s, dtype)
        return t._data, t._scale

    kernel.__name__ = f"torchao.tensor_to_scale[tensorwise{', pow2' if pow2 else ''}]"
    return kernel


def torchao_axiswise(fmt: object = "e4m3fn", *, dim: int = -1, pow2: bool = False) -> Callable[..., tuple[Any, Any]]:
    """torchao float8 training, axiswise: amax over ``dim`` (-1: one scale per
    row, recipe ``torchao-rowwise``; 0: per column, ``torchao-colwise``)."""
    _torchao("torchao_axiswise")
    from torchao.float8.config import ScalingGranularity
    from torchao.float8.float8_training_tensor import hp_tensor_and_scale_to_float8
    from torchao.float8.float8_utils import tensor_to_scale

    dtype = torch_dtype(fmt)

    def kernel(x: Any) -> tuple[Any, Any]:
        s = tensor_to_scale(x, dtype, scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=dim,
                            round_scales_to_power_of_2=pow2)
        t = hp_tensor_and_scale_to_float8(x, s, dtype, axiswise_dim=dim)
        return t._data, t._scale

    kernel.__name__ = f"torchao.tensor_to_scale[axiswise dim={dim}{', pow2' if pow2 else ''}]"
    return kernel


def torchao_to_mx(fmt: object = "e4m3fn", *, mode: str = "floor") -> Callable[..., tuple[Any, Any]]:
    """torchao MX ``to_mx`` with block 32 and ``ScaleCalculationMode`` ``mode``
    (floor, ceil, rceil): recipes ``mx-e8m0-floor``, ``-ceil``, ``-rceil``."""
    _torchao("torchao_to_mx")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    dtype = torch_dtype(fmt)
    scaling = ScaleCalculationMode[mode.upper()]

    def kernel(x: Any) -> tuple[Any, Any]:
        scale, data = to_mx(x.contiguous(), dtype, 32, scaling)
        return data, scale

    kernel.__name__ = f"torchao.to_mx[{mode}]"
    return kernel


_JAGGED = "prototype/moe_training/kernels/jagged_float8_scales.py"
_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


@contextlib.contextmanager
def _interpreter_env() -> Any:
    """``TRITON_INTERPRET=1`` while a kernel is defined and while it runs
    (Triton reads it at ``@jit`` time and when a jitted helper is called)."""
    saved_env = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env


@contextlib.contextmanager
def _interpreter_import() -> Any:
    """Make the module's ``has_triton()`` true and its ``@triton.jit`` interpreted."""
    import torch.utils._triton as tu

    saved = tu.has_triton
    tu.has_triton = lambda: True
    try:
        with _interpreter_env():
            yield
    finally:
        tu.has_triton = saved


def _require_interpreter() -> None:
    """Triton decides at import whether its language helpers are interpreted:
    ``TRITON_INTERPRET=1`` must be set before triton (or torchao, which
    imports it) is first imported. Set it now if that is still possible."""
    import sys

    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
        return
    import triton.language.standard as standard

    if type(standard.max).__name__ != "InterpretedFunction":
        raise FP8CheckError(
            "the Triton interpreter needs TRITON_INTERPRET=1 before triton is first imported, and triton "
            "(or torchao) was imported without it in this process; run with TRITON_INTERPRET=1 set"
        )


def load_torchao_jagged_kernels(*, interpret: bool | None = None) -> Any:
    """torchao's ``jagged_float8_scales`` module, loaded from its file.

    ``interpret=True`` (the default without CUDA) runs its Triton kernels
    in the Triton interpreter on the CPU; ``False`` compiles them. The
    interpreter needs ``TRITON_INTERPRET=1`` before triton is first imported
    in the process: this sets it when triton is not imported yet, and
    raises otherwise. The file
    is loaded on its own (not through ``torchao.prototype.moe_training``,
    whose other modules do not import under Triton 3.9), once per process.
    """
    import torch

    if interpret is None:
        interpret = not torch.cuda.is_available()
    if interpret:
        _require_interpreter()
    torchao = _torchao("the torchao per-group Triton kernels")
    try:
        import triton  # noqa: F401
    except Exception as exc:
        raise TorchaoUnavailableError(f"the torchao per-group Triton kernels need Triton: {exc}") from None
    mode = "interpret" if interpret else "compiled"
    with _LOAD_LOCK:
        if mode in _LOADED:
            return _LOADED[mode]
        if _LOADED:
            raise FP8CheckError(
                f"torchao's per-group Triton kernels are already loaded {next(iter(_LOADED))}; "
                f"one process runs them one way (they register torch custom ops)"
            )
        path = Path(torchao.__file__).parent / _JAGGED
        if not path.is_file():
            raise TorchaoUnavailableError(f"torchao {getattr(torchao, '__version__', '?')} has no {_JAGGED}")
        spec = importlib.util.spec_from_file_location(f"fp8check_torchao_jagged_{mode}", path)
        module = importlib.util.module_from_spec(spec)
        with _interpreter_import() if interpret else contextlib.nullcontext():
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        if not hasattr(module, "_triton_fp8_per_group_rowwise_scales_kernel"):
            raise TorchaoUnavailableError(f"{path.name}: Triton kernels not defined (torch found no Triton device)")
        module.fp8check_interpreted = interpret
        _LOADED[mode] = module
        return module


def _pin_configs(module: Any, block_size: int, block_size_iter: int) -> None:
    """One config per 2-D kernel (the fused one keeps one per group-size cap)."""
    import triton

    one = triton.Config({"BLOCK_SIZE": block_size, "BLOCK_SIZE_ITER": block_size_iter}, num_warps=4, num_stages=2)
    module._triton_fp8_per_group_rowwise_scales_kernel.configs = [one]
    module._triton_fp8_per_group_colwise_scales_kernel.configs = [one]
    module.kernel_configs_fused[:] = [
        triton.Config({"BLOCK_SIZE": block_size, "MAX_GROUP_SIZE": g}, num_warps=8, num_stages=1)
        for g in (256, 512, 1024, 2048)
    ]


class GuardedAllocations:
    """``torch`` for a kernel module, except that ``empty``/``empty_like``
    allocate a guard tail filled with a canary byte: a kernel that writes
    past the end of a buffer it allocated is seen (and, in the interpreter,
    does not corrupt the heap). Everything else is torch itself."""

    GUARD_BYTES = 1 << 14
    CANARY = 0x5A

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self.allocations: list[tuple[Any, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def empty(self, *size: Any, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
        torch = self._torch
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
        dtype = dtype or torch.get_default_dtype()
        n = 1
        for d in shape:
            n *= int(d)
        item = torch.empty((), dtype=dtype).element_size()
        buf = torch.empty(n * item + self.GUARD_BYTES, dtype=torch.uint8, device=device)
        buf.fill_(self.CANARY)
        self.allocations.append((buf, n * item))
        return buf[: n * item].view(dtype).view(shape)

    def empty_like(self, t: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
        return self.empty(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device)

    def overruns(self) -> list[int]:
        """Bytes written past the end of each buffer allocated since the last call."""
        out = [int((buf[used:] != self.CANARY).sum()) for buf, used in self.allocations]
        self.allocations = []
        return out


def _jagged(which: str, fmt: object, pow2: bool, interpret: bool | None, block_size: int,
            block_size_iter: int, autotune: bool) -> Callable[..., tuple[Any, Any]]:
    module = load_torchao_jagged_kernels(interpret=interpret)
    dtype = torch_dtype(fmt)
    fn = getattr(module, f"triton_fp8_per_group_{which}_scales")
    if not isinstance(module.torch, GuardedAllocations):
        module.torch = GuardedAllocations(module.torch)
    guard = module.torch

    def kernel(x: Any, offsets: Any) -> tuple[Any, Any]:
        import torch

        off = torch.as_tensor(offsets).to(device=x.device, dtype=torch.int32)
        if module.fp8check_interpreted or not autotune:  # the interpreter cannot benchmark configs
            _pin_configs(module, block_size, block_size_iter)
        if module.fp8check_interpreted:
            with _interpreter_env():
                q, s = fn(x, off, dtype, pow2)
        else:
            q, s = fn(x, off, dtype, pow2)
        over = guard.overruns()
        if any(over):
            kernel.overruns.append({"shape": tuple(x.shape), "offsets": off.tolist(), "bytes_past_end": over})
        length = x.shape[0] if which == "rowwise" else x.shape[1]
        return q, s.view(off.numel(), length)

    kernel.overruns = []  # type: ignore[attr-defined]  # writes past the end of a buffer, per call

    mode = "interpreted" if module.fp8check_interpreted else "compiled" + (", autotuned" if autotune else "")
    kernel.__name__ = f"torchao.triton_fp8_per_group_{which}_scales[{mode}{', pow2' if pow2 else ''}]"
    return kernel


def torchao_triton_group_rowwise(fmt: object = "e4m3fn", *, pow2: bool = False, interpret: bool | None = None,
                                 block_size: int = 32, block_size_iter: int = 64,
                                 autotune: bool = False) -> Callable[..., tuple[Any, Any]]:
    """torchao ``triton_fp8_per_group_rowwise_scales``: groups split the
    columns, one scale per (group, row). Recipe ``torchao-group-rowwise[-pow2]``.
    ``block_size``/``block_size_iter`` pick the one config that runs, in the
    interpreter (it cannot benchmark) and, unless ``autotune``, compiled too:
    a config picked by timing would make a check's result vary between runs,
    and each new shape would compile all 36 of torchao's configs."""
    return _jagged("rowwise", fmt, pow2, interpret, block_size, block_size_iter, autotune)


def torchao_triton_group_colwise(fmt: object = "e4m3fn", *, pow2: bool = False, interpret: bool | None = None,
                                 block_size: int = 32, block_size_iter: int = 64,
                                 autotune: bool = False) -> Callable[..., tuple[Any, Any]]:
    """torchao ``triton_fp8_per_group_colwise_scales``: groups split the rows,
    one scale per (group, column); a fused one-pass kernel is chosen when
    ceil(rows / groups), rounded up to a power of two, is 256..2048.
    Recipe ``torchao-group-colwise[-pow2]``."""
    return _jagged("colwise", fmt, pow2, interpret, block_size, block_size_iter, autotune)

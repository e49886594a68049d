"""What an adapter is: :class:`CastKernel` (one implementation of FP8 casts and the profile it claims) and
the reading of a kernel's output as uint8 codes.

A leaf of :mod:`fp8check.casts.adapters`: the adapters (torch, ml_dtypes, Triton, a user's callable) build
on it, and the package re-exports it, so no adapter imports back up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fp8check import device_faults, inputs
from fp8check.errors import FP8CheckError, KernelCallError, KernelOutputError, UnsupportedFormatError
from fp8check.formats import Format, get as get_format
from fp8check.profiles import Profile
from fp8check.stacks import KnownDivergence, Observation

__all__ = ["CastKernel", "codes_from_output"]


def codes_from_output(out: Any, shape: tuple[int, ...], fmt: Format, who: str) -> np.ndarray:
    """uint8 codes from what a kernel returned (fp8 tensor/array or uint8 codes)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        dtype_name = str(out.dtype).removeprefix("torch.")
        if out.dtype == torch.uint8:
            arr = out.detach().cpu().numpy()
        elif out.dtype.is_floating_point and out.element_size() == 1:
            if dtype_name != fmt.torch_name:
                raise KernelOutputError(
                    f"{who} returned a torch.{dtype_name} tensor for format {fmt.name}"
                    f" (expected torch.{fmt.torch_name} or uint8 codes)"
                )
            arr = out.detach().view(torch.uint8).cpu().numpy()
        else:
            raise KernelOutputError(
                f"{who} returned a torch.{dtype_name} tensor; a cast kernel returns an fp8 tensor or uint8 codes"
            )
    elif isinstance(out, np.ndarray):
        if out.dtype == np.uint8:
            arr = out
        elif out.dtype.itemsize == 1 and out.dtype.kind not in "iub":
            if fmt.ml_dtypes_name is not None and out.dtype.name != fmt.ml_dtypes_name:
                raise KernelOutputError(f"{who} returned a {out.dtype.name} array for format {fmt.name}")
            arr = out.view(np.uint8)
        else:
            raise KernelOutputError(
                f"{who} returned a {out.dtype} array; a cast kernel returns fp8 values or uint8 codes"
            )
    else:
        raise KernelOutputError(
            f"{who} returned {type(out).__name__}; a cast kernel returns a tensor or array of codes"
        )
    if tuple(arr.shape) != tuple(shape):
        raise KernelOutputError(f"{who} returned shape {tuple(arr.shape)} for an input of shape {tuple(shape)}")
    if fmt.bits < 8 and arr.size and int(arr.max()) >= fmt.code_count:
        raise KernelOutputError(f"{who} returned code {int(arr.max()):#x}, out of range for {fmt.name}")
    return np.ascontiguousarray(arr, dtype=np.uint8)


@dataclass(frozen=True, kw_only=True)
class CastKernel:
    """One implementation of FP8 casts and the profile it claims.

    ``cast_fn(x, fmt)`` takes a NumPy array of one of ``input_dtypes`` and
    returns whatever the implementation gives (fp8 tensor/array or uint8
    codes); :meth:`cast` checks and normalises that to uint8 codes.
    ``tensor_fn(x, fmt)``, when present, does the same for a torch tensor on
    ``device`` without leaving it (exhaustive GPU sweeps). ``decode_fn(codes,
    fmt)``, when present, decodes uint8 codes to float32 values the way the
    implementation does.
    """

    name: str
    description: str
    claims: Profile
    formats: tuple[Format, ...]
    input_dtypes: tuple[str, ...]
    cast_fn: Callable[[np.ndarray, Format], Any]
    device: str = "cpu"
    tensor_fn: Callable[[Any, Format], Any] | None = None
    decode_fn: Callable[[np.ndarray, Format], np.ndarray] | None = None
    unsupported: tuple[tuple[str, str], ...] = ()
    known: tuple[KnownDivergence, ...] = ()
    builtin: bool = True
    # The stack registry's entry this adapter claims from, or why none covers it.
    observation: Observation | None = None
    unpinned: str | None = None

    def __str__(self) -> str:
        return self.name

    def supports(self, fmt: object) -> bool:
        f = get_format(fmt)
        return f in self.formats and self.unsupported_reason(f) is None

    def unsupported_reason(self, fmt: object) -> str | None:
        f = get_format(fmt)
        for name, why in self.unsupported:
            if name == f.name:
                return why
        if f not in self.formats:
            return f"{self.name} does not cast to {f.name}"
        return None

    def profile_for(self, fmt: object) -> Profile:
        """The profile this kernel claims for ``fmt`` (raises if unsupported)."""
        f = get_format(fmt)
        why = self.unsupported_reason(f)
        if why is not None:
            raise UnsupportedFormatError(why)
        self.claims.resolve(f)
        return self.claims

    def cast(self, x: np.ndarray, fmt: object) -> np.ndarray:
        """uint8 codes for the NumPy array ``x`` (any shape)."""
        f = get_format(fmt)
        why = self.unsupported_reason(f)
        if why is not None:
            raise UnsupportedFormatError(why)
        dtype = inputs.dtype_name(x)
        if dtype not in self.input_dtypes:
            raise UnsupportedFormatError(
                f"{self.name} takes {', '.join(self.input_dtypes)} inputs, not {dtype}"
            )
        try:
            out = self.cast_fn(x, f)
            device_faults.settle(self.device)  # a fault on the device is this call's
        except FP8CheckError:
            raise
        except Exception as exc:  # the kernel under test failed: say so in one line
            device_faults.check_call(exc, device=self.device, call=f"{dtype} input of shape {x.shape}",
                                     kernel=self.name)
            raise KernelCallError(
                f"{self.name} raised {type(exc).__name__} casting {dtype} to {f.name}: {_one_line(exc)}"
            ) from exc
        return codes_from_output(out, x.shape, f, self.name)

    def call(self, x: Any, fmt: Format) -> np.ndarray:
        """Codes (uint8, NumPy, in ``x``'s logical order and shape) for ``x`` as the kernel gives them.

        ``x``: a torch tensor (any layout, on the kernel's device) where the
        kernel takes tensors, else a NumPy array. What the kernel raises
        propagates: the caller decides whether it is a refusal.
        """
        if self.tensor_fn is not None and not isinstance(x, np.ndarray):
            out = self.tensor_fn(x, fmt)
        else:
            out = self.cast_fn(x, fmt)
        return codes_from_output(out, tuple(x.shape), fmt, self.name)

    def cast_tensor(self, x: Any, fmt: object) -> Any:
        """torch uint8 codes for the torch tensor ``x``, computed on its device."""
        f = get_format(fmt)
        why = self.unsupported_reason(f)
        if why is not None:
            raise UnsupportedFormatError(why)
        if self.tensor_fn is None:
            raise UnsupportedFormatError(f"{self.name} has no tensor path")
        import torch

        try:
            out = self.tensor_fn(x, f)
            device_faults.settle(self.device)  # a fault on the device is this call's
        except FP8CheckError:
            raise
        except Exception as exc:
            device_faults.check_call(exc, device=self.device, call=f"{x.dtype} input of shape {tuple(x.shape)}",
                                     kernel=self.name)
            raise KernelCallError(
                f"{self.name} raised {type(exc).__name__} casting to {f.name}: {_one_line(exc)}"
            ) from exc
        if not isinstance(out, torch.Tensor):
            return torch.from_numpy(codes_from_output(out, tuple(x.shape), f, self.name)).to(x.device)
        if out.dtype != torch.uint8:
            if out.element_size() != 1 or str(out.dtype).removeprefix("torch.") != f.torch_name:
                raise KernelOutputError(f"{self.name} returned a {out.dtype} tensor for format {f.name}")
            out = out.view(torch.uint8)
        if tuple(out.shape) != tuple(x.shape):
            raise KernelOutputError(f"{self.name} returned shape {tuple(out.shape)} for an input of shape {tuple(x.shape)}")
        return out

    def decode(self, codes: np.ndarray, fmt: object) -> np.ndarray:
        """float32 values of uint8 ``codes`` as this kernel decodes them."""
        f = get_format(fmt)
        if self.decode_fn is None:
            raise UnsupportedFormatError(f"{self.name} does not decode")
        out = self.decode_fn(np.ascontiguousarray(codes, dtype=np.uint8), f)
        return np.asarray(out, dtype=np.float32)

    def known_divergences(self, fmt: object, input_dtype: str | None = None, kind: str = "cast") -> tuple[KnownDivergence, ...]:
        f = get_format(fmt)
        return tuple(k for k in self.known if k.applies(f, input_dtype, kind))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

"""Decode kernels: fp8 codes (uint8, or a torch fp8 tensor) -> float32, float16 or bfloat16, every code checked.

:func:`check_decode` calls a kernel on all codes of the format, once per way of handing it the codes it
accepts (``uint8`` codes, the torch ``fp8`` dtype: declared, or both tried), and compares each value with
the exact one (:func:`fp8check.casts.engine.decode_check`: NaN by class, -0 distinct). Every fp8 value is
exact in float16 and bfloat16, so an output of either is widened to float32 exactly before the comparison.
A Triton kernel run under a target (``--triton-target``) decodes as that target compiles it
(:func:`fp8check.triton.interpreter_mode.decode_for_target`): a divergence that is the target's upcast,
not the kernel's code, is said to be so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fp8check import checking
from fp8check.errors import InvalidValueError, KernelCallError
from fp8check.formats import Format
from fp8check.formats import get as get_format
from fp8check.results import CheckResult, Refusal

__all__ = ["check_decode", "CODE_DTYPES", "OUTPUT_DTYPES", "check_code_dtypes", "check_output_dtype", "codes_tensor",
           "output_of", "describe_codes"]

CODE_DTYPES = ("uint8", "fp8")  # how the kernel takes the codes: uint8 bytes, or the format's torch fp8 dtype
OUTPUT_DTYPES = ("float32", "float16", "bfloat16")


def check_code_dtypes(code_dtypes: Any, where: str) -> tuple[str, ...]:
    """``code_dtypes`` as a tuple of :data:`CODE_DTYPES` (empty: every one tried)."""
    values = (code_dtypes,) if isinstance(code_dtypes, str) else tuple(code_dtypes or ())
    bad = [v for v in values if v not in CODE_DTYPES]
    if bad:
        raise InvalidValueError(f"{where}: code dtype {bad[0]!r}: use {' or '.join(CODE_DTYPES)}")
    return values


def check_output_dtype(output_dtype: Any, where: str) -> None:
    if output_dtype is not None and output_dtype not in OUTPUT_DTYPES:
        raise InvalidValueError(f"{where}: output dtype {output_dtype!r}: use one of {', '.join(OUTPUT_DTYPES)}")


def codes_tensor(codes: np.ndarray, fmt: Format, code_dtype: str, device: str) -> Any:
    """``codes`` (uint8) as the kernel takes them: a uint8 tensor, or (``code_dtype="fp8"``) the format's torch
    fp8 dtype, on ``device``."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(codes, dtype=np.uint8).copy())
    if code_dtype == "fp8":
        if not fmt.torch_name or not hasattr(torch, fmt.torch_name):
            raise KernelCallError(f"this torch has no {fmt.name} dtype")
        t = t.view(getattr(torch, fmt.torch_name))
    return t.to(device)


def describe_codes(fmt: Format, code_dtype: str) -> str:
    return f"{fmt.name} codes as uint8" if code_dtype == "uint8" else f"codes as torch.{fmt.torch_name}"


def output_of(out: Any, name: str, kind: str, output_dtype: str | None, shape: tuple[int, ...]) -> tuple[Any, str]:
    """The values a decode or dequant kernel returned, checked: a tensor of one of :data:`OUTPUT_DTYPES` (the
    declared one, if any) and of the codes' ``shape``; (the tensor on the CPU, its dtype's name)."""
    import torch

    if not isinstance(out, torch.Tensor):
        raise KernelCallError(f"{name} returned {type(out).__name__}, not a tensor of values")
    got = str(out.dtype).removeprefix("torch.")
    if got not in OUTPUT_DTYPES:
        raise KernelCallError(f"{name} returned {got} values: a {kind} kernel returns {', '.join(OUTPUT_DTYPES)}")
    if output_dtype and got != output_dtype:
        raise KernelCallError(f"{name} returned {got} values, declared {output_dtype}")
    if tuple(out.shape) != tuple(shape):
        raise KernelCallError(f"{name} returned shape {tuple(out.shape)} for {tuple(shape)} codes")
    return out.detach().to("cpu"), got


@dataclass
class _Decoder:
    """The kernel as :func:`~fp8check.casts.engine.decode_check` calls it: ``decode(codes, fmt)`` -> float32."""

    fn: Callable[..., Any]
    name: str
    code_dtype: str
    device: str
    output_dtype: str | None
    produced: list[str] = field(default_factory=list)

    def decode(self, codes: np.ndarray, fmt: Format) -> np.ndarray:
        import torch

        t = codes_tensor(codes, fmt, self.code_dtype, self.device)
        try:
            out = self.fn(t)
        except Exception as exc:  # the kernel's own error: a refusal of these codes
            raise KernelCallError(f"{self.name} raised {type(exc).__name__} decoding {self.describe(fmt)}: "
                                  f"{exc}") from None
        values, got = output_of(out, self.name, "decode", self.output_dtype, tuple(t.shape))
        self.produced.append(got)
        # float16 and bfloat16 widen to float32 exactly (NaN stays NaN, -0 stays -0).
        return values.to(torch.float32).numpy()

    def describe(self, fmt: Format) -> str:
        return describe_codes(fmt, self.code_dtype)


def check_decode(kernel: Callable[..., Any], format: Any, *, code_dtypes: Any = (), output_dtype: str | None = None,
                 device: str = "cpu", name: str | None = None, triton_target: str | None = None) -> CheckResult:
    """Decode every code of ``format`` with ``kernel`` and compare with the exact values.

    ``kernel(codes) -> values``: ``codes`` a uint8 tensor or the format's torch fp8 dtype (``code_dtypes``:
    those it takes, ``("uint8", "fp8")`` or one of them; default: each tried, a refusal noted), ``values``
    float32, float16 or bfloat16 (``output_dtype``: the one it must return; default: any). ``triton_target``:
    the target the kernel is being interpreted under (the caller runs it there), named where its upcast
    explains a divergence. Raises :class:`~fp8check.errors.KernelCallError` when no way of calling works.
    """
    from fp8check.casts import engine

    fmt = get_format(format)
    label = checking.kernel_name(kernel, name)
    wanted = check_code_dtypes(code_dtypes, label) or CODE_DTYPES
    check_output_dtype(output_dtype, label)
    result = CheckResult(kernel=label, format=fmt.name, profile="exact", passed=True, checked=0, kind="decode",
                         input_dtype="", device=device)
    taken, produced = [], []
    for code_dtype in wanted:
        decoder = _Decoder(kernel, label, code_dtype, device, output_dtype)
        try:
            checked, wrong = engine.decode_check(decoder, fmt)
        except KernelCallError as exc:
            result.refusals.append(Refusal(condition=f"every code, {decoder.describe(fmt)}", error=str(exc),
                                           declared=bool(code_dtypes)))
            continue
        taken.append(code_dtype)
        produced += decoder.produced
        result.checked += checked
        for d in wrong:
            d = dataclasses.replace(d, condition=decoder.describe(fmt))
            result.categories[d.category] = result.categories.get(d.category, 0) + 1
            result.divergences.append(d)
    if not taken:
        raise KernelCallError("; ".join(dict.fromkeys(r.error for r in result.refusals)))
    result.passed = not result.divergences and not any(r.declared for r in result.refusals)
    result.input_dtype = ",".join("uint8" if c == "uint8" else str(fmt.torch_name) for c in taken)
    dest = produced[0] if produced else (output_dtype or "float32")
    result.extra.update(output_dtype=dest, code_dtypes=taken,
                        profile_summary="every code's exact value, NaN by class, -0 distinct",
                        checked_means=f"codes decoded, each way the kernel takes them ({result.input_dtype}) "
                                      f"to {dest}: input_hex the code, expected/actual_hex float32 bits")
    if triton_target and result.divergences:
        _name_the_target(result, fmt, dest, triton_target)
    return result


def _name_the_target(result: CheckResult, fmt: Format, dest: str, target_name: str) -> None:
    """A note when every divergent value is what ``target`` compiles this upcast to (its lowering, not the
    kernel's code): the kernel decodes wrongly on that GPU because Triton does."""
    from fp8check.triton import targets
    from fp8check.triton.interpreter_mode import decode_for_target

    target = targets.get(target_name)
    entry = target.upcast(fmt.name, dest)
    if not entry.supported or entry.specials == "exact":
        return
    codes = np.array([int(d.input_hex, 16) for d in result.divergences], dtype=np.uint8)
    predicted = decode_for_target(codes, fmt.name, dest, target, strict=False)
    if dest == "bfloat16":
        predicted = (predicted.astype(np.uint32) << np.uint32(16)).view(np.float32)
    predicted = np.asarray(predicted, dtype=np.float32)
    actual = np.array([int(d.actual_hex, 16) for d in result.divergences], dtype=np.uint32).view(np.float32)
    same = (np.isnan(predicted) & np.isnan(actual)) | (predicted.view(np.uint32) == actual.view(np.uint32))
    if same.all():
        result.add_note(f"{target.name} compiles {fmt.name} -> {dest} as {entry.lowering or entry.specials} "
                        f"({entry.specials}): every divergent code is what Triton gives there, not the kernel's "
                        f"own arithmetic (decode to {'float32' if dest != 'float32' else 'float16'} there, or "
                        "through a table, to keep NaN and -0)")

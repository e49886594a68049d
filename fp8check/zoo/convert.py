"""Checking an fn -> fnuz weight conversion against :func:`fp8check.quantizers.convert_fn_to_fnuz`.

Serving stacks load OCP e4m3fn checkpoints on MI300 (e4m3fnuz) by
reinterpreting the bytes and doubling the scales. The conversion under
check is called as ``kernel(codes, scale) -> (fnuz tensor or uint8 codes,
scale)`` with all 256 e4m3fn codes as a 16x16 ``float8_e4m3fn`` tensor and
a float32 scale; the scales tried include one that overflows when doubled
and the smallest subnormal. Categories: ``nan`` (an fn NaN byte that is not
the fnuz NaN afterwards), ``signed_zero`` (0x80, fn's -0, that is not 0x00
afterwards), ``codes`` (any other byte changed), ``scale`` (bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fp8check.formats import E4M3FN, E4M3FNUZ
from fp8check.quantizers.scaling import convert_fn_to_fnuz
from fp8check.results import CheckResult, Divergence

__all__ = ["check_fnuz_conversion", "SCALES"]

SCALES = (1.0, 0.0078125, 0.3, 3.0e38, float(np.float32(1.4e-45)))


def _codes(out: Any) -> np.ndarray:
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().cpu().contiguous().view(torch.uint8).numpy().reshape(-1)
    return np.asarray(out).view(np.uint8).reshape(-1)


def _bits(v: Any) -> np.ndarray:
    import torch

    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().to(torch.float32).numpy()
    return np.asarray(v, dtype=np.float32).reshape(-1).view(np.uint32)


def check_fnuz_conversion(kernel: Any, *, device: str = "cpu", kernel_name: str = "kernel") -> CheckResult:
    import torch

    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(16, 16).view(torch.float8_e4m3fn).to(device)
    counts = {"nan": 0, "signed_zero": 0, "codes": 0, "scale": 0}
    found: list[Divergence] = []
    for scale in SCALES:
        s = torch.tensor(scale, dtype=torch.float32, device=device)
        out_codes, out_scale = kernel(codes, s)
        got = _codes(out_codes)
        want = convert_fn_to_fnuz(np.arange(256, dtype=np.uint8), np.float32(scale))
        if got.shape != (256,):
            raise ValueError(f"{kernel_name} returned {got.size} codes for 256")
        for c in np.flatnonzero(got != want.codes):
            cat = "nan" if E4M3FN.is_nan(int(c)) else "signed_zero" if c == 0x80 else "codes"
            counts[cat] += 1
            if len(found) < 20:
                found.append(Divergence(
                    category=cat, input_hex=f"0x{c:02x}", expected_hex=f"0x{want.codes[c]:02x}",
                    actual_hex=f"0x{got[c]:02x}", input_dtype="e4m3fn", input_value=_fn_text(int(c)),
                    expected_value=_fnuz_text(int(want.codes[c])), actual_value=_fnuz_text(int(got[c])),
                    detail=f"e4m3fn byte 0x{c:02x} ({_fn_text(int(c))}) with scale {scale!r}"))
        gb, wb = _bits(out_scale), _bits(want.scales)
        nan_both = np.isnan(gb.view(np.float32)) & np.isnan(wb.view(np.float32))
        if gb.size != wb.size or not np.all((gb == wb) | nan_both):
            counts["scale"] += 1
            found.append(Divergence(
                category="scale", input_hex=f"{int(_bits(np.float32(scale))[0]):08X}", expected_hex=f"{int(wb[0]):08X}",
                actual_hex=f"{int(gb[0]):08X}" if gb.size else "-", input_dtype="float32", input_value=repr(scale),
                expected_value=repr(float(wb.view(np.float32)[0])),
                actual_value=repr(float(gb.view(np.float32)[0])) if gb.size else "-",
                detail=f"scale {scale!r} after conversion"))
    return CheckResult(
        kernel=kernel_name, format=E4M3FNUZ.name, profile="convert_fn_to_fnuz", passed=not any(counts.values()),
        checked=256 * len(SCALES), categories=counts, divergences=found, kind="convert", input_dtype="e4m3fn",
        device=device, command="",
        extra={"scales": list(SCALES)})


def _fn_text(c: int) -> str:
    from fp8check.reference import decode

    v = float(decode(np.array([c], dtype=np.uint8), E4M3FN)[0])
    return "nan" if v != v else repr(v)


def _fnuz_text(c: int) -> str:
    from fp8check.reference import decode

    v = float(decode(np.array([c], dtype=np.uint8), E4M3FNUZ)[0])
    return "nan" if v != v else repr(v)

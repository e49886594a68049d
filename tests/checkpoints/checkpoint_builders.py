"""Real checkpoints for the audit tests, written by torch and safetensors.

Two kinds of data:

- ``codes(...)``: FP8 bytes drawn from a chosen set of codes, so that a
  planted hazard has an exact, known count (the draw never contains the
  planted codes);
- ``quantize(...)``: real quantization of real float tensors with torch's own
  casts, in the layouts real checkpoints use (tensorwise, rowwise,
  DeepSeek 128x128 blocks with ragged edges, group, MX e8m0).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from fp8check import formats

TORCH_DTYPE = {
    "e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz,
    "e5m2": torch.float8_e5m2, "e5m2fnuz": torch.float8_e5m2fnuz,
}


def finite_nonzero_codes(fmt: str, *, exclude: tuple[int, ...] = (), max_magnitude: int | None = None,
                         min_magnitude: int = 0) -> np.ndarray:
    """Codes of ``fmt`` that are finite, not zero, not subnormal and not ±max."""
    f = formats.get(fmt)
    out = []
    for c in range(256):
        if f.is_nan(c) or f.is_inf(c) or c in exclude:
            continue
        mag = c & 0x7F
        if mag >> f.mantissa_bits == 0:  # zero and subnormals
            continue
        if mag == f.max_code:
            continue
        if max_magnitude is not None and mag > max_magnitude or mag < min_magnitude:
            continue
        out.append(c)
    return np.array(out, dtype=np.uint8)


def codes(shape: tuple[int, ...], fmt: str = "e4m3fn", *, seed: int = 0, pool: np.ndarray | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pool = finite_nonzero_codes(fmt) if pool is None else pool
    return rng.choice(pool, size=shape).astype(np.uint8)


def plant(arr: np.ndarray, code: int, count: int, *, seed: int = 1, avoid: np.ndarray | None = None) -> np.ndarray:
    """Set ``count`` distinct random positions of ``arr`` to ``code`` (in place)."""
    rng = np.random.default_rng(seed)
    flat = arr.reshape(-1)
    candidates = np.arange(flat.size) if avoid is None else np.flatnonzero(~avoid.reshape(-1))
    pos = rng.choice(candidates, size=count, replace=False)
    flat[pos] = code
    return arr


def fp8(arr: np.ndarray, fmt: str = "e4m3fn") -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(arr)).view(TORCH_DTYPE[fmt])


def quantize(w: torch.Tensor, fmt: str = "e4m3fn", granularity: str = "rowwise", *, block: int = 128,
             scale_dtype: torch.dtype = torch.float32, clip: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Real quantization with torch casts: (fp8 tensor, scale) with x ~ fp8 * scale.

    ``clip`` < 1 makes the scale too small (values saturate), > 1 too large.
    """
    fmax = formats.get(fmt).max
    w = w.float()
    o, i = w.shape
    if granularity == "tensorwise":
        s = (w.abs().max() / fmax * clip).reshape(())
        full = s.expand(o, i)
    elif granularity == "rowwise":
        s = (w.abs().amax(dim=1, keepdim=True) / fmax * clip)
        full = s.expand(o, i)
    elif granularity == "block":
        so, si = math.ceil(o / block), math.ceil(i / block)
        pad = torch.zeros(so * block, si * block)
        pad[:o, :i] = w
        blocks = pad.reshape(so, block, si, block).abs().amax(dim=(1, 3))
        s = blocks / fmax * clip
        full = s.repeat_interleave(block, 0).repeat_interleave(block, 1)[:o, :i]
    elif granularity == "group":
        g = block
        si = math.ceil(i / g)
        pad = torch.zeros(o, si * g)
        pad[:, :i] = w
        s = pad.reshape(o, si, g).abs().amax(dim=2) / fmax * clip
        full = s.repeat_interleave(g, 1)[:, :i]
    else:
        raise ValueError(granularity)
    s = s.to(scale_dtype)
    q = (w / full.to(scale_dtype).float()).clamp(-fmax, fmax).to(TORCH_DTYPE[fmt])
    return q, s


def quantize_mx(w: torch.Tensor, fmt: str = "e4m3fn") -> tuple[torch.Tensor, torch.Tensor]:
    """OCP MX: blocks of 32 along the input dim, e8m0 scale 2^(floor(log2 amax) - emax), saturating."""
    f = formats.get(fmt)
    o, i = w.shape
    blocks = w.float().reshape(o, i // 32, 32)
    amax = blocks.abs().amax(dim=2).clamp(min=2.0 ** -120)
    exp = torch.floor(torch.log2(amax)) - f.emax
    scale = torch.exp2(exp)
    q = (blocks / scale[..., None]).clamp(-f.max, f.max).reshape(o, i).to(TORCH_DTYPE[fmt])
    e8 = (exp + 127).to(torch.uint8)
    return q, e8


def save_st(path: str, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    save_file({k: v.contiguous().clone() for k, v in tensors.items()}, path, metadata=metadata)
    return str(path)


def save_pt(path: str, obj: Any, *, legacy: bool = False) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return str(path)


def write_json(path: str, doc: Any) -> str:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return str(path)


DEEPSEEK_CONFIG = {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                           "weight_block_size": [128, 128]}, "torch_dtype": "bfloat16"}
COMPRESSED_TENSORS_CONFIG = {"quantization_config": {
    "quant_method": "compressed-tensors", "format": "float-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                      "strategy": "channel", "symmetric": True}}},
    "ignore": ["lm_head"]}, "torch_dtype": "bfloat16"}


def tensor_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    found = [t for t in report["tensors"] if t["name"] == name]
    assert len(found) == 1, (name, [t["name"] for t in report["tensors"]])
    return found[0]


def codes_of(report: dict[str, Any], name: str) -> dict[str, tuple[str, int]]:
    """{finding code: (severity, count)} of one tensor."""
    return {f["code"]: (f["severity"], f["count"]) for f in tensor_of(report, name)["findings"]}


def warned(report: dict[str, Any], name: str) -> dict[str, tuple[str, int]]:
    """Like codes_of, without info findings."""
    return {k: v for k, v in codes_of(report, name).items() if v[0] != "info"}

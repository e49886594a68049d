"""One ``tl.dot`` per program, compiled on the GPU, against fp8check's tensor-core models, bit for bit.

    PYTHONPATH=. python gpu/mma_tiles.py --out DIR               # on an H100/H200 (bash gpu/run_all.sh mma-tiles)
    PYTHONPATH=. python gpu/mma_tiles.py --interpret --elements 4096   # on a CPU: the faithful sm90 interpreter instead

Each configuration is a tile shape and an operand format that Triton compiles to one sm90 instruction kind
(:func:`fp8check.matmul.tensorcore.triton_dot`): ``(M, N, K)`` tiles with M a multiple of 64 get wgmma (FP8
``m64nNk32``, 16-bit ``m64nNk16``), other tiles ``mma.sync.m16n8k16`` (FP8 operands converted to fp16); K
larger than the instruction's chains instructions through the accumulator. Every program loads its own
A (M, K), B (K, N) and float32 C (M, N) and stores ``tl.dot(a, b, c)``; the operands mix random bits
(NaN, Inf, subnormals), moderate magnitudes (where alignment and truncation show) and moderate values with
specials planted; C mixes random bits, moderate values and ±0.

Every output element is compared with :func:`fp8check.matmul.tensorcore.dot_instances` under the model the
interpreter picks (NaN by class). Writes ``mma-tiles.json`` (counts, mismatch examples, provenance) and
``mma-tiles.npz`` (the GPU's output bits of the first ``--keep`` tiles of each configuration; inputs are
regenerated from the seed by :func:`tile_inputs`) under ``--out``. tests/test_mma_tiles_gpu_results.py
reads them from gpu/results.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402

# name -> (operand format, M, N, K, num_warps)
CONFIGS: dict[str, tuple[str, int, int, int, int]] = {
    "mma16-float16-k16": ("float16", 16, 16, 16, 1),
    "mma16-bfloat16-k16": ("bfloat16", 16, 16, 16, 1),
    "mma16-float16-k64": ("float16", 16, 16, 64, 1),
    "mma16-e4m3fn-k16": ("e4m3fn", 16, 16, 16, 1),
    "mma16-e4m3fn-k32": ("e4m3fn", 16, 16, 32, 1),
    "mma16-e4m3fn-k128": ("e4m3fn", 32, 32, 128, 4),
    "mma16-e5m2-k32": ("e5m2", 16, 16, 32, 1),
    "wgmma-e4m3fn-k32": ("e4m3fn", 64, 16, 32, 4),
    "wgmma-e4m3fn-k128": ("e4m3fn", 64, 32, 128, 4),
    "wgmma-float16-k32": ("float16", 64, 16, 32, 4),
    "mma16-e4m3fn-e5m2-k64": ("e4m3fn", 16, 32, 64, 2),  # B is e5m2 (_B_FORMAT)
}
_B_FORMAT = {"mma16-e4m3fn-e5m2-k64": "e5m2"}
# configurations compiled Triton refuses, and why (the record expects the refusal)
REFUSED = {"mma16-e4m3fn-k16": "8-bit operands need K >= 32 (triton/backends/nvidia/compiler.py min_dot_size, "
                               "3.6.0 and 3.9.0)"}
_BITS = {"float16": (np.uint16, 5, 10), "bfloat16": (np.uint16, 8, 7), "e4m3fn": (np.uint8, 4, 3),
         "e5m2": (np.uint8, 5, 2)}


def _moderate(rng: np.random.Generator, shape: tuple[int, ...], fmt: str, spread: int) -> np.ndarray:
    """Codes of ``fmt`` with random sign and mantissa and a biased exponent within ``spread`` of the middle."""
    dtype, e, m = _BITS[fmt]
    bias = (1 << (e - 1)) - 1
    lo = max(1, bias - spread)
    hi = min((1 << e) - 2, bias + spread)
    exp = rng.integers(lo, hi + 1, size=shape)
    if fmt == "e4m3fn":
        exp = np.minimum(exp, 15)
    mant = rng.integers(0, 1 << m, size=shape)
    codes = (rng.integers(0, 2, size=shape) << (e + m)) | (exp << m) | mant
    if fmt == "e4m3fn":  # 0x7F/0xFF are NaN: keep this mode finite
        codes = np.where((codes & 0x7F) == 0x7F, codes - 1, codes)
    return codes.astype(dtype)


_SPECIALS = {  # ±0, ±smallest subnormal, ±max, ±Inf where there is one, NaN
    "float16": [0x0000, 0x8000, 0x0001, 0x8001, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00],
    "bfloat16": [0x0000, 0x8000, 0x0001, 0x8001, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0],
    "e4m3fn": [0x00, 0x80, 0x01, 0x81, 0x7E, 0xFE, 0x7F, 0xFF],
    "e5m2": [0x00, 0x80, 0x01, 0x81, 0x7B, 0xFB, 0x7C, 0xFC, 0x7E],
}


def formats(name: str) -> tuple[str, str]:
    """The formats of A and B of configuration ``name``."""
    return CONFIGS[name][0], _B_FORMAT.get(name, CONFIGS[name][0])


def tile_inputs(name: str, tiles: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (T, M, K) and B (T, K, N) codes and C (T, M, N) float32 bits (uint32) of configuration ``name``:
    a tile's mode is ``t % 4`` for A/B (0 random bits, 1 moderate, 2 moderate with specials, 3 moderate in
    a narrow range, where every product is kept) and ``t // 4 % 3`` for C (random bits, moderate, ±0)."""
    _, M, N, K, _ = CONFIGS[name]
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    out = []
    for shape, fmt in zip(((tiles, M, K), (tiles, K, N)), formats(name)):
        dtype, e, m = _BITS[fmt]
        codes = rng.integers(0, 1 << (8 * np.dtype(dtype).itemsize), size=shape).astype(dtype)
        mode = np.arange(tiles) % 4
        wide = _moderate(rng, shape, fmt, 6 if e >= 5 else 3)
        narrow = _moderate(rng, shape, fmt, 1)
        codes = np.where((mode == 1)[:, None, None] | (mode == 2)[:, None, None], wide, codes)
        codes = np.where((mode == 3)[:, None, None], narrow, codes)
        sp = np.array(_SPECIALS[fmt], dtype=dtype)
        plant = (mode == 2)[:, None, None] & (rng.random(shape) < 0.04)
        codes = np.where(plant, sp[rng.integers(0, len(sp), size=shape)], codes)
        out.append(codes.astype(dtype))
    shape = (tiles, M, N)
    cmode = (np.arange(tiles) // 4) % 3
    rnd = rng.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
    mod = (rng.standard_normal(shape) * np.exp2(rng.integers(-4, 8, size=shape))).astype(np.float32).view(np.uint32)
    zero = (rng.integers(0, 2, size=shape).astype(np.uint32) << 31)
    c = np.where((cmode == 0)[:, None, None], rnd, np.where((cmode == 1)[:, None, None], mod, zero))
    return out[0], out[1], c.astype(np.uint32)


def model_outputs(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, str]:
    """The float32 bits (T, M, N) of the model the interpreter picks for the configuration, and its name."""
    from fp8check.matmul import tensorcore

    _, M, N, _, _ = CONFIGS[name]
    fa, fb = formats(name)
    chosen = tensorcore.triton_dot("sm90", M, fa, fb)
    if chosen is None:
        model = tensorcore.model("sm90", fa, fb)
    else:  # converted and K ordered as Triton feeds the instruction
        model = chosen.model
        a, b = tensorcore.triton_operands(chosen, a, fa, b, fb)
        fa, fb = chosen.a_fmt, chosen.b_fmt
    rows, cols = tensorcore.tile_instances(a, b)
    res = tensorcore.dot_instances(model, rows, fa, cols, fb, c.reshape(-1).view(np.float32))
    return res.values.astype(np.float32).view(np.uint32).reshape(a.shape[0], M, N), model.name


def _kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def tile_dot(a_ptr, b_ptr, c_ptr, d_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        rm = tl.arange(0, M)
        rn = tl.arange(0, N)
        rk = tl.arange(0, K)
        a = tl.load(a_ptr + t * M * K + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + t * K * N + rk[:, None] * N + rn[None, :])
        c = tl.load(c_ptr + t * M * N + rm[:, None] * N + rn[None, :])
        tl.store(d_ptr + t * M * N + rm[:, None] * N + rn[None, :], tl.dot(a, b, c))

    return tile_dot


_TORCH = {"float16": "float16", "bfloat16": "bfloat16", "e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def device_outputs(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, device: str) -> np.ndarray:
    """The kernel's output bits (T, M, N): compiled on ``device`` ("cuda"), or under the faithful sm90
    interpreter ("interpret")."""
    import torch

    _, M, N, K, warps = CONFIGS[name]
    ta, tb = (torch.from_numpy(x.view(np.int16) if x.dtype == np.uint16 else x).view(getattr(torch, _TORCH[f]))
              for x, f in zip((a, b), formats(name)))
    tc = torch.from_numpy(c.view(np.float32))
    T = a.shape[0]
    kernel = _kernel()
    if device == "interpret":
        import fp8check.triton as ft

        out = torch.empty(T, M, N, dtype=torch.float32)
        with ft.interpreting(), ft.faithful("sm90"):
            _kernel()[(T,)](ta, tb, tc, out, M, N, K, num_warps=warps)
        return out.numpy().view(np.uint32)
    out = torch.empty(T, M, N, dtype=torch.float32, device=device)
    compiled = kernel[(T,)](ta.to(device), tb.to(device), tc.to(device), out, M, N, K, num_warps=warps)
    torch.cuda.synchronize()
    ptx = getattr(compiled, "asm", {}).get("ptx", "")
    INSTRUCTIONS[name] = sorted({w for w in ptx.split() if w.startswith(("mma.sync", "wgmma.mma_async"))})
    return out.cpu().numpy().view(np.uint32)


INSTRUCTIONS: dict[str, list[str]] = {}


def _compare(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elements whose bits differ, NaN by class."""
    gn = (got & 0x7FFFFFFF) > 0x7F800000
    wn = (want & 0x7FFFFFFF) > 0x7F800000
    return (got != want) & ~(gn & wn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu/out", help="write mma-tiles.json and mma-tiles.npz here")
    parser.add_argument("--elements", type=int, default=1 << 20,
                        help="output elements per configuration (default 2^20; tiles = elements / (M N))")
    parser.add_argument("--keep", type=int, default=64, help="tiles whose output bits are stored (default 64)")
    parser.add_argument("--config", action="append", choices=sorted(CONFIGS), help="only these (default: all)")
    parser.add_argument("--interpret", action="store_true", help="the faithful sm90 interpreter, not the GPU")
    args = parser.parse_args(argv)
    import torch

    device = "interpret" if args.interpret else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("gpu/mma_tiles.py: skipped, no CUDA device")
        return 0
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, kept = [], {}
    for name in args.config or CONFIGS:
        start = time.time()
        fmt, M, N, K, _ = CONFIGS[name]
        a, b, c = tile_inputs(name, max(4, args.elements // (M * N)))
        try:
            got = device_outputs(name, a, b, c, device)
        except Exception as exc:  # a shape this Triton refuses: recorded
            rows.append({"config": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(f"{name:22s} error: {rows[-1]['error']}")
            continue
        want, model = model_outputs(name, a, b, c)
        bad = _compare(got, want)
        idx = np.argwhere(bad)[:40]
        examples = [{"tile": int(t), "row": int(i), "col": int(j), "got": f"{int(got[t, i, j]):08x}",
                     "model": f"{int(want[t, i, j]):08x}"} for t, i, j in idx]
        per_mode = [int(bad[m::4].sum()) for m in range(4)]
        rows.append({"config": name, "format": "x".join(formats(name)), "tile": list(CONFIGS[name][1:4]),
                     "num_warps": CONFIGS[name][4], "model": model, "instructions": INSTRUCTIONS.get(name, []),
                     "tiles": int(a.shape[0]), "elements": int(got.size), "mismatches": int(bad.sum()),
                     "mismatches_by_operand_mode": per_mode, "nan_outputs": int(((got & 0x7FFFFFFF) > 0x7F800000).sum()),
                     "examples": examples, "seconds": round(time.time() - start, 1)})
        kept[name] = got[: args.keep]
        print(f"{name:22s} {model:18s} {got.size:10d} elements, {int(bad.sum())} off the model "
              f"(by operand mode {per_mode}) {INSTRUCTIONS.get(name, '')}", flush=True)
    provenance: dict[str, Any] = {"date": datetime.date.today().isoformat(), "device": device}
    if device == "cuda":
        import triton

        provenance.update(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, triton=triton.__version__,
                          cuda=torch.version.cuda)
    (out_dir / "mma-tiles.json").write_text(json.dumps({"provenance": provenance, "seed": 0, "configs": rows},
                                                       indent=1))
    np.savez_compressed(out_dir / "mma-tiles.npz", **kept)
    return 0


if __name__ == "__main__":
    sys.exit(main())

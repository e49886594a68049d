"""The op table's kernels and inputs: every float op a quantizer or fused kernel uses, x special values.

Shared by ``gpu/ops_table.py`` (compiles them for the GPU and writes
gpu/results/ops-table.json) and tests/triton_faithful/test_ops_table.py (runs
them in the faithful interpreter and compares with the committed table).
One elementwise kernel selects its op with a constexpr string (each op is a
separate compiled specialisation), one reduces rows, one casts integers.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

#: float32 special values: NaN of both signs and a signalling payload, +-Inf,
#: +-0, subnormals, the smallest normal, +-max, FP8 bounds, bfloat16 ties.
SPECIAL_BITS = (
    0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00400000, 0x00800000, 0x3F800000, 0xBF800000,
    0x3FC00000, 0x43E00000, 0xC3E00000, 0x43E08000, 0x3F000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
    0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x40400000, 0x0DA24260, 0x3F808000,
    0x3F818000, 0xBF808000, 0x4B800001, 0x3EAAAAAB,
)
BLOCK = 8192

# op -> (kind, what it is); kinds: "exact" (bits equal), "bracketed" (inside the documented bound)
ELEMENTWISE = {
    "maximum": "tl.maximum(a, b)", "minimum": "tl.minimum(a, b)",
    "maximum_nan": "tl.maximum(a, b, propagate_nan=ALL)", "minimum_nan": "tl.minimum(a, b, propagate_nan=ALL)",
    "clamp_const": "tl.clamp(a, -448.0, 448.0)", "clamp_const_nan": "tl.clamp(a, -448.0, 448.0, ALL)",
    "clamp_neg_arg": "tl.clamp(a, -h, h), h a scalar argument", "clamp_args": "tl.clamp(a, lo, h), lo = -h passed",
    "clamp_neg_abs": "tl.clamp(a, -tl.abs(b), tl.abs(b))", "clamp_loaded": "tl.clamp(a, b, c)",
    "minmax_const": "tl.minimum(tl.maximum(a, -448.0), 448.0)",
    "where_nan": "tl.where(a != a, a, tl.clamp(a, -448.0, 448.0))", "where_gt": "tl.where(a > b, a, b)",
    "add": "a + b", "sub": "a - b", "mul": "a * b", "neg": "-a",
    "fma_contract": "a * b + c", "fms_contract": "a * b - c", "fnms_contract": "c - a * b",
    "fma_two_products": "a * b + b * c", "tl_fma": "tl.fma(a, b, c)",
    "div": "a / b", "recip": "1.0 / b", "div_const": "a / 448.0", "div_c240": "a / 240.0", "div_c224": "a / 224.0",
    "div_c57344": "a / 57344.0", "div_c6": "a / 6.0", "div_c3": "a / 3.0", "div_rn": "tl.math.div_rn(a, b)",
    "sqrt": "tl.sqrt(|a|)", "sqrt_rn": "tl.sqrt_rn(|a|)", "rsqrt": "tl.math.rsqrt(|a|)",
    "exp": "tl.exp(a)", "exp2": "tl.exp2(a)", "log2": "tl.log2(|a|)", "log": "tl.log(|a|)",
    "bf16_add": "bf16(a) + bf16(b)", "bf16_sub": "bf16(a) - bf16(b)", "bf16_mul": "bf16(a) * bf16(b)",
    "bf16_div": "bf16(a) / bf16(b)", "bf16_max": "tl.maximum(bf16(a), bf16(b))",
    "bf16_clamp": "tl.clamp(bf16(a), -448.0, 448.0)", "bf16_fma": "bf16(a) * bf16(b) + bf16(c)",
    "bf16_lt": "bf16(a) < bf16(b)", "bf16_neg": "-bf16(a)", "bf16_round": "bf16(a)",
    "f16_fma": "f16(a) * f16(b) + f16(c)",
}
REDUCTIONS = {"max": "tl.max(row)", "min": "tl.min(row)", "argmax": "tl.argmax(row)", "argmin": "tl.argmin(row)"}
INT_CASTS = {"i32_to_bf16": "int32 .to(tl.bfloat16)", "bf16_to_i32": "bf16(a) .to(tl.int32)",
             "i32_to_f32": "int32 .to(tl.float32)", "f32_to_i32": "a .to(tl.int32)",
             "exp2_int": "tl.exp2(int32 .to(tl.float32))"}
ROW = 16


@triton.jit
def elementwise_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, h, lo, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    c = tl.load(c_ptr + offs, mask=mask)
    if OP == "maximum":
        y = tl.maximum(a, b)
    elif OP == "minimum":
        y = tl.minimum(a, b)
    elif OP == "maximum_nan":
        y = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    elif OP == "minimum_nan":
        y = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    elif OP == "clamp_const":
        y = tl.clamp(a, -448.0, 448.0)
    elif OP == "clamp_const_nan":
        y = tl.clamp(a, -448.0, 448.0, propagate_nan=tl.PropagateNan.ALL)
    elif OP == "clamp_neg_arg":
        y = tl.clamp(a, -h, h)
    elif OP == "clamp_args":
        y = tl.clamp(a, lo, h)
    elif OP == "clamp_neg_abs":
        y = tl.clamp(a, -tl.abs(b), tl.abs(b))
    elif OP == "clamp_loaded":
        y = tl.clamp(a, b, c)
    elif OP == "minmax_const":
        y = tl.minimum(tl.maximum(a, -448.0), 448.0)
    elif OP == "where_nan":
        y = tl.where(a != a, a, tl.clamp(a, -448.0, 448.0))
    elif OP == "where_gt":
        y = tl.where(a > b, a, b)
    elif OP == "add":
        y = a + b
    elif OP == "sub":
        y = a - b
    elif OP == "mul":
        y = a * b
    elif OP == "neg":
        y = -a
    elif OP == "fma_contract":
        y = a * b + c
    elif OP == "fms_contract":
        y = a * b - c
    elif OP == "fnms_contract":
        y = c - a * b
    elif OP == "fma_two_products":
        y = a * b + b * c
    elif OP == "tl_fma":
        y = tl.fma(a, b, c)
    elif OP == "div":
        y = a / b
    elif OP == "recip":
        y = 1.0 / b
    elif OP == "div_const":
        y = a / 448.0
    elif OP == "div_c240":
        y = a / 240.0
    elif OP == "div_c224":
        y = a / 224.0
    elif OP == "div_c57344":
        y = a / 57344.0
    elif OP == "div_c6":
        y = a / 6.0
    elif OP == "div_c3":
        y = a / 3.0
    elif OP == "div_rn":
        y = tl.math.div_rn(a, b)
    elif OP == "sqrt":
        y = tl.sqrt(tl.abs(a))
    elif OP == "sqrt_rn":
        y = tl.sqrt_rn(tl.abs(a))
    elif OP == "rsqrt":
        y = tl.math.rsqrt(tl.abs(a))
    elif OP == "exp":
        y = tl.exp(a)
    elif OP == "exp2":
        y = tl.exp2(a)
    elif OP == "log2":
        y = tl.log2(tl.abs(a))
    elif OP == "log":
        y = tl.log(tl.abs(a))
    elif OP == "bf16_add":
        y = (a.to(tl.bfloat16) + b.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_sub":
        y = (a.to(tl.bfloat16) - b.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_mul":
        y = (a.to(tl.bfloat16) * b.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_div":
        y = (a.to(tl.bfloat16) / b.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_max":
        y = tl.maximum(a.to(tl.bfloat16), b.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_clamp":
        y = tl.clamp(a.to(tl.bfloat16), -448.0, 448.0).to(tl.float32)
    elif OP == "bf16_fma":
        y = (a.to(tl.bfloat16) * b.to(tl.bfloat16) + c.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_lt":
        y = (a.to(tl.bfloat16) < b.to(tl.bfloat16)).to(tl.float32)
    elif OP == "bf16_neg":
        y = (-a.to(tl.bfloat16)).to(tl.float32)
    elif OP == "f16_fma":
        y = (a.to(tl.float16) * b.to(tl.float16) + c.to(tl.float16)).to(tl.float32)
    else:  # "bf16_round"
        y = a.to(tl.bfloat16).to(tl.float32)
    tl.store(out_ptr + offs, y, mask=mask)


@triton.jit
def reduce_kernel(x_ptr, out_ptr, idx_ptr, OP: tl.constexpr, ROW: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * ROW + tl.arange(0, ROW))
    if OP == "max":
        tl.store(out_ptr + row, tl.max(x, axis=0))
    elif OP == "min":
        tl.store(out_ptr + row, tl.min(x, axis=0))
    elif OP == "argmax":
        tl.store(idx_ptr + row, tl.argmax(x, axis=0))
    else:
        tl.store(idx_ptr + row, tl.argmin(x, axis=0))


@triton.jit
def int_cast_kernel(i_ptr, a_ptr, out_ptr, iout_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if OP == "i32_to_bf16":
        tl.store(out_ptr + offs, tl.load(i_ptr + offs, mask=mask).to(tl.bfloat16).to(tl.float32), mask=mask)
    elif OP == "i32_to_f32":
        tl.store(out_ptr + offs, tl.load(i_ptr + offs, mask=mask).to(tl.float32), mask=mask)
    elif OP == "exp2_int":
        tl.store(out_ptr + offs, tl.exp2(tl.load(i_ptr + offs, mask=mask).to(tl.float32)), mask=mask)
    elif OP == "f32_to_i32":
        tl.store(iout_ptr + offs, tl.load(a_ptr + offs, mask=mask).to(tl.int32), mask=mask)
    else:
        a = tl.load(a_ptr + offs, mask=mask)
        tl.store(iout_ptr + offs, a.to(tl.bfloat16).to(tl.int32), mask=mask)


def inputs(seed: int = 2026) -> dict[str, np.ndarray]:
    """The table's inputs (uint32 bits / int32): every pair of specials, then random triples
    (half any float32 bit pattern, half magnitudes e^-20..e^20 of either sign)."""
    rng = np.random.default_rng(seed)
    s = np.array(SPECIAL_BITS, dtype=np.uint32)
    pa, pb = (g.reshape(-1) for g in np.meshgrid(s, s, indexing="ij"))
    pc = np.resize(s[::-1], pa.size)
    n_random = 4096
    any_bits = rng.integers(0, 2 ** 32, size=(3, n_random // 2), dtype=np.uint64).astype(np.uint32)
    mags = np.exp(rng.uniform(-20, 20, size=(3, n_random // 2))) * rng.choice([-1.0, 1.0], size=(3, n_random // 2))
    moderate = mags.astype(np.float32).view(np.uint32)
    a, b, c = (np.concatenate([p, any_bits[i], moderate[i]]) for i, p in enumerate((pa, pb, pc)))
    ints = np.concatenate([
        np.array([0, 1, -1, 5, 255, 256, 257, 2 ** 24 + 1, 2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1),
                  0x01018001, 2 ** 31 - 1, -(2 ** 31), 0x00FF8000, 0x00FF8001, 0x7F7F8000], dtype=np.int64),
        np.arange(-160, 141), rng.integers(-(2 ** 31), 2 ** 31, size=2048),
        rng.integers(-70000, 70000, size=1024)]).astype(np.int32)
    rows = _rows(rng)
    return {"a": a, "b": b, "c": c, "ints": ints, "rows": rows}


def _rows(rng: np.random.Generator) -> np.ndarray:
    """Rows of ROW float32 values for the reductions: a NaN (either sign) at every position, all NaN,
    +-0 mixes, ties, +-Inf, subnormals, random."""
    f = np.float32
    rows = []
    base = np.arange(1, ROW + 1, dtype=f)
    for pos in range(ROW):
        for nan in (np.uint32(0x7FC00000), np.uint32(0xFFC00000)):
            r = base.copy()
            r.view(np.uint32)[pos] = nan
            rows.append(r)
    rows.append(np.full(ROW, np.nan, dtype=f))
    for pattern in ([0.0, -0.0], [-0.0, 0.0], [-0.0], [0.0], [-0.0, -1.0], [0.0, 1.0, -0.0]):
        rows.append(np.resize(np.array(pattern, dtype=f), ROW))
    rows.append(np.array([np.inf, -np.inf] * (ROW // 2), dtype=f))
    rows.append(np.full(ROW, 3.0, dtype=f))
    rows.append(np.array([1e-45, -1e-45] * (ROW // 2), dtype=f))
    for _ in range(64):
        rows.append(rng.integers(-3, 4, size=ROW).astype(f))
    for _ in range(64):
        rows.append(rng.integers(0, 2 ** 32, size=ROW, dtype=np.uint64).astype(np.uint32).view(f))
    return np.stack(rows).astype(f).view(np.uint32)


H, LO = 448.0, -448.0  # the scalar bound arguments


def run(data: dict[str, np.ndarray], device: str, launch=None, ops=None) -> dict[str, np.ndarray]:
    """Every op on ``data``'s inputs; ``device`` "cuda" (compiled) or "cpu" (``launch(kernel)`` gives an
    interpreted launcher, e.g. ``fp8check.triton.interpreted``). Returns op -> result bits (uint32 /
    int32 indices). ``run.ptx`` (cuda) maps op -> the float instructions in its PTX; ``run.failed`` op -> why
    it did not compile or run (on the GPU an op that fails is left out, the others still run). ``ops``: only
    these (default: every op)."""
    import torch

    launch = launch or (lambda k: k)
    t = {k: torch.from_numpy(v.view(np.int32).copy()).to(device) for k, v in data.items()}
    fa, fb, fc = (t[k].view(torch.float32) for k in "abc")
    n = fa.numel()
    out: dict[str, np.ndarray] = {}
    ptx: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    grid = (triton.cdiv(n, BLOCK),)

    def attempt(op, fn):
        if device == "cpu":
            return fn()
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 -- a compile failure is a row of the table
            failed[op] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            return None

    wanted = set(ops) if ops is not None else None
    for op in ELEMENTWISE:
        if wanted is not None and op not in wanted:
            continue
        y = torch.empty_like(fa)
        k = attempt(op, lambda: launch(elementwise_kernel)[grid](fa, fb, fc, y, n, H, LO, OP=op, BLOCK=BLOCK))
        if op in failed:
            continue
        out[op] = y.view(torch.int32).cpu().numpy().view(np.uint32)
        ptx[op] = _instructions_of(k)
    rows = t["rows"].view(torch.float32)
    for op in REDUCTIONS:
        if wanted is not None and op not in wanted:
            continue
        v = torch.empty(rows.shape[0], dtype=torch.float32, device=device)
        i = torch.zeros(rows.shape[0], dtype=torch.int32, device=device)
        k = attempt(op, lambda: launch(reduce_kernel)[(rows.shape[0],)](rows, v, i, OP=op, ROW=ROW))
        if op in failed:
            continue
        out[op] = (v.view(torch.int32).cpu().numpy().view(np.uint32) if op in ("max", "min")
                   else i.cpu().numpy().astype(np.uint32))
        ptx[op] = _instructions_of(k)
    ints = t["ints"]
    m = ints.numel()
    fa_m = fa[:m] if n >= m else fa
    for op in INT_CASTS:
        if wanted is not None and op not in wanted:
            continue
        y = torch.empty(m, dtype=torch.float32, device=device)
        iy = torch.zeros(m, dtype=torch.int32, device=device)
        k = attempt(op, lambda: launch(int_cast_kernel)[(triton.cdiv(m, BLOCK),)](ints, fa_m, y, iy, m, OP=op,
                                                                                  BLOCK=BLOCK))
        if op in failed:
            continue
        out[op] = (iy.cpu().numpy().view(np.uint32) if op in ("bf16_to_i32", "f32_to_i32")
                   else y.view(torch.int32).cpu().numpy().view(np.uint32))
        ptx[op] = _instructions_of(k)
    run.ptx = ptx
    run.failed = failed
    return out


def _instructions_of(compiled) -> list[str]:
    asm = getattr(compiled, "asm", None)
    if not asm or "ptx" not in asm:
        return []
    return float_instructions(asm["ptx"])


_WORD = __import__("re").compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)")
_KEEP = ("max", "min", "div", "rcp", "sqrt", "rsq", "ex2", "lg2", "exp", "log", "fma", "mul", "add", "sub", "cvt",
         "setp", "selp", "neg", "abs", "med3", "fmac", "mad", "ldexp", "cndmask", "cmp")


def float_instructions(text: str) -> list[str]:
    """The float instructions (PTX or AMDGCN mnemonics, with how often each appears) in ``text``."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        m = _WORD.match(line)
        if not m:
            continue
        word = m.group(1)
        if word.startswith((".", "ld.", "st.", "mov", "global_", "buffer_", "s_")):
            continue
        floaty = any(t in word for t in ("f32", "f16", "bf16", "ftz")) or word.startswith("v_") and "_f" in word
        if floaty and any(k in word for k in _KEEP):
            found[word] = found.get(word, 0) + 1
    return [f"{w}" + (f" x{c}" if c > 1 else "") for w, c in sorted(found.items())]


def run_one(op: str, a=None, b=None, c=None, *, ints=None, launch=None, device: str = "cpu", row=None) -> np.ndarray:
    """One op on float32 values (or bit patterns as uint32) ``a``, ``b``, ``c`` (``ints`` for the integer
    casts, ``row`` for a reduction): the result bits (uint32; int32 results as their bits)."""
    import torch

    launch = launch or (lambda k: k)

    def f32(v, like=None):
        if v is None:
            v = np.zeros(np.shape(like), np.float32)
        v = np.asarray(v)
        v = v.view(np.float32) if v.dtype == np.uint32 else v.astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(v).copy()).to(device)

    if op in REDUCTIONS:
        x = f32(np.asarray(row).reshape(1, -1))
        v = torch.empty(1, dtype=torch.float32, device=device)
        i = torch.zeros(1, dtype=torch.int32, device=device)
        launch(reduce_kernel)[(1,)](x, v, i, OP=op, ROW=x.shape[1])
        return (v.view(torch.int32) if op in ("max", "min") else i).cpu().numpy().view(np.uint32)
    if op in INT_CASTS:
        ia = torch.from_numpy(np.asarray(ints if ints is not None else np.zeros(np.shape(a)), np.int32)).to(device)
        fa = f32(a if a is not None else np.zeros(ia.shape, np.float32))
        m = max(ia.numel(), fa.numel())
        y = torch.empty(m, dtype=torch.float32, device=device)
        iy = torch.zeros(m, dtype=torch.int32, device=device)
        launch(int_cast_kernel)[(triton.cdiv(m, BLOCK),)](ia, fa, y, iy, m, OP=op, BLOCK=BLOCK)
        return (iy if op in ("bf16_to_i32", "f32_to_i32") else y.view(torch.int32)).cpu().numpy().view(np.uint32)
    fa = f32(a)
    fb, fc = f32(b, a), f32(c, a)
    y = torch.empty_like(fa)
    n = fa.numel()
    launch(elementwise_kernel)[(triton.cdiv(n, BLOCK),)](fa, fb, fc, y, n, H, LO, OP=op, BLOCK=BLOCK)
    return y.view(torch.int32).cpu().numpy().view(np.uint32)

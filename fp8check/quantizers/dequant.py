"""Block dequantization kernels: ``kernel(codes, scales) -> values``, judged bit for bit.

A dequant kernel takes an (M, N) tensor of fp8 codes (uint8 or the format's torch fp8 dtype) and a float32
scale per block of ``block = (rows, cols)`` elements, shape (ceil(M / rows), ceil(N / cols)) (DeepSeek-V3's
``weight_dequant``: 128x128 blocks, ``y = x * s``; FBGEMM's and torchao's block layouts are the same with
their own block shapes). The reference (:func:`reference_dequant`) is the exact value of each code
(:func:`fp8check.reference.decode`) with its block's scale applied in float32 as declared (``multiply``:
``v * s``; ``divide``: ``v / s``; ``multiply-reciprocal``: ``v * fl(1 / s)``), one rounding each, then
rounded to the output dtype (ties to even). Every code appears in every call; shapes are whole and ragged
blocks. A divergence names the element, its block, the code and the scale; one explained by another block's
scale (a wrong axis, a transposed block shape) or by the other direction is a ``scale`` divergence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fp8check import checking, reference
from fp8check.casts.decoding import (CODE_DTYPES, check_code_dtypes, check_output_dtype, codes_tensor,
                                     describe_codes, output_of)
from fp8check.errors import InvalidValueError, KernelCallError
from fp8check.formats import Format
from fp8check.formats import get as get_format
from fp8check.results import CheckResult, Divergence, Refusal

__all__ = ["check_dequant", "reference_dequant", "block_of", "APPLY", "DEFAULT_BLOCK"]

APPLY = ("multiply", "divide", "multiply-reciprocal")
DEFAULT_BLOCK = (128, 128)
_VERB = {"multiply": "times", "divide": "divided by", "multiply-reciprocal": "times fl(1/scale) of"}
_LISTED = 100


def block_of(block: Any, where: str) -> tuple[int, int]:
    """``block`` as (rows, cols): ``[128, 128]``, ``"128x128"`` or one int for a square block."""
    try:
        if isinstance(block, str):
            parts = tuple(int(p) for p in block.lower().split("x"))
        elif isinstance(block, int) and not isinstance(block, bool):
            parts = (block, block)
        else:
            parts = tuple(int(p) for p in block)
    except (TypeError, ValueError):
        parts = ()
    if len(parts) != 2 or min(parts) < 1:
        raise InvalidValueError(f"{where}: block = {block!r}: give [rows, cols] (e.g. [128, 128]) of positive sizes")
    return parts  # type: ignore[return-value]


def _check_apply(apply: str, where: str) -> None:
    if apply not in APPLY:
        raise InvalidValueError(f"{where}: apply = {apply!r}: a dequant kernel applies its scale by "
                                f"{', '.join(APPLY)}")


def _expand(scales: np.ndarray, shape: tuple[int, int], block: tuple[int, int]) -> np.ndarray:
    rows = np.arange(shape[0]) // block[0]
    cols = np.arange(shape[1]) // block[1]
    return scales[rows][:, cols]


def _apply(values: np.ndarray, scales: np.ndarray, apply: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        if apply == "multiply":
            return values * scales
        if apply == "divide":
            return values / scales
        return values * (np.float32(1) / scales)


def _to_dtype_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 ``values`` rounded to ``dtype`` (ties to even), as unsigned integer bits of that width."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(getattr(torch, dtype))
    view = {"float32": torch.int32, "float16": torch.int16, "bfloat16": torch.int16}[dtype]
    bits = t.view(view).numpy()
    return bits.view(np.uint32 if dtype == "float32" else np.uint16)


def reference_dequant(codes: np.ndarray, scales: np.ndarray, fmt: Any, *, block: tuple[int, int],
                      apply: str = "multiply", output_dtype: str = "float32") -> np.ndarray:
    """The exact dequantization of ``codes`` (uint8, (M, N)) under float32 ``scales`` per ``block``, as bits of
    ``output_dtype``: each code's value in float32 (exact), its block's scale applied in float32, then the
    output dtype."""
    f = get_format(fmt)
    values = reference.decode(np.asarray(codes, dtype=np.uint8), f).astype(np.float32)
    s = _expand(np.asarray(scales, dtype=np.float32), values.shape, block)
    return _to_dtype_bits(_apply(values, s, apply).astype(np.float32), output_dtype)


def _bits_to_float(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return bits.astype(np.uint32).view(np.float32)
    if dtype == "float16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


@dataclass(frozen=True)
class _Case:
    codes: np.ndarray  # uint8 (M, N)
    scales: np.ndarray  # float32 (ceil(M / rows), ceil(N / cols))
    what: str


def _cases(fmt: Format, block: tuple[int, int], seed: int) -> list[_Case]:
    """Whole blocks and ragged ones, every code in each, scales from powers of two to values whose products
    round, tiny (subnormal results) and huge (overflowing the output dtype)."""
    rng = np.random.default_rng(seed)
    bm, bn = block
    out = []
    for m, n, what in ((2 * bm, 3 * bn, "whole blocks"), (2 * bm + 1, 2 * bn + 3, "ragged last blocks")):
        codes = (rng.permutation(m * n) % fmt.code_count).astype(np.uint8).reshape(m, n)
        sm, sn = -(-m // bm), -(-n // bn)
        k = sm * sn
        pool = np.concatenate([
            np.ldexp(1.0, rng.integers(-20, 21, k)),  # powers of two: exact products
            np.exp(rng.uniform(np.log(1e-4), np.log(1e4), k)),  # products that round
            np.array([1e-30, 3e4, 7.0, 1.0 / 3.0]),  # subnormal and overflowing results, a reciprocal that rounds
        ]).astype(np.float32)
        scales = rng.choice(pool, size=(sm, sn), replace=False) if pool.size >= k else rng.choice(pool, (sm, sn))
        # every block its own scale: a wrong block's scale shows
        out.append(_Case(codes=codes, scales=np.asarray(scales, dtype=np.float32), what=f"{m}x{n}, {what}"))
    return out


@dataclass
class _Kernel:
    fn: Callable[..., Any]
    name: str
    code_dtype: str
    device: str
    output_dtype: str | None

    def call(self, case: _Case, fmt: Format) -> tuple[np.ndarray, str]:
        """The kernel's output for ``case`` as (bits, its dtype)."""
        import torch

        codes = codes_tensor(case.codes, fmt, self.code_dtype, self.device)
        try:
            out = self.fn(codes, torch.from_numpy(case.scales.copy()).to(self.device))
        except Exception as exc:  # the kernel's own error: a refusal
            raise KernelCallError(f"{self.name} raised {type(exc).__name__} on {case.what} "
                                  f"({self._codes(fmt)}): {exc}") from None
        values, got = output_of(out, self.name, "dequant", self.output_dtype, case.codes.shape)
        view = {"float32": torch.int32, "float16": torch.int16, "bfloat16": torch.int16}[got]
        bits = values.contiguous().view(view).numpy()
        return bits.view(np.uint32 if got == "float32" else np.uint16), got

    def _codes(self, fmt: Format) -> str:
        return describe_codes(fmt, self.code_dtype)


def check_dequant(kernel: Callable[..., Any], format: Any, *, block: Any = DEFAULT_BLOCK, apply: str = "multiply",
                  code_dtypes: Any = (), output_dtype: str | None = None, device: str = "cpu",
                  name: str | None = None, seed: int = 0, cap: int | None = _LISTED) -> CheckResult:
    """Check the block dequant kernel ``kernel(codes, scales) -> values`` against :func:`reference_dequant`.

    ``block``: (rows, cols) of one scale's block; ``apply``: how the scale is applied (``multiply``,
    ``divide``, ``multiply-reciprocal``); ``code_dtypes``: ``"uint8"`` and/or ``"fp8"`` (default: each
    tried, a refusal noted); ``output_dtype``: the dtype it must return (default: the reference rounds to the
    one it returns). Raises :class:`~fp8check.errors.KernelCallError` when no way of calling works.
    """
    fmt = get_format(format)
    label = checking.kernel_name(kernel, name)
    blk = block_of(block, label)
    _check_apply(apply, label)
    wanted = check_code_dtypes(code_dtypes, label) or CODE_DTYPES
    check_output_dtype(output_dtype, label)
    result = CheckResult(kernel=label, format=fmt.name, profile=f"dequant-{apply}", passed=True, checked=0,
                         kind="dequant", input_dtype="", device=device, seed=seed)
    taken, dest = [], output_dtype or ""
    cases = _cases(fmt, blk, seed)
    calls = {}  # code dtype -> (kernel, refusals, outputs): every way called first, then judged
    for code_dtype in wanted:
        k = _Kernel(kernel, label, code_dtype, device, output_dtype)
        refused, outputs = [], []
        for case in cases:
            try:
                bits, got = k.call(case, fmt)
            except KernelCallError as exc:  # a refusal of this call; the others are still compared
                refused.append(Refusal(condition=f"{case.what}, {k._codes(fmt)}", error=str(exc),
                                       declared=bool(code_dtypes)))
                continue
            outputs.append((case, bits, got))
        calls[code_dtype] = (k, refused, outputs)
    fp8_out = {id(case): (bits, got) for case, bits, got in calls.get("fp8", (None, [], []))[2]}
    for code_dtype, (k, refused, outputs) in calls.items():
        if code_dtype == "uint8" and not code_dtypes and outputs and all(
                _reads_integers(case, bits, got, apply, fmt, fp8_out.get(id(case))) for case, bits, got in outputs):
            # an fp8 kernel given bytes converts their integer values (x.to(tl.float32) of a uint8 tensor): it
            # does not take codes this way, and nobody calls it so; declared code-dtype = "uint8" judges it
            result.refusals.append(Refusal(
                condition=f"{fmt.name} codes as uint8", declared=False,
                error="the kernel dequantizes a uint8 tensor's integer values (each byte times its scale), not the "
                      f"{fmt.name} codes: it takes fp8 tensors (declare code-dtype = \"uint8\" to judge this way)"))
            continue
        for case, bits, got in outputs:
            dest = got
            result.checked += case.codes.size
            _compare(result, case, bits, got, fmt, blk, apply, condition=k._codes(fmt), cap=cap)
        result.refusals += refused
        if len(refused) < len(cases):
            taken.append(code_dtype)
    if not taken:
        raise KernelCallError("; ".join(dict.fromkeys(r.error for r in result.refusals)))
    result.passed = not result.categories and not any(r.declared for r in result.refusals)
    result.input_dtype = ",".join("uint8" if c == "uint8" else str(fmt.torch_name) for c in taken)
    verb = _VERB[apply]
    result.extra.update(
        block=list(blk), apply=apply, output_dtype=dest, code_dtypes=taken,
        profile_summary=(f"each code's exact value {verb} its {blk[0]}x{blk[1]} block's float32 scale, rounded "
                         f"in float32, then to {dest}"),
        checked_means=f"elements dequantized ({', '.join(c.what for c in cases)}; every code in each), "
                      f"each way the kernel takes codes ({result.input_dtype})")
    return result


def _by_some_scale(values: np.ndarray, actual: np.ndarray, dtype: str, scales: np.ndarray,
                   apply: str) -> np.ndarray:
    """Per element, whether ``actual`` is its value with one of ``scales`` applied, rounded to ``dtype`` (NaN by
    class): any block's scale, not only the element's own."""
    a = _bits_to_float(actual, dtype)
    matched = np.zeros(values.shape, dtype=bool)
    for s in np.unique(scales):  # a few blocks per case
        want = _to_dtype_bits(_apply(values, np.float32(s), apply).astype(np.float32), dtype)
        matched |= (want == actual) | (np.isnan(_bits_to_float(want, dtype)) & np.isnan(a))
    return matched


def _reads_integers(case: _Case, actual: np.ndarray, dtype: str, apply: str, fmt: Format,
                    fp8: tuple[np.ndarray, str] | None) -> bool:
    """Whether the kernel's output is each code's integer value (the byte) with some block's scale applied:
    what an fp8 kernel converting its input's values makes of a uint8 tensor. A block-indexing bug of its own
    does not hide it (any block's scale counts), nor does a scale it loads from nowhere: elements whose output
    the fp8 way (``fp8``: its bits and dtype for this case) does not explain by any block's scale (or whose
    code is NaN, infinite or zero: the same under any scale) are no evidence either way, as long as most
    elements are integers times a scale."""
    ints = _by_some_scale(case.codes.astype(np.float32), actual, dtype, case.scales, apply)
    if fp8 is None:
        return bool(ints.all())
    values = reference.decode(case.codes, fmt).astype(np.float32)
    # a NaN, infinite or zero code's output is the same under any scale: no evidence of the scale applied
    unexplained = ~_by_some_scale(values, fp8[0], fp8[1], case.scales, apply) | ~np.isfinite(values) | (values == 0)
    return bool((ints | unexplained).all()) and 2 * int(ints.sum()) > ints.size


def _compare(result: CheckResult, case: _Case, actual: np.ndarray, dtype: str, fmt: Format,
             block: tuple[int, int], apply: str, *, condition: str, cap: int | None) -> None:
    expected = reference_dequant(case.codes, case.scales, fmt, block=block, apply=apply, output_dtype=dtype)
    e_val, a_val = _bits_to_float(expected, dtype), _bits_to_float(actual, dtype)
    same = (expected == actual) | (np.isnan(e_val) & np.isnan(a_val))
    rows, cols = np.nonzero(~same)
    if not rows.size:
        return
    codes = case.codes[rows, cols]
    values = reference.decode(codes, fmt).astype(np.float32)
    bi, bj = rows // block[0], cols // block[1]
    scale = case.scales[bi, bj]
    categories, why = _categories(values, codes, scale, (bi, bj), expected[rows, cols], actual[rows, cols],
                                  case.scales, apply, dtype, fmt)
    for cat in np.unique(categories):
        result.categories[str(cat)] = result.categories.get(str(cat), 0) + int((categories == cat).sum())
    width = 8 if dtype == "float32" else 4
    chosen = np.arange(rows.size)
    if cap is not None:  # the first of each category, so a rarer one is not capped away behind another
        keep = [np.flatnonzero(categories == cat)[:max(0, cap - sum(
                    1 for d in result.divergences if d.condition == condition and d.category == str(cat)))]
                for cat in np.unique(categories)]
        chosen = np.sort(np.concatenate(keep))
    for n in (int(k) for k in chosen):
        i, j, code = int(rows[n]), int(cols[n]), int(codes[n])
        e, a = e_val[i, j], a_val[i, j]
        result.divergences.append(Divergence(
            category=str(categories[n]), input_hex=f"0x{code:02x}", input_dtype=fmt.name,
            expected_hex=f"0x{int(expected[i, j]):0{width}x}", actual_hex=f"0x{int(actual[i, j]):0{width}x}",
            input_value=f"{_code_value(code, fmt)} in block ({bi[n]}, {bj[n]}), scale {float(scale[n])!r}",
            expected_value=repr(float(e)), actual_value=repr(float(a)),
            detail=f"element ({i}, {j}) of {case.what}, block ({bi[n]}, {bj[n]}) of {block[0]}x{block[1]}"
                   + why[n], condition=condition))


def _code_value(code: int, fmt: Format) -> str:
    from fp8check.casts.engine import code_value

    return code_value(code, fmt)


def _categories(values: np.ndarray, codes: np.ndarray, scale: np.ndarray, where: tuple[np.ndarray, np.ndarray],
                expected: np.ndarray, actual: np.ndarray, scales: np.ndarray, apply: str, dtype: str,
                fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """The category of each wrong element and, for a wrong scale, which scale or direction explains it."""
    e_val, a_val = _bits_to_float(expected, dtype), _bits_to_float(actual, dtype)
    cats = np.full(codes.shape, "other", dtype=object)
    why = np.full(codes.shape, "", dtype=object)
    adjacent = np.abs(expected.astype(np.int64) - actual.astype(np.int64)) == 1
    cats[adjacent & np.isfinite(a_val) & np.isfinite(e_val)] = "rounding"
    cats[np.isinf(e_val) != np.isinf(a_val)] = "overflow"
    # Each element takes the explanation that explains the most wrong elements of its block: a bug is one per
    # block, and the other direction can give some of its elements the very value another block's scale gives
    # (1/s and s' rounding to one bfloat16), so the first explanation that fits an element is not its cause.
    block_id = np.asarray(where[0], np.int64) * scales.shape[1] + np.asarray(where[1], np.int64)
    score = np.zeros(codes.shape, dtype=np.int64)

    def explained(candidate: np.ndarray, text: str, where_ok: np.ndarray | bool = True) -> None:
        got = _to_dtype_bits(candidate.astype(np.float32), dtype)
        hit = where_ok & (got == actual)
        in_block = np.bincount(block_id[hit], minlength=scales.size)[block_id]
        better = hit & (in_block > score)
        if where_ok is not True:  # another block's scale explaining as many as a direction: both are named
            tie = hit & (in_block == score) & (score > 0) & ~np.char.endswith(why.astype(str), ")")
            why[tie] = why[tie] + f" (or, the same values here, {text[2:]})"
        cats[better], why[better], score[better] = "scale", text, in_block[better]

    for how in APPLY:
        if how != apply:
            explained(_apply(values, scale, how),
                      f"; the kernel's value is the code's value {_VERB[how]} the scale ({how}), not {apply}")
    for (r, c), s in np.ndenumerate(scales):  # another block's scale: a wrong axis, a transposed block shape
        explained(_apply(values, np.full(values.shape, s, dtype=np.float32), apply),
                  f"; the kernel applied the scale of block ({r}, {c})", (where[0] != r) | (where[1] != c))
    zero = (e_val == 0) & (a_val == 0)
    cats[zero], why[zero] = "signed_zero", ""
    nan_code = np.isin(codes, np.array(sorted(fmt.nan_codes), dtype=np.uint8))
    cats[nan_code], why[nan_code] = "nan", ""
    return cats, why

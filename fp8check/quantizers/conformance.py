"""``check_quantizer``: hold a quantize kernel to a recipe, bit for bit.

The kernel runs on the targeted edge cases of :mod:`.hazards` and on
``max_examples`` Hypothesis inputs of :mod:`.strategies`; each output is
compared with :func:`fp8check.quantizers.quantize`. Every block of every input
is classified:

``nonfinite``  the block holds an Inf or NaN and the kernel's scale or
               codes differ from what the recipe declares for it;
``scale``      a block of finite input whose scale differs (bits, NaN by
               class) -- counted once per block;
``codes``      the scale agrees but codes differ (NaN by class) -- counted
               once per element.

A block holding Inf or NaN that diverges counts as ``nonfinite`` whatever the
cause (a scale bug shows there too). Scales are compared for every block the
recipe defines, empty MoE groups included; codes are not compared in a block whose expected and actual
scales are both NaN (the whole block is NaN then). Whatever the verdict, the
hazards of :mod:`.hazards` are counted on the kernel's outputs and reported
in ``extra["hazards"]`` and ``extra["blast_radius"]``.

``fp8check check MODULE:FUNC --kind quantize --recipe NAME`` is the command
line of :func:`check_quantizer`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from fp8check.casts import harness
from fp8check.casts.harness import Supports
from fp8check.errors import FP8CheckError, InvalidValueError, KernelError
from fp8check.formats import E4M3FN, E8M0FNU, Format, get as get_format
from fp8check.profiles import get as get_profile
from fp8check.reference import decode
from fp8check.quantizers import get as get_recipe
from fp8check.quantizers.edge_cases import HazardTally, edge_cases, nan_code_table
from fp8check.quantizers.recipe import TARGET_OPS, Recipe, untargeted_note
from fp8check.quantizers import exactness
from fp8check.quantizers.scaling import (apply_scale, block_amax, element_blocks, element_scales, expand_scales,
                                         global_scale, quantize, scales_from_amax)
from fp8check.quantizers.packing import pack_codes, swap_pairs, unpack_codes
from fp8check.quantizers.cases import QuantCase, quantizer_inputs, to_dtype
from fp8check import brackets, checking, device_faults
from fp8check.results import CALL_CATEGORIES, QUANTIZE_CATEGORIES, CheckResult, Divergence, Refusal

__all__ = ["run_kernel", "check_quantizer", "reference_kernel"]

MAX_DIVERGENCES = 50


def reference_kernel(recipe: Recipe) -> Callable[..., tuple[Any, Any]]:
    """The reference as a kernel (torch in, torch out): the recipe's own behaviour (codes packed as the recipe
    declares; a two-level recipe's float32 per-tensor scale returned third)."""

    def kernel(x: Any, offsets: Any = None) -> tuple[Any, ...]:
        import torch

        q = quantize(x, recipe, offsets=offsets)
        codes = pack_codes(q.codes, recipe.packed) if recipe.packed else q.codes
        out = (torch.from_numpy(codes), torch.from_numpy(np.asarray(q.scales, dtype=np.float32)))
        if recipe.two_level:
            out += (torch.tensor([global_scale(x, recipe)], dtype=torch.float32),)
        return out

    kernel.__name__ = f"reference[{recipe.name}]"
    return kernel


# -- running a kernel -------------------------------------------------------------


def _torch_format(dtype: Any) -> Format | None:
    name = str(dtype).removeprefix("torch.")
    if not name.startswith("float8_"):
        return None
    try:
        return get_format(name)
    except FP8CheckError:
        return None


def _codes_of(out: Any, recipe: Recipe, shape: tuple[int, int], name: str) -> np.ndarray:
    """One code per element (uint8, ``shape``): a packed recipe's bytes unpacked in its declared order."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        fmt = _torch_format(out.dtype)
        if str(out.dtype) == "torch.float4_e2m1fn_x2":  # two e2m1fn codes per byte, as torch stores them
            if recipe.format.name != "e2m1fn" or not recipe.packed:
                raise KernelError(f"kernel {name} returned packed float4_e2m1fn_x2 codes; recipe {recipe.name!r} "
                                  f"declares {recipe.format.name} codes {'packed ' + recipe.packed if recipe.packed else 'one per byte'}")
            out = out.view(torch.uint8)
        elif fmt is not None:
            if fmt is not recipe.format:
                raise KernelError(f"kernel {name} returned {out.dtype} codes; recipe {recipe.name!r} targets {recipe.format.name}")
            out = out.view(torch.uint8)
        elif out.dtype in (torch.uint8, torch.int8):
            out = out.view(torch.uint8)
        else:
            raise KernelError(f"kernel {name} returned codes of dtype {out.dtype}; expected a float8 or uint8 tensor")
        arr = out.detach().cpu().numpy()
    else:
        arr = np.asarray(out)
        if arr.dtype.itemsize != 1:
            raise KernelError(f"kernel {name} returned codes of dtype {arr.dtype}; expected one byte per code")
        arr = arr.view(np.uint8)
    if recipe.packed:
        packed_shape = (shape[0], shape[1] // 2)
        if shape[1] % 2 or tuple(arr.shape) != packed_shape:
            raise KernelError(f"kernel {name} returned codes of shape {tuple(arr.shape)} for an input of shape {shape}; "
                              f"recipe {recipe.name!r} packs two codes per byte ({packed_shape})")
        return unpack_codes(arr, recipe.packed)
    if tuple(arr.shape) != tuple(shape):
        raise KernelError(f"kernel {name} returned codes of shape {tuple(arr.shape)} for an input of shape {shape}")
    if recipe.format.bits < 8 and arr.size and int(arr.max()) >= recipe.format.code_count:
        raise KernelError(f"kernel {name} returned a byte {int(arr.max()):#04x}, not a {recipe.format.name} code "
                          f"(one per byte, below {recipe.format.code_count:#04x}); a recipe declares packed codes "
                          "with packed = \"low-first\" or \"high-first\"")
    return np.ascontiguousarray(arr)


def _scales_of(out: Any, recipe: Recipe, expected_shape: tuple[int, ...], name: str) -> np.ndarray:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        out = out.detach().cpu()
        if out.dtype == torch.uint8 and recipe.scale_dtype == "e4m3fn":  # e4m3fn codes as bytes, declared
            values = decode(out.numpy(), E4M3FN)
        elif out.dtype == torch.float8_e4m3fn and recipe.scale_dtype == "e4m3fn":
            values = decode(out.view(torch.uint8).numpy(), E4M3FN)
        elif out.dtype == getattr(torch, "float8_e8m0fnu", None) or out.dtype == torch.uint8:
            if out.dtype == torch.uint8 and recipe.scale_dtype != "e8m0":
                raise KernelError(f"kernel {name} returned uint8 scales; recipe {recipe.name!r} stores {recipe.scale_dtype}")
            values = decode(out.view(torch.uint8).numpy(), E8M0FNU)
        elif out.dtype.is_floating_point and out.element_size() >= 2:
            values = out.to(torch.float64).numpy()
        else:
            raise KernelError(f"kernel {name} returned scales of dtype {out.dtype}; recipe {recipe.name!r} stores "
                              f"{recipe.scale_dtype} (float32 values, or e8m0 / e4m3fn codes where it says so)")
    else:
        values = np.asarray(out, dtype=np.float64)
    size = int(np.prod(expected_shape)) if expected_shape else 1
    if values.size != size:
        raise KernelError(
            f"kernel {name} returned {values.size} scales of shape {tuple(values.shape)}; recipe {recipe.name!r} "
            f"({recipe.granularity}) has {size} (shape {expected_shape})"
        )
    return values.reshape(expected_shape).astype(np.float64)


def run_kernel(kernel: Callable[..., Any], case: QuantCase, recipe: Recipe, *, device: str = "cpu",
               name: str = "kernel", args: Sequence[Any] = ()) -> tuple[np.ndarray, np.ndarray, Any]:
    """Call ``kernel`` on a private copy of ``case.x`` laid out as ``case.layout``, with ``args`` after it.

    Returns (uint8 codes, float64 scales in the canonical shape, the write
    the kernel made to its input or None: (elements changed, first before,
    first after) as float32 bits).
    """
    import torch

    from fp8check.casts.harness import layout_base, mutation

    base_np, view = layout_base(np.array(case.x, dtype=np.float32, copy=True), case.layout)
    base = torch.from_numpy(base_np).to(getattr(torch, case.dtype)).to(device)
    x = view(base)
    snapshot = base.clone()
    try:
        if recipe.grouped:
            out = kernel(x, torch.from_numpy(case.offsets.astype(np.int32)).to(device), *args)
        else:
            out = kernel(x, *args)
        device_faults.settle(device)  # a fault on the device is this call's, not a later operation's
    except FP8CheckError:
        raise
    except Exception as exc:
        device_faults.check_call(exc, device=device, call=case.condition.removeprefix("only for ") or repr(case),
                                 kernel=name)
        raise KernelError(f"kernel {name} raised {type(exc).__name__} on {case!r}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    groups = 0 if case.offsets is None else case.offsets.size
    shape = recipe.granularity.scale_shape(case.x.shape, groups)
    moved = mutation(snapshot.float(), base.float())
    return (*_outputs(out, recipe, case.x.shape, shape, name), moved)


def _outputs(out: Any, recipe: Recipe, shape: tuple[int, int], scale_shape: tuple[int, ...],
             name: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, float64 scales) of a quantize kernel's return value; a two-level recipe's kernel returns its
    float32 per-tensor scale third, compared as one more scale after the block scales (flat then)."""
    arity = 3 if recipe.two_level else 2
    if not isinstance(out, (tuple, list)) or len(out) != arity:
        what = "(codes, block scales, per-tensor scale)" if recipe.two_level else "(codes, scales)"
        raise KernelError(f"kernel {name} returned {type(out).__name__}"
                          + (f" of {len(out)}" if isinstance(out, (tuple, list)) else "")
                          + f"; a quantize kernel of recipe {recipe.name!r} returns {what}")
    codes, scales = _codes_of(out[0], recipe, shape, name), _scales_of(out[1], recipe, scale_shape, name)
    if recipe.two_level:
        torch = sys.modules.get("torch")
        g = out[2]
        if torch is not None and isinstance(g, torch.Tensor):
            if not g.dtype.is_floating_point or g.element_size() < 2 or g.numel() != 1:
                raise KernelError(f"kernel {name} returned a per-tensor scale of dtype {g.dtype} and {g.numel()} "
                                  "elements; recipe {recipe.name!r} stores one float32 number")
            g = g.detach().cpu().to(torch.float64).reshape(-1)[0].item()
        scales = np.append(scales.reshape(-1), np.float64(g))
    return codes, scales


def _expected(case: QuantCase, recipe: Recipe) -> tuple[np.ndarray, np.ndarray]:
    """The reference's (codes, scales) for ``case``, scales as :func:`_outputs` gives them."""
    q = quantize(case.x, recipe, offsets=case.offsets)
    scales = np.asarray(q.scales, dtype=np.float64)
    if recipe.two_level:
        scales = np.append(scales.reshape(-1), np.float64(global_scale(case.x, recipe)))
    return q.codes, scales


def harness_cases(recipe: Recipe, cases: Sequence[QuantCase], *, device: str = "cpu",
                  seed: int = 0) -> list[QuantCase]:
    """The cases that drive a quantizer as real callers do, beyond the edge cases (issue: shapes, layouts,
    large tensors): two of ``cases`` again as non-contiguous inputs (transposed, every other column, a
    storage offset), shapes that are not multiples of the block, and two large tensors, one tall, one wide
    (2^22 elements each on the CPU, 2^23 on a GPU). The last comes last: :func:`check_quantizer` calls it
    twice."""
    rng = np.random.default_rng(seed)
    out: list[QuantCase] = []
    plain = [c for c in cases if c.layout == "contiguous" and min(c.x.shape) >= 2][:2]
    for c in plain:
        for layout in ("transposed", "strided", "offset"):
            out.append(QuantCase(c.name, c.x, c.dtype, c.offsets, layout=layout,
                                 condition=f"only for non-contiguous input ({layout})"))
    g = recipe.granularity
    rows, cols = (g.rows, g.cols) if g.kind == "block" else (32, 32)
    if not recipe.grouped and (g.kind != "block" or recipe.ragged):
        for shape in ((1, 1), (3, 1001), (2 * rows + 3, 2 * cols + 5)):
            x = (rng.standard_normal(shape) * 3).astype(np.float32)
            out.append(QuantCase("odd shape", x, "float32", condition=f"only for shape {shape}"))
    # Two large inputs of the same size, tall then wide: real weights are (N, K) with N or K in the
    # thousands, and a kernel may chunk its rows or its columns only from some size on.
    numel = harness.large_numel(device, gpu=1 << 23)[0]  # each of two; on the CPU 2^22
    short = 1 << (numel.bit_length() - 5) // 2  # a power of two: 512 x 8192 = 2^22 exactly on the CPU
    multiple = max(g.rows, g.cols) if g.kind == "block" and not recipe.ragged else 1
    for rows, cols in ((numel // short, short), (short, numel // short)):
        rows, cols = -(-rows // multiple) * multiple, -(-cols // multiple) * multiple
        big = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
        big[7, 11] = 500.0
        offsets = None
        if recipe.grouped:
            length = cols if g.kind == "group_rowwise" else rows  # the split dimension
            offsets = np.array([length // 4, length // 4, length // 2, length], dtype=np.int64)
        out.append(QuantCase("large", big, "float32", offsets,
                             condition=f"only for a large input ({rows}x{cols}, {rows * cols:,} elements)"))
    return out


# -- comparing --------------------------------------------------------------------


def _hex_input(v: np.float32, dtype: str) -> str:
    bits = int(np.float32(v).view(np.uint32))
    return f"{bits >> 16:04X}" if dtype == "bfloat16" else f"{bits:08X}"


def _amax_elements(x: np.ndarray, blocks: np.ndarray, amax: np.ndarray, wanted: np.ndarray,
                   global_block: int) -> dict[int, int]:
    """For each block of ``wanted``, the index of its first element whose magnitude is the block's amax: the
    input a scale divergence shows, sign included (a kernel that forgets ``abs()`` is wrong exactly where that
    element is negative). ``global_block``: the per-tensor scale of a two-level recipe (every element), or -1.
    A block with no element (an empty group) is left out."""
    if not len(wanted):
        return {}
    mag = np.abs(x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        hit = np.flatnonzero(mag == amax[blocks])
    first_blocks, first = np.unique(blocks[hit], return_index=True)
    out = {int(b): int(hit[k]) for b, k in zip(first_blocks, first)}
    if global_block >= 0 and x.size:
        out[global_block] = int(np.argmax(mag))
    return {int(b): out[int(b)] for b in wanted if int(b) in out}


def _hex32(v: float) -> str:
    return f"{int(np.float32(v).view(np.uint32)):08X}"


def _block_text(recipe: Recipe, b: int, shape: tuple[int, int], offsets: np.ndarray | None) -> str:
    g = recipe.granularity
    m, n = shape
    if recipe.two_level and b == int(np.prod(g.scale_shape(shape))):
        return "the per-tensor (global) scale"
    if g.kind == "tensorwise":
        return "the whole tensor"
    if g.kind == "rowwise":
        return f"row {b}"
    if g.kind == "colwise":
        return f"column {b}"
    if g.kind == "block":
        nb = -(-n // g.cols)
        r, c = divmod(b, nb)
        return f"block rows {r * g.rows}:{min(m, (r + 1) * g.rows)}, cols {c * g.cols}:{min(n, (c + 1) * g.cols)}"
    length = m if g.kind == "group_rowwise" else n
    grp, i = divmod(b, length)
    start = 0 if grp == 0 else int(offsets[grp - 1])
    span = f"{'columns' if g.kind == 'group_rowwise' else 'rows'} {start}:{int(offsets[grp])}"
    return f"group {grp} ({span}{', empty' if start == int(offsets[grp]) else ''}), {'row' if g.kind == 'group_rowwise' else 'column'} {i}"


def _implied_target(recipe: Recipe, amax: float, scale: float) -> float:
    """The value a stored scale maps amax to: in the convention of the number stored (a recipe that stores the
    reciprocal of what it applies stores the other convention's number)."""
    a, s = np.float64(amax), np.float64(scale)
    with np.errstate(all="ignore"):
        return float(a * s if recipe.stored_convention == "scale" else a / s)


_KNOWN_MAXIMA = {448.0: "e4m3fn's max", 240.0: "e4m3fnuz's max", 224.0: "224", 57344.0: "e5m2's max"}


def _target_note(recipe: Recipe, amax: float, expected: float, actual: float, target: str | None = None) -> str:
    if not (np.isfinite(amax) and amax >= 0 and recipe.rule == "amax" and recipe.pow2 is None):
        return ""
    other = _other_clamp(recipe, amax, actual)  # an all-zero block shows a moved floor best
    if other or amax == 0:
        return other
    te, ta = _implied_target(recipe, amax, expected), _implied_target(recipe, amax, actual)
    if not np.isfinite(ta):
        return ""
    other = _other_scale_divide(recipe, amax, actual, target)
    if other:
        return other
    if f"{te:.6g}" == f"{ta:.6g}" and np.isfinite(expected) and np.signbit(expected) == np.signbit(actual):
        # the same target, rounded another way (a scale stored as amax / max where the recipe stores the
        # reciprocal of max / amax, a division ordered differently): how far, not the same number twice
        e32, a32 = (int(np.float32(v).view(np.uint32)) for v in (expected, actual))
        n = abs(a32 - e32)
        return (f"; the kernel maps amax to the same target as the recipe ({te:.6g}), its scale {n:,} float32 "
                f"ulp{'s' if n != 1 else ''} {'above' if abs(actual) > abs(expected) else 'below'} the recipe's: "
                f"the same target rounded another way (declare the arithmetic, or allow it with ulps = {n})")
    note = f"; the recipe maps amax to {te:.6g}, the kernel to {ta:.6g}"
    for v, label in _KNOWN_MAXIMA.items():
        if abs(ta - v) <= v * 1e-5 and abs(te - v) > v * 1e-5:
            note += f" ({label})"
    return note


_SCALE_DIVIDE_TEXT = {
    "multiply-reciprocal": "multiplies by the rounded reciprocal (two roundings; Triton on sm90 compiles a "
                           "division by a constant so, and so does CUDA torch's tensor / scalar)",
    "divide": "divides once, correctly rounded",
}


def _other_scale_divide(recipe: Recipe, amax: float, actual: float, target: str | None = None) -> str:
    """A note when the kernel's scale is, bit for bit, the recipe's under another ``scale_divide``: the
    declaration names the wrong arithmetic, not a wrong target. A Triton kernel checked under a ``target`` whose
    ``/`` is known bit for bit is offered ``target-divide`` first: its own ``/``, which on sm90 also equals
    ``multiply-reciprocal`` for 448, is what it declares (for 240 or another run-time divisor it is not)."""
    if recipe.scale_precision != "float32" or recipe.scale_divide in TARGET_OPS:
        return ""
    other = "divide" if recipe.scale_divide == "multiply-reciprocal" else "multiply-reciprocal"
    candidates = [(other, _SCALE_DIVIDE_TEXT[other], {})]
    from fp8check.triton.ops import divides_bit_for_bit

    if target is not None and divides_bit_for_bit(target):
        candidates.insert(0, ("target-divide", f"divides with `/` as {target} compiles it (its own `/`, declared so)",
                              {"triton_target": target}))
    for name, text, more in candidates:
        try:
            alt = recipe.replace(scale_divide=name, **more)
        except FP8CheckError:
            continue
        s = scales_from_amax(np.array([amax], np.float32), alt)
        if np.float32(s[0]).tobytes() == np.float32(actual).tobytes():
            return (f"; the kernel's scale is the recipe's with scale-divide = \"{name}\": the kernel {text}, the "
                    f"recipe {_SCALE_DIVIDE_TEXT[recipe.scale_divide].split(' (')[0]}")
    return ""


def _other_clamp(recipe: Recipe, amax: float, actual: float) -> str:
    """A note when the kernel's scale is, bit for bit, the recipe's with its floor moved: ``eps`` clamping the
    scale (``max(amax / target, eps)``, ``scale_min``: vLLM's CUDA per-token kernel) where the recipe clamps
    amax (``max(amax, eps) / target``), or the other way round."""
    if recipe.convention != "scale_inv" or (recipe.eps is None) == (recipe.scale_min is None):
        return ""
    floor = recipe.eps if recipe.eps is not None else recipe.scale_min
    try:
        alt = recipe.replace(eps=recipe.scale_min, scale_min=recipe.eps)
    except FP8CheckError:
        return ""
    s = scales_from_amax(np.array([amax], np.float32), alt)
    if np.float32(s[0]).tobytes() != np.float32(actual).tobytes():
        return ""
    declared = (f'eps = "none", scale-min = {floor:g}' if recipe.eps is not None
                else f'eps = {floor:g}, scale-min = "none"')
    where, other = ("the scale", "amax") if recipe.eps is not None else ("amax", "the scale")
    return (f"; the kernel's scale is the recipe's with {declared}: the kernel clamps {where} at {floor:g}, the "
            f"recipe clamps {other}")


_Found = checking.Found


def _within_ulps32(a: np.ndarray, b: np.ndarray, ulps: int) -> np.ndarray:
    """Finite float32 values of one sign at most ``ulps`` float32 steps apart (their bit patterns' distance)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ia, ib = a32.view(np.int32).astype(np.int64), b32.view(np.int32).astype(np.int64)
    return np.isfinite(a32) & np.isfinite(b32) & (np.signbit(a32) == np.signbit(b32)) & (np.abs(ia - ib) <= ulps)


def _compare(case: QuantCase, recipe: Recipe, codes: np.ndarray, scales: np.ndarray, order: int,
             counts: dict[str, int], found: list[_Found], per_case: int | None = 8, ulps: int = 0,
             exact: list[np.ndarray] | None = None, triton_target: str | None = None) -> None:
    exp_codes, exp_scales = _expected(case, recipe)
    exp_s = exp_scales.reshape(-1)
    act_s = scales.reshape(-1)
    both_nan = np.isnan(exp_s) & np.isnan(act_s)
    with np.errstate(invalid="ignore"):
        same_scale = both_nan | ((exp_s == act_s) & (np.signbit(exp_s) == np.signbit(act_s)))
        if ulps:
            same_scale |= _within_ulps32(exp_s, act_s, ulps)
    shape = case.x.shape
    blocks = element_blocks(shape, recipe, case.offsets).reshape(-1)
    nblocks = exp_s.size
    nonfinite_block = np.bincount(blocks, weights=~np.isfinite(case.x).reshape(-1), minlength=nblocks) > 0
    nan_tab = nan_code_table(recipe.format)
    ce, ca = exp_codes.reshape(-1), codes.reshape(-1)
    same_code = (ce == ca) | (nan_tab[ce] & nan_tab[ca]) | both_nan[blocks]
    swapped = ""
    if recipe.packed and not same_code.all():
        sw = swap_pairs(codes).reshape(-1)  # the kernel's bytes read in the other nibble order
        if ((ce == sw) | (nan_tab[ce] & nan_tab[sw]) | both_nan[blocks]).all():
            other = "high-first" if recipe.packed == "low-first" else "low-first"
            swapped = (f"nibble order swapped: the kernel packs {other}, the recipe declares packed = "
                       f"\"{recipe.packed}\" (every code is right in the other nibble of its byte)")
    x32 = case.x.astype(np.float32)
    applied = element_scales(block_amax(x32, recipe, case.offsets), recipe)
    applied_each = expand_scales(applied, shape, recipe, case.offsets).reshape(-1)
    if ulps and not same_code.all():
        from fp8check.casts.fused import allowed_codes

        # A code counts as the recipe's when some value within `ulps` float32 ulps of the recipe's
        # value before the cast encodes to it.
        y = apply_scale(x32.reshape(-1), applied_each, recipe)
        same_code |= allowed_codes(y, ca, recipe.format, recipe.profile, ulps)
    code_diff_block = np.bincount(blocks, weights=~same_code, minlength=nblocks) > 0
    amax = block_amax(case.x, recipe.replace(nonfinite="ieee"), case.offsets).reshape(-1).astype(np.float64)
    if recipe.two_level:  # the per-tensor scale's amax: the tensor's
        amax = np.append(amax, np.nan if np.isnan(amax).any() else amax.max(initial=0.0))
    size = case.x.size
    where = f"{case.name} ({shape[0]}x{shape[1]} {case.dtype})"
    x = case.x.reshape(-1)

    nf = np.flatnonzero(nonfinite_block & (~same_scale | code_diff_block))
    sc = np.flatnonzero(~nonfinite_block & ~same_scale)
    cd = np.flatnonzero(~same_code & ~nonfinite_block[blocks] & same_scale[blocks])
    op = recipe.rounded_op
    verdict = np.zeros(0, dtype=np.int64)
    if cd.size:  # which side is the correctly rounded x / scale, for every codes divergence
        verdict = exactness.verdicts(x[cd], applied_each[cd], ce[cd], ca[cd], op, recipe.format,
                                     recipe.profile, nan_tab)
        if exact is not None:
            exact.append(verdict)
    counts["nonfinite"] += nf.size
    counts["scale"] += sc.size
    counts["codes"] += cd.size
    fv = decode(np.arange(recipe.format.code_count), recipe.format)

    for b in nf[:per_case]:
        idx = np.flatnonzero(blocks == b)
        bad = idx[~np.isfinite(x[idx])][0]
        fin = idx[np.isfinite(x[idx])]
        lost = int(np.count_nonzero(nan_tab[ca[fin]] | ((ca[fin] & recipe.format.magnitude_mask) == 0)))
        if not same_scale[b]:
            eh, ah, ev, av = _hex32(exp_s[b]), _hex32(act_s[b]), repr(float(exp_s[b])), repr(float(act_s[b]))
            what = "scale"
        else:
            i = idx[~same_code[idx]][0]
            eh, ah, ev, av = f"{ce[i]:02X}", f"{ca[i]:02X}", repr(float(fv[ce[i]])), repr(float(fv[ca[i]]))
            what = f"code of x[{i // shape[1]}, {i % shape[1]}]"
        found.append(_Found((size, 0, order), Divergence(
            category="nonfinite", input_hex=_hex_input(x[bad], case.dtype), expected_hex=eh, actual_hex=ah,
            input_dtype=case.dtype, input_value=repr(float(x[bad])), expected_value=ev, actual_value=av,
            detail=(f"{where}: {_block_text(recipe, int(b), shape, case.offsets)} holds {float(x[bad])!r}; "
                    f"{what} differs (recipe: non-finite {recipe.nonfinite}); "
                    + (f"the kernel left {lost} of {fin.size} finite values of the block zero or NaN" if fin.size
                       else "the block holds no finite value")))))
    at_amax = _amax_elements(x, blocks, amax, sc[:per_case], global_block=nblocks - 1 if recipe.two_level else -1)
    for b in sc[:per_case]:
        i = at_amax.get(int(b))
        ih, iv, idt = ((_hex_input(x[i], case.dtype), repr(float(x[i])), case.dtype) if i is not None
                       else (_hex32(amax[b]), repr(float(amax[b])), "float32"))
        found.append(_Found((size, 1, order), Divergence(
            category="scale", input_hex=ih, expected_hex=_hex32(exp_s[b]), actual_hex=_hex32(act_s[b]),
            input_dtype=idt, input_value=iv, expected_value=repr(float(exp_s[b])),
            actual_value=repr(float(act_s[b])),
            detail=(f"{where}: scale of {_block_text(recipe, int(b), shape, case.offsets)}, amax {float(amax[b])!r}"
                    + _target_note(recipe, float(amax[b]), float(exp_s[b]), float(act_s[b]), triton_target)))))
    for k, i in enumerate(cd[:per_case]):
        b = int(blocks[i])
        found.append(_Found((size, 2, order), Divergence(
            category="codes", input_hex=_hex_input(x[i], case.dtype), expected_hex=f"{ce[i]:02X}",
            actual_hex=f"{ca[i]:02X}", input_dtype=case.dtype, input_value=repr(float(x[i])),
            expected_value=repr(float(fv[ce[i]])), actual_value=repr(float(fv[ca[i]])),
            detail=(f"{where}: x[{i // shape[1]}, {i % shape[1]}] in {_block_text(recipe, b, shape, case.offsets)}, "
                    f"scale {float(applied.reshape(-1)[b])!r} "
                    f"({recipe.convention}: {_op_text(op)}); "
                    + (swapped or exactness.verdict_text(int(verdict[k]), float(x[i]), float(applied_each[i]), op,
                                                         recipe.format, recipe.profile, actual=int(ca[i])))))))


def _op_text(op: str) -> str:
    return {"multiply": "x * scale", "divide": "x / scale", "multiply-reciprocal": "x * fl(1/scale)",
            "target-divide": "x / scale, the target's /",
            "multiply-target-reciprocal": "x * (1/scale), the target's /"}[op]


def check_quantizer(kernel: Callable[..., Any], recipe: Recipe | str, *, fmt: object = None, profile: object = None,
                    max_examples: int = 100, seed: int | None = None, device: str = "cpu",
                    kernel_name: str | None = None, edge: bool = True,
                    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
                    cases: Sequence[QuantCase] | None = None, thorough: bool = True,
                    supports: Supports | None = None, args: Any = None,
                    precast: Callable[..., Any] | None = None, ulps: int = 0,
                    cap: int | None = MAX_DIVERGENCES, huge: bool | None = None,
                    huge_numel: int | None = None, triton_target: str | None = None) -> CheckResult:
    """Check ``kernel`` against ``recipe`` (a name or a :class:`Recipe`).

    ``fmt``/``profile`` override the recipe's target format and element
    profile. ``max_examples`` Hypothesis inputs follow the targeted edge
    cases (``edge=False`` skips those; ``cases`` replaces them with your
    own :class:`~fp8check.quantizers.cases.QuantCase` list); ``seed``
    makes the Hypothesis draw reproducible (without it the draw is
    derandomized: the same every run). ``thorough`` (default) adds the
    calls of :func:`harness_cases`: non-contiguous inputs, odd shapes, a
    large tensor called twice, and two calls of one shape on other data
    back to back (a scale or codes that depend on the previous call, a
    stale amax, diverge there). The kernel always receives a private copy;
    a write to it is an ``in_place`` divergence, a call it raises on a
    refusal (a divergence inside the ``supports`` its author declared).

    A fused quantizer (pre-processing before the quantization, e.g. RMSNorm
    + quantize) takes more arguments: ``args`` (a tuple, or a function of
    the input tensor returning one) follow the input, and ``precast(x,
    *args)`` computes the values the recipe applies to.

    ``ulps``: a code counts as the recipe's when some value within ``ulps``
    float32 ulps of the recipe's value before the cast encodes to it, and a
    scale when it is within ``ulps`` float32 ulps of the recipe's (0: bit
    for bit). ``cap``: how many divergences are listed (None: all; the
    counts are always exact). Every ``codes`` divergence gets an exactness
    verdict (:mod:`.exactness`), counted in ``extra["exactness"]``.

    ``huge``: with ``thorough``, the huge calls of :mod:`fp8check.casts.huge`
    (past 2^31 elements, more than 65,535 rows; tensorwise, rowwise, colwise
    and block recipes): None (default) on a CUDA device with room, True
    anywhere (``huge_numel`` elements), False never.

    ``triton_target``: the faithful Triton target the kernel runs under, whose
    ``/`` a recipe's target-* operations (``apply``, ``scale_divide``) take;
    on a CUDA device without one, the device's own target.
    """
    if ulps < 0:
        raise InvalidValueError(f"ulps must be >= 0, got {ulps}")
    r = get_recipe(recipe, fmt)
    if profile is not None:
        r = r.replace(profile=get_profile(profile))
    if device != "cpu":
        import torch

        if device.startswith("cuda") and not torch.cuda.is_available():
            raise InvalidValueError(f"--device {device}: no CUDA device here")
    if r.divides_as_target:
        from fp8check.triton import targets

        r = r.replace(triton_target=triton_target or (targets.of_device(device) if device != "cpu" else None))
    sup = supports or Supports()
    if sup.input_dtypes is not None:  # the dtypes the kernel's author declares it takes
        dtypes = tuple(d for d in dtypes if d in sup.input_dtypes) or tuple(sup.input_dtypes)
    options = QuantizerOptions(
        name=checking.kernel_name(kernel, kernel_name), device=device, seed=seed, cap=cap, ulps=ulps, supports=sup,
        recipe=r, profile_given=profile is not None, max_examples=max_examples, edge=edge, dtypes=dtypes,
        cases=cases, thorough=thorough, args=args, precast=precast, huge=huge, huge_numel=huge_numel,
        triton_target=triton_target)
    result = run_quantizer_check(kernel, options)
    if r.divides_as_target and r.triton_target is None:
        ops = ", ".join(f'{k} = "{v}"' for k, v in (("apply", r.element_op), ("scale-divide", r.scale_divide))
                        if v in TARGET_OPS)
        result.add_note(untargeted_note(f"the recipe's {ops}"))
    return result


@dataclass(frozen=True, kw_only=True)
class QuantizerOptions(checking.CheckOptions):
    """The parameters of :func:`check_quantizer` (its docstring says what each does), the recipe resolved."""

    recipe: Recipe
    profile_given: bool = False  # the recipe's profile was overridden: the reproduce line names it
    max_examples: int = 100
    edge: bool = True
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    cases: Sequence[QuantCase] | None = None
    thorough: bool = True
    args: Any = None
    precast: Callable[..., Any] | None = None
    huge: bool | None = None
    huge_numel: int | None = None
    triton_target: str | None = None  # the faithful target the kernel runs under (its own `/`), if any

    @property
    def harness(self) -> bool:
        """Whether the harness's calls follow: thorough, on fp8check's own cases."""
        return self.thorough and self.cases is None


class QuantizerRun:
    """One check of a quantizer in progress: the kernel, its options, and what the calls so far found."""

    def __init__(self, kernel: Callable[..., Any], options: QuantizerOptions) -> None:
        self.kernel, self.options = kernel, options
        self.tally = checking.Tally(counts={c: 0 for c in QUANTIZE_CATEGORIES})
        self.hazards = HazardTally()
        self.outputs: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # each call's codes and scales, by number
        self.exact: list[np.ndarray] = []  # the exactness verdicts of the codes divergences
        self.dependent = brackets.Tally()  # target-dependent codes and scales

    def call_args(self, case: QuantCase) -> tuple[Any, ...]:
        args = self.options.args
        if args is None:
            return ()
        if callable(args):
            import torch

            return tuple(args(torch.from_numpy(np.array(case.x, dtype=np.float32)).to(getattr(torch, case.dtype))))
        return tuple(args)

    def one(self, case: QuantCase, repeat_of: int | None = None) -> None:
        """Call the kernel on ``case`` (inside its declared domain) and compare what it returns."""
        o, t = self.options, self.tally
        if not o.supports.allows_shape(case.x.shape, case.layout):
            return
        if o.supports.input_dtypes is not None and case.dtype not in o.supports.input_dtypes:
            return
        a = self.call_args(case)
        try:
            # under a faithful Triton target with bracketed instructions: rn, lo and hi runs (fresh copies)
            outs, op_names = brackets.runs(lambda: run_kernel(self.kernel, case, o.recipe, device=o.device,
                                                              name=o.name, args=a))
            codes, scales, moved = outs[0]
        except device_faults.DeviceFaultError:
            raise  # ends the check (run_quantizer_check)
        except KernelError as exc:
            refused = t.refuse(repr(case), str(exc), declared=o.supports.declared, input_dtype=case.dtype,
                               describe=repr(case))
            if refused is not None:
                t.add("refused", 1, (case.x.size, 3, t.cases), refused)
            return
        compared = case
        if o.precast is not None:  # a fused quantizer: the recipe applies to the values before its quantization
            compared = dataclasses.replace(case, x=_precast_values(o.precast, case, a, o.device))
        if len(outs) > 1:
            codes, scales = _resolve_bracketed(compared, o.recipe, outs, op_names, t.cases, self.dependent)
        n_before = len(t.found)
        _compare(compared, o.recipe, codes, scales, t.cases, t.counts, t.found, ulps=o.ulps, exact=self.exact,
                 per_case=None if o.cap is None else max(8, o.cap), triton_target=o.triton_target)
        for f in t.found[n_before:]:
            if case.condition:
                f.divergence = dataclasses.replace(f.divergence, condition=case.condition)
        self.side_effects(case, codes, scales, moved, repeat_of)
        self.outputs[t.cases] = (codes, scales)
        self.hazards.observe(compared, o.recipe, codes, scales)
        t.checked += case.x.size
        t.cases += 1
        t.dtypes.add(case.dtype)

    def side_effects(self, case: QuantCase, codes: np.ndarray, scales: np.ndarray, moved: Any,
                     repeat_of: int | None) -> None:
        """A write the kernel made to its input, and a second call that gave other bytes than the first."""
        t = self.tally
        if moved is not None:
            changed, before, after = moved
            t.add("in_place", changed, (0, -1, t.cases), Divergence(
                category="in_place", input_hex=f"0x{before:08x}", expected_hex=f"0x{before:08x}",
                actual_hex=f"0x{after:08x}", input_dtype="float32",
                input_value=repr(float(np.uint32(before).view(np.float32))),
                expected_value=repr(float(np.uint32(before).view(np.float32))),
                actual_value=repr(float(np.uint32(after).view(np.float32))),
                detail=f"the kernel wrote {changed:,} elements of its input ({case!r})", condition=repr(case)))
        if repeat_of is not None and repeat_of in self.outputs:
            c0, s0 = self.outputs[repeat_of]
            differ = int(np.count_nonzero(c0.reshape(-1) != codes.reshape(-1)))
            with np.errstate(invalid="ignore"):
                sdiff = int(np.count_nonzero(~((s0 == scales) | (np.isnan(s0) & np.isnan(scales)))))
            if differ or sdiff:
                t.add("nondeterministic", differ + sdiff, (0, -1, t.cases), Divergence(
                    category="nondeterministic", input_hex="-", expected_hex="-", actual_hex="-",
                    input_dtype=case.dtype,
                    detail=f"a second call on an identical copy of {case!r} gave {differ:,} other codes and "
                           f"{sdiff:,} other scales", condition=repr(case)))


def run_quantizer_check(kernel: Callable[..., Any], options: QuantizerOptions) -> CheckResult:
    """The phases of a quantizer's check, in order (edge cases, Hypothesis draws, the harness's calls, the
    huge calls), then its result; a fault of the device ends the phases at the call that made it."""
    run = QuantizerRun(kernel, options)
    device_faults.require_usable(options.device, f"{options.name} on {options.device}")
    huge_note, fault = "", None
    try:
        base_cases = _edge_phase(run)
        if options.max_examples > 0:
            _run_hypothesis(options.recipe, run.one, options.max_examples, options.seed, options.dtypes)
        _harness_phase(run, base_cases)
        _previous_call_phase(run)
        if run.tally.cases == 0 and run.tally.refusals:
            raise KernelError(run.tally.refusals[0].error)
        if options.harness and options.args is None and options.precast is None:
            huge_note = _huge_calls(run)
    except device_faults.DeviceFaultError as exc:
        fault = dataclasses.replace(exc.fault, kernel=options.name)
    return _quantizer_result(run, huge_note, fault)


def _edge_phase(run: QuantizerRun) -> list[QuantCase]:
    """The targeted edge cases of :mod:`.edge_cases` (or the caller's own cases); returns them."""
    o = run.options
    base_cases = list(o.cases) if o.cases is not None else (edge_cases(o.recipe) if o.edge else [])
    for case in base_cases:
        run.one(case)
    return base_cases


def _harness_phase(run: QuantizerRun, base_cases: list[QuantCase]) -> None:
    """The calls of :func:`harness_cases`, the large one again on an identical copy: the same bytes."""
    o = run.options
    if not o.harness:
        return
    extra_cases = harness_cases(o.recipe, base_cases, device=o.device, seed=o.seed or 0)
    for case in extra_cases:
        run.one(case)
    if extra_cases:
        large_index = run.tally.cases - 1
        last = extra_cases[-1]
        run.one(dataclasses.replace(last, condition=f"{last.condition}, called again on an identical copy"),
                repeat_of=large_index)


PREVIOUS_CALL_FACTOR = 2.0  # a power of two: every amax-derived scale changes by it exactly, every code stays


def _previous_call_phase(run: QuantizerRun) -> None:
    """With the harness: two calls of one shape back to back on other data (the second's input is the
    first's times :data:`PREVIOUS_CALL_FACTOR`), then the second again on an identical copy. A kernel whose
    scale or codes depend on its previous call (a cached amax, a scale buffer of the last batch) diverges on
    the second call and not on the third: its divergences say so."""
    o, t = run.options, run.tally
    if not o.harness:
        return
    g = o.recipe.granularity
    rows, cols = (2 * g.rows, 2 * g.cols) if g.kind == "block" else (8, 64)
    offsets = None
    if o.recipe.grouped:  # two groups, neither empty (an empty group's scale does not move with its data)
        length = cols if g.kind == "group_rowwise" else rows
        offsets = np.array([length // 2, length], dtype=np.int64)
    x = to_dtype((np.random.default_rng(o.seed or 0).standard_normal((rows, cols)) * 3).astype(np.float32),
                 o.dtypes[0])
    first = QuantCase("previous call", x, o.dtypes[0], offsets, condition=f"only for shape ({rows}, {cols})")
    second = dataclasses.replace(first, x=x * np.float32(PREVIOUS_CALL_FACTOR),
                                 condition="only for a call right after another of the same shape on other data")
    run.one(first)
    number, n_found, before = t.cases, len(t.found), dict(t.counts)
    run.one(second)
    after_second, n_second = dict(t.counts), len(t.found)
    run.one(dataclasses.replace(second, condition=f"only for shape ({rows}, {cols}), called again on an identical "
                                                  "copy of the previous call's input"))
    if not {number, number + 1} <= run.outputs.keys() or after_second == before or t.counts != after_second:
        return  # not both made, or the second right, or the third wrong too: no dependence shown
    for f in t.found[n_found:n_second]:
        f.key = (0, *f.key[1:])  # listed first: it names the cause of what other calls of the shape show
        what = {"scale": "scale depends", "codes": "codes depend"}.get(f.divergence.category, "output depends")
        f.divergence = dataclasses.replace(f.divergence, detail=(
            f"the kernel's {what} on its previous call: right after a call on this input / "
            f"{PREVIOUS_CALL_FACTOR:g} it diverges, called again on an identical copy it gives the recipe's "
            f"bytes; {f.divergence.detail}"))


def _quantizer_result(run: QuantizerRun, huge_note: str, fault: Any) -> CheckResult:
    o, t, r = run.options, run.tally, run.options.recipe
    result = CheckResult(
        kernel=o.name,
        format=r.format.name,
        profile=r.profile.name,
        passed=t.passed,
        checked=int(t.checked),
        categories={c: n for c, n in t.counts.items() if n or c in QUANTIZE_CATEGORIES},
        divergences=t.listed(o.cap, QUANTIZE_CATEGORIES + CALL_CATEGORIES),
        kind="quantize",
        input_dtype=",".join(sorted(t.dtypes)) or "float32",
        device=o.device,
        seed=o.seed,
        command=(f"fp8check check {o.name} --kind quantize --recipe {r.name} --format {r.format.name}"
                 + (f" --profile {r.profile.name}" if o.profile_given else "")
                 + (f" --ulps {o.ulps}" if o.ulps else "")
                 + f" --max-examples {o.max_examples}" + (f" --seed {o.seed}" if o.seed is not None else "")),
        refusals=t.refusals,
        extra={
            "recipe": r.to_dict(),
            "recipe_summary": r.summary(),
            "cases": t.cases,
            "hazards": run.hazards.to_list(),
            "blast_radius": run.hazards.blast_radius(),
            "ulps": o.ulps,
        },
    )
    if run.exact:
        tallied = exactness.count(np.concatenate(run.exact))
        result.extra["exactness"] = tallied.to_dict()
        if tallied.kernel_exact:
            result.add_note(
                f"{tallied.kernel_exact:,} of {t.counts['codes']:,} codes divergences have the kernel's code the "
                f"correctly rounded {'x * scale' if r.element_op == 'multiply' else 'x / scale'} where the recipe's "
                f"is not: the kernel is more exact than its declared recipe ({_op_text(r.element_op)} rounded to "
                f"float32 first); declare the arithmetic it does (apply, stored) or allow it with ulps")
    if o.harness:
        result.add_note(harness.large_numel(o.device)[1])
        result.add_note(huge_note)
    run.dependent.apply(result)
    if fault is not None:
        fault.apply(result)
    return result


def _huge_calls(run: QuantizerRun) -> str:
    """The huge calls (:mod:`fp8check.casts.huge`): identical rows of a small random tile, so the expected codes
    and scales are the tile's, repeated; a note when they are not made."""
    from fp8check.casts import huge

    o, t, recipe = run.options, run.tally, run.options.recipe
    kernel, device, name, sup = run.kernel, o.device, o.name, o.supports
    counts, found, refusals = t.counts, t.found, t.refusals
    force, numel = o.huge, o.huge_numel
    g = recipe.granularity
    if g.kind not in ("tensorwise", "rowwise", "colwise", "block"):
        return "no huge calls for grouped recipes" if force is not False else ""
    if recipe.two_level:  # the per-tensor scale of a tiled input is not the tile's block scales repeated
        return "no huge calls for two-level (NVFP4) recipes yet" if force is not False else ""
    rows_per = g.rows if g.kind == "block" else 1
    cols = 4096 if g.kind != "block" else -(-4096 // g.cols) * g.cols
    calls, note = huge.plan(device, bytes_per_element=2 * 4 + 2, max_numel=sup.max_numel,
                            numel_multiple_of=math.lcm(sup.numel_multiple_of, cols * rows_per), force=force,
                            numel=numel or huge.HUGE_NUMEL, cols=max(64, g.cols if g.kind == "block" else 64),
                            row_multiple=rows_per)
    if not calls:
        return note
    import torch

    nan_tab = nan_code_table(recipe.format)
    rng = np.random.default_rng(7)
    for call in calls:
        width = call.shape[-1] if len(call.shape) == 2 else cols
        shape = call.shape if len(call.shape) == 2 else (call.numel // width, width)
        tile_np = (rng.standard_normal((rows_per, width)) * 3).astype(np.float32)
        tile_np[0, 3] = 500.0  # an element the scale maps to the format's max
        expected = quantize(tile_np, recipe)
        exp_codes = np.asarray(expected.codes, np.uint8).reshape(-1)
        exp_scales = np.asarray(expected.scales, np.float64).reshape(-1)
        tile = torch.from_numpy(tile_np).to(device)
        x = huge.tiled(tile, shape)
        where = huge.HugeCall(shape, call.what).condition()
        try:
            out = kernel(x)
            device_faults.settle(device)
            codes, scales = _outputs(out, recipe, shape, g.scale_shape(shape), name)
            codes, scales = codes.reshape(-1), scales.reshape(-1)
        except Exception as exc:  # a refusal of the huge call (a fault of the device ends the check)
            device_faults.check_call(exc, device=device, call=where.removeprefix("only for "), kernel=name)
            refusals.append(Refusal(condition=where, error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                                    declared=sup.declared and sup.allows_shape(shape)))
            continue
        finally:
            del x
        t.checked += codes.size
        t.cases += 1
        with np.errstate(invalid="ignore"):
            s_bad = np.flatnonzero(~((np.resize(exp_scales, scales.size) == scales)
                                     | (np.isnan(np.resize(exp_scales, scales.size)) & np.isnan(scales))))
        n_codes, idx = huge.compare_tiled(codes, exp_codes, lambda e, a: (e == a) | (nan_tab[e] & nan_tab[a]))
        counts["scale"] += int(s_bad.size)
        counts["codes"] += n_codes
        fv = decode(np.arange(recipe.format.code_count), recipe.format)
        if s_bad.size:
            b = int(s_bad[0])
            e, a = float(exp_scales[b % exp_scales.size]), float(scales[b])
            found.append(_Found((0, 1, t.cases), Divergence(
                category="scale", input_hex="-", expected_hex=_hex32(e), actual_hex=_hex32(a), input_dtype="float32",
                expected_value=repr(e), actual_value=repr(a),
                detail=f"{s_bad.size:,} scales differ, the first of block {b:,}", condition=where)))
        if n_codes:
            i = int(idx[0])
            xi = float(tile_np.reshape(-1)[i % exp_codes.size])
            found.append(_Found((0, 2, t.cases), Divergence(
                category="codes", input_hex=_hex32(xi), expected_hex=f"{int(exp_codes[i % exp_codes.size]):02X}",
                actual_hex=f"{int(codes[i]):02X}", input_dtype="float32", input_value=repr(xi),
                expected_value=repr(float(fv[exp_codes[i % exp_codes.size]])), actual_value=repr(float(fv[codes[i]])),
                detail=f"{n_codes:,} codes differ, the first at element {i:,} (row {i // shape[1]:,})",
                condition=where)))
    return note


def _resolve_bracketed(case: QuantCase, recipe: Recipe, outs: list[Any], op_names: tuple[str, ...], number: int,
                       tally: brackets.Tally) -> tuple[np.ndarray, np.ndarray]:
    """Codes and scales to compare when the kernel ran three times (rn, lo, hi): a scale or code that differs
    between the runs and is the recipe's in one of them is target-dependent, compared as the recipe's."""
    exp_codes, exp_scales = _expected(case, recipe)
    exp_s = exp_scales.reshape(-1)
    ce = exp_codes.reshape(-1)
    scales, dep_s = brackets.resolve(exp_s, [np.asarray(o[1], dtype=np.float64).reshape(-1) for o in outs])
    nan_tab = nan_code_table(recipe.format)
    codes, dep_c = brackets.resolve(ce, [np.asarray(o[0]).reshape(-1) for o in outs],
                                    same=lambda a, b: (a == b) | (nan_tab[a] & nan_tab[b]))
    x = case.x.reshape(-1)
    where = f"{case.name} ({case.x.shape[0]}x{case.x.shape[1]} {case.dtype})"

    def scale_example(b: int) -> Divergence:
        rn, lo, hi = (float(np.asarray(o[1], dtype=np.float64).reshape(-1)[b]) for o in outs[:3])
        return Divergence(category="target_dependent", input_hex="-", expected_hex=_hex32(exp_s[b]),
                          actual_hex=_hex32(rn), input_dtype="float32", expected_value=repr(float(exp_s[b])),
                          actual_value=repr(rn),
                          detail=f"{where}: scale of {_block_text(recipe, b, case.x.shape, case.offsets)}; "
                                 f"correctly rounded {', '.join(op_names)}: {rn!r}, low end {lo!r}, high end {hi!r}")

    def code_example(i: int) -> Divergence:
        rn, lo, hi = (int(np.asarray(o[0]).reshape(-1)[i]) for o in outs[:3])
        return Divergence(category="target_dependent", input_hex=_hex_input(x[i], case.dtype),
                          expected_hex=f"{ce[i]:02X}", actual_hex=f"{rn:02X}", input_dtype=case.dtype,
                          input_value=repr(float(x[i])),
                          detail=f"{where}: x[{i // case.x.shape[1]}, {i % case.x.shape[1]}]; correctly rounded "
                                 f"{', '.join(op_names)}: {rn:02X}, low end {lo:02X}, high end {hi:02X}")

    tally.add([("scale", number, b) for b in range(exp_s.size)], scale_example, dep_s, op_names)
    tally.add([("code", number, i) for i in range(ce.size)], code_example, dep_c, op_names)
    return codes.reshape(np.shape(outs[0][0])), scales


def _precast_values(precast: Callable[..., Any], case: QuantCase, args: tuple[Any, ...], device: str) -> np.ndarray:
    """``precast(x, *args)`` on a private copy of the case's input, as float32 values."""
    import torch

    x = torch.from_numpy(np.array(case.x, dtype=np.float32)).to(getattr(torch, case.dtype)).to(device)
    y = precast(x, *[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    y = y.detach().float().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y, dtype=np.float32)
    if y.shape != case.x.shape:
        raise KernelError(f"the pre-cast reference returned shape {y.shape} for an input of shape {case.x.shape}")
    return y.astype(np.float32)


def _run_hypothesis(recipe: Recipe, one: Callable[[QuantCase], None], max_examples: int, seed: int | None,
                    dtypes: tuple[str, ...]) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    failure: list[BaseException] = []

    @settings(max_examples=max_examples, database=None, deadline=None, derandomize=seed is None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck), print_blob=False)
    @given(quantizer_inputs(recipe, dtypes=dtypes))
    def run(case: QuantCase) -> None:
        if failure:
            return
        try:
            one(case)
        except FP8CheckError as exc:  # a kernel that cannot be called: stop, report once
            failure.append(exc)

    if seed is not None:
        run = hypothesis_seed(seed)(run)
    from fp8check.strategies import without_local_constants

    with without_local_constants():  # the same seed, the same inputs, whatever the user's modules hold
        run()
    if failure:
        raise failure[0]

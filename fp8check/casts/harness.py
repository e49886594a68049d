"""Drive a cast kernel the way real callers do.

A check that calls a kernel once, on one sorted, contiguous batch that always
holds NaN and Inf, misses the bugs that hide in how the kernel is called.
:func:`plan` turns the inputs to check (bit patterns of one input dtype) into
a list of :class:`Call` s, each a torch tensor (or NumPy array) built the way
some caller builds it:

``coverage``   every pattern, shuffled, in contiguous 1-D calls whose sizes
               are multiples of 1024 (no tail): the plain case every other
               call is judged against.
``size``       1 element, small odd sizes, every remainder mod 16, and for
               the block sizes 32..1024 the remainders 1, B/2 - 1, B/2 + 1
               and B - 1, a few primes: the tail of a blocked or vectorised
               kernel, with hazard patterns placed at the tail.
``shape``      2-D, 3-D and 4-D contiguous tensors.
``layout``     transposed, strided (every other column), sliced with a
               storage offset (1-D and 2-D), channels-last 4-D.
``content``    batches that are all finite, all finite within the format's
               range, all finite and non-negative, all of magnitude at most
               1: the fast paths a kernel takes when it can rule out NaN,
               Inf, overflow or negatives.
``large``      one tensor of 2^22 elements (2^26 on a GPU; 2^18 while Triton
               kernels run in its interpreter, which costs milliseconds per
               program) of tiled patterns, for paths taken only for large
               inputs, called twice: the second call on an identical copy
               must give the same bytes.
``refill``     a size call's tensor again, right after that call, its
               contents replaced in place by other patterns: a kernel that
               caches by address or shape (even one entry) returns stale
               codes.

Every pattern in a non-coverage call is also in a coverage call, so a
pattern that diverges only there diverges *because of* that call's shape,
layout, size or content: the divergence records the call as its condition.
Around every call the input's bytes are compared before and after (a change
is an ``in_place`` divergence), and an exception is a refusal, recorded with
the call and the error, while every other call still runs. A fault of the
device (:mod:`fp8check.device_faults`; the device is synchronised after
every call, so the fault is its own call's) is the last call made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fp8check import device_faults, inputs

__all__ = ["Call", "Supports", "Outcome", "plan", "run", "layout_base", "to_torch", "mutation", "large_numel",
           "LARGE_CPU", "LARGE_GPU", "LARGE_INTERPRETED"]

LARGE_CPU = 1 << 22
LARGE_GPU = 1 << 26
# Triton's interpreter runs each program in Python (about 3-10 ms each): 2^22
# elements are 1,024-4,096 programs per call. 2^18 still launches 64-256 of them.
LARGE_INTERPRETED = 1 << 18
_COVERAGE_CHUNK = 1 << 16  # coverage calls: 64 Ki elements, a multiple of every block size here
_CONTENT_BATCH = 1 << 14


@dataclass(frozen=True)
class Supports:
    """The domain a kernel's author declares: calls outside it are not tried,
    a refusal inside it is a divergence. The default declares nothing."""

    input_dtypes: tuple[str, ...] | None = None
    contiguous_only: bool = False
    numel_multiple_of: int = 1
    max_numel: int | None = None
    k_multiple_of: int = 1  # GEMMs: the K the kernel takes (block-scaled kernels that do not mask a K tail)

    def allows(self, call: Call) -> bool:
        if self.input_dtypes is not None and call.dtype not in self.input_dtypes:
            return False
        return self.allows_shape(call.shape, call.layout)

    def allows_shape(self, shape: tuple[int, ...], layout: str = "contiguous") -> bool:
        numel = int(np.prod(shape))
        if self.contiguous_only and layout != "contiguous":
            return False
        if numel % self.numel_multiple_of:
            return False
        return self.max_numel is None or numel <= self.max_numel

    @property
    def declared(self) -> bool:
        return self != Supports()


@dataclass
class Call:
    """One call of the kernel: an input tensor built like some caller builds it."""

    number: int
    kind: str  # coverage, size, shape, layout, content, large, repeat, refill
    dtype: str
    shape: tuple[int, ...]
    layout: str  # contiguous, transposed, strided, offset, channels_last
    bits: np.ndarray  # the logical input, as bit patterns in the call's shape
    note: str = ""
    strides: tuple[int, ...] = ()
    offset: int = 0
    repeat_of: int | None = None  # repeat: the call whose codes must be reproduced

    @property
    def numel(self) -> int:
        return int(self.bits.size)

    def describe(self) -> str:
        """``'float32 input of shape (64, 33), transposed (strides (1, 64)), call 12'``."""
        where = f"{self.dtype} input of shape {self.shape}"
        if self.layout != "contiguous":
            where += f", {self.layout.replace('_', '-')}"
            if self.strides:
                where += f" (strides {self.strides}" + (f", storage offset {self.offset}" if self.offset else "") + ")"
        if self.note:
            where += f", {self.note}"
        return f"{where}, call {self.number}"

    def condition(self) -> str:
        """The condition a divergence seen only in this call needs, in words."""
        what = {
            "size": f"only when the input has {self.numel:,} elements",
            "shape": f"only for a {len(self.shape)}-D input",
            "layout": "only for non-contiguous input" if self.layout != "offset" or self.strides
            else "only for input with a storage offset",
            "content": f"only when the whole input is {self.note}",
            "large": f"only for a large input ({self.numel:,} elements)",
            "repeat": "only on a repeated call",
            "refill": "only when the same tensor is called again with new contents",
        }.get(self.kind, "")
        return f"{what}: {self.describe()}" if what else ""


@dataclass
class Outcome:
    """What one call gave: codes in the call's logical order, or the error it raised."""

    call: Call
    codes: np.ndarray | None = None
    error: str = ""
    mutated: tuple[int, int, int] | None = None  # (elements changed, first before, first after) bits
    skipped: bool = False  # outside the declared domain: not tried
    fault: Any = None  # a fault of the device (fp8check.device_faults.DeviceFault): the last call made


def large_numel(device: str = "cpu", *, gpu: int = LARGE_GPU, cpu: int = LARGE_CPU) -> tuple[int, str]:
    """The size of the large call on ``device`` and, when it is smaller than
    usual because Triton kernels run in its interpreter now, why (else "")."""
    usual = gpu if device != "cpu" else cpu
    if device == "cpu" and _triton_interpreting() and usual > LARGE_INTERPRETED:
        return LARGE_INTERPRETED, (f"the large call has {LARGE_INTERPRETED:,} elements, not {usual:,}: Triton "
                                   f"kernels run in its interpreter here (a compiled run checks the full size)")
    return usual, ""


def _triton_interpreting() -> bool:
    import sys

    if "triton" not in sys.modules:  # nothing can launch a Triton kernel
        return False
    from fp8check.triton import interpreter_active

    return interpreter_active()


def _sizes() -> list[int]:
    sizes = {1, 2, 3, 5, 7, 13, 31, 97}
    sizes.update(16 * 7 + r for r in range(1, 16))  # every remainder mod 16
    for block in (32, 64, 128, 256, 512, 1024):
        sizes.update(2 * block + r for r in (1, block // 2 - 1, block // 2 + 1, block - 1))
    sizes.update((997, 4099, 65537))
    return sorted(sizes)


_REFILLED = 2 * 512 + 511  # the size whose tensor the refill call reuses
_SHAPES = ((37, 129), (3, 17, 41), (2, 3, 5, 7))


def _pick(rng: np.random.Generator, pool: np.ndarray, hazards: np.ndarray, n: int) -> np.ndarray:
    """``n`` patterns from ``pool``, the last ones hazards (a kernel's tail is where they matter most)."""
    out = pool[rng.integers(0, pool.size, n)] if pool.size else np.zeros(n, pool.dtype)
    if hazards.size:
        k = min(n, 64)
        out[n - k:] = hazards[rng.integers(0, hazards.size, k)]
    return out


def _content_pools(bits: np.ndarray, hz: np.ndarray, dtype: str,
                   fmt: Any) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(what the batch holds, its patterns, its hazard patterns) for each content batch."""

    def masks(b: np.ndarray) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            v = inputs.from_bits(b, dtype).astype(np.float64)
        finite = np.isfinite(v)
        return [finite, finite & (np.abs(v) <= float(fmt.max)), finite & ~np.signbit(v), finite & (np.abs(v) <= 1.0)]

    notes = ("finite (no NaN or Inf)", f"finite and within ±{float(fmt.max):g} (no overflow)",
             "finite and non-negative", "of magnitude at most 1")
    return [(note, bits[m], hz[mh]) for note, m, mh in zip(notes, masks(bits), masks(hz)) if m.any()]


def plan(bits: np.ndarray, hazard_bits: np.ndarray, dtype: str, fmt: Any, *, seed: int = 0, device: str = "cpu",
         thorough: bool = True, max_numel: int | None = None) -> list[Call]:
    """The calls that check ``bits`` (unique patterns of ``dtype``) as real callers call a cast kernel.

    ``hazard_bits``: the hazard patterns among them, placed at the tails of
    the size calls and favoured in the content batches. ``thorough=False``
    plans the coverage calls alone. ``max_numel``: the largest input the
    kernel's author declares it takes (the large call shrinks to it).
    """
    rng = np.random.default_rng(seed)
    bdt = inputs.bits_dtype(dtype)
    bits = np.asarray(bits).astype(bdt)
    hz = inputs.unique(np.asarray(hazard_bits).astype(bdt))  # a subset of bits
    calls: list[Call] = []

    def add(kind: str, arr: np.ndarray, layout: str = "contiguous", note: str = "", **kw: Any) -> Call:
        call = Call(number=len(calls) + 1, kind=kind, dtype=dtype, shape=tuple(arr.shape), layout=layout,
                    bits=arr, note=note, **kw)
        calls.append(call)
        return call

    shuffled = bits[rng.permutation(bits.size)]
    # Coverage: multiples of 1024 elements; the remainder is topped up with
    # patterns already covered so that no coverage call has a tail.
    n = shuffled.size
    padded = -(-n // 1024) * 1024
    if padded > n:
        shuffled = np.concatenate([shuffled, shuffled[rng.integers(0, n, padded - n)]])
    chunk = _COVERAGE_CHUNK if max_numel is None else max(1024, min(_COVERAGE_CHUNK, int(max_numel) // 1024 * 1024))
    for start in range(0, shuffled.size, chunk):
        add("coverage", shuffled[start:start + chunk])
    if not thorough or bits.size == 0:
        return calls
    for size in _sizes():
        call = add("size", _pick(rng, bits, hz, size))
        if size == _REFILLED:  # next call: the same tensor, refilled (a one-entry cache sees it too)
            add("refill", _pick(rng, bits, hz, size), note=f"the tensor of call {call.number} refilled",
                repeat_of=call.number)
    for shape in _SHAPES:
        add("shape", _pick(rng, bits, hz, int(np.prod(shape))).reshape(shape))
    for layout, shape in (("transposed", (64, 129)), ("strided", (64, 67)), ("offset", (4099,)),
                          ("offset", (65, 131)), ("channels_last", (2, 8, 9, 11))):
        add("layout", _pick(rng, bits, hz, int(np.prod(shape))).reshape(shape), layout=layout)
    for note, pool, pool_hz in _content_pools(bits, hz, dtype, fmt):
        add("content", _pick(rng, pool, pool_hz, min(_CONTENT_BATCH, max(1024, pool.size))), note=note)
    large = large_numel(device)[0]
    if max_numel is not None:
        large = min(large, int(max_numel))
    first = add("large", np.resize(shuffled, large))
    add("repeat", first.bits, note=f"an identical copy of call {first.number}", repeat_of=first.number)
    return calls


# -- building the tensors -------------------------------------------------------------


def _numpy_base(call: Call) -> tuple[np.ndarray, Callable[[Any], Any]]:
    return layout_base(inputs.from_bits(call.bits.reshape(-1), call.dtype).reshape(call.shape), call.layout)


def layout_base(x: np.ndarray, layout: str) -> tuple[np.ndarray, Callable[[Any], Any]]:
    """A contiguous base array holding ``x`` and a view function that gives ``x`` back with ``layout``
    (the same function works on NumPy arrays and torch tensors made from the base)."""
    if layout == "contiguous":
        return np.ascontiguousarray(x), lambda b: b
    if layout == "transposed":  # logical (m, n) stored as (n, m)
        return np.ascontiguousarray(x.T), lambda b: b.T if hasattr(b, "T") else b
    # The storage around a view holds a large finite value, not zeros: a kernel that reads
    # past the view (ignores strides, takes the amax of the whole storage) then diverges.
    if layout == "strided":  # every other column of a (m, 2n) buffer
        m, n = x.shape
        base = _padding((m, 2 * n), x.dtype)
        base[:, ::2] = x
        return base, lambda b: b[:, ::2]
    if layout == "offset":
        if x.ndim == 1:  # a slice starting 3 elements into its storage
            base = _padding((x.size + 3,), x.dtype)
            base[3:] = x
            return base, lambda b: b[3:]
        m, n = x.shape  # rows 1.. and columns 3.. of a larger matrix
        base = _padding((m + 1, n + 3), x.dtype)
        base[1:, 3:] = x
        return base, lambda b: b[1:, 3:]
    if layout == "channels_last":  # NCHW values stored NHWC
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1)), _nhwc_to_nchw
    raise ValueError(f"unknown layout {layout!r}")


def _padding(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A buffer filled with a quarter of the dtype's largest finite value."""
    import ml_dtypes

    return np.full(shape, float(ml_dtypes.finfo(dtype).max) / 4, dtype=dtype)


def _nhwc_to_nchw(b: Any) -> Any:
    return b.permute(0, 3, 1, 2) if hasattr(b, "permute") else b.transpose(0, 3, 1, 2)


def to_torch(base: np.ndarray, device: str = "cpu") -> Any:
    import torch

    if base.dtype.name == "bfloat16":
        t = torch.from_numpy(base.view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(base)
    return t if device == "cpu" else t.to(device)


def _as_int(t: Any) -> Any:
    """A bit view of a tensor or array (NaN-safe comparisons)."""
    if hasattr(t, "element_size"):
        import torch

        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t.view({2: np.int16, 4: np.int32, 8: np.int64}[t.dtype.itemsize])


def mutation(before: Any, after: Any) -> tuple[int, int, int] | None:
    a, b = _as_int(before), _as_int(after)
    if hasattr(a, "cpu"):
        import torch

        if torch.equal(a, b):  # on the tensors' device: nothing crosses to the host when nothing changed
            return None
        a, b = a.cpu().numpy(), b.cpu().numpy()
    diff = a.reshape(-1) != b.reshape(-1)
    if not diff.any():
        return None
    i = int(np.flatnonzero(diff)[0])
    width = a.dtype.itemsize * 8
    mask = (1 << width) - 1
    return int(diff.sum()), int(a.reshape(-1)[i]) & mask, int(b.reshape(-1)[i]) & mask


def run(calls: list[Call], call_kernel: Callable[[Any, Call], np.ndarray], *, use_torch: bool, device: str = "cpu",
        supports: Supports = Supports(), on_error: Callable[[BaseException, Call], str] | None = None,
        name: str = "") -> list[Outcome]:
    """Call ``call_kernel(x, call)`` on each planned call's input (a torch tensor when ``use_torch``, else a
    NumPy array) and return what each gave: codes in logical order (``call_kernel`` normalises the
    kernel's output to uint8 codes of the input's shape), the error raised, and any write to the input.
    ``name``: the kernel's, for a fault of the device."""
    outcomes: list[Outcome] = []
    kept: dict[int, Any] = {}  # tensors a later refill call reuses
    refills = {c.repeat_of for c in calls if c.kind == "refill"}
    for call in calls:
        if not supports.allows(call):
            outcomes.append(Outcome(call, skipped=True))
            continue
        if call.kind == "refill" and call.repeat_of in kept:
            base, view, x = kept[call.repeat_of]
            new_base, _ = _numpy_base(call)
            if use_torch:
                base.copy_(to_torch(new_base, device))
            else:
                base[...] = new_base
        else:
            np_base, view = _numpy_base(call)
            base = to_torch(np_base, device) if use_torch else np_base
            x = view(base)
            if call.number in refills:
                kept[call.number] = (base, view, x)
        snapshot = base.clone() if use_torch else base.copy()
        try:
            codes = call_kernel(x, call)
            device_faults.settle(device)  # a fault of this call is raised here, not by a later operation
        except Exception as exc:  # the kernel under test refused this call, or faulted on the device
            fault = device_faults.fault_of(exc, device=device, call=call.describe(), kernel=name)
            if fault is not None:  # the device is unusable: no call after this one can be made
                outcomes.append(Outcome(call, error=f"{type(exc).__name__}: {fault.error}", fault=fault))
                break
            outcomes.append(Outcome(call, error=on_error(exc, call) if on_error else f"{type(exc).__name__}: {exc}"))
            continue
        outcomes.append(Outcome(call, codes=np.asarray(codes), mutated=mutation(snapshot, base)))
    return outcomes

"""compressed-tensors: FP8 ``calculate_qparams`` + ``quantize`` (what llmcompressor's
FP8 schemes call for weights, and ``compute_dynamic_scales_and_zp`` for
dynamic per-token activations).

The adapters take amax the way compressed-tensors' callers do (``aminmax``
over the strategy's dims: the whole tensor, each row, each 128x128 block,
each group of 128), then call the package's own ``calculate_qparams`` and
``quantize`` with ``QuantizationArgs(num_bits=8, type="float",
strategy=..., symmetric=True)``. ``quantize`` dispatches to a Triton kernel
on a CUDA device of compute capability 9 or more, and to torch ops
elsewhere (``forward_helpers._quantize``): on the CPU the torch path runs.
"""

from __future__ import annotations

from typing import Any

from fp8check.zoo import KnownIssue, ZooEntry
from fp8check.zoo._adapters import example, import_package, lazy

NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"

_V = "==0.19.0"


def _args(strategy: str) -> Any:
    qa = import_package("compressed_tensors.quantization", "compressed-tensors")
    kw: dict[str, Any] = dict(num_bits=8, type="float", symmetric=True, strategy=strategy)
    if strategy == "block":
        kw["block_structure"] = [128, 128]
    if strategy == "group":
        kw["group_size"] = 128
    return qa.QuantizationArgs(**kw)


def _make(strategy: str) -> Any:
    import torch

    import_package("compressed_tensors", "compressed-tensors")
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.utils.helpers import calculate_qparams

    args = _args(strategy)

    def kernel(x: Any) -> tuple[Any, Any]:
        m, n = x.shape
        if strategy == "tensor":
            lo, hi = torch.aminmax(x)
        elif strategy == "channel":
            lo, hi = x.amin(dim=1, keepdim=True), x.amax(dim=1, keepdim=True)
        elif strategy == "group":
            g = x.unflatten(-1, (n // 128, 128))
            lo, hi = g.amin(dim=-1), g.amax(dim=-1)
        else:  # block: pad like compressed-tensors' maybe_pad_tensor_for_block_quant (zeros)
            mb, nb = -(-m // 128), -(-n // 128)
            p = torch.nn.functional.pad(x, (0, nb * 128 - n, 0, mb * 128 - m))
            b = p.view(mb, 128, nb, 128)
            lo, hi = b.amin(dim=(1, 3)), b.amax(dim=(1, 3))
        scale, zp = calculate_qparams(lo, hi, args)
        q = quantize(x, scale, zp, args, dtype=torch.float8_e4m3fn)
        return q, scale

    kernel.__name__ = f"compressed_tensors.quantize[{strategy}]"
    return kernel


def make_quantize_tensor(mode: str = "eager") -> Any:
    return _make("tensor")


def make_quantize_channel(mode: str = "eager") -> Any:
    return _make("channel")


def make_quantize_block(mode: str = "eager") -> Any:
    return _make("block")


def make_quantize_group(mode: str = "eager") -> Any:
    return _make("group")


quantize_tensor = lazy(make_quantize_tensor, "eager", "fp8check.zoo.compressed_tensors:quantize_tensor")
quantize_channel = lazy(make_quantize_channel, "eager", "fp8check.zoo.compressed_tensors:quantize_channel")
quantize_block = lazy(make_quantize_block, "eager", "fp8check.zoo.compressed_tensors:quantize_block")
quantize_group = lazy(make_quantize_group, "eager", "fp8check.zoo.compressed_tensors:quantize_group")

_CITE = ("compressed-tensors 0.19.0, quantization/utils/helpers.py calculate_qparams: symmetric scale = max(|min|, "
         "|max|) / (bit_range / 2) with bit_range = 448 - (-448), in the dtype of min/max; 'Update any 0s with small "
         "values to prevent div by 0' (eps of the scale dtype); quantization/lifecycle/forward_helpers.py _quantize: "
         "x / scale, clamp, .to(float8_e4m3fn)")

_NEG0 = ("-0.0 is quantized to +0 (0x00): quantize adds the zero point (0.0) to x / scale, and -0.0 + 0.0 = +0.0; "
         "the same in a block holding Inf (x / Inf = -0.0 for a negative x)")
_BF16 = ("bfloat16 inputs: x / scale is computed in bfloat16 and rounded before the fp8 cast (double rounding): "
         "about 3% of codes of randn weights are one step off (1.8515625 / 0.0201416015625 = 91.93 is 92 in bfloat16, "
         "an e4m3fn tie that goes to 96; the recipe's single rounding gives 88)")


def _neg0(dtype: str) -> Any:
    return lambda: example(f"-0.0 among finite values ({dtype})", [[1.0, -0.0, 0.5]], shape=(128, 128), dtype=dtype)


def _bf16() -> Any:
    return example("bfloat16 row, double rounding", [[1.8515625, 2.171875, 0.50390625, 9.0234375]], shape=(128, 128),
                   dtype="bfloat16")


ENTRIES = tuple(
    ZooEntry(
        id=f"compressed-tensors.{strategy}{'' if dtype == 'float32' else '.bf16'}",
        package="compressed-tensors", module="compressed_tensors", versions=_V,
        function=f"calculate_qparams + quantize, QuantizationArgs(num_bits=8, type='float', strategy='{strategy}')",
        kind="quantize", claims=recipe + ("" if dtype == "float32" else "-bf16"),
        citation=_CITE, adapter=f"fp8check.zoo.compressed_tensors:quantize_{strategy}",
        modes=("eager",), dtypes=(dtype,),
        known=(
            KnownIssue(summary=_NEG0, upstream=NO, categories=frozenset({"codes", "nonfinite"}), example=_neg0(dtype),
                       shown_by="a 128x128 tensor holding 1.0, -0.0, 0.5"),
        ) + ((KnownIssue(summary=_BF16, upstream=NO, categories=frozenset({"codes"}), example=_bf16,
                         shown_by="a bfloat16 row 1.8515625, 2.171875, 0.50390625, 9.0234375"),)
             if dtype == "bfloat16" else ()),
    )
    for strategy, recipe in (("tensor", "ct-tensor"), ("channel", "ct-rowwise"), ("block", "ct-block-128x128"),
                             ("group", "ct-group-128"))
    for dtype in ("float32", "bfloat16")
)

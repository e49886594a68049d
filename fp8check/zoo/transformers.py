"""transformers' fine-grained FP8 (DeepSeek-style 1x128 activations, 128x128 weights).

Where the quantizers are, by version:

- 4.57.6 ``transformers/integrations/finegrained_fp8.py``: ``act_quant`` and
  its Triton ``act_quant_kernel``, "Copied from ...DeepSeek-V3/inference/
  kernel.py" (``s = amax / 448``, ``y = x / s``); weights are quantized by
  ``FineGrainedFP8HfQuantizer.create_quantized_param``
  (``quantizers/quantizer_finegrained_fp8.py``: ``scale = 448 / amax``,
  ``clamp(x * scale)``, ``weight_scale_inv = scale.reciprocal()``).
- 5.x (checked: 5.17.0) moved the Triton kernels to the Hub
  (``kernels-community/finegrained-fp8``, loaded at run time through the
  ``kernels`` package: not reachable here, and downloaded code in any
  case); the weight quantizer is ``Fp8Quantize._quantize_one`` in
  ``integrations/finegrained_fp8.py`` (torch ops; an all-zero block is
  "kept stable" with scale 1; shapes that are not a multiple of the block
  are passed through unquantized).
"""

from __future__ import annotations

import types
from typing import Any

from fp8check.zoo import KnownIssue, ZooEntry, ZooUnavailable
from fp8check.zoo._adapters import example, import_package, lazy
from fp8check.zoo._triton import mode_context, require_mode

NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"

INTEGRATION = "transformers.integrations.finegrained_fp8"


def make_fp8_quantize_weight(mode: str = "eager") -> Any:
    """5.x: ``Fp8Quantize(hf_quantizer)._quantize_one("w.weight", x)`` with the default
    ``FineGrainedFP8Config()`` (block 128x128, ``scale_fmt="float"``)."""
    m = import_package(INTEGRATION, "transformers")
    if not hasattr(m, "Fp8Quantize"):
        import transformers

        raise ZooUnavailable(f"transformers {transformers.__version__} has no Fp8Quantize (it is in 5.x)")
    from transformers.utils.quantization_config import FineGrainedFP8Config

    op = m.Fp8Quantize(types.SimpleNamespace(quantization_config=FineGrainedFP8Config()))

    def kernel(x: Any) -> tuple[Any, Any]:
        out = op._quantize_one("w.weight", x)
        return out["w.weight"], out["w.weight_scale_inv"]

    kernel.__name__ = "transformers.Fp8Quantize._quantize_one"
    return kernel


def make_create_quantized_param(mode: str = "eager") -> Any:
    """4.x: ``FineGrainedFP8HfQuantizer.create_quantized_param`` on a one-layer model."""
    import torch

    m = import_package(INTEGRATION, "transformers")
    if not hasattr(m, "act_quant"):
        import transformers

        raise ZooUnavailable(f"transformers {transformers.__version__} quantizes weights with Fp8Quantize "
                             "(entry transformers.fp8_quantize_weight), not create_quantized_param")
    qmod = import_package("transformers.quantizers.quantizer_finegrained_fp8", "transformers")
    from transformers.utils.quantization_config import FineGrainedFP8Config

    quantizer = qmod.FineGrainedFP8HfQuantizer(FineGrainedFP8Config())
    quantizer.pre_quantized = False  # quantize a high-precision weight on load

    import transformers.modeling_utils as modeling_utils

    def kernel(x: Any) -> tuple[Any, Any]:
        # The values it loads into the model are recorded as they are handed over: loading
        # them raises for a weight with one block row or column (the scale's squeeze(), see
        # tests/zoo), and the numbers are what is checked here.
        model = torch.nn.Module()
        model.lin = m.FP8Linear(x.shape[1], x.shape[0], bias=False, block_size=(128, 128), device="cpu")
        loaded: dict[str, Any] = {}
        saved = modeling_utils._load_parameter_into_model
        modeling_utils._load_parameter_into_model = lambda _m, name, t: loaded.__setitem__(name, t)
        try:
            quantizer.create_quantized_param(model, x, "lin.weight", torch.device("cpu"))
        finally:
            modeling_utils._load_parameter_into_model = saved
        return loaded["lin.weight"], loaded["lin.weight_scale_inv"]

    kernel.__name__ = "transformers.FineGrainedFP8HfQuantizer.create_quantized_param"
    return kernel


def load_quantized_param(x: Any) -> tuple[Any, Any]:
    """4.x ``create_quantized_param`` as it runs, loading into the model (no recording)."""
    import torch

    m = import_package(INTEGRATION, "transformers")
    qmod = import_package("transformers.quantizers.quantizer_finegrained_fp8", "transformers")
    from transformers.utils.quantization_config import FineGrainedFP8Config

    quantizer = qmod.FineGrainedFP8HfQuantizer(FineGrainedFP8Config())
    quantizer.pre_quantized = False
    model = torch.nn.Module()
    model.lin = m.FP8Linear(x.shape[1], x.shape[0], bias=False, block_size=(128, 128), device="cpu")
    quantizer.create_quantized_param(model, x, "lin.weight", torch.device("cpu"))
    return model.lin.weight.data, model.lin.weight_scale_inv.data


def make_act_quant(mode: str = "faithful:sm90") -> Any:
    """4.x: ``act_quant(x, 128)`` (Triton ``act_quant_kernel``)."""
    require_mode(mode)
    m = import_package(INTEGRATION, "transformers")
    if not hasattr(m, "act_quant"):
        import transformers

        raise ZooUnavailable(f"transformers {transformers.__version__} has no act_quant: its Triton kernels "
                             "are loaded from the Hub (kernels-community/finegrained-fp8) at run time")

    def kernel(x: Any) -> tuple[Any, Any]:
        with mode_context(mode):
            return m.act_quant(x.contiguous(), 128)

    kernel.__name__ = f"transformers.act_quant[{mode}]"
    return kernel


fp8_quantize_weight = lazy(make_fp8_quantize_weight, "eager", "fp8check.zoo.transformers:fp8_quantize_weight")
create_quantized_param = lazy(make_create_quantized_param, "eager", "fp8check.zoo.transformers:create_quantized_param")
act_quant = lazy(make_act_quant, "faithful:sm90", "fp8check.zoo.transformers:act_quant")
act_quant_interpret = lazy(make_act_quant, "interpret", "fp8check.zoo.transformers:act_quant_interpret")
act_quant_compiled = lazy(make_act_quant, "compiled", "fp8check.zoo.transformers:act_quant_compiled")

_W = (128, 128)  # one weight block


def _w(name: str, values: list[float], dtype: str = "float32") -> Any:
    return lambda: example(name, [values], shape=_W, dtype=dtype)


_SCALE_INV = ("weight_scale_inv is stored as 1/(448/amax) (two roundings), not amax/448: 1 ulp off on about a "
              "quarter of blocks (amax uniform in [1, 2): 27%; amax 1.1875: 0.00265066 vs 0.00265067); the codes use "
              "448/amax")

ENTRIES = (
    ZooEntry(
        id="transformers.fp8_quantize_weight",
        package="transformers", module=INTEGRATION, versions="==5.17.0",
        function="integrations.finegrained_fp8.Fp8Quantize._quantize_one (FineGrainedFP8Config(), 128x128)",
        kind="quantize", claims="transformers-fp8-weight",
        citation="transformers 5.17.0, integrations/finegrained_fp8.py Fp8Quantize._quantize_one: 'We store inverse "
                 "scale to match the upstream weight_scale_inv convention' (DeepSeek-V3: dequant = code * "
                 "weight_scale_inv, weight_scale_inv = amax/448); 'keep zeros stable' (scale 1 for an all-zero block)",
        adapter="fp8check.zoo.transformers:fp8_quantize_weight",
        modes=("eager",),
        known=(
            KnownIssue(summary=_SCALE_INV, upstream=NO, categories=frozenset({"scale"}),
                       example=_w("128x128 block, amax 1.1875", [1.1875, 0.5]), shown_by="a 128x128 block with amax 1.1875"),
            KnownIssue(summary="a block with 0 < amax < 448/FLT_MAX (~1.3e-36) gets scale 448/amax = Inf: "
                               "weight_scale_inv 0 and every zero of the block a NaN code (only amax == 0 is guarded)",
                       upstream=NO, categories=frozenset({"scale"}),
                       example=_w("128x128 block, amax 1e-37", [1e-37]), shown_by="a 128x128 block with amax 1e-37"),
            KnownIssue(summary="a block holding NaN gets weight_scale_inv 1.0 (torch.where(max_abs > 0) is false for "
                               "NaN), the recipe NaN", upstream=NO, categories=frozenset({"nonfinite"}),
                       example=_w("128x128 block holding NaN", [1.0, float("nan")]),
                       shown_by="a 128x128 block holding 1.0 and NaN"),
        ),
        note="shapes that are not a multiple of 128 are returned unquantized (checked on multiples only)",
    ),
    ZooEntry(
        id="transformers.create_quantized_param",
        package="transformers", module=INTEGRATION, versions="==4.57.6",
        function="quantizers.quantizer_finegrained_fp8.FineGrainedFP8HfQuantizer.create_quantized_param (128x128)",
        kind="quantize", claims="transformers-fp8-weight",
        citation="transformers 4.57.6, quantizers/quantizer_finegrained_fp8.py create_quantized_param: scale = "
                 "fp8_max / max_abs, clamp(x * scale), weight_scale_inv = scale.reciprocal() (DeepSeek-V3 convention)",
        adapter="fp8check.zoo.transformers:create_quantized_param",
        modes=("eager",),
        known=(
            KnownIssue(summary="an all-zero block gets scale 448/0 = Inf: weight_scale_inv 0 and NaN codes (fixed in "
                               "5.x: 'keep zeros stable')", upstream=NO + "; fixed in transformers 5.x Fp8Quantize",
                       categories=frozenset({"scale"}), example=_w("all-zero 128x128 block", [0.0]),
                       shown_by="an all-zero 128x128 block"),
            KnownIssue(summary=_SCALE_INV, upstream=NO, categories=frozenset({"scale"}),
                       example=_w("128x128 block, amax 1.1875", [1.1875, 0.5]), shown_by="a 128x128 block with amax 1.1875"),
            KnownIssue(summary="bfloat16 weights are scaled in bfloat16: 448/amax, x * scale and the reciprocal are "
                               "each rounded to bfloat16 (scale_inv off by up to 2^-9 relative; codes double-rounded)",
                       upstream=NO, categories=frozenset({"scale", "codes"}),
                       example=_w("bfloat16 128x128 block, amax 3", [3.0, 1.3, -0.7], "bfloat16"),
                       shown_by="a bfloat16 128x128 block with amax 3"),
        ),
    ),
    ZooEntry(
        id="transformers.act_quant",
        package="transformers", module=INTEGRATION, versions="==4.57.6",
        function="integrations.finegrained_fp8.act_quant(x, 128) -> act_quant_kernel (Triton)",
        kind="quantize", claims="deepseek-v3-act",
        citation="transformers 4.57.6, integrations/finegrained_fp8.py: '# Copied from https://huggingface.co/"
                 "deepseek-ai/DeepSeek-V3/blob/main/inference/kernel.py' act_quant_kernel: s = max|x| / 448, y = x / s",
        adapter="fp8check.zoo.transformers:act_quant",
        modes=("faithful:sm90", "interpret", "compiled"),
        known=(
            KnownIssue(summary="a block holding NaN gets the scale of its finite values (tl.max ignores NaN), where "
                               "the recipe (DeepSeek's torch semantics) gives a NaN scale; the NaN element stays NaN",
                       upstream=NO, categories=frozenset({"nonfinite"}),
                       modes=frozenset({"faithful:sm90", "interpret", "compiled"}),
                       example=lambda: example("1x128 group holding NaN", [[3.5, float("nan"), 1.0]]),
                       shown_by="a 1x128 group holding 3.5, NaN, 1.0"),
            KnownIssue(summary="compiled for NVIDIA, Triton's float32 `/` is div.full.f32 (within 2 ulp, not "
                               "correctly rounded): amax / 448 comes out 1 ulp off for some amax (253952 / 448: "
                               "0x440DB6DC, the correctly rounded 0x440DB6DB), and x / s can move a code at a "
                               "rounding boundary. Measured on an H200 (Triton 3.6); the faithful interpreter computes "
                               "amax / 448.0 as the H200 does (amax * fl(1/448)) and reports the x / s codes that "
                               "depend on div.full.f32 as target-dependent",
                       upstream="triton-lang/triton#10661", categories=frozenset({"scale", "codes"}),
                       modes=frozenset({"compiled", "faithful:sm90"}),
                       example=lambda: example("1x128 group, amax 253952", [[253952.0, 1.0, -3.0]]),
                       shown_by="a 1x128 group with amax 253952 (scale 566.857...: 1 ulp off)"),
            KnownIssue(summary="the Triton interpreter's own fp8 conversions (ties away, lost carry; an all-zero "
                               "block's NaN codes come out as -384)",
                       upstream="triton-lang/triton#8322", categories=frozenset({"codes", "scale", "nonfinite"}),
                       modes=frozenset({"interpret"}), interpreter_only=True,
                       example=lambda: example("1x128 group, a tie", [[448.0, 400.0, 3.0]]),
                       shown_by="400 in a group with amax 448 (scale 1; a tie between 384 and 416: RNE 384, the "
                                "interpreter 416)"),
        ),
    ),
)

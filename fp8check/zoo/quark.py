"""AMD Quark (amd-quark 0.13): its FP8 casts, its FP8 quantizer (observer +
real quantization, what ``export_safetensors`` writes) and its two
e4m3fn -> e4m3fnuz conversions.

- ``quark/torch/kernel/hw_emulation/hw_emulation_interface.py``:
  ``quant_fp8_e4m3(x) = clamp(x, -448, 448).to(float8_e4m3fn)`` and
  ``quant_fp8_e5m2`` likewise with 57344 (profile ``satfinite``);
  ``real_quantize_fp8_per_tensor_with_scale``: ``clamp(x / scale).to(fp8)``;
  ``real_quantize_fp8_per_channel_with_scale``: the same after
  ``scale.to(inputs.dtype)``.
- ``quark/torch/quantization/observer/observer.py``: ``PerTensorMinMaxObserver``
  / ``PerChannelMinMaxObserver`` record ``aminmax``;
  ``calculate_fp8_quant_parameters`` -> ``get_scale(scale_format="float32")``:
  ``amax.to(scale_torch_dtype)`` (the model's dtype when the spec gives no
  ``scale_type``: ``FP8E4M3PerTensorSpec``; float32 for
  ``FP8E4M3PerChannelSpec``, whose ``scale_type`` is ``"float"``),
  ``amax / 448``, a zero scale replaced by float32's eps (2^-23).
- ``quark/torch/utils/device.py`` ``e4m3fn_to_e4m3fnuz`` (applied only where
  ``torch.version.hip`` is set): a numeric conversion, fn -> float16, ``/ 2``,
  ``clamp(+-224)``, ``.to(float8_e4m3fnuz)``, scale x 2;
  ``quark/torch/export/nn/modules/qparamslinear.py``
  ``normalize_e4m3fn_to_e4m3fnuz`` (``QParamsLinear`` on ROCm): the bytes
  reinterpreted, -128 (0x80) set to 0, scales x 2.

amd-quark 0.13 is pure Python (2.6 MB) and imports on a CPU beside torch
2.13 (its first import compiles C++ kernels; every import takes about a
minute here, so its tests are ``slow``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

from fp8check.zoo import KnownIssue, ZooEntry
from fp8check.zoo._adapters import example, import_package, lazy

NO = "no upstream issue found (searched the issues corpus, 2026-12-01)"
HW = "quark.torch.kernel.hw_emulation.hw_emulation_interface"
_V = "==0.13"


def _cast_kernel(op: str, fmt: str) -> Any:
    import torch

    from fp8check import formats, profiles
    from fp8check.casts.adapters import CastKernel

    m = import_package(HW, "amd-quark")
    fn = getattr(m, op)

    def to_torch(x: np.ndarray) -> Any:
        if x.dtype.name == "bfloat16":
            return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(x))

    return CastKernel(name=f"quark.{op}", description=f"amd-quark {op}: clamp then .to()",
                      claims=profiles.get("satfinite"), formats=(formats.get(fmt),),
                      input_dtypes=("float32", "float16", "bfloat16"),
                      cast_fn=lambda x, f: fn(to_torch(x)), builtin=False)


def make_quant_fp8_e4m3(mode: str = "eager") -> Any:
    return _cast_kernel("quant_fp8_e4m3", "e4m3fn")


def make_quant_fp8_e5m2(mode: str = "eager") -> Any:
    return _cast_kernel("quant_fp8_e5m2", "e5m2")


def quant_fp8_e4m3(x: Any) -> Any:
    """For ``fp8check check fp8check.zoo.quark:quant_fp8_e4m3 --format e4m3fn --profile satfinite``."""
    return import_package(HW, "amd-quark").quant_fp8_e4m3(x)


def quant_fp8_e5m2(x: Any) -> Any:
    return import_package(HW, "amd-quark").quant_fp8_e5m2(x)


# -- the quantizer: observer + real quantization -------------------------------------


def _quantizer(strategy: str) -> Any:
    """Quark's FP8 weight quantization for ``strategy`` ("tensor" or "channel"), as
    ``ModelQuantizer`` + ``export_safetensors`` do it for one weight."""
    import_package(HW, "amd-quark")
    from quark.torch.kernel import scaled_real_quantize
    from quark.torch.quantization.config.config import FP8E4M3PerChannelSpec, FP8E4M3PerTensorSpec

    spec = (FP8E4M3PerTensorSpec(observer_method="min_max", is_dynamic=False) if strategy == "tensor"
            else FP8E4M3PerChannelSpec(ch_axis=0, is_dynamic=False)).to_quantization_spec()

    def kernel(x: Any) -> tuple[Any, Any]:
        obs = spec.observer_cls(spec, device=x.device)
        obs(x)
        scale, zero_point = obs._calculate_qparams()
        q = scaled_real_quantize(spec.dtype.value, x, scale, zero_point, spec.ch_axis, spec.group_size,
                                 obs.quant_min, obs.quant_max, spec.round_method.value, spec.qscheme.value)
        return q, scale.reshape(-1, 1) if strategy == "channel" else scale

    kernel.__name__ = f"quark.fp8_{strategy}"
    return kernel


def make_fp8_per_tensor(mode: str = "eager") -> Any:
    return _quantizer("tensor")


def make_fp8_per_channel(mode: str = "eager") -> Any:
    return _quantizer("channel")


fp8_per_tensor = lazy(make_fp8_per_tensor, "eager", "fp8check.zoo.quark:fp8_per_tensor")
fp8_per_channel = lazy(make_fp8_per_channel, "eager", "fp8check.zoo.quark:fp8_per_channel")


# -- the fn -> fnuz conversions -------------------------------------------------------


@contextlib.contextmanager
def _on_rocm() -> Iterator[None]:
    """``torch.version.hip`` set, as on ROCm: Quark's conversion is a no-op elsewhere."""
    import torch

    saved = torch.version.hip
    torch.version.hip = saved or "6.4.0"
    try:
        yield
    finally:
        torch.version.hip = saved


def make_e4m3fn_to_e4m3fnuz(mode: str = "eager") -> Any:
    """``quark.torch.utils.e4m3fn_to_e4m3fnuz(tensor, tensor_scale)`` as on ROCm."""
    m = import_package("quark.torch.utils.device", "amd-quark")

    def kernel(codes: Any, scale: Any) -> tuple[Any, Any]:
        with _on_rocm():
            return m.e4m3fn_to_e4m3fnuz(codes.clone(), scale.clone())

    kernel.__name__ = "quark.e4m3fn_to_e4m3fnuz"
    return kernel


def make_normalize_e4m3fn_to_e4m3fnuz(mode: str = "eager") -> Any:
    """``qparamslinear.normalize_e4m3fn_to_e4m3fnuz(weight, qinput, weight_scale)``: the weight's result."""
    m = import_package("quark.torch.export.nn.modules.qparamslinear", "amd-quark")

    def kernel(codes: Any, scale: Any) -> tuple[Any, Any]:
        w, _, s, _ = m.normalize_e4m3fn_to_e4m3fnuz(codes.clone(), codes.clone(), scale.clone())
        return w, s

    kernel.__name__ = "quark.normalize_e4m3fn_to_e4m3fnuz"
    return kernel


e4m3fn_to_e4m3fnuz = lazy(make_e4m3fn_to_e4m3fnuz, "eager", "fp8check.zoo.quark:e4m3fn_to_e4m3fnuz")
normalize_e4m3fn_to_e4m3fnuz = lazy(make_normalize_e4m3fn_to_e4m3fnuz, "eager",
                                    "fp8check.zoo.quark:normalize_e4m3fn_to_e4m3fnuz")

_CITE = ("amd-quark 0.13, quark/torch/kernel/hw_emulation/hw_emulation_interface.py: {op}: inputs = torch.clamp(inputs, "
         "min=-{m}, max={m}); return inputs.to(torch.float8_{t})")
_OBS = ("amd-quark 0.13, quark/torch/quantization/observer/observer.py calculate_fp8_quant_parameters -> get_scale("
        "scale_format='float32'): amax.to(scale_torch_dtype) / 448, masked_fill(scale == 0, float32 eps); "
        "hw_emulation_interface.py real_quantize_fp8_{s}_with_scale: clamp(x / scale, +-448).to(float8_e4m3fn)")
_NAN = ("e4m3fn NaN bytes 0x7F/0xFF become fnuz +-240 (finite), not the fnuz NaN 0x80: only -128 (0x80) is rewritten "
        "(the same as vLLM's normalize_e4m3fn_to_e4m3fnuz)")


_BF16 = ("bfloat16 weights: x / scale is computed in bfloat16 and rounded before the fp8 cast (double rounding), "
         "as compressed-tensors does: 1.8515625 / 0.0201416015625 = 91.93 is 92 in bfloat16, an e4m3fn tie that goes "
         "to 96; the recipe's single rounding gives 88")


def _t(name: str, values: list[float], dtype: str = "float32") -> Any:
    return lambda: example(name, [values], shape=(4, 128), dtype=dtype)


ENTRIES = (
    ZooEntry(id="amd-quark.quant_fp8_e4m3", package="amd-quark", module=HW, versions=_V,
             function="torch.ops.quark.quant_fp8_e4m3 (hw_emulation_interface.quant_fp8_e4m3)", kind="cast",
             claims="satfinite", fmt="e4m3fn", citation=_CITE.format(op="quant_fp8_e4m3", m=448, t="e4m3fn"),
             adapter="fp8check.zoo.quark:quant_fp8_e4m3", modes=("eager",), dtypes=("float32", "bfloat16", "float16"),
             heavy=True,
             known=(KnownIssue(summary="a negative NaN keeps its sign (0xFF, torch's e4m3fn cast), the satfinite "
                                       "reference gives 0x7F: NaN either way", upstream="torch's cast (NaN sign); not "
                                       "Quark's", categories=frozenset({"nan"})),)),
    ZooEntry(id="amd-quark.quant_fp8_e5m2", package="amd-quark", module=HW, versions=_V,
             function="torch.ops.quark.quant_fp8_e5m2 (hw_emulation_interface.quant_fp8_e5m2)", kind="cast",
             claims="satfinite", fmt="e5m2", citation=_CITE.format(op="quant_fp8_e5m2", m=57344, t="e5m2"),
             adapter="fp8check.zoo.quark:quant_fp8_e5m2", modes=("eager",), dtypes=("float32", "bfloat16", "float16"),
             heavy=True,
             known=(KnownIssue(summary="NaN is encoded 0x7F/0xFF (torch's e5m2 NaN payload), the reference 0x7E/0xFE: "
                                       "a NaN payload, still NaN", upstream="torch's cast (fp8check FACTS: torch e5m2 NaN "
                                       "encoding); not Quark's", categories=frozenset({"nan"})),)),
    *(ZooEntry(id=f"amd-quark.fp8_per_{strategy}{'' if dtype == 'float32' else '.bf16'}", package="amd-quark",
               module=HW, versions=_V,
               function=f"{spec}: {obs} + scaled_real_quantize('fp8_e4m3', per_{strategy})",
               kind="quantize", claims=recipe if dtype == "float32" else f"quark-{recipe[3:]}-bf16",
               citation=_OBS.format(s=f"per_{strategy}"), adapter=f"fp8check.zoo.quark:fp8_per_{strategy}",
               modes=("eager",), dtypes=(dtype,), heavy=True,
               known=() if dtype == "float32" else (
                   KnownIssue(summary=_BF16, upstream=NO, categories=frozenset({"codes"}),
                              example=_t("bfloat16 row, double rounding", [1.8515625, 2.171875, 0.50390625, 9.0234375],
                                         "bfloat16"),
                              shown_by="a bfloat16 row 1.8515625, 2.171875, 0.50390625, 9.0234375"),))
      for strategy, spec, obs, recipe in (
          ("tensor", "FP8E4M3PerTensorSpec", "PerTensorMinMaxObserver", "ct-tensor"),
          ("channel", "FP8E4M3PerChannelSpec(ch_axis=0)", "PerChannelMinMaxObserver", "ct-rowwise"))
      for dtype in ("float32", "bfloat16")),
    ZooEntry(id="amd-quark.e4m3fn_to_e4m3fnuz", package="amd-quark", module="quark.torch.utils.device", versions=_V,
             function="quark.torch.utils.e4m3fn_to_e4m3fnuz(tensor, tensor_scale) (with torch.version.hip set)",
             kind="convert", claims="convert_fn_to_fnuz",
             citation="amd-quark 0.13, quark/torch/utils/device.py e4m3fn_to_e4m3fnuz: tensor.to(float16) / 2, "
                      "clamp(-224, 224), .to(float8_e4m3fnuz); tensor_scale * 2.0",
             adapter="fp8check.zoo.quark:e4m3fn_to_e4m3fnuz", modes=("eager",), dtypes=("float32",), heavy=True),
    ZooEntry(id="amd-quark.normalize_e4m3fn_to_e4m3fnuz", package="amd-quark",
             module="quark.torch.export.nn.modules.qparamslinear", versions=_V,
             function="export.nn.modules.qparamslinear.normalize_e4m3fn_to_e4m3fnuz(weight, qinput, weight_scale)",
             kind="convert", claims="convert_fn_to_fnuz",
             citation="amd-quark 0.13, quark/torch/export/nn/modules/qparamslinear.py normalize_e4m3fn_to_e4m3fnuz "
                      "('normalize_e4m3fn_to_e4m3fnuz for amd gpu'): weight_as_int8[weight_as_int8 == -128] = 0, "
                      "view(float8_e4m3fnuz), weight_scale * 2.0",
             adapter="fp8check.zoo.quark:normalize_e4m3fn_to_e4m3fnuz", modes=("eager",), dtypes=("float32",),
             heavy=True,
             known=(KnownIssue(summary=_NAN, upstream=NO, categories=frozenset({"nan"}),
                               reproducer="fp8check survey --zoo --entry amd-quark.normalize_e4m3fn_to_e4m3fnuz"),)),
)

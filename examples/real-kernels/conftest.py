"""The kernels this repository checks: other projects' Triton FP8 kernels, run verbatim.

And their FP8 GEMMs: DeepSeek-V3's ``fp8_gemm``, transformers' and SGLang's
block-scaled ``w8a8_block_fp8_matmul``, SGLang's ``triton_scaled_mm``, aiter's
``gemm_a8w8`` and ``gemm_a8w8_blockscale``, torchao's blockwise training GEMMs
(the gemm kind).

Each is declared twice where its project runs it on both: under ``sm90``
(e4m3fn, NVIDIA Hopper) and ``gfx942`` (e4m3fnuz, AMD MI300), in
fp8check's faithful interpreter. The adapters are fp8check's zoo adapters
(``fp8check.zoo.<project>``): each calls the project's own launcher on the
project's own kernel, from the project's wheel (unpacked; see README.md),
not one line changed. A project whose package is not on ``sys.path`` is not
declared (the header says which).

Every finding is explained in fp8check's docs/zoo.md ("Verbatim kernels");
a kernel with findings is a strict xfail here, naming them, so the day a
project fixes one, its test XPASSes and fails.
"""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import settings

import fp8check

# Interpreted kernels are slow and some are autotuned over many configs (each checked): fewer drawn inputs
# than fp8check-ci (the edge cases and the large inputs are always there).
settings.register_profile("real-kernels", max_examples=10, deadline=None, derandomize=True, database=None)

# name: (project root package, kind, adapter, recipe or profile, format, target, the Triton kernels it launches);
# a GEMM's recipe is a GEMM recipe (fp8check.matmul.gemm.GEMM_RECIPES)
KERNELS = {
    "aiter_per_token_sm90": ("aiter", "quantizer", "fp8check.zoo.aiter:per_token", "rowwise", "e4m3fn", "sm90",
                             ("_dynamic_per_token_quant_fp8_i8_kernel",)),
    "aiter_per_token_gfx942": ("aiter", "quantizer", "fp8check.zoo.aiter:per_token_mi300", "rowwise", "e4m3fnuz",
                               "gfx942", ("_dynamic_per_token_quant_fp8_i8_kernel",)),
    "aiter_per_tensor_sm90": ("aiter", "quantizer", "fp8check.zoo.aiter:per_tensor", "tensorwise", "e4m3fn", "sm90",
                              ("_dynamic_per_tensor_quant_fp8_i8_kernel", "_static_per_tensor_quant_fp8_i8_kernel")),
    "aiter_per_tensor_gfx942": ("aiter", "quantizer", "fp8check.zoo.aiter:per_tensor_mi300", "tensorwise",
                                "e4m3fnuz", "gfx942",
                                ("_dynamic_per_tensor_quant_fp8_i8_kernel", "_static_per_tensor_quant_fp8_i8_kernel")),
    "aiter_static_cast_sm90": ("aiter", "cast", "fp8check.zoo.aiter:static_cast", "satfinite", "e4m3fn", "sm90",
                               ("_static_per_tensor_quant_fp8_i8_kernel",)),
    "aiter_static_cast_gfx942": ("aiter", "cast", "fp8check.zoo.aiter:static_cast_mi300", "satfinite", "e4m3fnuz",
                                 "gfx942", ("_static_per_tensor_quant_fp8_i8_kernel",)),
    "fbgemm_quantize_fp8_row_sm90": ("fbgemm_gpu", "quantizer", "fp8check.zoo.fbgemm:quantize_fp8_row", "rowwise",
                                     "e4m3fn", "sm90", ("_kernel_quantize_fp8_row",)),
    "fbgemm_quantize_fp8_row_gfx942": ("fbgemm_gpu", "quantizer", "fp8check.zoo.fbgemm:quantize_fp8_row_mi300",
                                       "rowwise", "e4m3fnuz", "gfx942", ("_kernel_quantize_fp8_row",)),
    "sglang_per_token_group_sm90": ("sglang", "quantizer", "fp8check.zoo.sglang:per_token_group_quant_fp8",
                                    "per-token-group-1x128", "e4m3fn", "sm90", ("_per_token_group_quant_8bit",)),
    "sglang_per_token_group_gfx942": ("sglang", "quantizer", "fp8check.zoo.sglang:per_token_group_quant_fp8_mi300",
                                      "per-token-group-1x128-224", "e4m3fnuz", "gfx942",
                                      ("_per_token_group_quant_8bit",)),
    "sglang_per_token_group_colmajor_sm90": ("sglang", "quantizer",
                                             "fp8check.zoo.sglang:per_token_group_quant_fp8_colmajor",
                                             "per-token-group-1x128", "e4m3fn", "sm90",
                                             ("_per_token_group_quant_8bit_colmajor",)),
    "sglang_static_cast_sm90": ("sglang", "cast", "fp8check.zoo.sglang:static_cast", "satfinite", "e4m3fn", "sm90",
                                ("_static_quant_fp8",)),
    "sglang_static_cast_gfx942": ("sglang", "cast", "fp8check.zoo.sglang:static_cast_mi300", "satfinite", "e4m3fnuz",
                                  "gfx942", ("_static_quant_fp8",)),
    "sglang_per_tensor_mla_sm90": ("sglang", "quantizer", "fp8check.zoo.sglang:per_tensor_mla", "tensorwise",
                                   "e4m3fn", "sm90",
                                   ("_per_tensor_quant_mla_fp8_stage1", "_per_tensor_quant_mla_fp8_stage2")),
    "sglang_per_tensor_mla_gfx942": ("sglang", "quantizer", "fp8check.zoo.sglang:per_tensor_mla_mi300", "tensorwise",
                                     "e4m3fnuz", "gfx942",
                                     ("_per_tensor_quant_mla_fp8_stage1", "_per_tensor_quant_mla_fp8_stage2")),
    "vllm_per_token_group_sm90": ("vllm", "quantizer", "fp8check.zoo.vllm:per_token_group_quant_fp8",
                                  "per-token-group-1x128", "e4m3fn", "sm90", ("_per_token_group_quant_fp8",)),
    "vllm_per_token_group_gfx942": ("vllm", "quantizer", "fp8check.zoo.vllm:per_token_group_quant_fp8_mi300",
                                    "per-token-group-1x128-224", "e4m3fnuz", "gfx942", ("_per_token_group_quant_fp8",)),
    "vllm_per_token_group_colmajor_sm90": ("vllm", "quantizer",
                                           "fp8check.zoo.vllm:per_token_group_quant_fp8_colmajor",
                                           "per-token-group-1x128", "e4m3fn", "sm90",
                                           ("_per_token_group_quant_fp8_colmajor",)),
    "transformers_act_quant_sm90": ("transformers", "quantizer", "fp8check.zoo.transformers:act_quant",
                                    "deepseek-v3-act", "e4m3fn", "sm90", ("act_quant_kernel",)),
    # FP8 GEMMs (the gemm kind: bit for bit against the target's tensor cores and the recipe's scales)
    "deepseek_fp8_gemm_sm90": ("deepseek_v3_inference", "gemm", "fp8check.zoo.gemm:deepseek_fp8_gemm",
                               "block-1x128-128x128", "e4m3fn", "sm90", ("fp8_gemm_kernel",)),
    "transformers_w8a8_block_fp8_matmul_sm90": ("transformers", "gemm", "fp8check.zoo.gemm:transformers_block",
                                                "block-1x128-128x128", "e4m3fn", "sm90",
                                                ("_w8a8_block_fp8_matmul",)),
    "sglang_w8a8_block_fp8_matmul_sm90": ("sglang", "gemm", "fp8check.zoo.gemm:sglang_block", "block-1x128-128x128",
                                          "e4m3fn", "sm90", ("_w8a8_block_fp8_matmul",)),
    "sglang_w8a8_block_fp8_matmul_gfx942": ("sglang", "gemm", "fp8check.zoo.gemm:sglang_block",
                                            "block-1x128-128x128", "e4m3fnuz", "gfx942", ("_w8a8_block_fp8_matmul",)),
    "sglang_scaled_mm_sm90": ("sglang", "gemm", "fp8check.zoo.gemm:sglang_scaled_mm", "rowwise", "e4m3fn", "sm90",
                              ("scaled_mm_kernel",)),
    "sglang_scaled_mm_gfx942": ("sglang", "gemm", "fp8check.zoo.gemm:sglang_scaled_mm", "rowwise", "e4m3fnuz",
                                "gfx942", ("scaled_mm_kernel",)),
    "aiter_gemm_a8w8_blockscale_gfx942": ("aiter", "gemm", "fp8check.zoo.gemm:aiter_blockscale",
                                          "block-1x128-128x128", "e4m3fnuz", "gfx942",
                                          ("_gemm_a8w8_blockscale_kernel",)),
    "aiter_gemm_a8w8_gfx942": ("aiter", "gemm", "fp8check.zoo.gemm:aiter_a8w8", "rowwise", "e4m3fnuz", "gfx942",
                               ("_gemm_a8w8_kernel",)),
    # torchao's blockwise FP8 training GEMMs (torchao is pip-installed, not unpacked): forward and weight gradient
    "torchao_blockwise_gemm_sm90": ("torchao", "gemm", "fp8check.zoo.gemm:torchao_blockwise", "block-1x128-128x128",
                                    "e4m3fn", "sm90", ("triton_fp8_gemm_1x128_128x128_kernel",)),
    "torchao_blockwise_gemm_1x128_128x1_sm90": ("torchao", "gemm", "fp8check.zoo.gemm:torchao_blockwise_1x128_128x1",
                                                "block-1x128-1x128", "e4m3fn", "sm90",
                                                ("triton_fp8_gemm_1x128_128x1_kernel",)),
}

#: a GEMM's declared keys beyond its recipe: its epilogue (default: k-block for block scales, else end) and the
#: layouts its launcher takes (contiguous operands only: every launcher here asserts it but aiter's gemm_a8w8)
GEMM_KEYS: dict[str, dict] = {
    "deepseek_fp8_gemm_sm90": {"supports": {"contiguous_only": True}},
    "transformers_w8a8_block_fp8_matmul_sm90": {"supports": {"contiguous_only": True}},
    "sglang_w8a8_block_fp8_matmul_sm90": {"supports": {"contiguous_only": True}},
    "sglang_w8a8_block_fp8_matmul_gfx942": {"supports": {"contiguous_only": True}},
    "sglang_scaled_mm_sm90": {"supports": {"contiguous_only": True}},
    "sglang_scaled_mm_gfx942": {"supports": {"contiguous_only": True}},
    "aiter_gemm_a8w8_blockscale_gfx942": {"supports": {"contiguous_only": True}},
    "aiter_gemm_a8w8_gfx942": {"epilogue": "end-product"},
    # the K tail is not masked (its mask never moves with k): K a multiple of 128, as torchao's quantizers assert
    "torchao_blockwise_gemm_sm90": {"supports": {"contiguous_only": True, "k_multiple_of": 128}},
    "torchao_blockwise_gemm_1x128_128x1_sm90": {"supports": {"contiguous_only": True, "k_multiple_of": 128}},
}

_STRIDE = {"out_of_bounds", "race"}  # aiter indexes its output with the input's row stride
_CAST_SCRAMBLED = {"overflow", "infinity", "nan", "rounding", "signed_zero", "subnormal", "other"}

#: name -> the categories of its findings, each explained in fp8check's docs/zoo.md ("Verbatim kernels")
EXPECTED: dict[str, frozenset[str]] = {name: frozenset(cats) for name, cats in {
    "aiter_per_token_sm90": {"false_hint", "scale", "codes", "nonfinite", *_STRIDE},
    "aiter_per_token_gfx942": {"false_hint", "scale", "codes", "nonfinite", *_STRIDE},
    "aiter_per_tensor_sm90": {"false_hint", "scale", "nonfinite", "out_of_bounds"},
    "aiter_per_tensor_gfx942": {"false_hint", "scale", "codes", "nonfinite", "out_of_bounds"},
    "aiter_static_cast_sm90": {"false_hint", "out_of_bounds", *_CAST_SCRAMBLED},
    "aiter_static_cast_gfx942": {"false_hint", "out_of_bounds", *_CAST_SCRAMBLED},
    "fbgemm_quantize_fp8_row_sm90": {"scale", "nonfinite"},
    "fbgemm_quantize_fp8_row_gfx942": {"scale", "codes", "nonfinite"},
    "sglang_per_token_group_sm90": {"scale", "nonfinite"},
    "sglang_per_token_group_gfx942": {"nonfinite"},
    "sglang_per_token_group_colmajor_sm90": {"scale", "nonfinite"},
    "sglang_static_cast_sm90": {"nan"},
    "sglang_static_cast_gfx942": {"nan", "overflow", "infinity", "rounding", "other"},
    "sglang_per_tensor_mla_sm90": {"scale", "codes", "nonfinite"},
    "sglang_per_tensor_mla_gfx942": {"scale", "nonfinite"},
    "vllm_per_token_group_sm90": {"scale", "nonfinite"},
    "vllm_per_token_group_gfx942": {"scale", "nonfinite"},
    "vllm_per_token_group_colmajor_sm90": {"scale", "nonfinite"},
    "transformers_act_quant_sm90": {"scale", "nonfinite"},
    "deepseek_fp8_gemm_sm90": set(),
    "transformers_w8a8_block_fp8_matmul_sm90": set(),
    "sglang_w8a8_block_fp8_matmul_sm90": set(),
    "sglang_w8a8_block_fp8_matmul_gfx942": set(),
    "sglang_scaled_mm_sm90": set(),
    "sglang_scaled_mm_gfx942": set(),
    "aiter_gemm_a8w8_blockscale_gfx942": {"false_hint", "refused"},
    "aiter_gemm_a8w8_gfx942": {"out_of_bounds"},
    "torchao_blockwise_gemm_sm90": {"out_of_bounds"},
    "torchao_blockwise_gemm_1x128_128x1_sm90": {"out_of_bounds"},
}.items()}


_CAST_SUITE = ("test_cast_conforms_as_real_callers_call_it", "test_matches_reference_on_exhaustive_sweep",
               "test_matches_reference_on_hypothesis_inputs", "test_nan_encoding")
#: name -> the tests of the shipped suite its findings fail (the others pass: a strict xfail there would XPASS);
#: a quantizer has one, its recipe check
FAILS: dict[str, tuple[str, ...]] = {
    "aiter_static_cast_sm90": _CAST_SUITE,
    "aiter_static_cast_gfx942": ("test_cast_conforms_as_real_callers_call_it",),  # contiguous 1-D calls conform
    "sglang_static_cast_sm90": _CAST_SUITE,
    "sglang_static_cast_gfx942": _CAST_SUITE + ("test_exact_values_are_kept", "test_infinity_handling",
                                                "test_overflow_policy", "test_rounding_ties"),  # the 224 range
}


def known() -> dict[str, str]:
    """name -> the strict-xfail reason of each kernel with findings."""
    return {n: f"{n}: {', '.join(sorted(c))} (docs/zoo.md, Verbatim kernels)" for n, c in EXPECTED.items() if c}


def failing_tests(name: str) -> tuple[str, ...]:
    if KERNELS[name][1] == "gemm":
        return ("test_gemm_conforms_to_its_recipe",)
    return FAILS.get(name, ("test_quantizer_conforms_to_its_recipe",))


def _present(root: str) -> bool:
    try:
        return importlib.util.find_spec(root) is not None
    except (ImportError, ValueError):
        return False


def declared() -> list:
    out = []
    for name, (root, kind, adapter, claim, fmt, target, _kernels) in KERNELS.items():
        if not _present(root):
            continue
        if kind == "cast":
            out.append(fp8check.cast_kernel(adapter, name=name, format=fmt, profile=claim, triton_target=target,
                                            input_dtypes=("float32", "bfloat16")))
        elif kind == "gemm":
            out.append(fp8check.gemm_kernel(adapter, name=name, recipe=claim, format=fmt, triton_target=target,
                                            **GEMM_KEYS[name]))
        else:
            out.append(fp8check.quantizer_kernel(adapter, name=name, recipe=claim, format=fmt, triton_target=target))
    return out


def pytest_fp8check_kernels():
    return declared()


def pytest_report_header(config):
    absent = sorted({root for root, *_ in KERNELS.values() if not _present(root)})
    return [f"real-kernels: {len(declared())} kernels declared"
            + (f"; not declared (package not on sys.path): {', '.join(absent)}" if absent else "")]


def pytest_collection_modifyitems(config, items):
    reasons = known()
    for item in items:
        test = getattr(item, "originalname", None) or item.name.split("[")[0]
        for name, why in reasons.items():
            if (f"[{name}]" in item.nodeid or f"[{name}-" in item.nodeid) and test in failing_tests(name):
                item.add_marker(pytest.mark.xfail(strict=True, reason=why))

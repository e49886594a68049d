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
import runpy
from pathlib import Path

import pytest
from hypothesis import settings

import fp8check

# the kernels and their GEMM keys: one table, which gpu/gemm.py reads too
_TABLE = runpy.run_path(str(Path(__file__).with_name("declared_kernels.py")))
KERNELS: dict[str, tuple] = _TABLE["KERNELS"]
GEMM_KEYS: dict[str, dict] = _TABLE["GEMM_KEYS"]

# Interpreted kernels are slow and some are autotuned over many configs (each checked): fewer drawn inputs
# than fp8check-ci (the edge cases and the large inputs are always there).
settings.register_profile("real-kernels", max_examples=10, deadline=None, derandomize=True, database=None)

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

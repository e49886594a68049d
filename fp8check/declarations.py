"""Kernels a repository declares, and the checks that run them.

A kernel author declares the kernels fp8check should check, any number of
them, in ``[tool.fp8check]`` of the repository's ``pyproject.toml``::

    [[tool.fp8check.cast]]
    kernel = "mykernels.casts:cast_e4m3fnuz"
    format = "e4m3fnuz"
    profile = "satfinite"

    [[tool.fp8check.quantizer]]
    kernel = "mykernels.quant:tensorwise_fnuz"
    recipe = "tensorwise"
    format = "e4m3fnuz"

    [[tool.fp8check.fused]]
    kernel = "mykernels.fused:rmsnorm_quant"
    reference = "mykernels.fused:rmsnorm_reference"
    args = "mykernels.fused:rmsnorm_args"
    format = "e4m3fn"
    profile = "satfinite"
    ulps = 2

or returns them from a ``pytest_fp8check_kernels()`` hook in a
``conftest.py`` (:func:`cast_kernel`, :func:`quantizer_kernel`,
:func:`fused_kernel`, where a kernel may be a function object too). Every
key: ``name`` (the test ids' name for the kernel; default the function's),
``kernel``, ``format``, ``profile`` (default ``ieee``), ``input-dtypes``
(casts; default float32, float16, bfloat16), ``device`` (``cpu`` or
``cuda``), ``recipe`` (quantizers), ``reference``/``args``/``ulps`` (fused
kernels; ``args`` also for quantizers with fused pre-processing, with
``reference`` the values the recipe applies to), ``triton-target`` (run a
Triton kernel in fp8check's faithful interpreter with that GPU's FP8
semantics), and a ``supports`` table declaring the kernel's domain
(``input-dtypes``, ``contiguous-only``, ``numel-multiple-of``,
``max-numel``): calls outside it are not tried, a refusal inside it fails.
A decode kernel (``[[tool.fp8check.decode]]``, :func:`decode_kernel`) takes
``code-dtypes`` (``["uint8"]``, ``["fp8"]``; default: each tried) and
``output-dtype`` (float32, float16 or bfloat16; default: any). A block
dequant kernel (``[[tool.fp8check.dequant]]``, :func:`dequant_kernel`) takes
those two, ``block = [rows, cols]`` (default [128, 128]) and ``apply``
(``multiply``, ``divide`` or ``multiply-reciprocal``).

This module gathers the names of three: the record
(:mod:`fp8check.declaration`: :class:`KernelDeclaration`, the kinds, the rules
of the keys), its reader (:mod:`fp8check.declaration_reader`: pyproject tables,
the conftest hook's constructors) and its runner (:mod:`fp8check.running`).
"""

from __future__ import annotations

from fp8check.declaration import (KERNEL_KINDS, KINDS, KernelDeclaration, KernelKind, declare, default_name,
                                  recipe_arguments)
from fp8check.declaration_reader import (cast_kernel, decode_kernel, dequant_kernel, first_duplicate, from_pyproject, from_table,
                                         fused_kernel, quantizer_kernel, static_quantizer, table_keys)
from fp8check.declaration_reader import gemm_kernel
from fp8check.pyproject import read_fp8check_table, repository_recipes
from fp8check.running import (add_faults, fault_result, merge_config_runs, missing_requirement, run_cast_declaration,
                              run_declaration)
from fp8check.running import run_gemm

__all__ = ["KernelDeclaration", "cast_kernel", "quantizer_kernel", "fused_kernel", "static_quantizer", "decode_kernel",
           "dequant_kernel",
           "from_pyproject", "from_table", "read_fp8check_table", "repository_recipes", "run_declaration", "KINDS",
           "KERNEL_KINDS", "KernelKind", "declare", "default_name", "recipe_arguments", "first_duplicate",
           "table_keys", "add_faults", "fault_result", "merge_config_runs", "missing_requirement",
           "run_cast_declaration", "gemm_kernel", "run_gemm"]

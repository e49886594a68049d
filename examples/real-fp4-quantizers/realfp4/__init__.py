"""Real FP4 quantizers of three projects (torchao, compressed-tensors, NVIDIA ModelOpt), called as their users call
them, for fp8check to check.

Nothing here is a copy of a project's code: each module imports the package (installed from its PyPI wheel; see
README.md) and adapts the call to what fp8check's quantizer check passes: ``kernel(x) -> (codes, scales)``, or
``(codes, block scales, per-tensor scale)`` for NVFP4, with ``x`` a 2-D float32 or bfloat16 tensor.
"""

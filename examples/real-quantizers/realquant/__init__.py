"""Real FP8 quantizers of four packages, called as their users call them, for fp8check to check.

Nothing here is a copy of a package's code: each module imports the package
(installed from its PyPI wheel; see README.md) and adapts the call to what
fp8check's quantizer check passes, ``kernel(x) -> (codes, scales)`` with
``x`` a 2-D float32 or bfloat16 tensor.
"""

"""fp8-coat 1.0.11: imports under the Triton interpreter with ``--no-deps``
(its metadata pins ``triton==3.1.0`` and ``transformers==4.45.2``), but its
quantize kernels are autotuned (``get_tuned_kernel``) and use
``tl.make_block_ptr`` tiles of ``BLOCK_M x BLOCK_N``; no adapter was written
in this session (see docs/zoo.md). What its source claims
(``coat/activation/real_quantization/_quantize.py``, ``fp8_quantize``):
``scale = (amax + 1e-10) / fp8_max`` per 1xQB group, ``y = fdiv(x, scale)``,
the scale stored in bfloat16 after the codes were computed with the
float32 one.
"""

ENTRIES = ()

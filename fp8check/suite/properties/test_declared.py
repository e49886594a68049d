"""A repository's declared kernels, each checked whole, driven as real callers drive it.

Casts: every input in calls of many sizes, shapes, layouts and contents,
repeated calls, the input checked for writes (:mod:`fp8check.casts.harness`).
Quantizers: the recipe's edge cases, Hypothesis inputs, non-contiguous and
odd-shaped inputs, a large tensor called twice. Fused kernels: the kernel's
codes against its pre-cast reference encoded under the claimed profile.
Decode kernels: every code, each way the kernel takes codes, against the exact values. Block dequant
kernels: every code in whole and ragged blocks, against its exact value times its block's scale.
GEMM kernels: bit for bit against the target's tensor cores and the recipe's
scales, with K tails, ragged M/N, transposed and strided operands.
A failure's message is what ``fp8check check`` prints for the kernel.
"""


def test_cast_conforms_as_real_callers_call_it(fp8_call_target):
    fp8_call_target.check()


def test_quantizer_conforms_to_its_recipe(fp8_quantizer_target):
    fp8_quantizer_target.check()


def test_fused_kernel_conforms_to_its_reference(fp8_fused_target):
    fp8_fused_target.check()


def test_decoder_decodes_every_code(fp8_decoder_target):
    fp8_decoder_target.check()


def test_dequant_kernel_applies_each_block_s_scale(fp8_dequant_target):
    fp8_dequant_target.check()


def test_gemm_conforms_to_its_recipe(fp8_gemm_target):
    fp8_gemm_target.check()

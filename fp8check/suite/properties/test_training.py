"""A repository's declared training models (``[[tool.fp8check.training]]``), checked as ``fp8check train`` checks them.

Step: torchao's ``convert_to_float8_training`` under the declared recipe, every FP8 cast of every GEMM
operand bit for bit against the recipe reference in the format torchao picks (e4m3fnuz, max 240, as on
MI300), every FP8 GEMM against the derived bound. Loss: BF16 and each format trained ``loss-steps``
steps, judged by DeepSeek-V3's 0.25 % and torchao's SQNR gates, and the golden curves in ``golden-dir``.
"""


def test_training_step_conforms(fp8_training_target):
    fp8_training_target.check_step()


def test_training_loss_passes_the_gates(fp8_training_loss_target):
    fp8_training_loss_target.check_loss()

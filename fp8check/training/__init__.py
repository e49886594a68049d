"""FP8 training numerics: a torchao float8 training step checked cast by cast, format twins, loss baselines.

See docs/training.md. The API::

    from fp8check import training
    training.check_step(recipe="rowwise", fmt="e4m3fnuz")    # StepConformance
    training.loss_parity(steps=50)                          # LossParity (bf16, e4m3fn, e4m3fnuz)
    training.check_moe_step()                               # StepConformance of torchao's MXFP8 MoE path
"""

from fp8check.training.checks import (
    RELATIVE_LOSS_GATE,
    SQNR_GATES,
    Divergence,
    Gate,
    LossParity,
    StepConformance,
    TrainingReport,
    check_step,
    first_divergence,
    loss_parity,
    platform_key,
    sqnr_gates,
)
from fp8check.training.goldens import GoldenComparison, compare_golden, golden_document, golden_path
from fp8check.training.moe import TINY_MOE, MoEConfig, check_moe_step
from fp8check.training.model import TINY_LLAMA, ModelConfig, load_config
from fp8check.training.recipes import TRAINING_RECIPES, get_recipe
from fp8check.training.run import FORMATS, LossRun, train

__all__ = ["check_step", "loss_parity", "first_divergence", "sqnr_gates", "platform_key", "StepConformance", "Gate",
           "Divergence", "LossParity", "TrainingReport", "RELATIVE_LOSS_GATE", "SQNR_GATES", "TINY_LLAMA",
           "ModelConfig", "load_config", "TRAINING_RECIPES", "get_recipe", "FORMATS", "LossRun", "train",
           "GoldenComparison", "compare_golden", "golden_document", "golden_path", "check_moe_step", "MoEConfig",
           "TINY_MOE"]

"""A small model trained in FP8 with torchao (see model.py and fp8.py)."""

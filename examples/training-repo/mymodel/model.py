"""A two-layer MLP classifier and its data: what this repository trains."""

import torch


def build() -> torch.nn.Module:
    """The float32 model (converted to FP8 training by the caller)."""
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=False), torch.nn.GELU(),
                                torch.nn.Linear(128, 32, bias=False))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * p.shape[1] ** -0.5)
    return model


def batches(n: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` batches of 32 inputs and their class labels."""
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(32, 64, generator=gen), torch.randint(0, 32, (32,), generator=gen)) for _ in range(n)]

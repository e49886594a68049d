"""A tiny Llama-like decoder built in-process from a config, and seeded synthetic data.

Nothing is downloaded: the model is plain torch (RMSNorm, rotary attention,
SwiGLU MLP, untied output head), every weight drawn from torch's CPU
generator under the given seed (the same on every machine), and the data
is a seeded random Markov chain of tokens drawn with NumPy, so that the
loss falls and two runs can be compared step by step.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from fp8check.errors import InvalidValueError

__all__ = ["ModelConfig", "TINY_LLAMA", "load_config", "build_model", "synthetic_batches"]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The shape of a tiny decoder (every Linear's dims multiples of 16, as FP8 GEMMs need)."""

    name: str = "tiny-llama"
    vocab_size: int = 256
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    hidden_dim: int = 128
    seq_len: int = 32
    batch_size: int = 8
    lr: float = 3e-3
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "int" and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise InvalidValueError(f"model config: {f.name} must be a positive integer, got {v!r}")
        for name in ("dim", "hidden_dim", "vocab_size"):
            if getattr(self, name) % 16:
                raise InvalidValueError(f"model config: {name} must be a multiple of 16 (FP8 GEMMs), "
                                        f"got {getattr(self, name)}")
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise InvalidValueError(f"model config: dim {self.dim} must split into {self.n_heads} heads of even size")
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1):
            raise InvalidValueError(f"model config: lr must be in (0, 1), got {self.lr!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


TINY_LLAMA = ModelConfig()


def load_config(spec: str | Path) -> ModelConfig:
    """``tiny-llama`` or the path of a JSON object with :class:`ModelConfig`'s keys."""
    if str(spec) == "tiny-llama":
        return TINY_LLAMA
    path = Path(spec)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidValueError(f"--model {spec}: no such file (give tiny-llama or a CONFIG.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidValueError(f"--model {spec}: not a readable JSON config: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidValueError(f"--model {spec}: the config must be a JSON object")
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidValueError(f"--model {spec}: unknown config keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    try:
        return ModelConfig(**{"name": path.stem, **data})
    except TypeError as exc:
        raise InvalidValueError(f"--model {spec}: {exc}") from None


def build_model(cfg: ModelConfig, seed: int) -> Any:
    """The decoder, float32, on the CPU, its weights drawn under ``seed``."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x: Any) -> Any:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps) * self.weight

    head = cfg.dim // cfg.n_heads
    inv = 1.0 / (10000.0 ** (np.arange(0, head, 2, dtype=np.float64) / head))
    angles = np.outer(np.arange(cfg.seq_len, dtype=np.float64), inv)
    cos = torch.tensor(np.cos(angles), dtype=torch.float32)
    sin = torch.tensor(np.sin(angles), dtype=torch.float32)

    def rotary(x: Any) -> Any:  # (B, H, T, head)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        c, s = cos[: x.shape[-2]].to(x.device), sin[: x.shape[-2]].to(x.device)
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
            self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
            self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
            self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            q, k, v = (w(x).view(b, t, cfg.n_heads, head).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            q, k = rotary(q), rotary(k)
            # Explicit attention (no fused SDPA kernel: the same arithmetic on every CPU and GPU backend).
            att = (q @ k.transpose(-2, -1)) / math.sqrt(head)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            return self.wo((att @ v).transpose(1, 2).reshape(b, t, cfg.dim))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
            self.w3 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
            self.w2 = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

        def forward(self, x: Any) -> Any:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention_norm = RMSNorm(cfg.dim)
            self.attention = Attention()
            self.ffn_norm = RMSNorm(cfg.dim)
            self.feed_forward = MLP()

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.attention_norm(x))
            return x + self.feed_forward(self.ffn_norm(x))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
            self.layers = nn.ModuleList(Block() for _ in range(cfg.n_layers))
            self.norm = RMSNorm(cfg.dim)
            self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)

        def forward(self, tokens: Any) -> Any:
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h)
            return self.output(self.norm(h))

    gen_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Decoder()
    finally:
        torch.random.set_rng_state(gen_state)  # a good guest: the caller's generator is left as it was
    return model


def synthetic_batches(cfg: ModelConfig, seed: int, steps: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``steps`` (inputs, targets) int64 batches from a seeded Markov chain over the vocabulary.

    Each token has 4 likely successors (a sparse transition table), so a
    model that learns the table drives the loss from log(vocab) towards log(4).
    """
    rng = np.random.default_rng(seed)
    v = cfg.vocab_size
    successors = rng.integers(0, v, size=(v, 4))
    for _ in range(steps):
        seq = np.empty((cfg.batch_size, cfg.seq_len + 1), dtype=np.int64)
        seq[:, 0] = rng.integers(0, v, size=cfg.batch_size)
        choice = rng.integers(0, 4, size=(cfg.batch_size, cfg.seq_len))
        for t in range(cfg.seq_len):
            seq[:, t + 1] = successors[seq[:, t], choice[:, t]]
        yield seq[:, :-1], seq[:, 1:]

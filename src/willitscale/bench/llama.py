"""A Llama-style language model in plain PyTorch for ``bench train``: RMSNorm, rotary positions,
grouped-query attention, a SwiGLU MLP, no biases (Touvron et al. 2023, "LLaMA", section 2.2;
Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.2). Built from a
:class:`~willitscale.workload.transformer.Transformer` shape with ``norm = "rmsnorm"``; its
parameter count is :func:`willitscale.workload.params.param_count` of that shape (a test checks
it). Attention is ``scaled_dot_product_attention(is_causal=True)``, as in :mod:`bench.gpt`.
Torch is imported by the caller (this module is only imported inside a benchmark worker).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from willitscale.workload.transformer import Transformer

__all__ = ["Llama", "ROPE_THETA"]

#: rotary base frequency of Llama 3 (Dubey et al. 2024, section 3.2: "RoPE base frequency
#: hyperparameter to 500,000"); the speed does not depend on it
ROPE_THETA = 500_000.0


def _rotary(seq: int, dim: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / ROPE_THETA ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., :d/2], x[..., d/2:]) by the position's angles (the "half" layout)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self, shape: Transformer):
        super().__init__()
        self.heads, self.kv_heads = shape.heads, shape.kv_heads or shape.heads
        self.head_dim = shape.head_dim or shape.hidden // shape.heads
        self.q = nn.Linear(shape.hidden, self.heads * self.head_dim, bias=False)
        self.kv = nn.Linear(shape.hidden, 2 * self.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(self.heads * self.head_dim, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2 * self.kv_heads, self.head_dim).transpose(1, 2).chunk(2, dim=1)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=self.kv_heads != self.heads)
        return self.o(y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class Block(nn.Module):
    def __init__(self, shape: Transformer):
        super().__init__()
        self.norm1 = nn.RMSNorm(shape.hidden)
        self.attn = Attention(shape)
        self.norm2 = nn.RMSNorm(shape.hidden)
        self.gate_up = nn.Linear(shape.hidden, 2 * shape.ffn_hidden, bias=False)
        self.down = nn.Linear(shape.ffn_hidden, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Llama(nn.Module):
    """``forward(tokens, targets)`` returns the mean next-token cross-entropy."""

    def __init__(self, shape: Transformer):
        super().__init__()
        self.shape = shape
        self.tokens = nn.Embedding(shape.vocab, shape.hidden)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = nn.RMSNorm(shape.hidden)
        self.head = None if shape.tied_embeddings else nn.Linear(shape.hidden, shape.vocab, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        head_dim = self.shape.head_dim or self.shape.hidden // self.shape.heads
        cos, sin = _rotary(idx.shape[1], head_dim, idx.device)
        x = self.tokens(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        weight = self.tokens.weight if self.head is None else self.head.weight
        logits = F.linear(self.norm(x), weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

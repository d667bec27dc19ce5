"""A GPT-2-family language model in plain PyTorch, and the text it trains on.

Pre-LayerNorm blocks (causal self-attention, then a GELU MLP of width ``ffn_hidden``), learned
position embeddings and an LM head tied to the token embedding: the GPT-2 layout, so
:func:`willitscale.bench.models.parameter_count` gives the exact parameter count. Built from a
:class:`~willitscale.workload.transformer.Transformer` shape; torch is imported by the caller
(this module is only imported inside a benchmark worker).
"""

from __future__ import annotations

import math
from importlib import resources

import torch
from torch import nn
from torch.nn import functional as F

from willitscale.workload.transformer import Transformer

__all__ = ["GPT", "load_text", "batches"]


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        shape = (b, t, self.heads, h // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, h))


class Block(nn.Module):
    def __init__(self, shape: Transformer):
        super().__init__()
        self.ln1 = nn.LayerNorm(shape.hidden)
        self.attn = SelfAttention(shape.hidden, shape.heads)
        self.ln2 = nn.LayerNorm(shape.hidden)
        self.fc = nn.Linear(shape.hidden, shape.ffn_hidden)
        self.out = nn.Linear(shape.ffn_hidden, shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """The model. ``forward(tokens, targets)`` returns the mean next-token cross-entropy."""

    def __init__(self, shape: Transformer):
        super().__init__()
        self.shape = shape
        self.tokens = nn.Embedding(shape.vocab, shape.hidden)
        self.positions = nn.Embedding(shape.max_positions, shape.hidden)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.ln = nn.LayerNorm(shape.hidden)
        self.apply(self._init)
        # GPT-2's scaled init of the projections that add into the residual stream
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "out.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * shape.layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tokens(idx) + self.positions(pos)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln(x), self.tokens.weight)  # LM head tied to the embedding
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def load_text() -> bytes:
    """The benchmark's training text (public-domain sonnets shipped with the package)."""
    return resources.files("willitscale.bench").joinpath("data/sonnets.txt").read_bytes()


def batches(text: bytes, *, seq_len: int, batch: int, seed: int, device):
    """An endless stream of ``(tokens, targets)`` windows of the text as byte ids, different
    for every ``seed`` (pass one per rank)."""
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    if len(data) <= seq_len + 1:
        repeats = (seq_len + 1) // len(data) + 2
        data = data.repeat(repeats)
    generator = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=generator)
        x = torch.stack([data[s: s + seq_len] for s in starts])
        y = torch.stack([data[s + 1: s + seq_len + 1] for s in starts])
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

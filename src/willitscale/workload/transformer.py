"""A decoder-only transformer described by its shape.

Only the shape lives here; what it costs (parameters, FLOPs, memory) is computed by pure
functions in the sibling modules so they can be vectorised over numpy arrays of shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.errors import ConfigError

__all__ = ["Transformer"]

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope", "alibi", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class Transformer:
    """The shape of a decoder-only transformer (GPT-2, Llama, Mixtral, ...)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int | None = None  #: grouped-query attention; None means = heads (multi-head)
    head_dim: int | None = None  #: None means hidden // heads
    ffn_hidden: int | None = None  #: None means 4 x hidden
    gated_mlp: bool = False  #: SwiGLU/GeGLU: three FFN matrices instead of two
    vocab: int
    max_positions: int = 2048  #: learned position table size (GPT-2: 1024)
    position: str = "learned"
    norm: str = "layernorm"
    bias: bool = True  #: biases in the linear layers (GPT-2: yes, Llama: no)
    tied_embeddings: bool = True  #: LM head shares the token embedding matrix
    moe_experts: int = 0  #: 0 = dense; else experts per MoE layer (every layer is MoE)
    moe_top_k: int = 0  #: experts each token is routed to
    source: str = ""

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "vocab", "max_positions"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"model {self.name}: {key}", value, "an integer >= 1")
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise ConfigError(f"model {self.name}: heads", self.heads,
                                  f"a divisor of hidden = {self.hidden} (or give head_dim)")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.ffn_hidden is None:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.kv_heads < 1 or self.heads % self.kv_heads:
            raise ConfigError(f"model {self.name}: kv_heads", self.kv_heads,
                              f"a divisor of heads = {self.heads}")
        if self.norm not in NORMS:
            raise ConfigError(f"model {self.name}: norm", self.norm, "one of " + ", ".join(NORMS))
        if self.position not in POSITIONS:
            raise ConfigError(f"model {self.name}: position", self.position, "one of " + ", ".join(POSITIONS))
        if self.moe_experts < 0 or (self.moe_experts and not 1 <= self.moe_top_k <= self.moe_experts):
            raise ConfigError(f"model {self.name}: moe_top_k", self.moe_top_k,
                              f"between 1 and moe_experts = {self.moe_experts}")

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

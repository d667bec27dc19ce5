"""A decoder-only transformer described by its shape.

Only the shape lives here; what it costs (parameters, FLOPs, memory) is computed by pure
functions in the sibling modules (:mod:`.params`, :mod:`.flops`, :mod:`willitscale.memory.state`,
:mod:`willitscale.memory.activations`) so they can be vectorised over numpy arrays of sequence lengths,
micro-batch sizes and parallel degrees.

Bias switches: ``bias`` is the default for every linear layer; ``qkv_bias``, ``attn_out_bias``
and ``mlp_bias`` override it for one part (None = follow ``bias``). Qwen2 is ``bias = false,
qkv_bias = true``; a Llama config with ``attention_bias = true`` is ``qkv_bias = attn_out_bias
= true``. The LM head and the MoE router never have a bias in the supported families.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from willitscale.errors import ConfigError

__all__ = ["Transformer", "NORMS", "POSITIONS", "IMPLEMENTATIONS"]

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope", "alibi", "none")
#: how the model's code runs, which decides what its forward keeps for backward
#: (:mod:`willitscale.memory.activations`): ``fused`` 16-bit activations and fused kernels
#: (Megatron-LM, Transformer Engine, torch.compile); ``autocast`` eager PyTorch modules under
#: ``torch.autocast`` (fp32 residual stream into the norms); ``mingpt`` karpathy/minGPT's eager
#: modules under autocast (fp32 softmax, its torch.pow/tanh GELU in fp32)
IMPLEMENTATIONS = ("fused", "autocast", "mingpt")


#: the largest value of each shape field a model may have: far above any model trained so far
#: (Llama 3 405B: 126 layers, hidden 16,384, 128K context; vocabularies reach ~256K), low enough
#: that a typo (1e9 layers) is refused instead of allocating tables of that size
SHAPE_LIMITS = {"layers": 10_000, "hidden": 1_000_000, "heads": 100_000, "kv_heads": 100_000,
                "head_dim": 100_000, "ffn_hidden": 10_000_000, "vocab": 100_000_000,
                "max_positions": 100_000_000, "seq_len": 100_000_000,
                "sliding_window": 100_000_000, "moe_experts": 100_000}


def _positive_int(name: str, key: str, value: object, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    limit = SHAPE_LIMITS[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise ConfigError(f"model {name}: {key}", value, f"an integer from 1 to {limit:,}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Transformer:
    """The shape of a decoder-only transformer (GPT-2, Llama, Mixtral, ...).

    Every layer is pre-norm: norm -> attention -> residual, norm -> MLP -> residual, with a
    final norm before the LM head. With ``moe_experts > 0`` every layer's MLP is a mixture of
    ``moe_experts`` copies of the MLP (each ``ffn_hidden`` wide) and a linear router; each token
    goes through ``moe_top_k`` of them.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int | None = None  #: grouped-query attention; None means = heads (multi-head)
    head_dim: int | None = None  #: None means hidden // heads
    ffn_hidden: int | None = None  #: None means 4 x hidden (per expert for MoE)
    gated_mlp: bool = False  #: SwiGLU/GeGLU: three FFN matrices instead of two
    vocab: int
    max_positions: int = 2048  #: learned position table size (GPT-2: 1024)
    seq_len: int | None = None  #: training sequence length; None means = max_positions
    position: str = "learned"
    norm: str = "layernorm"
    bias: bool = True  #: biases in the linear layers (GPT-2: yes, Llama: no)
    qkv_bias: bool | None = None  #: bias on q, k, v only (Qwen2); None follows ``bias``
    attn_out_bias: bool | None = None  #: bias on the attention output projection; None follows ``bias``
    mlp_bias: bool | None = None  #: biases in the MLP; None follows ``bias``
    embedding_norm: bool = False  #: a norm right after the token embedding (BLOOM)
    tied_embeddings: bool = True  #: LM head shares the token embedding matrix
    sliding_window: int | None = None  #: each query sees at most this many keys (Mistral 7B v0.1)
    moe_experts: int = 0  #: 0 = dense; else experts per MoE layer (every layer is MoE)
    moe_top_k: int = 0  #: experts each token is routed to
    implementation: str = "fused"  #: one of IMPLEMENTATIONS (activation memory)
    source: str = ""

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "vocab", "max_positions"):
            _positive_int(self.name, key, getattr(self, key))
        for key in ("kv_heads", "head_dim", "ffn_hidden", "seq_len", "sliding_window"):
            _positive_int(self.name, key, getattr(self, key), optional=True)
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise ConfigError(f"model {self.name}: heads", self.heads,
                                  f"a divisor of hidden = {self.hidden} (or give head_dim)")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.ffn_hidden is None:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.seq_len is None:
            object.__setattr__(self, "seq_len", self.max_positions)
        for key in ("qkv_bias", "attn_out_bias", "mlp_bias"):
            if getattr(self, key) is None:
                object.__setattr__(self, key, self.bias)
        if self.heads % self.kv_heads:
            raise ConfigError(f"model {self.name}: kv_heads", self.kv_heads,
                              f"a divisor of heads = {self.heads}")
        if self.norm not in NORMS:
            raise ConfigError(f"model {self.name}: norm", self.norm, "one of " + ", ".join(NORMS))
        if self.implementation not in IMPLEMENTATIONS:
            raise ConfigError(f"model {self.name}: implementation", self.implementation,
                              "one of " + ", ".join(IMPLEMENTATIONS))
        if self.position not in POSITIONS:
            raise ConfigError(f"model {self.name}: position", self.position, "one of " + ", ".join(POSITIONS))
        if self.position == "learned" and self.seq_len > self.max_positions:
            raise ConfigError(f"model {self.name}: seq_len", self.seq_len,
                              f"<= max_positions = {self.max_positions} (learned positions)")
        experts = self.moe_experts
        if isinstance(experts, bool) or not isinstance(experts, int) or \
                not 0 <= experts <= SHAPE_LIMITS["moe_experts"]:
            raise ConfigError(f"model {self.name}: moe_experts", experts,
                              f"an integer from 0 to {SHAPE_LIMITS['moe_experts']:,}")
        if self.moe_experts and not 1 <= self.moe_top_k <= self.moe_experts:
            raise ConfigError(f"model {self.name}: moe_top_k", self.moe_top_k,
                              f"between 1 and moe_experts = {self.moe_experts}")
        if not self.moe_experts and self.moe_top_k:
            raise ConfigError(f"model {self.name}: moe_top_k", self.moe_top_k,
                              "0 for a dense model (set moe_experts for a mixture of experts)")

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.moe_experts > 0

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output): heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values): kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def experts_per_token(self) -> int:
        """MLPs each token passes through: top-k for MoE, 1 for a dense model."""
        return self.moe_top_k if self.is_moe else 1

    @property
    def mlp_experts(self) -> int:
        """MLP copies stored per layer: the experts for MoE, 1 for a dense model."""
        return self.moe_experts if self.is_moe else 1

    def shape_dict(self) -> dict[str, object]:
        """The shape as plain values (for JSON output and TOML round trips)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("name", "source")}

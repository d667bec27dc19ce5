"""A decoder-only transformer described by its shape.

Only the shape lives here; what it costs (parameters, FLOPs, memory) is computed by pure
functions in the sibling modules (:mod:`.params`, :mod:`.flops`, :mod:`willitscale.memory.state`,
:mod:`willitscale.memory.activations`) so they can be vectorised over numpy arrays of sequence lengths,
micro-batch sizes and parallel degrees.

Bias switches: ``bias`` is the default for every linear layer; ``qkv_bias``, ``attn_out_bias``
and ``mlp_bias`` override it for one part (None = follow ``bias``). Qwen2 is ``bias = false,
qkv_bias = true``; a Llama config with ``attention_bias = true`` is ``qkv_bias = attn_out_bias
= true``. The LM head and the MoE router never have a bias in the supported families.

Beyond the Llama shape (Hugging Face families of :mod:`.hf` and :mod:`.hf_families`):

* **Multi-head latent attention** (DeepSeek-V2/V3, ``kv_lora_rank`` set): keys and values are
  rebuilt per head from a shared latent of ``kv_lora_rank`` (plus a rotary key of
  ``rope_head_dim`` shared by all heads), queries go through a ``q_lora_rank`` bottleneck (or one
  projection when it is None); ``head_dim`` is the query/key head (nope + rope part) and
  ``v_head_dim`` the value head (DeepSeek-V2 section 2.1, arXiv:2405.04434).
* **Shared experts and dense-first layers** (DeepSeek-MoE, Qwen2-MoE): every MoE layer also runs
  a dense gated MLP of ``moe_shared_ffn`` (all shared experts together) for every token; the first
  ``dense_layers`` layers have a dense MLP of ``dense_ffn`` instead of experts.
* **QK-norm** (Qwen3, Gemma 3: an RMSNorm over each head's ``head_dim``; OLMo 2: over the whole
  ``q_dim`` and ``kv_dim``), **four norms per layer** (Gemma 2/3's sandwich), **a sliding window
  on some layers only** (``window_layers``: Gemma 2 every other layer, Gemma 3 five in six).

Per-layer quantities of a model whose layers differ (dense-first MoE, windows on some layers)
are the **mean over its layers** (:mod:`.params`, :mod:`.flops`, the per-op compute and the
activations): exact for the whole model's parameters and FLOPs. A pipeline stage's parameters
(weights, gradients, optimizer state), gradient buckets, activations and per-op compute count
the dense-first layers it really holds (the first stage's,
:func:`willitscale.workload.stages.stage_dense_layers`); a flat ``--hfu``/``--mfu`` times its
layers at the mean layer's FLOPs (a named approximation: DeepSeek-V3's dense and MoE layers
run nearly the same FLOPs per token, 2 x 583M and 2 x 585M).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from willitscale.errors import ConfigError

__all__ = ["Transformer", "NORMS", "QK_NORMS", "POSITIONS", "IMPLEMENTATIONS"]

NORMS = ("layernorm", "rmsnorm")
#: QK-norm: none; ``head`` one RMSNorm over head_dim shared by the heads (Qwen3, Gemma 3);
#: ``full`` one over all of q_dim and one over kv_dim (OLMo 2)
QK_NORMS = ("none", "head", "full")
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
                "sliding_window": 100_000_000, "moe_experts": 100_000,
                "v_head_dim": 100_000, "q_lora_rank": 1_000_000, "kv_lora_rank": 1_000_000,
                "rope_head_dim": 100_000, "moe_shared_ffn": 10_000_000, "dense_ffn": 10_000_000,
                "dense_layers": 10_000, "window_layers": 10_000, "layer_norms": 8}


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
    moe_shared_ffn: int = 0  #: MoE: width of the shared experts' MLP (all of them), 0 = none
    moe_shared_gate: bool = False  #: a hidden -> 1 sigmoid gate on the shared expert (Qwen2-MoE)
    dense_layers: int = 0  #: MoE: the first layers with a dense MLP (DeepSeek first_k_dense_replace)
    dense_ffn: int | None = None  #: width of those dense MLPs; None means ffn_hidden
    v_head_dim: int | None = None  #: value head width; None means head_dim (MLA: 128 vs 192)
    q_lora_rank: int | None = None  #: MLA: the queries' low-rank bottleneck; None = one projection
    kv_lora_rank: int | None = None  #: MLA when set: the rank of the compressed key-value latent
    rope_head_dim: int = 0  #: MLA: the decoupled rotary part of head_dim (its key shared by heads)
    qk_norm: str = "none"  #: one of QK_NORMS
    layer_norms: int = 2  #: norms per layer (pre-norm: 2; Gemma 2/3 sandwich: 4)
    window_layers: int | None = None  #: layers using sliding_window; None means all of them
    implementation: str = "fused"  #: one of IMPLEMENTATIONS (activation memory)
    source: str = ""

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "vocab", "max_positions"):
            _positive_int(self.name, key, getattr(self, key))
        for key in ("kv_heads", "head_dim", "ffn_hidden", "seq_len", "sliding_window", "v_head_dim",
                    "q_lora_rank", "kv_lora_rank", "dense_ffn", "window_layers", "layer_norms"):
            _positive_int(self.name, key, getattr(self, key), optional=True)
        for key in ("moe_shared_ffn", "dense_layers", "rope_head_dim"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not 0 <= value <= SHAPE_LIMITS[key]:
                raise ConfigError(f"model {self.name}: {key}", value,
                                  f"an integer from 0 to {SHAPE_LIMITS[key]:,}")
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
        if self.v_head_dim is None:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        if self.dense_ffn is None:
            object.__setattr__(self, "dense_ffn", self.ffn_hidden)
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
        self._check_extensions()

    def _check_extensions(self) -> None:
        """The MLA, shared-expert, dense-first, QK-norm and window-pattern fields agree."""
        if not self.moe_experts:
            for key in ("moe_shared_ffn", "dense_layers"):
                if getattr(self, key):
                    raise ConfigError(f"model {self.name}: {key}", getattr(self, key),
                                      "0 for a dense model (it describes a mixture of experts)")
            if self.moe_shared_gate:
                raise ConfigError(f"model {self.name}: moe_shared_gate", True, "false for a dense model")
        if self.moe_shared_gate and not self.moe_shared_ffn:
            raise ConfigError(f"model {self.name}: moe_shared_gate", True,
                              "false without a shared expert (moe_shared_ffn = 0)")
        if self.dense_layers > self.layers:
            raise ConfigError(f"model {self.name}: dense_layers", self.dense_layers,
                              f"at most layers = {self.layers}")
        if self.window_layers is not None and (self.sliding_window is None or self.window_layers > self.layers):
            raise ConfigError(f"model {self.name}: window_layers", self.window_layers,
                              f"at most layers = {self.layers}, with a sliding_window")
        if self.qk_norm not in QK_NORMS:
            raise ConfigError(f"model {self.name}: qk_norm", self.qk_norm, "one of " + ", ".join(QK_NORMS))
        if self.kv_lora_rank is None:
            if self.q_lora_rank is not None or self.rope_head_dim:
                raise ConfigError(f"model {self.name}: q_lora_rank/rope_head_dim",
                                  (self.q_lora_rank, self.rope_head_dim),
                                  "unset without multi-head latent attention (kv_lora_rank)")
            return
        if self.kv_heads != self.heads:
            raise ConfigError(f"model {self.name}: kv_heads", self.kv_heads,
                              f"= heads = {self.heads} with multi-head latent attention")
        if not 0 < self.rope_head_dim < self.head_dim:
            raise ConfigError(f"model {self.name}: rope_head_dim", self.rope_head_dim,
                              f"from 1 to head_dim - 1 = {self.head_dim - 1} (head_dim = nope + rope)")

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
    def v_dim(self) -> int:
        """Width of the values: kv_heads x v_head_dim (= kv_dim unless MLA)."""
        return self.kv_heads * self.v_head_dim

    @property
    def o_dim(self) -> int:
        """Width of the attention output (the output projection's input): heads x v_head_dim."""
        return self.heads * self.v_head_dim

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank is not None

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def window_layer_count(self) -> int:
        """Layers whose attention uses the sliding window (0 without one)."""
        if self.sliding_window is None:
            return 0
        return self.layers if self.window_layers is None else self.window_layers

    @property
    def experts_per_token(self) -> int:
        """MLPs each token passes through: top-k for MoE, 1 for a dense model."""
        return self.moe_top_k if self.is_moe else 1

    @property
    def mlp_experts(self) -> int:
        """MLP copies stored per layer: the experts for MoE, 1 for a dense model."""
        return self.moe_experts if self.is_moe else 1

    def __repr__(self) -> str:
        """The name and the fields that differ from what the others imply (short, for notebooks):
        derived defaults (kv_heads = heads, v_head_dim = head_dim, ...) and the source are left out."""
        implied = {"kv_heads": self.heads, "head_dim": self.hidden // self.heads,
                   "ffn_hidden": 4 * self.hidden, "seq_len": self.max_positions,
                   "qkv_bias": self.bias, "attn_out_bias": self.bias, "mlp_bias": self.bias,
                   "v_head_dim": self.head_dim, "dense_ffn": self.ffn_hidden}
        shown = [f"name={self.name!r}"]
        for f in fields(self):
            if f.name in ("name", "source"):
                continue
            value = getattr(self, f.name)
            if value != implied.get(f.name, f.default) or f.name in ("layers", "hidden", "heads", "vocab"):
                shown.append(f"{f.name}={value!r}")
        return "Transformer(" + ", ".join(shown) + ")"

    def shape_dict(self) -> dict[str, object]:
        """The shape as plain values (for JSON output and TOML round trips)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("name", "source")}

"""Exact parameter counts of a :class:`~willitscale.workload.transformer.Transformer`.

Counted matrix by matrix (see ``docs/workload.md`` for the derivation):

* token embedding ``vocab x hidden``; learned positions ``max_positions x hidden``;
* per layer, attention: q ``hidden x heads*head_dim``, k and v ``hidden x kv_heads*head_dim``
  each, output ``heads*head_dim x hidden``, plus their biases where the shape has them;
* per layer, MLP: ``2 x hidden x ffn`` (ungated) or ``3 x hidden x ffn`` (gated), biases
  ``ffn + hidden`` (ungated) or ``2 ffn + hidden`` (gated); for MoE, ``experts`` copies plus a
  ``hidden x experts`` router;
* norms: LayerNorm has a weight and a bias (2 x hidden), RMSNorm a weight (hidden); two per
  layer (``layer_norms``: four in Gemma 2/3), one at the end, one after the embedding for BLOOM;
  QK-norm adds ``2 head_dim`` (per-head norms, Qwen3) or ``q_dim + kv_dim`` (OLMo 2);
* LM head ``hidden x vocab`` unless tied to the token embedding.

Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 section 2.1; the Hugging Face
``DeepseekV3Attention`` module): ``q_a`` ``hidden x q_lora_rank`` + its RMSNorm + ``q_b``
``q_lora_rank x heads*head_dim`` (or one ``hidden x heads*head_dim`` without ``q_lora_rank``);
``kv_a`` ``hidden x (kv_lora_rank + rope_head_dim)`` + an RMSNorm over ``kv_lora_rank`` +
``kv_b`` ``kv_lora_rank x heads*(head_dim - rope_head_dim + v_head_dim)``; output
``heads*v_head_dim x hidden``. A MoE layer adds its shared experts' gated MLP
(``moe_shared_ffn`` wide, every token) and Qwen2-MoE's ``hidden x 1`` shared-expert gate;
the first ``dense_layers`` layers hold one MLP of ``dense_ffn`` instead.

Per-layer fields of :class:`ParamCount` are the **mean** over the layers when they differ
(dense-first MoE): ``layers x per_layer = layers_total`` exactly.

``non_embedding = total - token embedding - position embedding``: Kaplan et al. (2020)'s
``N``, and what the GPT-2 article ('The Impact of GPU Networking (Part 1)') calls "GPT-2 ~85M" and "GPT-2 Large ~708M".
An untied LM head is part of it (Qwen2's model card excludes it too; use ``layers_total``).
Counts are Python ints: exact at any size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.workload.arrays import float_or_array
from willitscale.workload.transformer import Transformer

__all__ = [
    "ParamCount",
    "param_count",
    "norm_params",
    "attention_params",
    "mlp_params",
    "qk_norm_params",
    "mlp_block_params",
    "router_params",
    "routed_expert_params",
    "layer_fixed_params",
    "layer_params_per_tp_rank",
    "routed_expert_params_per_tp_rank",
    "tp_divides_shape",
    "embedding_params_per_tp_rank",
    "head_params_per_tp_rank",
]


def norm_params(model: Transformer) -> int:
    """Parameters of one norm: weight and bias for LayerNorm, weight only for RMSNorm."""
    return 2 * model.hidden if model.norm == "layernorm" else model.hidden


def qk_norm_params(model: Transformer) -> int:
    """Parameters of one layer's QK-norm: ``2 head_dim`` per-head (Qwen3, Gemma 3), ``q_dim +
    kv_dim`` over all heads (OLMo 2), else 0."""
    if model.qk_norm == "head":
        return 2 * model.head_dim
    return model.q_dim + model.kv_dim if model.qk_norm == "full" else 0


def _mla_parts(model: Transformer) -> tuple[int, int]:
    """MLA ``(replicated, split)`` parameters: the down projections and their norms (every
    tensor-parallel rank holds them: Megatron-Core's ``linear_q_down_proj`` and
    ``linear_kv_down_proj`` are ``duplicated``, NVIDIA/Megatron-LM
    megatron/core/transformer/multi_latent_attention.py), and the per-head up and output
    projections (split by heads)."""
    h, q, r = model.hidden, model.q_dim, model.kv_lora_rank
    per_head_kv = model.heads * (model.head_dim - model.rope_head_dim + model.v_head_dim)
    replicated = h * (r + model.rope_head_dim) + r  # kv_a (latent + shared rope key), its norm
    split = r * per_head_kv + model.o_dim * h  # kv_b, output
    if model.q_lora_rank is None:
        split += h * q
    else:
        replicated += h * model.q_lora_rank + model.q_lora_rank  # q_a and its norm
        split += model.q_lora_rank * q  # q_b
    return replicated, split


def attention_params(model: Transformer) -> int:
    """Parameters of one attention block: q, k, v, output projections, their biases and the
    QK-norm (MLA: its down and up projections and latent norms)."""
    if model.is_mla:
        return sum(_mla_parts(model))
    h, q, kv, v = model.hidden, model.q_dim, model.kv_dim, model.v_dim
    weights = h * (q + kv + v) + model.o_dim * h
    biases = (q + kv + v) * model.qkv_bias + h * model.attn_out_bias
    return weights + biases + qk_norm_params(model)


def _mlp_of_width(model: Transformer, f: int) -> int:
    h = model.hidden
    up = 2 if model.gated_mlp else 1  # gate and up projections, or the single up projection
    return (up + 1) * h * f + (up * f + h) * model.mlp_bias


def mlp_params(model: Transformer) -> int:
    """Parameters of one MLP (one expert for MoE): 2 or 3 matrices and their biases."""
    return _mlp_of_width(model, model.ffn_hidden)


def _moe_mlp(model: Transformer, experts: int) -> int:
    """MLP parameters of one MoE layer with ``experts`` routed experts (router excluded)."""
    shared = _mlp_of_width(model, model.moe_shared_ffn) if model.moe_shared_ffn else 0
    return experts * mlp_params(model) + shared + model.hidden * model.moe_shared_gate


def _mean(total: int, layers: int) -> int | float:
    return total // layers if total % layers == 0 else total / layers


def _mlp_totals(model: Transformer) -> tuple[int, int]:
    """(all, active) MLP parameters summed over the layers (routers excluded)."""
    dense = (model.layers - model.moe_layers) * _mlp_of_width(model, model.dense_ffn)
    if not model.is_moe:
        return dense, dense
    n = model.moe_layers
    return dense + n * _moe_mlp(model, model.moe_experts), dense + n * _moe_mlp(model, model.moe_top_k)


def mlp_block_params(model: Transformer) -> int | float:
    """MLP parameters of the mean layer: every expert, the shared experts and their gate, the
    dense-first layers' MLPs (``mlp_params`` for a dense model); the router excluded."""
    return _mean(_mlp_totals(model)[0], model.layers)


def routed_expert_params(model: Transformer) -> int | float:
    """Routed experts' MLP parameters of the mean layer (what expert parallelism divides; the
    shared experts and dense-first MLPs stay whole); 0 for a dense model."""
    return _mean(model.moe_layers * model.moe_experts * mlp_params(model), model.layers)


def router_params(model: Transformer) -> int | float:
    """MoE router parameters of the mean layer (``hidden x experts`` on each MoE layer)."""
    return _mean(model.moe_layers * model.hidden * model.moe_experts, model.layers)


def layer_fixed_params(model: Transformer) -> int | float:
    """Parameters of the mean layer every tensor-parallel rank holds whole: the norms and the
    router."""
    return model.layer_norms * norm_params(model) + router_params(model)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamCount:
    """Parameter counts of one model (exact integers).

    ``per_layer`` is one transformer layer with all its experts; ``per_layer_active`` what one
    token uses of it (= ``per_layer`` for a dense model). ``active`` is the total a token uses:
    Mixtral 8x7B is 46.7B total, 12.9B active.
    """

    total: int
    embedding: int  #: token + position embedding tables
    non_embedding: int  #: total - embedding (Kaplan's N; includes an untied LM head)
    token_embedding: int
    position_embedding: int
    embedding_norm: int  #: the norm after the embedding (BLOOM), else 0
    per_layer: int | float  #: the mean layer (a float when dense-first layers make them differ)
    per_layer_active: int | float
    layer_attention: int  #: attention block of one layer
    layer_mlp: int | float  #: all MLP experts of the mean layer (the MLP for a dense model)
    layer_router: int | float  #: MoE router of the mean layer, else 0
    layer_norms: int  #: the norms of one layer
    layers_total: int  #: all layers (layers x per_layer)
    final_norm: int
    lm_head: int  #: untied output matrix, 0 when tied to the token embedding
    active: int  #: parameters one token passes through (= total for a dense model)
    active_non_embedding: int

    def to_json(self) -> dict[str, int | float]:
        """JSON keys with units: ``params_*`` are counts."""
        return {f"params_{k}": getattr(self, k) for k in self.__dataclass_fields__}


def param_count(model: Transformer) -> ParamCount:
    """Exact parameter counts of ``model``'s shape (no tensor parallelism)."""
    token = model.vocab * model.hidden
    position = model.max_positions * model.hidden if model.position == "learned" else 0
    norm = norm_params(model)
    attention = attention_params(model)
    mlp_all, mlp_active = _mlp_totals(model)
    # Mixtral's, Qwen's and DeepSeek's gates have no bias (DeepSeek-V3's 256-entry routing bias
    # e_score_correction_bias, 0.01M parameters in all, is left out)
    routers = model.moe_layers * model.hidden * model.moe_experts
    fixed = model.layers * (attention + model.layer_norms * norm) + routers
    layers_total, layers_active = fixed + mlp_all, fixed + mlp_active
    emb_norm = norm if model.embedding_norm else 0
    lm_head = 0 if model.tied_embeddings else model.vocab * model.hidden
    rest = emb_norm + norm + lm_head  # embedding norm, final norm, untied head
    total = token + position + layers_total + rest
    active = token + position + layers_active + rest
    return ParamCount(
        total=total,
        embedding=token + position,
        non_embedding=total - token - position,
        token_embedding=token,
        position_embedding=position,
        embedding_norm=emb_norm,
        per_layer=_mean(layers_total, model.layers),
        per_layer_active=_mean(layers_active, model.layers),
        layer_attention=attention,
        layer_mlp=_mean(mlp_all, model.layers),
        layer_router=_mean(routers, model.layers),
        layer_norms=model.layer_norms * norm,
        layers_total=layers_total,
        final_norm=norm,
        lm_head=lm_head,
        active=active,
        active_non_embedding=active - token - position,
    )


# -- tensor parallel shards (Megatron-style; numpy-friendly in ``tp``) -----------------------

def _kv_heads_per_rank(model: Transformer, tp):
    """K/V heads one TP rank holds: kv_heads / tp, but at least one (replicated when kv_heads < tp)."""
    return np.maximum(model.kv_heads / np.asarray(tp, dtype=float), 1.0)


def tp_divides_shape(model: Transformer, tp):
    """Whether ``tp`` tensor-parallel ranks split ``model`` evenly (numpy-friendly in ``tp``):
    heads and FFN width divisible by ``tp``, and key/value heads either divisible by ``tp`` or
    a divisor of it (then each rank keeps a replica of one kv head)."""
    t = np.asarray(tp)
    widths = [model.ffn_hidden] + ([model.dense_ffn] if model.moe_layers < model.layers else []) \
        + ([model.moe_shared_ffn] if model.moe_shared_ffn else [])
    ok = (t >= 1) & (model.heads % t == 0) & ((model.kv_heads % t == 0) | (t % model.kv_heads == 0))
    for width in widths:
        ok = ok & (width % t == 0)
    return bool(ok) if np.ndim(ok) == 0 else ok


def layer_params_per_tp_rank(model: Transformer, tp=1, kind: str = "mean"):
    """Parameters of one layer held by one of ``tp`` tensor-parallel ranks (Megatron layout).

    Column-parallel q/k/v and MLP up (and gate) projections are split with their biases;
    row-parallel output and MLP down projections split their weight but replicate their bias;
    norms, QK-norms, the MoE router, the shared-expert gate and MLA's down projections are
    replicated; K/V are replicated when ``kv_heads < tp``. ``kind``: the mean layer (``mean``),
    a dense-first layer (``dense``) or a MoE layer with its router (``moe``).
    ``tp`` may be a numpy array; the result is float (a fractional count means ``tp`` does
    not divide the shape).
    """
    t = np.asarray(tp, dtype=float)
    h, q = model.hidden, model.q_dim
    if model.is_mla:
        replicated, split = _mla_parts(model)
        attention = replicated + split / t
    else:
        heads = _kv_heads_per_rank(model, tp)
        kv, v = heads * model.head_dim, heads * model.v_head_dim
        attention = (h * q + q * model.qkv_bias) / t + (h + model.qkv_bias) * (kv + v) \
            + model.o_dim * h / t + h * model.attn_out_bias + qk_norm_params(model)
    up = 2 if model.gated_mlp else 1

    def mlp(f):  # one MLP of width f on one rank: matrices split, the down bias replicated
        return ((up + 1) * h * f + up * f * model.mlp_bias) / t + h * model.mlp_bias

    norms = model.layer_norms * norm_params(model)
    dense_mlp = mlp(model.dense_ffn)
    moe_mlp = 0.0
    if model.is_moe:
        shared = mlp(model.moe_shared_ffn) if model.moe_shared_ffn else 0.0
        moe_mlp = model.moe_experts * mlp(model.ffn_hidden) + shared + h * model.moe_shared_gate
    if kind == "dense":
        return float_or_array(attention + dense_mlp + norms)
    if kind == "moe":
        return float_or_array(attention + moe_mlp + norms + h * model.moe_experts)
    n_moe = model.moe_layers
    mlps = (model.layers - n_moe) * dense_mlp + n_moe * moe_mlp
    result = attention + mlps / model.layers + layer_fixed_params(model)
    return float_or_array(result)


def routed_expert_params_per_tp_rank(model: Transformer, tp=1):
    """Routed experts' parameters of one MoE layer on one of ``tp`` tensor-parallel ranks (what
    expert parallelism then divides by ``ep``); 0 for a dense model."""
    t = np.asarray(tp, dtype=float)
    h, f, up = model.hidden, model.ffn_hidden, 2 if model.gated_mlp else 1
    one = ((up + 1) * h * f + up * f * model.mlp_bias) / t + h * model.mlp_bias
    return float_or_array(model.moe_experts * one * np.ones_like(t))


def embedding_params_per_tp_rank(model: Transformer, tp=1):
    """Embedding parameters one TP rank holds: vocab-parallel token table, replicated positions and norm."""
    p = param_count(model)
    result = p.token_embedding / np.asarray(tp, dtype=float) + p.position_embedding + p.embedding_norm
    return float_or_array(result)


def head_params_per_tp_rank(model: Transformer, tp=1):
    """Final norm (replicated) and untied LM head (vocab-parallel) on one TP rank."""
    p = param_count(model)
    result = p.final_norm + p.lm_head / np.asarray(tp, dtype=float)
    return float_or_array(result)

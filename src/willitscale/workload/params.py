"""Exact parameter counts of a :class:`~willitscale.workload.transformer.Transformer`.

Counted matrix by matrix (see ``docs/workload.md`` for the derivation):

* token embedding ``vocab x hidden``; learned positions ``max_positions x hidden``;
* per layer, attention: q ``hidden x heads*head_dim``, k and v ``hidden x kv_heads*head_dim``
  each, output ``heads*head_dim x hidden``, plus their biases where the shape has them;
* per layer, MLP: ``2 x hidden x ffn`` (ungated) or ``3 x hidden x ffn`` (gated), biases
  ``ffn + hidden`` (ungated) or ``2 ffn + hidden`` (gated); for MoE, ``experts`` copies plus a
  ``hidden x experts`` router;
* norms: LayerNorm has a weight and a bias (2 x hidden), RMSNorm a weight (hidden); two per
  layer, one at the end, one after the embedding for BLOOM;
* LM head ``hidden x vocab`` unless tied to the token embedding.

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
    "layer_params_per_tp_rank",
    "tp_divides_shape",
    "embedding_params_per_tp_rank",
    "head_params_per_tp_rank",
]


def norm_params(model: Transformer) -> int:
    """Parameters of one norm: weight and bias for LayerNorm, weight only for RMSNorm."""
    return 2 * model.hidden if model.norm == "layernorm" else model.hidden


def attention_params(model: Transformer) -> int:
    """Parameters of one attention block: q, k, v, output projections and their biases."""
    h, q, kv = model.hidden, model.q_dim, model.kv_dim
    weights = h * (q + 2 * kv) + q * h
    biases = (q + 2 * kv) * model.qkv_bias + h * model.attn_out_bias
    return weights + biases


def mlp_params(model: Transformer) -> int:
    """Parameters of one MLP (one expert for MoE): 2 or 3 matrices and their biases."""
    h, f = model.hidden, model.ffn_hidden
    up = 2 if model.gated_mlp else 1  # gate and up projections, or the single up projection
    return (up + 1) * h * f + (up * f + h) * model.mlp_bias


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
    per_layer: int
    per_layer_active: int
    layer_attention: int  #: attention block of one layer
    layer_mlp: int  #: all MLP experts of one layer (the MLP for a dense model)
    layer_router: int  #: MoE router of one layer, else 0
    layer_norms: int  #: the two norms of one layer
    layers_total: int  #: layers x per_layer
    final_norm: int
    lm_head: int  #: untied output matrix, 0 when tied to the token embedding
    active: int  #: parameters one token passes through (= total for a dense model)
    active_non_embedding: int

    def to_json(self) -> dict[str, int]:
        """JSON keys with units: ``params_*`` are counts."""
        return {f"params_{k}": getattr(self, k) for k in self.__dataclass_fields__}


def param_count(model: Transformer) -> ParamCount:
    """Exact parameter counts of ``model``'s shape (no tensor parallelism)."""
    token = model.vocab * model.hidden
    position = model.max_positions * model.hidden if model.position == "learned" else 0
    norm = norm_params(model)
    attention = attention_params(model)
    mlp_one = mlp_params(model)
    router = model.hidden * model.moe_experts  # 0 for dense; Mixtral's gate has no bias
    per_layer = attention + model.mlp_experts * mlp_one + router + 2 * norm
    per_layer_active = attention + model.experts_per_token * mlp_one + router + 2 * norm
    emb_norm = norm if model.embedding_norm else 0
    lm_head = 0 if model.tied_embeddings else model.vocab * model.hidden
    rest = emb_norm + norm + lm_head  # embedding norm, final norm, untied head
    total = token + position + model.layers * per_layer + rest
    active = token + position + model.layers * per_layer_active + rest
    return ParamCount(
        total=total,
        embedding=token + position,
        non_embedding=total - token - position,
        token_embedding=token,
        position_embedding=position,
        embedding_norm=emb_norm,
        per_layer=per_layer,
        per_layer_active=per_layer_active,
        layer_attention=attention,
        layer_mlp=model.mlp_experts * mlp_one,
        layer_router=router,
        layer_norms=2 * norm,
        layers_total=model.layers * per_layer,
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
    ok = (t >= 1) & (model.heads % t == 0) & (model.ffn_hidden % t == 0) \
        & ((model.kv_heads % t == 0) | (t % model.kv_heads == 0))
    return bool(ok) if np.ndim(ok) == 0 else ok


def layer_params_per_tp_rank(model: Transformer, tp=1):
    """Parameters of one layer held by one of ``tp`` tensor-parallel ranks (Megatron layout).

    Column-parallel q/k/v and MLP up (and gate) projections are split with their biases;
    row-parallel output and MLP down projections split their weight but replicate their bias;
    norms and the MoE router are replicated; K/V are replicated when ``kv_heads < tp``.
    ``tp`` may be a numpy array; the result is float (a fractional count means ``tp`` does
    not divide the shape).
    """
    t = np.asarray(tp, dtype=float)
    h, q, f = model.hidden, model.q_dim, model.ffn_hidden
    kv = _kv_heads_per_rank(model, tp) * model.head_dim
    attention = (h * q + q * model.qkv_bias) / t + 2 * (h * kv + kv * model.qkv_bias) \
        + q * h / t + h * model.attn_out_bias
    up = 2 if model.gated_mlp else 1
    mlp = ((up + 1) * h * f + up * f * model.mlp_bias) / t + h * model.mlp_bias
    router = h * model.moe_experts
    result = attention + model.mlp_experts * mlp + router + 2 * norm_params(model)
    return float_or_array(result)


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

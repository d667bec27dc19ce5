"""Pipeline stages: which layers each stage holds, its parameters and its FLOPs per micro-batch.

A plan's ``pp`` stages are described by three *columns*, each standing for stages that do the
same work: the **first** stage (token embedding; also the head when ``pp = 1``), the ``pp - 2``
**middle** stages and the **last** stage (final norm and LM head). Arrays have shape
``(plans, 3)``; :func:`stage_counts` says how many stages each column stands for.

Layers per stage: ``L / pp`` when ``pp`` divides the layers. Otherwise, when ``pp`` divides
``L + 2``, the embedding and the head each count as one layer, as Megatron-DeepSpeed's
``--pp-partition-method 'type:transformer|embedding'`` balances them (BLOOM-176B: 70 layers on
12 stages = 5, 6 x 10, 5). Any other split is rejected.

Per GPU (one tensor-parallel rank of one context-parallel rank), one micro-batch of ``b``
samples of ``s`` tokens: ``T = b s / cp`` tokens, and

    forward   = (n x F_layer + head x F_head) x T / tp
    backward  = 2 x forward
    recompute = n x R_layer(mode) x T / tp

with the per-token FLOPs of :mod:`willitscale.workload.flops`. A tied LM head on the last stage
keeps a copy of the token embedding (Megatron-LM's word-embedding copy, kept in step by an
all-reduce of its gradient between the first and last stages).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from willitscale.workload.flops import RECOMPUTE, training_flops
from willitscale.workload.params import param_count

__all__ = ["ModelTerms", "model_terms", "stage_layers", "stage_counts", "stage_flags",
           "stage_dense_layers", "layer_kinds"]

#: index of each recomputation mode in :attr:`ModelTerms.recompute_token`
RECOMPUTE_INDEX = {name: i for i, name in enumerate(RECOMPUTE)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTerms:
    """The numbers of one model at one sequence length that every plan shares."""

    layers: int
    hidden: int  #: 0 without a shape (``--params``)
    has_shape: bool
    layer_forward_token: float  #: FLOPs per token, one layer forward, as executed (time)
    #: FLOPs per token, one layer forward, attention scores counted in full (PaLM/Megatron: MFU)
    layer_model_token: float
    #: FLOPs per token, one layer forward, causal attention counted for its unmasked half (the
    #: causal-adjusted MFU)
    layer_causal_token: float = 0.0
    head_forward_token: float  #: FLOPs per token, LM head forward
    recompute_token: np.ndarray  #: FLOPs per token per layer recomputed, by mode (none, selective, full)
    attention_core_token: float  #: Q K^T and A V forward FLOPs per token per layer, executed
    #: forward FLOPs per token per layer of the two column-parallel GEMMs (Megatron-LM: QKV and
    #: the MLP's first, gate + up when gated): their weight-gradient GEMMs are what the backward's
    #: input-gradient all-reduces overlap (:mod:`willitscale.step.tensor`)
    qkv_token: float = 0.0
    fc1_token: float = 0.0
    kv_dim: int  #: key/value width (all heads)
    kv_heads: int
    head_dim: int
    v_head_dim: int = 0  #: value head width (0: = head_dim; MLA's differ)
    tied: bool
    moe: bool
    experts: int
    top_k: int
    moe_layer_share: float = 1.0  #: the share of layers that are MoE (dense-first layers are not)
    token_embedding: float  #: parameters
    total_params: float


def model_terms(scenario) -> ModelTerms:
    """The shared numbers for ``scenario``'s model (or bare parameter count) and sequence length."""
    s = scenario.seq_len
    if scenario.model is None:
        p = float(scenario.params)
        # --params: one "layer" of 2P forward FLOPs per token; full recomputation adds 2P (8PD)
        return ModelTerms(layers=1, hidden=0, has_shape=False, layer_forward_token=2.0 * p,
                          layer_model_token=2.0 * p, layer_causal_token=2.0 * p,
                          head_forward_token=0.0, recompute_token=np.array([0.0, 0.0, 2.0 * p]),
                          attention_core_token=0.0, kv_dim=0, kv_heads=1, head_dim=0, tied=False,
                          moe=False, experts=0, top_k=0, token_embedding=0.0, total_params=p)

    return _shaped_terms(scenario.model, s, scenario.options.flash_attention,
                         getattr(scenario.compute, "document_length", None))


@lru_cache(maxsize=256)
def _shaped_terms(model, s: int, flash: bool, docs: int | None) -> ModelTerms:
    """:func:`model_terms` of a model with a shape (kept: scenarios share their model's terms;
    the result is read, never changed)."""
    # executed FLOPs (time): a causal FlashAttention kernel skips the masked blocks, so only the
    # unmasked half of the scores runs; standard attention computes them all. Model FLOPs (MFU)
    # count the scores in full, as PaLM and Megatron-LM do, so MFU compares across papers.
    # With intra-document masking (document_length) the fused kernel also skips the blocks
    # across documents: executed and causal-adjusted FLOPs count each query's keys within its
    # document; model FLOPs still count the whole sequence (the papers' convention).
    causal = flash
    rec = [float(training_flops(model, s, recompute=m, causal=causal, flash_attention=flash,
                                document_length=docs).layer_recompute_per_token)
           for m in RECOMPUTE]
    flops = training_flops(model, s, causal=causal, flash_attention=flash, document_length=docs)
    full = training_flops(model, s, flash_attention=flash)
    half = training_flops(model, s, causal=True, flash_attention=flash, document_length=docs)
    counts = param_count(model)
    return ModelTerms(
        layers=model.layers, hidden=model.hidden, has_shape=True,
        layer_forward_token=float(flops.layer_forward_per_token),
        layer_model_token=float(full.layer_forward_per_token),
        layer_causal_token=float(half.layer_forward_per_token),
        head_forward_token=float(flops.lm_head_forward_per_token),
        recompute_token=np.array(rec), attention_core_token=float(flops.layer_forward.attention_core),
        qkv_token=float(flops.layer_forward.qkv),
        fc1_token=float(flops.layer_forward.mlp) * (2.0 if model.gated_mlp else 1.0)
        / (3.0 if model.gated_mlp else 2.0),
        kv_dim=model.kv_dim, kv_heads=model.kv_heads, head_dim=model.head_dim,
        v_head_dim=model.v_head_dim,
        tied=model.tied_embeddings, moe=model.is_moe, experts=model.moe_experts,
        top_k=model.moe_top_k, token_embedding=float(counts.token_embedding),
        moe_layer_share=model.moe_layers / model.layers if model.is_moe else 1.0,
        total_params=float(counts.total))


def stage_counts(pp):
    """Stages each column stands for: ``[1, pp - 2, 1]`` (``[1, 0, 0]`` for one stage)."""
    p = np.asarray(pp, dtype=float)
    return np.stack([np.ones_like(p), np.maximum(p - 2, 0.0), (p >= 2).astype(float)], axis=-1)


def stage_flags(pp, tied: bool):
    """``(embedding, head, tied_copy)`` flags per column, each shape ``(plans, 3)``."""
    p = np.asarray(pp, dtype=float)
    one, zero = np.ones_like(p), np.zeros_like(p)
    emb = np.stack([one, zero, zero], axis=-1)
    head = np.stack([(p == 1).astype(float), zero, (p >= 2).astype(float)], axis=-1)
    copy = head * np.stack([zero, zero, one], axis=-1) * float(tied)
    return emb, head, copy


def stage_layers(layers: int, pp):
    """``(layers per column (plans, 3), valid)``: uniform, or the embedding-balanced split."""
    p = np.asarray(pp, dtype=float)
    uniform = np.mod(layers, p) == 0
    balanced = ~uniform & (p >= 3) & (np.mod(layers + 2, p) == 0)
    per = np.where(uniform, layers / p, (layers + 2) / p)
    edge = np.where(uniform, per, per - 1)
    return np.stack([edge, per, edge], axis=-1), uniform | balanced


def stage_dense_layers(dense_layers: int, layers: int, per_column):
    """Dense-first layers each column holds (shape of ``per_column``, the layers per column):
    the first stage holds the model's first layers, so as many of them as it has room for;
    the rest are spread over the other columns in proportion to their layers (exact when the
    first stage holds them all, as DeepSeek-V3's 3 do on any split of its 61 layers)."""
    n = np.asarray(per_column, dtype=float)
    first = np.minimum(float(dense_layers), n[..., 0])
    rest_layers = layers - n[..., 0]
    share = np.where(rest_layers > 0, (dense_layers - first) / np.maximum(rest_layers, 1.0), 0.0)
    return np.concatenate([first[..., None], n[..., 1:] * share[..., None]], axis=-1)


@lru_cache(maxsize=64)
def layer_kinds(model):
    """``(dense-first layer, MoE layer)`` shapes of a mixture of experts whose first layers are
    dense: the same model with every layer of one kind, so that a per-layer count of it is that
    layer's; None for any other model."""
    if not (model.is_moe and model.dense_layers):
        return None
    moe = replace(model, dense_layers=0, dense_ffn=None)
    dense = replace(model, moe_experts=0, moe_top_k=0, moe_shared_ffn=0, moe_shared_gate=False,
                    dense_layers=0, ffn_hidden=model.dense_ffn, dense_ffn=None)
    return dense, moe

"""Activation memory of one micro-batch: what the forward pass keeps for the backward pass.

Generalised from Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", section 4: per layer, 16-bit activations, 1-byte dropout masks,

    s b h (34 + 5 a s / h)                         no parallelism, no recomputation
    s b h (10 + 24/t + 5 a s / (h t))              tensor parallel t
    s b h (34 + 5 a s / h) / t                     tensor + sequence parallel
    s b h 34 / t                                   ... + selective recomputation
    2 s b h                                        full recomputation (layer input only)

Tensor by tensor (bytes; ``p`` = bytes per activation element, ``r`` = 1/t with sequence
parallelism else 1; ``q``, ``kv`` and ``f`` are the per-rank query, key/value and FFN widths;
``a`` heads per rank; ``k`` experts per token):

* norms: each stores its input, ``p s b h r`` (two per layer);
* attention: the q/k/v projection's input ``p s b h r``; Q and K for ``Q K^T``, V for
  ``A V``: ``p s b (q + 2 kv)``; the output projection's input ``p s b q``; with dropout a
  1-byte mask ``s b h r``;
* attention scores (standard attention): the softmax output ``p a s^2 b``, and with dropout its
  mask ``a s^2 b`` and the dropped-out probabilities ``p a s^2 b``; FlashAttention keeps only
  the fp32 log-sum-exp per query and head, ``4 a s b`` (Dao et al. 2022), and regenerates
  its dropout mask from the RNG state;
* MLP: the up projection's input ``p s b h r``; ungated, the activation's input and the down
  projection's input ``2 p s b f``; gated, the gate and up outputs and the down projection's
  input ``3 p s b f``; with dropout a mask ``s b h r``;
* MoE MLP: the router's fp32 probabilities ``4 s b E r``, then per routed copy (``k`` of them)
  the expert's input ``p s b h r``, its inner tensors (as above) and its output ``p s b h r``
  (kept to differentiate the routing weights); dropless routing, no capacity padding; shared
  experts keep an MLP's inner tensors of their width for every token;
* multi-head latent attention adds the latents the up projections read (the q latent and its
  norm's input ``2 p s b q_lora``, the kv latent, its norm's input and the rotary key
  ``p s b (2 kv_lora + rope)``, whole on every TP rank); K is ``heads x head_dim / t`` wide,
  V and the output projection's input ``heads x v_head_dim / t``;
* layers that differ (dense-first MoE) count the mean layer; Gemma's four norms per layer keep
  four inputs.

Selective recomputation drops the attention-score tensors (and FlashAttention's log-sum-exp);
full recomputation keeps only each layer's input, ``p s b h r``, and rebuilds one layer at a
time during the backward pass (``recompute_transient``). Megatron-Core's ``--recompute-modules``
drop what each module rebuilds: ``core_attn`` the scores, ``mlp`` the MLP's inner tensors,
``layernorm`` the two norms' outputs (workload.recompute); ``layers:N`` / ``every:K`` mix
full and no recomputation over a stage's layers (memory.stage). Gradients of activations during
backward, workspace and fragmentation are not counted. The first pipeline stage adds the
embedding's dropout mask (and BLOOM's embedding-norm input); the last adds the final norm's and
LM head's inputs and the fp32 softmax of the vocab-parallel cross-entropy, ``4 s b V / t``.

**How the model's code runs** (``Transformer.implementation``) changes the count:

* ``fused`` (the formulas above): 16-bit activations, fused softmax/GELU kernels;
* ``autocast``: eager PyTorch modules under ``torch.autocast``. The residual stream stays fp32
  (the add of an fp32 input and a 16-bit output "run[s] in float32", PyTorch amp.rst), so each
  norm keeps a 4-byte input, and so does a fully recomputed layer's checkpoint;
* ``mingpt``: karpathy/minGPT @37baab7 under autocast, traced op by op (docs/memory.md): as
  ``autocast``, plus ``softmax`` autocasts to fp32 (its 4-byte output is kept, and a 16-bit cast
  of it for ``att @ v``), and ``NewGELU`` = ``0.5 x (1 + tanh(c (x + 0.044715 pow(x, 3))))``
  with ``pow`` autocast to fp32 keeps ``pow``'s fp32 input, ``tanh``'s fp32 output, ``1 + tanh``
  in fp32 and ``0.5 x`` in 16 bits: ``14 s b f`` bytes instead of the fused GELU's ``2 s b f``;
  eager attention (no FlashAttention) and dropout 0.1 everywhere (lightning-GPT's train.py).
  At ``a s / h = 2`` a layer keeps ``100 s b h`` bytes against Korthikanti's ``44``.

``distribute_saved``: full recomputation's layer inputs split over the tensor-parallel ranks
(Megatron-Core ``distribute_saved_activations``, metaseq ``--distribute-checkpointed-activations``;
Korthikanti et al. 2022 section 4.3: "2sbhL/t if we only store a portion of activations in
each tensor parallel rank").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.errors import ConfigError
from willitscale.workload.arrays import float_or_array
from willitscale.workload.flops import recompute_pick
from willitscale.workload.recompute import parse_recompute, rerun_modules
from willitscale.workload.transformer import Transformer

__all__ = ["ACTIVATION_BYTES", "activation_bytes", "ActivationMemory", "activation_memory"]

MASK_BYTES = 1  # a dropout mask is one byte per element (Korthikanti et al. 2022)
SOFTMAX_STAT_BYTES = 4  # FlashAttention's log-sum-exp is fp32
LOGITS_BYTES = 4  # cross-entropy works on fp32 logits
FP32_BYTES = 4

ACTIVATION_BYTES = 2  #: bf16/fp16 activations (and fp8 training's: see activation_bytes)


def activation_bytes(dtype: str) -> int:
    """Bytes per activation element for a compute dtype: 4 for fp32/tf32 (tf32 is a matmul mode
    on fp32 tensors), else 2 (bf16/fp16; FP8 training keeps bf16 activations outside its GEMMs)."""
    return 4 if dtype in ("fp32", "tf32") else ACTIVATION_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationMemory:
    """Activation bytes of one micro-batch on one tensor-parallel rank (floats or arrays).

    ``per_layer`` is what one layer keeps under the chosen recomputation; the ``layer_*``
    fields break down a layer *without* recomputation. A pipeline stage holding ``n`` layers
    keeps :meth:`stage_bytes` per in-flight micro-batch.
    """

    seq_len: object
    micro_batch: object
    recompute: object  #: mode name, or array of them
    tp: object
    sequence_parallel: object
    flash_attention: bool
    dropout: bool
    dtype_bytes: int
    layers: int
    layer_norms: object  #: inputs of the two norms
    layer_attention: object  #: q/k/v input, Q, K, V, output-projection input, dropout mask
    layer_attention_scores: object  #: softmax (+ dropout) over s x s, or FlashAttention's statistics
    layer_mlp: object  #: MLP (or MoE router + experts) tensors
    layer_no_recompute: object  #: sum of the four above
    per_layer: object  #: kept per layer under ``recompute``
    recompute_transient: object  #: rebuilt for one layer at a time during backward
    embedding: object  #: first pipeline stage only
    head: object  #: last pipeline stage only
    total: object  #: whole model on one pipeline stage: layers x per_layer + transient + embedding + head

    def stage_bytes(self, layers, *, first: bool = True, last: bool = True):
        """Bytes one micro-batch keeps on a pipeline stage of ``layers`` layers."""
        extra = (self.embedding if first else 0.0) + (self.head if last else 0.0)
        kept = np.asarray(layers, dtype=float) * np.asarray(self.per_layer)
        return float_or_array(kept + self.recompute_transient + extra)


def _check_positive(name: str, value) -> None:
    if np.any(np.asarray(value) < 1):
        raise ConfigError(name, value, "an integer >= 1")


def _mlp_bytes(model: Transformer, sbh_rep, sb, t, p: int, dropout: bool):
    """MLP tensors of the mean layer (see the module docstring)."""
    matrices = 3 if model.gated_mlp else 2
    mask = MASK_BYTES * sbh_rep if dropout else 0.0
    dense = p * sbh_rep + matrices * p * sb * model.dense_ffn / t + mask
    if not model.is_moe:
        return dense
    inner = matrices * p * sb * model.ffn_hidden / t
    router = 4.0 * sbh_rep / model.hidden * model.moe_experts  # fp32 probabilities, s b E r
    routed = model.moe_top_k * (2 * p * sbh_rep + inner)  # expert input + inner + output per copy
    shared = matrices * p * sb * model.moe_shared_ffn / t
    moe = p * sbh_rep + router + routed + shared + mask
    n = model.moe_layers
    return (n * moe + (model.layers - n) * dense) / model.layers


def _attention_bytes(model: Transformer, sbh_rep, sb, t, p: int):
    """The attention block's kept tensors but the scores and the dropout mask."""
    heads = np.maximum(model.kv_heads / t, 1.0)
    q, k, v, o = model.q_dim / t, heads * model.head_dim, heads * model.v_head_dim, model.o_dim / t
    latents = 0.0
    if model.is_mla:
        latents = 2 * (model.q_lora_rank or 0) + 2 * model.kv_lora_rank + model.rope_head_dim
    return p * sbh_rep + p * sb * (q + k + v + latents) + p * sb * o


def activation_memory(model: Transformer, seq_len=None, micro_batch=1, *, recompute="none",
                      tp=1, sequence_parallel=False, flash_attention: bool = True,
                      dropout: bool | None = None, dtype_bytes: int = 2,
                      distribute_saved: bool = False) -> ActivationMemory:
    """Activation bytes per micro-batch (numpy-friendly in ``seq_len``, ``micro_batch``, ``tp``,
    ``sequence_parallel`` and ``recompute``, which may be arrays of mode names).

    Defaults describe current practice (FlashAttention, no dropout, bf16); Korthikanti et
    al.'s ``34 + 5as/h`` is ``flash_attention=False, dropout=True``.
    """
    if isinstance(recompute, str):  # a mode name: its canonical rerun set (modules:core_attn ...)
        mode = parse_recompute(recompute)
        if mode.rerun != mode.name:
            raise ConfigError("recompute", recompute, "a mode recomputing every layer here "
                              "(layers:N and every:K are applied per pipeline stage, memory.stage)")
        recompute = mode.rerun
    eager = model.implementation != "fused"
    mingpt = model.implementation == "mingpt"
    if mingpt:  # eager attention, dropout 0.1 (lightning-GPT)
        flash_attention = False
        dropout = True if dropout is None else dropout
    dropout = bool(dropout)
    s = np.asarray(model.seq_len if seq_len is None else seq_len, dtype=float)
    b = np.asarray(micro_batch, dtype=float)
    t = np.asarray(tp, dtype=float)
    for name, value in (("seq_len", s), ("micro_batch", b), ("tp", t)):
        _check_positive(name, value)
    p = dtype_bytes
    rep = np.where(np.asarray(sequence_parallel, dtype=bool), 1.0 / t, 1.0)
    sb = s * b
    sbh_rep = sb * model.hidden * rep
    a = model.heads / t
    mask = MASK_BYTES * sbh_rep if dropout else 0.0

    residual = FP32_BYTES if eager else p  # what the norms (and a checkpoint) keep per element
    norms = model.layer_norms * residual * sbh_rep
    attention = _attention_bytes(model, sbh_rep, sb, t, p) + mask
    if flash_attention:
        scores = SOFTMAX_STAT_BYTES * a * sb
    elif mingpt:  # fp32 softmax output, its 16-bit cast for att @ v, the dropout mask
        scores = a * s * sb * (FP32_BYTES + (p if p < FP32_BYTES else 0) + (MASK_BYTES if dropout else 0))
    else:
        scores = a * s * sb * (p + (MASK_BYTES + p if dropout else 0.0))
    f = model.ffn_hidden / t
    mlp = _mlp_bytes(model, sbh_rep, sb, t, p, dropout)
    if mingpt:  # NewGELU's fp32 chain: 12 + p bytes per element where a fused GELU keeps p
        mlp = mlp + (3 * FP32_BYTES) * sb * f
    layer = norms + attention + scores + mlp

    checkpoint = residual * sbh_rep  # the layer input, all that full recomputation keeps
    if distribute_saved:  # split over the tensor-parallel ranks (already split with SP)
        checkpoint = np.where(np.asarray(sequence_parallel, dtype=bool), checkpoint, checkpoint / t)
    # what each module rebuilds in backward (workload.recompute): the attention core's scores;
    # the MLP's inner tensors (its input, the checkpoint of the submodule, and the residual
    # dropout mask stay); the two norms' outputs (the QKV and up projections' inputs)
    parts = {"core_attn": scores, "mlp": mlp - p * sbh_rep - (MASK_BYTES * sbh_rep if dropout else 0.0),
             "layernorm": 2 * p * sbh_rep}

    def dropped(rerun):
        modules = rerun_modules(rerun)
        if modules is None:
            return layer - checkpoint
        return sum((parts[m] for m in modules), 0 * layer)

    per_layer = recompute_pick(recompute, lambda r: layer - dropped(r))
    transient = recompute_pick(recompute, lambda r: layer if r == "full" else dropped(r))
    embedding = mask + (p * sbh_rep if model.embedding_norm else 0.0)
    head = (residual + p) * sbh_rep + LOGITS_BYTES * sb * model.vocab / t
    total = model.layers * per_layer + transient + embedding + head
    out = float_or_array
    return ActivationMemory(
        seq_len=out(s), micro_batch=out(b), recompute=recompute, tp=out(t),
        sequence_parallel=sequence_parallel, flash_attention=flash_attention, dropout=dropout,
        dtype_bytes=dtype_bytes, layers=model.layers,
        layer_norms=out(norms), layer_attention=out(attention), layer_attention_scores=out(scores),
        layer_mlp=out(mlp), layer_no_recompute=out(layer), per_layer=out(per_layer),
        recompute_transient=out(transient), embedding=out(embedding + 0 * layer), head=out(head),
        total=out(total),
    )

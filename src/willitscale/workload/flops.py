"""Training FLOPs per token, counting every matrix multiply.

A matmul of ``(m x k) @ (k x n)`` is ``m k n`` multiply-adds = ``2 m k n`` FLOPs. Per token
and per layer, forward:

==================  =========================================  ================================
part                FLOPs per token                            note
==================  =========================================  ================================
q, k, v             ``2 h (q_dim + 2 kv_dim)``                 GQA shrinks k and v
scores ``Q K^T``    ``2 keys q_dim``                           ``keys`` = keys each query sees
values ``A V``      ``2 keys q_dim``                           GQA does not shrink these two
output proj.        ``2 q_dim h``
MLP                 ``2 (2 or 3) h ffn x top_k``               gated MLPs have 3 matrices
router              ``2 h experts``                            MoE only
LM head             ``2 h vocab``                              once, after the last layer
==================  =========================================  ================================

With multi-head latent attention the q, k, v row is the low-rank projections (``q_a``, ``q_b``,
``kv_a``, ``kv_b``: :mod:`.params`) and ``A V`` runs at the value width ``heads x v_head_dim``;
shared experts add ``2 (2 or 3) h shared_ffn`` to every MoE layer; a model whose layers differ
(dense-first MoE, sliding windows on some layers) counts the **mean layer**, so ``layers x
layer`` is the model's exact total.

``keys`` is the sequence length (``min(seq_len, sliding_window)``): the causal mask is counted
as **full** by default, as Megatron-LM (Narayanan et al. 2021, appendix) and PaLM (Chowdhery et
al. 2022, appendix B: ``6N + 12 L H Q T``) count it, so that model FLOPs and MFU compare across
papers. ``causal=True`` counts only the unmasked half, ``(s + 1) / 2`` keys per query, which is
closer to what a kernel that skips masked blocks executes.

Backward is twice the forward (a gradient for the input and one for the weight of every
matmul), so **model FLOPs** = 3 x forward. **Hardware FLOPs** (what runs) add recomputation:
``full`` reruns each layer's forward (4x the layers; the LM head is not recomputed), ``selective``
reruns only the attention core, ``Q K^T`` and ``A V`` (Korthikanti et al. 2022, section 4.2),
and a FlashAttention backward recomputes ``Q K^T`` once more (its backward is 2.5x its forward:
Dao 2023, FlashAttention-2, section 3.1). Embedding lookups, norms, softmax, activation
functions and bias adds are not matmuls and are not counted (< 1% for the catalog models).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.errors import ConfigError
from willitscale.workload.arrays import float_or_array
from willitscale.workload.recompute import (
    RERUN_SETS,
    layer_share,
    parse_recompute,
    rerun_modules,
)
from willitscale.workload.transformer import Transformer

__all__ = [
    "RECOMPUTE",
    "LayerFlops",
    "TrainingFlops",
    "keys_per_query",
    "mean_keys_per_query",
    "layer_forward_flops",
    "training_flops",
    "recompute_flops",
    "check_recompute",
    "recompute_choice",
    "recompute_pick",
    "rerun_flops",
]

#: what one recomputed layer reruns (workload.recompute.RERUN_SETS): none, selective, full,
#: and Megatron-Core's module sets; index 2 is full
RECOMPUTE = RERUN_SETS


def check_recompute(recompute):
    """``recompute`` (a rerun-set name or an array of them) if every value is one of
    :data:`RECOMPUTE`, else a :class:`ConfigError`."""
    if not np.all(np.isin(np.asarray(recompute, dtype=object), RECOMPUTE)):
        raise ConfigError("recompute", recompute, "one of " + ", ".join(RECOMPUTE))
    return recompute


def recompute_pick(recompute, value_of):
    """``value_of(name)`` per element of ``recompute`` (a rerun-set name or an array of them)."""
    check_recompute(recompute)
    if isinstance(recompute, str):
        return value_of(recompute)
    mode = np.asarray(recompute)
    out = None
    for name in np.unique(mode):
        value = np.asarray(value_of(str(name)), dtype=float)
        out = value * (mode == name) if out is None else np.where(mode == name, value, out)
    return out


def recompute_choice(recompute, none, selective, full):
    """``none``, ``selective`` or ``full`` picked per element of ``recompute`` (str or array of
    those three names)."""
    return recompute_pick(recompute, {"none": none, "selective": selective, "full": full}.__getitem__)


def keys_per_query(seq_len, window: int | None = None, *, causal: bool = False,
                   document_length: int | None = None):
    """Keys each query attends to, averaged over the sequence (numpy-friendly in ``seq_len``).

    Full counting: ``min(s, w)``. Causal: query ``i`` (1-based) sees ``min(i, w)`` keys, so the
    mean is ``(s + 1) / 2`` without a window and ``(w (w + 1) / 2 + (s - w) w) / s`` with one.

    ``document_length`` ``d`` (causal counting only): the sequence packs documents of ``d``
    tokens (``s // d`` of them and one of the remaining ``s mod d``), and a query sees only the
    earlier keys of its own document (intra-document masking), so the mean is the causal sum
    of each document over ``s``: ``(s // d) C(d) + C(s mod d)`` over ``s``, ``C(L)`` the causal
    sum above for a sequence of ``L``. Full counting ignores it: it is the model-FLOP
    convention (PaLM counts the scores of the whole sequence) and what an unfused kernel,
    which computes every score before masking, executes.
    """
    s = np.asarray(seq_len, dtype=float)
    if np.any(s < 1):
        raise ConfigError("seq_len", seq_len, "an integer >= 1")
    if document_length is not None and not (isinstance(document_length, (int, np.integer))
                                            and not isinstance(document_length, bool)
                                            and document_length >= 1):
        raise ConfigError("document_length", document_length, "an integer >= 1 (tokens)")
    w = s if window is None else np.minimum(s, float(window))
    if not causal:
        return float_or_array(w)
    if document_length is None:
        return float_or_array(_causal_sum(s, window) / s)
    d = np.minimum(s, float(document_length))
    whole = np.floor(s / d)
    rest = s - whole * d
    return float_or_array((whole * _causal_sum(d, window) + _causal_sum(rest, window)) / s)


def _causal_sum(length, window: int | None):
    """Keys summed over the queries of one causal sequence of ``length`` (0 for 0 tokens)."""
    n = np.asarray(length, dtype=float)
    w = n if window is None else np.minimum(n, float(window))
    return w * (w + 1) / 2 + (n - w) * w


def mean_keys_per_query(model: Transformer, seq_len, *, causal: bool = False,
                        document_length: int | None = None):
    """:func:`keys_per_query` averaged over ``model``'s layers: its sliding window on
    ``window_layer_count`` of them (Gemma 2 every other layer), full attention on the rest
    (``document_length``: packed documents, as :func:`keys_per_query`)."""
    windowed = model.window_layer_count
    full = keys_per_query(seq_len, None, causal=causal, document_length=document_length)
    if not windowed:
        return full
    local = keys_per_query(seq_len, model.sliding_window, causal=causal,
                           document_length=document_length)
    if windowed == model.layers:
        return local
    share = windowed / model.layers
    return float_or_array(share * np.asarray(local) + (1.0 - share) * np.asarray(full))


def projection_flops(model: Transformer) -> float:
    """Forward FLOPs per token of one layer's q, k, v projections (MLA: q_a, q_b, kv_a, kv_b)."""
    h, q = model.hidden, model.q_dim
    if not model.is_mla:
        return 2.0 * h * (q + model.kv_dim + model.v_dim)
    r, rq = model.kv_lora_rank, model.q_lora_rank
    queries = h * q if rq is None else h * rq + rq * q
    kv = h * (r + model.rope_head_dim) + r * model.heads * (
        model.head_dim - model.rope_head_dim + model.v_head_dim)
    return 2.0 * (queries + kv)


def mlp_flops(model: Transformer) -> float:
    """Forward FLOPs per token of the mean layer's MLP: the dense-first layers' MLPs and, on MoE
    layers, top-k experts, the shared experts and their gate (the router apart)."""
    m = 3 if model.gated_mlp else 2
    h = model.hidden
    dense = (model.layers - model.moe_layers) * m * model.dense_ffn
    moe = model.moe_layers * (m * (model.ffn_hidden * model.moe_top_k + model.moe_shared_ffn)
                              + model.moe_shared_gate)
    return 2.0 * h * (dense + moe) / model.layers


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerFlops:
    """Forward FLOPs per token of one transformer layer, by matmul."""

    qkv: float
    scores: float  #: Q K^T
    values: float  #: softmax(Q K^T) V
    attention_output: float
    mlp: float  #: top_k experts for MoE
    router: float

    @property
    def attention_core(self):
        """Q K^T and A V: what selective recomputation reruns."""
        return self.scores + self.values

    @property
    def total(self):
        """All matmuls of the layer."""
        return self.qkv + self.scores + self.values + self.attention_output + self.mlp + self.router


def layer_forward_flops(model: Transformer, seq_len, *, causal: bool = False,
                        document_length: int | None = None) -> LayerFlops:
    """Forward FLOPs per token of one layer for sequences of ``seq_len`` tokens (packing
    documents of ``document_length`` tokens: :func:`keys_per_query`)."""
    h, q = model.hidden, model.q_dim
    keys = mean_keys_per_query(model, seq_len, causal=causal, document_length=document_length)
    return LayerFlops(
        qkv=projection_flops(model),
        scores=float_or_array(2.0 * np.asarray(keys) * q),
        values=float_or_array(2.0 * np.asarray(keys) * model.o_dim),
        attention_output=2.0 * model.o_dim * h,
        mlp=mlp_flops(model),
        router=2.0 * h * model.moe_experts * model.moe_layers / model.layers,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingFlops:
    """FLOPs per token of one training step (forward + backward [+ recomputation]).

    ``model_*`` are model FLOPs (3 x forward: what MFU counts); ``hardware_*`` are executed
    FLOPs (model + recomputation). Multiply a ``*_per_token`` by ``seq_len`` for a sequence.
    Fields are floats, or arrays when ``seq_len`` was an array.
    """

    seq_len: object
    recompute: object  #: mode name, or array of them
    causal: bool
    flash_attention: bool
    layers: int
    layer_forward: LayerFlops
    layer_forward_per_token: object  #: one layer, forward
    layer_backward_per_token: object  #: one layer, backward incl. recomputation (hardware)
    layer_recompute_per_token: object  #: one layer, recomputation alone
    layer_model_per_token: object  #: one layer, 3 x forward
    layer_hardware_per_token: object  #: one layer, forward + backward + recomputation
    lm_head_forward_per_token: float
    lm_head_per_token: float  #: LM head, 3 x forward (never recomputed)
    forward_per_token: object  #: whole model, forward
    model_per_token: object  #: whole model, 3 x forward
    hardware_per_token: object  #: whole model, executed

    @property
    def model_per_sequence(self):
        """Model FLOPs of one sequence of ``seq_len`` tokens."""
        return float_or_array(np.asarray(self.model_per_token) * np.asarray(self.seq_len))

    @property
    def hardware_per_sequence(self):
        """Executed FLOPs of one sequence of ``seq_len`` tokens."""
        return float_or_array(np.asarray(self.hardware_per_token) * np.asarray(self.seq_len))

    def __repr__(self) -> str:
        def shown(value) -> str:
            return f"{float(value):.4g}" if np.ndim(value) == 0 else f"<{np.size(value)} values>"

        return (f"TrainingFlops(per token: model {shown(self.model_per_token)}, executed "
                f"{shown(self.hardware_per_token)}, forward {shown(self.forward_per_token)}; "
                f"seq_len {shown(self.seq_len)}, {self.layers} layers, recompute "
                f"{self.recompute if np.ndim(self.recompute) == 0 else '<several>'})")


def rerun_flops(layer: LayerFlops, rerun: str):
    """Forward FLOPs per token one layer reruns under a rerun set: the whole layer (full), the
    attention core (core_attn / selective), the MLP (mlp); norms are not matmuls (0)."""
    modules = rerun_modules(rerun)
    if modules is None:
        return layer.total
    return (layer.attention_core if "core_attn" in modules else 0.0) + (
        layer.mlp if "mlp" in modules else 0.0)


def recompute_flops(layer: LayerFlops, recompute, flash_attention: bool, share=1.0):
    """Extra forward FLOPs per token one layer executes for recomputation, averaged over the
    layers (``share`` of them recompute: workload.recompute.layer_share)."""
    extra = recompute_pick(recompute, lambda name: rerun_flops(layer, name))
    # FlashAttention's backward recomputes Q K^T from Q, K and the saved softmax statistics.
    return float_or_array(np.asarray(extra) * share + (layer.scores if flash_attention else 0.0))


def training_flops(model: Transformer, seq_len=None, *, recompute="none",
                   causal: bool = False, flash_attention: bool = True,
                   document_length: int | None = None) -> TrainingFlops:
    """Training FLOPs per token of ``model`` (numpy-friendly in ``seq_len``).

    ``seq_len`` defaults to the model's training sequence length. ``recompute`` is a mode of
    :mod:`willitscale.workload.recompute` (or an array of rerun-set names, broadcast against
    ``seq_len``); ``causal`` counts only unmasked attention scores;
    ``flash_attention`` adds the ``Q K^T`` its backward reruns to the hardware FLOPs;
    ``document_length`` (with ``causal``) counts only the keys of each query's own document.
    """
    seq_len = model.seq_len if seq_len is None else seq_len
    layer = layer_forward_flops(model, seq_len, causal=causal, document_length=document_length)
    fwd = layer.total
    share = 1.0
    if isinstance(recompute, str) and recompute not in RECOMPUTE:  # layers:N, every:K
        mode = parse_recompute(recompute)
        recompute, share = mode.rerun, float(layer_share(model.layers, mode.layers, mode.every))
    extra = recompute_flops(layer, recompute, flash_attention, share)
    head = 2.0 * model.hidden * model.vocab
    layers = model.layers
    return TrainingFlops(
        seq_len=seq_len,
        recompute=recompute,
        causal=causal,
        flash_attention=flash_attention,
        layers=layers,
        layer_forward=layer,
        layer_forward_per_token=fwd,
        layer_backward_per_token=float_or_array(2 * np.asarray(fwd) + extra),
        layer_recompute_per_token=extra,
        layer_model_per_token=float_or_array(3 * np.asarray(fwd)),
        layer_hardware_per_token=float_or_array(3 * np.asarray(fwd) + extra),
        lm_head_forward_per_token=head,
        lm_head_per_token=3 * head,
        forward_per_token=float_or_array(layers * np.asarray(fwd) + head),
        model_per_token=float_or_array(3 * (layers * np.asarray(fwd) + head)),
        hardware_per_token=float_or_array(3 * (layers * np.asarray(fwd) + head) + layers * np.asarray(extra)),
    )

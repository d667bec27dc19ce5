"""One transformer layer, the LM head and the embedding as operations, each timed on a GPU.

Per micro-batch on one GPU of a plan with tensor parallelism ``t``, context parallelism ``c``
and ``T = b s / c`` tokens, the operations and their shapes (``h`` hidden, ``q``/``kv`` the
query/key-value widths, ``f`` the MLP width, ``V`` the vocabulary):

======================  ==========================================  ===========  ==========
operation               forward shape (GEMM: M x K @ K x N)         kind         module
======================  ==========================================  ===========  ==========
input norm              T x h elements (T/t with sequence parallel)  memory       attention
QKV                     T x h @ h x (q + 2 kv) / t                   gemm         attention
rotary (RoPE models)    T x (q + kv) / t elements                    memory       attention
attention core          fused kernel, or batched Q K^T and A V       attention    core
output projection       T x q/t @ q/t x h                            gemm         attention
bias-dropout-residual   T x h (T/t with sequence parallel)           memory       attention
post-attention norm     as the input norm                            memory       mlp
MLP up (+ gate)         T x h @ h x f (2f gated) / t                 gemm         mlp
activation              T x f / t                                    memory       mlp
MLP down                T x f/t @ f/t x h                            gemm         mlp
bias-dropout-residual   as above                                     memory       mlp
======================  ==========================================  ===========  ==========

A mixture of experts runs its router (``T x h @ h x E``) and, per local expert (``E / ep`` of
them), the MLP GEMMs on ``T top_k ep / E`` tokens; its shared experts (``shared MLP up/down``)
are one dense MLP of their total width on all ``T`` tokens; dense-first layers (``dense MLP
up/down``) and the MoE layers each run for their share of the layers (the mean layer).

Multi-head latent attention replaces QKV by the GEMMs of their real shapes (DeepSeek-V2
section 2.1; Megatron-Core's ``MLASelfAttention``, whose down projections are ``duplicated``
on every TP rank and, with sequence parallelism, run on the rank's ``T / t`` tokens before the
latents are gathered): ``Q down`` ``T x h @ h x q_lora``, ``Q up`` ``T x q_lora @ q_lora x
heads d_qk / t`` (one ``Q`` ``T x h @ h x heads d_qk / t`` without ``q_lora``), ``KV down``
``T x h @ h x (kv_lora + d_rope)``, ``KV up`` ``T x kv_lora @ kv_lora x heads (d_nope + d_v)
/ t``, the latents' RMSNorms, and the output projection from ``heads d_v / t``. The attention
core then runs ``Q K^T`` at ``d_qk`` and ``A V`` at ``d_v`` per head: its FLOPs are those of a
head of ``(d_qk + d_v) / 2``, timed on the kernel curve of the head dimension nearest ``d_qk``.
QK-norm (Qwen3, OLMo 2, Gemma 3) and the third and fourth norms of Gemma's layers are
memory-bound norms over their elements. The LM head is a ``T x h @ h x V/t`` GEMM
after a final norm, then the cross-entropy over ``V/t`` logits per token; the embedding a
gather. Each GEMM's backward is two GEMMs: the input gradient ``M x N @ N x K`` and the weight
gradient ``K x M @ M x N`` (reducing over the tokens). Times come from
:mod:`willitscale.compute.gemm`, :mod:`willitscale.compute.attention` and the byte counts of
:mod:`willitscale.compute.ops`; each kernel's fixed cost is kept apart as ``overhead``.

With ``--dtype fp8`` the linear layers' GEMMs (QKV, projection, MLP) run on the FP8 curve with
one-byte inputs and their operands are cast (:func:`~willitscale.compute.ops.fp8_cast_bytes`:
activations and weights forward, output gradients backward); attention, the norms, everything
memory-bound and the LM head stay in bf16, as Transformer Engine runs them by default
(``fp8_dpa = False``) and torchao leaves the output layer out.

Recomputation reruns the forward of a set of operations (:func:`rerun_ops`): the attention
core for ``selective`` (Korthikanti et al. 2022, section 4.2), the operations of the named
Megatron-Core modules for ``modules:...`` (:data:`MODULE_OPS`), every operation for ``full``;
the share of layers a mode covers (``layers:N``, ``every:K``) scales it in the step engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.compute.attention import (
    fused_attention,
    ring_attention,
    ring_merge_bytes,
    unfused_attention_gemms,
)
from willitscale.compute.gemm import gemm_time
from willitscale.compute.ops import fp8_cast_bytes, mem_op
from willitscale.workload.recompute import rerun_modules

__all__ = ["LayerSpec", "OpTime", "layer_ops", "head_ops", "embedding_ops", "MODULE_OPS", "rerun_ops",
           "KINDS"]

#: the kinds compute time is reported by
KINDS = ("gemm", "attention", "memory", "overhead")
#: the operations (``layer_ops`` names) each Megatron-Core recompute module reruns
#: (:data:`willitscale.workload.recompute.MODULES`): the attention core, the two norms, the dense
#: MLP with its FP8 casts
MODULE_OPS = {"core_attn": ("attention core", "ring attention merges"),
              "layernorm": ("input norm", "post-attention norm"),
              "mlp": tuple(f"{kind}MLP {part}{cast}" for kind in ("", "shared ", "dense ")
                           for part in ("up", "down") for cast in ("", " fp8 casts"))
              + ("activation",)}


def rerun_ops(rerun: str) -> tuple[str, ...] | None:
    """The operation names rerun set ``rerun`` reruns (None: every operation of the layer)."""
    modules = rerun_modules(rerun)
    if modules is None:
        return None
    return tuple(name for module in sorted(modules) for name in MODULE_OPS[module])


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerSpec:
    """What the per-op model needs of a scenario (shared by all its plans)."""

    hidden: int
    q_dim: int
    kv_dim: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    gated: bool
    rms: bool
    rope: bool
    dropout: bool
    experts: int
    top_k: int
    vocab: int
    seq_len: int
    keys_causal: float  #: keys each query sees with a causal mask (average; within documents)
    document_length: int | None = None  #: tokens per packed document (intra-document masking)
    keys_full: float  #: keys each query sees (scores computed by unfused attention)
    dtype: str  #: compute dtype of the linear layers (bf16, fp16, fp8)
    fusion: str
    fp8_recipe: str
    fp8_transpose: bool  #: FP8 operands need a transposed copy (Hopper, not Blackwell)
    flash: bool
    kernel: str  #: the fused attention kernel (when flash)
    curves: object  #: :class:`~willitscale.compute.curves.GpuCurves`
    peak: float  #: FLOP/s of the linear layers' dtype (the GEMM curve's peak)
    attention_peak: float  #: bf16 peak: attention runs in bf16
    v_head_dim: int = 0  #: value head width (0: = head_dim)
    q_lora: int = 0  #: MLA: the queries' bottleneck rank (0: one q projection)
    kv_lora: int = 0  #: MLA when > 0: the key-value latent's rank
    rope_head_dim: int = 0  #: MLA: the rotary part of head_dim (its key shared by the heads)
    shared_ffn: int = 0  #: MoE: the shared experts' total MLP width
    shared_gate: bool = False  #: MoE: the shared expert's hidden -> 1 gate (Qwen2-MoE)
    dense_ffn: int = 0  #: MoE: the dense-first layers' MLP width
    moe_share: float = 1.0  #: MoE: the share of layers that are MoE (the rest dense-first)
    qk_norm: str = "none"  #: none, head or full (workload.transformer.QK_NORMS)
    norms: int = 2  #: norms per layer


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTime:
    """Seconds of one operation per micro-batch on one GPU (arrays over plans)."""

    name: str
    kind: str  #: gemm, attention, memory
    fwd: np.ndarray
    bwd: np.ndarray
    fwd_fixed: np.ndarray  #: kernel fixed costs inside ``fwd`` (reported as overhead)
    bwd_fixed: np.ndarray
    flops: np.ndarray | float = 0.0  #: forward FLOPs (attention core: executed)
    wgrad: np.ndarray | float = 0.0  #: the weight-gradient GEMM's share of ``bwd`` (GEMMs)


def _gemm_op(spec: LayerSpec, name: str, m, k, n, *, calls=1.0, fp8: bool) -> OpTime:
    """A linear layer's GEMM: forward, input gradient and weight gradient."""
    curve = spec.curves.gemm_for(spec.dtype if fp8 else ("bf16" if spec.dtype == "fp8" else spec.dtype))
    bw = spec.curves.memory.bandwidth
    ib = 1.0 if (fp8 and spec.dtype == "fp8") else 2.0
    g = lambda a, b, c: gemm_time(a, b, c, curve, bw, in_bytes=ib) * calls  # noqa: E731
    fwd, dgrad, wgrad = g(m, n, k), g(m, k, n), g(k, n, m)
    fixed = curve.kernel_overhead * calls * np.ones_like(np.asarray(fwd, dtype=float))
    return OpTime(name=name, kind="gemm", fwd=fwd, bwd=dgrad + wgrad, fwd_fixed=fixed,
                  bwd_fixed=2.0 * fixed, flops=2.0 * np.asarray(m, dtype=float) * k * n * calls,
                  wgrad=wgrad)


def _cast_op(spec: LayerSpec, name: str, m, k, n, *, calls=1.0, weight_share=1.0) -> OpTime:
    """FP8 casts of one GEMM's operands: activations (M x K) and weights (K x N) forward,
    output gradients (M x N) backward. Weights are cast once per optimizer step, not per
    micro-batch (``weight_share`` = 1 / micro-batches): Transformer Engine caches its FP8
    weights after the first micro-batch (``is_first_microbatch``), torchao casts them before
    FSDP's all-gather."""
    per, again = fp8_cast_bytes(spec.fp8_recipe, transpose=spec.fp8_transpose)
    mem = spec.curves.memory
    x, w, dy = (np.asarray(a, dtype=float) * b * calls for a, b in ((m, k), (k, n), (m, n)))
    w = w * weight_share
    fwd_bytes = per * (x + w)
    bwd_bytes = per * dy + again * (x + w + dy)
    kernels = 2.0 * calls
    fixed = mem.kernel_overhead * kernels * np.ones_like(fwd_bytes)
    return OpTime(name=name, kind="memory", fwd=fwd_bytes / mem.bandwidth + fixed,
                  bwd=bwd_bytes / mem.bandwidth + fixed, fwd_fixed=fixed, bwd_fixed=fixed)


def _mem(spec: LayerSpec, name: str, op_name: str, elements) -> OpTime:
    op = mem_op(op_name, spec.fusion, rms=spec.rms, dropout=spec.dropout)
    mem = spec.curves.memory
    e = np.asarray(elements, dtype=float)
    ff, bf = op.fwd_kernels * mem.kernel_overhead, op.bwd_kernels * mem.kernel_overhead
    ones = np.ones_like(e)
    return OpTime(name=name, kind="memory", fwd=op.fwd_bytes * e / mem.bandwidth + ff,
                  bwd=op.bwd_bytes * e / mem.bandwidth + bf, fwd_fixed=ff * ones,
                  bwd_fixed=bf * ones)


def _linear(spec, name, m, k, n, *, calls=1.0, weight_share=1.0) -> list[OpTime]:
    ops = [_gemm_op(spec, name, m, k, n, calls=calls, fp8=True)]
    if spec.dtype == "fp8":
        ops.append(_cast_op(spec, f"{name} fp8 casts", m, k, n, calls=calls,
                            weight_share=weight_share))
    return ops


def _attention_core(spec: LayerSpec, tokens, tp, cp, micro_batch) -> list[OpTime]:
    heads = np.maximum(spec.heads / tp, 1.0)
    # Q K^T at d_qk and A V at d_v cost as two products at their mean (exact FLOPs)
    d = (spec.head_dim + (spec.v_head_dim or spec.head_dim)) / 2.0
    if spec.flash:
        fwd, bwd, flops = fused_attention(
            tokens=tokens, keys=spec.keys_causal, q_dim_per_gpu=heads * d,
            seq_len=spec.seq_len, cp=cp, curves=spec.curves, kernel=spec.kernel, causal=True,
            head_dim=spec.head_dim, peak=spec.attention_peak, document_length=spec.document_length)
        fixed = spec.curves.memory.kernel_overhead * np.ones_like(fwd)
        ops = [OpTime(name="attention core", kind="attention", fwd=fwd, bwd=bwd, fwd_fixed=fixed,
                      bwd_fixed=fixed, flops=flops)]
        # ring attention's merges, where a ring runs (documents shorter than a rank's chunk stay
        # whole on it: no ring, no merge)
        ring = ring_attention(seq_len=spec.seq_len, cp=cp, document_length=spec.document_length)
        ops.append(_ring_merges(spec, tokens, heads, tp, np.where(ring, cp, 1.0)))
        return ops
    curve = spec.curves.gemm_for("bf16" if spec.dtype == "fp8" else spec.dtype)
    fwd, bwd = unfused_attention_gemms(micro_batch=micro_batch, seq_len=spec.seq_len,
                                       keys=spec.keys_full, cp=cp, heads_per_gpu=heads,
                                       head_dim=d, gemm=curve,
                                       bandwidth=spec.curves.memory.bandwidth)
    fixed = curve.kernel_overhead * np.ones_like(fwd)
    gemms = OpTime(name="attention core", kind="attention", fwd=fwd, bwd=bwd,
                   fwd_fixed=2.0 * fixed, bwd_fixed=4.0 * fixed,
                   flops=4.0 * tokens * spec.keys_full * heads * d)
    scores = _mem(spec, "attention core", "scores", tokens * heads * spec.keys_full)
    return [gemms, scores]


def _ring_merges(spec: LayerSpec, tokens, heads, tp, cp) -> OpTime:
    """Ring attention's float32 merges of partial outputs and gradients (memory-bound):
    :func:`~willitscale.compute.attention.ring_merge_bytes`, one kernel per merge."""
    kv = np.maximum(spec.kv_dim / np.asarray(tp, dtype=float), spec.head_dim)
    fwd_b, bwd_b = ring_merge_bytes(tokens=tokens, q_dim_per_gpu=heads * spec.head_dim,
                                    kv_dim_per_gpu=kv, cp=cp)
    mem = spec.curves.memory
    steps = np.maximum(np.asarray(cp, dtype=float) - 1.0, 0.0)
    ff = mem.kernel_overhead * np.where(steps > 0, steps + 2.0, 0.0)
    bf = mem.kernel_overhead * np.where(steps > 0, 3.0 * (steps + 2.0), 0.0)
    return OpTime(name="ring attention merges", kind="memory", fwd=fwd_b / mem.bandwidth + ff,
                  bwd=bwd_b / mem.bandwidth + bf, fwd_fixed=ff * np.ones_like(fwd_b),
                  bwd_fixed=bf * np.ones_like(bwd_b))


def layer_ops(spec: LayerSpec, *, tokens, tp, cp, sequence_parallel, ep, micro_batch,
              micro_batches=1.0) -> list[OpTime]:
    """The operations of one layer per micro-batch (arrays over plans; ``micro_batches`` per
    optimizer step share the FP8 weight casts)."""
    ws = 1.0 / np.asarray(micro_batches, dtype=float)
    t = np.asarray(tp, dtype=float)
    T = np.asarray(tokens, dtype=float)
    h = spec.hidden
    norm_tokens = np.where(np.asarray(sequence_parallel, dtype=bool), T / t, T)
    ops = [_mem(spec, "input norm", "norm", norm_tokens * h)]
    ops += _projections(spec, T, t, ws, norm_tokens)
    ops += _attention_core(spec, T, t, cp, micro_batch)
    ops += _linear(spec, "attention output", T, spec.heads * (spec.v_head_dim or spec.head_dim) / t,
                   h, weight_share=ws)
    ops.append(_mem(spec, "attention residual", "residual", norm_tokens * h))
    ops.append(_mem(spec, "post-attention norm", "norm", norm_tokens * h))
    if spec.norms > 2:  # Gemma 2/3: a norm after the attention and after the MLP
        ops.append(_mem(spec, "sandwich norms", "norm", (spec.norms - 2) * norm_tokens * h))
    ops += _mlp_ops(spec, T, t, ep, ws)
    ops.append(_mem(spec, "MLP residual", "residual", norm_tokens * h))
    return ops


def _projections(spec: LayerSpec, T, t, ws, local) -> list[OpTime]:
    """The q, k, v projections (MLA: down and up projections, latent norms), rotary, QK-norm.
    MLA's down projections and latent norms run on ``local`` tokens (the sequence-parallel
    shard, T / t, or all T), then the latents are gathered for the up projections."""
    h, q = spec.hidden, spec.q_dim
    if not spec.kv_lora:
        kv = np.maximum(spec.kv_dim / t, spec.head_dim)  # a KV head is replicated below 1 per rank
        v = kv * (spec.v_head_dim or spec.head_dim) / spec.head_dim
        ops = _linear(spec, "QKV", T, h, q / t + kv + v, weight_share=ws)
        if spec.rope:
            ops.append(_mem(spec, "rotary", "rotary", T * (q / t + kv)))
        if spec.qk_norm != "none":
            ops.append(_mem(spec, "QK norm", "norm", T * (q / t + kv)))
        return ops
    r, rope = spec.kv_lora, spec.rope_head_dim
    ops = []
    if spec.q_lora:
        ops += _linear(spec, "Q down", local, h, float(spec.q_lora), weight_share=ws)
        ops += _linear(spec, "Q up", T, float(spec.q_lora), q / t, weight_share=ws)
    else:
        ops += _linear(spec, "Q", T, h, q / t, weight_share=ws)
    ops += _linear(spec, "KV down", local, h, float(r + rope), weight_share=ws)
    ops.append(_mem(spec, "latent norms", "norm", local * (spec.q_lora + r)))
    per_head = spec.head_dim - rope + (spec.v_head_dim or spec.head_dim)
    ops += _linear(spec, "KV up", T, float(r), spec.heads * per_head / t, weight_share=ws)
    ops.append(_mem(spec, "rotary", "rotary", T * (spec.heads * rope / t + rope)))
    return ops


def _mlp_ops(spec: LayerSpec, T, t, ep, ws) -> list[OpTime]:
    """The MLP of the mean layer: routed experts, shared experts and dense-first MLPs each for
    their share of the layers."""
    h, f = spec.hidden, spec.ffn
    act = "swiglu" if spec.gated else "gelu"
    up = 2.0 if spec.gated else 1.0
    if not spec.experts:
        return (_linear(spec, "MLP up", T, h, up * f / t, weight_share=ws)
                + [_mem(spec, "activation", act, T * f / t)]
                + _linear(spec, "MLP down", T, f / t, h, weight_share=ws))
    share = spec.moe_share
    local = spec.experts / np.asarray(ep, dtype=float)
    per_expert = T * spec.top_k / local
    ops = _linear(spec, "router", T, h, float(spec.experts), calls=share, weight_share=ws)
    if spec.shared_gate:
        ops += _linear(spec, "shared expert gate", T, h, 1.0, calls=share, weight_share=ws)
    ops += _linear(spec, "MLP up", per_expert, h, up * f / t, calls=local * share, weight_share=ws)
    inner = share * spec.top_k * f + share * spec.shared_ffn + (1.0 - share) * spec.dense_ffn
    ops.append(_mem(spec, "activation", act, T * inner / t))
    ops += _linear(spec, "MLP down", per_expert, f / t, h, calls=local * share, weight_share=ws)
    for name, width, calls in (("shared", spec.shared_ffn, share), ("dense", spec.dense_ffn, 1.0 - share)):
        if width and calls > 0:
            ops += _linear(spec, f"{name} MLP up", T, h, up * width / t, calls=calls, weight_share=ws)
            ops += _linear(spec, f"{name} MLP down", T, width / t, h, calls=calls, weight_share=ws)
    return ops


def head_ops(spec: LayerSpec, *, tokens, tp, sequence_parallel) -> list[OpTime]:
    """The final norm, the LM head GEMM (bf16) and the cross-entropy, per micro-batch."""
    t = np.asarray(tp, dtype=float)
    T = np.asarray(tokens, dtype=float)
    norm_tokens = np.where(np.asarray(sequence_parallel, dtype=bool), T / t, T)
    return [_mem(spec, "final norm", "norm", norm_tokens * spec.hidden),
            _gemm_op(spec, "LM head", T, spec.hidden, spec.vocab / t, fp8=False),
            _mem(spec, "cross-entropy", "cross_entropy", T * spec.vocab / t)]


def embedding_ops(spec: LayerSpec, *, tokens, tp, sequence_parallel) -> list[OpTime]:
    """The token embedding's gather and its gradient's scatter-add, per micro-batch."""
    T = np.asarray(tokens, dtype=float)
    return [_mem(spec, "embedding", "embedding", T * spec.hidden)]

"""Attention as the kernel that runs it: fused (FlashAttention-class) or unfused.

**Fused** (FlashAttention 2/3/4, cuDNN, CK): per layer and micro-batch on one GPU, the forward
executes ``4 T keys q_dim / tp`` FLOPs (``T`` tokens, ``keys`` the keys each query sees: with a
causal mask the kernel skips the masked blocks, so ``(s + 1) / 2`` on average), the backward
2.5 times that (FlashAttention's convention: the backward recomputes ``Q K^T``; Dao 2023,
FlashAttention-2 section 3.1, and the benchmarks of Dao-AILab/flash-attention). Each pass runs at
``peak x efficiency x s / (s + seq_half)`` of the kernel's curve for the pass, the mask and the
nearest head dimension (:class:`~willitscale.hardware.profile.AttentionCurve`), at the sequence
length one kernel call sees: ``s`` without context parallelism; with it (ring attention) each
call is one ``s / cp`` block against another, mostly unmasked, so the non-causal curve at
``s / cp`` (a named approximation). Plus a kernel's fixed cost per call (one forward, one
backward).

**Ring attention as it runs** (context parallelism without document masking). Both
implementations the rows use, Megatron-Core / Transformer Engine's P2P context parallelism and
zhuzilin/ring-flash-attention (``zigzag_ring_flash_attn``, which OLMo-core calls), balance the
causal work by giving each rank two half-chunks of ``s / (2 cp)`` tokens (one from each end of
the sequence). Step 0 is the rank's own chunk, causal, at ``s / cp``; each of the other
``cp - 1`` steps is unmasked work of the chunk's queries against half a chunk of keys, or half the
queries against a whole chunk (ring-flash-attention @ 8996282, ``zigzag_ring_flash_attn.py``:
``forward(q, k0, v0)`` / ``forward(q1, k, v)``): a kernel call whose shorter side is
``s / (2 cp)``, so the non-causal curve at ``s / (2 cp)``. Step 0 holds ``1 / cp`` of the
FLOPs (``(s/cp)^2 / 2`` of ``s^2 / (2 cp)``), the other steps the rest; the pass's time is the sum.
Each step after the first also merges its partial result into a float32 accumulator
(:func:`ring_merge_bytes`), memory-bound work the kernel curves do not hold.

**Intra-document masking** (``document_length`` ``d``, packed samples): a variable-length
kernel (FlashAttention's ``cu_seqlens``, cuDNN ragged, FlexAttention's document mask) runs each
document as its own causal sequence, so ``keys`` counts each query's earlier keys within its
document (:func:`~willitscale.workload.flops.keys_per_query`), and each document runs at the
causal curve's rate at its own length (short documents fill fewer tiles: the same
``s / (s + seq_half)`` form, at ``d``; the last, shorter document ``s mod d`` at its length). With context parallelism, documents that fit in a
rank's ``s / cp`` tokens (``d <= s / cp``) stay whole on it (the load-balanced sharding of
Llama 3's all-gather CP, Dubey et al. 2024, section 3.3.2): the causal curve at ``d``, no
merges; longer ones run the ring schedule above, step 0 and the half-chunk steps and their
merges, with the FLOPs of the masked keys (a named approximation: step 0's share kept at
``1 / cp``). So at ``d = s`` the time is the unmasked one, and it does not jump as ``d``
approaches ``s``. The communication is the ring's K/V passes in both cases
(:mod:`willitscale.step.context`; an all-gather of the other ranks' K/V moves the same bytes).

**Unfused** (``--no-flash-attention``, Megatron-LM before FlashAttention): batched GEMMs
``Q K^T`` (``s x s`` per head, ``K = head_dim``) and ``A V``, every score computed (no block is
skipped), with their backward GEMMs (two each), and the scale-mask-softmax and dropout over the
``heads x s x s`` scores as memory-bound work (:mod:`willitscale.compute.ops`).
"""

from __future__ import annotations

import numpy as np

from willitscale.compute.gemm import gemm_time

__all__ = ["fused_attention", "unfused_attention_gemms", "ring_merge_bytes", "ring_attention",
           "BACKWARD_FACTOR"]

#: FlashAttention's backward FLOPs over its forward's (the benchmarks' convention)
BACKWARD_FACTOR = 2.5


def fused_attention(*, tokens, keys, q_dim_per_gpu, seq_len: int, cp, curves, kernel: str,
                    causal: bool, head_dim: int, peak: float, document_length: int | None = None):
    """``(forward, backward, forward FLOPs)`` seconds of one layer's fused attention per
    micro-batch (arrays over plans: ``tokens`` on this GPU, ``cp``, ``q_dim_per_gpu``);
    ``keys`` already counts the document mask, ``document_length`` sets the kernel's length."""
    cp = np.asarray(cp, dtype=float)
    flops = 4.0 * np.asarray(tokens, dtype=float) * keys * q_dim_per_gpu
    chunk = seq_len / cp
    ring = ring_attention(seq_len=seq_len, cp=cp, document_length=document_length)
    # without a ring the call sees the whole sequence, or each document at its own length: the
    # s // d whole documents at d and the remainder r = s mod d at r, weighted by their causal
    # key counts C(L) = L (L + 1) / 2
    d = float(min(document_length or seq_len, seq_len))
    whole, rest = seq_len // d, seq_len % d
    weight = whole * d * (d + 1) / (whole * d * (d + 1) + rest * (rest + 1))
    own = 1.0 / cp  # the share of the FLOPs in the ring's step 0 (the rank's own chunk)
    overhead = curves.memory.kernel_overhead
    out = []
    for direction, factor in (("forward", 1.0), ("backward", BACKWARD_FACTOR)):
        rate = lambda masked, n: _rate(curves.attention_for(kernel, direction, masked, head_dim),  # noqa: E731
                                       peak, n)
        steps = rate(False, chunk / 2.0)  # the ring's half-chunk calls (load-balanced)
        local = weight / rate(causal, d) + ((1.0 - weight) / rate(causal, rest) if rest else 0.0)
        seconds = np.where(ring, own / rate(causal, chunk) + (1.0 - own) / steps, local)
        out.append(np.where(flops > 0, factor * flops * seconds + overhead, 0.0))
    return out[0], out[1], flops


def ring_attention(*, seq_len: int, cp, document_length: int | None = None):
    """Per plan: whether attention runs as a ring across the context-parallel ranks (``cp > 1``
    and, with document masking, documents longer than a rank's ``s / cp`` tokens; shorter
    documents stay whole on one rank)."""
    cp = np.asarray(cp, dtype=float)
    if document_length is None or document_length >= seq_len:
        return cp > 1
    return (cp > 1) & (document_length > seq_len / cp)


def _rate(curve, peak: float, seq):
    """FLOP/s of an attention kernel call whose shorter side is ``seq`` tokens."""
    return peak * curve.efficiency * seq / (seq + curve.seq_half)


def ring_merge_bytes(*, tokens, q_dim_per_gpu, kv_dim_per_gpu, cp):
    """``(forward, backward)`` HBM bytes of ring attention's merges per layer and micro-batch
    (arrays over plans; 0 without context parallelism).

    Forward: the first step's partial output is cast to a float32 accumulator (read 2, write 4
    bytes per element of ``T x q``), each of the other ``cp - 1`` steps rescales and adds its
    partial output (read the accumulator and the bf16 block output, write the accumulator:
    4 + 2 + 4), the result is cast back (4 + 2). Backward: the first step's ``dq``, ``dk``,
    ``dv`` cast to float32 (2 + 4 each), each later step adds the kernel's bf16 gradients into
    them (4 + 2 + 4 each, over ``T x q`` and twice ``T x kv``), and they are cast back (4 + 2).
    Counted from ring-flash-attention @ 8996282 (``utils.update_out_and_lse``,
    ``zigzag_ring_flash_attn_backward``); Transformer Engine's P2P context parallelism corrects
    its output and accumulates ``dq``/``dkv`` the same way. A zig-zag step over half the queries
    merges half the elements but copies the slice back (``out[slice_] = ...``): taken as one
    full-size merge (a named approximation, within ~10% of the step's bytes). The float32
    ``dk``/``dv`` travelling the ring are communication (:mod:`willitscale.step.context`)."""
    steps = np.maximum(np.asarray(cp, dtype=float) - 1.0, 0.0)
    t = np.asarray(tokens, dtype=float)
    q = t * q_dim_per_gpu
    grads = q + 2.0 * t * kv_dim_per_gpu
    ring = steps > 0
    fwd = np.where(ring, 6.0 * q + 10.0 * steps * q + 6.0 * q, 0.0)
    bwd = np.where(ring, 6.0 * grads + 10.0 * steps * grads + 6.0 * grads, 0.0)
    return fwd, bwd


def unfused_attention_gemms(*, micro_batch, seq_len: int, keys: float, cp, heads_per_gpu,
                            head_dim: int, gemm, bandwidth: float):
    """``(forward, backward)`` seconds of the batched ``Q K^T`` and ``A V`` GEMMs of one layer
    per micro-batch: ``b x heads`` products of ``(s_q x d) @ (d x s_k)`` and
    ``(s_q x s_k) @ (s_k x d)``; the backward runs two GEMMs per forward GEMM."""
    sq = seq_len / np.asarray(cp, dtype=float)
    batch = np.asarray(micro_batch, dtype=float) * heads_per_gpu
    sk, d = keys, head_dim
    t = lambda m, n, k: gemm_time(m, n, k, gemm, bandwidth, batch=batch)  # noqa: E731
    forward = t(sq, sk, d) + t(sq, d, sk)
    backward = t(sq, d, sk) + t(sk, d, sq) + t(sq, sk, d) + t(sk, d, sq)
    return forward, backward

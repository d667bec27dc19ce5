"""Tensor parallelism (Megatron-LM): the activation collectives of every layer, and what hides them.

Shoeybi et al. 2019 (Megatron-LM, section 3): the attention block and the MLP are each split as a
column-parallel matmul (QKV; the MLP's first, gate + up when gated) then a row-parallel one (the
attention output projection; the MLP's second). Operator ``f`` before each column-parallel
matmul is the identity in the forward and an all-reduce of the input gradient in the backward;
``g`` after each row-parallel matmul all-reduces the output in the forward and is the identity
in the backward. Per transformer layer and micro-batch, over the ``t`` ranks of the group:

* forward: 2 all-reduces of ``b x s x h`` activations (bf16, 2 bytes each), one per ``g``;
* backward: 2 all-reduces of input gradients, one per ``f``; with full recomputation the
  forward is run again first, with its 2 all-reduces;
* the vocabulary-parallel embedding all-reduces its output once (first stage, forward), and the
  LM head (column-parallel over the vocabulary) its input gradient once (last stage, backward).

**What hides what** (no ``--tp-comm-overlap``):

* the forward's all-reduces, and those of a recomputed forward, sit between dependent matmuls
  (the next one needs the reduced activation): all exposed;
* each input-gradient all-reduce of the backward overlaps **only the weight-gradient GEMM of its
  own column-parallel layer**, which needs the incoming gradient and the saved input but not
  the all-reduce's result (Korthikanti et al. 2022, section 6.2: "we overlap all-reduce
  communication with the linear weight's gradient computation"; Megatron-LM's
  ``LinearWithGradAccumulationAndAsyncCommunication``). Per layer the exposed backward is
  ``max(0, AR - W_qkv) + max(0, AR - W_fc1)``, ``W`` being the weight-gradient GEMM's time:
  the forward GEMM's FLOPs (``6h^2`` of QKV, ``8h^2`` of a 4h MLP's first per token, ``14/24 =
  7/12`` of a layer's GEMM work) at the matmul rate; the head's all-reduce overlaps the head's
  weight gradient.

With sequence parallelism (Korthikanti et al. 2022, section 4.2.2) each all-reduce becomes a
reduce-scatter and an all-gather of the same tensor (the same bytes on a ring, twice the calls).
In the backward the row-parallel layers' output gradients are all-gathered before their matmuls
(exposed), each column-parallel layer's input gradient is reduce-scattered beside its weight
gradient, and, since only the sequence shard of its input was saved, that input is all-gathered
again beside the input-gradient GEMM (same FLOPs as the weight gradient): Megatron-LM's
backward of the same class. So the backward moves 6 collectives per layer where the forward
moves 4.

With ``tp_comm_overlap`` (Megatron-Core's userbuffers, PyTorch's async TP) the collectives are
decomposed into ``t`` chunks that travel while the GEMM they feed (or come from) computes the
other chunks (Transformer Engine's pipelined and ring-exchange overlaps; Megatron-Core's
communication-overlap documentation): the first chunk has nothing to hide behind, so at most
``(t - 1) / t`` of a pass's communication hides, and only as much as its compute lasts:
exposed = ``comm - (t - 1)/t x min(comm, compute)`` per pass. Published measurements bound it:
Flux overlaps "up to 96%" of the communication inside fused kernels (Chang et al. 2024, arXiv
2406.06858); PyTorch's async TP gains ~8% end to end on Llama 3 8B and 70B (PyTorch forum,
"Introducing Async Tensor Parallelism in PyTorch"). The ring all-reduce sends
``2 (t-1)/t x b s h x 2`` bytes per GPU through its NVLink port: ``1.75 x`` the activations at
``t = 8`` (see :func:`ring_allreduce_bytes_factor` and the A100/A800 case, docs/parallelism.md).
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.lines import line_time
from willitscale.memory.activations import ACTIVATION_BYTES
from willitscale.step.traffic import Traffic

__all__ = ["tensor_traffic", "ring_allreduce_bytes_factor"]

def ring_allreduce_bytes_factor(ranks):
    """Bytes each rank sends in a ring all-reduce, per byte reduced: ``2 (n-1)/n``."""
    n = np.asarray(ranks, dtype=float)
    return 2.0 * (n - 1) / n


def overlap_exposed(comm, compute, tp):
    """Of ``comm``, what the chunked overlap leaves exposed: ``comm - (t-1)/t min(comm, compute)``."""
    t = np.asarray(tp, dtype=float)
    share = ((t - 1.0) / t)[:, None] if np.ndim(t) else (t - 1.0) / t
    return comm - share * np.minimum(comm, compute)


def _hidden_by(comm, gemm):
    """What of ``comm`` outlasts the GEMM it runs beside."""
    return np.maximum(0.0, comm - gemm)


def tensor_traffic(*, tokens, hidden: int, layers, emb, head, full_recompute, sequence_parallel,
                   lines_ar, lines_rs, lines_ag, fwd_compute, bwd_compute, overlap: bool,
                   element: float = ACTIVATION_BYTES, wgrad_qkv=0.0, wgrad_fc1=0.0,
                   wgrad_head=0.0, tp=2.0) -> Traffic:
    """TP collectives per micro-batch (arrays ``(plans, 3)``; ``tokens`` per GPU, shape (plans,)).

    ``wgrad_*`` are the weight-gradient GEMM times of one layer's QKV and first MLP matmul and of
    the LM head, per micro-batch and column (see the module docstring)."""
    size = np.asarray(tokens, dtype=float) * hidden * element
    sp = np.asarray(sequence_parallel, dtype=bool)[:, None]
    # each plan uses either the all-reduce or (sequence parallel) the reduce-scatter + all-gather:
    # a side no plan uses is not evaluated (every use below is masked by ``sp``)
    unused = np.zeros((size.shape[0], 1))
    ar = line_time(lines_ar, size)[:, None] if not sp.all() else unused
    rs, ag = ((line_time(lines_rs, size)[:, None], line_time(lines_ag, size)[:, None])
              if sp.any() else (unused, unused))
    unit = np.where(sp, rs + ag, ar)  # one all-reduce, or its reduce-scatter + all-gather
    full = np.asarray(full_recompute, dtype=float)[:, None]
    n_fwd = 2.0 * layers + emb
    n_bwd = 2.0 * layers + head + full * 2.0 * layers
    fwd = n_fwd * unit
    regather = np.where(sp, 2.0 * layers * ag, 0.0)  # SP: saved input shards gathered again
    bwd = n_bwd * unit + regather
    calls = np.where(sp, 2.0 * (n_fwd + n_bwd) + 2.0 * layers, n_fwd + n_bwd)
    wq, wf, wh = (np.asarray(w, dtype=float) for w in (wgrad_qkv, wgrad_fc1, wgrad_head))
    per_layer = np.where(
        sp, 2.0 * ag + _hidden_by(rs, wq) + _hidden_by(ag, wq) + _hidden_by(rs, wf) + _hidden_by(ag, wf),
        _hidden_by(ar, wq) + _hidden_by(ar, wf))
    head_part = np.where(sp, _hidden_by(rs, wh) + _hidden_by(ag, wh), _hidden_by(ar, wh))
    bwd_exposed = layers * per_layer + head * head_part + full * 2.0 * layers * unit
    active = unit > 0
    return Traffic(kind="tp", op="all_reduce", fwd=fwd, bwd=bwd,
                   fwd_exposed=np.where(overlap, overlap_exposed(fwd, fwd_compute, tp), fwd),
                   bwd_exposed=np.where(overlap, overlap_exposed(bwd, bwd_compute, tp), bwd_exposed),
                   bytes=np.where(active, calls * size[:, None], 0.0),
                   calls=np.where(active, calls, 0.0))

"""The default compute model when no efficiency is given: GEMMs at a fraction of peak, the
element-wise operations at the GPU's memory bandwidth (a two-term roofline).

A flat HFU makes a 1.7B model and a 1T model equally efficient. They are not: Megatron-LM's
Table 1 (Narayanan et al. 2021) goes from 44% of peak at 1.7B to 52% at 1T on the same
A100s, because a layer's matrix multiplies grow as ``h^2`` per token while its element-wise
operations (norms, bias + GeLU, dropout, residual adds, the softmax over attention scores)
grow as ``h`` and ``a x s``, and those are bound by memory bandwidth, not FLOP/s. Per token and
layer, on one GPU::

    time = matmul FLOPs / (e x peak) + element-wise bytes / HBM bandwidth

Element-wise bytes of one layer's forward, 2-byte (bf16/fp16) elements, counted pass by pass
(each pass reads and writes its tensor; a 1-byte dropout mask where there is dropout):

* over the hidden width ``h`` (``h / t`` with sequence parallelism, else every tensor-parallel
  rank repeats it): two LayerNorms (2 x (2 + 2) bytes), two bias + dropout + residual
  (2 x (4 + 2 + 1)), bias + GeLU over ``4h`` (4 x (2 + 2)), the q/k/v bias (3 x (2 + 2)):
  ``8 + 14 + 16 + 12 = 50`` bytes per hidden element, :data:`HIDDEN_BYTES`;
* over the attention scores, ``a / t`` heads x ``s`` keys, only without FlashAttention (whose
  fused kernel keeps them on chip): fused scale-mask-softmax (2 + 2) and dropout (2 + 2 + 1):
  9 bytes per score, :data:`SCORE_BYTES`.

The backward moves about twice the forward's bytes (it reads the saved input and the incoming
gradient and writes the outgoing one); recomputation replays the forward's passes (full) or
the score passes (selective). The matmul efficiency ``e`` is :data:`GEMM_EFFICIENCY`, chosen
on Narayanan et al. 2021 Table 1 (in-sample; docs/planner.md lists the out-of-sample runs): the
value with the least RMS relative error over its ten rows, on a 0.005 grid, with the rest of
the model as it is. It was 0.65 while the backward's tensor-parallel all-reduces hid behind a
whole forward's compute; with only the input-gradient all-reduces hidden, each behind its own
weight-gradient GEMM (:mod:`willitscale.step.tensor`), the same fit gives 0.67.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OPTIMIZER_BYTES", "OPTIMIZER_BYTES_PER_PARAM", "GEMM_EFFICIENCY", "HIDDEN_BYTES", "SCORE_BYTES", "elementwise_bytes"]

#: fraction of the dense peak large bf16/fp16 matmuls reach (fitted on Megatron-LM Table 1)
GEMM_EFFICIENCY = 0.67
HIDDEN_BYTES = 50.0  #: per hidden element per layer forward (see the module docstring)
SCORE_BYTES = 9.0  #: per attention score per layer forward, standard attention only
OPTIMIZER_BYTES_PER_PARAM = 28  #: fused AdamW with fp32 state (see OPTIMIZER_BYTES)
#: HBM bytes per parameter of each optimizer implementation (fp32 weights, gradients, moments):
#: fused AdamW reads weight, gradient, two moments (16 B) and writes weight and moments (12 B);
#: PyTorch's default torch.optim.AdamW on CUDA (no ``fused=True``: the foreach implementation,
#: torch/optim/adam.py ``_multi_tensor_adam``) makes one pass per operation: weight decay
#: (r/w p, 8 B), lerp of m (r m, g, w m, 12), v *= beta2 (8), addcmul into v (r v, g, w v, 12),
#: sqrt(v) into a temporary (8), divide (8), add eps (8), addcdiv into p (r p, m, t, w p, 16):
#: 80 B.
OPTIMIZER_BYTES = {"adamw-fused": OPTIMIZER_BYTES_PER_PARAM, "adamw-foreach": 80}


def elementwise_bytes(*, hidden: int, heads: int, seq_len: int, tp, sequence_parallel,
                      flash: bool, recompute):
    """``(forward, backward incl. recomputation)`` element-wise bytes per token per layer on one
    GPU (arrays over plans; ``recompute`` is the mode index 0 none, 1 selective, 2 full)."""
    t = np.asarray(tp, dtype=float)
    share = np.where(np.asarray(sequence_parallel, dtype=bool), 1.0 / t, 1.0)
    hidden_part = HIDDEN_BYTES * hidden * share
    score_part = 0.0 if flash else SCORE_BYTES * heads / t * seq_len
    forward = hidden_part + score_part
    rec = np.asarray(recompute)
    again = np.where(rec == 2, forward, np.where(rec == 1, score_part, 0.0))
    return forward, 2.0 * forward + again

"""Tensor parallelism (Megatron-LM): the activation collectives of every layer.

Shoeybi et al. 2019 (Megatron-LM, section 3): the attention block and the MLP are each split as a
column-parallel then a row-parallel matmul, so each needs one all-reduce of its output in the
forward (operator ``g``) and one of its input gradient in the backward (operator ``f``). Per
transformer layer and micro-batch, over the ``t`` ranks of the tensor-parallel group:

* forward: 2 all-reduces of ``b x s x h`` activations (bf16, 2 bytes each);
* backward: 2 all-reduces, plus 2 more when full recomputation reruns the forward;
* with sequence parallelism (Korthikanti et al. 2022, section 4.2.2) each all-reduce becomes a
  reduce-scatter and an all-gather of the same tensor: the same bytes on a ring, twice the calls;
* the vocabulary-parallel embedding all-reduces its output once (first stage, forward), and the
  LM head's input gradient once (last stage, backward).

In the forward these sit between dependent matmuls, on the critical path. In the backward
Megatron-LM overlaps the all-reduce of each input gradient with the weight-gradient GEMM of the
same layer (Korthikanti et al. 2022, section 6.2: "we overlap all-reduce communication with the
linear weight's gradient computation"), half the backward's matmul work, i.e. about the
forward's compute time: exposed in backward = ``max(0, communication - forward compute)``.
With ``tp_comm_overlap`` (Megatron-Core's userbuffers) the forward's hide under its GEMMs too:
exposed = ``max(0, communication - compute)`` per pass. The ring all-reduce sends
``2 (t-1)/t x b s h x 2`` bytes per GPU through its NVLink port: ``1.75 x`` the activations at
``t = 8`` (see :func:`ring_allreduce_bytes_factor` and the A100/A800 case, docs/parallelism.md).
"""

from __future__ import annotations

import numpy as np

from willitscale.plan.links import line_time
from willitscale.plan.traffic import Traffic, exposed_part

__all__ = ["ACTIVATION_BYTES", "activation_bytes", "tensor_traffic", "ring_allreduce_bytes_factor"]

ACTIVATION_BYTES = 2  #: bf16/fp16 activations (and fp8 training's: see activation_bytes)


def activation_bytes(dtype: str) -> int:
    """Bytes per activation element for a compute dtype: 4 for fp32/tf32 (tf32 is a matmul mode
    on fp32 tensors), else 2 (bf16/fp16; FP8 training keeps bf16 activations outside its GEMMs)."""
    return 4 if dtype in ("fp32", "tf32") else ACTIVATION_BYTES


def ring_allreduce_bytes_factor(ranks):
    """Bytes each rank sends in a ring all-reduce, per byte reduced: ``2 (n-1)/n``."""
    n = np.asarray(ranks, dtype=float)
    return 2.0 * (n - 1) / n


def tensor_traffic(*, tokens, hidden: int, layers, emb, head, full_recompute, sequence_parallel,
                   lines_ar, lines_rs, lines_ag, fwd_compute, bwd_compute, overlap: bool,
                   element: float = ACTIVATION_BYTES) -> Traffic:
    """TP collectives per micro-batch (arrays ``(plans, 3)``; ``tokens`` per GPU, shape (plans,))."""
    size = np.asarray(tokens, dtype=float) * hidden * element
    sp = np.asarray(sequence_parallel, dtype=bool)
    unit = np.where(sp, line_time(lines_rs, size) + line_time(lines_ag, size), line_time(lines_ar, size))
    full = np.asarray(full_recompute, dtype=float)[:, None]
    n_fwd = 2.0 * layers + emb
    n_bwd = 2.0 * layers + head + full * 2.0 * layers
    fwd, bwd = n_fwd * unit[:, None], n_bwd * unit[:, None]
    calls = (n_fwd + n_bwd) * np.where(sp, 2.0, 1.0)[:, None]
    active = (unit > 0)[:, None]
    weight_grads = fwd_compute  # the backward's weight-gradient GEMMs take about a forward
    return Traffic(kind="tp", op="all_reduce", fwd=fwd, bwd=bwd,
                   fwd_exposed=exposed_part(fwd, fwd_compute, overlap),
                   bwd_exposed=exposed_part(bwd, bwd_compute if overlap else weight_grads, True),
                   bytes=np.where(active, calls * size[:, None], 0.0),
                   calls=np.where(active, calls, 0.0))

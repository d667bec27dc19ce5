"""Expert parallelism (mixture of experts): the token all-to-alls around each expert layer.

With ``e``-way expert parallelism each rank holds ``experts / e`` of every MoE layer's experts
(GShard, Lepikhin et al. 2020; Megatron-Core's all-to-all token dispatcher). Per MoE layer and
micro-batch, each rank sends its tokens to the ranks holding their experts and gets the results
back:

* one all-to-all carries the rank's ``top_k`` copies of its tokens: ``tokens x top_k x h x 2``
  bytes of send buffer (``(e-1)/e`` of it leaves the GPU), tokens being the rank's
  ``b x s / (cp x tp)`` (the tensor-parallel ranks split their tokens, as with sequence
  parallelism);
* forward: dispatch and combine, 2 all-to-alls; backward: 2 more; full recomputation: 2 more.

Only MoE layers exchange tokens: each stage counts the MoE layers it holds (DeepSeek-V3's 3
dense-first layers sit on the first stage, so it holds 3 fewer;
:func:`~willitscale.workload.stages.stage_dense_layers`).
The experts cannot start before their tokens arrive, so the all-to-alls are on the critical
path (no overlap modelled). Dropless routing with perfect balance: no capacity padding.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.lines import line_time
from willitscale.memory.activations import ACTIVATION_BYTES
from willitscale.step.traffic import Traffic

__all__ = ["expert_traffic"]


def expert_traffic(*, tokens, tp, top_k: int, hidden: int, layers, full_recompute,
                   lines_a2a, element: float = ACTIVATION_BYTES) -> Traffic:
    """Token all-to-alls per micro-batch (arrays ``(plans, 3)``); zero for dense models."""
    size = (np.asarray(tokens, dtype=float) / np.asarray(tp, dtype=float)
            * top_k * hidden * element)
    # (plans,); not evaluated when no stage holds a MoE layer (every term below is 0 then)
    one = line_time(lines_a2a, size) if np.any(layers) else np.zeros(size.shape)
    full = np.asarray(full_recompute, dtype=float)
    n_fwd, n_bwd = 2.0 * layers, (2.0 + 2.0 * full)[:, None] * layers
    active = (one > 0)[:, None]
    fwd, bwd = n_fwd * one[:, None], n_bwd * one[:, None]
    return Traffic(kind="ep", op="all_to_all", fwd=fwd, bwd=bwd, fwd_exposed=fwd, bwd_exposed=bwd,
                   bytes=np.where(active, (n_fwd + n_bwd) * size[:, None], 0.0),
                   calls=np.where(active, n_fwd + n_bwd, 0.0))

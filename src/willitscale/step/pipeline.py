"""Pipeline parallelism: sends between stages, the schedule's bubble, micro-batches in flight.

**Bubble.** With ``p`` stages, ``m`` micro-batches per step and ``t_f``, ``t_b`` the forward and
backward time of one micro-batch on one stage, GPipe (Huang et al. 2019) and 1F1B
(PipeDream-Flush, Narayanan et al. 2021) both take ``(m + p - 1)(t_f + t_b)``: the bubble is
``(p - 1)(t_f + t_b)``, a fraction ``(p - 1)/m`` of the ideal time (Narayanan et al. 2021,
SC21, section 2.2.1) and ``(p - 1)/(m + p - 1)`` of the step. The interleaved schedule gives
each device ``v`` model chunks of ``L / (p v)`` layers and cuts the bubble to
``(p - 1)(t_f + t_b) / v``: fraction ``(p - 1)/(v m)`` of the ideal time (same paper, section
2.2.2). Stages do not all take the same time (the first holds the embedding, the last the LM
head), so we use the general form, with ``T_k`` stage ``k``'s time per micro-batch::

    pipeline = m x max_k T_k + (sum_k T_k - max_k T_k) / v,     bubble = the second term

which is ``(m + p - 1) T`` (over ``v``) for equal stages. ``T_k`` includes the stage's exposed
tensor, context and expert parallel communication and its sends.

**Sends.** Each micro-batch crosses each stage boundary forward (activations) and backward
(their gradients): ``b x s/cp x h`` elements, 2 bytes each. With ``t``-way tensor parallelism
each of the ``t`` ranks sends ``1/t`` of it to its peer in the next stage (Megatron-LM's
scatter/gather optimization, Narayanan et al. 2021 section 4.1), which then all-gathers the
pieces over NVLink; with sequence parallelism the activations are already split, no gather.
The interleaved schedule sends ``v`` times as often. Sends are on the critical path (the next
stage waits for them). Peers sit ``tp x cp x dp`` ranks apart: usually on another node, the
same local GPU (the same rail).

**In flight** (activation memory): GPipe keeps all ``m`` micro-batches; 1F1B keeps
``min(m, p - k)`` on stage ``k`` (the first stage holds ``p``: ``L`` layers' worth, Korthikanti
et al. 2022 section 4.2.3); interleaved 1F1B keeps ``min(m v, 2 (p - k - 1) + (v - 1) p + 1)``
chunks of ``L/(p v)`` layers (Megatron-LM's warm-up count): on the first stage
``L (1 + (p - 1)/(p v))`` layers' worth, the factor of Korthikanti et al.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.lines import line_time
from willitscale.memory.activations import ACTIVATION_BYTES
from willitscale.step.traffic import Traffic

__all__ = ["send_traffic", "pipeline_time", "in_flight", "bubble_fraction"]


def bubble_fraction(pp, micro_batches, virtual_stages=1):
    """Bubble over ideal time, ``(p - 1) / (v m)`` (Narayanan et al. 2021), equal stages."""
    p, m, v = (np.asarray(x, dtype=float) for x in (pp, micro_batches, virtual_stages))
    return (p - 1) / (v * m)


def send_traffic(*, tokens, hidden: int, tp, pp, sequence_parallel, interleaved, virtual_stages,
                 lines_p2p, lines_tp_ag, element: float = ACTIVATION_BYTES) -> tuple[Traffic, Traffic]:
    """Stage-to-stage sends per micro-batch, charged to the sending stage, and the all-gathers
    that reassemble them over the receiving stage's tensor-parallel group (arrays (plans, 3))."""
    full = np.asarray(tokens, dtype=float) * hidden * element
    t = np.asarray(tp, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool)
    message = full / t
    many_stages = np.asarray(pp) > 1
    gathered = (t > 1) & ~sp & many_stages
    gather = np.where(gathered, line_time(lines_tp_ag, full), 0.0)
    one = np.where(many_stages, line_time(lines_p2p, message), 0.0)
    p = np.asarray(pp, dtype=float)
    many = p >= 2
    v = np.where(np.asarray(interleaved, dtype=bool), np.asarray(virtual_stages, dtype=float), 1.0)
    fwd_sends = np.stack([many * 1.0, many * 1.0, 0.0 * p], axis=-1)
    bwd_sends = np.stack([0.0 * p, many * 1.0, many * 1.0], axis=-1)
    inter = np.asarray(interleaved, dtype=bool)[:, None]
    fwd_sends = np.where(inter & many[:, None], v[:, None], fwd_sends)
    bwd_sends = np.where(inter & many[:, None], v[:, None], bwd_sends)
    fwd, bwd = fwd_sends * one[:, None], bwd_sends * one[:, None]
    n = fwd_sends + bwd_sends
    sends = Traffic(kind="pp", op="send_recv", fwd=fwd, bwd=bwd, fwd_exposed=fwd, bwd_exposed=bwd,
                    bytes=n * message[:, None] * many[:, None], calls=n * many[:, None])
    gfwd, gbwd = fwd_sends * gather[:, None], bwd_sends * gather[:, None]
    gathers = Traffic(kind="ppgather", op="all_gather", fwd=gfwd, bwd=gbwd, fwd_exposed=gfwd,
                      bwd_exposed=gbwd, bytes=n * (full * gathered)[:, None],
                      calls=n * gathered[:, None])
    return sends, gathers


def pipeline_time(stage_time, counts, micro_batches, virtual_stages, interleaved):
    """``(pipeline, bubble, critical column)`` from per-micro-batch stage times (plans, 3)."""
    active = counts > 0
    total = np.sum(counts * stage_time, axis=-1)
    masked = np.where(active, stage_time, -np.inf)
    critical = np.argmax(masked, axis=-1)
    t_max = np.take_along_axis(masked, critical[:, None], axis=-1)[:, 0]
    v = np.where(np.asarray(interleaved, dtype=bool), np.asarray(virtual_stages, dtype=float), 1.0)
    bubble = np.maximum(total - t_max, 0.0) / v
    return np.asarray(micro_batches, dtype=float) * t_max + bubble, bubble, critical


def in_flight(pp, micro_batches, gpipe, interleaved, virtual_stages):
    """Micro-batches of activations each stage column keeps, in whole-stage equivalents (plans, 3)."""
    p = np.asarray(pp, dtype=float)
    m = np.asarray(micro_batches, dtype=float)
    v = np.asarray(virtual_stages, dtype=float)
    k = np.stack([0.0 * p, np.ones_like(p), p - 1], axis=-1)  # stage index of each column
    one_f_one_b = np.minimum(m[:, None], p[:, None] - k)
    chunks = np.minimum((m * v)[:, None], 2.0 * (p[:, None] - k - 1) + (v[:, None] - 1) * p[:, None] + 1)
    out = np.where(np.asarray(gpipe, dtype=bool)[:, None], m[:, None], one_f_one_b)
    out = np.where(np.asarray(interleaved, dtype=bool)[:, None], chunks / v[:, None], out)
    return np.where((p > 1)[:, None], np.maximum(out, 1.0), 1.0)

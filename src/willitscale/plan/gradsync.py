"""Data-parallel gradient synchronisation of each pipeline stage: buckets during the last backward.

Each stage synchronises the gradients of the parameters it holds over its data-parallel group
(``cp x dp`` ranks; an expert's over ``cp x dp / ep``). As PyTorch DDP and Megatron-LM's
overlapped gradient reduce do, gradients are packed into buckets in the order they become ready
during the backward of the stage's **last** micro-batch (gradient accumulation syncs only then)
and each bucket's collective (all-reduce; reduce-scatter with ZeRO >= 1) runs on one stream as
soon as it is full. The tail still running when that backward ends is exposed
(:func:`willitscale.plan.buckets.last_end`).

A stage's gradient layout is the data-parallel layout of :mod:`.gradients` restricted to its
layers, embedding and head, with every tensor-parallel-split tensor divided over ``tp`` so that
the stage's sizes add up to ``layer_params_per_tp_rank`` (norms and the router stay whole); the
expert MLPs are divided over ``ep`` and synchronised over their own group. On one stage with
``tp = 1`` this is exactly the data-parallel estimate's layout. Bucket layouts depend only on
the model, the stage and the caps, so they are computed once per distinct stage (cached), and
the plans sharing one are scheduled together as rows of one array.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from willitscale.plan.buckets import assign_buckets, last_end, uniform_bucket_runs
from willitscale.plan.links import line_time

__all__ = ["StageKey", "stage_buckets", "bucket_tail"]


def _layer_split(model, tp: int):
    """(matrix scale, expert share): TP rank's matrices / whole matrices, expert fraction."""
    from willitscale.workload.params import (attention_params, layer_params_per_tp_rank,
                                             mlp_params, norm_params)

    attention = attention_params(model)
    mlp_all = model.mlp_experts * mlp_params(model)
    fixed = 2 * norm_params(model) + model.hidden * model.moe_experts
    scale = (float(layer_params_per_tp_rank(model, tp)) - fixed) / (attention + mlp_all)
    return scale, (mlp_all / (attention + mlp_all) if model.is_moe else 0.0)


@lru_cache(maxsize=4096)
def _stage_layout(model, seq_len: int, flash: bool, recompute: str, layers: int, emb: bool,
                  head: bool, copy: bool, tp: int, ep: int):
    """(dense params, expert params, ready fraction) per tensor, in ready order."""
    from willitscale.plan.gradients import _layer_groups
    from willitscale.workload.flops import training_flops
    from willitscale.workload.params import param_count

    flops = training_flops(model, seq_len, recompute=recompute, causal=flash, flash_attention=flash)
    counts = param_count(model)
    scale, _ = _layer_split(model, tp)
    dense: list[float] = []
    expert: list[float] = []
    work: list[float] = []

    def add(n_dense: float, n_expert: float, w: float) -> None:
        dense.append(float(n_dense))
        expert.append(float(n_expert))
        work.append(float(w))

    if head:
        lm = counts.lm_head / tp if counts.lm_head else (counts.token_embedding / tp if copy else 0.0)
        add(lm, 0.0, 2.0 * flops.lm_head_forward_per_token)
        add(counts.final_norm, 0.0, 0.0)
    groups = _layer_groups(model, flops)
    moe = model.is_moe
    for _ in range(layers):
        for name, n, w in groups:
            matrix = name.startswith(("mlp.", "attn."))
            n_tp = n * scale if matrix else n
            if moe and ep > 1 and name.startswith("mlp."):
                add(0.0, n_tp / ep, w)
            else:
                add(n_tp, 0.0, w)
    if emb:
        add(counts.position_embedding, 0.0, 0.0)
        add(counts.embedding_norm, 0.0, 0.0)
        add(counts.token_embedding / tp, 0.0, 0.0)
    done = np.cumsum(work)
    fraction = done / done[-1] if done[-1] > 0 else np.ones_like(done)
    d, e = np.asarray(dense), np.asarray(expert)
    keep = (d + e) > 0
    return d[keep], e[keep], np.clip(fraction[keep], 0.0, 1.0)


StageKey = tuple  # (layers, emb, head, copy, tp, ep, recompute index)


@lru_cache(maxsize=4096)
def stage_buckets(model, seq_len: int, flash: bool, key: StageKey, params: float,
                  grad_bytes: int, first_cap: float, cap: float):
    """``(dense bytes, expert bytes, ready fraction, count)`` per bucket of one stage.

    Without a model shape (``model is None``) gradients appear uniformly: ``params`` of them,
    in runs of identical buckets when there are many (:func:`~.buckets.uniform_bucket_runs`).
    With a shape every bucket holds at least one tensor, so there are at most as many as tensors
    and each row is one bucket (count 1).
    """
    from willitscale.plan.buckets import bucket_totals
    from willitscale.workload.flops import RECOMPUTE

    if model is None:
        sizes, ready, counts = uniform_bucket_runs(params * grad_bytes, first_cap=first_cap, cap=cap)
        return sizes, np.zeros_like(sizes), ready, counts
    layers, emb, head, copy, tp, ep, rec = key
    d, e, frac = _stage_layout(model, seq_len, flash, RECOMPUTE[rec], int(layers), bool(emb),
                               bool(head), bool(copy), int(tp), int(ep))
    sizes = (d + e) * grad_bytes
    index = assign_buckets(sizes, first_cap=first_cap, cap=cap)
    dense, ready = bucket_totals(d * grad_bytes, frac, index)
    expert, _ = bucket_totals(e * grad_bytes, frac, index)
    return dense, expert, np.clip(ready, 0.0, 1.0), np.ones_like(dense)


#: fixed-point iterations of the overlap slowdown (each shrinks the error by the slowdown factor
#: s or more: 0.19^6 < 0.01% of the first correction at the default)
SLOWDOWN_ITERATIONS = 6


def bucket_tail(*, dense_bytes, expert_bytes, ready_fraction, backward, overlap: bool,
                dense_lines, expert_lines, replica_lines=None, shard=None, measured=None,
                schedule: bool = False, slowdown: float = 0.0, counts=None):
    """``(total, exposed, stretch)`` seconds of one stage's bucket collectives for rows of plans.

    ``backward`` (rows,) is the last micro-batch's backward on the stage; ``*_lines`` are the
    rows' collective lines (dense group, expert group, and with hybrid sharding the all-reduce
    of each shard, ``1/shard`` of the bytes, across nodes). ``measured = (seconds, bytes)``
    scales a measured all-reduce instead. ``counts`` (per bucket, default 1) stands for that many
    identical buckets in a row: a bucket's time is ``count x time(bytes / count)``.

    The overlap slowdown: compute running beside NCCL kernels is ``slowdown`` s slower per s of
    overlap, so the backward stretches by ``stretch = slowdown x hidden`` and the buckets become
    ready correspondingly later (ready fraction x stretched backward); the schedule is rerun and
    ``exposed = end of the last collective - end of the stretched backward``. ``hidden`` depends
    on the stretch, so the stretch is iterated to its fixed point (:data:`SLOWDOWN_ITERATIONS`).
    When communication is the critical path the step is then ``max(stretched backward, last
    end)``: the slowdown is not added on top of a tail it does not delay. With ``schedule``,
    also ``(ready, duration)`` of the final schedule.
    """
    d = np.asarray(dense_bytes, dtype=float)[None, :]
    e = np.asarray(expert_bytes, dtype=float)[None, :]
    k = np.ones_like(d) if counts is None else np.maximum(np.asarray(counts, dtype=float)[None, :], 1.0)
    if measured is not None:
        seconds, size = measured
        duration = np.broadcast_to(seconds * (d + e) / size, (len(backward), d.shape[1]))
    else:
        duration = np.where(d > 0, k * line_time(dense_lines, d / k), 0.0)
        if np.any(e > 0):
            duration = duration + np.where(e > 0, k * line_time(expert_lines, e / k), 0.0)
        if replica_lines is not None:
            shard_bytes = d / np.asarray(shard, dtype=float)[:, None] / k
            duration = duration + np.where(d > 0, k * line_time(replica_lines, shard_bytes), 0.0)
    bwd = np.asarray(backward, dtype=float)
    fraction = np.asarray(ready_fraction, dtype=float)[None, :]
    total = duration.sum(axis=-1)

    def exposed_with(stretch):
        end_of_backward = bwd + stretch
        ready = fraction * end_of_backward[:, None] if overlap else end_of_backward[:, None] + 0.0 * fraction
        return np.clip(last_end(ready, duration) - end_of_backward, 0.0, total), ready

    stretch = np.zeros_like(bwd)
    exposed, ready = exposed_with(stretch)
    if overlap and slowdown > 0:
        for _ in range(SLOWDOWN_ITERATIONS):
            stretch = slowdown * (total - exposed)
            exposed, ready = exposed_with(stretch)
    return (total, exposed, stretch, ready, duration) if schedule else (total, exposed, stretch)

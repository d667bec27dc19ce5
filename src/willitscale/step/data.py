"""Data-parallel gradient synchronisation of each pipeline stage: buckets during the last backward.

Each stage synchronises the gradients of the parameters it holds over its data-parallel group
(``cp x dp`` ranks; an expert's over ``cp x dp / ep``). As PyTorch DDP and Megatron-LM's
overlapped gradient reduce do, gradients are packed into buckets in the order they become ready
during the backward of the stage's **last** micro-batch (gradient accumulation syncs only then)
and each bucket's collective (all-reduce; reduce-scatter with ZeRO >= 1) runs on one stream as
soon as it is full. The tail still running when that backward ends is exposed
(:func:`willitscale.step.buckets.last_end`).

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

from willitscale.collectives.lines import line_time
from willitscale.step.buckets import assign_buckets, bucket_totals, uniform_bucket_runs
from willitscale.step.gradients import layer_gradient_groups
from willitscale.workload.flops import RECOMPUTE, training_flops
from willitscale.workload.stages import layer_kinds
from willitscale.workload.params import (
    attention_params,
    layer_fixed_params,
    layer_params_per_tp_rank,
    mlp_block_params,
    param_count,
    routed_expert_params,
)

__all__ = ["StageKey", "stage_buckets", "bucket_tail"]


def _layer_split(model, tp: int):
    """(matrix scale, expert share): TP rank's matrices / whole matrices, expert fraction."""

    attention = attention_params(model)
    mlp_all = mlp_block_params(model)
    fixed = layer_fixed_params(model)
    scale = (float(layer_params_per_tp_rank(model, tp)) - fixed) / (attention + mlp_all)
    return scale, (routed_expert_params(model) / (attention + mlp_all) if model.is_moe else 0.0)


@lru_cache(maxsize=64)
def _layer_pattern(model, seq_len: int, flash: bool, recompute: str, tp: int, ep: int):
    """One layer's tensors in ready order: (dense params, expert params, backward work) arrays,
    and the FLOPs and counts the stage's head and embedding need."""

    flops = training_flops(model, seq_len, recompute=recompute, causal=flash, flash_attention=flash)
    scale, _ = _layer_split(model, tp)
    split = model.is_moe and ep > 1
    dense, expert, work = [], [], []
    for name, n, w in layer_gradient_groups(model, flops):
        n_tp = n * scale if name.startswith(("mlp.", "attn.", "dense_mlp.")) else n
        moved = split and name.startswith("mlp.")
        dense.append(0.0 if moved else float(n_tp))
        expert.append(float(n_tp) / ep if moved else 0.0)
        work.append(float(w))
    return (np.array(dense), np.array(expert), np.array(work),
            float(flops.lm_head_forward_per_token), param_count(model))


@lru_cache(maxsize=4096)
def _stage_layout(model, seq_len: int, flash: bool, recompute: str, layers: int, emb: bool,
                  head: bool, copy: bool, tp: int, ep: int):
    """(dense params, expert params, ready fraction) per tensor, in ready order: the head's
    (last stage), every layer's from the last to the first, the embeddings' (first stage). With
    dense-first layers the first stage holds them (as many as it has layers) and a later stage
    is all MoE layers (off by the dense layers that do not fit on the first stage: none for
    DeepSeek-V3 unless a stage holds fewer than 3 layers)."""
    runs = [(model, layers)]
    kinds = layer_kinds(model)
    if kinds is not None:  # MoE layers, then (earlier, so ready later) the first stage's dense ones
        dense = min(model.dense_layers, layers) if emb else 0
        runs = [(kinds[1], layers - dense), (kinds[0], dense)]
    patterns = [(_layer_pattern(m, seq_len, flash, recompute, tp, ep), n) for m, n in runs]
    _, _, _, head_flops, counts = patterns[0][0]
    first, last = [], []
    if head:
        lm = counts.lm_head / tp if counts.lm_head else (counts.token_embedding / tp if copy else 0.0)
        first = [(lm, 0.0, 2.0 * head_flops), (counts.final_norm, 0.0, 0.0)]
    if emb:
        last = [(counts.position_embedding, 0.0, 0.0), (counts.embedding_norm, 0.0, 0.0),
                (counts.token_embedding / tp, 0.0, 0.0)]
    ends = lambda items, i: np.array([float(x[i]) for x in items])  # noqa: E731
    tiles = lambda i: [np.tile(p[i], n) for p, n in patterns]  # noqa: E731
    d = np.concatenate([ends(first, 0), *tiles(0), ends(last, 0)])
    e = np.concatenate([ends(first, 1), *tiles(1), ends(last, 1)])
    done = np.cumsum(np.concatenate([ends(first, 2), *tiles(2), ends(last, 2)]))
    fraction = done / done[-1] if done[-1] > 0 else np.ones_like(done)
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


def bucket_tail(*, dense_bytes, expert_bytes, ready_fraction, backward, overlap: bool,
                dense_lines, expert_lines, replica_lines=None, shard=None, measured=None,
                schedule: bool = False, slowdown: float = 0.0, counts=None, dense_time=None):
    """``(total, exposed, stretch)`` seconds of one stage's bucket collectives for rows of plans.

    ``dense_bytes``, ``expert_bytes``, ``ready_fraction`` and ``counts`` are per bucket, shape
    ``(buckets,)`` (one layout for every row) or ``(rows, buckets)`` (a layout per row; rows
    with fewer buckets are padded at the front with empty buckets ready at 0, which change no
    end time). ``backward`` (rows,) is the last micro-batch's backward on the stage; ``*_lines``
    are the rows' collective lines (dense group, expert group, and with hybrid sharding the all-reduce
    of each shard, ``1/shard`` of the bytes, across nodes). ``measured = (seconds, bytes)``
    scales a measured all-reduce instead (``bytes`` a number or one per row). ``dense_time``:
    ``line_time(dense_lines, dense_bytes / counts)`` when the caller has it already. ``counts`` (per bucket, default 1) stands for that many
    identical buckets in a row: a bucket's time is ``count x time(bytes / count)``.

    The overlap slowdown: compute running beside NCCL kernels is ``slowdown`` s slower per s of
    overlap, so the backward stretches by ``stretch = slowdown x hidden`` and the buckets become
    ready correspondingly later (ready fraction x stretched backward); the schedule is rerun and
    ``exposed = end of the last collective - end of the stretched backward``. ``hidden`` depends
    on the stretch: the stretch is its fixed point, solved exactly (:func:`_fixed_stretch`).
    When communication is the critical path the step is then ``max(stretched backward, last
    end)``: the slowdown is not added on top of a tail it does not delay. With ``schedule``,
    also ``(ready, duration, expert duration)`` of the final schedule (the expert groups' part
    of each bucket's time, for the report's separate row).
    """
    d = np.atleast_2d(np.asarray(dense_bytes, dtype=float))
    e = np.atleast_2d(np.asarray(expert_bytes, dtype=float))
    k = np.ones_like(d) if counts is None else np.maximum(np.atleast_2d(np.asarray(counts, dtype=float)), 1.0)
    if measured is not None:
        seconds, size = measured
        size = np.asarray(size, dtype=float).reshape(-1, 1)
        duration = np.broadcast_to(seconds * (d + e) / size, (len(backward), d.shape[1]))
    else:
        dense_time = line_time(dense_lines, d / k) if dense_time is None else dense_time
        duration = np.where(d > 0, k * dense_time, 0.0)
        if np.any(e > 0):
            expert_duration = np.where(e > 0, k * line_time(expert_lines, e / k), 0.0)
            duration = duration + expert_duration
        if replica_lines is not None:
            shard_bytes = d / np.asarray(shard, dtype=float)[:, None] / k
            duration = duration + np.where(d > 0, k * line_time(replica_lines, shard_bytes), 0.0)
    bwd = np.asarray(backward, dtype=float)
    fraction = np.atleast_2d(np.asarray(ready_fraction, dtype=float))
    total = duration.sum(axis=-1)

    # the time of each bucket and every later one: the stream ends at max_j (ready_j + S_j)
    suffix = np.flip(np.cumsum(np.flip(duration, axis=-1), axis=-1), axis=-1)
    stretch = np.zeros_like(bwd)
    if overlap and slowdown > 0:
        stretch = _fixed_stretch(bwd, fraction, suffix, total, slowdown)
    end_of_backward = bwd + stretch
    ready = fraction * end_of_backward[:, None] if overlap else end_of_backward[:, None] + 0.0 * fraction
    end = np.max(ready + suffix, axis=-1) if suffix.shape[-1] else np.zeros_like(bwd)
    exposed = np.clip(end - end_of_backward, 0.0, total)
    if schedule:
        if measured is not None or not np.any(e > 0):  # by bytes
            expert_duration = duration * (e / np.maximum(d + e, 1e-300))
        return total, exposed, stretch, ready, duration, expert_duration
    return total, exposed, stretch


def _fixed_stretch(backward, fraction, suffix, total, slowdown: float):
    """The stretch ``x = s (total - exposed(x))`` of the last backward, exactly, per row.

    With the buckets in launch order and ``S_j`` the time of bucket ``j`` and all after it, the
    stream ends at ``max_j (f_j (b + x) + S_j)`` (:func:`~.buckets.last_end`), so
    ``exposed(x) = min(total, max(0, max_j L_j(x)))`` with ``L_j(x) = (f_j - 1)(b + x) + S_j``
    (``suffix`` holds ``S_j`` per row and bucket).
    ``g(x) = x - s (total - exposed(x))`` is then a max (then min) of increasing straight lines
    (slope ``1 + s (f_j - 1) >= 1 - s``), so its root is the least of their roots, ``s x total``
    (nothing exposed) and, per bucket,
    ``x_j = s (total - S_j + (1 - f_j) b) / (1 + s (f_j - 1))``; the clip at ``total`` only
    bounds it below by 0, which every ``x_j`` already is. A bucket whose line is flat
    (``s = 1``, ``f_j = 0``) never crosses zero.
    """
    b = np.asarray(backward, dtype=float)[:, None]
    slope = 1.0 + slowdown * (fraction - 1.0)
    numerator = slowdown * (total[:, None] - suffix + (1.0 - fraction) * b)
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = np.where(slope > 1e-12, numerator / slope, np.inf)
    if roots.shape[-1] == 0:
        return slowdown * total
    return np.minimum(slowdown * total, np.min(roots, axis=-1))

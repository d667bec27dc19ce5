"""What runs after each stage's last backward: the gradient buckets, ZeRO's extras, the
tied-embedding all-reduce, and how much of that the pipeline drain hides.

In 1F1B the first stage finishes its last backward last; stage ``k`` finishes earlier by the
backward times of the stages before it (the gradient travels back through them), so its
gradient synchronisation has that much slack. The step's tail is the largest, over stages, of
``exposed buckets + tied-embedding all-reduce - slack`` (never negative). Megatron-LM keeps a
tied LM head's copy of the token embedding on the last stage and all-reduces the two copies'
gradients between the first and last stages after the data-parallel reduction
(``finalize_model_grads``): ``V x h / tp`` gradients over 2 ranks, over the link the pipeline
crosses.

**The window the gradient buckets hide behind** (:func:`sync_window`). With 1F1B or GPipe a
stage's gradients become final during its last micro-batch's backward, so the buckets overlap
that one backward. With the interleaved schedule a stage holds ``v`` model chunks and runs the
micro-batches in groups of ``p`` (the pipeline depth) per chunk: forward chunk 0 for ``p``
micro-batches, then chunk 1, ...; backward in the reverse chunk order (Narayanan et al. 2021,
section 2.2; Megatron-LM ``schedules.py``, ``get_model_chunk_id``). Each chunk's gradients are
final after its last micro-batch of the last group, and Megatron-LM enables each chunk's
gradient sync at that micro-batch (``is_last_microbatch_for_model_chunk``), so chunk ``v - 1``
reduces while chunks ``v - 2 .. 0`` still run their last group's backward: the buckets overlap
``min(m, p)`` micro-batches' backward of the stage, ready in the same layer order spread over
that window (a named approximation: within a chunk the buckets are taken as ready
progressively rather than all at the chunk's end, at most ``1/v`` of the window early).
Likewise ZeRO-1/2's weight all-gather of chunk ``j`` is needed only when the first group's
forward reaches chunk ``j``: it hides behind ``min(m, p)`` micro-batches' forward.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.lines import line_time, pair_time, select_lines, take_lines
from willitscale.memory.state import WEIGHT_BYTES
from willitscale.step.buckets import comm_schedule
from willitscale.step.data import bucket_tail, stage_buckets
from willitscale.step.detail import GradientTail
from willitscale.step.engine import ALL_COLUMNS, batch_key, memo
from willitscale.step.sharding import param_gather_exposed

__all__ = ["gradient_tail", "expert_share", "sync_window"]


def sync_window(b, st):
    """Micro-batches of a stage's backward (forward) that its gradient buckets (ZeRO-1/2's
    weight all-gather) can overlap, per plan: 1, or ``min(m, p)`` with the interleaved schedule
    (the module docstring)."""
    return np.where(b.interleaved & (b.virtual_stages > 1),
                    np.minimum(st.m, b.pp.astype(float)), 1.0)


def _bucket_rows(ctx, b, st, params, L, bwd_k, shard, detail: bool):
    sc = ctx.scenario
    n = len(b)
    total, exposed, stretch = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    sync = _either(b.zero == 0, L["dp_ar"], L["shard_rs"])
    esync = _either(b.zero == 0, L["edp_ar"], L["eshard_rs"])
    hybrid = b.shard_node & (b.zero >= 1)
    measured = sc.measured.allreduce_time
    schedule, experts = {}, {}
    groups = _stage_groups(ctx, b, st, params)
    dense_times = _dense_times(sync, groups)
    for (k, key, rows, d, e, frac, counts), dense_time in zip(groups[0], dense_times):
        meas = (measured, sc.measured.allreduce_size or float(np.sum(d + e))) if key[7] else None
        any_hybrid = bool(np.any(hybrid[rows]))
        lines = (sync, esync) + ((L["replica"],) if any_hybrid else ())
        timed, spread = _distinct_rows(rows, bwd_k[:, k], shard, lines)
        out = bucket_tail(
            dense_bytes=d, expert_bytes=e, ready_fraction=frac, backward=bwd_k[timed, k],
            overlap=sc.ddp.overlap, dense_lines=take_lines(sync, timed),
            expert_lines=take_lines(esync, timed),
            replica_lines=take_lines(L["replica"], timed) if any_hybrid else None,
            shard=np.maximum(shard[timed], 1.0), measured=meas,
            schedule=detail and rows[0] == 0, slowdown=sc.ddp.overlap_slowdown, counts=counts,
            dense_time=dense_time)
        total[rows, k], exposed[rows, k], stretch[rows, k] = (out[0][spread], out[1][spread],
                                                              out[2][spread])
        if len(out) == 6:
            schedule[k] = (d + e, out[3][0], out[4][0], counts, out[2][0])
            experts[k] = expert_share(out[3][0], out[4][0], out[5][0],
                                      float(bwd_k[rows[0], k] + out[2][0]))
    return total, exposed, stretch, schedule, experts


def _distinct_rows(rows, backward, shard, lines):
    """``(rows timed, index of each row's twin among them)``: the rows of one stage layout whose
    bucket tails differ. A row's tail reads only its last backward, its shard count and its
    lines' table row (:func:`~willitscale.step.data.bucket_tail` works row by row), so when
    every row has the same lines and shard (the variants of one plan a fix tries, placed once:
    :func:`willitscale.step.evaluate._places_and_lines`), rows with the same backward (more
    gradient accumulation does not change it) share one evaluation."""
    every = (rows, np.arange(len(rows)))
    if len(rows) < 2:
        return every
    for column in [shard[rows]] + [x.rows_of_plans()[rows] for x in lines]:
        if not np.all(column == column[0]):
            return every
    _, first, spread = np.unique(backward[rows], return_index=True, return_inverse=True)
    if len(first) == len(rows):
        return every
    return rows[first], spread.reshape(-1)


def _stage_groups(ctx, b, st, params):
    """``(column, key, rows, dense bytes, expert bytes, ready fraction, counts)`` per stage
    column and distinct stage layout (:func:`~willitscale.step.data.stage_buckets`), and their
    sizes joined for one evaluation (:func:`_joint_sizes`), kept on
    the context for small batches: they read the scenario, the model terms (``st`` and
    ``params`` come from them and the batch) and the gradient bytes; the value holds the
    objects whose ids key it, so no id is reused while the entry lives."""
    key = batch_key(b, ALL_COLUMNS)
    if key is None:
        return _grouped_stages(ctx, b, st, params)
    key = ("stage groups", id(ctx.scenario), id(ctx.terms), ctx.grad_bytes, ctx.layer_fixed,
           ctx.expert_share, key)
    return memo(ctx, key, lambda: (ctx.scenario, ctx.terms,
                                   _grouped_stages(ctx, b, st, params)))[-1]


def _grouped_stages(ctx, b, st, params):
    sc = ctx.scenario
    measured = sc.measured.allreduce_time
    out = []
    for k in range(3):
        col = np.nonzero(st.active[:, k] & (b.zero < 3))[0]
        if col.size == 0:
            continue
        keys = np.stack([st.layers[col, k], st.emb[col, k], st.head[col, k], st.copy[col, k],
                         b.tp[col], b.ep[col], b.recompute[col],
                         (b.zero[col] == 0) & (measured is not None)], axis=1).astype(np.int64)
        for key, rows in _groups(keys, col):
            d, e, frac, counts = stage_buckets(
                sc.model, sc.seq_len, sc.options.flash_attention, tuple(int(x) for x in key[:7]),
                float(params[0][rows[0], k]), ctx.grad_bytes, sc.ddp.first_bucket, sc.ddp.bucket_cap)
            out.append((k, key, rows, d, e, frac, counts))
    return tuple(out), _joint_sizes(out, len(b))


def _dense_times(sync, groups) -> list:
    """For a batch of one plan, ``line_time(sync, dense bytes / count)`` of every group's
    buckets in one evaluation (the time of each (size, plan) element is its own, so joining the
    groups' sizes changes no value); None per group otherwise (:func:`bucket_tail` times them)."""
    groups, joint = groups
    times = [None] * len(groups)
    if joint is None:
        return times
    joined, spans = joint
    time = line_time(sync, joined)
    for i, a, z in spans:
        times[i] = time[:, a:z]
    return times


def _joint_sizes(groups, n: int):
    """``(joined sizes (1, buckets), (group, start, end) spans)`` of the groups whose dense
    buckets :func:`_dense_times` times together: a batch of one plan with two or more such
    groups (not a measured all-reduce's); None otherwise."""
    timed = [i for i, g in enumerate(groups) if not g[1][7] and np.size(g[3])]
    if n != 1 or len(timed) < 2:
        return None
    sizes = [np.atleast_2d(_per_bucket(groups[i][3], groups[i][6])) for i in timed]
    ends = np.cumsum([x.shape[-1] for x in sizes])
    return (np.concatenate(sizes, axis=-1),
            tuple((i, int(z - x.shape[-1]), int(z)) for i, x, z in zip(timed, sizes, ends)))


def _per_bucket(dense_bytes, counts):
    """One bucket's bytes in each run of ``counts`` identical buckets (as :func:`bucket_tail`)."""
    d = np.atleast_2d(np.asarray(dense_bytes, dtype=float))
    k = (np.ones_like(d) if counts is None
         else np.maximum(np.atleast_2d(np.asarray(counts, dtype=float)), 1.0))
    return d / k


def _either(mask, a, b):
    """:func:`~willitscale.collectives.lines.select_lines`, or ``a`` / ``b`` themselves when
    every plan takes the same side (the other side's columns could never be chosen)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.all():
        return a
    if not mask.any():
        return b
    return select_lines(mask, a, b)


def expert_share(ready, duration, expert_duration, end_of_backward: float) -> tuple[float, float]:
    """``(time, exposed)`` fractions of one stage's bucket schedule that are the expert groups'
    collectives: buckets run one after another on one stream from when they are ready
    (:func:`~.buckets.comm_schedule`), a bucket's exposed part is what runs after the backward
    ends, split within the bucket by time. The report shows the experts' gradient sync in its
    own row, over its own group."""

    duration = np.asarray(duration, dtype=float)
    if not np.any(expert_duration):  # no expert group: nothing of the schedule is theirs
        return 0.0, 0.0
    start, end = comm_schedule(ready, duration)
    late = np.maximum(0.0, end - np.maximum(start, end_of_backward))
    share = np.divide(np.asarray(expert_duration, dtype=float), duration,
                      out=np.zeros_like(duration), where=duration > 0)
    total, exposed = float(np.sum(duration)), float(np.sum(late))
    return (float(np.sum(expert_duration)) / total if total > 0 else 0.0,
            float(np.sum(late * share)) / exposed if exposed > 0 else 0.0)


def _groups(keys, rows):
    """``(key, rows)`` for each distinct key row: one integer code per row, sorted once."""
    code = keys[:, 0].astype(np.int64)
    for j, radix in enumerate((2, 2, 2, 1 << 12, 1 << 12, 16, 2), start=1):
        code = code * radix + keys[:, j]
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    starts = np.flatnonzero(np.r_[True, sorted_code[1:] != sorted_code[:-1]])
    ends = np.r_[starts[1:], len(order)]
    for a, z in zip(starts, ends):
        members = order[a:z]
        yield keys[members[0]], rows[members]


def gradient_tail(ctx, b, st, params, places, L, fwd_k, bwd_k, *,
                  detail: bool = False) -> GradientTail:
    window = sync_window(b, st)[:, None]
    total, exposed, stretch, schedule, experts = _bucket_rows(ctx, b, st, params, L, bwd_k * window,
                                                              places["shard"].size, detail)
    m = st.m[:, None]
    z2 = (b.zero == 2)[:, None]
    extra = np.where(z2, (m - 1) * np.maximum(0.0, total - bwd_k), 0.0)
    earlier = np.where(z2, (m - 1) * np.minimum(total, bwd_k), 0.0)  # ZeRO-2: earlier micro-batches
    hidden = total - exposed + earlier
    # the last backward stretched by its own overlap (gradsync.bucket_tail), plus s x what ZeRO-2's
    # earlier reduce-scatters hide
    slowdown = stretch + (ctx.scenario.ddp.overlap_slowdown * earlier if ctx.scenario.ddp.overlap
                          else 0.0)
    t = ctx.terms
    emb_bytes = t.token_embedding / b.tp * ctx.grad_bytes
    tied = (b.pp >= 2) & t.tied & t.has_shape
    emb_ar = np.where(tied, line_time(L["emb"], emb_bytes), 0.0) if tied.any() else np.zeros(len(b))
    p = b.pp.astype(float)
    slack = np.stack([0.0 * p, bwd_k[:, 0], bwd_k[:, 0] + np.maximum(p - 2, 0.0) * bwd_k[:, 1]], axis=-1)
    ends = exposed + emb_ar[:, None] * np.array([1.0, 0.0, 1.0]) - slack
    ends = np.where(st.active, ends, -np.inf)
    tail_col = np.argmax(ends, axis=-1)
    tail = np.maximum(0.0, np.take_along_axis(ends, tail_col[:, None], axis=-1)[:, 0])
    dense, expert, _ = params
    zero12 = (b.zero == 1) | (b.zero == 2)
    if zero12.any():
        ag = pair_time(L["shard_ag"], dense * WEIGHT_BYTES, L["eshard_ag"], expert * WEIGHT_BYTES)
        ag_exp = np.where(zero12[:, None], param_gather_exposed(ag, fwd_k * window, st.layers), 0.0)
    else:  # no plan gathers its weights after the step: every term below is masked to 0
        ag = ag_exp = np.zeros_like(dense)
    ag_exp = np.where(st.active, ag_exp, 0.0)
    ag_col = np.argmax(ag_exp, axis=-1)
    return GradientTail(
        total=total, exposed=exposed, hidden=hidden, slowdown=slowdown,
        extra=np.max(np.where(st.active, extra, 0.0), -1), tail=tail, tail_col=tail_col,
        emb_ar=emb_ar, ag_total=np.where(zero12, np.take_along_axis(ag, ag_col[:, None], -1)[:, 0], 0.0),
        ag_exposed=np.max(ag_exp, axis=-1), schedule=schedule, experts=experts)

"""Putting a batch's parts together into step times, FLOPs and per-kind traffic per step.

Optimizer: fused AdamW streams each parameter's fp32 weight, gradient and two moments in and
weight and moments out, 28 bytes per parameter at the GPU's memory bandwidth; with ZeRO >= 1
each rank updates only its shard. A calibration's measured time per parameter replaces it.
Overlap slowdown: ``s x`` the communication compute hid (ring attention, ZeRO-3 gathers,
overlapped TP); for the gradient buckets, the stretch of the last backward that reschedules
them (:func:`willitscale.step.data.bucket_tail`), as docs/estimate.md derives it. Data loading: the samples each
GPU reads per step over its share of the node's storage bandwidth, hidden behind the previous
step when prefetched.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from willitscale.compute.kernels import OPTIMIZER_BYTES
from willitscale.step.detail import StepDetail
from willitscale.step.engine import BatchResult, pick

__all__ = ["assemble", "KINDS", "optimizer_time_per_param"]

#: model-parallel kinds reported per step, in report order
KINDS = ("tp", "cp", "ep", "pp", "ppgather", "zero3")


def optimizer_time_per_param(sc) -> float:
    """Seconds of the optimizer step per parameter: a calibration's measurement, else the
    optimizer's bytes per parameter (:data:`~willitscale.compute.kernels.OPTIMIZER_BYTES`: 28 for fused AdamW, 80
    for PyTorch's default foreach AdamW) at the GPU's memory bandwidth (a lower bound)."""
    entry = sc.calibration.compute_for(sc.dtype) if sc.calibration is not None else None
    if entry is not None and entry.optimizer_time_per_param is not None:
        return float(entry.optimizer_time_per_param)
    return OPTIMIZER_BYTES[sc.optimizer] / sc.cluster.gpu.memory_bandwidth


def _optimizer(ctx, b, st, params, places):
    """The optimizer step after the gradient synchronisation. With a measured single-GPU step it
    is inside that measurement: :func:`~.evaluate._compute` takes it out of the forward and
    backward, so it runs after the last all-reduce here too (it needs every gradient)."""
    sc = ctx.scenario
    dense, expert, _ = params
    sharded = (b.zero >= 1)[:, None]
    local = (np.where(sharded, dense / places["shard"].size[:, None], dense)
             + np.where(sharded, expert / places["eshard"].size[:, None], expert))
    seconds = local * optimizer_time_per_param(sc)
    return np.max(np.where(st.active, seconds, 0.0), axis=-1)


def _data(ctx, b, st):
    data = ctx.scenario.data
    if data is None or ctx.scenario.measured.step_time_one_gpu is not None:
        return np.zeros(len(b)), False
    per_gpu = data.storage_bandwidth / ctx.links.gpus_per_node
    return b.micro_batch * st.m * data.sample_bytes / per_gpu, data.overlapped


def _flops(ctx, b, st):
    t, s = ctx.terms, ctx.scenario.seq_len
    model_token = 3.0 * (t.layers * t.layer_model_token + t.head_forward_token)
    causal_token = 3.0 * (t.layers * t.layer_causal_token + t.head_forward_token)
    base = t.recompute_token[0]  # FlashAttention's own rerun; the mode's on its share of layers
    rerun = base + (t.recompute_token[b.recompute] - base) * st.share_model
    executed_token = 3.0 * (t.layers * t.layer_forward_token + t.head_forward_token) + t.layers * rerun
    tokens = (b.global_batch * s).astype(float)
    gpus = b.gpus.astype(float)
    return (tokens * model_token / gpus, tokens * executed_token / gpus, tokens,
            tokens * causal_token / gpus)


def _split_experts(per_step, tail, params, synced, grad_bytes, syncs, bucket_cap) -> None:
    """A single plan's report: the expert MLPs' gradients, synchronised over their own group
    (``cp x dp / ep`` ranks), as their own row ``edp``; ``dp`` keeps the dense gradients.
    Time and exposure are split by the buckets' schedule (:func:`.tail.expert_share`)."""
    col = int(per_step["dp"]["column"][0])
    time_share, exposed_share = tail.experts.get(col, (0.0, 0.0))
    expert = float(params[1][0, col]) * float(np.asarray(synced)[0, 0]) * grad_bytes
    if expert <= 0 or time_share <= 0:
        return
    dp = per_step["dp"]
    dense = float(params[0][0, col]) * grad_bytes
    per_step["edp"] = {"time": dp["time"] * time_share, "exposed": dp["exposed"] * exposed_share,
                       "bytes": expert * syncs, "calls": np.ceil(expert / bucket_cap) * syncs,
                       "column": dp["column"]}
    per_step["dp"] = {"time": dp["time"] * (1 - time_share),
                      "exposed": dp["exposed"] * (1 - exposed_share), "bytes": dense * syncs,
                      "calls": np.ceil(dense / bucket_cap) * syncs, "column": dp["column"]}


def assemble(ctx, b, st, comp, params, traffic, mem, pipe, bubble, crit, tail, places, *,
             detail: bool = False) -> BatchResult:
    sc = ctx.scenario
    m = st.m
    optimizer = _optimizer(ctx, b, st, params, places)
    hidden_mp = sum(tr.hidden for tr in traffic.values())
    # data parallel: the stretch of the last backward (gradsync.bucket_tail); model parallel:
    # s x what each micro-batch hides
    slowdown = pick(tail.slowdown, tail.tail_col) + sc.ddp.overlap_slowdown * m * pick(hidden_mp, crit)
    extras = tail.tail + tail.extra + tail.ag_exposed
    rest = pipe + extras + slowdown + optimizer
    load, overlapped = _data(ctx, b, st)
    data = np.maximum(0.0, load - rest) if overlapped else load
    step = data + rest
    forward, backward = m * pick(comp.forward, crit), m * pick(comp.backward, crit)
    exposed_mp = m * pick(sum(tr.exposed for tr in traffic.values()), crit)
    model_flops, executed_flops, tokens, causal_flops = _flops(ctx, b, st)
    per_step = {k: {"time": m * pick(traffic[k].time, crit), "exposed": m * pick(traffic[k].exposed, crit),
                    "bytes": m * pick(traffic[k].bytes, crit), "calls": m * pick(traffic[k].calls, crit)}
                for k in KINDS}
    dp_total = pick(tail.total, tail.tail_col)
    dp_exposed = np.minimum(tail.tail, pick(tail.exposed, tail.tail_col))
    # expert weights held by one rank only (ep = cp x dp) have nothing to synchronise
    synced_expert = (places["edp"].size > 1)[:, None]
    stage_params = params[0] + params[1] * synced_expert
    grads = pick(stage_params, tail.tail_col) * ctx.grad_bytes
    syncs = np.where(b.zero == 2, m, np.where(b.zero == 3, 0.0, 1.0))
    per_step["dp"] = {"time": dp_total + np.where(b.zero == 2, (m - 1) * dp_total, 0.0),
                      "exposed": dp_exposed + tail.extra, "column": tail.tail_col,
                      "bytes": grads * syncs,
                      "calls": np.ceil(grads / sc.ddp.bucket_cap) * syncs}
    if detail:
        _split_experts(per_step, tail, params, synced_expert, ctx.grad_bytes, syncs,
                       sc.ddp.bucket_cap)
    emb_bytes = np.where(tail.emb_ar > 0, ctx.terms.token_embedding / b.tp * ctx.grad_bytes, 0.0)
    per_step["emb"] = {"time": tail.emb_ar, "exposed": tail.tail - dp_exposed, "bytes": emb_bytes,
                       "calls": (tail.emb_ar > 0) * 1.0}
    zag = (b.zero == 1) | (b.zero == 2)
    per_step["zero_ag"] = {"time": tail.ag_total, "exposed": tail.ag_exposed,
                           "bytes": np.where(zag, np.max(stage_params, axis=-1) * 2.0, 0.0),
                           "calls": zag * 1.0}
    comms = (sum(v["time"] for k, v in per_step.items() if k in KINDS) + per_step["dp"]["time"]
             + (per_step["edp"]["time"] if "edp" in per_step else 0.0)  # split off by detail
             + tail.emb_ar + tail.ag_total)
    column = np.argmax(np.where(st.active, mem.total, -np.inf), axis=-1)
    info = StepDetail(capacity=sc.cluster.gpu.memory, peak=ctx.peak, pipeline=pipe,
                      memory_limit=sc.memory_fraction * sc.cluster.gpu.memory,
                      micro_batches=m, load=load)
    if detail:
        info = replace(info, places=places, comp=comp, traffic=traffic, tail=tail,
                       stage_counts=st.counts, layers=st.layers, params=params,
                       compute_kinds={part: {k: m * pick(v, crit) for k, v in kinds.items()}
                                      for part, kinds in comp.kinds.items()})
    return BatchResult(
        step_time=step, data_loading=data, forward=forward, backward=backward,
        overlap_slowdown=slowdown, exposed_comms=exposed_mp + extras, optimizer=optimizer,
        bubble=bubble, compute=forward + backward, comms=comms, model_flops=model_flops,
        executed_flops=executed_flops, causal_model_flops=causal_flops, tokens_per_step=tokens,
        memory=mem, memory_column=column,
        critical=crit, counts=st.counts, traffic=per_step, detail=info)

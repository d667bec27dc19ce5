"""The step of many plans at once: :func:`evaluate`, one small function per part of the step.

Every function works on arrays: ``(plans,)`` per plan, ``(plans, 3)`` per plan and stage
column (first, middle, last: :mod:`willitscale.workload.stages`). Formulas and sources are in
the modules they call.
"""

from __future__ import annotations

from dataclasses import fields, replace

from types import SimpleNamespace

import numpy as np

from willitscale.collectives.line_time import take_lines
from willitscale.collectives.lines import line_time, pair_time
from willitscale.compute.model import op_costs
from willitscale.memory.activations import activation_bytes
from willitscale.memory.device import deepspeed_pipeline_groups, megatron_groups, nccl_bytes
from willitscale.memory.layers import stage_layer_params
from willitscale.memory.stage import stage_memory
from willitscale.memory.state import WEIGHT_BYTES
from willitscale.scenario.batch import PlanBatch
from willitscale.step.assemble import assemble, optimizer_time_per_param
from willitscale.step.context import context_traffic, kv_block_bytes
from willitscale.step.detail import ComputeTimes, StepDetail
from willitscale.step.engine import ALL_COLUMNS, BatchResult, Context, batch_key, make_context, memo
from willitscale.step.expert import expert_traffic
from willitscale.step.network import AnalyticNetwork
from willitscale.step.pipeline import in_flight, pipeline_time, send_traffic
from willitscale.step.sharding import shard_groups, zero3_exposed
from willitscale.step.tail import gradient_tail
from willitscale.step.tensor import tensor_traffic
from willitscale.step.traffic import Traffic
from willitscale.topology.placement import group_placement
from willitscale.workload.params import (
    embedding_params_per_tp_rank,
    head_params_per_tp_rank,
    layer_params_per_tp_rank,
    routed_expert_params_per_tp_rank,
)
from willitscale.workload.recompute import layer_share
from willitscale.workload.stages import stage_counts, stage_dense_layers, stage_flags, stage_layers

__all__ = ["run"]


def _structure(ctx, b):
    t = ctx.terms
    layers, _ = stage_layers(t.layers, b.pp)
    emb, head, copy = stage_flags(b.pp, t.tied)
    counts = stage_counts(b.pp)
    tokens = b.micro_batch * ctx.scenario.seq_len / b.cp
    # share of each stage's layers that recompute (layers:N, every:K; 1 otherwise), and of the
    # whole model's
    share = layer_share(layers, b.recompute_layers[:, None], b.recompute_every[:, None])
    weight = counts * layers
    whole = np.sum(weight * share, axis=-1) / np.maximum(np.sum(weight, axis=-1), 1.0)
    return SimpleNamespace(layers=layers, emb=emb, head=head, copy=copy, counts=counts,
                           active=counts > 0, tokens=tokens.astype(float),
                           m=b.grad_accum.astype(float), share=share, share_model=whole)


def recompute_token(t, b, share):
    """Recomputed FLOPs per token per layer: FlashAttention's own rerun of Q K^T (mode none)
    plus the mode's rerun set on its ``share`` of the layers."""
    base = t.recompute_token[0]
    return base + (t.recompute_token[b.recompute][:, None] - base) * share


def _params(ctx, b, st):
    """Parameters one GPU holds per stage column: (dense, expert, one layer's)."""
    t = ctx.terms
    if ctx.scenario.model is None:  # one layer's size needs the layer count: unknown (0)
        dense = np.broadcast_to(np.array([t.total_params, 0.0, 0.0]), st.layers.shape).copy()
        return dense, np.zeros_like(dense), np.zeros_like(dense[:, :1])

    model = ctx.scenario.model
    tp = b.tp.astype(float)
    layer = np.asarray(layer_params_per_tp_rank(model, tp), dtype=float)
    expert = ctx.expert_share * (layer - ctx.layer_fixed)
    ep = b.ep.astype(float)
    moe_split = ep > 1
    dense_layer = np.where(moe_split, layer - expert, layer)
    expert_layer = np.where(moe_split, expert / ep, 0.0)
    emb_t = np.asarray(embedding_params_per_tp_rank(model, tp), dtype=float)
    head_t = np.asarray(head_params_per_tp_rank(model, tp), dtype=float)
    dense_layers, expert_layers = st.layers * dense_layer[:, None], st.layers * expert_layer[:, None]
    if model.is_moe:
        dense_layers, expert_layers = _moe_params(model, tp, ep, st.layers)
    dense = (dense_layers + st.emb * emb_t[:, None] + st.head * head_t[:, None]
             + st.copy * (t.token_embedding / tp)[:, None])
    return dense, expert_layers, (dense_layer + expert_layer)[:, None]


def _moe_params(model, tp, ep, layers):
    """(dense, expert) parameters of each column's layers of a mixture of experts: its
    dense-first and MoE layers counted as what they are (the first stage holds the dense ones),
    the routed experts' share on each rank exact (divided over ``ep`` when ``ep > 1``)."""
    d = stage_dense_layers(model.dense_layers, model.layers, layers)
    moe = layers - d
    routed = np.asarray(routed_expert_params_per_tp_rank(model, tp), dtype=float)[:, None]
    moe_layer = np.asarray(layer_params_per_tp_rank(model, tp, kind="moe"), dtype=float)[:, None]
    dense_layer = np.asarray(layer_params_per_tp_rank(model, tp, kind="dense"), dtype=float)[:, None]
    split = (ep > 1)[:, None]
    dense = d * dense_layer + moe * np.where(split, moe_layer - routed, moe_layer)
    return dense, moe * np.where(split, routed / ep[:, None], 0.0)


def _compute(ctx, b, st, detail: bool = False) -> ComputeTimes:
    """Compute seconds per micro-batch: ``forward``, ``backward`` (incl. recomputation) per
    column (plans, 3); per layer (plans,): the QKV, first-MLP and LM-head weight-gradient GEMMs
    (what TP's backward all-reduces hide behind) and the attention core's forward (what ring
    attention hides behind); ``kinds``: the per-op model's split by kind (detail only)."""
    if ctx.spec is not None:
        return _per_op(ctx, b, st, detail)
    t = ctx.terms
    per_gpu = (st.tokens / b.tp)[:, None]
    fwd = (st.layers * t.layer_forward_token + st.head * t.head_forward_token) * per_gpu
    rec = st.layers * recompute_token(t, b, st.share) * per_gpu
    executed = 3.0 * fwd + rec
    measured = ctx.scenario.measured.step_time_one_gpu
    if measured is not None:  # the optimizer inside it runs after the all-reduce (assemble)

        optimizer = t.total_params * optimizer_time_per_param(ctx.scenario)
        seconds = np.full(executed.shape, measured - optimizer) / st.m[:, None]
    elif ctx.efficiency.kind == "mfu":  # model FLOPs (scores in full) at MFU x peak
        model = (st.layers * t.layer_model_token + st.head * t.head_forward_token) * per_gpu
        seconds = 3.0 * model / (ctx.efficiency.value * ctx.peak)
    else:
        seconds = executed / (ctx.efficiency.value * ctx.peak)
    forward = seconds * fwd / executed
    with np.errstate(divide="ignore", invalid="ignore"):
        per_flop = np.where(executed > 0, seconds / executed, 0.0)[:, 0]
    tokens = st.tokens / b.tp
    return ComputeTimes(
        forward=forward, backward=seconds - forward, wgrad_qkv=t.qkv_token * tokens * per_flop,
        wgrad_fc1=t.fc1_token * tokens * per_flop, wgrad_head=t.head_forward_token * tokens * per_flop,
        attention=t.attention_core_token * tokens * per_flop, kinds={}, ops=())


#: the batch columns :func:`~willitscale.compute.model.op_costs` reads
_OP_COLUMNS = ("micro_batch", "tp", "cp", "sequence_parallel", "ep", "grad_accum", "recompute")


def _op_costs(ctx, spec, b, detail: bool):
    """:func:`~willitscale.compute.model.op_costs` of ``spec`` for ``b``, kept on the context
    for small batches (keyed by the spec and the columns it reads)."""
    key = batch_key(b, _OP_COLUMNS)
    return memo(ctx, None if key is None else ("op_costs", id(spec), detail, key),
                lambda: (spec, op_costs(spec, b, detail=detail)))[1]


def _per_op(ctx, b, st, detail: bool) -> ComputeTimes:
    """The per-op model (:mod:`willitscale.compute.model`) per column: each column's layers of
    one kind (``(count per column, costs)`` runs; dense-first MoE: its dense and MoE layers)."""
    c = _op_costs(ctx, ctx.spec, b, detail)
    runs = [(st.layers, c)]
    if ctx.kind_specs is not None:
        model = ctx.scenario.model
        dense = stage_dense_layers(model.dense_layers, model.layers, st.layers)
        c_dense, c_moe = (_op_costs(ctx, s, b, detail) for s in ctx.kind_specs)
        runs = [(dense, c_dense), (st.layers - dense, c_moe)]
    col = lambda x: np.asarray(x)[:, None]  # noqa: E731
    layers = lambda attr: sum(n * col(getattr(k, attr)) for n, k in runs)  # noqa: E731
    forward = layers("layer_fwd") + st.head * col(c.head_fwd) + st.emb * col(c.emb_fwd)
    # the mode's rerun set on its share of the layers (FlashAttention's own rerun of Q K^T is
    # inside the attention kernel's backward)
    backward = (layers("layer_bwd") + layers("layer_recompute") * st.share
                + st.head * col(c.head_bwd) + st.emb * col(c.emb_bwd))
    kinds = _per_op_kinds(c, runs, st, col) if detail else {}
    return ComputeTimes(forward=forward, backward=backward, wgrad_qkv=c.wgrad_qkv,
                        wgrad_fc1=c.wgrad_fc1, wgrad_head=c.wgrad_head,
                        attention=c.attention_fwd, kinds=kinds, ops=tuple(c.ops))


def _moe_layers(ctx, st):
    """MoE layers each stage column holds (the expert all-to-alls run on those only): a
    dense-first model's dense layers sit on its first stages (:func:`stage_dense_layers`)."""
    model = ctx.scenario.model
    if model is None or not getattr(model, "dense_layers", 0):
        return st.layers * ctx.terms.moe_layer_share
    return st.layers - stage_dense_layers(model.dense_layers, model.layers, st.layers)


def _per_op_kinds(c, runs, st, col):
    """The per-op split by op kind per column (detail only)."""
    k = c.kinds
    layer = lambda part, n: sum(m * col(r.kinds[part][n]) for m, r in runs)  # noqa: E731
    return {"forward": {n: layer("layer_fwd", n) + st.head * col(k["head_fwd"][n])
                        + st.emb * col(k["emb_fwd"][n]) for n in k["layer_fwd"]},
            "backward": {n: layer("layer_bwd", n) + layer("layer_recompute", n) * st.share
                         + st.head * col(k["head_bwd"][n]) + st.emb * col(k["emb_bwd"][n])
                         for n in k["layer_bwd"]},
            "recompute": {n: layer("layer_recompute", n) * st.share for n in k["layer_bwd"]}}


#: the batch columns the placements read (:func:`_placed`)
_PLACE_COLUMNS = ("tp", "cp", "ep", "dp", "pp", "shard_node", "zero")


def _places(ctx, b):
    key = batch_key(b, _PLACE_COLUMNS)
    g, order = ctx.links.gpus_per_node, ctx.scenario.options.rank_order
    return memo(ctx, None if key is None else ("places", g, order, key),
                lambda: _placed(ctx, b))


#: the columns a plan's placements and its groups' lines read (the flow network's geometry reads
#: sequence parallelism too: :func:`willitscale.step.flow_network._geometries`)
_GEOMETRY_COLUMNS = _PLACE_COLUMNS + ("sequence_parallel",)


def _places_and_lines(ctx, b):
    """The placements (:func:`_places`) and every group's lines (:func:`_lines`) of ``b``. When
    every plan has the first's geometry (the variants of one plan a fix tries: more gradient
    accumulation, larger micro-batches) and the links are the same for all, they are made for
    that one plan (kept on the context) and each plan takes its row: the same values, without
    placing and costing the same groups once per plan."""
    if len(b) > 1 and ctx.links.plan_scale is None and _one_geometry(b):
        first = b.take(np.zeros(1, dtype=np.intp))
        places = _places(ctx, first)
        lines = _lines(ctx, first, places)
        rows = np.zeros(len(b), dtype=np.intp)
        return ({k: _take_placement(p, rows) for k, p in places.items()},
                {k: take_lines(v, rows) for k, v in lines.items()})
    places = _places(ctx, b)
    return places, _lines(ctx, b, places)


def _one_geometry(b) -> bool:
    """Whether every plan of ``b`` has the first plan's :data:`_GEOMETRY_COLUMNS`."""
    for name in _GEOMETRY_COLUMNS:
        column = np.asarray(getattr(b, name))
        if not np.all(column == column[0]):
            return False
    return True


def _take_placement(place, rows):
    """``place`` (a :class:`~willitscale.topology.placement.GroupPlacement`) of plans ``rows``."""
    return replace(place, **{f.name: getattr(place, f.name)[rows] for f in fields(place)
                             if isinstance(getattr(place, f.name), np.ndarray)})


def _placed(ctx, b):
    g, order = ctx.links.gpus_per_node, ctx.scenario.options.rank_order
    deg = {"tp": b.tp, "cp": b.cp, "ep": b.ep, "dp": b.dp, "pp": b.pp}
    p = {k: group_placement(k, deg, g, order) for k in ("tp", "cp", "ep", "pp", "dp", "edp")}
    hybrid = b.shard_node & (b.zero >= 1)
    p["shard"], p["replica"] = shard_groups(p["dp"], hybrid, g)
    p["eshard"], p["ereplica"] = shard_groups(p["edp"], hybrid, g)
    return p


def _lines(ctx, b, places):
    """Every group's lines from the context's network (:mod:`willitscale.step.network`); the
    analytic network's kept on the context for small batches: they read the links and the
    placements (the batch's placement columns, the GPUs per node, the rank order); the value
    holds the links, whose id keys it."""
    if ctx.network is not None and type(ctx.network) is not AnalyticNetwork:
        return _network_lines(ctx, b, places)
    key = batch_key(b, _PLACE_COLUMNS)
    if key is None:
        return AnalyticNetwork().lines(ctx, b, places)
    key = ("analytic lines", id(ctx.links), ctx.links.gpus_per_node,
           ctx.scenario.options.rank_order, key)
    return memo(ctx, key, lambda: (ctx.links, AnalyticNetwork().lines(ctx, b, places)))[-1]


def _network_lines(ctx, b, places):
    """Another network's lines (the flow backend's), kept on the context for small batches as
    the analytic ones are: they read the links, the placements, the model terms and the
    batch's geometry (:data:`_GEOMETRY_COLUMNS`: a simulated fabric's geometry reads sequence
    parallelism too) and the network itself (its fabric and cluster); the value holds the
    objects whose ids key it. The links of a probe's rows are kept per scale by
    :meth:`~willitscale.collectives.lines.ClusterLinks.with_plan_scale`, so the same probes
    find their lines again."""
    key = batch_key(b, _GEOMETRY_COLUMNS)
    if key is None:
        return ctx.network.lines(ctx, b, places)
    key = ("network lines", id(ctx.network), id(ctx.links), id(ctx.terms), ctx.links.gpus_per_node,
           ctx.scenario.options.rank_order, key)
    return memo(ctx, key, lambda: (ctx.network, ctx.links, ctx.terms,
                                   ctx.network.lines(ctx, b, places)))[-1]


def _traffic(ctx, b, st, comp, params, places, L):
    t, fwd_c, bwd_c = ctx.terms, comp.forward, comp.backward
    full = (b.recompute == 2) * st.share_model  # recomputed forwards rerun their collectives
    element = activation_bytes(ctx.scenario.dtype)
    out = {"tp": tensor_traffic(
        tokens=st.tokens, hidden=t.hidden, layers=st.layers, emb=st.emb, head=st.head,
        full_recompute=full, sequence_parallel=b.sequence_parallel, lines_ar=L["tp_all_reduce"],
        lines_rs=L["tp_reduce_scatter"], lines_ag=L["tp_all_gather"], fwd_compute=fwd_c,
        bwd_compute=bwd_c, overlap=ctx.scenario.options.tp_comm_overlap, element=element,
        wgrad_qkv=np.asarray(comp.wgrad_qkv)[:, None], wgrad_fc1=np.asarray(comp.wgrad_fc1)[:, None],
        wgrad_head=np.asarray(comp.wgrad_head)[:, None], tp=b.tp)}
    block = kv_block_bytes(micro_batch=b.micro_batch, seq_len=ctx.scenario.seq_len, cp=b.cp, tp=b.tp,
                           kv_heads=t.kv_heads, element=element,
                           head_dim=(t.head_dim + (t.v_head_dim or t.head_dim)) / 2)  # K and V widths
    out["cp"] = context_traffic(block_bytes=block, cp=b.cp, layers=st.layers, full_recompute=full,
                                lines_p2p=L["cp"], attention_seconds=comp.attention)
    out["ep"] = expert_traffic(tokens=st.tokens, tp=b.tp, top_k=max(t.top_k, 1), hidden=t.hidden,
                               layers=_moe_layers(ctx, st), full_recompute=full, lines_a2a=L["ep"],
                               element=element)
    out["pp"], out["ppgather"] = send_traffic(tokens=st.tokens, hidden=t.hidden, tp=b.tp, pp=b.pp,
                             sequence_parallel=b.sequence_parallel, interleaved=b.interleaved,
                             virtual_stages=b.virtual_stages, lines_p2p=L["pp"],
                             lines_tp_ag=L["tp_all_gather"], element=element)
    dense, expert, _ = params
    z3 = (b.zero == 3)[:, None]
    if np.any(z3):
        gather, scatter, fe, be = _zero3_times(ctx, params, places, L, fwd_c, bwd_c, st.layers)
    else:  # no plan shards its weights: every term below is masked to 0
        gather = scatter = fe = be = np.zeros_like(dense)
    zero = lambda x: np.where(z3, x, 0.0)  # noqa: E731
    out["zero3"] = Traffic(kind="zero3", op="all_gather", fwd=zero(gather), bwd=zero(gather + scatter),
                           fwd_exposed=zero(fe), bwd_exposed=zero(be),
                           bytes=zero((dense + expert) * (2 * WEIGHT_BYTES + ctx.grad_bytes)),
                           calls=zero(3.0 * st.layers))
    return out


def _zero3_times(ctx, params, places, L, fwd_c, bwd_c, layers):
    """ZeRO-3 per micro-batch: the weight all-gathers, the gradient reduce-scatters (and with
    hybrid sharding their all-reduce across replicas), and the exposed parts of each pass."""
    dense, expert, _ = params
    gather = pair_time(L["shard_ag"], dense * WEIGHT_BYTES, L["eshard_ag"], expert * WEIGHT_BYTES)
    scatter = pair_time(L["shard_rs"], dense * ctx.grad_bytes, L["eshard_rs"], expert * ctx.grad_bytes)
    shard = np.maximum(places["shard"].size, 1.0)[:, None]
    scatter = scatter + np.where(dense > 0, line_time(L["replica"], dense * ctx.grad_bytes / shard), 0.0)
    fe, be = zero3_exposed(gather, scatter, fwd_c, bwd_c, layers)
    return gather, scatter, fe, be


def run(ctx, b, *, detail: bool = False, memory_only: bool = False) -> BatchResult:
    st = _structure(ctx, b)
    places, L = _places_and_lines(ctx, b)
    params = _params(ctx, b, st)
    mem = _memory(ctx, b, st, params, places)
    if memory_only:
        return _memory_result(ctx, b, st, mem)
    comp = _compute(ctx, b, st, detail)
    traffic = _traffic(ctx, b, st, comp, params, places, L)
    fwd_k = comp.forward + sum(tr.fwd_exposed for tr in traffic.values())
    bwd_k = comp.backward + sum(tr.bwd_exposed for tr in traffic.values())
    pipe, bubble, crit = pipeline_time(fwd_k + bwd_k, st.counts, st.m, b.virtual_stages, b.interleaved)

    tail = gradient_tail(ctx, b, st, params, places, L, fwd_k, bwd_k, detail=detail)

    result = assemble(ctx, b, st, comp, params, traffic, mem, pipe, bubble, crit, tail, places,
                      detail=detail)
    if detail and ctx.network is not None:
        result = replace(result, detail=replace(result.detail,
                                                network=ctx.network.report(ctx, b, places)))
    return result


def _nccl_groups(ctx, b, places):
    """Sizes of the groups each plan's GPUs communicate in (one NCCL communicator each)."""
    t = ctx.terms
    tied = ((b.pp >= 2) & t.tied & t.has_shape) * 2
    sizes = [places[k].size for k in ("tp", "cp", "ep", "pp", "shard", "replica")]
    sizes.append(np.where(b.ep > 1, places["edp"].size, 1))
    sizes.append(np.where(b.zero == 0, 1, np.where(b.ep > 1, places["eshard"].size, 1)))
    sizes.append(tied)
    extra = deepspeed_pipeline_groups(b.framework, b.tp, b.pp, tied)
    megatron = megatron_groups(b.framework, b.zero, b.tp, b.pp, b.gpus)
    own = np.stack([np.asarray(x, dtype=float) for x in sizes], axis=-1)
    return np.concatenate([own, extra, megatron], axis=-1)


def _layer_terms(ctx, b, st, layer):
    """(largest layer unit, matmul weights) one GPU holds per stage column: the layers each
    stage really holds (memory.layers), not the mean layer."""
    model = ctx.scenario.model
    if model is None:  # --params: every parameter taken as a matmul weight (as 6P FLOPs do)
        return layer, np.broadcast_to(np.asarray(ctx.terms.total_params, dtype=float),
                                      st.layers.shape).copy()
    held = stage_layer_params(model, b.tp, b.ep, st.layers, st.head)
    return held.largest_unit, held.linear


def _memory(ctx, b, st, params, places):
    """:func:`_stage_memory`, kept on the context for small batches: it reads the scenario,
    the memory settings, the model terms (``params`` and ``st`` come from them and the batch)
    and the placements (the batch and the GPUs per node); the value holds the objects whose
    ids key it, so no id is reused while the entry lives."""
    key = batch_key(b, ALL_COLUMNS)
    if key is None:
        return _stage_memory(ctx, b, st, params, places)
    key = ("memory", id(ctx.scenario), id(ctx.memory), id(ctx.terms), ctx.layer_fixed,
           ctx.expert_share, ctx.links.gpus_per_node, key)
    return memo(ctx, key, lambda: (ctx.scenario, ctx.memory, ctx.terms,
                                   _stage_memory(ctx, b, st, params, places)))[-1]


def _stage_memory(ctx, b, st, params, places):
    dense, expert, layer = params
    flight = in_flight(b.pp, st.m, b.gpipe, b.interleaved, b.virtual_stages)
    unit, linear = _layer_terms(ctx, b, st, layer)
    return stage_memory(scenario=ctx.scenario, batch=b, settings=ctx.memory,
                        params_dense=dense, params_expert=expert, shard_dense=places["shard"].size,
                        shard_expert=places["eshard"].size, layers=st.layers, emb=st.emb,
                        head=st.head, in_flight=flight, layer_params=unit, linear_params=linear,
                        nccl=nccl_bytes(_nccl_groups(ctx, b, places)))


def _memory_result(ctx, b, st, mem):
    total = np.where(st.active, mem.total, -np.inf)
    column = np.argmax(total, axis=-1)
    nan = np.full(len(b), np.nan)
    return BatchResult(step_time=nan, data_loading=nan, forward=nan, backward=nan,
                       overlap_slowdown=nan, exposed_comms=nan, optimizer=nan, bubble=nan,
                       compute=nan, comms=nan, model_flops=nan, executed_flops=nan,
                       tokens_per_step=nan, memory=mem, memory_column=column, critical=column,
                       counts=st.counts, detail=StepDetail(
                           capacity=ctx.scenario.cluster.gpu.memory, peak=ctx.peak,
                           memory_limit=ctx.scenario.memory_fraction
                           * ctx.scenario.cluster.gpu.memory))


def evaluate(scenario, batch: PlanBatch, *, context: Context | None = None, detail: bool = False,
             memory_only: bool = False) -> BatchResult:
    """Evaluate every plan of ``batch`` on ``scenario`` (its own plan is ignored)."""
    return run(context or make_context(scenario), batch, detail=detail, memory_only=memory_only)


#: the public name of :func:`evaluate`
evaluate_plans = evaluate

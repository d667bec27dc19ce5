"""Reports of a model-parallel step: one :class:`CommReport` per kind of communication, the
placement of each group, the pipeline summary, warnings and assumptions.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from willitscale.estimation.assumptions import (
    mp_assumptions,
    mp_warnings,
    pipeline_summary,
)
from willitscale.estimation.groups import GROUP_NAME, placement_rows, unknowns_of, where
from willitscale.estimation.mptimeline import pipeline_timeline
from willitscale.estimation.result import CommReport
from willitscale.estimation.verdict.mpbottleneck import model_parallel_bottleneck

__all__ = ["model_parallel_parts"]

_KIND_GROUP = {"tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "ppgather": "tp", "dp": "dp",
               "edp": "edp", "zero3": "shard", "zero_ag": "shard", "emb": "pp"}


def _links(row: dict, ctx) -> tuple[str, ...]:
    if not row["leaves_node"]:
        return (ctx.links.intra_name,) if row["size"] > 1 else ()
    return ((ctx.links.intra_name,) if row["gpus_per_node"] > 1 else ()) + (ctx.links.inter_name,)


_NAMES = {
    "tp": ("TP activation all-reduces", "all_reduce"),
    "cp": ("CP ring attention: K/V blocks", "send_recv"),
    "ep": ("EP token all-to-alls", "all_to_all"),
    "pp": ("PP activation/gradient sends", "send_recv"),
    "ppgather": ("PP all-gather of the scattered sends (over TP)", "all_gather"),
    "zero3": ("ZeRO-3 weight all-gathers + gradient reduce-scatters", "all_gather"),
    "dp": ("DP gradient all-reduce", "all_reduce"),
    "edp": ("expert gradient all-reduce", "all_reduce"),
    "zero_ag": ("ZeRO weight all-gather after the optimizer", "all_gather"),
    "emb": ("tied embedding gradient all-reduce (first <-> last stage)", "all_reduce"),
}


def _why(kind: str, scenario) -> str:
    plan = scenario.plan
    if kind == "tp":
        extra = " +2 with full recomputation" if plan.recompute == "full" else ""
        how = "as reduce-scatter + all-gather (sequence parallel)" if plan.sequence_parallel else ""
        if scenario.options.tp_comm_overlap:
            hides = "overlapped with the GEMMs (--tp-comm-overlap)"
        else:
            hides = ("forward" + (" and recomputed" if plan.recompute == "full" else "")
                     + " ones on the critical path; each backward one beside its own layer's "
                       "weight-gradient GEMM")
        return f"2 per layer forward, 2 backward{extra}, of b x s/cp x h activations {how}; {hides}"
    return {
        "cp": "cp-1 K/V block sends per layer forward, twice in backward; hidden behind attention",
        "ep": "dispatch + combine per MoE layer, forward and backward; on the critical path",
        "pp": "one send per stage boundary and micro-batch, each way; 1/tp per GPU "
              "(scatter/gather), on the critical path",
        "ppgather": "the receiving stage's TP ranks reassemble the 1/tp pieces (Megatron's "
                    "scatter/gather; not needed with sequence parallelism)",
        "zero3": "every micro-batch: weights gathered for forward and backward, gradients "
                 "reduce-scattered; prefetched layer by layer",
        "dp": "buckets during the last micro-batch's backward; the tail after it is exposed",
        "edp": "the expert MLPs' gradients, over the ranks holding the same experts (cp x dp / "
               "ep), in the same buckets as the dense ones",
        "zero_ag": "updated bf16 weights gathered, prefetched under the next forward",
        "emb": "the LM head's copy of the token embedding on the last stage, kept in step",
    }[kind]


def _comm_ops(scenario, ctx, result, rows) -> tuple[CommReport, ...]:
    by_kind = {r["parallelism"]: r for r in rows}
    places = result.detail.places
    ops = []
    for kind, per in result.traffic.items():
        time = float(np.asarray(per["time"])[0])
        if time <= 0:
            continue
        name, op = _NAMES[kind]
        group = _KIND_GROUP[kind]
        row = by_kind.get(group) or {"parallelism": group, "group": GROUP_NAME.get(group, group),
                                     **where(scenario, ctx, places[group])}
        if kind == "emb":
            row = {**row, "size": 2.0}
        if kind in ("dp", "edp") and scenario.plan.zero in (1, 2):
            name = {"dp": "ZeRO gradient reduce-scatter", "edp": "expert gradient reduce-scatter"}[kind]
            op = "reduce_scatter"
        if kind == "tp" and scenario.plan.sequence_parallel:
            op = "reduce_scatter+all_gather"
        ops.append(CommReport(
            name=name, op=op, parallelism="zero" if kind in ("zero3", "zero_ag") else
            ("pp" if kind in ("emb", "ppgather") else kind),
            group=f"{row['group']}: {row['where']}", ranks=int(row["size"]),
            bytes=float(np.asarray(per["bytes"])[0]),
            calls=int(round(float(np.asarray(per["calls"])[0]))), time=time,
            exposed=float(np.asarray(per["exposed"])[0]), links=_links(row, ctx),
            algorithm="the model's NCCL-like choice (ring / double binary tree)" if op == "all_reduce" else
            ("direct (peer to peer)" if op in ("send_recv", "all_to_all") else "ring"),
            why=_why(kind, scenario), leaves_node=bool(row["leaves_node"]), placement=row["where"]))
    return tuple(ops)


def model_parallel_parts(scenario, ctx, result, breakdown, probed=None) -> SimpleNamespace:
    rows = placement_rows(scenario, ctx, result)
    ops = _comm_ops(scenario, ctx, result, rows)
    return SimpleNamespace(
        comm_ops=ops, bottleneck=model_parallel_bottleneck(scenario, ctx, result, breakdown, ops,
                                                           probed),
        timeline=lambda: pipeline_timeline(scenario, result, breakdown),  # made when read
        assumptions=mp_assumptions(scenario, ctx), unknowns=unknowns_of(scenario),
        placement=tuple(rows), warnings=mp_warnings(scenario, ctx, rows),
        pipeline=pipeline_summary(scenario, result, breakdown))


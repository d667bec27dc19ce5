"""Reports of a plain data-parallel step (DDP): the bucket timeline, the all-reduce report, the
bottleneck with its computed fixes, and the assumptions, from the engine's numbers.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from willitscale.estimation.assumptions import dp_assumptions
from willitscale.estimation.comms import gradient_allreduce
from willitscale.estimation.groups import placement_rows, unknowns_of
from willitscale.estimation.steptimeline import build_timeline
from willitscale.estimation.verdict.bottleneck import find_bottleneck
from willitscale.step.buckets import comm_schedule

__all__ = ["data_parallel_parts"]


def data_parallel_parts(scenario, ctx, result, breakdown, probed=None) -> SimpleNamespace:
    detail = result.detail
    empty = np.zeros(0)
    sizes, ready, durations, counts, _ = detail.tail.schedule.get(0, (empty,) * 4 + (0.0,))
    fwd_mb = float(detail.comp.forward[0, 0])
    bwd_mb = float(detail.comp.backward[0, 0])
    m = scenario.plan.grad_accum
    compute = breakdown.forward + breakdown.backward
    comms = float(np.sum(durations))
    allreduce = gradient_allreduce(scenario, float(np.sum(sizes)), ctx.links)
    report = allreduce.report(calls=int(round(float(np.sum(counts)))), time=comms,
                              exposed=breakdown.exposed_comms, total_bytes=float(np.sum(sizes)))
    link = report.links[-1] if report.links else ""

    def timeline():  # the bucket timeline, made when an output reads it
        start, end = comm_schedule(np.asarray(ready) + (compute - bwd_mb), durations)
        return build_timeline(
            micro_forward=fwd_mb, micro_backward=bwd_mb, micro_steps=m,
            data=breakdown.data_loading, slowdown=breakdown.overlap_slowdown, comm_start=start,
            comm_end=end, bucket_bytes=sizes, optimizer=breakdown.optimizer,
            step_time=breakdown.total, link=link, counts=counts)
    bottleneck = find_bottleneck(scenario=scenario, ctx=ctx, result=result, breakdown=breakdown,
                                 ops=(report,), probed=probed)
    places = placement_rows(scenario, ctx, result)
    dp = next((p for p in places if p["parallelism"] == "dp"), None)
    if dp is not None:
        report = replace(report, parallelism="dp", leaves_node=dp["leaves_node"], placement=dp["where"])
    return SimpleNamespace(
        comm_ops=(report,), bottleneck=bottleneck, timeline=timeline,
        assumptions=dp_assumptions(scenario, ctx, allreduce),
        unknowns=unknowns_of(scenario), placement=tuple(places), warnings=(),
        pipeline={"schedule": "none (one stage)", "stages": 1, "micro_batches": m,
                  "virtual_stages": 1, "bubble_s": 0.0, "bubble_fraction": 0.0})

"""What limits a model-parallel step, and what would help.

The criterion of data parallelism (:mod:`.bottleneck`, :mod:`.levers`): exposed communication
over the step, without the tensor-parallel traffic that stays inside a node (part of the model's
computation: it is named separately, with its cost). Above :data:`~.levers.EXPOSED_SHARE_LIMIT` the network level whose speed-up cuts it
most is the bottleneck; else storage when exposed data loading is, else compute, and the reason
names the largest *losses* on top of compute: the pipeline bubble or a kind of exposed
communication. Fixes: the same computed network fixes, plus those of the pipeline (the bubble's
``(p-1)/(v m)``) and of tensor parallelism crossing nodes.
"""

from __future__ import annotations

from willitscale.estimation.result import Bottleneck
from willitscale.estimation.verdict.bottleneck import (
    level_description,
    network_fixes,
    verdict_resource,
)
from willitscale.estimation.verdict.levers import limiting_level, outcome
from willitscale.scenario.batch import PlanBatch
from willitscale.step.pipeline import bubble_fraction
from willitscale.units import format_time

__all__ = ["model_parallel_bottleneck", "link_busy"]


def link_busy(ops) -> dict[str, float]:
    """Seconds per step each kind of link carries communication, from the comm reports (a
    group that leaves its node counts on the inter-node network)."""
    busy = {"intra-node network": 0.0, "inter-node network": 0.0}
    for op in ops:
        busy["inter-node network" if op.leaves_node else "intra-node network"] += op.time
    return busy


def _fixes(scenario, ctx, breakdown, ops) -> list[str]:
    plan = scenario.plan
    fixes = []
    step = breakdown.total
    if breakdown.bubble > 0.05 * step:
        m = plan.grad_accum
        v = plan.virtual_stages if plan.pp_schedule == "interleaved" else 1
        now = float(bubble_fraction(plan.pp, m, v))
        fixes.append(f"the bubble is (p-1)/(v m) = {now:.1%} of the ideal time: more micro-batches "
                     f"per step (a smaller --micro-batch, or a larger batch), fewer stages, or "
                     f"--pp-schedule interleaved --virtual-stages 2 (about half the bubble)")
    for op in ops:
        if op.parallelism == "tp" and op.leaves_node and op.exposed > 0.05 * step:
            fixes.append(f"tp = {plan.tp} is wider than a node ({ctx.links.gpus_per_node} GPUs): "
                         "its all-reduces cross the inter-node network; keep tp within a node "
                         "and use pp across nodes")
    return fixes


def model_parallel_bottleneck(scenario, ctx, result, breakdown, ops, probed=None) -> Bottleneck:
    """The verdict; ``probed``: :func:`~.levers.limiting_level`'s probes when already evaluated."""
    step = breakdown.total
    batch = PlanBatch.from_plans([scenario.plan])
    base = outcome(ctx, batch, result=result)
    data_share = breakdown.data_loading / step
    level = limiting_level(ctx, batch, base, probed) if base.comms > 0 else None
    resource = verdict_resource(ctx, base.share, data_share, level)
    compute = breakdown.forward + breakdown.backward
    losses = [("pipeline bubble", breakdown.bubble)] + [
        (f"{op.name} ({'inter' if op.leaves_node else 'intra'}-node)", op.exposed) for op in ops]
    losses = sorted((x for x in losses if x[1] > 0), key=lambda x: -x[1])
    top = ", ".join(f"{name} {format_time(t)} ({t / step:.0%})" for name, t in losses[:3])
    fixes = _fixes(scenario, ctx, breakdown, ops)
    tensor = (f"; tensor parallelism inside each node leaves {format_time(base.tensor_exposed)} "
              f"({base.tensor_exposed / step:.0%}) exposed, a cost of tp = {scenario.plan.tp} "
              "counted with the model's computation, not against the network"
              if base.tensor_exposed > 0 else "")
    if resource.endswith("network"):
        reason = (f"{format_time(base.exposed)} ({base.share:.0%}) of the {format_time(step)} step "
                  f"is exposed communication; {level_description(ctx, level)}; exposed: {top}"
                  f"{tensor}")
        fixes = list(network_fixes(scenario, ctx, base, level)) + fixes
    elif resource == "storage":
        reason = (f"storage: {format_time(breakdown.data_loading)} ({data_share:.0%}) of the step "
                  "waits for the step's samples")
    else:
        reason = (f"compute: forward + backward {format_time(compute)} of the {format_time(step)} "
                  f"step (+ {format_time(breakdown.overlap_slowdown)} overlap slowdown, "
                  f"{format_time(breakdown.optimizer)} optimizer)"
                  + (f"; on top of it: {top}" if top else "; nothing else is exposed") + tensor)
    busy = [("compute", compute), ("communication", base.comms)]
    return Bottleneck(resource=resource, reason=reason, fixes=tuple(fixes), busy=tuple(busy),
                      shares=(("communication", base.share), ("data_loading", data_share),
                              ("bubble", breakdown.bubble / step),
                              ("tensor_parallel", base.tensor_exposed / step)), level=level)

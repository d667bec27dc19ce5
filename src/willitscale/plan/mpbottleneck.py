"""What limits a model-parallel step, and what would help.

Resources are busy for some time per step: the critical stage's GPU computing (forward,
backward, overlap slowdown, optimizer), the intra-node links (communication of groups that stay
in their node) and the inter-node links (groups that leave it). A network busier than compute
is the bottleneck outright: no overlap can hide it. Otherwise compute is, and the reason line
names the largest *loss* on top of it: the pipeline bubble or a kind of exposed communication.
Fixes are computed from the same formulas (the bubble's ``(p-1)/(v m)``, TP staying in a node).
"""

from __future__ import annotations

from willitscale.plan.result import Bottleneck
from willitscale.units import format_time

__all__ = ["model_parallel_bottleneck", "link_busy"]


def link_busy(ops) -> dict[str, float]:
    """Seconds per step each kind of link carries communication, from the comm reports."""
    busy = {"intra-node network": 0.0, "inter-node network": 0.0}
    for op in ops:
        busy["inter-node network" if op.leaves_node else "intra-node network"] += op.time
    return busy


def _fixes(scenario, ctx, result, breakdown, ops) -> tuple[str, ...]:
    from willitscale.plan.pipeline import bubble_fraction

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
        if op.parallelism == "dp" and op.exposed > 0.05 * step:
            fixes.append("the gradient synchronisation is exposed: more micro-batches per step "
                         "(compute outlasts it), bf16 gradient reduction, or fewer data-parallel "
                         "ranks across slow links")
    return tuple(fixes)


def model_parallel_bottleneck(scenario, ctx, result, breakdown, ops) -> Bottleneck:
    step = breakdown.total
    compute = breakdown.forward + breakdown.backward + breakdown.overlap_slowdown + breakdown.optimizer
    busy = {"compute": compute, **link_busy(ops)}
    resource = max(busy, key=busy.get)
    if busy[resource] <= compute:
        resource = "compute"
    losses = [("pipeline bubble", breakdown.bubble)] + [
        (f"{op.name} ({'inter' if op.leaves_node else 'intra'}-node)", op.exposed) for op in ops]
    losses = sorted((x for x in losses if x[1] > 0), key=lambda x: -x[1])
    top = ", ".join(f"{name} {format_time(t)} ({t / step:.0%})" for name, t in losses[:3])
    if resource == "compute":
        reason = (f"compute: {format_time(compute)} of the {format_time(step)} step"
                  + (f"; on top of it: {top}" if top else "; nothing else is exposed"))
    else:
        reason = (f"the {resource} is busy {format_time(busy[resource])} per step, longer than "
                  f"the {format_time(compute)} of compute; exposed: {top}")
    return Bottleneck(resource=resource, reason=reason,
                      fixes=_fixes(scenario, ctx, result, breakdown, ops), busy=tuple(busy.items()))

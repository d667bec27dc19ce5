"""Which resource limits a step, why, and the cheapest changes that would flip the verdict.

Each resource is *busy* for some time per step: the GPU's compute (forward, backward, the
overlap slowdown and the optimizer), the network (the communication stream: every bucket's
all-reduce), storage (reading the step's samples). A step can never be shorter than the
longest of them, however well they overlap, so the longest is the bottleneck. For the network
this is the handbook's table column "comms is a bottleneck" (seeds/000): communication takes
longer than compute, so no amount of overlap can hide it.

Fixes are computed, not canned: the least bandwidth of the limiting link at which the network
is no longer busier than compute (bisection on the collective model, which is monotone in
bandwidth), the gradient-accumulation factor that makes compute outlast communication, and
reducing gradients in bf16 when it is enough.
"""

from __future__ import annotations

import math

import numpy as np

from willitscale.plan.result import Bottleneck
from willitscale.units import format_bandwidth, format_size, format_time

__all__ = ["find_bottleneck", "least_bandwidth_factor"]


def least_bandwidth_factor(allreduce, bucket_bytes, budget: float, *, limit: float = 1e4) -> float | None:
    """Least factor on the limiting link's bandwidth so the all-reduces fit in ``budget`` s.

    None when even ``limit`` x the bandwidth is not enough (latency-bound).
    """
    def total(factor: float) -> float:
        return float(np.sum(allreduce.scaled(factor).time(bucket_bytes)))

    if total(1.0) <= budget:
        return 1.0
    if total(limit) > budget:
        return None
    lo, hi = 1.0, limit
    for _ in range(60):  # geometric bisection to ~1e-6 relative
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if total(mid) <= budget else (mid, hi)
        if hi / lo < 1 + 1e-6:
            break
    return hi


def _network_fixes(scenario, allreduce, bucket_bytes, compute: float, comms: float) -> tuple[str, ...]:
    fixes = []
    factor = least_bandwidth_factor(allreduce, bucket_bytes, compute)
    if factor is None:
        fixes.append("more bandwidth alone cannot hide it: the all-reduces are latency-bound")
    else:
        now = allreduce.limiting_line_rate
        fixes.append(f"{allreduce.limiting_name} bandwidth >= {format_bandwidth(now * factor, bits=True)}"
                     f" line rate (now {format_bandwidth(now, bits=True)}): the all-reduce then "
                     "fits in compute")
    plan = scenario.plan
    need = math.ceil(plan.grad_accum * comms / compute) if compute > 0 else 0
    if need > plan.grad_accum:
        fixes.append(f"a larger batch per GPU: --grad-accum {need} (global batch "
                     f"{plan.micro_batch * need * plan.dp}) or a micro-batch {need // plan.grad_accum}x "
                     f"larger if memory allows: compute then outlasts the all-reduce")
    if scenario.ddp.grad_reduce_dtype == "fp32" and comms / 2 <= compute:
        fixes.append("reduce gradients in bf16 (--grad-reduce-dtype bf16, or a bf16 "
                     "compression hook): half the bytes")
    return tuple(fixes)


def find_bottleneck(*, scenario, work, allreduce, bucket_bytes, compute: float, comms: float,
                    exposed: float, storage: float, step: float) -> Bottleneck:
    """The busiest resource of the step with a one-line reason and computed fixes."""
    network = allreduce.resource
    busy = [("compute", compute), (network, comms)]
    if scenario.data is not None:
        busy.append(("storage", storage))
    resource, seconds = max(busy, key=lambda item: item[1])
    if seconds <= compute:
        resource = "compute"  # ties go to compute: nothing waits for anyone
    link = allreduce.limiting_description
    if resource == network:
        reason = (f"the {network} is busy {format_time(comms)} per step all-reducing "
                  f"{format_size(float(np.sum(bucket_bytes)))} of gradients ({link}), longer than "
                  f"the {format_time(compute)} of compute; {format_time(exposed)} of it is exposed")
        fixes = _network_fixes(scenario, allreduce, bucket_bytes, compute, comms)
    elif resource == "storage":
        data = scenario.data
        reason = (f"storage: reading the step's samples takes {format_time(storage)} at "
                  f"{format_bandwidth(data.storage_bandwidth)} per node, longer than compute "
                  f"({format_time(compute)})")
        fixes = (f"storage bandwidth >= {format_bandwidth(data.storage_bandwidth * storage / compute)} "
                 "per node",)
    else:
        hidden = "hides under backward" if exposed <= 0.01 * step else \
            f"leaves {format_time(exposed)} exposed after backward"
        reason = (f"compute: {format_time(compute)} per step; the gradient all-reduce "
                  f"({format_time(comms)} over {link}) {hidden}")
        fixes = ()
    return Bottleneck(resource=resource, reason=reason, fixes=fixes, busy=tuple(busy))

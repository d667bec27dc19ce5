"""The least network bandwidth that keeps data-parallel communication from slowing a step.

The rule of "Will it scale to N GPUs?" (seeds/001) is *communication time per step <= compute
time per step*. Written out for plain DDP over ``N`` nodes of ``G`` GPUs, with ``P``
parameters whose gradients take ``g`` bytes each, ``D`` tokens per optimizer step (the global
batch), ``k`` FLOPs per parameter per token (6, or 8 with full recomputation) and each GPU
sustaining ``peak x u`` FLOP/s on them::

    compute    T   = k P D / (N G peak u)
    all-reduce t   = 2 (N-1)/N x P g / B      (hierarchical: reduce-scatter in the node, then
                                                each GPU's 1/G shard all-reduced across the N
                                                nodes; the node's G GPUs share its NICs, so the
                                                node sends 2(N-1)/N x P g over B bytes/s)
    t <= w T   =>  B >= 2 (N-1) g G peak u / (w k D)

``w`` is the share of the step the all-reduce may take: ``w = 1`` is the article's rule; DDP can
only overlap the all-reduce with backward, so hiding it completely needs ``w = backward share
of compute`` (2/3 without recomputation, 3/4 with full). ``P`` cancels: for a fixed global batch
the bandwidth needed does not depend on the model size (a bigger model has proportionally more
compute *and* more gradients), and it grows linearly with ``N - 1`` because each node's share of
the compute shrinks while the bytes each node sends do not. For a fixed batch *per GPU*
(``D = N G d``) it is ``2 (N-1)/N x g peak u / (w k d)``: nearly flat in ``N``.

Where seeds/001 slips (reproduced in docs/reproductions.md):

1. ``6 x 10B x 32 x 128`` is 2.4576e14 FLOPs, not 24.576e14: the compute time is 0.2/N s, not
   2/N s, so every bandwidth it derives is 10x too low.
2. It moves the gradients once (``P g``); a ring or hierarchical all-reduce sends
   ``2(N-1)/N x P g`` through each node's NICs (x1.5 at 4 nodes, -> x2).
3. "IB >= N x P GB/s" generalises from P = 10 (where 10N happens to equal N x P): the
   requirement does not grow with P at a fixed batch.

These closed forms assume bandwidth-bound transfers (no latency term) and that the all-reduce
can run the whole window; :func:`willitscale.plan.estimate.least_bandwidth` answers the same
question with the full model (buckets, latencies, NCCL's algorithm choice) by bisection.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "required_node_bandwidth", "article_001_rule", "allreduce_node_bytes", "least_link_bandwidth",
    "scaled_link",
]


def allreduce_node_bytes(grad_bytes, nodes):
    """Bytes each node sends over its NICs for a hierarchical all-reduce of ``grad_bytes``:
    ``2 (N-1)/N x grad_bytes`` (zero on one node)."""
    nodes = np.asarray(nodes, dtype=float)
    return 2.0 * (nodes - 1) / nodes * np.asarray(grad_bytes, dtype=float)


def required_node_bandwidth(*, nodes, gpus_per_node, tokens_per_step, grad_bytes_per_param,
                            peak_flops, utilization, flops_per_param_token=6.0, window=1.0,
                            efficiency=1.0):
    """Least one-direction bytes/s per node so the all-reduce fits in ``window`` x compute.

    ``tokens_per_step`` is the global batch in tokens (fixed: strong scaling); pass
    ``tokens_per_gpu x nodes x gpus_per_node`` for weak scaling. ``efficiency`` is the fraction
    of the link an all-reduce achieves (busbw / line rate). Numpy arrays broadcast.
    """
    nodes = np.asarray(nodes, dtype=float)
    return (2.0 * (nodes - 1) * grad_bytes_per_param * gpus_per_node * peak_flops * utilization
            / (window * flops_per_param_token * np.asarray(tokens_per_step, dtype=float) * efficiency))


def article_001_rule(nodes, params):
    """seeds/001's "IB >= N x P GB/s" (P in billions), in bytes/s, for comparison only."""
    gb_per_s = np.asarray(nodes, dtype=float) * np.asarray(params, dtype=float) / 1e9  # P in billions
    return gb_per_s * 1e9


# -- the full model, by bisection -------------------------------------------------------------

def scaled_link(link, factor: float):
    """``link`` with ``factor`` times its bandwidth (lane rate scaled too, so it stays consistent)."""
    from dataclasses import replace

    lane_rate = None if link.lane_rate is None else link.lane_rate * factor
    return replace(link, bandwidth=link.bandwidth * factor, lane_rate=lane_rate)


def _with_link_factor(scenario, factor: float):
    """``scenario`` with its limiting link ``factor`` times faster (NICs across nodes, else NVLink)."""
    from dataclasses import replace

    node = scenario.cluster.node
    if scenario.cluster.nodes > 1:
        node = replace(node, nic=scaled_link(node.nic, factor))
    else:
        node = replace(node, intra_link=scaled_link(node.intra_link, factor))
    return replace(scenario, cluster=replace(scenario.cluster, node=node))


def least_link_bandwidth(scenario, *, max_exposed_share: float = 0.05, limit: float = 1e4):
    """``(bandwidth, estimate)``: the least line rate of the limiting link (per node across nodes,
    per GPU inside one, one direction, before efficiency) at which exposed communication is at
    most ``max_exposed_share`` of the step, with the estimate there.

    Exposed communication never grows with bandwidth (a property test checks it), so geometric
    bisection on a factor in ``[1/limit, limit]`` converges. ``(None, estimate at limit)`` when even
    ``limit`` x the bandwidth is not enough (the last bucket's latency, or a measured all-reduce).
    """
    from willitscale.errors import ConfigError
    from willitscale.plan.estimate import estimate

    if not 0 < max_exposed_share < 1:
        raise ConfigError("max_exposed_share", max_exposed_share, "a fraction in (0, 1)")

    def ok(factor: float):
        est = estimate(_with_link_factor(scenario, factor), allow_oom=True)
        return est.exposed_comms <= max_exposed_share * est.step_time, est

    node = scenario.cluster.node
    base = node.inter_node_bandwidth if scenario.cluster.nodes > 1 else node.usable_intra_bandwidth
    good, est_hi = ok(limit)
    if not good:
        return None, est_hi
    lo, hi, best = 1.0 / limit, limit, est_hi
    if ok(lo)[0]:
        return base * lo, ok(lo)[1]
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        fine, est = ok(mid)
        if fine:
            hi, best = mid, est
        else:
            lo = mid
        if hi / lo < 1.001:
            break
    return base * hi, best

"""The least network bandwidth that keeps data-parallel communication from slowing a step.

The rule of "Will it scale to N GPUs?" (Jaideep Ray, 2024) is *communication time per step <= compute
time per step*. Written out for plain DDP over ``N`` nodes of ``G`` GPUs (``n = N G`` ranks),
with ``P`` parameters whose gradients take ``g`` bytes each, ``D`` tokens per optimizer step
(the global batch), ``k`` FLOPs per parameter per token (6, or 8 with full recomputation) and
each GPU sustaining ``peak x u`` FLOP/s on them::

    compute    T   = k P D / (n peak u)
    all-reduce t   = V x P g / B     V: bytes through the node's NICs per byte reduced
    t <= w T   =>  B >= V n g peak u / (w k D)

``V`` depends on the algorithm that runs. NCCL's ring (the model's choice for large buckets)
runs over all ``n`` ranks node by node: each step sends ``S/n`` across every node boundary, so
``V = 2 (n-1)/n`` and ``B >= 2 (N G - 1) g peak u / (w k D)``. NCCL's double binary tree sends
``2 S`` through each node's NICs (``V = 2`` from 4 nodes on). A hierarchical all-reduce, which
NCCL does not run for all-reduce, would send ``2 (N-1)/N x S`` (``B >= 2 (N-1) G g peak u / (w
k D)``): 1/1.29 of the ring's at 4 nodes of 8, the slip of an earlier version of this module.

``w`` is the share of the step the all-reduce may take: ``w = 1`` is the article's rule; DDP can
only overlap the all-reduce with backward, so hiding it completely needs ``w = backward share
of compute`` (2/3 without recomputation, 3/4 with full). ``P`` cancels: for a fixed global batch
the bandwidth needed does not depend on the model size (a bigger model has proportionally more
compute *and* more gradients), and it grows nearly linearly with ``N`` because each node's share
of the compute shrinks while the bytes each node sends do not.

Where Ray's 'Will it scale to N GPUs?' slips (reproduced in docs/reproductions.md):

1. ``6 x 10B x 32 x 128`` is 2.4576e14 FLOPs, not 24.576e14: the compute time is 0.2/N s, not
   2/N s, so every bandwidth it derives is 10x too low.
2. It moves the gradients once (``P g``); NCCL's ring sends ``2(n-1)/n x P g`` through each
   node's NICs (x1.94 at 4 nodes of 8, -> x2).
3. "IB >= N x P GB/s" generalises from P = 10 (where 10N happens to equal N x P): the
   requirement does not grow with P at a fixed batch.

These closed forms assume bandwidth-bound transfers on one level. :func:`link_requirement`
answers the same question with the full model (buckets, latencies, the overlap, the model's
NCCL-like algorithm choice, whichever level limits) by bisection, with the criterion the
estimate's bottleneck verdict uses (:mod:`willitscale.estimation.verdict.levers`), so the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.collectives.cost import collective_cost
from willitscale.errors import ConfigError
from willitscale.estimation.estimate import estimate_in_context
from willitscale.estimation.verdict.levers import (
    BANDWIDTH_RANGE,
    BANDWIDTH_RTOL,
    limiting_level,
    needed_bandwidth,
    outcome,
    scaled_context,
)
from willitscale.scenario.batch import PlanBatch
from willitscale.step.engine import make_context

__all__ = [
    "required_node_bandwidth", "article_001_rule", "allreduce_node_bytes", "least_link_bandwidth",
    "scaled_link", "LinkRequirement", "link_requirement", "level_bytes",
]

#: bytes through each node's NICs per byte all-reduced, by algorithm (``nodes`` N of ``g`` GPUs)
_NODE_VOLUME = {
    "ring": lambda N, G: 2.0 * (N * G - 1) / (N * G),
    "double_binary_tree": lambda N, G: np.select([N >= 4, N == 3, N == 2], [2.0, 1.5, 1.0], 0.0),
    "hierarchical": lambda N, G: 2.0 * (N - 1) / N,
}


def allreduce_node_bytes(grad_bytes, nodes, gpus_per_node=1, *, algorithm: str = "ring"):
    """Bytes each node sends over its NICs for an all-reduce of ``grad_bytes`` over ``nodes`` x
    ``gpus_per_node`` ranks: ``2 (n-1)/n x grad_bytes`` for NCCL's ring (``n`` ranks), ``2 x`` for
    its tree from 4 nodes, ``2 (N-1)/N x`` hierarchical; zero on one node."""
    N = np.asarray(nodes, dtype=float)
    volume = np.where(N > 1, _NODE_VOLUME[algorithm](N, float(gpus_per_node)), 0.0)
    return volume * np.asarray(grad_bytes, dtype=float)


def required_node_bandwidth(*, nodes, gpus_per_node, tokens_per_step, grad_bytes_per_param,
                            peak_flops, utilization, flops_per_param_token=6.0, window=1.0,
                            efficiency=1.0, algorithm: str = "ring"):
    """Least one-direction bytes/s per node so the all-reduce fits in ``window`` x compute:
    ``V n g peak u / (w k D e)`` with ``V`` the algorithm's node volume (module docstring).

    ``tokens_per_step`` is the global batch in tokens (fixed: strong scaling); pass
    ``tokens_per_gpu x nodes x gpus_per_node`` for weak scaling. ``efficiency`` is the fraction
    of the link an all-reduce achieves (busbw / line rate). Numpy arrays broadcast.
    """
    N = np.asarray(nodes, dtype=float)
    n = N * gpus_per_node
    volume = np.where(N > 1, _NODE_VOLUME[algorithm](N, float(gpus_per_node)), 0.0)
    return (volume * n * grad_bytes_per_param * peak_flops * utilization
            / (window * flops_per_param_token * np.asarray(tokens_per_step, dtype=float) * efficiency))


def article_001_rule(nodes, params):
    """The "IB >= N x P GB/s" of Ray's 'Will it scale to N GPUs?' (P in billions), in bytes/s, for comparison only."""
    gb_per_s = np.asarray(nodes, dtype=float) * np.asarray(params, dtype=float) / 1e9  # P in billions
    return gb_per_s * 1e9


def level_bytes(allreduce, level: str, size: float, algorithm: str) -> float:
    """Bytes ``algorithm`` moves through one ``level`` (``intra``: per GPU over its link in the
    node; ``inter``: per node over its NICs) for an all-reduce of ``size`` bytes in the model:
    its bandwidth term with the other level made free, times that level's bandwidth."""
    from dataclasses import replace


    free = 1e30
    if level == "intra":
        net, bandwidth = replace(allreduce, inter_bandwidth=free).network(), allreduce.intra_bandwidth
    else:
        net, bandwidth = replace(allreduce, intra_bandwidth=free).network(), allreduce.inter_bandwidth
    cost = collective_cost("all_reduce", algorithm, size, allreduce.ranks, net)
    return float(cost.bandwidth_time) * bandwidth


# -- the full model, by bisection -------------------------------------------------------------

def scaled_link(link, factor: float):
    """``link`` with ``factor`` times its bandwidth (lane rate scaled too, so it stays consistent)."""
    from dataclasses import replace

    lane_rate = None if link.lane_rate is None else link.lane_rate * factor
    return replace(link, bandwidth=link.bandwidth * factor, lane_rate=lane_rate)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRequirement:
    """The least line rate of the limiting level that keeps exposed communication under a share."""

    level: str | None  #: intra (per GPU), inter (per node), measured, or None (no communication)
    now: float  #: that level's line rate now, bytes/s one direction (measured: its rate)
    needed: float | None  #: the least line rate, or None when this level alone cannot
    factor: float | None  #: needed / now
    share_now: float  #: exposed communication / step now
    share_at: float | None  #: at ``needed``
    #: why ``needed`` is None: the other level ("intra"/"inter") limits next, or "latency"
    limited_by: str | None
    context: object  #: the engine context at ``needed`` (or the base one)


def link_requirement(scenario, *, max_exposed_share: float = 0.05, limit: float | None = None,
                     rtol: float | None = None) -> LinkRequirement:
    """The limiting level (:func:`~willitscale.estimation.verdict.levers.limiting_level`) and its least line
    rate at which exposed communication is at most ``max_exposed_share`` of the step, searched in
    ``[now / limit, now x limit]`` (a requirement may be below what the link has) to ``rtol``, by
    :func:`~willitscale.estimation.verdict.levers.needed_bandwidth`, the search behind the estimate's bandwidth
    fix (defaults: :data:`~willitscale.estimation.verdict.levers.BANDWIDTH_RANGE`, ``BANDWIDTH_RTOL``)."""

    if not 0 < max_exposed_share < 1:
        raise ConfigError("max_exposed_share", max_exposed_share, "a fraction in (0, 1)")
    ctx = make_context(scenario)
    batch = PlanBatch.from_plans([scenario.plan])
    base = outcome(ctx, batch)
    level = limiting_level(ctx, batch, base)
    if level is None:
        return LinkRequirement(level=None, now=0.0, needed=None, factor=None,
                               share_now=base.share, share_at=None, limited_by="latency"
                               if base.comms > 0 else None, context=ctx)
    now = _line_rate(ctx, level)
    need = needed_bandwidth(ctx, batch, level, share=max_exposed_share,
                            limit=BANDWIDTH_RANGE if limit is None else limit,
                            rtol=BANDWIDTH_RTOL if rtol is None else rtol)
    if need.factor is not None:
        return LinkRequirement(level=level, now=now, needed=now * need.factor, factor=need.factor,
                               share_now=base.share, share_at=need.at.share, limited_by=None,
                               context=scaled_context(ctx, **{level: need.factor}))
    return LinkRequirement(level=level, now=now, needed=None, factor=None, share_now=base.share,
                           share_at=None, limited_by=need.limited_by, context=ctx)


def _line_rate(ctx, level: str) -> float:
    links, m = ctx.links, ctx.scenario.measured
    if level == "intra":
        return links.intra_line_rate
    if level == "inter":
        return links.inter_line_rate
    return (m.allreduce_size or 0.0) / m.allreduce_time


def least_link_bandwidth(scenario, *, max_exposed_share: float = 0.05,
                         limit: float | None = None):
    """``(bandwidth, estimate)``: the least line rate of the **limiting** level (per node across
    nodes when the NICs limit, per GPU when the link inside the node does:
    :func:`link_requirement` says which), one direction, before efficiency, at which exposed
    communication is at most ``max_exposed_share`` of the step, with the full estimate there.
    ``(None, estimate)`` when that level alone cannot get there.
    """

    req = link_requirement(scenario, max_exposed_share=max_exposed_share, limit=limit)
    return req.needed, estimate_in_context(scenario, req.context, allow_oom=True)

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

import numpy as np

__all__ = ["required_node_bandwidth", "article_001_rule", "allreduce_node_bytes"]


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
    return np.asarray(nodes, dtype=float) * np.asarray(params, dtype=float) / 1e9 * 1e9

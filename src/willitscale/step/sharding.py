"""ZeRO / FSDP: what is sharded over which ranks, and the collectives that sharding costs.

Stages (Rajbhandari et al. 2020, "ZeRO", section 5; PyTorch FSDP, Zhao et al. 2023):

==========  =================================  =====================================================
stage       sharded over the group             communication per step (``Psi`` = a stage's params)
==========  =================================  =====================================================
0 (DDP)     nothing                            all-reduce of the gradients, in buckets during the
                                               last micro-batch's backward
1           optimizer states + master weights  reduce-scatter of the gradients (same buckets) and,
                                               after the optimizer, all-gather of the updated bf16
                                               weights (Megatron-LM's distributed optimizer)
2           ... + gradients                    a reduce-scatter after *every* micro-batch's backward
                                               (each rank keeps only its gradient shard), then the
                                               all-gather of the weights
3 / FSDP    ... + weights                      every micro-batch: all-gather of the weights in the
                                               forward, again in the backward, reduce-scatter of the
                                               gradients; nothing after the step
==========  =================================  =====================================================

**ZeRO-3 moves 1.5x the bytes of DDP** ('GPU fabrics for GenAI workloads': "~1.5x more communication"). A ring
all-reduce of ``S`` bytes over ``n`` ranks sends ``2 (n-1)/n S`` per rank (a reduce-scatter and
an all-gather, ``(n-1)/n S`` each). ZeRO-3 issues one reduce-scatter of the gradients and two
all-gathers of the weights per micro-batch: ``3 (n-1)/n S``, i.e. ``3/2`` of DDP's when weights
and gradients have the same width (ZeRO paper, section 7.2.2: "3 Psi ... 1.5x"). With fp32
gradients and bf16 weights it is ``(4 + 2 + 2) / (2 x 4) = 1.0x`` the bytes of an fp32 DDP
all-reduce, and with gradient accumulation ZeRO-3 pays it every micro-batch.

Overlap: buckets of ZeRO-0/1/2 follow DDP's schedule (:mod:`.data`). FSDP prefetches the
next layer's weights while the current one computes, so per micro-batch and pass the exposed
part is ``max(0, gathers - compute)`` plus the first layer's gather, which nothing precedes.
ZeRO-1/2's all-gather of the updated weights overlaps the next step's first forward the same
way (Megatron-LM's ``--overlap-param-gather``).

**Hybrid sharding** (FSDP ``HYBRID_SHARD``, ``shard_scope = node``): shard over the
data-parallel ranks inside a node, replicate across nodes; gradients are reduce-scattered in
the node and their shards all-reduced across nodes (``1/shard`` of the bytes cross the NICs).
"""

from __future__ import annotations

import numpy as np

from willitscale.topology.placement import GroupPlacement

__all__ = ["shard_groups", "zero3_exposed", "param_gather_exposed"]



def _where(mask, a: GroupPlacement, b: GroupPlacement, kind: str) -> GroupPlacement:
    pick = lambda x, y: np.where(mask, x, y)  # noqa: E731
    return GroupPlacement(kind=kind, size=pick(a.size, b.size),
                          members_per_node=pick(a.members_per_node, b.members_per_node),
                          nodes=pick(a.nodes, b.nodes), node_share=pick(a.node_share, b.node_share),
                          rail_aligned=pick(a.rail_aligned, b.rail_aligned))


def shard_groups(group: GroupPlacement, hybrid, gpus_per_node: int):
    """``(shard group, replica group)`` for a gradient group: the group itself and nobody, or,
    hybrid, its members in one node and one member per node."""
    one = np.ones_like(group.size)
    hybrid = np.asarray(hybrid, dtype=bool)
    inside = GroupPlacement(kind=group.kind + "-shard", size=group.members_per_node,
                            members_per_node=group.members_per_node, nodes=one, node_share=one,
                            rail_aligned=np.zeros(one.shape, dtype=bool))
    across = GroupPlacement(kind=group.kind + "-replica", size=group.nodes, members_per_node=one,
                            nodes=group.nodes, node_share=one / gpus_per_node,
                            rail_aligned=group.rail_aligned)
    nobody = GroupPlacement(kind=group.kind + "-replica", size=one, members_per_node=one, nodes=one,
                            node_share=one, rail_aligned=np.zeros(one.shape, dtype=bool))
    return (_where(hybrid, inside, group, group.kind + "-shard"),
            _where(hybrid, across, nobody, group.kind + "-replica"))


def prefetched_gather_exposed(gather, compute, layers):
    """The part of a layer-by-layer weight all-gather (``gather`` in all, over ``layers``) that
    ``compute`` does not hide when each layer's gather is prefetched while the layer before it
    computes. With ``g`` and ``c`` a layer's gather and compute, the pass takes
    ``g + (L - 1) max(g, c) + c``: exposed ``g`` when ``g <= c``, else ``G - C + c``, i.e.
    ``max(g, G - C + c)`` (never more than ``G``)."""
    per_layer = np.maximum(layers, 1.0)
    return np.maximum(gather / per_layer, gather - compute + compute / per_layer)


def zero3_exposed(gather, scatter, fwd_compute, bwd_compute, layers):
    """ZeRO-3 per micro-batch: ``(fwd exposed, bwd exposed)`` with layer-by-layer prefetch."""
    fwd = prefetched_gather_exposed(gather, fwd_compute, layers)
    bwd = np.maximum(0.0, gather + scatter - bwd_compute)
    return fwd, bwd


def param_gather_exposed(gather, first_forward, layers):
    """ZeRO-1/2: the updated weights' all-gather left exposed by the next forward's prefetch."""
    return prefetched_gather_exposed(gather, first_forward, layers)

"""Placement: which GPU each rank of a parallel plan runs on, and what each group crosses.

Ranks are laid out in a mixed radix over five axes, **innermost first** (Megatron-LM's default
order, ``tp-cp-ep-dp-pp``)::

    rank = tp_i + tp x (cp_i + cp x (ep_i + ep x (dp_i + (dp/ep) x pp_i)))

and rank ``r`` runs on node ``r // G`` (``G`` GPUs per node, filled in order, as launchers do).
Expert parallelism is carved out of data parallelism (``ep`` divides ``dp``): the ``ep`` axis
is the inner part of the data-parallel ranks. The order is configurable
(:data:`DEFAULT_ORDER` is a permutation of :data:`AXES`).

A *group* is the set of ranks that differ only along some axes (tensor parallel: ``tp``; the
data-parallel gradient group: ``cp``, ``ep`` and ``dp``). For an axis of size ``n`` whose stride (the
product of the sizes of the axes inside it) is ``S``, the members of one group that share a node
are ``clip(floor(G / S), 1, n)``; for several axes, the product. So a group

* lies inside one node when all its members share a node (``members_per_node = size``);
* otherwise spans ``size / members_per_node`` nodes, and its inter-node traffic goes through the
  NICs of each node. Every GPU of a node belongs to one group of each kind and the groups of one
  kind run their collectives at the same time (all data-parallel groups all-reduce together), so
  a node's ``G / members_per_node`` groups share its NICs: each gets
  ``node_bandwidth x members_per_node / G``. Eight DP groups with one member per node each get
  one eighth of the node's NICs, one NIC each on an 8-NIC node.

On a rail-optimized fabric GPU ``i`` of every node hangs off leaf switch ``i``. A group whose
members have the same local index on every node (each outer axis's stride a multiple of ``G``)
keeps its inter-node traffic on its rail; otherwise it crosses rails (through the spine, or
NVLink first with PXN). All functions take numpy arrays of degrees (one element per plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.errors import ConfigError

__all__ = ["AXES", "DEFAULT_ORDER", "GROUP_AXES", "GroupPlacement", "parse_order", "group_placement"]

#: the parallel axes a rank is indexed by
AXES = ("tp", "cp", "ep", "dp", "pp")
#: innermost first: tensor parallel on neighbouring GPUs, pipeline stages farthest apart
DEFAULT_ORDER = AXES
#: which axes each kind of group spans. "dp" is the group dense gradients are reduced over:
#: context-parallel ranks hold the same weights, so it is cp x dp ranks (ep inside dp); "edp"
#: is the group of an expert's replicas, cp x dp/ep ranks.
GROUP_AXES = {"tp": ("tp",), "cp": ("cp",), "ep": ("ep",), "dp": ("cp", "ep", "dp"),
              "edp": ("cp", "dp"), "pp": ("pp",)}


def parse_order(text: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """An axis order from ``"tp-cp-ep-dp-pp"`` (or commas), innermost first."""
    if text is None:
        return DEFAULT_ORDER
    names = tuple(text) if not isinstance(text, str) else tuple(
        p.strip().lower() for p in text.replace(",", "-").split("-") if p.strip())
    if sorted(names) != sorted(AXES):
        raise ConfigError("rank_order", "-".join(names) if names else text,
                          "a permutation of tp-cp-ep-dp-pp, innermost first")
    return names


def _axis_sizes(degrees: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sizes of the five axes: the ``dp`` axis is ``dp / ep`` (ep is carved out of dp)."""
    return {"tp": degrees["tp"], "cp": degrees["cp"], "ep": degrees["ep"],
            "dp": degrees["dp"] // degrees["ep"], "pp": degrees["pp"]}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPlacement:
    """Where the groups of one kind sit (arrays, one element per plan)."""

    kind: str
    size: np.ndarray  #: ranks per group
    members_per_node: np.ndarray  #: of one group on one node (integer-valued floats)
    nodes: np.ndarray  #: nodes one group spans
    node_share: np.ndarray  #: fraction of a node's NIC bandwidth one group gets (concurrent groups)
    rail_aligned: np.ndarray  #: bool: same local GPU index on every node (stays on its rail)

    @property
    def spans_nodes(self) -> np.ndarray:
        return self.nodes > 1


def group_placement(kind: str, degrees: dict, gpus_per_node: int,
                    order: tuple[str, ...] = DEFAULT_ORDER) -> GroupPlacement:
    """Placement of the groups of ``kind`` (a key of :data:`GROUP_AXES`) for arrays of degrees."""
    if kind not in GROUP_AXES:
        raise ConfigError("group kind", kind, "one of " + ", ".join(GROUP_AXES))
    arrays = {k: np.asarray(degrees[k], dtype=np.int64) for k in ("tp", "cp", "ep", "dp", "pp")}
    sizes = _axis_sizes(arrays)
    g = float(gpus_per_node)
    stride = np.ones(np.broadcast(*arrays.values()).shape, dtype=float)
    size = np.ones_like(stride)
    per_node = np.ones_like(stride)
    aligned = np.ones(stride.shape, dtype=bool)
    for axis in order:
        n = sizes[axis].astype(float)
        if axis in GROUP_AXES[kind]:
            size = size * n
            per_node = per_node * np.clip(np.floor(g / stride), 1.0, n)
            aligned &= (n == 1) | (stride < g) | (np.mod(stride, g) == 0)
        stride = stride * n
    nodes = size / per_node
    share = np.where(nodes > 1, per_node / g, 1.0)
    return GroupPlacement(kind=kind, size=size, members_per_node=per_node, nodes=nodes,
                          node_share=share, rail_aligned=aligned & (nodes > 1))

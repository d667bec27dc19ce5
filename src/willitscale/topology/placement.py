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
from functools import lru_cache

import numpy as np

from willitscale.errors import ConfigError

__all__ = ["AXES", "DEFAULT_ORDER", "GROUP_AXES", "GroupPlacement", "parse_order", "group_placement",
           "group_members", "uneven_groups", "uneven_detail", "end_pair_placement"]

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
    aligned = aligned & (nodes > 1)
    unclean = ~_clean(sizes, order, gpus_per_node)
    if np.any(unclean):  # the node boundary cuts an axis: count members node by node
        per_node, nodes, aligned = per_node.copy(), nodes.copy(), aligned.copy()
        for rows, geometry in _geometries(sizes, order, unclean):
            exact = _exact(geometry, order, gpus_per_node)[kind]
            per_node[rows], nodes[rows], aligned[rows] = exact[1], exact[2], exact[3]
    share = np.where(nodes > 1, per_node / g, 1.0)
    return GroupPlacement(kind=kind, size=size, members_per_node=per_node, nodes=nodes,
                          node_share=share, rail_aligned=aligned)


def end_pair_placement(placement: GroupPlacement) -> GroupPlacement:
    """The first and last member of each group of ``placement`` (the tied-embedding all-reduce
    between the first and the last pipeline stage). Members are laid out in rank order, so
    when a group spans nodes its two ends sit on its first and its last node, one member each
    (the node's NICs shared by one end of every such pair on it, ``1 / G`` each); otherwise
    both are inside one node. A group of one member has no pair (size 1)."""
    size = np.where(np.asarray(placement.size) >= 2, 2.0, 1.0)
    spans = (np.asarray(placement.nodes) > 1) & (size > 1)
    share = np.asarray(placement.node_share) / np.maximum(np.asarray(placement.members_per_node), 1.0)
    return GroupPlacement(kind=placement.kind, size=size,
                          members_per_node=np.where(spans, 1.0, size),
                          nodes=np.where(spans, 2.0, 1.0), node_share=np.where(spans, share, 1.0),
                          rail_aligned=np.asarray(placement.rail_aligned) & spans)


def _clean(sizes: dict, order: tuple[str, ...], gpus_per_node: int) -> np.ndarray:
    """Plans whose node boundary falls between whole digits of the rank: the axis ``k`` with
    stride ``S <= G < S x n`` has ``S | G`` and ``G/S | n`` (or one node holds every rank).
    Then every group has the same number of members on each node it touches, given by the
    closed form of the module docstring."""
    g = gpus_per_node
    if g & (g - 1) == 0 and all(not np.any(np.asarray(sizes[a]) & (np.asarray(sizes[a]) - 1))
                                for a in order):
        # powers of two on nodes of a power of two: every stride and G/S divide what they must
        return np.ones(np.shape(sizes["tp"]), dtype=bool)
    stride = np.ones(np.shape(sizes["tp"]), dtype=np.int64)
    clean = np.ones(stride.shape, dtype=bool)
    for axis in order:
        n = np.asarray(sizes[axis], dtype=np.int64)
        at = (stride <= g) & (g < stride * n)
        q = g // np.maximum(stride, 1)
        clean &= ~at | ((g % stride == 0) & (n % np.maximum(q, 1) == 0))
        stride = stride * n
    return clean


def _geometries(sizes: dict, order: tuple[str, ...], mask):
    """``(rows, sizes in order)`` for each distinct geometry among the plans of ``mask``."""
    stacked = np.stack([np.asarray(sizes[a], dtype=np.int64) for a in order], axis=-1)
    rows = np.nonzero(mask)[0]
    unique, inverse = np.unique(stacked[rows], axis=0, return_inverse=True)
    for j, geometry in enumerate(unique):
        yield rows[inverse.reshape(-1) == j], tuple(int(x) for x in geometry)


@lru_cache(maxsize=1024)
def _exact(geometry: tuple[int, ...], order: tuple[str, ...], gpus_per_node: int) -> dict:
    """Every rank placed, for one geometry (axis sizes in ``order``): per kind ``(size, members
    per node, nodes, rail aligned, even)``, where even means every node a group touches holds
    the same number of its members, for every group (else the members per node and nodes are
    those of the fullest node: the node whose NICs carry most of a group's traffic)."""
    ranks = np.arange(int(np.prod(geometry)))
    strides = np.cumprod((1,) + geometry[:-1])
    digits = {a: (ranks // s) % n for a, s, n in zip(order, strides, geometry)}
    node, local = ranks // gpus_per_node, ranks % gpus_per_node
    nodes_total = int(node[-1]) + 1
    out = {}
    for kind, axes in GROUP_AXES.items():
        group = np.zeros_like(ranks)
        for a, n in zip(order, geometry):
            if a not in axes:
                group = group * n + digits[a]
        # (group, node) pairs that hold members, counted sparsely: a dense groups x nodes
        # table grows with the square of the cluster (8,191 nodes took 9 GB)
        pairs, held = np.unique(group * nodes_total + node, return_counts=True)
        owner = pairs // nodes_total
        size = int(held[owner == 0].sum())
        per_node, spans = int(held.max()), int(np.bincount(owner).max())
        even = bool(held.min() == held.max())
        aligned = False
        if even and spans > 1:  # same local GPUs on every node of every group
            key = np.lexsort((local, node, group))
            locals_ = local[key].reshape(-1, spans, per_node)
            aligned = bool(np.all(locals_ == locals_[:, :1, :]))
        out[kind] = (size, per_node, spans, aligned, even)
    return out


def group_members(kind: str, degrees: dict, order: tuple[str, ...] = DEFAULT_ORDER) -> np.ndarray:
    """Every group of ``kind`` of one plan, as ranks: an array (groups x group size), each row in
    rank order. Rank ``r`` runs on GPU ``r`` of the cluster (node ``r // G``), so these are also
    the GPUs. The explicit form of :func:`group_placement`, for the flow simulator."""
    if kind not in GROUP_AXES:
        raise ConfigError("group kind", kind, "one of " + ", ".join(GROUP_AXES))
    sizes = {k: int(v) for k, v in _axis_sizes({k: int(degrees[k]) for k in AXES}).items()}
    outer_first = tuple(reversed(order))
    grid = np.arange(int(np.prod([sizes[a] for a in AXES]))).reshape([sizes[a] for a in outer_first])
    inside = [outer_first.index(a) for a in reversed(order) if a in GROUP_AXES[kind]]
    grid = np.moveaxis(grid, inside, range(grid.ndim - len(inside), grid.ndim))
    size = int(np.prod([sizes[a] for a in GROUP_AXES[kind]]))
    return grid.reshape(-1, size)


def uneven_groups(degrees: dict, gpus_per_node: int, order: tuple[str, ...] = DEFAULT_ORDER):
    """Per plan, the first kind of group (of more than one rank) that some node holds more of
    than another node it touches, or ``""`` when every group lands evenly (arrays of degrees).

    ``tp 4, dp 3, pp 2`` on nodes of 8 (tp-cp-ep-dp-pp): data-parallel group ``{0, 4, 8}`` has
    two members on node 0 and one on node 1. The collective model needs the same members on
    every node a group spans, so such plans are rejected (``uneven_placement``) rather than
    guessed; another rank order often places them evenly."""
    shape = np.broadcast(*(np.asarray(degrees[k]) for k in ("tp", "cp", "ep", "dp", "pp"))).shape
    arrays = {k: np.broadcast_to(np.asarray(degrees[k], dtype=np.int64), shape).reshape(-1)
              for k in ("tp", "cp", "ep", "dp", "pp")}
    sizes = _axis_sizes(arrays)
    out = np.full(np.shape(sizes["tp"]), "", dtype=object)
    if out.size == 0:
        return out.reshape(shape)
    unclean = ~_clean(sizes, order, gpus_per_node)
    if np.any(unclean):
        for rows, geometry in _geometries(sizes, order, unclean):
            exact = _exact(geometry, order, gpus_per_node)
            bad = [k for k in ("tp", "cp", "ep", "dp", "edp", "pp") if exact[k][0] > 1 and not exact[k][4]]
            out[rows] = bad[0] if bad else ""
    return out.reshape(shape)


def uneven_detail(kind: str, degrees: dict, gpus_per_node: int,
                  order: tuple[str, ...] = DEFAULT_ORDER) -> str:
    """How one plan's group of ``kind`` lands on the nodes, e.g. ``"2 + 1 GPUs on 2 nodes"``."""
    sizes = {k: int(np.asarray(v).reshape(-1)[0]) for k, v in _axis_sizes(
        {k: np.asarray(degrees[k], dtype=np.int64) for k in ("tp", "cp", "ep", "dp", "pp")}).items()}
    geometry = tuple(sizes[a] for a in order)
    ranks = np.arange(int(np.prod(geometry)))
    strides = np.cumprod((1,) + geometry[:-1])
    group = np.zeros_like(ranks)
    for a, s, n in zip(order, strides, geometry):
        if a not in GROUP_AXES[kind]:
            group = group * n + (ranks // s) % n
    members = ranks[group == 0]
    nodes, counts = np.unique(members // gpus_per_node, return_counts=True)
    return (f"ranks {', '.join(map(str, members[:8]))}{', ...' if len(members) > 8 else ''} hold "
            f"{' + '.join(map(str, counts))} GPUs on nodes {', '.join(map(str, nodes))}")

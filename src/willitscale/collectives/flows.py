"""The flows each collective algorithm emits, step by step, as :class:`~willitscale.collectives.phases.Phase` s.

``size`` follows nccl-tests: the buffer per rank for all_reduce, broadcast, reduce and
all_to_all (each rank sends ``size / n`` to every peer); the *total* (gathered output /
scattered input) for all_gather and reduce_scatter.

==============  ============  ===============================================================
op              algorithm     flows
==============  ============  ===============================================================
all_reduce      ring          n flows rank i -> i+1 of ``S/n``, ``2(n-1)`` identical steps, each
                              charged the mean hop latency (the dependency chain walks the ring)
reduce_scatter  ring          the same, ``n-1`` steps; all_gather likewise
all_reduce      tree          NCCL double binary tree, pipelined: every tree edge carries
                              ``S/2`` up (reduce) and ``S/2`` down (broadcast) at once; a byte
                              pays ``2 x depth`` path latencies. One tree over all ranks in
                              ring order: exact for one GPU per server; with several, NCCL
                              chains a server's GPUs and builds the tree across servers on one
                              rail, while this tree's edges cross servers and rails (through
                              the spine of a rail-optimized fabric)
all_reduce      hierarchical  ring reduce-scatter inside each node, ring all-reduce of ``S/g``
                              across nodes per local rank (g rings at once), ring all-gather
broadcast,      ring          pipelined chain root -> ... of ``S`` on every hop at once; a byte
reduce                        pays ``n-1`` path latencies
all_to_all      direct        all ``n(n-1)`` flows of ``S/n`` at once
all_to_all      pairwise      ``n-1`` steps; in step k rank i sends ``S/n`` to rank i+k
send_recv       direct        one flow ``S`` from ranks[0] to ranks[1]
==============  ============  ===============================================================

Several groups of one collective (e.g. the 8 DP groups of a TP=8 layout) run in lockstep:
:func:`collective_phases` concatenates the k-th step of every group into one phase.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from willitscale.collectives.ops import Op, parse_op
from willitscale.collectives.phases import Phase
from willitscale.errors import ConfigError

__all__ = ["ALGORITHMS", "default_algorithm", "group_phases", "collective_phases", "double_binary_trees"]

#: algorithms per op; the first is the default
ALGORITHMS: dict[Op, tuple[str, ...]] = {
    Op.ALL_REDUCE: ("ring", "tree", "hierarchical"),
    Op.REDUCE_SCATTER: ("ring",),
    Op.ALL_GATHER: ("ring",),
    Op.BROADCAST: ("ring",),
    Op.REDUCE: ("ring",),
    Op.ALL_TO_ALL: ("direct", "pairwise"),
    Op.SEND_RECV: ("direct",),
}


def default_algorithm(op: Op) -> str:
    return ALGORITHMS[Op(op)][0]


def _ring_step(ranks: np.ndarray, chunk: float, repeat: int, label: str) -> Phase:
    return Phase(src=ranks, dst=np.roll(ranks, -1), size=chunk, repeat=repeat, latency_mode="mean", label=label)


def _btree_parents(n: int) -> np.ndarray:
    """Parent of each rank 0..n-1 in NCCL's binary tree (-1: the root).

    The tree follows the ranks' bits: rank 0 is the root with one child (the highest power of two
    below n); a rank with lowest set bit ``b`` hangs under ``(r ^ b) | 2b`` (or ``r ^ b`` when that
    is out of range) and has children ``r - b/2`` and ``r + b/2`` (halving ``b/2`` while out of
    range). Odd ranks are the leaves.
    """
    parent = np.full(n, -1, dtype=np.int64)
    for r in range(1, n):
        low = r & -r
        up = (r ^ low) | (low << 1)
        parent[r] = up if up < n else r ^ low
    return parent


def double_binary_trees(n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Parents of ranks 0..n-1 in NCCL's two trees and the trees' depth (edges root to leaf).

    Tree 2 is tree 1 mirrored (even n) or shifted by one rank (odd n), so tree 1's leaves (odd
    ranks) are tree 2's inner ranks and a rank is inner in at most one tree (odd n: but one) (Sanders, Speck, Traeff 2009;
    NCCL 2.4's double binary tree).
    """
    p1 = _btree_parents(n)
    r = np.arange(n)
    move = n - 1 - r if n % 2 == 0 else (r + 1) % n
    p2 = np.full(n, -1, dtype=np.int64)
    has = p1 >= 0
    p2[move[has]] = move[p1[has]]
    depth, pos = 0, np.arange(n)
    while np.any(p1[pos] >= 0):
        pos = np.where(p1[pos] >= 0, p1[pos], pos)
        depth += 1
    return p1, p2, depth


def _tree_all_reduce(ranks: np.ndarray, size: float) -> list[Phase]:
    n = ranks.size
    p1, p2, depth = double_binary_trees(n)
    src, dst = [], []
    for parent in (p1, p2):
        child = np.flatnonzero(parent >= 0)
        src += [ranks[child], ranks[parent[child]]]
        dst += [ranks[parent[child]], ranks[child]]
    return [Phase(src=np.concatenate(src), dst=np.concatenate(dst), size=size / 2,
                  latency_hops=max(1, 2 * depth), label="tree all_reduce")]


def _hierarchical(ranks: np.ndarray, size: float, local: int) -> list[Phase]:
    n = ranks.size
    if local < 1 or n % local:
        raise ConfigError("hierarchical all_reduce: ranks per node", local, f"a divisor of {n} ranks")
    grid = ranks.reshape(n // local, local)  # rows: nodes, columns: local rank
    nodes = grid.shape[0]
    phases = []
    if local > 1:
        intra_src = grid.reshape(-1)
        intra_dst = np.roll(grid, -1, axis=1).reshape(-1)
        phases.append(Phase(src=intra_src, dst=intra_dst, size=size / local, repeat=local - 1,
                            latency_mode="mean", label="intra-node reduce_scatter"))
    if nodes > 1:
        phases.append(Phase(src=grid.reshape(-1), dst=np.roll(grid, -1, axis=0).reshape(-1),
                            size=size / local / nodes, repeat=2 * (nodes - 1), latency_mode="mean",
                            label="inter-node all_reduce"))
    if local > 1:
        phases.append(Phase(src=intra_src, dst=intra_dst, size=size / local, repeat=local - 1,
                            latency_mode="mean", label="intra-node all_gather"))
    return phases


def group_phases(op: Op | str, size: float, ranks: Sequence[int], algorithm: str | None = None,
                 *, ranks_per_node: int = 1) -> list[Phase]:
    """The steps of ``op`` over one group of GPUs ``ranks`` (in ring order), ``size`` bytes.

    ``ranks_per_node`` is only used by ``hierarchical`` (ranks listed node by node).
    An empty list means no traffic (one rank, or size 0 with nothing to send).
    """
    op = parse_op(op) if isinstance(op, str) else Op(op)
    algorithm = algorithm or default_algorithm(op)
    if algorithm not in ALGORITHMS[op]:
        raise ConfigError(f"algorithm (for {op.value})", algorithm, "one of " + ", ".join(ALGORITHMS[op]))
    r = np.asarray(ranks, dtype=np.int64).reshape(-1)
    n = r.size
    if np.unique(r).size != n:
        raise ConfigError("ranks", list(r[:8]), "distinct GPUs")
    if not size >= 0:
        raise ConfigError("size", size, "bytes >= 0")
    if n < 2:
        return []
    if op is Op.SEND_RECV:
        return [Phase(src=r[:1], dst=r[1:2], size=size, label="send_recv")]
    if op is Op.ALL_TO_ALL:
        if algorithm == "pairwise":
            return [Phase(src=r, dst=np.roll(r, -k), size=size / n, label=f"all_to_all step {k}")
                    for k in range(1, n)]
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        return [Phase(src=r[i], dst=r[j], size=size / n, label="all_to_all")]
    if op in (Op.BROADCAST, Op.REDUCE):
        src, dst = (r[:-1], r[1:]) if op is Op.BROADCAST else (r[1:], r[:-1])
        return [Phase(src=src, dst=dst, size=size, latency_hops=n - 1, label=f"{op.value} chain")]
    if algorithm == "tree":
        return _tree_all_reduce(r, size)
    if algorithm == "hierarchical":
        return _hierarchical(r, size, ranks_per_node)
    steps = {Op.ALL_REDUCE: 2 * (n - 1), Op.REDUCE_SCATTER: n - 1, Op.ALL_GATHER: n - 1}[op]
    return [_ring_step(r, size / n, steps, f"ring {op.value}")]


def collective_phases(op: Op | str, size: float, groups: Sequence[Sequence[int]],
                      algorithm: str | None = None, *, ranks_per_node: int = 1,
                      keys: Sequence[int] | None = None, disjoint: bool = True) -> list[Phase]:
    """The steps of ``op`` run by every group at once, in lockstep (step k of all groups is one
    phase). Groups must be the same size. ``keys`` (one per group, default 0) label the flows
    for ECMP hashing, e.g. the NCCL channel; with ``disjoint`` the groups may not share GPUs."""
    per_group = [group_phases(op, size, g, algorithm, ranks_per_node=ranks_per_node) for g in groups]
    if not per_group:
        return []
    shapes = {tuple((p.repeat, p.flows) for p in ph) for ph in per_group}
    if len(shapes) != 1:
        raise ConfigError("groups", [len(g) for g in groups], "groups of equal size (they run in lockstep)")
    all_ranks = np.concatenate([np.asarray(g).reshape(-1) for g in groups])
    if disjoint and np.unique(all_ranks).size != all_ranks.size:
        raise ConfigError("groups", "overlapping", "disjoint groups of GPUs")
    keys = [0] * len(groups) if keys is None else list(keys)
    if len(per_group) == 1 and keys[0] == 0:
        return per_group[0]
    merged = []
    for steps in zip(*per_group):
        first = steps[0]
        merged.append(Phase(src=np.concatenate([p.src for p in steps]),
                            dst=np.concatenate([p.dst for p in steps]),
                            size=np.concatenate([p.size for p in steps]),
                            key=np.concatenate([np.full(p.flows, k) for p, k in zip(steps, keys)]),
                            repeat=first.repeat, latency_hops=first.latency_hops,
                            latency_mode=first.latency_mode,
                            extra_latency=first.extra_latency, label=first.label))
    return merged

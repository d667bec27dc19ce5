"""The traffic of a step's communication groups for the flow simulator: which groups a plan
uses, which of them run together, and the flows of each group's collective over all its groups.

A group's collective moves :data:`REFERENCE_SIZE` bytes (nccl-tests' size convention): NCCL's
ring for all-reduce, reduce-scatter and all-gather (and, for an all-reduce that leaves its node,
NCCL's double binary trees across nodes as a second pattern) (one ring per member a group has on a node,
channel ``k`` rotated by ``k`` inside every server, snaking so that server-to-server hops stay on
one rail), direct flows for all-to-all, one flow per pair for sends (every stage to the next;
every context-parallel rank to the next around its ring). Members come from the one rank layout
(:func:`~willitscale.topology.placement.group_members`). Why these sets run together:
:mod:`willitscale.step.flow_network`.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.flows import collective_phases
from willitscale.collectives.phases import Phase, Stream
from willitscale.step.network import GROUPS
from willitscale.topology.placement import group_members

__all__ = ["REFERENCE_SIZE", "used_groups", "concurrent_sets", "group_stream", "tree_keys"]

#: bytes of each group's collective in the simulation (nccl-tests' size convention)
REFERENCE_SIZE = 1e9


def used_groups(geometry: tuple) -> tuple[str, ...]:
    """The group keys a plan of ``geometry`` communicates in (groups of more than one rank)."""
    tp, cp, ep, dp, pp, zero, hybrid, sp, tied, gpn = geometry
    used = []
    if tp > 1:
        used += ["tp_reduce_scatter", "tp_all_gather"] if sp else ["tp_all_reduce"]
        if pp > 1 and not sp:
            used.append("tp_all_gather")  # the pipeline's scatter/gather
    used += [k for k, on in (("cp", cp > 1), ("ep", ep > 1), ("pp", pp > 1), ("emb", pp > 1 and tied)) if on]
    grads = cp * dp > 1
    egrads = ep > 1 and cp * dp // ep > 1
    if zero == 0:
        used += [k for k, on in (("dp_ar", grads), ("edp_ar", egrads)) if on]
    else:
        used += [k for k, on in (("shard_rs", grads), ("shard_ag", grads), ("replica", grads and hybrid),
                                 ("eshard_rs", egrads), ("eshard_ag", egrads),
                                 ("ereplica", egrads and hybrid)) if on]
    return tuple(dict.fromkeys(used))


def concurrent_sets(used: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The sets of groups simulated together (module docstring); a key's slowdown comes from
    the first set that holds it."""
    sets = [(k,) for k in ("tp_all_reduce", "tp_reduce_scatter", "tp_all_gather", "cp", "ep", "pp")
            if k in used]
    grads = tuple(k for k in ("dp_ar", "edp_ar", "shard_rs", "eshard_rs", "replica", "ereplica", "emb", "pp")
                  if k in used)
    if grads and grads != ("pp",):
        sets.append(grads)
    weights = tuple(k for k in ("shard_ag", "eshard_ag") if k in used)
    if weights:
        sets.append(weights)
    return sets


def _split(groups: np.ndarray, gpn: int, hybrid: bool) -> tuple[np.ndarray, np.ndarray]:
    """(shard groups, replica groups) of gradient groups: hybrid sharding shards over a group's
    members on one node and replicates across nodes; otherwise the group is the shard group."""
    if not hybrid:
        return groups, groups[:, :1]
    rows = []
    cols = []
    for g in groups:
        per_node = np.split(g, np.flatnonzero(np.diff(g // gpn)) + 1)
        block = np.stack(per_node)  # (nodes, members per node): an even placement
        rows.append(block)
        cols.append(block.T)
    return np.concatenate(rows), np.concatenate(cols)


def _members(key: str, geometry: tuple, order: tuple) -> np.ndarray:
    tp, cp, ep, dp, pp, zero, hybrid, sp, tied, gpn = geometry
    deg = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}
    kind = GROUPS[key][0]
    if key == "emb":
        g = group_members("pp", deg, order)
        return g[:, [0, -1]]
    if kind in ("shard", "replica", "eshard", "ereplica"):
        base = group_members("edp" if kind.startswith("e") else "dp", deg, order)
        shard, replica = _split(base, gpn, hybrid)
        return shard if kind.endswith("shard") else replica
    return group_members(kind, deg, order)


def _snake(members: np.ndarray, gpn: int) -> np.ndarray:
    """Ring orders (groups x ranks) whose server-to-server hops join GPUs of one local index (one
    rail): every other server's run of members reversed. Members sorted, placed evenly."""
    per_node = int(np.bincount(members[0] // gpn).max())
    runs = members.reshape(members.shape[0], -1, per_node).copy()
    runs[:, 1::2] = runs[:, 1::2, ::-1]
    return runs.reshape(members.shape)


def _ring(op: str, members: np.ndarray, gpn: int, leaves: bool, size: float) -> list[Phase]:
    """NCCL's ring over every group at once, one channel (ring) per member a group has on a
    node when it leaves the node, channel ``k`` rotated by ``k`` inside every server so the
    channels leave through different NICs (the snake's reversed runs by ``-k``), as
    :func:`~willitscale.fabric.traffic.channel_orders` does for one group."""
    count, n = members.shape
    per_node = int(np.bincount(members[0] // gpn).max()) if leaves else 1
    order = _snake(members, gpn) if leaves else members
    runs = order.reshape(count, -1, per_node)
    step = {"all_reduce": 2 * (n - 1), "reduce_scatter": n - 1, "all_gather": n - 1}[op]
    src, dst, key = [], [], []
    for k in range(per_node):
        shift = np.where(np.arange(runs.shape[1]) % 2 == 1, -k, k)[None, :, None]
        idx = (np.arange(per_node)[None, None, :] + shift) % per_node
        ring = np.take_along_axis(runs, np.broadcast_to(idx, runs.shape), axis=2).reshape(count, n)
        src.append(ring.reshape(-1))
        dst.append(np.roll(ring, -1, axis=1).reshape(-1))
        key.append(np.full(ring.size, k))
    return [Phase(src=np.concatenate(src), dst=np.concatenate(dst), size=size / per_node / n,
                  key=np.concatenate(key), repeat=step, latency_mode="mean", label=f"ring {op}")]


def _trees(members: np.ndarray, gpn: int, size: float) -> list[Phase]:
    """NCCL's tree all-reduce across nodes: for every group, one double binary tree per member a
    group has on a node, tree ``j`` over the ``j``-th member of every node (one rail, as NCCL's
    channels leave through different NICs), carrying ``1/m`` of the bytes; the chain inside a
    node (NVLink) is left out. All trees at once (:func:`~willitscale.collectives.flows.collective_phases`)."""
    count, n = members.shape
    per_node = int(np.bincount(members[0] // gpn).max())
    grid = members.reshape(count, n // per_node, per_node)
    trees = [grid[c, :, j] for c in range(count) for j in range(per_node)]
    keys = [j for _ in range(count) for j in range(per_node)]
    return collective_phases("all_reduce", size / per_node, trees, "tree", keys=keys, disjoint=False)


def group_stream(key: str, geometry: tuple, order: tuple, pattern: str = "ring"
                 ) -> tuple[Stream, int, int, bool] | None:
    """The stream of ``key``'s collective over all its groups: (stream, groups, ranks, leaves);
    None for groups of one rank (e.g. a hybrid shard group of one GPU per node). ``pattern``
    ``tree``: an all-reduce that leaves its node runs NCCL's trees (:func:`_trees`) instead of
    its rings."""
    gpn = geometry[-1]
    kind, op = GROUPS[key]
    members = np.sort(_members(key, geometry, order), axis=1)
    if members.shape[1] < 2:
        return None
    leaves = bool(np.any(members // gpn != (members[:, :1] // gpn)))
    count, ranks = members.shape
    size = REFERENCE_SIZE
    if op == "send_recv":
        if kind == "cp":  # every rank passes its block to the next around the ring
            src, dst = members, np.roll(members, -1, axis=1)
        else:  # every stage sends to the next
            src, dst = members[:, :-1], members[:, 1:]
        phases = [Phase(src=src.reshape(-1), dst=dst.reshape(-1), size=size, label=f"{key} sends")]
    elif op == "all_to_all":
        i, j = np.nonzero(~np.eye(ranks, dtype=bool))
        phases = [Phase(src=members[:, i].reshape(-1), dst=members[:, j].reshape(-1), size=size / ranks,
                        label="all_to_all")]
    elif pattern == "tree" and op == "all_reduce" and leaves and members.shape[1] // int(
            np.bincount(members[0] // gpn).max()) > 1:
        phases = _trees(members, gpn, size)
    else:
        phases = _ring(op, members, gpn, leaves, size)
    return Stream(name=key, phases=tuple(phases)), count, ranks, leaves


def tree_keys(streams) -> tuple[str, ...]:
    """The all-reduces among ``streams`` (made by :func:`group_stream`) that leave their node:
    NCCL may run them as trees, whose traffic crosses the fabric differently. Not groups of two
    ranks (the tied embedding's): their tree and ring move the same bytes between the same two
    GPUs, so the rings' slowdown stands for both."""
    return tuple(st.name for st, _, ranks, leaves in streams
                 if leaves and ranks > 2 and GROUPS[st.name][1] == "all_reduce")

"""Traffic generators: a collective over placed GPUs, several jobs, incast.

Ring order of GPUs over whole servers (``placement``):

* ``rail`` (default): servers in order, the GPUs of every other server walked backwards, so
  consecutive servers are joined GPU ``r`` to GPU ``r`` - every server-to-server hop stays on
  one rail (with an odd number of servers the closing hop changes rails).
* ``flat``: GPUs in index order; the hop from GPU ``g-1`` of a server to GPU 0 of the next
  changes rails, so on a rail-optimized fabric it crosses the spine (unless routed rail-aware).

``channels`` (NCCL channels): the collective is split into that many rings of ``size /
channels`` each, ring ``k`` rotated by ``k`` inside every server so that the rings leave the
servers through different GPUs/NICs; flows of ring ``k`` carry ECMP key ``k``. Default: one
channel per GPU of a server for a collective spanning servers (NCCL opens at least one ring
per NIC), one otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from willitscale.collectives.flows import collective_phases, default_algorithm
from willitscale.collectives.ops import Op, parse_op
from willitscale.collectives.phases import Phase, Stream, Traffic
from willitscale.errors import ConfigError
from willitscale.topology.graph import Topology

__all__ = ["PLACEMENTS", "ring_order", "channel_orders", "CollectiveCall", "collective_call",
           "collective_traffic", "calls_traffic", "incast_traffic", "job_nodes", "jobs_traffic"]

PLACEMENTS = ("rail", "flat")


def ring_order(gpus_per_node: int, nodes: Sequence[int], placement: str = "rail") -> np.ndarray:
    """GPU indices of whole servers ``nodes`` in ring order (see module docstring)."""
    if placement not in PLACEMENTS:
        raise ConfigError("placement", placement, "one of " + ", ".join(PLACEMENTS))
    nodes = np.asarray(nodes, dtype=np.int64)
    grid = nodes[:, None] * gpus_per_node + np.arange(gpus_per_node)[None, :]
    if placement == "rail":
        grid[1::2] = grid[1::2, ::-1]
    return grid.reshape(-1)


def channel_orders(order: np.ndarray, gpu_node: np.ndarray, channels: int) -> list[np.ndarray]:
    """``channels`` ring orders: ``order`` with each server's run of GPUs rotated by k.

    A run walked backwards (``rail`` placement's odd servers) is rotated by -k, so a snake
    stays a snake: every channel's server-to-server hops stay on one rail.
    """
    if channels < 1:
        raise ConfigError("channels", channels, "an integer >= 1")
    order = np.asarray(order, dtype=np.int64)
    node = gpu_node[order]
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    lengths = np.diff(np.r_[starts, order.size])
    run = np.repeat(np.arange(starts.size), lengths)
    local = np.arange(order.size) - starts[run]
    second = np.minimum(starts + 1, order.size - 1)
    backwards = np.where(lengths > 1, order[second] < order[starts], False)[run]
    out = []
    for k in range(channels):
        shift = np.where(backwards, -k, k)
        out.append(order[starts[run] + (local + shift) % lengths[run]])
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCall:
    """One collective run by several groups at once: the unit the estimate asks the fabric
    about. ``groups`` are GPU indices in ring order; all groups the same size."""

    op: Op
    size: float  #: bytes, nccl-tests convention (see :mod:`willitscale.collectives.flows`)
    groups: tuple[tuple[int, ...], ...]
    algorithm: str | None = None
    channels: int = 1
    count: int = 1  #: back-to-back repetitions of the whole collective
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", parse_op(self.op) if isinstance(self.op, str) else Op(self.op))
        object.__setattr__(self, "groups", tuple(tuple(int(x) for x in g) for g in self.groups))
        if self.count < 1 or int(self.count) != self.count:
            raise ConfigError("count", self.count, "an integer >= 1")
        if self.channels < 1 or int(self.channels) != self.channels:
            raise ConfigError("channels", self.channels, "an integer >= 1")

    @property
    def ranks(self) -> int:
        return len(self.groups[0]) if self.groups else 0


def collective_call(topology: Topology, op: Op | str, size: float, *, gpus: Sequence[int] | None = None,
                    nodes: Sequence[int] | None = None, algorithm: str | None = None,
                    placement: str = "rail", channels: int | None = None, name: str = "") -> CollectiveCall:
    """One collective over ``gpus`` (in that order) or whole servers ``nodes`` (default: all)."""
    if gpus is None:
        nodes = range(topology.nodes) if nodes is None else nodes
        order = ring_order(topology.gpus_per_node, nodes, placement)
    else:
        order = np.asarray(gpus, dtype=np.int64)
    op = parse_op(op) if isinstance(op, str) else Op(op)
    spans = np.unique(topology.gpu_node[order]).size > 1
    if channels is None:
        channels = topology.gpus_per_node if spans and op is not Op.SEND_RECV else 1
    return CollectiveCall(op=op, size=size, groups=(tuple(order.tolist()),), algorithm=algorithm,
                          channels=channels, name=name or f"{op.value}")


def call_phases(topology: Topology, call: CollectiveCall) -> list[Phase]:
    """The phases of ``call``: every group x channel in lockstep, repeated ``count`` times."""
    algorithm = call.algorithm or default_algorithm(call.op)
    groups, keys = [], []
    for g in call.groups:
        for k, order in enumerate(channel_orders(np.asarray(g), topology.gpu_node, call.channels)):
            groups.append(_rail_aligned(topology, order) if algorithm == "hierarchical" else order)
            keys.append(k)
    phases = collective_phases(call.op, call.size / call.channels, groups, algorithm,
                               ranks_per_node=_ranks_per_node(topology, call.groups[0]),
                               keys=keys, disjoint=False)
    if len(phases) == 1 and call.count > 1:
        p = phases[0]
        return [Phase(src=p.src, dst=p.dst, size=p.size, key=p.key, repeat=p.repeat * call.count,
                      latency_hops=p.latency_hops, latency_mode=p.latency_mode,
                      extra_latency=p.extra_latency, label=p.label)]
    return phases * call.count


def _rail_aligned(topology: Topology, order: np.ndarray) -> np.ndarray:
    """``order`` with every server's run of GPUs in the first server's order of local indices.

    The hierarchical all-reduce joins the ``j``-th GPU of every server's run in a ring across
    servers; NCCL joins GPUs of one local index (one NIC rail). The ``rail`` placement walks odd
    servers backwards, which would pair local ``j`` with local ``g-1-j`` - a different rail, so
    through the spine. Groups whose servers hold different local indices are left as they are.
    """
    node, local = topology.gpu_node[order], topology.gpu_local[order]
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    width = int(starts[1]) if starts.size > 1 else order.size
    if starts.size < 2 or order.size != starts.size * width or np.any(np.diff(starts) != width):
        return order
    grid = local.reshape(-1, width)
    if np.any(np.sort(grid, axis=1) != np.sort(grid[0])):
        return order
    return (node[starts][:, None] * topology.gpus_per_node + grid[0][None, :]).reshape(-1)


def _ranks_per_node(topology: Topology, group: Sequence[int]) -> int:
    node = topology.gpu_node[np.asarray(group, dtype=np.int64)]
    return int(np.bincount(node).max()) if node.size else 1


def calls_traffic(topology: Topology, calls: Sequence[CollectiveCall]) -> Traffic:
    """One stream per call, all starting at once (they share the fabric)."""
    streams = []
    for i, call in enumerate(calls):
        phases = call_phases(topology, call)
        if not phases:  # nothing to send: a zero-flow step so the stream still exists
            phases = [Phase(src=[], dst=[], size=[], label="empty")]
        streams.append(Stream(name=call.name or f"call{i}", phases=tuple(phases)))
    return Traffic(streams)


def collective_traffic(topology: Topology, op: Op | str, size: float, **kwargs) -> Traffic:
    """The traffic of one collective (see :func:`collective_call` for the keywords)."""
    return calls_traffic(topology, [collective_call(topology, op, size, **kwargs)])


def incast_traffic(senders: Sequence[int], receiver: int, size: float) -> Traffic:
    """Every sender sends ``size`` bytes to ``receiver`` at once (many-to-one)."""
    senders = np.asarray(senders, dtype=np.int64)
    if senders.size == 0 or np.any(senders == receiver):
        raise ConfigError("incast senders", senders.tolist()[:8], f"GPUs other than the receiver {receiver}")
    return Traffic([Stream(name="incast", phases=(Phase(src=senders, dst=np.full(senders.size, receiver),
                                                        size=size, label="incast"),))])


def job_nodes(nodes: int, jobs: int, layout: str = "packed") -> list[np.ndarray]:
    """Servers of each of ``jobs`` equal jobs: ``packed`` (contiguous) or ``interleaved``."""
    if jobs < 1 or nodes % jobs:
        raise ConfigError("jobs", jobs, f"a divisor of the {nodes} servers")
    idx = np.arange(nodes)
    if layout == "packed":
        return list(idx.reshape(jobs, -1))
    if layout == "interleaved":
        return [idx[j::jobs] for j in range(jobs)]
    raise ConfigError("job placement", layout, "packed or interleaved")


def jobs_traffic(topology: Topology, jobs: int, op: Op | str, size: float, *, layout: str = "packed",
                 algorithm: str | None = None, placement: str = "rail", channels: int | None = None) -> Traffic:
    """``jobs`` jobs on equal shares of the servers, each running the same collective at once."""
    calls = [collective_call(topology, op, size, nodes=n, algorithm=algorithm, placement=placement,
                             channels=channels, name=f"job{j}")
             for j, n in enumerate(job_nodes(topology.nodes, jobs, layout))]
    return calls_traffic(topology, calls)

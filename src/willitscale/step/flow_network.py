"""``--network flow``: every communication group of a step simulated together on the fabric.

:class:`SimulatedNetwork` answers the :class:`~willitscale.step.network.Network` protocol. For
each distinct parallel geometry of a batch it places every group by the one rank layout
(:func:`~willitscale.topology.placement.group_members`), builds the flows of each group's
collective and runs the groups that overlap in a real step **together** on the fabric
(:func:`~willitscale.fabric.simulator.simulate`), then once more on an *ideal* fabric: the same
servers, NVLink and NICs, every NIC on one non-blocking crossbar switch. A group's slowdown is

    slowdown = max(1, time on the fabric / time on the ideal fabric)

and the engine runs the analytic lines (NCCL's pick and its achieved time, as without
``--network flow``) with their bytes term multiplied by it
(:func:`~willitscale.collectives.line_time.with_contention`). The ideal fabric is the world the
analytic model assumes (only the NICs and NVLink limit a group, the groups of one kind sharing
each node's NICs evenly), so the ratio isolates what the fabric adds: collisions on rails,
leaf uplinks and spines, ECMP hash collisions, oversubscription. On a non-blocking fabric with
perfect load balance (``--routing spray``) every slowdown is 1 and the estimate equals the
analytic one (tests/property/test_flow_network_parity.py). The floor at 1: a group that ends
sooner on the fabric than on the ideal one (a concurrent group lost bandwidth in the core and
left it more of a shared NIC) is given no more than its analytic NIC share, which the analytic
model already credits it.

What is simulated (the honest approximation, docs/estimate.md "--network flow"):

* every group of one kind runs its collective at the same moment (all TP groups' all-reduces
  of one layer, all pipeline boundaries' sends, all DP groups' buckets), as the analytic
  model's NIC share assumes;
* TP, CP and EP collectives and the steady-state pipeline sends each run alone: inside a layer
  they follow one another on a GPU's critical path;
* the gradient collectives (DDP's buckets, ZeRO's reduce-scatters, hybrid sharding's replica
  all-reduce, the experts' and the tied embedding's all-reduce) run together with the pipeline
  sends: in 1F1B the buckets are reduced while the pipeline drains;
* ZeRO's weight all-gathers run together (after the optimizer, before the next forward);
* each group's collective moves :data:`REFERENCE_SIZE` bytes (nccl-tests convention) in
  NCCL's ring (all-reduce, reduce-scatter, all-gather; one ring per member a group has on a
  node, snaking so that server-to-server hops stay on one rail), direct flows (all-to-all) or
  one flow per pair (sends); links carry no latency, so the ratio is that of the bytes terms.
  Overlapping streams run the same size, an assumption (a step's real sizes differ per kind).

Results are cached per (fabric, cluster, geometry): the estimate's what-ifs re-run the engine
without simulating again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from willitscale.collectives.line_time import with_contention
from willitscale.fabric.backend import FlowNetwork
from willitscale.fabric.simulator import simulate
from willitscale.collectives.phases import Phase, Stream, Traffic
from willitscale.step.network import GROUPS, analytic_lines
from willitscale.topology.clos import add_servers
from willitscale.topology.graph import TopologyBuilder
from willitscale.topology.links import FabricLinks
from willitscale.topology.placement import group_members
from willitscale.topology.routing import Router, parse_routing

__all__ = ["REFERENCE_SIZE", "GroupFlow", "StepFlow", "SimulatedNetwork", "step_flow", "step_links",
           "used_groups", "concurrent_sets"]

#: bytes of each group's collective in the simulation (nccl-tests' size convention)
REFERENCE_SIZE = 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupFlow:
    """One group's simulation: its time on the fabric and on the ideal fabric, the links."""

    key: str
    kind: str
    op: str
    groups: int  #: groups of this kind (all simulated at once)
    ranks: int
    leaves_node: bool
    simulated_with: tuple[str, ...]  #: the other groups of its concurrent set
    time: float  #: seconds of its REFERENCE_SIZE collective on the fabric (bytes term)
    ideal: float  #: ... on the ideal fabric

    @property
    def slowdown(self) -> float:
        return max(1.0, self.time / self.ideal) if self.ideal > 0 else 1.0

    def to_json(self, links=((), None)) -> dict:
        rows, hottest = links
        return {"group": self.key, "parallelism": self.kind, "op": self.op, "groups": self.groups,
                "ranks": self.ranks, "leaves_node": self.leaves_node,
                "simulated_with": list(self.simulated_with), "size_bytes": REFERENCE_SIZE,
                "simulated_s": self.time, "ideal_s": self.ideal, "slowdown": self.slowdown,
                "links": list(rows), "busiest_link": hottest}


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StepFlow:
    """Every simulated group of one geometry; ``groups`` by key (the key's own set)."""

    groups: dict = field(default_factory=dict)
    #: (keys, traffic, result on the fabric, whether the ideal fabric was simulated) per set
    sets: tuple = ()
    routing: object = None

    @property
    def simulations(self) -> int:
        return sum(1 + int(ideal) for *_, ideal in self.sets)

    def slowdown(self, key: str) -> float:
        g = self.groups.get(key)
        return 1.0 if g is None else g.slowdown


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


def _stream(key: str, geometry: tuple, order: tuple) -> tuple[Stream, int, int, bool] | None:
    """The stream of ``key``'s collective over all its groups: (stream, groups, ranks, leaves);
    None for groups of one rank (e.g. a hybrid shard group of one GPU per node)."""
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
    else:
        phases = _ring(op, members, gpn, leaves, size)
    return Stream(name=key, phases=tuple(phases)), count, ranks, leaves


def _ideal(topology, links: FabricLinks):
    """The same servers with every NIC on one non-blocking switch (the analytic model's world)."""
    b = TopologyBuilder()
    servers = add_servers(b, topology.nodes, topology.gpus_per_node, links)
    if topology.nodes > 1:
        switch = b.vertex("crossbar", 2)  # VertexKind.SWITCH
        for gpus in servers:
            for g in gpus:
                b.link(g, switch, links.nic_bandwidth, 0.0, "gpu->leaf", "leaf->gpu")
    return b.build(kind="crossbar", params={"nodes": topology.nodes}, gpus_per_node=topology.gpus_per_node)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What :meth:`FlowNetwork.build` reads of a cluster when the links are given."""

    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def node(self):
        return self


@lru_cache(maxsize=8)
def _fabrics(fabric: FlowNetwork, links: FabricLinks, nodes: int, gpus_per_node: int):
    """(the fabric, the ideal fabric) of ``nodes`` servers, links without latency."""
    real = fabric.build(_Shape(nodes, gpus_per_node), links=links)
    return real, _ideal(real, links)


def _link_table(topology, traffic, routing, result) -> list[tuple[tuple[dict, ...], dict | None]]:
    """Per stream: per link tier, the links its flows use, how many of them other streams use
    too, and the most flows one of them carried at once; and its busiest link."""
    router = Router(topology)
    used = []
    for stream in traffic.streams:
        ids = [router.route(p.src, p.dst, p.key, routing).link for p in stream.phases if p.flows]
        used.append(np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.int64))
    counts = np.zeros(topology.links, dtype=np.int64)
    for u in used:
        counts[u] += 1
    tiers = np.asarray(topology.tiers)
    util = result.link_utilization
    out = []
    for u in used:
        rows = []
        for t in np.unique(topology.link_tier[u]):
            on = u[topology.link_tier[u] == t]
            rows.append({"tier": str(tiers[t]), "links": int(on.size), "shared": int(np.sum(counts[on] > 1)),
                         "peak_flows": int(result.link_peak_flows[on].max())})
        hot = None
        if u.size:
            e = int(u[np.argmax(util[u])])
            hot = {"link": topology.link_name(e), "tier": str(tiers[topology.link_tier[e]]),
                   "utilization": float(util[e]), "peak_flows": int(result.link_peak_flows[e]),
                   "groups": int(counts[e])}
        out.append((tuple(rows), hot))
    return out


@lru_cache(maxsize=256)
def _set_flow(fabric: FlowNetwork, links: FabricLinks, nodes: int, gpus_per_node: int,
              group_set: tuple[str, ...], layout: tuple, order: tuple):
    """One concurrent set simulated on the fabric and, when it leaves a node, on the ideal one:
    (streams made, traffic, result, ideal stream times, whether the ideal one was simulated).
    ``layout`` is a geometry whose ZeRO, sequence-parallel and tied entries are 0 (the members
    of a group do not depend on them), so plans that differ only there share the simulation."""
    made = [m for m in (_stream(k, layout, order) for k in group_set) if m is not None]
    if not made:
        return None
    real, ideal = _fabrics(fabric, links, nodes, gpus_per_node)
    traffic = Traffic([m[0] for m in made])
    res = simulate(real, traffic, parse_routing(fabric.routing, seed=fabric.seed))
    leaves = any(m[3] for m in made)
    # NVLink only: the ideal fabric has the same servers, so the same times
    ref = simulate(ideal, traffic, parse_routing("ecmp")).stream_times if leaves else res.stream_times
    return made, traffic, res, ref, leaves


@lru_cache(maxsize=256)
def step_flow(fabric: FlowNetwork, links: FabricLinks, nodes: int, gpus_per_node: int,
              geometry: tuple, order: tuple) -> StepFlow:
    """Simulate every concurrent set of groups of one geometry (see the module docstring).

    ``geometry`` = (tp, cp, ep, dp, pp, ZeRO > 0, hybrid, sequence parallel, tied and pp > 1,
    GPUs per node)."""
    tp, cp, ep, dp, pp, _, hybrid, _, _, gpn = geometry
    layout = (tp, cp, ep, dp, pp, 0, hybrid, 0, 0, gpn)
    out, sets = {}, []
    for group_set in concurrent_sets(used_groups(geometry)):
        done = _set_flow(fabric, links, nodes, gpus_per_node, group_set, layout, order)
        if done is None:
            continue
        made, traffic, res, ref, ideal = done
        names = tuple(m[0].name for m in made)
        sets.append((names, traffic, res, ideal))
        for stream, count, ranks, leaves in made:
            key = stream.name
            if key in out:
                continue
            kind, op = GROUPS[key]
            out[key] = GroupFlow(key=key, kind=kind, op=op, groups=count, ranks=ranks, leaves_node=leaves,
                                 simulated_with=tuple(k for k in names if k != key),
                                 time=float(res.stream_times[key]), ideal=float(ref[key]))
    return StepFlow(groups=out, sets=tuple(sets), routing=parse_routing(fabric.routing, seed=fabric.seed))


@lru_cache(maxsize=256)
def step_links(flow: StepFlow) -> dict[str, tuple[tuple[dict, ...], dict | None]]:
    """Per group key: the link table of its own concurrent set (:func:`_link_table`); cached
    (a StepFlow hashes by identity)."""
    out = {}
    for group_set, traffic, res, _ in flow.sets:
        for key, row in zip(group_set, _link_table(res.topology, traffic, flow.routing, res)):
            out.setdefault(key, row)
    return out


def _geometries(terms, b, gpus_per_node: int):
    """Per plan the geometry tuple of :func:`step_flow`; (unique geometries, index per plan)."""
    t = terms
    hybrid = np.asarray(b.shard_node & (b.zero >= 1), dtype=int)
    tied = np.asarray((b.pp >= 2) & bool(t.tied) & bool(t.has_shape), dtype=int)
    gpn = np.full(len(b), gpus_per_node)
    sharded = np.minimum(b.zero, 1)  # ZeRO 1, 2 and 3 shard over the same groups
    cols = [b.tp, b.cp, b.ep, b.dp, b.pp, sharded, hybrid, np.asarray(b.sequence_parallel, dtype=int), tied, gpn]
    table = np.stack([np.asarray(c, dtype=np.int64).reshape(-1) for c in cols], axis=1)
    unique, inverse = np.unique(table, axis=0, return_inverse=True)
    return [tuple(int(x) for x in row) for row in unique], inverse.reshape(-1)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SimulatedNetwork:
    """The flow backend: analytic lines slowed by what the fabric simulation shows."""

    fabric: FlowNetwork
    cluster: object

    def _key(self):
        node = self.cluster.node
        links = FabricLinks.from_node(node, nic_latency=0.0, nvlink_latency=0.0, switch_latency=0.0)
        return links, self.cluster.nodes, node.gpus_per_node

    def flows(self, ctx, b) -> tuple[list[StepFlow], np.ndarray]:
        """The simulation of each distinct geometry of ``b`` and each plan's index into them
        (every geometry is simulated: the planner sweeps analytically and re-estimates its
        best plans with this network, :func:`willitscale.plan.search.search`)."""
        return self._flows(ctx.terms, b, tuple(ctx.scenario.options.rank_order))

    def plan_flow(self, scenario) -> StepFlow | None:
        """The simulation of ``scenario``'s own plan (cached like the engine's)."""
        from willitscale.scenario.batch import PlanBatch
        from willitscale.workload.stages import model_terms

        flows, inverse = self._flows(model_terms(scenario), PlanBatch.from_plans([scenario.plan]),
                                     tuple(scenario.options.rank_order))
        return flows[int(inverse[0])]

    def _flows(self, terms, b, order):
        key = self._key()
        unique, inverse = _geometries(terms, b, key[2])
        return [step_flow(self.fabric, *key, g, order) for g in unique], inverse

    def lines(self, ctx, batch, places: dict) -> dict:
        lines = analytic_lines(ctx, batch, places)
        flows, inverse = self.flows(ctx, batch)
        for key in lines:
            factor = np.array([f.slowdown(key) for f in flows])[inverse]
            lines[key] = with_contention(lines[key], factor)
        return lines

    def report(self, ctx, batch, places: dict) -> dict | None:
        flows, inverse = self.flows(ctx, batch)
        flow = flows[int(inverse[0])]
        links = step_links(flow)
        return {"backend": "flow", "fabric": self.describe(), "size_bytes": REFERENCE_SIZE,
                "simulations": flow.simulations,
                "groups": [g.to_json(links.get(k, ((), None))) for k, g in flow.groups.items()]}

    def describe(self) -> str:
        return self.fabric.describe()

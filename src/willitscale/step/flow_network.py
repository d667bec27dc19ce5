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

What is simulated, and which groups run together (:mod:`willitscale.step.group_traffic`; the
stated approximation of a 1F1B step is in docs/fabric.md, "willitscale estimate --network
flow"): every group of one kind runs its collective at the same moment (as the analytic model's
NIC share assumes); TP, CP and EP collectives and the steady-state pipeline sends each run
alone; the gradient collectives run with the pipeline sends (the buckets are reduced while the
pipeline drains); ZeRO's weight all-gathers run together. Each group moves the same bytes in
NCCL's ring (and, for an all-reduce that leaves its node, once more as NCCL's trees, which the
Tree/NVLSTree candidates take), direct flows or one flow per pair; links carry no latency, so
the ratio is that of the bytes terms.

Results are cached per (fabric, cluster, geometry) and per concurrent set: the estimate's
what-ifs re-run the engine without simulating again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from willitscale.collectives.line_time import with_contention
from willitscale.collectives.phases import Traffic
from willitscale.fabric.backend import FlowNetwork
from willitscale.fabric.simulator import simulate
from willitscale.step.group_traffic import (
    REFERENCE_SIZE,
    concurrent_sets,
    group_stream,
    tree_keys,
    used_groups,
)
from willitscale.step.network import GROUPS, AnalyticNetwork, Network, analytic_lines
from willitscale.topology.clos import add_servers
from willitscale.topology.graph import TopologyBuilder, VertexKind
from willitscale.topology.links import FabricLinks
from willitscale.topology.routing import Router, parse_routing

__all__ = ["GroupFlow", "StepFlow", "SimulatedNetwork", "network_for", "step_flow", "step_links"]



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
    tree_time: float | None = None  #: an all-reduce leaving its node: ... as NCCL's trees
    tree_ideal: float | None = None

    @property
    def slowdown(self) -> float:
        """The rings' (or the group's only pattern's) slowdown, floored at 1."""
        return max(1.0, self.time / self.ideal) if self.ideal > 0 else 1.0

    @property
    def tree_slowdown(self) -> float:
        """The trees' slowdown (the rings' when no tree was simulated), floored at 1."""
        if self.tree_time is None or not self.tree_ideal:
            return self.slowdown
        return max(1.0, self.tree_time / self.tree_ideal)

    def to_json(self, links=((), None)) -> dict:
        rows, hottest = links
        return {"group": self.key, "parallelism": self.kind, "op": self.op, "groups": self.groups,
                "ranks": self.ranks, "leaves_node": self.leaves_node,
                "simulated_with": list(self.simulated_with), "size_bytes": REFERENCE_SIZE,
                "simulated_s": self.time, "ideal_s": self.ideal, "slowdown": self.slowdown,
                **({"tree_simulated_s": self.tree_time, "tree_ideal_s": self.tree_ideal,
                    "tree_slowdown": self.tree_slowdown} if self.tree_time is not None else {}),
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

    @property
    def fidelity(self) -> tuple[str, str]:
        """(``exact`` or ``coarse``, why) of the simulations (``simulate``'s ``auto``: coarse
        above 16,384 GPUs, docs/fabric.md "The model"); a coarse one is named first."""
        ran = {res.fidelity: res.fidelity_reason for _, _, res, _ in self.sets}
        for name in ("coarse", "exact"):
            if name in ran:
                return name, ran[name]
        return "exact", "nothing simulated"

    def slowdown(self, key: str, pattern: str = "ring") -> float:
        """``key``'s slowdown for a candidate of ``pattern`` (``ring`` or ``tree``)."""
        g = self.groups.get(key)
        if g is None:
            return 1.0
        return g.tree_slowdown if pattern == "tree" else g.slowdown


#: candidates (line columns) whose traffic is NCCL's double binary tree across nodes; the other
#: columns take the rings' slowdown (CollNet's in-switch reduction included, an approximation)
TREE_COLUMNS = ("Tree", "NVLSTree", "double_binary_tree", "binary_tree")


def column_patterns(algorithms: tuple[str, ...]) -> tuple[str, ...]:
    """``tree`` or ``ring`` for each column name of a :class:`CollectiveLines`."""
    return tuple("tree" if name.split("/")[0] in TREE_COLUMNS else "ring" for name in algorithms)


def _ideal(topology, links: FabricLinks):
    """The same servers with every NIC on one non-blocking switch (the analytic model's world)."""
    b = TopologyBuilder()
    servers = add_servers(b, topology.nodes, topology.gpus_per_node, links)
    if topology.nodes > 1:
        switch = b.vertex("crossbar", VertexKind.SWITCH)
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
              group_set: tuple[str, ...], layout: tuple, order: tuple, pattern: str = "ring"):
    """One concurrent set simulated on the fabric and, when it leaves a node, on the ideal one:
    (streams made, traffic, result, ideal stream times, whether the ideal one was simulated).
    ``layout`` is a geometry whose ZeRO, sequence-parallel and tied entries are 0 (the members
    of a group do not depend on them), so plans that differ only there share the simulation.
    ``pattern`` ``tree``: the set's all-reduces that leave their node run NCCL's trees."""
    made = [m for m in (group_stream(k, layout, order, pattern) for k in group_set) if m is not None]
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
    """Simulate every concurrent set of groups of one geometry (see the module docstring); a
    set with all-reduces that leave their node once more with them as NCCL's trees.

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
        trees = {}
        if tree_keys(made) and not any(k in out for k in tree_keys(made)):
            _, _, tres, tref, _ = _set_flow(fabric, links, nodes, gpus_per_node, group_set, layout,
                                            order, "tree")
            trees = {k: (float(tres.stream_times[k]), float(tref[k])) for k in tree_keys(made)}
            sets.append((names, None, tres, True))
        for stream, count, ranks, leaves in made:
            key = stream.name
            if key in out:
                continue
            kind, op = GROUPS[key]
            tree = trees.get(key, (None, None))
            out[key] = GroupFlow(key=key, kind=kind, op=op, groups=count, ranks=ranks, leaves_node=leaves,
                                 simulated_with=tuple(k for k in names if k != key),
                                 time=float(res.stream_times[key]), ideal=float(ref[key]),
                                 tree_time=tree[0], tree_ideal=tree[1])
    return StepFlow(groups=out, sets=tuple(sets), routing=parse_routing(fabric.routing, seed=fabric.seed))


@lru_cache(maxsize=256)
def step_links(flow: StepFlow) -> dict[str, tuple[tuple[dict, ...], dict | None]]:
    """Per group key: the link table of its own concurrent set (:func:`_link_table`); cached
    (a StepFlow hashes by identity)."""
    out = {}
    for group_set, traffic, res, _ in flow.sets:
        if traffic is None:  # the trees' variant of a set: its links are reported with the rings'
            continue
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
            patterns = column_patterns(lines[key].algorithms)
            factor = np.array([[f.slowdown(key, p) for p in patterns] for f in flows])[inverse]
            lines[key] = with_contention(lines[key], factor)
        return lines

    def report(self, ctx, batch, places: dict) -> dict | None:
        flows, inverse = self.flows(ctx, batch)
        flow = flows[int(inverse[0])]
        links = step_links(flow)
        return {"backend": "flow", "fabric": self.describe(), "size_bytes": REFERENCE_SIZE,
                "simulations": flow.simulations,
                "fidelity": flow.fidelity[0], "fidelity_reason": flow.fidelity[1],
                "groups": [g.to_json(links.get(k, ((), None))) for k, g in flow.groups.items()]}

    def describe(self) -> str:
        return self.fabric.describe()


def network_for(scenario) -> Network:
    """The backend of ``scenario``: flow-simulated with ``--network flow`` (unless a measured
    all-reduce time replaces the network, or the cluster is one GPU), analytic otherwise."""
    fabric = scenario.network
    if fabric is None or scenario.measured.allreduce_time is not None or scenario.cluster.gpus < 2:
        return AnalyticNetwork()
    return SimulatedNetwork(fabric=fabric, cluster=scenario.cluster)

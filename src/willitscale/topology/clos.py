"""Switched fabrics: an NVSwitch node, rail-optimized leaf-spine, rail-only, k-ary fat-trees.

Every GPU has its own NIC port (one per GPU, as in DGX/HGX H100) wired to a switch; the GPUs of
a server share one NVSwitch crossbar. Names: ``gpu<node>.<local>``, ``nvs<node>``,
``leaf<rail>.<j>``, ``spine<s>``, ``edge<pod>.<j>``, ``agg<pod>.<j>``, ``core<j>``.
"""

from __future__ import annotations

import math

from willitscale.errors import ConfigError
from willitscale.topology.graph import Topology, TopologyBuilder, VertexKind
from willitscale.topology.links import DEFAULT_LINKS, FabricLinks
from willitscale.topology.sizing import leaf_ports, uplinks

__all__ = ["nvswitch_node", "rail_optimized", "rail_only", "fat_tree", "add_servers"]


def _int(field: str, value, lo: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or value < lo:
        raise ConfigError(field, value, f"an integer >= {lo}")
    return int(value)


def add_servers(b: TopologyBuilder, nodes: int, gpus_per_node: int, links: FabricLinks) -> list[list[int]]:
    """``nodes`` servers of ``gpus_per_node`` GPUs on an NVSwitch; returns GPU vertices per node."""
    out = []
    for n in range(nodes):
        gpus = [b.gpu(f"gpu{n}.{r}", n, r) for r in range(gpus_per_node)]
        if gpus_per_node > 1:
            nvs = b.vertex(f"nvs{n}", VertexKind.NVSWITCH)
            for g in gpus:
                b.link(g, nvs, links.nvlink_bandwidth, links.nvlink_latency / 2,
                       "gpu->nvswitch", "nvswitch->gpu")
        out.append(gpus)
    return out


def _attach(b: TopologyBuilder, gpu: int, switch: int, links: FabricLinks, name: str) -> None:
    b.link(gpu, switch, links.nic_bandwidth, links.nic_latency / 2, f"gpu->{name}", f"{name}->gpu")


def _uplink(b: TopologyBuilder, lower: int, upper: int, links: FabricLinks, lo: str, hi: str) -> None:
    b.link(lower, upper, links.switch_bandwidth, links.switch_latency, f"{lo}->{hi}", f"{hi}->{lo}")


def nvswitch_node(*, gpus_per_node: int = 8, links: FabricLinks = DEFAULT_LINKS) -> Topology:
    """One server: ``gpus_per_node`` GPUs on one NVSwitch crossbar, no network."""
    g = _int("gpus_per_node", gpus_per_node, 2)
    b = TopologyBuilder()
    add_servers(b, 1, g, links)
    return b.build(kind="nvswitch", params={"nodes": 1, "gpus_per_node": g}, gpus_per_node=g,
                   assumptions=links.assumptions()[1:2])


def rail_optimized(*, nodes: int, gpus_per_node: int = 8, radix: int = 128,
                   oversubscription: float = 1.0, spines: int | None = None,
                   links: FabricLinks = DEFAULT_LINKS) -> Topology:
    """Two-tier rail-optimized leaf-spine: GPU ``r`` of every server goes to a rail-``r`` leaf.

    ``oversubscription`` is the leaf's downlink : uplink *capacity* (GPU ports x NIC speed :
    uplinks x switch-link speed), the convention of :mod:`~willitscale.topology.sizing`. Each
    rail has ``ceil(nodes / down)`` leaves, where ``down`` (servers per leaf) is the most a
    ``radix``-port switch allows together with the ``up`` uplinks that ratio takes. Every leaf's
    ``up`` uplinks are spread over ``spines`` spines (default ``up``: one link to each spine;
    fewer spines means parallel links). Cross-rail and cross-leaf traffic goes through a spine.
    """
    nodes, g, radix = _int("nodes", nodes), _int("gpus_per_node", gpus_per_node), _int("radix", radix, 2)
    if not oversubscription >= 1:
        raise ConfigError("oversubscription", oversubscription, "a ratio >= 1 (downlink:uplink capacity at the leaf)")
    speedup = links.switch_bandwidth / links.nic_bandwidth
    d_max = leaf_ports(radix, oversubscription, speedup)[0]
    per_rail = math.ceil(nodes / d_max)
    down = math.ceil(nodes / per_rail)
    up = uplinks(down, oversubscription, speedup)
    n_spines = up if spines is None else _int("spines", spines)
    if up % n_spines:
        raise ConfigError("spines", spines, f"a divisor of the {up} uplinks per leaf")
    parallel = up // n_spines
    leaves = per_rail * g
    if leaves * parallel > radix and leaves > 1:
        raise ConfigError(
            f"rail-optimized: {leaves} leaves x {parallel} link(s) need {leaves * parallel}-port spines "
            f"but the radix is {radix}; a two-tier fabric of radix {radix} holds at most "
            f"{(radix // g) * d_max * g if radix >= g else 0} GPUs at {oversubscription:g}:1 "
            "(use a fat-tree with 3 tiers)")
    b = TopologyBuilder()
    servers = add_servers(b, nodes, g, links)
    leaf = [[b.vertex(f"leaf{r}.{j}", VertexKind.SWITCH) for j in range(per_rail)] for r in range(g)]
    for n, gpus in enumerate(servers):
        for r, gpu in enumerate(gpus):
            _attach(b, gpu, leaf[r][n // down], links, "leaf")
    if leaves > 1:
        spine = [b.vertex(f"spine{s}", VertexKind.SWITCH) for s in range(n_spines)]
        for r in range(g):
            for lf in leaf[r]:
                for s in spine:
                    for _ in range(parallel):
                        _uplink(b, lf, s, links, "leaf", "spine")
    params = {"nodes": nodes, "gpus_per_node": g, "radix": radix, "oversubscription": oversubscription,
              "leaves_per_rail": per_rail, "nodes_per_leaf": down, "uplinks_per_leaf": up if leaves > 1 else 0,
              "spines": n_spines if leaves > 1 else 0, "links_per_leaf_spine_pair": parallel if leaves > 1 else 0}
    if leaves > 1:  # one leaf alone has no uplinks to oversubscribe
        params["effective_oversubscription"] = down * links.nic_bandwidth / (up * links.switch_bandwidth)
    return b.build(kind="rail-optimized", params=params, gpus_per_node=g, assumptions=links.assumptions())


def rail_only(*, nodes: int, gpus_per_node: int = 8, radix: int = 128,
              links: FabricLinks = DEFAULT_LINKS) -> Topology:
    """One rail switch per rail, no spine: GPU ``r`` of every server on rail switch ``r``.

    Cross-rail traffic between servers must first move over NVLink to the GPU on the
    destination's rail (NCCL PXN), so routing on this fabric is always rail-aware. Holds at most
    ``radix`` servers (``radix x gpus_per_node`` GPUs: 1,024 from 128-port switches and 8-GPU
    servers, the article's figure).
    """
    nodes, g, radix = _int("nodes", nodes), _int("gpus_per_node", gpus_per_node), _int("radix", radix, 2)
    if nodes > radix:
        raise ConfigError(f"rail-only: {nodes} servers need {nodes}-port rail switches but the radix is "
                          f"{radix}; rail-only tops out at radix x gpus_per_node = {radix * g} GPUs")
    b = TopologyBuilder()
    servers = add_servers(b, nodes, g, links)
    rails = [b.vertex(f"rail{r}", VertexKind.SWITCH) for r in range(g)]
    for gpus in servers:
        for r, gpu in enumerate(gpus):
            _attach(b, gpu, rails[r], links, "rail")
    params = {"nodes": nodes, "gpus_per_node": g, "radix": radix, "rail_switches": g}
    return b.build(kind="rail-only", params=params, gpus_per_node=g, requires_pxn=True,
                   assumptions=links.assumptions()[:2])


def fat_tree(*, k: int, tiers: int = 2, gpus_per_node: int = 8, nodes: int | None = None,
             oversubscription: float = 1.0, top_oversubscription: float = 1.0,
             links: FabricLinks = DEFAULT_LINKS) -> Topology:
    """A k-ary fat-tree of ``k``-port switches, GPUs filling host ports in order.

    Ratios as :mod:`~willitscale.topology.sizing` defines them (downlink : uplink capacity, a
    tapered tier spending its freed ports on more hosts or switches below): ``oversubscription``
    at the leaf (edge), ``top_oversubscription`` at the aggregation tier (three tiers only).

    Two tiers: ``k`` leaves of ``down`` host ports and ``up`` uplinks, one to each of ``up``
    spines: ``k x down`` hosts (``k^2/2`` non-blocking). Three tiers: ``k`` pods, each of ``E``
    edges (the aggregation switch's down ports) and ``u1`` aggregation switches (an edge's
    uplinks), every edge wired to every aggregation switch of its pod; aggregation switch ``j``
    of every pod goes to the ``u2`` cores of plane ``j``: ``k x E x down`` hosts. Non-blocking
    that is Al-Fares et al. (SIGCOMM 2008): ``k/2`` edges and aggregation switches per pod,
    ``(k/2)^2`` cores, ``k^3/4`` hosts.
    """
    k, g = _int("k", k, 2), _int("gpus_per_node", gpus_per_node)
    if k % 2:
        raise ConfigError("k", k, "an even switch radix")
    if tiers not in (2, 3):
        raise ConfigError("tiers", tiers, "2 or 3")
    for name, ratio in (("oversubscription", oversubscription), ("top_oversubscription", top_oversubscription)):
        if not ratio >= 1:
            raise ConfigError(name, ratio, "a ratio >= 1 (downlink:uplink capacity)")
    if tiers == 2 and top_oversubscription != 1:
        raise ConfigError("top_oversubscription", top_oversubscription,
                          "1 for a two-tier fat-tree (it applies at the aggregation tier of three tiers)")
    speedup = links.switch_bandwidth / links.nic_bandwidth
    down, up = leaf_ports(k, oversubscription, speedup)
    edges, agg_up = (k, 0) if tiers == 2 else leaf_ports(k, top_oversubscription)
    hosts = k * down if tiers == 2 else k * edges * down
    nodes = hosts // g if nodes is None else _int("nodes", nodes)
    if nodes * g > hosts or nodes < 1:
        raise ConfigError("nodes", nodes, f"at most {hosts // g} servers of {g} GPUs ({hosts} host ports "
                          f"in a {tiers}-tier fat-tree of radix {k})")
    b = TopologyBuilder()
    servers = add_servers(b, nodes, g, links)
    flat = [v for gpus in servers for v in gpus]
    leaf_ratio = down * links.nic_bandwidth / (up * links.switch_bandwidth)
    if tiers == 2:
        leaves = [b.vertex(f"leaf{j}", VertexKind.SWITCH) for j in range(k)]
        spines = [b.vertex(f"spine{s}", VertexKind.SWITCH) for s in range(up)]
        for h, gpu in enumerate(flat):
            _attach(b, gpu, leaves[h // down], links, "leaf")
        for lf in leaves:
            for s in spines:
                _uplink(b, lf, s, links, "leaf", "spine")
        params = {"k": k, "tiers": 2, "leaves": k, "spines": up, "host_ports": hosts,
                  "effective_oversubscription": leaf_ratio}
    else:
        edge = [[b.vertex(f"edge{p}.{j}", VertexKind.SWITCH) for j in range(edges)] for p in range(k)]
        aggs = [[b.vertex(f"agg{p}.{j}", VertexKind.SWITCH) for j in range(up)] for p in range(k)]
        cores = [[b.vertex(f"core{j}.{c}", VertexKind.SWITCH) for c in range(agg_up)] for j in range(up)]
        for h, gpu in enumerate(flat):
            _attach(b, gpu, edge[h // (edges * down)][(h // down) % edges], links, "edge")
        for p in range(k):
            for e in edge[p]:
                for a in aggs[p]:
                    _uplink(b, e, a, links, "edge", "agg")
            for j, a in enumerate(aggs[p]):
                for c in cores[j]:
                    _uplink(b, a, c, links, "agg", "core")
        params = {"k": k, "tiers": 3, "pods": k, "edges_per_pod": edges, "aggs_per_pod": up,
                  "cores": up * agg_up, "host_ports": hosts, "effective_oversubscription": leaf_ratio,
                  "effective_top_oversubscription": edges / agg_up, "top_oversubscription": top_oversubscription}
    params.update(nodes=nodes, gpus_per_node=g, oversubscription=oversubscription)
    return b.build(kind="fat-tree", params=params, gpus_per_node=g, assumptions=links.assumptions())

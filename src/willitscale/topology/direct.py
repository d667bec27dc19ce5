"""Direct networks: dragonfly and 2D/3D torus. Routers host servers; routers are wired to routers.

Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008): ``groups`` groups of ``routers_per_group``
routers, all-to-all inside a group (local links); each router has ``global_links`` links to
other groups, spread so that every pair of groups is joined (needs
``routers_per_group x global_links >= groups - 1``). Minimal routes are local-global-local.

Torus: one router per position of a ``d1 x d2 [x d3]`` grid with wrap-around links in every
dimension (a dimension of size 2 has one link, not two), each router hosting one server.
"""

from __future__ import annotations

import itertools

import numpy as np

from willitscale.errors import ConfigError
from willitscale.topology.clos import _attach, _int, add_servers
from willitscale.topology.graph import Topology, TopologyBuilder, VertexKind
from willitscale.topology.links import DEFAULT_LINKS, FabricLinks

__all__ = ["dragonfly", "torus"]


def dragonfly(*, groups: int, routers_per_group: int, global_links: int, nodes_per_router: int = 1,
              gpus_per_node: int = 8, links: FabricLinks = DEFAULT_LINKS) -> Topology:
    """A dragonfly; global links get ``links.switch_bandwidth``, local links too.

    ``params`` report each router's ports (``router_ports`` = GPU ports + local + global) and
    ``global_oversubscription``: a router's GPU-port capacity over its global-link capacity
    (downlink : uplink, as :mod:`~willitscale.topology.sizing` defines it). Kim et al.'s
    balanced dragonfly has ``a = 2p = 2h`` with ``p`` the endpoints per router: here
    ``nodes_per_router x gpus_per_node`` GPU ports, so ``global_oversubscription = 1`` and
    ``routers_per_group = 2 x global_links``. When a group has more global ports than peer
    groups, the extra cables go round the pairs again, so some pairs of groups get one cable more
    than others (``cables_per_group_pair_min`` / ``_max``): traffic between the pairs with fewer
    cables is what a uniform pattern such as all_to_all waits for.
    """
    gr, a = _int("groups", groups, 2), _int("routers_per_group", routers_per_group)
    h, p, g = _int("global_links", global_links), _int("nodes_per_router", nodes_per_router), \
        _int("gpus_per_node", gpus_per_node)
    if a * h < gr - 1:
        raise ConfigError(f"dragonfly: {gr} groups need at least {gr - 1} global links per group but "
                          f"{a} routers x {h} global links = {a * h}")
    b = TopologyBuilder()
    servers = add_servers(b, gr * a * p, g, links)
    routers = [[b.vertex(f"router{i}.{j}", VertexKind.SWITCH) for j in range(a)] for i in range(gr)]
    for n, gpus in enumerate(servers):
        i, j = divmod(n // p, a)
        for gpu in gpus:
            _attach(b, gpu, routers[i][j], links, "router")
    for grp in routers:
        for x, y in itertools.combinations(grp, 2):
            b.link(x, y, links.switch_bandwidth, links.switch_latency, "local", "local")
    used = [0] * gr  # next free global port per group; port q sits on router q // h
    pairs = list(itertools.combinations(range(gr), 2))
    cables = dict.fromkeys(pairs, 0)
    while True:
        progressed = False
        for i, j in pairs:
            if used[i] < a * h and used[j] < a * h:
                ri, rj = routers[i][used[i] // h], routers[j][used[j] // h]
                b.link(ri, rj, links.switch_bandwidth, links.switch_latency, "global", "global")
                used[i] += 1
                used[j] += 1
                cables[i, j] += 1
                progressed = True
        if not progressed:
            break
    params = {"groups": gr, "routers_per_group": a, "global_links": h, "nodes_per_router": p,
              "gpus_per_node": g, "nodes": gr * a * p,
              "router_ports": p * g + (a - 1) + h, "gpu_ports_per_router": p * g,
              "cables_per_group_pair_min": min(cables.values()), "cables_per_group_pair_max": max(cables.values()),
              "global_oversubscription": p * g * links.nic_bandwidth / (h * links.switch_bandwidth)}
    return b.build(kind="dragonfly", params=params, gpus_per_node=g, assumptions=links.assumptions())


def torus(*, dims: tuple[int, ...], gpus_per_node: int = 1, links: FabricLinks = DEFAULT_LINKS) -> Topology:
    """A 2D or 3D torus of routers (one server each); router links get ``links.switch_bandwidth``."""
    dims = tuple(_int("dims", d, 2) for d in dims)
    if len(dims) not in (2, 3):
        raise ConfigError("dims", "x".join(map(str, dims)), "two or three sizes, such as 4x4 or 4x4x4")
    g = _int("gpus_per_node", gpus_per_node)
    coords = list(itertools.product(*(range(d) for d in dims)))
    index = {c: i for i, c in enumerate(coords)}
    b = TopologyBuilder()
    servers = add_servers(b, len(coords), g, links)
    routers = [b.vertex("router" + ".".join(map(str, c)), VertexKind.SWITCH) for c in coords]
    for n, gpus in enumerate(servers):
        for gpu in gpus:
            _attach(b, gpu, routers[n], links, "router")
    for c in coords:
        for axis, size in enumerate(dims):
            nxt = list(c)
            nxt[axis] = (c[axis] + 1) % size
            if size == 2 and c[axis] == 1:
                continue  # a ring of two has one cable
            b.link(routers[index[c]], routers[index[tuple(nxt)]], links.switch_bandwidth,
                   links.switch_latency, f"dim{axis}", f"dim{axis}")
    params = {"dims": "x".join(map(str, dims)), "nodes": len(coords), "gpus_per_node": g,
              "diameter_hops": int(np.sum(np.asarray(dims) // 2))}
    return b.build(kind="torus", params=params, gpus_per_node=g, assumptions=links.assumptions())

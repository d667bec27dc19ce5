"""Export a routed traffic scenario as plain data for another simulator (the SimGrid cross-check).

The scenario lists each directed link (bandwidth bytes/s, latency s), each flow's route (one
path: SimGrid routes per host pair, so only single-path routing - ECMP, adaptive, PXN - can be
exported, and each GPU pair must keep one route) and the phases (flow indices, sizes, repeats).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from willitscale.collectives.phases import Traffic
from willitscale.errors import ConfigError
from willitscale.topology.graph import Topology
from willitscale.topology.routing import Router, Routing

__all__ = ["scenario"]


def scenario(topology: Topology, traffic: Traffic, routing: Routing) -> dict[str, Any]:
    """One stream's phases with single-path routes, as JSON-ready data."""
    if len(traffic.streams) != 1:
        raise ConfigError("export: one stream only (SimGrid runs the phases of one stream in order)")
    router = Router(topology)
    pair_route: dict[tuple[int, int], list[int]] = {}
    phases = []
    for p in traffic.streams[0].phases:
        if p.latency_hops != 1 or p.extra_latency:
            raise ConfigError("export: phases with pipelined latency (trees, chains) have no SimGrid equivalent")
        r = router.route(p.src, p.dst, p.key, routing)
        if not np.all(r.frac == 1):
            raise ConfigError("export: sprayed flows have no single route; use ecmp, adaptive or rail")
        for f in range(p.flows):
            links = r.link[r.flow == f].tolist()
            pair = (int(p.src[f]), int(p.dst[f]))
            if pair_route.setdefault(pair, links) != links:
                raise ConfigError(f"export: GPU pair {pair} takes two routes (one channel per pair only)")
        phases.append({"src": p.src.tolist(), "dst": p.dst.tolist(), "size": p.size.tolist(),
                       "repeat": p.repeat})
    return {
        "hosts": topology.gpus,
        "links": [{"bandwidth": float(b), "latency": float(l)}
                  for b, l in zip(topology.link_capacity, topology.link_latency)],
        "routes": [{"src": s, "dst": d, "links": links} for (s, d), links in pair_route.items()],
        "phases": phases,
    }

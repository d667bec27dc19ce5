"""Fabric topologies as data: builders, sizing arithmetic and routing.

>>> from willitscale.topology import build_topology
>>> topo = build_topology("rail-optimized", nodes=16, gpus_per_node=8)
>>> topo.gpus
128
"""

from __future__ import annotations

from typing import Any

from willitscale.errors import UnknownNameError
from willitscale.topology.clos import fat_tree, nvswitch_node, rail_only, rail_optimized
from willitscale.topology.direct import dragonfly, torus
from willitscale.topology.graph import Topology, TopologyBuilder, VertexKind
from willitscale.topology.links import DEFAULT_LINKS, FabricLinks
from willitscale.topology.routing import Balance, Router, Routes, Routing, parse_routing
from willitscale.topology.sizing import ClusterSize, max_cluster, max_clusters

__all__ = [
    "Topology", "TopologyBuilder", "VertexKind", "FabricLinks", "DEFAULT_LINKS",
    "nvswitch_node", "rail_optimized", "rail_only", "fat_tree", "dragonfly", "torus",
    "TOPOLOGY_KINDS", "build_topology",
    "Balance", "Routing", "Router", "Routes", "parse_routing",
    "ClusterSize", "max_cluster", "max_clusters",
]

#: builder per ``--topology`` name
TOPOLOGY_KINDS = {
    "nvswitch": nvswitch_node,
    "rail-optimized": rail_optimized,
    "rail-only": rail_only,
    "fat-tree": fat_tree,
    "dragonfly": dragonfly,
    "torus": torus,
}


def build_topology(kind: str, **params: Any) -> Topology:
    """Build a topology by name (see :data:`TOPOLOGY_KINDS`) from keyword parameters."""
    key = str(kind).strip().lower().replace("_", "-")
    if key not in TOPOLOGY_KINDS:
        raise UnknownNameError("topology", kind, TOPOLOGY_KINDS)
    return TOPOLOGY_KINDS[key](**params)

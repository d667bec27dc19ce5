"""A fabric for a hardware-catalog :class:`~willitscale.hardware.model.Cluster`: the bridge the
estimate's ``--network flow`` backend uses."""

from __future__ import annotations

from typing import Any

from willitscale.topology import build_topology
from willitscale.topology.graph import Topology
from willitscale.topology.links import FabricLinks

__all__ = ["cluster_topology"]


def cluster_topology(cluster, kind: str = "rail-optimized", *, effective: bool = True,
                     **params: Any) -> Topology:
    """``cluster.nodes`` servers of ``cluster.node`` on a ``kind`` fabric (default rail-optimized,
    non-blocking, 128-port switches). Link speeds come from the node (NICs shared evenly by its
    GPUs, achievable rates unless ``effective=False``); ``params`` go to the builder
    (``oversubscription``, ``radix``, ``spines``, ...)."""
    links = params.pop("links", None) or FabricLinks.from_node(cluster.node, effective=effective)
    if kind in ("rail-optimized", "rail-only", "fat-tree"):
        params.setdefault("nodes", cluster.nodes)
    params.setdefault("gpus_per_node", cluster.node.gpus_per_node)
    return build_topology(kind, links=links, **params)

"""Hardware: GPUs, links, nodes, clusters, and the catalog they are loaded from."""

from willitscale.hardware.model import DTYPES, Cluster, Gpu, Link, LinkKind, Node

__all__ = ["DTYPES", "Cluster", "Gpu", "Link", "LinkKind", "Node"]

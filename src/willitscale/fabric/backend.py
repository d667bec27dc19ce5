"""The fabric of ``--network flow``: which fabric the cluster's servers sit on and how it routes.

:class:`FlowNetwork` builds the topology of a cluster (links from the node: NVLink per GPU, NICs
shared evenly, at achievable rates as the analytic model uses them; or the links given). The
estimate's flow backend (:mod:`willitscale.step.flow_network`) simulates every communication
group of a step on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.errors import ConfigError
from willitscale.fabric.cluster import cluster_topology
from willitscale.topology.routing import ROUTINGS
from willitscale.topology.sizing import leaf_ports
from willitscale.topology.spec import KIND_PARAMS

__all__ = ["FlowNetwork"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowNetwork:
    """A fabric kind, its leaf oversubscription (downlink:uplink capacity; rail-optimized and
    fat-tree) and the routing, for the flow backend."""

    topology: str = "rail-optimized"
    oversubscription: float = 1.0
    routing: str = "ecmp"
    seed: int = 0

    def __post_init__(self) -> None:
        kinds = ("rail-optimized", "rail-only", "fat-tree")
        if self.topology not in kinds:
            raise ConfigError("topology (with --network flow)", self.topology, "one of " + ", ".join(kinds))
        if self.oversubscription != 1.0 and "oversubscription" not in KIND_PARAMS[self.topology]:
            raise ConfigError(f"oversubscription does not apply to a {self.topology} fabric")
        if not self.oversubscription >= 1:
            raise ConfigError("oversubscription", self.oversubscription,
                              "a ratio >= 1 (downlink:uplink capacity at the leaf)")
        if self.routing not in ROUTINGS:
            raise ConfigError("routing", self.routing, "one of " + ", ".join(ROUTINGS))

    def build(self, cluster, *, links=None):
        """The :class:`~willitscale.topology.graph.Topology` of ``cluster`` on this fabric;
        ``links`` (:class:`~willitscale.topology.links.FabricLinks`) replace the node's."""

        params = {} if links is None else {"links": links}
        if self.topology == "fat-tree":
            k = 2
            while k * leaf_ports(k, self.oversubscription)[0] < cluster.gpus:
                k += 2  # the smallest two-tier k-ary fat-tree that holds it at this leaf ratio
            params.update(k=k, tiers=2, oversubscription=self.oversubscription)
        elif self.topology == "rail-optimized":
            params.update(oversubscription=self.oversubscription)
        return cluster_topology(cluster, self.topology, **params)

    def describe(self) -> str:
        over = f", {self.oversubscription:g}:1 at the leaf" if self.topology != "rail-only" else ""
        return f"flow simulation on a {self.topology} fabric{over}, {self.routing} routing (seed {self.seed})"

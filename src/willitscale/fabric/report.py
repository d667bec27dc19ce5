"""What a simulation shows: link utilisation (summary, histogram, hottest links) and the traffic
matrix (how many GPU pairs carry traffic at all, and whether they sit in one server, on one rail
or across rails).

Utilisation of a directed link = bytes it carried / (capacity x completion time): the average
over the run, not a peak. "Fabric links" are the links that touch a network switch (NIC links
and switch-to-switch links); NVLink is reported per tier but kept out of the fabric figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from willitscale.collectives.phases import Traffic
from willitscale.config import FrozenMap
from willitscale.fabric.simulator import SimulationResult
from willitscale.topology.graph import Topology, VertexKind

__all__ = ["fabric_links", "LinkReport", "link_report", "hottest_links", "TrafficMatrix", "traffic_matrix",
           "PLACEMENTS"]


def fabric_links(topology: Topology) -> np.ndarray:
    """Indices of the links touching a network switch (all links if there is no network)."""
    sw = topology.vertex_kind == VertexKind.SWITCH
    m = sw[topology.link_src] | sw[topology.link_dst]
    return np.flatnonzero(m) if m.any() else np.arange(topology.links)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkReport:
    """Utilisation over the fabric links, a histogram, per tier, and the hottest links."""

    max_utilization: float
    mean_utilization: float
    idle_share: float  #: fabric links that carried nothing
    histogram: tuple[tuple[float, float, int], ...]  #: (from, to, links)
    by_tier: tuple[dict, ...]
    hottest: tuple[dict, ...]

    def to_json(self) -> dict:
        return {
            "max_link_utilization": self.max_utilization,
            "mean_link_utilization": self.mean_utilization,
            "idle_link_share": self.idle_share,
            "utilization_histogram": [{"from": a, "to": b, "links": n} for a, b, n in self.histogram],
            "utilization_by_tier": list(self.by_tier),
            "hottest_links": list(self.hottest),
        }


def hottest_links(result: SimulationResult, n: int = 5) -> list[dict]:
    """The ``n`` most utilised fabric links with the most flows they carried at once."""
    topo, util = result.topology, result.link_utilization
    idx = fabric_links(topo)
    top = idx[np.argsort(-util[idx], kind="stable")[:n]]
    return [{"link": topo.link_name(int(e)), "tier": topo.tiers[topo.link_tier[e]],
             "utilization": float(util[e]), "peak_flows": int(result.link_peak_flows[e]),
             "bytes": float(result.link_bytes[e])} for e in top if util[e] > 0]


def link_report(result: SimulationResult, *, bins: int = 10, top: int = 5) -> LinkReport:
    topo, util = result.topology, result.link_utilization
    idx = fabric_links(topo)
    u = np.clip(util[idx], 0.0, 1.0)
    edges = np.linspace(0.0, 1.0, bins + 1)
    counts, _ = np.histogram(u, bins=edges)
    tiers = []
    for t, name in enumerate(topo.tiers):
        m = topo.link_tier == t
        if m.any():
            tiers.append({"tier": name, "links": int(m.sum()), "mean_utilization": float(util[m].mean()),
                          "max_utilization": float(util[m].max()),
                          "max_flows": int(result.link_peak_flows[m].max())})
    return LinkReport(
        max_utilization=float(u.max()) if u.size else 0.0,
        mean_utilization=float(u.mean()) if u.size else 0.0,
        idle_share=float(np.mean(result.link_bytes[idx] <= 0)) if idx.size else 0.0,
        histogram=tuple((round(float(a), 6), round(float(b), 6), int(c)) for a, b, c in zip(edges[:-1], edges[1:], counts)),
        by_tier=tuple(tiers),
        hottest=tuple(hottest_links(result, top)),
    )


#: where the two GPUs of a pair sit: one server (NVLink), two servers on one rail (the same
#: local GPU index: a rail leaf or rail switch joins them), two servers on different rails
#: (a spine, or an NVLink hop first with PXN)
PLACEMENTS = ("same_server", "same_rail", "cross_rail")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficMatrix:
    """How many (unordered) GPU pairs exchange any bytes, where those pairs sit, and how
    concentrated the bytes are."""

    gpus: int
    pairs: int  #: gpus x (gpus - 1) / 2
    pairs_with_traffic: int
    bytes_total: float
    top_pairs_byte_share: float  #: share of bytes carried by the busiest 1% of active pairs
    gpus_with_traffic: int = 0  #: GPUs that send or receive anything
    #: pairs with traffic per :data:`PLACEMENTS` (empty without a topology)
    pairs_by_placement: Mapping[str, int] = field(default_factory=dict)
    byte_share_by_placement: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("pairs_by_placement", "byte_share_by_placement"):
            object.__setattr__(self, name, FrozenMap(dict(getattr(self, name))))

    @property
    def idle_pair_share(self) -> float:
        return 1.0 - self.pairs_with_traffic / self.pairs if self.pairs else 0.0

    def to_json(self) -> dict:
        out = {"gpus": self.gpus, "gpu_pairs": self.pairs, "gpu_pairs_with_traffic": self.pairs_with_traffic,
               "idle_gpu_pair_share": self.idle_pair_share, "gpus_with_traffic": self.gpus_with_traffic,
               "bytes_total": self.bytes_total, "top_1pct_pairs_byte_share": self.top_pairs_byte_share}
        if self.pairs_by_placement:
            out["gpu_pairs_with_traffic_by_placement"] = dict(self.pairs_by_placement)
            out["byte_share_by_placement"] = dict(self.byte_share_by_placement)
        return out


def traffic_matrix(traffic: Traffic, topology: Topology | int) -> TrafficMatrix:
    """End-to-end GPU pairs of ``traffic`` (what each GPU sends to which, before routing) over
    all GPUs of ``topology``; given a :class:`Topology` (not just a GPU count) the pairs are
    also split by placement (:data:`PLACEMENTS`)."""
    gpus = topology.gpus if isinstance(topology, Topology) else int(topology)
    ids, vol = traffic.pair_bytes(gpus)
    a, b = ids // gpus, ids % gpus
    und = np.minimum(a, b) * gpus + np.maximum(a, b)
    uniq, inv = np.unique(und, return_inverse=True)
    per_pair = np.bincount(inv, weights=vol, minlength=uniq.size)
    active = per_pair > 0
    vals = np.sort(per_pair[active])[::-1]
    k = max(1, int(np.ceil(0.01 * vals.size))) if vals.size else 0
    total = float(vals.sum())
    used = np.unique(np.concatenate([a[vol > 0], b[vol > 0]])).size
    by_pairs: dict[str, int] = {}
    by_bytes: dict[str, float] = {}
    if isinstance(topology, Topology):
        x, y = (uniq // gpus)[active], (uniq % gpus)[active]
        where = np.where(topology.gpu_node[x] == topology.gpu_node[y], 0,
                         np.where(topology.gpu_local[x] == topology.gpu_local[y], 1, 2))
        counts = np.bincount(where, minlength=3)
        volume = np.bincount(where, weights=per_pair[active], minlength=3)
        by_pairs = {name: int(c) for name, c in zip(PLACEMENTS, counts)}
        by_bytes = {name: float(v / total) if total else 0.0 for name, v in zip(PLACEMENTS, volume)}
    return TrafficMatrix(gpus=gpus, pairs=gpus * (gpus - 1) // 2, pairs_with_traffic=int(active.sum()),
                         bytes_total=total, top_pairs_byte_share=float(vals[:k].sum() / total) if total else 0.0,
                         gpus_with_traffic=int(used), pairs_by_placement=by_pairs,
                         byte_share_by_placement=by_bytes)

"""A fabric topology as data: vertices, directed links and where each GPU sits.

Every physical link is full duplex and appears as **two directed links**, each with the
capacity of one direction (bytes/s) and a latency (s). Vertices are GPUs, NVSwitch crossbars
(one per node; a DGX H100's four NVSwitch chips behave as one non-blocking crossbar) and
network switches or routers. GPUs are end points: routes never pass *through* a GPU except
where rail-aware routing (NCCL PXN) says so explicitly.

The arrays are numpy (read-only) so the simulator can index them without copies.
:class:`TopologyBuilder` is the mutable accumulator the builders use; ``build()`` freezes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from willitscale.config import FrozenMap
from willitscale.errors import ConfigError

__all__ = ["VertexKind", "Topology", "TopologyBuilder"]


class VertexKind(IntEnum):
    GPU = 0
    NVSWITCH = 1
    SWITCH = 2  # a network switch or router (leaf, spine, core, dragonfly router, torus router)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """A built fabric. Links are directed; ``link_tier`` indexes ``tiers`` (e.g. "leaf->spine")."""

    kind: str  #: builder name, e.g. "rail-optimized"
    params: Mapping[str, Any]  #: the builder's inputs and derived sizes, for display
    vertex_names: tuple[str, ...]
    vertex_kind: np.ndarray  #: VertexKind per vertex
    link_src: np.ndarray  #: vertex index
    link_dst: np.ndarray
    link_capacity: np.ndarray  #: bytes/s, one direction
    link_latency: np.ndarray  #: seconds
    link_tier: np.ndarray  #: index into ``tiers``
    tiers: tuple[str, ...]
    gpu_vertex: np.ndarray  #: vertex index of GPU g
    gpu_node: np.ndarray  #: server index of GPU g
    gpu_local: np.ndarray  #: local rank of GPU g in its server (= its rail)
    gpus_per_node: int
    requires_pxn: bool = False  #: cross-rail traffic must move over NVLink first (rail-only)
    assumptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("vertex_kind", "link_src", "link_dst", "link_capacity", "link_latency",
                     "link_tier", "gpu_vertex", "gpu_node", "gpu_local"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "params", FrozenMap(dict(self.params)))
        if np.any(self.link_capacity <= 0):
            raise ConfigError("link capacity", float(self.link_capacity.min()), "a bandwidth > 0")
        if np.any(self.link_latency < 0):
            raise ConfigError("link latency", float(self.link_latency.min()), "a time >= 0")

    # -- sizes -------------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        return int(self.gpu_vertex.size)

    @property
    def nodes(self) -> int:
        return int(self.gpu_node.max()) + 1 if self.gpus else 0

    @property
    def links(self) -> int:
        """Directed links (twice the cables)."""
        return int(self.link_src.size)

    @property
    def vertices(self) -> int:
        return len(self.vertex_names)

    @property
    def switches(self) -> int:
        return int(np.count_nonzero(self.vertex_kind == VertexKind.SWITCH))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in list(self.params.items())[:6])
        more = f", +{len(self.params) - 6} more" if len(self.params) > 6 else ""
        return (f"Topology({self.kind!r}: {self.gpus} GPUs on {self.nodes} nodes, "
                f"{self.switches} switches, {self.links} directed links; {shown}{more})")

    def link_name(self, link: int) -> str:
        return f"{self.vertex_names[self.link_src[link]]}->{self.vertex_names[self.link_dst[link]]}"

    def gpu_index(self, node: int, local: int) -> int:
        return node * self.gpus_per_node + local

    # -- derived structure used by routing ----------------------------------------------
    def nic_links(self) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU: the link from it into the network and the link back (-1 if none)."""
        return self._gpu_links_to(VertexKind.SWITCH)

    def nvlink_links(self) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU: its link into the node's NVSwitch and back (-1 for single-GPU nodes)."""
        return self._gpu_links_to(VertexKind.NVSWITCH)

    def _gpu_links_to(self, kind: VertexKind) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU: its link to a vertex of ``kind`` and the link back (-1 if none)."""
        is_gpu = self.vertex_kind == VertexKind.GPU
        is_kind = self.vertex_kind == kind
        up = np.full(self.vertices, -1, dtype=np.int64)
        down = np.full(self.vertices, -1, dtype=np.int64)
        ids = np.arange(self.links)
        m_up = is_gpu[self.link_src] & is_kind[self.link_dst]
        m_down = is_kind[self.link_src] & is_gpu[self.link_dst]
        up[self.link_src[m_up]] = ids[m_up]
        down[self.link_dst[m_down]] = ids[m_down]
        return up[self.gpu_vertex], down[self.gpu_vertex]

    def tier_summary(self) -> list[dict[str, Any]]:
        """One row per tier: directed link count, capacity and latency (min/max if they differ)."""
        rows = []
        for t, name in enumerate(self.tiers):
            m = self.link_tier == t
            if not m.any():
                continue
            cap, lat = self.link_capacity[m], self.link_latency[m]
            rows.append({
                "tier": name,
                "links": int(m.sum()),
                "capacity_GBps": float(cap.min()) / 1e9,
                "capacity_max_GBps": float(cap.max()) / 1e9,
                "latency_us": float(lat.min()) * 1e6,
                "total_capacity_TBps": float(cap.sum()) / 1e12,
            })
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": dict(self.params),
            "gpus": self.gpus,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "switches": self.switches,
            "directed_links": self.links,
            "tiers": self.tier_summary(),
            "assumptions": list(self.assumptions),
        }

    def to_networkx(self):
        """A ``networkx.MultiDiGraph`` of this fabric (for plotting or ad-hoc analysis)."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for v, (name, kind) in enumerate(zip(self.vertex_names, self.vertex_kind)):
            g.add_node(v, name=name, kind=VertexKind(int(kind)).name.lower())
        for e in range(self.links):
            g.add_edge(int(self.link_src[e]), int(self.link_dst[e]), key=e,
                       capacity=float(self.link_capacity[e]), latency=float(self.link_latency[e]),
                       tier=self.tiers[self.link_tier[e]])
        return g


@dataclass(slots=True)
class TopologyBuilder:
    """Accumulates vertices and duplex links; :meth:`build` returns the frozen :class:`Topology`."""

    names: list[str] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    cap: list[float] = field(default_factory=list)
    lat: list[float] = field(default_factory=list)
    tier: list[int] = field(default_factory=list)
    tiers: list[str] = field(default_factory=list)
    gpu_vertex: list[int] = field(default_factory=list)
    gpu_node: list[int] = field(default_factory=list)
    gpu_local: list[int] = field(default_factory=list)

    def vertex(self, name: str, kind: VertexKind) -> int:
        self.names.append(name)
        self.kinds.append(int(kind))
        return len(self.names) - 1

    def gpu(self, name: str, node: int, local: int) -> int:
        v = self.vertex(name, VertexKind.GPU)
        self.gpu_vertex.append(v)
        self.gpu_node.append(node)
        self.gpu_local.append(local)
        return v

    def _tier(self, name: str) -> int:
        if name not in self.tiers:
            self.tiers.append(name)
        return self.tiers.index(name)

    def link(self, a: int, b: int, capacity: float, latency: float, tier_ab: str, tier_ba: str) -> None:
        """A full-duplex cable: two directed links of ``capacity`` bytes/s each."""
        for s, d, t in ((a, b, tier_ab), (b, a, tier_ba)):
            self.src.append(s)
            self.dst.append(d)
            self.cap.append(capacity)
            self.lat.append(latency)
            self.tier.append(self._tier(t))

    def build(self, *, kind: str, params: Mapping[str, Any], gpus_per_node: int,
              requires_pxn: bool = False, assumptions: tuple[str, ...] = ()) -> Topology:
        return Topology(
            kind=kind,
            params=params,
            vertex_names=tuple(self.names),
            vertex_kind=np.asarray(self.kinds, dtype=np.int8),
            link_src=np.asarray(self.src, dtype=np.int64),
            link_dst=np.asarray(self.dst, dtype=np.int64),
            link_capacity=np.asarray(self.cap, dtype=np.float64),
            link_latency=np.asarray(self.lat, dtype=np.float64),
            link_tier=np.asarray(self.tier, dtype=np.int16),
            tiers=tuple(self.tiers),
            gpu_vertex=np.asarray(self.gpu_vertex, dtype=np.int64),
            gpu_node=np.asarray(self.gpu_node, dtype=np.int64),
            gpu_local=np.asarray(self.gpu_local, dtype=np.int64),
            gpus_per_node=gpus_per_node,
            requires_pxn=requires_pxn,
            assumptions=assumptions,
        )

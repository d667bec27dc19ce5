"""The network a collective cost model sees: one flat level, or two (inside a node, across nodes).

* :class:`LinkCost` is one level: ``bandwidth`` is the bytes/s one rank can send in **one
  direction** (it can receive the same at the same time: links are full duplex), ``latency`` the
  seconds one message hop costs (the alpha of the alpha-beta model).
* :class:`Hierarchy` is two levels: ``ranks_per_node`` ranks share a node; ``intra`` is each
  rank's link into the node's fabric (e.g. NVLink per GPU) and ``inter`` is the **whole node's**
  link to the network (all its NICs together), shared by that node's ranks.

Ranks are placed node by node (ranks ``0..g-1`` on node 0, and so on), as launchers do.
Bandwidths may be numpy arrays (a sweep over link speeds); they broadcast with sizes and ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from willitscale.errors import ConfigError
from willitscale.units import format_bandwidth, format_time

__all__ = ["DEFAULT_INTRA_LATENCY", "DEFAULT_LINK", "Hierarchy", "LinkCost", "Network"]


def _check(owner: str, name: str, value, *, positive: bool) -> None:
    arr = np.asarray(value, dtype=float)
    ok = np.isfinite(arr) & ((arr > 0) if positive else (arr >= 0))
    if not np.all(ok):
        bad = arr[~ok].flat[0] if arr.ndim else float(arr)
        raise ConfigError(f"{owner}.{name}", bad, "a finite number > 0" if positive else "a finite number >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkCost:
    """One level of the network: per-rank one-direction bandwidth (bytes/s) and per-hop latency (s)."""

    bandwidth: float  #: bytes/s one rank sends (and, at the same time, receives), one direction
    latency: float = 0.0  #: seconds per message hop (alpha)
    name: str = ""  #: where the numbers come from, for reports ("100 GB/s given on the command line")

    def __post_init__(self) -> None:
        _check("LinkCost", "bandwidth", self.bandwidth, positive=True)
        _check("LinkCost", "latency", self.latency, positive=False)

    @classmethod
    def from_link(cls, link, *, derate: bool = True) -> LinkCost:
        """From a catalog :class:`~willitscale.hardware.model.Link`: its one-direction bandwidth
        (times its achievable ``efficiency`` unless ``derate=False``) and its latency."""
        bandwidth = link.bandwidth * (link.efficiency if derate else 1.0)
        how = f"x {link.efficiency:g} achievable" if derate and link.efficiency != 1 else "advertised"
        return cls(bandwidth=bandwidth, latency=link.latency, name=f"{link.name} ({how})")

    def describe(self) -> str:
        """``"50 GB/s one direction, 5 us per hop"`` (plus the name when it has one)."""

        text = f"{_fmt(self.bandwidth, format_bandwidth)} one direction, {_fmt(self.latency, format_time)} per hop"
        return f"{self.name}: {text}" if self.name else text

    def to_json(self) -> dict:
        """``{"bandwidth_GBps", "latency_us", "name"}`` (scalar links)."""
        return {
            "bandwidth_GBps": _json_number(self.bandwidth, 1e9),
            "latency_us": _json_number(self.latency, 1e-6),
            "name": self.name,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Hierarchy:
    """Two levels: ``intra`` per rank inside a node, ``inter`` per node (shared by its ranks)."""

    ranks_per_node: int  #: ranks (GPUs) per node, g
    intra: LinkCost  #: each rank's link inside the node (NVLink/NVSwitch per GPU, PCIe, ...)
    inter: LinkCost  #: the node's link to other nodes: all its NICs together, one direction
    #: one NIC per GPU (rail-optimized servers such as DGX): NCCL's rings then leave each node
    #: through every GPU in turn, so a GPU's intra-node link carries only (g-1)/g of a ring's bytes
    rails: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        g = self.ranks_per_node
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
            raise ConfigError("Hierarchy.ranks_per_node", g, "an integer >= 1")
        for level in ("intra", "inter"):
            if not isinstance(getattr(self, level), LinkCost):
                raise ConfigError(f"Hierarchy.{level}", getattr(self, level), "a LinkCost")

    @classmethod
    def from_node(cls, node, *, derate: bool = True) -> Hierarchy:
        """From a catalog :class:`~willitscale.hardware.model.Node`: ``gpus_per_node`` ranks; each
        GPU's intra-node link (its usable bandwidth when the node knows it); all ``nics`` NIC ports
        together across nodes. Bandwidths times each link's ``efficiency`` unless ``derate=False``."""
        intra_link, nic = node.intra_link, node.nic
        intra_bw = getattr(node, "usable_intra_bandwidth", intra_link.bandwidth)
        intra_bw *= intra_link.efficiency if derate else 1.0
        inter_bw = node.nics * nic.bandwidth * (nic.efficiency if derate else 1.0)
        how = "achievable" if derate else "advertised"
        return cls(
            ranks_per_node=node.gpus_per_node,
            intra=LinkCost(bandwidth=intra_bw, latency=intra_link.latency, name=f"{intra_link.name} per GPU ({how})"),
            inter=LinkCost(bandwidth=inter_bw, latency=nic.latency, name=f"{node.nics} x {nic.name} per node ({how})"),
            rails=node.nics >= node.gpus_per_node,
            name=node.name,
        )

    def describe(self) -> str:
        intra, inter = self.intra, self.inter
        text = (
            f"{self.ranks_per_node} ranks per node; inside a node {_fmt(intra.bandwidth, format_bandwidth)} "
            f"one direction per rank, {_fmt(intra.latency, format_time)} per hop; across nodes "
            f"{_fmt(inter.bandwidth, format_bandwidth)} one direction per node (shared by its ranks), "
            f"{_fmt(inter.latency, format_time)} per hop"
        )
        return f"{self.name}: {text}" if self.name else text

    def to_json(self) -> dict:
        """Both levels: ``intra`` per rank, ``inter`` per node."""
        return {
            "kind": "two_level",
            "ranks_per_node": int(self.ranks_per_node),
            "intra": self.intra.to_json(),
            "inter": self.inter.to_json(),
            "name": self.name,
        }


Network: TypeAlias = LinkCost | Hierarchy


def _json_number(value, unit: float):
    arr = np.asarray(value, dtype=float) / unit
    return float(f"{float(arr):.12g}") if arr.ndim == 0 else [float(f"{x:.12g}") for x in arr.ravel()]


def _fmt(value, formatter) -> str:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return formatter(float(arr))
    return f"{formatter(float(arr.min()))}..{formatter(float(arr.max()))}"


#: The link assumed when none is given: one 400 Gb/s InfiniBand NDR port, 400e9 / 8 = 50 GB/s one
#: direction (the lecture's "state-of-the-art NIC: 400Gbps RDMA ~= 50GB/s", Wei and Xia's lecture), at its
#: advertised rate (no efficiency derating). 5 us per hop sits inside the range NCCL's own tuning
#: model charges a network hop (src/graph/tuning.cc, hwLat[NET]: 2.7 us for the LL protocol to
#: 9.6 us for Simple, ring algorithm).
DEFAULT_LINK = LinkCost(
    bandwidth=50e9,
    latency=5e-6,
    name="default link (one 400 Gb/s InfiniBand NDR port, advertised rate)",
)

#: The intra-node latency assumed when only the inter-node level is given: NCCL's tuning model
#: charges ~0.5-3.4 us per NVLink hop (hwLat[NVLINK]: 0.47 us LL, 3.4 us Simple, ring); we take 1 us.
DEFAULT_INTRA_LATENCY = 1e-6

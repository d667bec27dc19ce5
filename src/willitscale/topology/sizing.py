"""The largest cluster each topology builds from switches of a given radix, from first principles.

Conventions (the builders in :mod:`~willitscale.topology.clos` and
:mod:`~willitscale.topology.direct` follow the same ones):

* A switch has ``k`` ports of one speed (a 51.2 Tb/s switch is 128 x 400G), so a ratio of ports
  is a ratio of capacities. Every GPU has its own NIC port: one GPU, one switch port.
* **Oversubscription** ``s:1`` at a tier is the downlink : uplink *capacity* of that tier's
  switches. A switch at ``s:1`` uses ``down`` ports down and ``up = ceil(down / s)`` up, with
  ``down`` as large as ``down + up <= k`` allows (:func:`leaf_ports`); the top tier (spine,
  core) uses all ``k`` ports down. For the *largest* cluster the ports a taper frees carry more
  hosts (or switches) below, so tapering a tier grows the cluster under the same top tier. (The
  same ratio on a smaller cluster, with spine or core switches left out instead, is what
  ``fabric build ... --nodes N`` builds.)
* ``oversubscription`` applies at the **leaf**, the switches the GPUs plug into, of every kind:
  ``rail-optimized`` and ``fat-tree-2`` (leaf -> spine), the leaves (edges) of ``fat-tree-3``
  and ``rail-optimized-3``, and a ``dragonfly`` router (GPU ports : global links).
  ``top_oversubscription`` applies at the middle tier of the three-tier kinds (aggregation or
  group switch -> core or spine). Both default to 1 (non-blocking).

Checks of the article (002, "GPU fabrics for GenAI workloads") with ``k = 128`` (51.2 Tb/s
128x400G switches) and 8-GPU servers:

* rail-only: 8 rail switches x 128 ports = **1,024 GPUs**. Holds (for rails of one switch each).
* two-tier rail-optimized, non-blocking: leaves 64 down / 64 up, spines reach 128 leaves =
  16 leaves per rail: 128 x 64 = **8,192 GPUs**. The article's 2,048-GPU rail-spine figure is a
  quarter-size build of this design (4 leaves per rail, 32 leaves x 64 uplinks = 16 spines),
  not its limit.
* three tiers with 7:1 between server group and spine (``top_oversubscription=7``): a
  non-blocking rail-optimized group whose 128-port group switches use 112 ports down and 16 up
  holds 112 leaves x 64 GPUs = 7,168 GPUs; four such groups are **28,672 GPUs**, the "28K
  cluster". The design's limit is 128 groups (917,504 GPUs).

Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008): a router has ``p`` endpoint ports, ``a - 1``
local links (all-to-all in a group of ``a`` routers) and ``h`` global links; the *balanced*
dragonfly has ``a = 2p = 2h``, so ``k = 4p - 1`` and ``a h + 1`` groups. Here an endpoint is a
GPU's NIC port, so ``p`` counts GPUs (whole servers of ``g`` GPUs per router); at ``s:1``
``h = ceil(p / s)`` and still ``a = 2h`` (local capacity twice the global: a minimal route takes
up to two local hops per global one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from willitscale.config import FrozenMap
from willitscale.errors import ConfigError

__all__ = ["ClusterSize", "leaf_ports", "uplinks", "max_cluster", "max_clusters", "SIZING_KINDS"]

SIZING_KINDS = ("rail-only", "rail-optimized", "fat-tree-2", "fat-tree-3", "rail-optimized-3",
                "dragonfly")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSize:
    """The largest cluster of one topology: GPUs, switches, how the number comes about and the
    per-switch port split (``layout``) it rests on."""

    kind: str
    gpus: int
    switches: int
    how: str
    layout: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layout", FrozenMap(dict(self.layout)))

    def to_json(self) -> dict:
        return {"kind": self.kind, "gpus": self.gpus, "switches": self.switches, "how": self.how,
                "layout": dict(self.layout)}


def _ratio(oversubscription: float, field_name: str = "oversubscription") -> float:
    if isinstance(oversubscription, bool) or not oversubscription >= 1 or not math.isfinite(oversubscription):
        raise ConfigError(field_name, oversubscription, "a ratio >= 1 (downlink:uplink capacity)")
    return float(oversubscription)


def uplinks(down: int, oversubscription: float = 1.0, uplink_speedup: float = 1.0) -> int:
    """Uplinks a switch with ``down`` downlinks needs to stay within ``oversubscription:1``
    (downlink : uplink capacity) when an uplink is ``uplink_speedup`` times a downlink's speed."""
    return max(1, math.ceil(down / (oversubscription * uplink_speedup) * (1 - 1e-12)))


#: the largest switch radix sized. Today's 51.2 Tb/s switch chips give at most 512 ports (of
#: 100G); 4096 leaves eight times that, and the port searches below count down one port at a time.
MAX_RADIX = 4096


def _radix(radix: int) -> int:
    if isinstance(radix, bool) or int(radix) != radix or not 2 <= radix <= MAX_RADIX:
        raise ConfigError("radix", radix, f"an integer from 2 to {MAX_RADIX} ports (the largest "
                                          "switch chips today have 512; the search counts ports one by one)")
    return int(radix)


def leaf_ports(radix: int, oversubscription: float = 1.0, uplink_speedup: float = 1.0) -> tuple[int, int]:
    """(down, up): the most downlinks a ``radix``-port switch has at ``oversubscription:1``
    (downlink : uplink capacity), and the uplinks that takes (:func:`uplinks`)."""
    radix, s = _radix(radix), _ratio(oversubscription)
    down = radix - 1
    while down > 1 and down + uplinks(down, s, uplink_speedup) > radix:
        down -= 1
    return down, uplinks(down, s, uplink_speedup)


def _two_tier(kind: str, k: int, g: int, s: float) -> ClusterSize:
    down, up = leaf_ports(k, s)
    if kind == "fat-tree-2":
        leaves, how = k, ""
    else:
        if k < g:
            raise ConfigError(f"rail-optimized: a spine must reach a leaf of each of the {g} rails, "
                              f"but the radix is {k}")
        leaves = (k // g) * g
        how = f"{leaves // g} leaves per rail x {g} rails = "
    how += (f"{leaves} leaves x {down} down ports ({up} up, {down / up:g}:1), "
            f"{up} spines of {leaves} ports")
    return ClusterSize(kind=kind, gpus=leaves * down, switches=leaves + up, how=how,
                       layout={"leaves": leaves, "leaf_down": down, "leaf_up": up, "spines": up,
                               "leaf_oversubscription": down / up})


def _three_tier(kind: str, k: int, g: int, s: float, s_top: float) -> ClusterSize:
    d1, u1 = leaf_ports(k, s)
    d2, u2 = leaf_ports(k, s_top)
    edges = d2 if kind == "fat-tree-3" else (d2 // g) * g  # rail-optimized: as many leaves per rail
    if edges < 1:
        raise ConfigError(f"{kind}: a group switch must reach a leaf of each of the {g} rails, but it "
                          f"has {d2} ports down")
    pods, cores = k, u1 * u2
    group = "pod" if kind == "fat-tree-3" else "group"
    mid = "aggregation switches" if kind == "fat-tree-3" else "group switches"
    top = "cores" if kind == "fat-tree-3" else "spines"
    how = (f"{pods} {group}s x {edges} leaves x {d1} GPUs (leaves {d1} down / {u1} up, {d1 / u1:g}:1); "
           f"{u1} {mid} per {group} ({edges} down / {u2} up, {edges / u2:g}:1); "
           f"{cores:,} {top} of {pods} ports")
    return ClusterSize(kind=kind, gpus=pods * edges * d1, switches=pods * (edges + u1) + cores, how=how,
                       layout={"pods": pods, "leaves_per_pod": edges, "leaf_down": d1, "leaf_up": u1,
                               "leaf_oversubscription": d1 / u1, "middle_per_pod": u1, "middle_down": edges,
                               "middle_up": u2, "top_oversubscription": edges / u2, "top": cores})


def _dragonfly(k: int, g: int, s: float) -> ClusterSize:
    def ports(servers: int) -> tuple[int, int, int, int]:
        p = servers * g
        h = uplinks(p, s)
        a = 2 * h
        return p, a, h, p + (a - 1) + h

    if ports(1)[3] > k:
        raise ConfigError(f"dragonfly: a router with one {g}-GPU server at {s:g}:1 needs {ports(1)[3]} "
                          f"ports (p = {g} GPU ports, a - 1 = {ports(1)[1] - 1} local, h = {ports(1)[2]} "
                          f"global) but the radix is {k}")
    n = 1
    while ports(n + 1)[3] <= k:
        n += 1
    p, a, h, used = ports(n)
    groups = a * h + 1
    balance = "balanced, a = 2p = 2h" if p == h else f"tapered {p / h:.3g}:1 GPU ports to global links"
    how = (f"{groups:,} groups x {a} routers x {n} servers; a router: {p} GPU ports, {a - 1} local, "
           f"{h} global ({used} of {k} ports; {balance})")
    return ClusterSize(kind="dragonfly", gpus=groups * a * p, switches=groups * a, how=how,
                       layout={"groups": groups, "routers_per_group": a, "servers_per_router": n,
                               "gpu_ports_per_router": p, "local_links_per_router": a - 1,
                               "global_links_per_router": h, "global_oversubscription": p / h})


def max_cluster(kind: str, *, radix: int, gpus_per_node: int = 8, oversubscription: float = 1.0,
                top_oversubscription: float = 1.0) -> ClusterSize:
    """The largest cluster ``kind`` builds from ``radix``-port switches (see the module docstring).

    ``oversubscription``: downlink:uplink capacity at the leaf (the switch the GPUs plug into; a
    dragonfly router's GPU ports : global links). ``top_oversubscription``: at the middle tier of
    ``fat-tree-3`` and ``rail-optimized-3`` (aggregation / group switch -> core / spine).
    """
    k = _radix(radix)
    if isinstance(gpus_per_node, bool) or int(gpus_per_node) != gpus_per_node or gpus_per_node < 1:
        raise ConfigError("gpus_per_node", gpus_per_node, "an integer >= 1")
    g, s = int(gpus_per_node), _ratio(oversubscription)
    s_top = _ratio(top_oversubscription, "top_oversubscription")
    if kind == "rail-only":
        how = f"{g} rail switches x {k} ports, one server per port (a rail of one switch)"
        if s != 1:
            how += "; no uplinks, so no oversubscription"
        return ClusterSize(kind=kind, gpus=k * g, switches=g, how=how, layout={"rail_switches": g, "servers": k})
    if kind in ("rail-optimized", "fat-tree-2"):
        return _two_tier(kind, k, g, s)
    if kind in ("fat-tree-3", "rail-optimized-3"):
        return _three_tier(kind, k, g, s, s_top)
    if kind == "dragonfly":
        return _dragonfly(k, g, s)
    raise ConfigError("kind", kind, "one of " + ", ".join(SIZING_KINDS))


def max_clusters(*, radix: int, gpus_per_node: int = 8, oversubscription: float = 1.0,
                 top_oversubscription: float = 1.0) -> list[ClusterSize]:
    """:func:`max_cluster` for every kind in :data:`SIZING_KINDS`; a kind that cannot be built
    from this radix gets a row of 0 GPUs whose ``how`` says why."""
    rows = []
    for kind in SIZING_KINDS:
        try:
            rows.append(max_cluster(kind, radix=radix, gpus_per_node=gpus_per_node,
                                    oversubscription=oversubscription, top_oversubscription=top_oversubscription))
        except ConfigError as exc:
            if kind == SIZING_KINDS[0]:  # bad radix or ratios: the same for every kind
                raise
            rows.append(ClusterSize(kind=kind, gpus=0, switches=0, how=f"cannot be built: {exc}"))
    return rows

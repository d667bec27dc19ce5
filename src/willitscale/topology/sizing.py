"""The largest cluster each topology builds from switches of a given radix, from first principles.

With ``k``-port switches, a leaf that keeps ``s:1`` oversubscription has ``down`` host ports and
``ceil(down / s)`` uplinks, ``down + up <= k``. A spine (or core) with ``k`` ports reaches at
most ``k`` switches below it with one link each. Every GPU has its own NIC port.

Checks of the article (002, "GPU fabrics for GenAI workloads") with ``k = 128`` (51.2 Tb/s
128x400G switches) and 8-GPU servers:

* rail-only: 8 rail switches x 128 ports = **1,024 GPUs**. Holds.
* two-tier rail-optimized, non-blocking: leaves 64 down / 64 up, spines reach 128 leaves =
  16 leaves per rail: 128 x 64 = **8,192 GPUs**. The article's 2,048-GPU rail-spine figure is a
  quarter-size build of this design (4 leaves per rail, 32 leaves x 64 uplinks = 16 spines),
  not its limit.
* three tiers with 7:1 between server group and spine: a non-blocking rail-optimized group
  whose 128-port group switches use 112 ports down and 16 up holds 112 leaves x 64 GPUs =
  7,168 GPUs; four such groups are **28,672 GPUs**, the "28K cluster". The design's limit is
  128 groups (917,504 GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from willitscale.errors import ConfigError

__all__ = ["ClusterSize", "leaf_ports", "max_cluster", "max_clusters", "SIZING_KINDS"]

SIZING_KINDS = ("rail-only", "rail-optimized", "fat-tree-2", "fat-tree-3", "rail-optimized-3",
                "dragonfly")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSize:
    """The largest cluster of one topology: GPUs, switches and how the number comes about."""

    kind: str
    gpus: int
    switches: int
    how: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "gpus": self.gpus, "switches": self.switches, "how": self.how}


def leaf_ports(radix: int, oversubscription: float = 1.0) -> tuple[int, int]:
    """(down, up): the most host ports a ``radix``-port leaf has with ``up = ceil(down/s)``."""
    if radix < 2:
        raise ConfigError("radix", radix, "an integer >= 2")
    if not oversubscription >= 1:
        raise ConfigError("oversubscription", oversubscription, "a ratio >= 1")
    down = radix
    while down + math.ceil(down / oversubscription) > radix:
        down -= 1
    return down, math.ceil(down / oversubscription)


def max_cluster(kind: str, *, radix: int, gpus_per_node: int = 8, oversubscription: float = 1.0,
                top_oversubscription: float = 7.0) -> ClusterSize:
    """The largest cluster ``kind`` builds from ``radix``-port switches (see module docstring).

    ``oversubscription`` applies at the leaf; ``top_oversubscription`` at the group-to-spine
    tier of ``rail-optimized-3``.
    """
    k, g = radix, gpus_per_node
    if kind == "rail-only":
        return ClusterSize(kind=kind, gpus=k * g, switches=g,
                           how=f"{g} rail switches x {k} ports, one server per port")
    if kind in ("rail-optimized", "fat-tree-2"):
        down, up = leaf_ports(k, oversubscription)
        leaves = k if kind == "fat-tree-2" else (k // g) * g
        how = (f"{leaves} leaves x {down} down ports ({up} up, {down / up:g}:1), "
               f"{up} spines of {leaves} ports")
        if kind == "rail-optimized":
            how = f"{leaves // g} leaves per rail x {g} rails = " + how
        return ClusterSize(kind=kind, gpus=leaves * down, switches=leaves + up, how=how)
    if kind == "fat-tree-3":
        half = k // 2
        cores = half * math.ceil(half / oversubscription)
        return ClusterSize(kind=kind, gpus=k ** 3 // 4, switches=k * k + cores,
                           how=f"{k} pods x {half} edges x {half} hosts, {cores} cores")
    if kind == "rail-optimized-3":
        d_leaf, u_leaf = leaf_ports(k, oversubscription)
        d_grp, u_grp = leaf_ports(k, top_oversubscription)
        leaves = (d_grp // g) * g
        per_group = leaves * d_leaf
        groups = k
        return ClusterSize(
            kind=kind, gpus=groups * per_group,
            switches=groups * (leaves + u_leaf) + u_leaf * u_grp,
            how=(f"groups of {leaves} leaves x {d_leaf} GPUs = {per_group} GPUs under {u_leaf} group "
                 f"switches ({d_grp} down / {u_grp} up, {d_grp / u_grp:g}:1); spines reach {groups} groups"))
    if kind == "dragonfly":
        # balanced dragonfly (Kim et al. 2008): a = 2p = 2h, router ports p*g + (a-1) + h <= k
        p = 1
        while (p + 1) * g + (2 * (p + 1) - 1) + (p + 1) <= k:
            p += 1
        if p * g + (2 * p - 1) + p > k:
            raise ConfigError("radix", k, f"at least {g + 2} ports for a dragonfly of {g}-GPU servers")
        a, h = 2 * p, p
        groups = a * h + 1
        return ClusterSize(kind=kind, gpus=groups * a * p * g, switches=groups * a,
                           how=f"{groups} groups x {a} routers x {p} servers (h = {h} global links per router)")
    raise ConfigError("kind", kind, "one of " + ", ".join(SIZING_KINDS))


def max_clusters(*, radix: int, gpus_per_node: int = 8, oversubscription: float = 1.0,
                 top_oversubscription: float = 7.0) -> list[ClusterSize]:
    """:func:`max_cluster` for every kind in :data:`SIZING_KINDS`."""
    return [max_cluster(k, radix=radix, gpus_per_node=gpus_per_node, oversubscription=oversubscription,
                        top_oversubscription=top_oversubscription) for k in SIZING_KINDS]

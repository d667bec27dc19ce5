"""The links of a cluster as the estimate sees them, and collective times over a placed group.

:class:`ClusterLinks` holds what one GPU can send inside its node (NVLink/NVSwitch or PCIe,
``usable_intra_bandwidth x efficiency``) and what one node can send to the others (all its NICs,
``nics x nic.bandwidth x efficiency``), both one direction, or a calibration's fitted figures.

:func:`collective_lines` turns a collective over placed groups (:mod:`willitscale.topology.placement`) into straight
lines ``time(S) = A + B x S`` per algorithm NCCL runs. Every alpha-beta formula of
:mod:`willitscale.collectives` is affine in the message size ``S`` for a fixed group and network
(a latency term that does not depend on ``S`` plus bytes over bandwidth), so two evaluations give
the exact line; :func:`line_time` then evaluates any number of sizes at once and applies
:func:`willitscale.collectives.fastest`'s rule: the first algorithm in NCCL's preference order
within 1% of the fastest. The single-plan estimate and the batched planner both use these
functions, on arrays of length 1 or of many plans.

The network a group sees:

* inside one node: each GPU's link (a flat :class:`~willitscale.collectives.LinkCost`);
* across nodes: a two-level :class:`~willitscale.collectives.Hierarchy` with the group's members
  per node on the intra-node link and, across nodes, the node's NIC bandwidth times the group's
  share of it (:attr:`willitscale.topology.placement.GroupPlacement.node_share`); ``rails`` when the node has a NIC
  per GPU (docs/collectives.md: the ring's NVLink bytes are then ``(g-1)/g`` of the ring's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.collectives.algorithms import nccl_algorithms
from willitscale.collectives.choice import first_within
from willitscale.collectives.cost import collective_cost
from willitscale.collectives.network import Hierarchy, LinkCost
from willitscale.hardware.calibration import inter_node_bandwidth
from willitscale.hardware.describe import intra_link_name, link_name
from willitscale.units import format_bandwidth, format_time

__all__ = ["ClusterLinks", "CollectiveLines", "cluster_links", "collective_lines", "line_time",
           "take_lines", "select_lines", "pair_time", "link_caveats"]

_S1, _S2 = 1e6, 1e9  # two sizes that define each line


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLinks:
    """Per-GPU intra-node and per-node inter-node links, one direction, efficiency applied."""

    gpus_per_node: int
    nodes: int
    intra_bandwidth: float  #: bytes/s one GPU sends to the others of its node
    intra_latency: float
    inter_bandwidth: float  #: bytes/s one node sends over all its NICs
    inter_latency: float
    intra_name: str
    inter_name: str
    intra_line_rate: float  #: before efficiency
    inter_line_rate: float
    #: a NIC per GPU (rail-optimized servers): NCCL's rings leave the node through every GPU in
    #: turn, so a GPU's intra-node link carries only (g-1)/g of a ring's bytes
    rails: bool = False

    def describe(self) -> str:
        return (f"{self.intra_name}: {format_bandwidth(self.intra_bandwidth)} per GPU effective, "
                f"{format_time(self.intra_latency)}; {self.inter_name}: "
                f"{format_bandwidth(self.inter_bandwidth)} per node effective, "
                f"{format_time(self.inter_latency)}")


def cluster_links(scenario) -> ClusterLinks:
    """The links of ``scenario``'s cluster; a calibration's fitted level replaces the catalog's
    (its bandwidth is what was achieved, so no efficiency is applied to it). The inter-node fit
    is what a measured node sent with its ranks; it is scaled to this node per NIC
    (:func:`willitscale.hardware.calibration.inter_node_bandwidth`)."""

    cluster = scenario.cluster
    node = cluster.node
    intra, nic = node.intra_link, node.nic
    intra_bw, intra_lat = node.usable_intra_bandwidth * intra.efficiency, intra.latency
    inter_bw, inter_lat = node.inter_node_bandwidth * nic.efficiency, nic.latency
    intra_name = intra_link_name(node)
    inter_name = f"{node.nics} x {link_name(nic)}" if node.nics > 1 else link_name(nic)
    calibration = scenario.calibration
    for level in ("intra_node", "inter_node"):
        fit = None if calibration is None else calibration.link(level)
        if fit is None:
            continue
        if level == "intra_node":
            note = f" [calibrated: {format_bandwidth(fit.bandwidth)} per GPU, {format_time(fit.latency)}]"
            intra_bw, intra_lat, intra_name = fit.bandwidth, fit.latency, intra_name + note
        else:
            per_node = inter_node_bandwidth(fit, node.nics)[0]
            note = (f" [calibrated: {format_bandwidth(per_node)} per node from "
                    f"{format_bandwidth(fit.bandwidth)} fitted with {fit.ranks_per_node} rank(s) "
                    f"per node, {format_time(fit.latency)}]")
            inter_bw, inter_lat, inter_name = per_node, fit.latency, inter_name + note
    return ClusterLinks(
        gpus_per_node=node.gpus_per_node, nodes=cluster.nodes, intra_bandwidth=intra_bw,
        intra_latency=intra_lat, inter_bandwidth=inter_bw, inter_latency=inter_lat,
        intra_name=intra_name, inter_name=inter_name, intra_line_rate=node.usable_intra_bandwidth,
        inter_line_rate=node.inter_node_bandwidth, rails=node.nics >= node.gpus_per_node)


def link_caveats(cluster) -> tuple[str, ...]:
    """What the link model leaves out on this node, for the assumptions of a report.

    * NVLink SHARP (NVLS): third-generation NVSwitch and later (H100, H200, B200 nodes) reduce in
      the switch; NCCL's NVLS all-reduce then reaches ~480 GB/s busbw on one 8-GPU H100 node
      (NCCL maintainers in NVIDIA/nccl-tests issues #212 and #290), above what a ring can (~360
      GB/s at the catalog's 0.80 of 450 GB/s). Not modelled: a single-node all-reduce may be
      faster than estimated.
    * PCIe: GPUs behind one PCIe switch share its uplink to the CPU and to the NIC; each GPU is
      credited its own x16 link here, so a PCIe node may be slower than estimated.
    """
    node = cluster.node
    out = []
    switch = getattr(node.nvswitch, "name", "") or ""
    nvls = node.intra_topology == "nvswitch" and (
        switch.endswith(("v3", "v4")) or node.intra_link.name.startswith(("nvlink4", "nvlink5")))
    if nvls and node.gpus_per_node > 1:
        out.append("NVLink SHARP (NVLS) in-switch reduction not modelled: NCCL's NVLS all-reduce "
                   "reaches ~480 GB/s busbw on one 8-GPU H100 node (nccl-tests issues #212, #290), "
                   "so intra-node all-reduces may be faster than estimated")
    if node.intra_topology == "pcie" and node.gpus_per_node > 1:
        out.append("PCIe switch sharing not modelled: GPUs behind one switch share its uplink (to "
                   "the CPU and the NICs); each GPU is credited its own x16 link, so this node may "
                   "be slower than estimated")
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveLines:
    """``time = intercept + slope x size`` per plan (rows) and algorithm (columns)."""

    op: str
    algorithms: tuple[str, ...]
    intercept: np.ndarray  #: seconds, shape (plans, algorithms)
    slope: np.ndarray  #: seconds per byte, shape (plans, algorithms)


def _network(links: ClusterLinks, per_node: int, spans: bool, share):
    intra = LinkCost(bandwidth=links.intra_bandwidth, latency=links.intra_latency)
    if not spans:
        return intra
    inter = LinkCost(bandwidth=links.inter_bandwidth * np.asarray(share, dtype=float),
                     latency=links.inter_latency)
    return Hierarchy(ranks_per_node=per_node, intra=intra, inter=inter, rails=links.rails)


def collective_lines(op: str, placement, links: ClusterLinks, *, ranks=None) -> CollectiveLines:
    """Lines of ``op`` over the groups of ``placement`` (arrays of plans); ``ranks`` overrides
    the group size (a sub-group, e.g. the 2 ranks of the tied-embedding all-reduce)."""

    algorithms = tuple(a.value for a in nccl_algorithms(op))
    size = np.atleast_1d(np.asarray(placement.size if ranks is None else ranks, dtype=float))
    per_node = np.atleast_1d(np.minimum(placement.members_per_node, size)).astype(float)
    spans = np.atleast_1d(np.asarray(placement.nodes) > 1) & (size > 1)
    share = np.broadcast_to(np.atleast_1d(placement.node_share), size.shape).astype(float)
    keys = np.where(spans, per_node, 0.0)
    # plans share few group geometries: cost each distinct one once
    share_code = np.rint(np.where(spans, share, 0.0) * (1 << 15)).astype(np.int64)
    code = (keys.astype(np.int64) << 44) + (size.astype(np.int64) << 16) + share_code
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    unique = np.stack([keys[first], size[first], np.where(spans, share, 0.0)[first]], axis=1)
    inverse = inverse.reshape(-1)
    u_int = np.zeros((len(unique), len(algorithms)))
    u_slope = np.zeros_like(u_int)
    for key in np.unique(unique[:, 0]):
        rows = np.nonzero(unique[:, 0] == key)[0]
        net = _network(links, int(key), bool(key > 0), unique[rows, 2])
        n = unique[rows, 1]
        for j, algorithm in enumerate(algorithms):
            t1 = np.asarray(collective_cost(op, algorithm, _S1, n, net).time, dtype=float)
            t2 = np.asarray(collective_cost(op, algorithm, _S2, n, net).time, dtype=float)
            b = (t2 - t1) / (_S2 - _S1)
            u_slope[rows, j] = b
            u_int[rows, j] = t1 - b * _S1
    intercept, slope = u_int[inverse], u_slope[inverse]
    return CollectiveLines(op=op, algorithms=algorithms, intercept=intercept, slope=slope)


def line_time(lines: CollectiveLines, size, *, with_choice: bool = False):
    """Seconds of the collective for ``size`` bytes (shape ``(plans,)`` or ``(plans, k)``).

    The algorithm is chosen per element as :func:`willitscale.collectives.fastest` chooses it.
    With ``with_choice``, also returns the index of the chosen algorithm.
    """
    s = np.asarray(size, dtype=float)
    extra = s.ndim - 1 if s.ndim >= 1 else 0
    shape = (lines.intercept.shape[0],) + (1,) * extra
    times = [lines.intercept[:, j].reshape(shape) + lines.slope[:, j].reshape(shape) * s
             for j in range(len(lines.algorithms))]
    times = [np.maximum(t, 0.0) for t in times]
    if len(times) == 1:
        return (times[0], np.zeros(times[0].shape, dtype=int)) if with_choice else times[0]
    index = first_within(np.stack(times))  # as willitscale.collectives.fastest chooses
    chosen = np.take_along_axis(np.stack(times), index[None], axis=0)[0]
    return (chosen, index) if with_choice else chosen


def take_lines(lines: CollectiveLines, rows) -> CollectiveLines:
    """The lines of some plans (an index array or mask)."""
    return CollectiveLines(op=lines.op, algorithms=lines.algorithms,
                           intercept=lines.intercept[rows], slope=lines.slope[rows])


def select_lines(mask, a: CollectiveLines, b: CollectiveLines) -> CollectiveLines:
    """Per plan, the lines of ``a`` where ``mask`` holds, else those of ``b``."""
    m = np.asarray(mask, dtype=bool)[:, None]
    return CollectiveLines(op=a.op, algorithms=a.algorithms,
                           intercept=np.where(m, a.intercept, b.intercept),
                           slope=np.where(m, a.slope, b.slope))


def pair_time(lines_a: CollectiveLines, size_a, lines_b: CollectiveLines, size_b):
    """Time of two collectives of per-column sizes, skipping empty ones."""
    a = np.where(size_a > 0, line_time(lines_a, size_a), 0.0)
    return a + np.where(size_b > 0, line_time(lines_b, size_b), 0.0)

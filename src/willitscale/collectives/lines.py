"""The links of a cluster as the estimate sees them, and collective times over a placed group.

:class:`ClusterLinks` holds what one GPU can send inside its node (NVLink/NVSwitch or PCIe,
``usable_intra_bandwidth x efficiency``) and what one node can send to the others (all its NICs,
``nics x nic.bandwidth x efficiency``), both one direction, or a calibration's fitted figures;
and which collective library runs (``backend``) on which catalog node.

:func:`collective_lines` turns a collective over placed groups (:mod:`willitscale.topology.placement`)
into :class:`~willitscale.collectives.line_time.CollectiveLines` (a row per distinct group
geometry, a column per candidate), and
:func:`~willitscale.collectives.line_time.line_time` evaluates any number of sizes at once:

* **nccl** (a catalog node, no calibrated link): one column per (algorithm, protocol) NCCL can
  run for the group (:mod:`willitscale.collectives.nccl_lines`): NCCL's pick by its own model,
  the achieved time of that pick (:mod:`willitscale.collectives.nccl.run`), so a 25 MB bucket pays the
  tens of microseconds NCCL really pays;
* **gloo**: PyTorch's Gloo: a ring over the links for all_reduce and all_gather, a full
  all_reduce for reduce_scatter (ProcessGroupGloo runs one), direct sends for all_to_all and
  send_recv; CUDA tensors staged through host memory over PCIe before and after;
* **alpha-beta** (a calibration's fitted link levels under NCCL): the alpha-beta forms the
  calibration was fitted in, ring and double binary tree, as ``fastest`` chooses.

A calibration's measured ``[[collective]]`` entries then time the groups whose geometry they
measured, in every backend (:mod:`willitscale.collectives.measured_lines`).

The network a group sees in the alpha-beta forms: inside one node, each GPU's link (a flat
:class:`~willitscale.collectives.LinkCost`); across nodes, a two-level
:class:`~willitscale.collectives.Hierarchy` with the node's NIC bandwidth times the group's share
of it (:attr:`willitscale.topology.placement.GroupPlacement.node_share`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from willitscale.collectives.algorithms import nccl_algorithms
from willitscale.collectives.cost import collective_cost
from willitscale.collectives.gloo import staging_bandwidth
from willitscale.collectives.line_time import (
    CollectiveLines,
    line_time,
    pair_time,
    select_lines,
    take_lines,
)
from willitscale.collectives.network import Hierarchy, LinkCost
from willitscale.collectives.ops import Op
from willitscale.hardware.calibration import inter_node_bandwidth
from willitscale.hardware.describe import intra_link_name, link_name
from willitscale.units import format_bandwidth, format_time

__all__ = ["ClusterLinks", "CollectiveLines", "cluster_links", "collective_lines", "line_time",
           "take_lines", "select_lines", "pair_time", "link_caveats", "BACKENDS"]

_S1, _S2 = 1e6, 1e9  # two sizes that define each alpha-beta line
#: how the estimate costs collectives: NCCL's model, Gloo's rings, or fitted alpha-beta levels
BACKENDS = ("nccl", "gloo", "alpha-beta")


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
    backend: str = "alpha-beta"  #: see :data:`BACKENDS`
    node: object = None  #: the catalog node NCCL's model reads (backend "nccl")
    #: bytes/s of the pinned host copies Gloo makes of a CUDA tensor (0: CPU tensors, none)
    staging_bandwidth: float = 0.0
    #: a calibration's measured ``[[collective]]`` entries
    #: (:mod:`willitscale.collectives.measured_lines`): they time the groups they match
    curves: tuple = ()
    #: per plan (plans, 2): factors on the intra-node and inter-node bandwidths (and line rates)
    #: of that plan only; what-if probes evaluated as rows of one batch. None: 1 for every plan
    plan_scale: np.ndarray | None = field(default=None, compare=False)
    #: collective lines already built over these links, by op and placement (small batches)
    _lines: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def describe(self) -> str:
        return (f"{self.intra_name}: {format_bandwidth(self.intra_bandwidth)} per GPU effective, "
                f"{format_time(self.intra_latency)}; {self.inter_name}: "
                f"{format_bandwidth(self.inter_bandwidth)} per node effective, "
                f"{format_time(self.inter_latency)}")

    @property
    def scale(self) -> tuple[float, float]:
        """(intra, inter): these links' line rates over the catalog node's (what-ifs scale them)."""
        return self.scale_at(1.0, 1.0)

    def scale_at(self, intra: float, inter: float) -> tuple[float, float]:
        """:attr:`scale` with the line rates ``intra`` and ``inter`` times faster (a plan's
        :attr:`plan_scale`), computed as :func:`dataclasses.replace` of the rates would."""
        node = self.node
        if node is None:
            return 1.0, 1.0
        rate_intra = self.intra_line_rate * intra if intra != 1.0 else self.intra_line_rate
        rate_inter = self.inter_line_rate * inter if inter != 1.0 else self.inter_line_rate
        return (rate_intra / node.usable_intra_bandwidth, rate_inter / node.inter_node_bandwidth)

    def with_plan_scale(self, intra, inter) -> ClusterLinks:
        """These links with per-plan bandwidth factors (arrays of plans; see :attr:`plan_scale`)."""
        intra, inter = np.broadcast_arrays(np.asarray(intra, dtype=float),
                                           np.asarray(inter, dtype=float))
        scale = np.stack([intra, inter], axis=-1)
        if scale.shape[0] > _CACHED_PLANS:
            return replace(self, plan_scale=scale)
        key = ("plan_scale", scale.tobytes())  # kept: the same probes find their lines again
        if key not in self._lines:
            if len(self._lines) >= _CACHED_ENTRIES:
                self._lines.clear()
            self._lines[key] = replace(self, plan_scale=scale)
        return self._lines[key]


def cluster_links(scenario) -> ClusterLinks:
    """The links of ``scenario``'s cluster; a calibration's fitted level replaces the catalog's
    (its bandwidth is what was achieved, so no efficiency is applied to it). The inter-node fit
    is what a measured node sent with its ranks; it is scaled to this node per NIC
    (:func:`willitscale.hardware.calibration.inter_node_bandwidth`). The backend is the
    scenario's collective library; NCCL on calibrated levels uses their alpha-beta forms."""

    cluster = scenario.cluster
    node = cluster.node
    intra, nic = node.intra_link, node.nic
    intra_bw, intra_lat = node.usable_intra_bandwidth * intra.efficiency, intra.latency
    inter_bw, inter_lat = node.inter_node_bandwidth * nic.efficiency, nic.latency
    intra_name = intra_link_name(node)
    inter_name = f"{node.nics} x {link_name(nic)}" if node.nics > 1 else link_name(nic)
    calibration = scenario.calibration
    calibrated = False
    for level in ("intra_node", "inter_node"):
        fit = None if calibration is None else calibration.link(level)
        if fit is None:
            continue
        calibrated = True
        if level == "intra_node":
            note = f" [calibrated: {format_bandwidth(fit.bandwidth)} per GPU, {format_time(fit.latency)}]"
            intra_bw, intra_lat, intra_name = fit.bandwidth, fit.latency, intra_name + note
        else:
            per_node = inter_node_bandwidth(fit, node.nics)[0]
            note = (f" [calibrated: {format_bandwidth(per_node)} per node from "
                    f"{format_bandwidth(fit.bandwidth)} fitted with {fit.ranks_per_node} rank(s) "
                    f"per node, {format_time(fit.latency)}]")
            inter_bw, inter_lat, inter_name = per_node, fit.latency, inter_name + note
    library = getattr(scenario.options, "collectives", "nccl")
    backend = library if library != "nccl" else ("alpha-beta" if calibrated else "nccl")
    return ClusterLinks(
        gpus_per_node=node.gpus_per_node, nodes=cluster.nodes, intra_bandwidth=intra_bw,
        intra_latency=intra_lat, inter_bandwidth=inter_bw, inter_latency=inter_lat,
        intra_name=intra_name, inter_name=inter_name, intra_line_rate=node.usable_intra_bandwidth,
        inter_line_rate=node.inter_node_bandwidth, rails=node.nics >= node.gpus_per_node,
        backend=backend, node=node, staging_bandwidth=staging_bandwidth(cluster.gpu.pcie_gen) if backend == "gloo" else 0.0,
        curves=() if calibration is None else tuple(calibration.section("collective")))


def link_caveats(cluster, backend: str = "nccl") -> tuple[str, ...]:
    """What the link model leaves out on this node, for the assumptions of a report.

    * NVLink SHARP (NVLS): modelled for NCCL (its NVLS and NVLSTree algorithms), not on a
      calibration's alpha-beta levels. Gloo has no in-switch reduction at all.
    * PCIe: GPUs behind one PCIe switch share its uplink to the CPU and to the NIC; each GPU is
      credited its own x16 link here, so a PCIe node may be slower than estimated.
    """
    node = cluster.node
    out = []
    switch = node.nvswitch
    nvls = node.intra_topology == "nvswitch" and bool(switch is not None and switch.in_network_reduction)
    if nvls and node.gpus_per_node > 1 and backend == "alpha-beta":
        out.append("NVLink SHARP (NVLS) in-switch reduction not modelled on calibrated alpha-beta "
                   "links: NCCL's NVLS all-reduce reaches ~480 GB/s busbw on one 8-GPU H100 node "
                   "(nccl-tests issues #212, #290), so intra-node all-reduces may be faster")
    if node.intra_topology == "pcie" and node.gpus_per_node > 1:
        out.append("PCIe switch sharing not modelled: GPUs behind one switch share its uplink (to "
                   "the CPU and the NICs); each GPU is credited its own x16 link, so this node may "
                   "be slower than estimated")
    return tuple(out)


def _network(links: ClusterLinks, per_node: int, spans: bool, share, scale=(1.0, 1.0)):
    intra_bw = links.intra_bandwidth * scale[0] if scale[0] != 1.0 else links.intra_bandwidth
    inter_bw = links.inter_bandwidth * scale[1] if scale[1] != 1.0 else links.inter_bandwidth
    intra = LinkCost(bandwidth=intra_bw, latency=links.intra_latency)
    if not spans:
        return intra
    inter = LinkCost(bandwidth=inter_bw * np.asarray(share, dtype=float),
                     latency=links.inter_latency)
    return Hierarchy(ranks_per_node=per_node, intra=intra, inter=inter, rails=links.rails)


#: Gloo's algorithm per op, as ProcessGroupGloo runs it: (the op whose cost it pays, algorithm)
_GLOO = {Op.ALL_REDUCE: (Op.ALL_REDUCE, "ring"), Op.REDUCE_SCATTER: (Op.ALL_REDUCE, "ring"),
         Op.ALL_GATHER: (Op.ALL_GATHER, "ring"), Op.BROADCAST: (Op.BROADCAST, "ring"),
         Op.REDUCE: (Op.REDUCE, "ring"), Op.ALL_TO_ALL: (Op.ALL_TO_ALL, "direct"),
         Op.SEND_RECV: (Op.SEND_RECV, "direct")}


def _geometries(placement, ranks, plan_scale=None):
    """Distinct (members per node or 0 inside a node, size, share, intra factor, inter factor)
    and each plan's index."""
    size = np.atleast_1d(np.asarray(placement.size if ranks is None else ranks, dtype=float))
    per_node = np.atleast_1d(np.minimum(placement.members_per_node, size)).astype(float)
    spans = np.atleast_1d(np.asarray(placement.nodes) > 1) & (size > 1)
    share = np.broadcast_to(np.atleast_1d(placement.node_share), size.shape).astype(float)
    keys = np.where(spans, per_node, 0.0)
    share_code = np.rint(np.where(spans, share, 0.0) * (1 << 15)).astype(np.int64)
    code = (keys.astype(np.int64) << 44) + (size.astype(np.int64) << 16) + share_code
    if plan_scale is None:
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        factors = np.ones((len(first), 2))
    else:
        scales = np.broadcast_to(plan_scale, size.shape + (2,))
        _, which = np.unique(scales, axis=0, return_inverse=True)
        _, first, inverse = np.unique(np.stack([code, which.reshape(-1)], axis=1), axis=0,
                                      return_index=True, return_inverse=True)
        factors = scales[first]
    unique = np.stack([keys[first], size[first], np.where(spans, share, 0.0)[first]], axis=1)
    return np.concatenate([unique, factors], axis=1), inverse.reshape(-1)


def _alpha_beta_lines(op: Op, unique, inverse, links: ClusterLinks) -> CollectiveLines:
    if links.backend == "gloo":
        cost_op, algorithm = _GLOO[op]
        algorithms = (algorithm,)
    else:
        cost_op, algorithms = op, tuple(a.value for a in nccl_algorithms(op))
    u_int = np.zeros((len(unique), len(algorithms)))
    u_slope = np.zeros_like(u_int)
    for key, intra, inter in np.unique(unique[:, [0, 3, 4]], axis=0):
        rows = np.nonzero((unique[:, 0] == key) & (unique[:, 3] == intra) & (unique[:, 4] == inter))[0]
        net = _network(links, int(key), bool(key > 0), unique[rows, 2], (intra, inter))
        n = unique[rows, 1]
        for j, algorithm in enumerate(algorithms):
            t1 = np.asarray(collective_cost(cost_op, algorithm, _S1, n, net).time, dtype=float)
            t2 = np.asarray(collective_cost(cost_op, algorithm, _S2, n, net).time, dtype=float)
            b = (t2 - t1) / (_S2 - _S1)
            u_slope[rows, j] = b
            u_int[rows, j] = t1 - b * _S1
    if links.staging_bandwidth > 0 and op not in (Op.ALL_TO_ALL, Op.SEND_RECV):
        # ProcessGroupGloo copies a CUDA tensor to pinned host memory and back, serially with
        # the ring (ProcessGroupGlooCuda.cpp, AsyncAllreduceCUDAHostWork): 2 S over PCIe
        u_slope = u_slope + np.where(unique[:, 1:2] > 1, 2.0 / links.staging_bandwidth, 0.0)
    names = tuple(f"gloo {a}" for a in algorithms) if links.backend == "gloo" else algorithms
    return CollectiveLines(op=op.value, algorithms=names, intercept=u_int, slope=u_slope, geometry=inverse)


def collective_lines(op: str, placement, links: ClusterLinks, *, ranks=None) -> CollectiveLines:
    """Lines of ``op`` over the groups of ``placement`` (arrays of plans); ``ranks`` overrides
    the group size (a sub-group, e.g. the 2 ranks of the tied-embedding all-reduce)."""
    op = Op(op)
    key = _cache_key(op, placement, ranks, links)
    lines = links._lines.get(key) if key is not None else None
    if lines is None:
        lines = _build_lines(op, placement, links, ranks)
        if key is not None:
            if len(links._lines) >= _CACHED_ENTRIES:
                links._lines.clear()
            links._lines[key] = lines
    return lines


#: batches up to this many plans have their lines kept per placement (a what-if's probes, one
#: estimate's runs); the planner's large batches build theirs each time
_CACHED_PLANS = 256
#: lines (and plan-scaled links) one :class:`ClusterLinks` keeps before it starts afresh
_CACHED_ENTRIES = 4096


def _cache_key(op: Op, placement, ranks, links: ClusterLinks):
    """The lines' key among those :class:`ClusterLinks` keeps: the op and the placement's
    arrays (and ``ranks``, the per-plan scales); None for large batches."""
    size = np.asarray(placement.size)
    if size.size > _CACHED_PLANS:
        return None
    parts = [np.ascontiguousarray(x, dtype=float).tobytes() for x in
             (placement.size, placement.members_per_node, placement.nodes, placement.node_share)]
    extra = [None if ranks is None else np.ascontiguousarray(ranks, dtype=float).tobytes(),
             None if links.plan_scale is None else links.plan_scale.tobytes()]
    return (op, *parts, *extra)


def _build_lines(op: Op, placement, links: ClusterLinks, ranks) -> CollectiveLines:
    unique, inverse = _geometries(placement, ranks, links.plan_scale)
    if links.backend == "nccl" and links.node is not None:
        from willitscale.collectives.nccl_lines import nccl_lines

        lines = nccl_lines(op, unique, inverse, links)
    else:
        lines = _alpha_beta_lines(op, unique, inverse, links)
    if links.curves:
        from willitscale.collectives.measured_lines import with_measured_curves

        lines = with_measured_curves(lines, unique, links.curves, links.backend, links.scale)
    return lines

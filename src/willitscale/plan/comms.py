"""The communication a data-parallel step issues and what it costs on the links it crosses.

DDP issues one all-reduce per gradient bucket over the data-parallel group: every GPU of the
cluster. Its ranks are placed node by node, so the group crosses:

* inside a node, each GPU's NVLink/NVSwitch (or PCIe) port: per-GPU one-direction bandwidth
  ``usable_intra_bandwidth x efficiency`` (on a fully meshed board only the links to the GPUs
  in use count: 2 GPUs of a 4-GPU HGX A100 share 4 of their 12 NVLinks, 100 GB/s);
* across nodes, the node's NICs, **shared by its GPUs**: ``nics x nic.bandwidth x efficiency``
  per node.

On one node that is a flat network (:class:`~willitscale.collectives.network.LinkCost`); on
several, a two-level :class:`~willitscale.collectives.network.Hierarchy`. Each bucket's
all-reduce takes the time of the algorithm NCCL would run for its size, as chosen by
:func:`willitscale.collectives.choice.fastest` among NCCL's algorithms (ring, double binary
tree). A measured all-reduce (``--allreduce-time``/``--allreduce-size``, seeds/003) replaces the
model: a bucket then takes ``measured_time x bucket_bytes / measured_bytes``.

The *limiting* link is the one whose bandwidth a fix would raise: the inter-node NICs when the
group spans nodes, the intra-node link otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from willitscale.plan.result import CommReport
from willitscale.plan.scenario import Scenario
from willitscale.units import format_bandwidth, format_size, format_time

__all__ = ["GradientAllReduce", "gradient_allreduce"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientAllReduce:
    """The cost model of the gradient all-reduce of one scenario (vectorised over bucket sizes)."""

    ranks: int
    nodes: int
    gpus_per_node: int
    intra_bandwidth: float  #: bytes/s per GPU, one direction, efficiency applied
    intra_latency: float
    inter_bandwidth: float  #: bytes/s per node (all NICs), one direction, efficiency applied
    inter_latency: float
    intra_name: str
    inter_name: str
    intra_line_rate: float = 0.0  #: bytes/s per GPU before efficiency
    inter_line_rate: float = 0.0  #: bytes/s per node before efficiency
    measured_time: float | None = None
    measured_bytes: float | None = None
    factor: float = 1.0  #: multiplier on the limiting link's bandwidth (fix search)
    flow: Any = None  #: a willitscale.fabric.FlowCollectiveModel (--network flow)
    flow_name: str = ""

    @property
    def spans_nodes(self) -> bool:
        return self.nodes > 1

    @property
    def resource(self) -> str:
        return "inter-node network" if self.spans_nodes else "intra-node network"

    @property
    def limiting_name(self) -> str:
        return "inter-node (per node)" if self.spans_nodes else "intra-node (per GPU)"

    @property
    def limiting_bandwidth(self) -> float:
        """Effective bytes/s of the limiting link: per node across nodes, per GPU inside one."""
        return (self.inter_bandwidth if self.spans_nodes else self.intra_bandwidth) * self.factor

    @property
    def limiting_description(self) -> str:
        if self.measured_time is not None:
            rate = self.measured_bytes / self.measured_time * self.factor
            return f"the measured all-reduce rate, {format_bandwidth(rate)} of gradients"
        if self.spans_nodes:
            return (f"{format_bandwidth(self.inter_bandwidth * self.factor)} effective per node, "
                    + (f"shared by its {self.gpus_per_node} GPUs" if self.gpus_per_node > 1
                       else "one GPU per node"))
        return f"{format_bandwidth(self.intra_bandwidth * self.factor)} effective per GPU"

    @property
    def limiting_line_rate(self) -> float:
        """Line rate (before efficiency) of the limiting link: per node, or per GPU on one node."""
        return (self.inter_line_rate if self.spans_nodes else self.intra_line_rate) * self.factor

    def scaled(self, factor: float) -> GradientAllReduce:
        """The same with the limiting link ``factor`` times faster."""
        return replace(self, factor=self.factor * factor)

    def network(self):
        from willitscale.collectives.network import Hierarchy, LinkCost

        scale_intra = 1.0 if self.spans_nodes else self.factor
        intra = LinkCost(bandwidth=self.intra_bandwidth * scale_intra, latency=self.intra_latency,
                         name=self.intra_name)
        if not self.spans_nodes:
            return intra
        inter = LinkCost(bandwidth=self.inter_bandwidth * self.factor, latency=self.inter_latency,
                         name=self.inter_name)
        return Hierarchy(ranks_per_node=self.gpus_per_node, intra=intra, inter=inter)

    def choice(self, size_bytes):
        from willitscale.collectives.algorithms import NCCL_ALGORITHMS
        from willitscale.collectives.choice import fastest

        return fastest("all_reduce", size_bytes, self.ranks, self.network(), algorithms=NCCL_ALGORITHMS)

    def time(self, bucket_bytes) -> np.ndarray:
        """Seconds of each bucket's all-reduce (numpy array in, array out)."""
        sizes = np.asarray(bucket_bytes, dtype=float)
        if self.ranks == 1:
            return np.zeros_like(sizes)
        if self.measured_time is not None:
            return self.measured_time * sizes / self.measured_bytes / self.factor
        if sizes.size == 0:
            return sizes.copy()
        if self.flow is not None:  # simulated: per_byte x size + fixed; a faster link scales per_byte
            return np.where(sizes > 0, self.flow.per_byte / self.factor * sizes + self.flow.fixed, 0.0)
        return np.asarray(self.choice(sizes).cost.time, dtype=float).reshape(sizes.shape)

    @property
    def algorithm(self) -> str:
        if self.ranks == 1:
            return "none (one GPU)"
        if self.measured_time is not None:
            return "measured"
        if self.flow is not None:
            return f"{self.flow.call.algorithm} ({self.flow.call.channels} channels), flow-simulated"
        return "NCCL's choice per bucket"

    @property
    def why(self) -> str:
        if self.ranks == 1:
            return "a single GPU has nothing to synchronise"
        if self.measured_time is not None:
            return (f"scaled from a measured all-reduce of {format_size(self.measured_bytes)} in "
                    f"{format_time(self.measured_time)}")
        where = (f"{self.nodes} nodes x {self.gpus_per_node} GPUs: {self.intra_name} inside, "
                 f"{self.inter_name} across" if self.spans_nodes else
                 f"{self.gpus_per_node} GPUs on {self.intra_name}")
        if self.flow is not None:
            hot = self.flow.reference.links.hottest
            busiest = f"; busiest link {hot[0]['link']} ({hot[0]['tier']})" if hot else ""
            return f"{self.flow_name} over {where}{busiest}"
        return f"alpha-beta model of ring and double binary tree over {where}"

    def report(self, *, calls: int, time: float, exposed: float, total_bytes: float) -> CommReport:
        links = ((self.intra_name,) if self.gpus_per_node > 1 else ()) + (
            (self.inter_name,) if self.spans_nodes else ())
        algorithm, why = self.algorithm, self.why
        if self.measured_time is None and self.flow is None and self.ranks > 1 and total_bytes > 0:
            choice = self.choice(float(total_bytes) / max(calls, 1))
            algorithm = f"{choice.algorithm.value} (NCCL's choice for a mean bucket)"
            why = f"{self.why}. {choice.reason}"
        return CommReport(
            name="DDP gradient all-reduce", op="all_reduce",
            group=f"data parallel: {self.ranks} GPUs on {self.nodes} node(s)", ranks=self.ranks,
            bytes=total_bytes, calls=calls, time=time, exposed=exposed, links=links,
            algorithm=algorithm, why=why)


def _calibrated(scenario: Scenario, level: str):
    """The calibration's fit for ``level`` ("intra_node"/"inter_node"), if one was given."""
    calibration = scenario.calibration
    return None if calibration is None else calibration.link(level)


def gradient_allreduce(scenario: Scenario, gradient_bytes: float) -> GradientAllReduce:
    """The all-reduce cost model for ``scenario``'s data-parallel group.

    Links come from the cluster (bandwidth x efficiency, catalog latency) unless a calibration
    gives fitted figures for a level: its bandwidth is already what was achieved (no efficiency
    applied) and its latency the fitted alpha.
    """
    node = scenario.cluster.node
    measured = scenario.measured
    intra, nic = node.intra_link, node.nic
    intra_bw, intra_lat = node.usable_intra_bandwidth * intra.efficiency, intra.latency
    inter_bw, inter_lat = node.inter_node_bandwidth * nic.efficiency, nic.latency
    intra_name, inter_name = _intra_name(node), (
        f"{node.nics} x {_link_name(nic)}" if node.nics > 1 else _link_name(nic))
    fit = _calibrated(scenario, "intra_node")
    if fit is not None:
        intra_bw, intra_lat = fit.bandwidth, fit.latency
        intra_name += f" [calibrated: {format_bandwidth(fit.bandwidth)}, {format_time(fit.latency)}]"
    fit = _calibrated(scenario, "inter_node")
    if fit is not None:
        inter_bw, inter_lat = fit.bandwidth, fit.latency
        inter_name += f" [calibrated: {format_bandwidth(fit.bandwidth)}, {format_time(fit.latency)}]"
    flow = flow_name = None
    if scenario.network is not None and measured.allreduce_time is None and scenario.plan.dp > 1:
        flow, flow_name = scenario.network.all_reduce_model(scenario.cluster), scenario.network.describe()
    return GradientAllReduce(
        flow=flow, flow_name=flow_name or "",
        ranks=scenario.plan.dp, nodes=scenario.cluster.nodes, gpus_per_node=node.gpus_per_node,
        intra_bandwidth=intra_bw, intra_latency=intra_lat, inter_bandwidth=inter_bw,
        inter_latency=inter_lat, intra_name=intra_name, inter_name=inter_name,
        intra_line_rate=node.usable_intra_bandwidth, inter_line_rate=node.inter_node_bandwidth,
        measured_time=measured.allreduce_time,
        measured_bytes=measured.allreduce_size or (gradient_bytes if measured.allreduce_time else None),
    )


def _intra_name(node) -> str:
    if node.gpus_per_node == 1:
        return "no intra-node peer (1 GPU per node)"
    usable = node.usable_intra_bandwidth
    if usable >= node.intra_link.bandwidth:
        return _link_name(node.intra_link)
    label = node.intra_link.display_name or node.intra_link.name
    return (f"{label} ({format_bandwidth(usable)} one direction: the links to the "
            f"{node.gpus_per_node - 1} other GPU(s) in use of a {node.board_gpus}-GPU "
            f"{node.intra_topology})")


def _link_name(link) -> str:
    label = link.display_name or link.name
    return f"{label} ({format_bandwidth(link.bandwidth, bits=link.kind.inter_node)} one direction)"

"""The communication a data-parallel step issues and what it costs on the links it crosses.

DDP issues one all-reduce per gradient bucket over the data-parallel group: every GPU of the
cluster. Its ranks are placed node by node, so the group crosses:

* inside a node, each GPU's NVLink/NVSwitch (or PCIe) port: per-GPU one-direction bandwidth
  ``usable_intra_bandwidth x efficiency`` (on a fully meshed board only the links to the GPUs
  in use count: 2 GPUs of a 4-GPU HGX A100 share 4 of their 12 NVLinks, 100 GB/s);
* across nodes, the node's NICs, **shared by its GPUs**: ``nics x nic.bandwidth x efficiency``
  per node; with a NIC per GPU (``rails``) NCCL's rings leave the node through every GPU in
  turn, so each GPU's intra-node link carries ``(g-1)/g`` of a ring's bytes.

Each bucket's all-reduce is costed as the engine costs it, by the collective library the
scenario runs (:func:`~willitscale.collectives.lines.collective_lines` over the data-parallel
group): with **NCCL**, the (algorithm, protocol) NCCL's own tuning model picks for the bucket's
size and the time that pair achieves (docs/collectives.md, "NCCL as it runs"); with **Gloo**,
PyTorch's ring over TCP; with a calibration's fitted levels, their alpha-beta forms (ring and
double binary tree, on one level a flat :class:`~willitscale.collectives.network.LinkCost`, on
several a two-level :class:`~willitscale.collectives.network.Hierarchy`). A measured all-reduce
(``--allreduce-time``/``--allreduce-size``, "The Impact of GPU Networking") replaces the model:
a bucket then takes ``measured_time x bucket_bytes / measured_bytes``. The alpha-beta
:meth:`GradientAllReduce.choice` stays for the requirements' closed forms (the bytes an
algorithm moves through a level).

Which level limits (the one a fix must speed up) is decided by :mod:`willitscale.estimation.verdict.levers`
from the whole step, not assumed from whether the group spans nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from willitscale.collectives.algorithms import NCCL_ALGORITHMS
from willitscale.collectives.choice import fastest
from willitscale.collectives.line_time import with_contention
from willitscale.collectives.lines import cluster_links, collective_lines, line_time
from willitscale.collectives.network import Hierarchy, LinkCost
from willitscale.estimation.result import CommReport
from willitscale.scenario.scenario import Scenario
from willitscale.topology.placement import group_placement
from willitscale.units import format_size, format_time

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
    rails: bool = False  #: a NIC per GPU (see the module docstring)
    measured_time: float | None = None
    measured_bytes: float | None = None
    #: --network flow: the fabric and the slowdown it puts on the lines' bytes term ("": none)
    flow_name: str = ""
    backend: str = "alpha-beta"  #: how the engine costs the all-reduce (ClusterLinks.backend)
    lines: Any = None  #: the engine's lines for the data-parallel group (one plan)

    @property
    def spans_nodes(self) -> bool:
        return self.nodes > 1

    def network(self):
        intra = LinkCost(bandwidth=self.intra_bandwidth, latency=self.intra_latency,
                         name=self.intra_name)
        if not self.spans_nodes:
            return intra
        inter = LinkCost(bandwidth=self.inter_bandwidth, latency=self.inter_latency,
                         name=self.inter_name)
        return Hierarchy(ranks_per_node=self.gpus_per_node, intra=intra, inter=inter,
                         rails=self.rails)

    def choice(self, size_bytes):
        return fastest("all_reduce", size_bytes, self.ranks, self.network(), algorithms=NCCL_ALGORITHMS)

    def time(self, bucket_bytes) -> np.ndarray:
        """Seconds of each bucket's all-reduce (numpy array in, array out)."""
        sizes = np.asarray(bucket_bytes, dtype=float)
        if self.ranks == 1:
            return np.zeros_like(sizes)
        if self.measured_time is not None:
            return self.measured_time * sizes / self.measured_bytes
        if sizes.size == 0:
            return sizes.copy()
        if self.lines is not None:
            return np.where(sizes > 0, line_time(self.lines, sizes.reshape(1, -1))[0].reshape(sizes.shape), 0.0)
        return np.asarray(self.choice(sizes).cost.time, dtype=float).reshape(sizes.shape)

    def pick(self, size_bytes: float) -> tuple[str, float]:
        """(the candidate the engine runs for one all-reduce of ``size_bytes``, its seconds)."""
        time, index = line_time(self.lines, np.array([[float(size_bytes)]]), with_choice=True)
        j = int(index[0, 0])
        name = self.lines.algorithms[j]
        measured = self.lines.measured  # a calibration's [[collective]] line times this pick
        if measured is not None and np.isfinite(measured[self.lines.rows_of_plans()[0], j, 0]):
            name += " (measured)"
        return name, float(time[0, 0])

    @property
    def algorithm(self) -> str:
        if self.ranks == 1:
            return "none (one GPU)"
        if self.measured_time is not None:
            return "measured"
        if self.backend == "nccl":
            return "NCCL's pick per bucket (algorithm/protocol by NCCL's own tuning model)"
        if self.backend == "gloo":
            return "Gloo's ring (PyTorch's Gloo backend: ring over TCP)"
        return "the alpha-beta model's NCCL-like choice per bucket"

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
        if self.backend == "nccl":
            return (f"NCCL v2.30's tuning model picks the algorithm and protocol over {where}; the "
                    "time is what that pair achieves (NCCL's terms corrected to published "
                    "nccl-tests sweeps, docs/collectives.md)"
                    + (f"; {self.flow_name}" if self.flow_name else ""))
        if self.backend == "gloo":
            return (f"ProcessGroupGloo runs a ring all-reduce over TCP on {where} (one alpha per "
                    "ring step: 2(n-1) of them), whatever the size"
                    + (f"; {self.flow_name}" if self.flow_name else ""))
        return (f"alpha-beta model of ring and double binary tree over {where}"
                + ("; a NIC per GPU: the ring leaves each node through every GPU in turn"
                   if self.rails and self.spans_nodes and self.gpus_per_node > 1 else ""))

    def report(self, *, calls: int, time: float, exposed: float, total_bytes: float) -> CommReport:
        links = ((self.intra_name,) if self.gpus_per_node > 1 else ()) + (
            (self.inter_name,) if self.spans_nodes else ())
        algorithm, why = self.algorithm, self.why
        if self.measured_time is None and self.ranks > 1 and total_bytes > 0:
            mean = float(total_bytes) / max(calls, 1)
            if self.lines is not None:
                name, seconds = self.pick(mean)
                library = "Gloo" if self.backend == "gloo" else "NCCL"
                algorithm = f"{library} {name.removeprefix('gloo ')} (for a mean bucket of {format_size(mean)})"
                why = f"{self.why}. A mean bucket of {format_size(mean)} takes {format_time(seconds)}"
            else:
                choice = self.choice(mean)
                algorithm = f"{choice.algorithm.value} (the model's NCCL-like choice for a mean bucket)"
                why = f"{self.why}. {choice.reason}"
        return CommReport(
            name="DDP gradient all-reduce", op="all_reduce",
            group=f"data parallel: {self.ranks} GPUs on {self.nodes} node(s)", ranks=self.ranks,
            bytes=total_bytes, calls=calls, time=time, exposed=exposed, links=links,
            algorithm=algorithm, why=why)


def gradient_allreduce(scenario: Scenario, gradient_bytes: float, links=None) -> GradientAllReduce:
    """The all-reduce cost model for ``scenario``'s data-parallel group, on ``links`` (default
    :func:`~willitscale.collectives.lines.cluster_links`: the catalog's links, or a calibration's fitted
    figures for a level, whose bandwidth is already what was achieved)."""

    links = links or cluster_links(scenario)
    measured = scenario.measured
    flow_name = ""
    lines = None
    if (links.backend in ("nccl", "gloo") or links.curves) and scenario.plan.dp > 1:
        plan = scenario.plan
        deg = {k: np.array([getattr(plan, k)]) for k in ("tp", "cp", "ep", "dp", "pp")}
        place = group_placement("dp", deg, links.gpus_per_node, scenario.options.rank_order)
        lines = collective_lines("all_reduce", place, links)
    network = None
    if lines is not None and scenario.network is not None:  # as the engine runs it
        from willitscale.step.flow_network import network_for

        network = network_for(scenario)
    if network is not None and hasattr(network, "plan_flow"):
        flow = network.plan_flow(scenario)
        from willitscale.step.flow_network import column_patterns

        ring, tree = flow.slowdown("dp_ar"), flow.slowdown("dp_ar", "tree")
        lines = with_contention(lines, np.array([[tree if p == "tree" else ring
                                                  for p in column_patterns(lines.algorithms)]]))
        flow_name = (f"{network.describe()}: the fabric slows its bytes x{ring:.3g} as rings, "
                     f"x{tree:.3g} as trees")
    return GradientAllReduce(
        flow_name=flow_name, backend=links.backend, lines=lines,
        ranks=scenario.plan.dp, nodes=scenario.cluster.nodes, gpus_per_node=links.gpus_per_node,
        intra_bandwidth=links.intra_bandwidth, intra_latency=links.intra_latency,
        inter_bandwidth=links.inter_bandwidth, inter_latency=links.inter_latency,
        intra_name=links.intra_name, inter_name=links.inter_name, rails=links.rails,
        measured_time=measured.allreduce_time,
        measured_bytes=measured.allreduce_size or (gradient_bytes if measured.allreduce_time else None),
    )

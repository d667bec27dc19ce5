"""Gloo as PyTorch runs it: :func:`gloo_cost` of one collective.

ProcessGroupGloo (torch 2.13; gloo commit 70dc360) uses Gloo's TCP transport and never picks an
algorithm by size (research notes: /work/research/nccl-model/GLOO.md, our reading of
``gloo/allreduce.cc``, ``ProcessGroupGloo.cpp``, ``ProcessGroupGlooCuda.cpp``):

* **all_reduce**: a ring (reduce-scatter then all-gather) in segments of at most 1 MiB, two in
  flight: ``2(n-1)`` steps of ``S/n`` bytes, the reduction done on the CPU;
* **reduce_scatter**: one full all_reduce of the input (``reduce_scatter_tensor`` clones it,
  all-reduces the clone and keeps its shard): it costs what an all_reduce costs;
* **all_gather**: a ring, ``n-1`` steps of ``S/n``;
* **broadcast**: a binomial tree sending the whole buffer each round, ``ceil(log2 n)`` rounds;
* **reduce**: a ring reduce-scatter, then every rank sends its reduced chunk to the root;
* **all_to_all**, **send_recv**: direct sends;
* CUDA tensors go through pinned host memory: a device-to-host copy before, a host-to-device
  copy after, serial with the collective (``AsyncAllreduceCUDAHostWork``): ``2 S`` over PCIe.

Costs are the alpha-beta forms of :mod:`willitscale.collectives` (flat or two-level) with those
algorithms; ``alpha`` and ``B`` of a Gloo run come from a calibration (``bench collectives``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from willitscale.collectives.cost import collective_cost
from willitscale.collectives.network import Hierarchy, LinkCost
from willitscale.collectives.ops import Op
from willitscale.collectives.two_level import split_ranks

__all__ = ["GLOO_ALGORITHM", "GlooCost", "gloo_cost", "staging_bandwidth"]

#: PCIe x16 one-direction bytes/s after 128b/130b (Gen3-5) or FLIT (Gen6) encoding
#: (links.toml's pcie3..pcie6 entries)
PCIE_X16_BYTES = {3: 15.754e9, 4: 31.508e9, 5: 63.015e9, 6: 121.0e9}
#: the catalog's achievable fraction of PCIe ([defaults.pcie] in links.toml: ~80%)
PCIE_EFFICIENCY = 0.80


def staging_bandwidth(pcie_gen: int | None) -> float:
    """Bytes/s of the pinned host copies of a CUDA tensor over the GPU's PCIe x16 link (0 for an
    unknown generation, e.g. a CPU device, which has nothing to stage)."""
    return PCIE_X16_BYTES[pcie_gen] * PCIE_EFFICIENCY if pcie_gen in PCIE_X16_BYTES else 0.0

#: what Gloo runs for each op (names for reports)
GLOO_ALGORITHM = {
    Op.ALL_REDUCE: "ring", Op.REDUCE_SCATTER: "ring all_reduce (reduce_scatter runs a full all_reduce)",
    Op.ALL_GATHER: "ring", Op.BROADCAST: "binomial tree", Op.REDUCE: "ring reduce-scatter + gather",
    Op.ALL_TO_ALL: "direct", Op.SEND_RECV: "direct",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GlooCost:
    """One collective on Gloo (seconds)."""

    op: Op
    algorithm: str
    time: float
    latency_time: float
    bandwidth_time: float
    staging_time: float  #: pinned host copies of a CUDA tensor (0 for CPU tensors)
    formula: str


def _levels(network):
    if isinstance(network, Hierarchy):
        return network.intra, network.inter, network.ranks_per_node
    return network, network, None


def _binomial(size: float, n: int, network) -> tuple[float, float, str]:
    """Rounds ``ceil(log2 n)``, the whole buffer each round; across nodes, rounds whose partner
    is ``>= g`` ranks away cross the node's NIC (ranks placed node by node)."""
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    intra, inter, g = _levels(network)
    if g is None or n <= g:
        return rounds * intra.latency, rounds * size / intra.bandwidth, "ceil(log2 n)·(α + S/B)"
    inside = math.ceil(math.log2(g)) if g > 1 else 0
    across = rounds - inside
    lat = inside * intra.latency + across * inter.latency
    bw = inside * size / intra.bandwidth + across * size / inter.bandwidth
    return lat, bw, "ceil(log2 g)·(α1 + S/B1) + ceil(log2 m)·(α2 + S/B2)"


def _reduce(size: float, n: int, network) -> tuple[float, float, str]:
    """Ring reduce-scatter, then ``n-1`` chunks of ``S/n`` into the root's link."""
    rs = collective_cost(Op.REDUCE_SCATTER, "ring", size, n, network)
    intra, inter, g = _levels(network)
    into = inter if g is not None and n > g else intra
    lat = float(rs.latency_time) + (n - 1) * into.latency
    bw = float(rs.bandwidth_time) + (n - 1) / n * size / into.bandwidth
    return lat, bw, "ring reduce-scatter + (n-1)·(α + S/(nB)) into the root"


def gloo_cost(op: Op | str, size: float, ranks: int, network: LinkCost | Hierarchy, *,
              staging_bandwidth: float = 0.0) -> GlooCost:
    """Seconds of ``op`` on ``ranks`` ranks over ``network`` as ProcessGroupGloo runs it;
    ``staging_bandwidth`` > 0 for CUDA tensors (their pinned copies' PCIe bandwidth)."""
    op = Op(op)
    if isinstance(network, Hierarchy):
        split_ranks(np.asarray(float(ranks)), network.ranks_per_node)  # whole nodes, or an error
    if ranks <= 1 or size <= 0:
        return GlooCost(op=op, algorithm=GLOO_ALGORITHM[op], time=0.0, latency_time=0.0,
                        bandwidth_time=0.0, staging_time=0.0, formula="nothing moves")
    if op is Op.BROADCAST:
        lat, bw, formula = _binomial(size, ranks, network)
    elif op is Op.REDUCE:
        lat, bw, formula = _reduce(size, ranks, network)
    else:
        as_op = Op.ALL_REDUCE if op is Op.REDUCE_SCATTER else op
        algorithm = "direct" if op in (Op.ALL_TO_ALL, Op.SEND_RECV) else "ring"
        c = collective_cost(as_op, algorithm, size, ranks, network)
        lat, bw, formula = float(c.latency_time), float(c.bandwidth_time), c.formula
    staging = 2 * size / staging_bandwidth if staging_bandwidth > 0 and op not in (
        Op.ALL_TO_ALL, Op.SEND_RECV) else 0.0
    if staging:
        formula += " + 2·S/P  (CUDA tensor staged through pinned host memory)"
    return GlooCost(op=op, algorithm=GLOO_ALGORITHM[op], time=lat + bw + staging, latency_time=lat,
                    bandwidth_time=bw, staging_time=staging, formula=formula)

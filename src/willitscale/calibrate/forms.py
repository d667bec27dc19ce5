"""The alpha-beta cost forms the calibration fits: those of :mod:`willitscale.collectives`.

Fitting and predicting with the same functions the estimate uses means a calibrated latency
and bandwidth mean exactly what the estimate takes them to mean. Each op is fitted in the form
of the algorithm the libraries run for it on a flat level: the ring for all_reduce,
reduce_scatter, all_gather, broadcast and reduce (Gloo's and NCCL's bandwidth-optimal choice
for large messages), direct sends for all_to_all and send_recv.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.cost import collective_cost
from willitscale.collectives.network import Hierarchy, LinkCost
from willitscale.collectives.ops import Op

__all__ = ["default_algorithm", "flat_time", "library_algorithm", "two_level_time"]


def default_algorithm(op: Op) -> str:
    return "direct" if Op(op) in (Op.ALL_TO_ALL, Op.SEND_RECV) else "ring"


def library_algorithm(backend: str, op: Op) -> str:
    """The algorithm a run's library runs for ``op``, named with the library: "Gloo ring"
    (ProcessGroupGloo runs nothing else, docs/collectives.md "Gloo"), "NCCL ring" (the form a
    calibrated NCCL level is fitted in), "direct" sends for all_to_all and send_recv."""
    library = {"gloo": "Gloo", "nccl": "NCCL"}.get(str(backend).lower(), str(backend))
    return f"{library} {default_algorithm(op)}".strip()


def flat_time(op: Op, algorithm: str, size, ranks, *, bandwidth: float, latency: float):
    """Seconds of ``op`` over ``ranks`` ranks on one level (numpy arrays broadcast)."""
    link = LinkCost(bandwidth=bandwidth, latency=latency)
    return np.asarray(collective_cost(op, algorithm, np.asarray(size, dtype=float),
                                      np.asarray(ranks, dtype=float), link).time, dtype=float)


def two_level_time(op: Op, algorithm: str, size, ranks, *, ranks_per_node: int,
                   intra: tuple[float, float], inter: tuple[float, float]):
    """Seconds on two levels; ``intra``/``inter`` are (bandwidth, latency); the inter-node
    bandwidth is the node's (all its NICs)."""
    net = Hierarchy(ranks_per_node=ranks_per_node,
                    intra=LinkCost(bandwidth=intra[0], latency=intra[1]),
                    inter=LinkCost(bandwidth=inter[0], latency=inter[1]))
    return np.asarray(collective_cost(op, algorithm, np.asarray(size, dtype=float),
                                      np.asarray(ranks, dtype=float), net).time, dtype=float)

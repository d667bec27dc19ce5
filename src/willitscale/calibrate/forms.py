"""The alpha-beta cost forms the calibration fits: those of :mod:`willitscale.collectives`.

Fitting and predicting with the same functions the estimate uses means a calibrated latency
and bandwidth mean exactly what the estimate takes them to mean. Each op is fitted in the form
of the algorithm the libraries run for it on a flat level: the ring for all_reduce,
reduce_scatter, all_gather, broadcast and reduce (Gloo's and NCCL's bandwidth-optimal choice
for large messages), direct sends for all_to_all and send_recv.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.ops import Op

__all__ = ["default_algorithm", "flat_time", "two_level_time", "HAVE_COST_MODEL"]

try:  # the collectives cost model (branch `collectives`); until it lands, the flat forms below
    from willitscale.collectives.cost import collective_cost as _collective_cost
    from willitscale.collectives.network import Hierarchy as _Hierarchy
    from willitscale.collectives.network import LinkCost as _LinkCost

    HAVE_COST_MODEL = True
except ImportError:  # pragma: no cover - depends on what is merged
    HAVE_COST_MODEL = False


def default_algorithm(op: Op) -> str:
    return "direct" if Op(op) in (Op.ALL_TO_ALL, Op.SEND_RECV) else "ring"


def _fallback_terms(op: Op, algorithm: str, S, n):
    """(latency terms, bytes on the critical path) of the flat ring and direct forms.

    Ring: all_reduce ``2(n-1)`` steps moving ``2(n-1)/n S``; reduce_scatter and all_gather
    ``n-1`` steps of ``(n-1)/n S``; broadcast and reduce a pipelined chain, ``n-1`` hops and
    ``S``. Direct: all_to_all ``n-1`` messages and ``(n-1)/n S``; send_recv one message of ``S``.
    """
    op = Op(op)
    if algorithm == "ring":
        if op is Op.ALL_REDUCE:
            return 2 * (n - 1), 2 * (n - 1) / n * S
        if op in (Op.REDUCE_SCATTER, Op.ALL_GATHER):
            return n - 1, (n - 1) / n * S
        if op in (Op.BROADCAST, Op.REDUCE):
            return n - 1, S + 0 * n
    if algorithm == "direct":
        if op is Op.ALL_TO_ALL:
            return n - 1, (n - 1) / n * S
        if op is Op.SEND_RECV:
            return 1 + 0 * n, S + 0 * n
    raise NotImplementedError(f"{algorithm} for {op.value} needs willitscale.collectives.cost")


def flat_time(op: Op, algorithm: str, size, ranks, *, bandwidth: float, latency: float):
    """Seconds of ``op`` over ``ranks`` ranks on one level (numpy arrays broadcast)."""
    size, ranks = np.asarray(size, dtype=float), np.asarray(ranks, dtype=float)
    if HAVE_COST_MODEL:
        link = _LinkCost(bandwidth=bandwidth, latency=latency)
        return np.asarray(_collective_cost(op, algorithm, size, ranks, link).time, dtype=float)
    alphas, wire = _fallback_terms(op, algorithm, size, ranks)
    return np.where(ranks > 1, alphas * latency + wire / bandwidth, 0.0)


def two_level_time(op: Op, algorithm: str, size, ranks, *, ranks_per_node: int,
                   intra: tuple[float, float], inter: tuple[float, float]):
    """Seconds on two levels; ``intra``/``inter`` are (bandwidth, latency). Needs the
    collectives cost model."""
    if not HAVE_COST_MODEL:  # pragma: no cover - depends on what is merged
        raise NotImplementedError("runs with several nodes of several ranks need "
                                  "willitscale.collectives.cost (two-level forms)")
    net = _Hierarchy(ranks_per_node=ranks_per_node,
                     intra=_LinkCost(bandwidth=intra[0], latency=intra[1]),
                     inter=_LinkCost(bandwidth=inter[0], latency=inter[1]))
    return np.asarray(_collective_cost(op, algorithm, np.asarray(size, dtype=float),
                                       np.asarray(ranks, dtype=float), net).time, dtype=float)

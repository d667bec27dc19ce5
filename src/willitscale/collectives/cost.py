"""The cost of one collective under one algorithm: :func:`collective_cost` and its result.

>>> from willitscale.collectives import LinkCost, collective_cost
>>> c = collective_cost("all_reduce", "ring", 1e9, 8, LinkCost(bandwidth=100e9, latency=0.0))
>>> round(c.time, 6), round(c.busbw / 1e9, 6), c.bytes_sent_per_rank
(0.0175, 100.0, 1750000000.0)

Sizes and rank counts may be numpy arrays (they broadcast): a sweep is one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.collectives.algorithms import (
    Algorithm,
    NotApplicable,
    applicable_algorithms,
    not_applicable_reason,
    parse_algorithm,
)
from willitscale.collectives.flat import Terms, flat_terms
from willitscale.collectives.metrics import busbw_factor
from willitscale.collectives.network import DEFAULT_LINK, Hierarchy, LinkCost, Network
from willitscale.collectives.ops import Op, parse_op
from willitscale.collectives.two_level import two_level_terms
from willitscale.errors import ConfigError

__all__ = ["JSON_DIGITS", "CollectiveCost", "collective_cost", "collective_costs"]

#: significant digits kept in JSON output: the model is nowhere near 1e-12 accurate, and rounding
#: keeps 2·7/8·1e9/1e11 printing as 0.0175 rather than 0.017499999999999998.
JSON_DIGITS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCost:
    """One collective under one algorithm. SI units; numeric fields are numpy arrays for array inputs.

    ``size`` follows nccl-tests: all_gather's gathered output, reduce_scatter's input, all_to_all's
    per-rank send buffer, the buffer for the others. "Node" is a rank on a flat network and a
    server (its NICs) on a two-level one; the parameter server counts as a node.
    """

    op: Op
    algorithm: Algorithm
    size: object  #: bytes (nccl-tests convention)
    ranks: object
    time: object  #: seconds: latency_time + bandwidth_time
    latency_time: object  #: seconds of latency terms (rounds x alpha)
    bandwidth_time: object  #: seconds moving bytes through the bottleneck link
    rounds: object  #: latency terms on the critical path
    bytes_sent_per_rank: object  #: bytes the busiest rank sends
    peak_node_bytes_in: object  #: bytes into the busiest node over the whole operation
    peak_node_bytes_out: object  #: bytes out of the busiest node over the whole operation
    peak_node_bytes_per_round: object  #: most bytes into one node in one round (Wei and Xia's lecture's "peak node bandwidth")
    fan_in: object  #: most senders into one node at once
    algbw: object  #: bytes/s: size / time (0 when nothing moves)
    busbw: object  #: bytes/s: algbw x nccl-tests' factor for the op
    formula: str  #: the cost formula, for reports

    @property
    def bound(self) -> str:
        """``"latency"`` or ``"bandwidth"``: which term is larger (scalar results)."""
        return "latency" if float(self.latency_time) > float(self.bandwidth_time) else "bandwidth"

    def to_json(self) -> dict:
        """Unit-named keys (``time_s``, ``busbw_GBps``, ...), numbers rounded to :data:`JSON_DIGITS`."""
        r = _rounded
        return {
            "op": self.op.value,
            "algorithm": self.algorithm.value,
            "size_bytes": r(self.size),
            "ranks": r(self.ranks, integer=True),
            "time_s": r(self.time),
            "latency_time_s": r(self.latency_time),
            "bandwidth_time_s": r(self.bandwidth_time),
            "rounds": r(self.rounds, integer=True),
            "bytes_sent_per_rank": r(self.bytes_sent_per_rank),
            "peak_node_bytes_in": r(self.peak_node_bytes_in),
            "peak_node_bytes_out": r(self.peak_node_bytes_out),
            "peak_node_bytes_per_round": r(self.peak_node_bytes_per_round),
            "fan_in": r(self.fan_in, integer=True),
            "algbw_GBps": r(np.asarray(self.algbw) / 1e9),
            "busbw_GBps": r(np.asarray(self.busbw) / 1e9),
            "formula": self.formula,
        }


def _rounded(value, *, integer: bool = False):
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"non-finite value in a collective cost: {value!r}")
    one = (lambda x: round(x)) if integer else (lambda x: float(f"{x:.{JSON_DIGITS}g}"))
    if arr.ndim == 0:
        return one(float(arr))
    return [one(float(x)) for x in arr.ravel()] if arr.ndim == 1 else np.vectorize(one)(arr).tolist()


def _as_size(size):
    try:
        arr = np.asarray(size, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError("size", size, "a number of bytes >= 0 (parse strings with parse_size)") from None
    if isinstance(size, bool) or not np.all(np.isfinite(arr) & (arr >= 0)):
        raise ConfigError("size", size, "a finite number of bytes >= 0")
    return arr


def _as_ranks(ranks):
    try:
        arr = np.asarray(ranks, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError("ranks", ranks, "an integer >= 1") from None
    if isinstance(ranks, bool) or not np.all(np.isfinite(arr) & (arr >= 1) & (arr == np.floor(arr))):
        raise ConfigError("ranks", ranks, "an integer >= 1")
    return arr


def _scalar_or_array(x, scalar: bool, integer: bool = False):
    if not scalar:
        return np.asarray(x, dtype=float)
    value = float(np.asarray(x))
    return round(value) if integer else value


def _network(network) -> Network:
    if network is None:
        return DEFAULT_LINK
    if not isinstance(network, (LinkCost, Hierarchy)):
        raise ConfigError("network", network, "a LinkCost (one level) or a Hierarchy (two levels)")
    return network


def _terms(op: Op, algorithm: Algorithm, S, n, network: Network) -> Terms:
    if isinstance(network, Hierarchy):
        return two_level_terms(op, algorithm, S, n, network)
    return flat_terms(op, algorithm, S, n, network.bandwidth, network.latency)


def collective_cost(op: Op | str, algorithm: Algorithm | str, size, ranks, network: Network | None = None) -> CollectiveCost:
    """Alpha-beta cost of ``op`` on ``ranks`` ranks under ``algorithm``.

    ``size`` in bytes (nccl-tests convention), ``ranks`` >= 1; both may be numpy arrays.
    ``network`` is a :class:`LinkCost` or a :class:`Hierarchy`; ``None`` means :data:`DEFAULT_LINK`.
    Raises :class:`NotApplicable` (a ``ConfigError``) if the algorithm cannot run the op there.
    """
    op = parse_op(op) if not isinstance(op, Op) else op
    algorithm = parse_algorithm(algorithm) if not isinstance(algorithm, Algorithm) else algorithm
    network = _network(network)
    reason = not_applicable_reason(op, algorithm, network)
    if reason is not None:
        raise NotApplicable(op, algorithm, reason)
    S, n = _as_size(size), _as_ranks(ranks)
    S, n = np.broadcast_arrays(S, n)
    t = _terms(op, algorithm, S, n, network)
    time = t.latency_time + t.bandwidth_time
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(time > 0, S / np.where(time > 0, time, 1.0), 0.0)
    busbw = algbw * busbw_factor(op, n)
    values = {
        "size": S, "ranks": n, "time": time, "latency_time": t.latency_time,
        "bandwidth_time": t.bandwidth_time, "rounds": t.rounds, "bytes_sent_per_rank": t.sent,
        "peak_node_bytes_in": t.node_in, "peak_node_bytes_out": t.node_out,
        "peak_node_bytes_per_round": t.node_round, "fan_in": t.fan_in, "algbw": algbw, "busbw": busbw,
    }
    scalar = all(np.ndim(v) == 0 for v in values.values())
    integer = {"ranks", "rounds", "fan_in"}
    values = {k: _scalar_or_array(v, scalar, k in integer) for k, v in values.items()}
    return CollectiveCost(op=op, algorithm=algorithm, formula=t.formula, **values)


def collective_costs(op: Op | str, size, ranks, network: Network | None = None,
                     algorithms=None) -> tuple[CollectiveCost, ...]:
    """:func:`collective_cost` for every applicable algorithm (or the ``algorithms`` given)."""
    op = parse_op(op) if not isinstance(op, Op) else op
    network = _network(network)
    if algorithms is None:
        chosen = applicable_algorithms(op, network)
    else:
        chosen = tuple(a if isinstance(a, Algorithm) else parse_algorithm(a) for a in algorithms)
    return tuple(collective_cost(op, a, size, ranks, network) for a in chosen)


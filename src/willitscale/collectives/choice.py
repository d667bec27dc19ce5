"""Pick the algorithm for a collective, the way NCCL would: the fastest, with a sensible tie-break.

The alpha-beta model says recursive halving-doubling and the ring move exactly the same bytes at a
power-of-two rank count, so on bandwidth alone they tie; the model is far from accurate to 1%, so a
difference that small is no reason to pick an algorithm NCCL does not run. :func:`fastest` therefore
takes every candidate within ``tolerance`` of the minimum and picks the first in
:data:`~willitscale.collectives.algorithms.PREFERENCE` (ring, double binary tree, hierarchical,
direct, then the others). The result says which algorithm the model found strictly fastest too.

That reproduces NCCL's behaviour qualitatively: ring for large messages, the (double binary) tree
or halving-doubling for small messages at many ranks, hierarchical when the node's NICs are much
slower than its NVLink.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.collectives.algorithms import (
    NCCL_ALGORITHMS,
    PREFERENCE,
    Algorithm,
    NotApplicable,
    not_applicable_reason,
    parse_algorithm,
)
from willitscale.collectives.cost import CollectiveCost, collective_costs
from willitscale.collectives.network import DEFAULT_LINK, Network
from willitscale.collectives.ops import Op, parse_op
from willitscale.errors import ConfigError
from willitscale.units import format_time

__all__ = ["DEFAULT_TOLERANCE", "Choice", "fastest", "first_within"]

#: two algorithms whose times differ by less than this fraction count as a tie
DEFAULT_TOLERANCE = 0.01

_NUMERIC = (
    "size", "ranks", "time", "latency_time", "bandwidth_time", "rounds", "bytes_sent_per_rank",
    "peak_node_bytes_in", "peak_node_bytes_out", "peak_node_bytes_per_round", "fan_in", "algbw", "busbw",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """The chosen algorithm for one collective, why, and every candidate's cost.

    For array inputs ``algorithm`` and ``model_fastest`` are arrays of names and ``cost`` gathers
    each element's chosen cost (its ``algorithm`` field is then the array of names too).
    """

    op: Op
    algorithm: object  #: the chosen Algorithm (array of names for array inputs)
    cost: CollectiveCost  #: the chosen algorithm's cost
    model_fastest: object  #: the strictly fastest Algorithm in the model (may differ within tolerance)
    candidates: tuple[CollectiveCost, ...]  #: every algorithm considered, in preference order
    tolerance: float
    reason: str  #: one or two sentences with the numbers

    def __repr__(self) -> str:
        if not isinstance(self.algorithm, Algorithm):
            return f"Choice({self.op.value}: {np.size(self.algorithm)} sizes)"
        return (f"Choice({self.op.value}: {self.algorithm.value}, "
                f"{format_time(float(self.cost.time))}, of {len(self.candidates)} candidates)")

    def to_json(self) -> dict:
        return {
            "fastest": _name(self.algorithm),
            "model_fastest": _name(self.model_fastest),
            "tolerance": self.tolerance,
            "reason": self.reason,
        }


def _name(value):
    if isinstance(value, Algorithm):
        return value.value
    return np.asarray(value).tolist()


def _candidates(op: Op, network: Network, algorithms) -> tuple[Algorithm, ...]:
    """The given algorithms that can run ``op`` here, in preference order; none is an error."""
    chosen = [a if isinstance(a, Algorithm) else parse_algorithm(a) for a in algorithms]
    if not chosen:
        raise ConfigError("algorithms", algorithms, "at least one algorithm")
    usable = [a for a in chosen if not_applicable_reason(op, a, network) is None]
    if not usable:
        raise NotApplicable(op, chosen[0], not_applicable_reason(op, chosen[0], network))
    return tuple(sorted(set(usable), key=PREFERENCE.index))


def first_within(times, tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """Per element, the index of the first candidate (rows of ``times``, in preference order)
    whose time is within ``tolerance`` of the fastest: the choice rule of :func:`fastest`."""
    times = np.asarray(times, dtype=float)
    within = times <= times.min(axis=0) * (1 + tolerance) + 1e-300
    return np.argmax(within, axis=0)


def fastest(op: Op | str, size, ranks, network: Network | None = None, *, algorithms=None,
            tolerance: float = DEFAULT_TOLERANCE) -> Choice:
    """Choose the algorithm for ``op``: the fastest, ties within ``tolerance`` going to NCCL's.

    ``algorithms`` restricts the candidates (e.g. :data:`NCCL_ALGORITHMS`; those that cannot run
    ``op`` on ``network`` are skipped); by default every applicable one competes. Sizes and ranks
    may be arrays: the choice is then per element. Raises ``NotApplicable`` if none can run ``op``.
    """
    op = parse_op(op) if not isinstance(op, Op) else op
    network = DEFAULT_LINK if network is None else network
    if not 0 <= tolerance < 1:
        raise ConfigError("tolerance", tolerance, "a fraction in [0, 1)")
    if algorithms is None:
        costs = collective_costs(op, size, ranks, network)
    else:
        costs = collective_costs(op, size, ranks, network, algorithms=_candidates(op, network, algorithms))
    times = np.stack(np.broadcast_arrays(*[np.asarray(c.time, dtype=float) for c in costs]))
    index = first_within(times, tolerance)
    strict = np.argmin(times, axis=0)
    names = np.array([c.algorithm.value for c in costs], dtype=object)
    if index.ndim == 0:
        i, j = int(index), int(strict)
        chosen = costs[i]
        return Choice(op=op, algorithm=chosen.algorithm, cost=chosen, model_fastest=costs[j].algorithm,
                      candidates=costs, tolerance=tolerance, reason=_reason(costs, i, j, tolerance))
    gathered = {f: _take(costs, f, index) for f in _NUMERIC}
    cost = CollectiveCost(op=op, algorithm=names[index], formula="per element: see candidates", **gathered)
    return Choice(op=op, algorithm=names[index], cost=cost, model_fastest=names[strict], candidates=costs,
                  tolerance=tolerance, reason="chosen per element: the fastest within "
                  f"{tolerance:.0%} of the minimum, ties going to {', '.join(a.value for a in PREFERENCE[:3])}")


def _take(costs, field, index):
    stacked = np.stack(np.broadcast_arrays(*[np.asarray(getattr(c, field), dtype=float) for c in costs]))
    stacked = np.broadcast_to(stacked, (len(costs), *index.shape))
    return np.take_along_axis(stacked, index[None, ...], axis=0)[0]


def _reason(costs: tuple[CollectiveCost, ...], i: int, j: int, tolerance: float) -> str:
    chosen = costs[i]
    if float(chosen.time) == 0:
        return "with one rank (or nothing to send) every algorithm costs 0; ring is the default"
    name, t = chosen.algorithm.value, float(chosen.time)
    if i != j:
        fast = costs[j]
        why = "NCCL runs it" if chosen.algorithm in NCCL_ALGORITHMS else "it comes first in the preference order"
        text = (f"{name} ({format_time(t)}) is within {tolerance:.0%} of the model's fastest, "
                f"{fast.algorithm.value} ({format_time(float(fast.time))}), and is preferred because {why}")
    else:
        others = sorted((c for k, c in enumerate(costs) if k != i), key=lambda c: float(c.time))
        text = f"{name} is the fastest ({format_time(t)})"
        if others:
            r = others[0]
            text += f"; next is {r.algorithm.value} at {format_time(float(r.time))} (+{float(r.time) / t - 1:.0%})"
    lat = float(chosen.latency_time) / t
    text += (f". It is {chosen.bound}-bound: {lat:.0%} of its time is latency ({chosen.rounds} rounds) "
             f"and {1 - lat:.0%} moving bytes")
    return text + "."

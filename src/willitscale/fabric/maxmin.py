"""Max-min fair rates by progressive filling (Bertsekas & Gallager, *Data Networks*, 6.5.2).

All unfrozen flows' rates rise together - the *level*; when a link fills up, every flow crossing
it is frozen at the level; repeat until every flow is frozen. A flow may put only a fraction of
its bytes on a link (a sprayed flow splits over parallel paths): link ``e`` then carries
``sum_f frac[f, e] * rate[f]``, and the result is the weighted max-min fair allocation.

Filling links in order of level takes one round per distinct rate, and a congested fabric has
thousands (16,360 among 188,416 flows on a 65,536-GPU fat-tree step). This module freezes many
levels per round, exactly:

* A link with capacity ``c`` left after its frozen flows and unfrozen weight ``W`` (sum of its
  unfrozen flows' fractions) fills at level ``fill = c / W`` if none of its flows freezes first.
* Freezing a flow at a level no higher than the fill level of each of its links never lowers a
  link's fill level: ``(c - w L) / (W - w) >= c / W`` when ``L <= c / W``.
* So a link whose fill level is no higher than that of every link its unfrozen flows cross (its
  *neighbours*) fills at exactly its fill level: its flows could only freeze earlier at a
  neighbour filling first, and a neighbour's fill level is no lower and never drops. Progressive
  filling freezes its flows at that level, whatever happens elsewhere.

Each round freezes the flows of every such local minimum at once (the lowest link is always one,
so every round makes progress). A round costs O(entries of the unfrozen flows), and rounds
number the longest chain of levels that depend on each other - 15 for the 16,360 levels above.
Links within a relative ``1e-12`` of each other count as tied (rounding); the rates are exact up
to rounding. The reference solver (:mod:`willitscale.fabric.maxmin_reference`, one level per
round) also counts a link full once less than ``1e-9`` of its capacity is left; they agree to
that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = ["max_min_fair", "progressive_filling"]

#: a link whose unfrozen weight (sum of fractions) is below this carries no unfrozen flow
_NO_WEIGHT = 1e-12
#: fill levels closer than this (relative) count as tied: rounding, not a different level
_TIE = 1e-12


def entries_of(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions in a CSR ``indices``/``data`` array of the entries of ``rows``, row by row."""
    # ndarray methods, not np.* functions: this runs a few times per simulated event, on small
    # arrays, where numpy's function wrappers cost as much as the work
    starts = indptr[rows]
    return positions(starts, indptr[rows + 1] - starts)


def positions(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[0], ..., starts[0] + counts[0] - 1, starts[1], ...``: the positions of runs."""
    if counts.size == 1:
        first = int(starts[0])
        return np.arange(first, first + int(counts[0]))
    ends = counts.cumsum()
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total) + (starts - ends + counts).repeat(counts)


def run_lengths(starts: np.ndarray, n: int) -> np.ndarray:
    """Lengths of the runs of ``n`` entries that begin at ``starts`` (ascending, from 0)."""
    counts = np.empty_like(starts)
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = n - starts[-1]
    return counts


def progressive_filling(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                        capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of the flows of a compact CSR problem (rows: flows, columns: links
    ``0..m-1`` with ``m = capacity.size``; ``data``: the fraction of a flow on a link).

    ``capacity`` is each link's capacity for these flows (bytes/s). Every flow must cross a
    link. See the module docstring for the rounds.
    """
    n, m = indptr.size - 1, capacity.size
    rate = np.zeros(n)
    if n == 0:
        return rate
    counts = np.diff(indptr)  # entries per unfrozen flow; a flow's entries are consecutive
    flows, starts = np.arange(n), np.asarray(indptr[:-1], dtype=np.int64)
    if not counts.all():  # flows that cross no link (none in the simulator's calls)
        crosses = counts > 0
        flows, counts, starts = flows[crosses], counts[crosses], starts[crosses]
    link, frac = np.asarray(indices, dtype=np.int64), np.asarray(data, dtype=np.float64)
    weight = np.bincount(link, weights=frac, minlength=m)
    left = np.array(capacity, dtype=np.float64)
    fill = np.full(m, np.inf)
    np.divide(left, weight, out=fill, where=weight > _NO_WEIGHT)
    blocked = np.zeros(m, dtype=bool)
    while flows.size:
        level = fill[link]
        lowest = np.minimum.reduceat(level, starts)  # per unfrozen flow: its lowest link's level
        lowest_e = np.repeat(lowest, counts)
        blocked[:] = False  # a link with a neighbour filling lower is not a local minimum
        blocked[link[lowest_e < level * (1 - _TIE)]] = True
        freeze = np.logical_or.reduceat(~blocked[link], starts)  # flows on a local minimum
        rate[flows[freeze]] = np.maximum(lowest[freeze], 0.0)
        done = np.repeat(freeze, counts)
        links, fr = link[done], frac[done]
        # bincount, not np.subtract.at (several times faster; the sums differ only by rounding)
        left -= np.bincount(links, weights=fr * np.maximum(lowest_e[done], 0.0), minlength=m)
        weight -= np.bincount(links, weights=fr, minlength=m)
        w = weight[links]
        new = np.full(links.size, np.inf)
        np.divide(left[links], w, out=new, where=w > _NO_WEIGHT)
        fill[links] = new  # a link's repeats all get the same value
        keep, rest = ~done, ~freeze
        link, frac, flows, counts = link[keep], frac[keep], flows[rest], counts[rest]
        starts = np.zeros(counts.size, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
    return rate


def max_min_fair(incidence: csr_matrix, capacity: np.ndarray, active: np.ndarray | None = None,
                 by_link: csr_matrix | None = None) -> np.ndarray:
    """Rates (bytes/s) of each flow (row of ``incidence``, flows x links); inactive flows get 0.

    Every active flow must cross at least one link. ``capacity`` is per link (bytes/s, > 0).
    ``by_link`` is accepted for compatibility with the reference solver and not needed.
    """
    n_flows = incidence.shape[0]
    rate = np.zeros(n_flows)
    flows = np.arange(n_flows) if active is None else np.flatnonzero(np.asarray(active, dtype=bool))
    if flows.size == 0:
        return rate
    indptr = incidence.indptr.astype(np.int64, copy=False)
    counts = indptr[flows + 1] - indptr[flows]
    if np.any(counts == 0):
        raise ValueError("an active flow crosses no link")
    pos = entries_of(indptr, flows)
    links, local = np.unique(incidence.indices[pos], return_inverse=True)
    sub_ptr = np.concatenate(([0], np.cumsum(counts)))
    rate[flows] = progressive_filling(sub_ptr, local, incidence.data[pos],
                                      np.asarray(capacity, dtype=np.float64)[links])
    return rate

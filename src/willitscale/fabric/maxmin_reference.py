"""The reference max-min fair solver: a full re-solve, kept as the yardstick for the incremental one.

This is ``fabric/maxmin.py`` as it was on main at 69473e3, before the simulator re-solved
incrementally (:mod:`willitscale.fabric.maxmin_incremental`). It is not used by ``simulate``
unless asked (``simulate(..., solver="reference")``): the exactness tests compare the incremental
solver with it, and ``benchmarks/fabric_step.py`` times the simulator with each to measure the
speed-up in one run. Do not optimise it: its job is to stay what the old code did.

Max-min fair rates by progressive filling (Bertsekas & Gallager, *Data Networks*, 6.5.2).

All unfrozen flows' rates rise together; when a link fills up, every flow crossing it is frozen
at its current rate; repeat until every flow is frozen. A flow may put only a fraction of its
bytes on a link (a sprayed flow splits over parallel paths): link ``e`` then carries
``sum_f frac[f, e] * rate[f]``, and the result is the weighted max-min fair allocation.

Each round is two sparse matrix-vector products over the (flows x links) incidence, so the
cost is O(nnz) per distinct bottleneck level - no loop over flows in Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from willitscale.fabric.maxmin_incremental import IncrementalMaxMin

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = ["max_min_fair", "FullResolve"]

#: a link whose remaining capacity is below this fraction of its capacity counts as full
REL_TOL = 1e-9


def _rows(indptr: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Positions in a CSR ``indices``/``data`` array of the entries of rows ``ids``."""
    starts, ends = indptr[ids], indptr[ids + 1]
    counts = ends - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    return np.arange(total) + offsets


def _unfrozen_on(by_link: csr_matrix, links: np.ndarray, unfrozen: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """The unfrozen flows crossing ``links``, each once: O(their entries) when that is less than
    one pass over all flows (``slot`` is scratch space of one int per flow)."""
    crossing = by_link.indices[_rows(by_link.indptr, links)]
    if crossing.size >= unfrozen.size // 4:
        hit = np.zeros(unfrozen.size, dtype=bool)
        hit[crossing] = True
        return np.flatnonzero(hit & unfrozen)
    flows = crossing[unfrozen[crossing]]
    slot[flows] = np.arange(flows.size)  # a flow on two of the links: keep one entry
    return flows[slot[flows] == np.arange(flows.size)]


def max_min_fair(incidence: csr_matrix, capacity: np.ndarray, active: np.ndarray | None = None,
                 by_link: csr_matrix | None = None) -> np.ndarray:
    """Rates (bytes/s) of each flow (row of ``incidence``, flows x links); inactive flows get 0.

    Every active flow must cross at least one link. ``capacity`` is per link (bytes/s, > 0).
    ``by_link`` (the links x flows transpose, CSR) may be passed in to save its construction.

    All unfrozen flows share one rate, the current *level*; each round raises the level until
    the next link fills, freezes that link's flows and takes their weight off their other links.
    A round costs O(live links + entries of the flows it freezes).
    """
    n_flows, n_links = incidence.shape
    rate = np.zeros(n_flows)
    unfrozen = np.ones(n_flows, dtype=bool) if active is None else np.asarray(active, dtype=bool).copy()
    if not unfrozen.any():
        return rate
    if np.any(unfrozen & (np.diff(incidence.indptr) == 0)):
        raise ValueError("an active flow crosses no link")
    by_link = incidence.T.tocsr() if by_link is None else by_link
    weight = by_link @ unfrozen.astype(np.float64)  # per link: sum of fractions of unfrozen flows
    cap = np.asarray(capacity, dtype=np.float64)
    residual = cap.copy()
    live = np.flatnonzero(weight > 0)
    slot = np.empty(n_flows, dtype=np.int64)  # scratch for de-duplicating flows
    level = 0.0
    while live.size:
        share = residual[live] / weight[live]
        step = max(float(share.min()), 0.0)
        level += step
        residual[live] -= step * weight[live]
        full = live[(residual[live] <= REL_TOL * cap[live]) | (share <= step * (1 + 1e-12))]
        residual[full] = 0.0
        flows = _unfrozen_on(by_link, full, unfrozen, slot)
        rate[flows] = level
        unfrozen[flows] = False
        pos = _rows(incidence.indptr, flows)
        weight -= np.bincount(incidence.indices[pos], weights=incidence.data[pos], minlength=n_links)
        weight[full] = 0.0
        live = live[weight[live] > 1e-12]
    return rate


class FullResolve(IncrementalMaxMin):
    """The old simulator's way behind the incremental solver's interface: every solve re-solves
    every active flow from scratch with :func:`max_min_fair` above. For benchmarks and tests."""

    def solve(self) -> tuple[np.ndarray, np.ndarray]:
        changed = bool(self._started or self._finished)
        self._changes()
        if not changed:
            return np.zeros(0, np.int64), np.zeros(0)
        from scipy.sparse import csr_matrix  # only this benchmark/test solver needs scipy

        previous = self.rate.copy()
        ptr, rows, frac = self.by_link()
        n, m = self.flows, self.cap.size
        self.rate = max_min_fair(csr_matrix((self.data, self.indices, self.indptr), shape=(n, m)), self.cap,
                                 self.active, csr_matrix((frac, rows, ptr), shape=(m, n)))
        part = np.flatnonzero(self.active)
        return part, previous[part]

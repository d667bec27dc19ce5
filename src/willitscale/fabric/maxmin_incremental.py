"""Max-min fair rates of a changing set of flows, re-solving only what a change touches.

Progressive filling (:mod:`willitscale.fabric.maxmin`) raises every unfrozen flow's rate together
- the *level* - and freezes a link's flows when the link fills. Two facts make an exact
incremental re-solve possible when flows start or finish:

1. **Nothing below the first difference changes.** Up to some level ``L0`` the filling of the
   new problem is the old one's, step for step, so every flow the old filling froze below
   ``L0`` keeps its rate, and the filling restarts at ``L0`` with the others (*rising* flows):

   - a finishing flow froze at its rate ``r``: every link it crosses fills at ``r`` or later,
     so taking its load away changes no fill below ``r``;
   - a starting flow adds its weight x level to its links, which changes nothing until the first
     of them fills. That level is exact from the old rates: a link's load at level ``L`` is
     ``sum_i w_i min(r_i, L) + W_new L``, piecewise linear and concave in ``L``, so it meets the
     capacity at the largest of the roots of its pieces' lines.

2. **Parts that share no link are independent.** From ``L0`` on, the rising flows and the links
   they cross form a graph; a connected part that holds no link of a starting or finishing flow
   fills exactly as it did before. Only the part reached from those links (a breadth-first
   search) is re-filled, on the capacity the frozen flows leave its links. When the search grows
   large, every rising flow is re-filled instead: still exact by fact 1, and cheaper than
   finishing the search.

The re-fill runs the same progressive filling as a full solve from level 0 (no link of the part
fills below ``L0`` in exact arithmetic, so the lowest levels are reached without a difference),
so the rates are the full solve's up to rounding; rising flows are taken a relative ``1e-9``
below ``L0`` so that rates equal in exact arithmetic but apart by rounding stay together. Tests
compare with the reference solver on hypothesis-generated sequences of starts and finishes.

Two shortcuts re-compute the same rows in the same order (the re-fill's sums run in that order,
so the rates are bit-identical; tests compare with the shortcuts off): flows that only finished,
with no rising flow on their links, change nothing (their links' rows are checked directly); and
when only starting flows are active (a first step) they are the rising flows at any level, so
neither the level, nor the search, nor the other flows' load is needed.

Finishing flows are usually the fastest (equal sizes started together finish fastest first), so
few flows rise above ``L0`` and an event costs a few small array operations instead of a solve
over every flow in flight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from willitscale.fabric.maxmin import entries_of, positions, progressive_filling

if TYPE_CHECKING:
    from willitscale.topology.routing import LinkMatrix

__all__ = ["IncrementalMaxMin"]

#: flows this fraction below the restart level rise too (equal rates may differ by rounding;
#: restarting a little lower is still exact, fact 1)
_MARGIN = 1e-9
#: a breadth-first search that has found this many rows (or an eighth of the rising ones) stops
#: and every rising row is re-filled
_SEARCH_ROWS = 1024


class IncrementalMaxMin:
    """Flows (rows over the fabric's links) that start and finish; their max-min fair rates.

    Rows are appended with :meth:`append` (inactive), started with :meth:`start` and finished
    with :meth:`finish`; :meth:`solve` brings :attr:`rate` up to date and says which rows'
    rates it re-computed. :meth:`keep` drops rows no longer needed.
    """

    def __init__(self, capacity: np.ndarray):
        self.cap = np.asarray(capacity, dtype=np.float64)
        m = self.cap.size
        self.indptr = np.zeros(1, dtype=np.int64)
        self.indices = np.zeros(0, dtype=np.int64)
        self.data = np.zeros(0)
        self.rate = np.zeros(0)
        self.active = np.zeros(0, dtype=bool)
        self._by_link: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._started: list[np.ndarray] = []
        self._finished: list[np.ndarray] = []
        self._finished_links: list[np.ndarray] = []
        # scratch space, written before read (no clearing between solves): a stamp per link and
        # row marks "seen in this search"; slots de-duplicate; local numbers a part's links
        self._stamp = 0
        self._link_mark = np.zeros(m, dtype=np.int64)
        self._link_slot = np.zeros(m, dtype=np.int64)
        self._row_mark = np.zeros(0, dtype=np.int64)
        self._row_slot = np.zeros(0, dtype=np.int64)

    @property
    def flows(self) -> int:
        return self.rate.size

    # -- the rows ---------------------------------------------------------------------------
    def append(self, matrix: LinkMatrix) -> np.ndarray:
        """Add the rows of ``matrix`` (flows x links, CSR: a :class:`LinkMatrix` or a scipy
        ``csr_matrix``), inactive; their row numbers."""
        n = matrix.shape[0]
        if matrix.shape[1] != self.cap.size:
            raise ValueError(f"rows over {matrix.shape[1]} links for a fabric of {self.cap.size}")
        first = self.flows
        self.indptr = np.concatenate((self.indptr, self.indptr[-1] + matrix.indptr[1:].astype(np.int64)))
        self.indices = np.concatenate((self.indices, matrix.indices.astype(np.int64)))
        self.data = np.concatenate((self.data, matrix.data.astype(np.float64)))
        self._set_rows(np.concatenate((self.rate, np.zeros(n))),
                       np.concatenate((self.active, np.zeros(n, dtype=bool))))
        return np.arange(first, first + n)

    def keep(self, rows: np.ndarray) -> None:
        """Keep only ``rows`` (ascending; every active row among them), renumbered from 0."""
        if self._started or self._finished:
            raise RuntimeError("solve before dropping rows")
        rows = np.asarray(rows, dtype=np.int64)
        if np.count_nonzero(self.active[rows]) != np.count_nonzero(self.active):
            raise ValueError("an active row would be dropped")
        pos = entries_of(self.indptr, rows)
        self.indptr = np.concatenate(([0], np.cumsum(self.indptr[rows + 1] - self.indptr[rows])))
        self.indices, self.data = self.indices[pos], self.data[pos]
        self._set_rows(self.rate[rows], self.active[rows])

    def _set_rows(self, rate: np.ndarray, active: np.ndarray) -> None:
        self.rate, self.active = rate, active
        self._row_mark = np.zeros(rate.size, dtype=np.int64)
        self._row_slot = np.zeros(rate.size, dtype=np.int64)
        self._by_link = None

    def by_link(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The transpose (links x rows) as CSR arrays ``(indptr, rows, fractions)``."""
        if self._by_link is None:
            m = self.cap.size
            order = _by_value(self.indices, m)  # each link's entries in row order (scipy's tocsc)
            ptr = np.zeros(m + 1, dtype=np.int64)
            np.cumsum(np.bincount(self.indices, minlength=m), out=ptr[1:])
            rows = np.repeat(np.arange(self.flows), np.diff(self.indptr))
            self._by_link = (ptr, rows[order], self.data[order])
        return self._by_link

    # -- changes -----------------------------------------------------------------------------
    def start(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        if np.any(self.active[rows]):
            raise ValueError("a flow started twice")
        if np.any(self.indptr[rows + 1] == self.indptr[rows]):
            raise ValueError("an active flow crosses no link")
        self.active[rows] = True
        self._started.append(rows)

    def finish(self, rows: np.ndarray) -> np.ndarray:
        """Finish ``rows``; the links of their entries (row by row), which the next solve
        starts its search from."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return np.zeros(0, np.int64)
        if not np.all(self.active[rows]):
            raise ValueError("a flow finished that was not running")
        self.active[rows] = False
        links = self.indices[entries_of(self.indptr, rows)]
        self._finished.append(rows)
        self._finished_links.append(links)
        return links

    def _changes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(started rows, finished rows, the finished rows' links)`` since the last solve,
        forgotten here."""
        out = _joined(self._started), _joined(self._finished), _joined(self._finished_links)
        self._started, self._finished, self._finished_links = [], [], []
        return out

    def solve(self) -> tuple[np.ndarray, np.ndarray]:
        """Re-solve after the changes since the last solve: ``(rows re-solved, their previous
        rates)``; every other active row kept its rate, finished rows now have rate 0."""
        started, finished, finished_links = self._changes()
        if started.size == 0 and finished.size == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        level = float(self.rate[finished].min()) if finished.size else np.inf
        self.rate[finished] = 0.0
        # only started rows active (a first step): they are the rising rows whatever the level,
        # and no other row loads their links
        alone = started.size > 0 and not _others_active(self.active, started)
        if started.size and not alone:
            level = min(level, self._first_fill(started))
        threshold = level * (1 - _MARGIN)
        if started.size == 0:
            if not self.active.any():  # every flow finished: no rate to re-compute
                return np.zeros(0, np.int64), np.zeros(0)
            seeds = finished_links
            # the usual event: flows finished and no rising row crosses their links, so the
            # search below would find nothing; checking the seeds' rows directly is cheaper
            ptr, rows, _ = self.by_link()
            links = _distinct(seeds, self._link_slot) if seeds.size > 64 else seeds  # many flows share links
            near = rows[entries_of(ptr, links)]
            if not (self.active[near] & (self.rate[near] >= threshold)).any():
                return np.zeros(0, np.int64), np.zeros(0)
            part = self._touched(threshold, started, seeds)
        else:
            seeds = np.concatenate((self.indices[entries_of(self.indptr, started)], finished_links))
            if alone and np.all(started[1:] > started[:-1]):
                part = self._found_alone(started, seeds)
            else:
                part = self._touched(threshold, started, seeds)
        previous = self.rate[part]
        self.rate[part] = self._refill(part, alone)
        return part, previous

    # -- the parts of a solve ----------------------------------------------------------------
    def _first_fill(self, started: np.ndarray) -> float:
        """The lowest level at which a link of a starting flow fills, the old flows keeping
        their old rates below it (the module docstring, fact 1)."""
        pos = entries_of(self.indptr, started)
        links, local = self._numbered(self.indices[pos])
        added = np.bincount(local, weights=self.data[pos], minlength=links.size)
        ptr, rows, frac = self.by_link()
        bpos = entries_of(ptr, links)
        link_of = np.repeat(np.arange(links.size), ptr[links + 1] - ptr[links])
        r, w = self.rate[rows[bpos]], frac[bpos]  # old flows have rate > 0, new and ended 0
        cap = self.cap[links]
        old_load = np.bincount(link_of, weights=w * r, minlength=links.size)
        old_weight = np.bincount(link_of, weights=w * (r > 0), minlength=links.size)
        # bounds on the level where load(L) = sum_i w_i min(r_i, L) + added L meets cap: the
        # load is at most old_load + added L and at most (old_weight + added) L; at least added L
        low = np.maximum((cap - old_load) / added, cap / (old_weight + added))
        high = cap / added
        near = np.flatnonzero(low <= high.min())
        return max(float(self._exact_fill(near, link_of, r, w, cap, added).min()), 0.0)

    @staticmethod
    def _exact_fill(near, link_of, r, w, cap, added) -> np.ndarray:
        """The level where each link ``near`` fills: the largest root over its load's pieces
        (flows by rising rate: fixed part ``sum_{i<j} w_i r_i``, slope ``sum_{i>=j} w_i + added``)."""
        is_near = np.zeros(cap.size, dtype=bool)
        is_near[near] = True
        pick = is_near[link_of] & (r > 0)
        g, r, w = link_of[pick], r[pick], w[pick]
        order = np.lexsort((r, g))
        g, r, w = g[order], r[order], w[order]
        level = np.full(cap.size, -np.inf)
        level[near] = (cap[near] - np.bincount(g, weights=w * r, minlength=cap.size)[near]) / added[near]
        if g.size:
            first = np.searchsorted(g, g, side="left")  # each entry's group start
            wr = np.cumsum(w * r)
            wr_before = wr - w * r - (wr - w * r)[first]
            w_from = np.bincount(g, weights=w, minlength=cap.size)[g] - (np.cumsum(w) - w - (np.cumsum(w) - w)[first])
            np.maximum.at(level, g, (cap[g] - wr_before) / (w_from + added[g]))
        return level[near]

    def _numbered(self, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct ``links`` and each entry's number among them (0, 1, ...)."""
        distinct = _distinct(links, self._link_slot)
        self._link_slot[distinct] = np.arange(distinct.size)
        return distinct, self._link_slot[links]

    def _found_alone(self, started: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """What :meth:`_touched` returns when ``started`` (ascending) are the only active rows
        (``seeds``: their entries' links, then the finished rows'), without its search. Its
        first round finds all of them: it walks the seed links (each once, in the order
        :func:`_distinct` leaves them), each link's rows ascending, and keeps each row where
        :func:`_distinct` keeps it - its last occurrence, at the last of its links in that
        order; the next round has no link left. So: rows by the position of their last link,
        then by number. The order matters: the re-fill sums over the rows in it."""
        _, local = self._numbered(seeds)  # numbered in the search's order of links
        counts = self.indptr[started + 1] - self.indptr[started]
        starts = np.zeros(started.size, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        last = np.maximum.reduceat(local[:int(counts.sum())], starts)  # each row's last link
        return started[_by_value(last, self.cap.size)]

    def _touched(self, threshold: float, started: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """The rising rows (active and at ``threshold`` or above, or ``started``) connected to a
        ``seeds`` link through rising rows and their links, found breadth first from the seeds;
        every rising row once the search has grown large (the module docstring, fact 2). Rows
        are tested for rising as the search meets them: no pass over every row unless it gives up."""
        ptr, rows, _ = self.by_link()
        self._stamp += 1
        stamp, link_mark, row_mark = self._stamp, self._link_mark, self._row_mark
        row_mark[started] = -stamp  # started: rising whatever their rate (-stamp: not yet found)
        active, rate = self.active, self.rate
        frontier = _distinct(seeds, self._link_slot)
        link_mark[frontier] = stamp
        found, size, large = [], 0, _SEARCH_ROWS
        while frontier.size:
            if size > large:  # the search is large: compare with the number of rising rows
                rising = active & (rate >= threshold)
                rising[started] = True
                large = max(_SEARCH_ROWS, int(np.count_nonzero(rising)) // 8)
                if size > large:
                    return np.flatnonzero(rising)
            new = rows[entries_of(ptr, frontier)]
            mark = row_mark[new]
            new = new[(active[new] & (rate[new] >= threshold) | (mark == -stamp)) & (mark != stamp)]
            new = _distinct(new, self._row_slot)
            if not new.size:
                break
            row_mark[new] = stamp
            found.append(new)
            size += new.size
            links = self.indices[entries_of(self.indptr, new)]
            frontier = _distinct(links[link_mark[links] != stamp], self._link_slot)
            link_mark[frontier] = stamp
        return np.concatenate(found) if found else np.zeros(0, np.int64)

    def _refill(self, part: np.ndarray, alone: bool = False) -> np.ndarray:
        """Progressive filling of ``part`` on the capacity the other flows leave its links
        (``alone``: no other row is active, so all of it)."""
        if part.size == 0:
            return np.zeros(0)
        starts = self.indptr[part]
        counts = self.indptr[part + 1] - starts
        pos = positions(starts, counts)
        links, local = self._numbered(self.indices[pos])
        sub_ptr = np.zeros(part.size + 1, dtype=np.int64)
        np.cumsum(counts, out=sub_ptr[1:])
        if alone:  # every other row has rate 0: the sum below would be +0.0 on every link
            return progressive_filling(sub_ptr, local, self.data[pos], self.cap[links])
        ptr, rows, frac = self.by_link()
        link_starts = ptr[links]
        link_counts = ptr[links + 1] - link_starts
        bpos = positions(link_starts, link_counts)
        link_of = np.repeat(np.arange(links.size), link_counts)
        # the part's own load does not count: its rates are 0 from here (the caller, which
        # kept them, writes the new ones); w * 0 adds nothing, as masking it out did
        self.rate[part] = 0.0
        frozen = np.bincount(link_of, weights=frac[bpos] * self.rate[rows[bpos]], minlength=links.size)
        return progressive_filling(sub_ptr, local, self.data[pos], self.cap[links] - frozen)


def _by_value(values: np.ndarray, bound: int) -> np.ndarray:
    """The stable order of ``values`` (integers in ``0..bound-1``), by radix sort: numpy sorts
    16-bit keys stably in O(n), several times faster than ``int64`` keys; above 2**16 two
    passes, low half then high half."""
    if bound <= 1 << 16:
        return np.argsort(values.astype(np.uint16), kind="stable")
    low = np.argsort((values & 0xFFFF).astype(np.uint16), kind="stable")
    return low[np.argsort((values[low] >> 16).astype(np.uint16), kind="stable")]


def _others_active(active: np.ndarray, rows: np.ndarray) -> bool:
    """Whether a row other than ``rows`` is active."""
    others = active.copy()
    others[rows] = False
    return bool(others.any())


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """The row numbers of ``arrays`` one after the other (no copy for a single array)."""
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


def _distinct(values: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """``values`` without repeats, in O(n): one of each, where it last appears (numpy's
    assignment with repeated indices keeps the last value), in order; ``slot`` is scratch space
    indexed by value, written before it is read."""
    at = np.arange(values.size)
    slot[values] = at
    return values[slot[values] == at]


class FullRefill(IncrementalMaxMin):
    """The same rows and changes, but every solve re-fills every active row from level 0 (one
    progressive filling, :func:`~willitscale.fabric.maxmin.progressive_filling`): cheaper than
    the incremental search when most rows change anyway, as when many flows finished and
    started since the last solve (the simulator's coarse fidelity). The same rates."""

    def solve(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._started and not self._finished:
            return np.zeros(0, np.int64), np.zeros(0)
        _, finished, _ = self._changes()
        self.rate[finished] = 0.0
        rows = np.flatnonzero(self.active)
        previous = self.rate[rows]
        if rows.size:
            pos = entries_of(self.indptr, rows)
            links, local = self._numbered(self.indices[pos])
            sub_ptr = np.concatenate(([0], np.cumsum(self.indptr[rows + 1] - self.indptr[rows])))
            self.rate[rows] = progressive_filling(sub_ptr, local, self.data[pos], self.cap[links])
        return rows, previous

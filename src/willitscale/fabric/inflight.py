"""The flows in flight during a simulation: their rates, bytes left, finish times and steps.

Every flow of every step in flight is a row of one max-min solver
(:class:`~willitscale.fabric.maxmin_incremental.IncrementalMaxMin`). Bytes are counted lazily:
a flow keeps the bytes it had left at the moment its rate last changed (``mark``) and the time
it will finish at that rate (``end``), so an event touches only the flows whose rates it
changed, plus one pass over the finish times to find the next event. A link's bytes are added
when a step ends (every flow of it has then moved all its bytes), its flow count when a flow
starts or finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.fabric.maxmin import entries_of, run_lengths
from willitscale.fabric.maxmin_incremental import IncrementalMaxMin
from willitscale.topology.routing import LinkMatrix

__all__ = ["Block", "InFlight"]

DONE_TOL = 1e-9  #: a flow with less than this fraction of its bytes left is done


@dataclass(slots=True, eq=False)
class Block:
    """One step in flight: the flows of one repetition of one stream's phase."""

    stream: int
    matrix: LinkMatrix  #: flows x links, the fraction of each flow's bytes on each link
    total: np.ndarray  #: bytes per flow
    latency: np.ndarray  #: path latency each flow pays after its last byte
    extra: float  #: seconds added after the step's last byte arrives
    arrival: float  #: when the step's last byte arrives, as far as known
    mean_latency: float | None = None  #: set: the step ends at the last transfer end + this
    first: int = 0  #: its first row among the flows in flight
    left: int = 0  #: its flows still moving bytes


class InFlight:
    """The steps in flight and their flows; ``solver`` is the max-min solver's class."""

    def __init__(self, capacity: np.ndarray, solver: type = IncrementalMaxMin):
        links = capacity.size
        self.pool = solver(capacity)
        self.blocks: list[Block] = []
        self.count = np.zeros(links, dtype=np.int64)  #: flows in flight on each link
        self.peak = np.zeros(links, dtype=np.int64)  #: most flows on each link at one time
        self.link_bytes = np.zeros(links)
        self.solves = 0  #: times the rates were brought up to date after flows started or ended
        self.resolved = 0  #: flows whose rates those solves re-computed, summed
        self._block: dict[int, Block] = {}  # blocks in flight by number
        self._next = 0  # the next block's number
        self.owner = np.zeros(0, dtype=np.int64)  #: number of each row's block
        self.size = self.latency = self.rem = self.mark = self.end = self.due = np.zeros(0)
        self._started = False

    # -- steps in and out --------------------------------------------------------------------
    def add(self, block: Block, t: float) -> None:
        """Put ``block``'s flows in flight at time ``t`` (zero-byte flows are done at once)."""
        rows = self.pool.append(block.matrix)
        block.first = self.pool.flows - rows.size
        moving = block.total > 0
        block.left = int(np.count_nonzero(moving))
        n = rows.size
        self._block[self._next] = block
        self.owner = np.concatenate((self.owner, np.full(n, self._next)))
        self._next += 1
        self.size = np.concatenate((self.size, block.total))
        self.latency = np.concatenate((self.latency, block.latency))
        self.rem = np.concatenate((self.rem, block.total))
        self.mark = np.concatenate((self.mark, np.full(n, t)))
        self.end = np.concatenate((self.end, np.full(n, np.inf)))
        self.due = np.concatenate((self.due, np.full(n, np.inf)))
        self.pool.start(rows[moving])
        m = block.matrix
        np.add.at(self.count, m.indices[entries_of(m.indptr.astype(np.int64), np.flatnonzero(moving))], 1)
        self._started = True
        self.blocks.append(block)

    def ended(self) -> list[Block]:
        """Take out the steps whose flows have all finished (their bytes go to their links)."""
        done = [(k, b) for k, b in self._block.items() if b.left == 0]
        for k, b in done:
            del self._block[k]
            self.link_bytes += _bytes_on_links(b.matrix, b.total, self.link_bytes.size)
        if done:
            self.blocks = [b for b in self.blocks if b.left > 0]
        return [b for _, b in done]

    # -- events ------------------------------------------------------------------------------
    def solve(self, t: float) -> None:
        """Bring the rates up to date at time ``t`` after flows started or finished."""
        if self._started:  # flows only finish between starts: the most at once is now
            np.maximum(self.peak, self.count, out=self.peak)
            self._started = False
        changed, previous = self.pool.solve()
        self.solves += 1
        self.resolved += changed.size
        if changed.size:
            self.rem[changed] -= previous * (t - self.mark[changed])
            self.mark[changed] = t
            rate = self.pool.rate[changed]
            self.end[changed] = end = t + self.rem[changed] / rate
            self.due[changed] = end - DONE_TOL * self.size[changed] / rate
        self._compact()

    @property
    def new_flows(self) -> bool:
        """Whether flows started since the rates were last brought up to date."""
        return self._started

    def next_finish(self) -> float:
        """When the next flow finishes at the current rates (inf: none in flight)."""
        return float(self.end.min()) if self.end.size else np.inf

    def next_step_end(self) -> float:
        """When the next step's last flow finishes at the current rates (inf: none in flight)."""
        t = np.inf
        for b in self.blocks:
            seg = self.end[b.first:b.first + b.matrix.shape[0]]
            live = seg[seg < np.inf]  # finished and zero-byte rows have end = inf
            if live.size:
                t = min(t, float(live.max()))
        return t

    def finish_until(self, t: float, own_end: bool = False) -> None:
        """Finish every flow done by time ``t`` (to ``DONE_TOL`` of its bytes); ``own_end``: a
        flow's last byte left at its own finish time (at most ``t``), not at ``t``."""
        rows = (self.due <= t).nonzero()[0]  # due: when less than DONE_TOL of the bytes is left
        if not rows.size:
            return
        left_at = np.minimum(self.end[rows], t) if own_end else None
        np.subtract.at(self.count, self.pool.finish(rows), 1)
        self.end[rows] = self.due[rows] = np.inf
        lat = self.latency[rows]
        owner = self.owner[rows]  # ascending: a block's rows are consecutive, in order of start
        if owner[0] == owner[-1]:  # one block (the usual case)
            starts = np.zeros(1, dtype=np.int64)
        else:
            starts = np.concatenate(([0], (owner[1:] != owner[:-1]).nonzero()[0] + 1))
        if left_at is None:
            last = np.full(starts.size, t)
            slowest = np.maximum.reduceat(lat, starts)
        else:  # t + slowest latency, with each flow's own finish time instead of t
            last = np.maximum.reduceat(left_at, starts)
            slowest = np.maximum.reduceat(left_at + lat, starts) - last
        for k, n, end, slow in zip(owner[starts].tolist(), run_lengths(starts, rows.size).tolist(),
                                   last.tolist(), slowest.tolist()):
            b = self._block[k]
            b.left -= n
            b.arrival = max(b.arrival, end + (b.mean_latency if b.mean_latency is not None else slow))

    def _compact(self) -> None:
        """Drop the rows of ended steps once they outnumber the rows of steps in flight."""
        live = sum(b.matrix.shape[0] for b in self.blocks)
        if self.pool.flows - live <= max(live, 1024):
            return
        rows = np.concatenate([np.arange(b.first, b.first + b.matrix.shape[0]) for b in self.blocks]) \
            if self.blocks else np.zeros(0, np.int64)
        self.pool.keep(rows)
        for name in ("owner", "size", "latency", "rem", "mark", "end", "due"):
            setattr(self, name, getattr(self, name)[rows])
        first = 0
        for b in self.blocks:
            b.first, first = first, first + b.matrix.shape[0]


def _bytes_on_links(matrix: LinkMatrix, total: np.ndarray, links: int) -> np.ndarray:
    """Bytes each link carries for flows of ``total`` bytes: ``matrix.T @ total``, summed flow by
    flow in entry order (as scipy's product does, so the sums are the same to the last bit)."""
    flow = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    return np.bincount(matrix.indices, weights=matrix.data * total[flow], minlength=links)

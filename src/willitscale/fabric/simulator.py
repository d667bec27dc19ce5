"""The flow-level simulator: event-driven max-min fair sharing until every flow is done.

Between two events every flow's rate is constant (the max-min fair allocation of the flows in
flight); an event is a flow finishing or a stream starting its next step. A step (one
repetition of a phase) ends when its last byte has arrived: transfer end + path latency, plus
the phase's extra latency; the stream's next step starts then.

Repeated steps are not re-simulated when that is exact. At a moment when no flow is in flight
and every unfinished stream starts a step, the future depends only on which phase each stream
is in (sizes, routes and the seed are the same for every repetition of a phase). If the same
combination of phases was seen before, everything between the two moments repeats identically,
so the simulator jumps ahead by as many whole periods as every stream's remaining repetitions
allow, adding the period's time and link bytes each time. A ring's ``2(n-1)`` identical steps
thus cost two simulated steps. ``reuse_phases=False`` turns this off (tests compare both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix, vstack

from willitscale.config import FrozenMap
from willitscale.collectives.phases import Phase, Traffic
from willitscale.errors import ConfigError
from willitscale.fabric.maxmin import max_min_fair
from willitscale.topology.graph import Topology
from willitscale.topology.routing import Balance, Router, Routing

__all__ = ["SimulationResult", "simulate"]

_DONE_TOL = 1e-9  # a flow with less than this fraction of its bytes left is done


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationResult:
    """What one simulation measured. Times in seconds, bytes per directed link."""

    completion_time: float
    stream_times: Mapping[str, float]  #: when each stream's last step ended
    link_bytes: np.ndarray  #: bytes each directed link carried
    link_peak_flows: np.ndarray  #: most flows sharing each link at one time
    topology: Topology = field(repr=False)
    traffic: Traffic = field(repr=False)
    routing: Routing
    solves: int  #: max-min fair allocations computed
    steps_simulated: int  #: steps (phase repetitions) simulated event by event
    steps_reused: int  #: steps skipped by exact repetition

    def __post_init__(self) -> None:
        object.__setattr__(self, "stream_times", FrozenMap(dict(self.stream_times)))

    @property
    def link_utilization(self) -> np.ndarray:
        """Per directed link: bytes carried / (capacity x completion time)."""
        if self.completion_time <= 0:
            return np.zeros_like(self.link_bytes)
        return self.link_bytes / (self.topology.link_capacity * self.completion_time)


@dataclass(slots=True)
class _Block:
    """One step in flight: the flows of one repetition of one stream's phase."""

    stream: int
    matrix: csr_matrix
    total: np.ndarray  # bytes per flow
    remaining: np.ndarray
    latency: np.ndarray
    extra: float
    arrival: float = 0.0
    mean_latency: float | None = None  # set: the step ends at the last transfer end + this


@dataclass(slots=True)
class _StreamState:
    phase: int = 0
    rep: int = 0
    ready: float = 0.0
    running: bool = False
    done: bool = False
    end: float = 0.0


class _Engine:
    def __init__(self, topology: Topology, traffic: Traffic, routing: Routing, reuse: bool):
        self.topo, self.traffic, self.routing, self.reuse = topology, traffic, routing, reuse
        self.router = Router(topology)
        self.cap = topology.link_capacity
        self.routes: dict[int, tuple[csr_matrix, np.ndarray]] = {}
        self.link_bytes = np.zeros(topology.links)
        self.peak = np.zeros(topology.links, dtype=np.int64)
        self.states = [_StreamState(ready=s.start) for s in traffic.streams]
        self.blocks: list[_Block] = []
        self.t = 0.0
        self.solves = self.simulated = self.reused = 0
        self.seen: dict[tuple, tuple] = {}
        self._stack: tuple | None = None
        self._moved: np.ndarray | None = None  # bytes each stacked flow moved since the stack was built
        self._fresh = False  # no max-min solve yet on the current stack

    # -- routing of one step ---------------------------------------------------------
    def _route(self, phase: Phase) -> tuple[csr_matrix, np.ndarray]:
        adaptive = self.routing.balance is Balance.ADAPTIVE
        if not adaptive and id(phase) in self.routes:
            return self.routes[id(phase)]
        load = None
        if adaptive and self.blocks:
            stack = self._stacked()
            load = stack[5] @ (stack[2] > 0).astype(np.float64)
        r = self.router.route(phase.src, phase.dst, phase.key, self.routing, load)
        out = (r.matrix(self.topo.links), r.latency)
        if not adaptive:
            self.routes[id(phase)] = out
        return out

    def _start(self, s: int) -> None:
        st, phase = self.states[s], self.traffic.streams[s].phases[self.states[s].phase]
        m, lat = self._route(phase)
        lat = lat * phase.latency_hops
        block = _Block(s, m, phase.size, phase.size.copy(), lat, phase.extra_latency, arrival=self.t)
        if phase.latency_mode == "mean" and lat.size:
            block.mean_latency = float(lat.mean())
            block.arrival = self.t + block.mean_latency
        zero = block.total <= 0
        if zero.any() and block.mean_latency is None:
            block.arrival = max(block.arrival, float((self.t + lat[zero]).max()))
        st.running = True
        self._unstack()
        self.blocks.append(block)
        self.simulated += 1

    def _unstack(self) -> None:
        """Drop the stacked arrays (the set of blocks changes), first adding the bytes the
        stacked flows moved to their links: one sparse product per stack, not per event."""
        if self._stack is not None and self._moved is not None:
            self.link_bytes += self._stack[4] @ self._moved
        self._stack, self._moved = None, None

    def _stacked(self):
        if self._stack is None:
            b = self.blocks
            rem = np.concatenate([x.remaining for x in b])
            m = vstack([x.matrix for x in b], format="csr")
            by_link = m.T.tocsr()
            ones = by_link.copy()
            ones.data = np.ones_like(ones.data)
            self._stack = (m, np.concatenate([x.total for x in b]), rem, np.concatenate([x.latency for x in b]),
                           by_link, ones)
            self._moved, self._fresh = np.zeros(rem.size), True
            off = 0
            for x in b:  # remaining bytes live in the stacked vector from now on
                n = x.total.size
                x.remaining = rem[off:off + n]
                off += n
        return self._stack

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        while True:
            self._start_ready()
            if not self.blocks:
                waiting = [st.ready for st in self.states if not st.done and not st.running]
                if not waiting:
                    return
                self.t = min(waiting)
                continue
            self._advance()

    def _start_ready(self) -> None:
        starters = [i for i, st in enumerate(self.states)
                    if not st.done and not st.running and st.ready <= self.t]
        if not starters:
            return
        if self.reuse and not self.blocks and all(
                st.done or i in starters for i, st in enumerate(self.states)):
            self._maybe_jump(starters)
        for s in starters:
            self._start(s)
        self._finish_empty_blocks()

    def _maybe_jump(self, starters: list[int]) -> None:
        key = tuple((s, self.states[s].phase) for s in starters)
        reps = np.array([self.states[s].rep for s in starters])
        snap = self.seen.get(key)
        self.seen[key] = (self.t, reps, self.link_bytes.copy(), self.simulated)
        if snap is None:
            return
        t0, reps0, bytes0, sim0 = snap
        dr = reps - reps0
        left = np.array([self.traffic.streams[s].phases[self.states[s].phase].repeat for s in starters]) - 1 - reps
        if np.any(dr <= 0):
            return
        m = int(np.min(left // dr))
        if m < 1:
            return
        self.t += m * (self.t - t0)
        self.link_bytes += m * (self.link_bytes - bytes0)
        self.reused += m * (self.simulated - sim0)
        for s, d in zip(starters, dr.tolist()):
            self.states[s].rep += m * d
            self.states[s].ready = self.t
        self.seen[key] = (self.t, reps + m * dr, self.link_bytes.copy(), self.simulated)

    def _advance(self) -> None:
        m, size, rem, lat, by_link, ones = self._stacked()
        active = rem > 0
        rate = max_min_fair(m, self.cap, active, by_link)
        self.solves += 1
        if self._fresh:  # flows only finish while a stack lives: its first solve sees the most at once
            self.peak = np.maximum(self.peak, (ones @ active.astype(np.float64)).astype(np.int64))
            self._fresh = False
        with np.errstate(divide="ignore"):
            left = np.where(active, rem / np.where(active, rate, 1.0), np.inf)
        dt = float(left.min())
        waiting = [st.ready for st in self.states if not st.done and not st.running]
        if waiting and min(waiting) - self.t < dt:
            dt = min(waiting) - self.t
        self._moved += rate * dt
        rem -= rate * dt
        t_new = self.t + dt
        finished = active & ((rem <= _DONE_TOL * size) | (left <= dt))
        rem[finished] = 0.0
        self.t = t_new
        self._record_arrivals(finished, lat)
        self._finish_empty_blocks()

    def _record_arrivals(self, finished: np.ndarray, lat: np.ndarray) -> None:
        off = 0
        for b in self.blocks:
            n = b.latency.size
            f = finished[off:off + n]
            if f.any():
                end = self.t + (b.mean_latency if b.mean_latency is not None else float(lat[off:off + n][f].max()))
                b.arrival = max(b.arrival, end)
            off += n

    def _finish_empty_blocks(self) -> None:
        keep = []
        for b in self.blocks:
            if np.any(b.remaining > 0):
                keep.append(b)
                continue
            st = self.states[b.stream]
            phases = self.traffic.streams[b.stream].phases
            st.running = False
            st.ready = b.arrival + b.extra
            st.rep += 1
            if st.rep >= phases[st.phase].repeat:
                st.phase, st.rep = st.phase + 1, 0
                if st.phase >= len(phases):
                    st.done, st.end = True, st.ready
        if len(keep) != len(self.blocks):
            self._unstack()
            self.blocks = keep


def simulate(topology: Topology, traffic: Traffic, routing: Routing | None = None, *,
             reuse_phases: bool = True) -> SimulationResult:
    """Simulate ``traffic`` on ``topology`` routed by ``routing`` (default ECMP, seed 0).

    Deterministic: the same inputs (including ``routing.seed``) give the same result.
    """
    routing = routing or Routing()
    if traffic.max_gpu() >= topology.gpus:
        raise ConfigError("traffic", f"GPU {traffic.max_gpu()}", f"GPU indices below {topology.gpus} "
                          f"(the {topology.kind} fabric has {topology.gpus} GPUs)")
    eng = _Engine(topology, traffic, routing, reuse_phases)
    eng.run()
    ends = {s.name: st.end for s, st in zip(traffic.streams, eng.states)}
    return SimulationResult(
        completion_time=max(ends.values()), stream_times=ends, link_bytes=eng.link_bytes,
        link_peak_flows=eng.peak, topology=topology, traffic=traffic, routing=routing,
        solves=eng.solves, steps_simulated=eng.simulated, steps_reused=eng.reused)


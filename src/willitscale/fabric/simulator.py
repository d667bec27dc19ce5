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

The rates at an event are re-solved incrementally (:mod:`willitscale.fabric.maxmin_incremental`):
only the flows whose rates the starting and finishing flows can change. ``solver="reference"``
re-solves every flow in flight from scratch at every event instead, with the solver this
simulator used before (:mod:`willitscale.fabric.maxmin_reference`): the same results, for tests
and for the benchmark that measures the difference.

Two fidelities (``fidelity=``):

* ``exact``: the rates are re-solved at every event, a flow finishing included (the model above).
* ``coarse``: the rates are re-solved only when flows *start* (a step begins). A flow that finishes
  leaves its bandwidth unused until the next step of any stream starts; the other flows keep their
  rates, so the events are the steps' ends (each step's last flow at the held rates), not every
  flow's finish. The rates are always feasible (a held rate never exceeds what max-min gave
  with more flows in flight). It is *not* a one-sided bound in general: max-min rates are not
  monotone in the set of flows (a finishing flow can let a second flow rise and a third, sharing
  a link with the second, fall; holding rates keeps the third faster), so a coarse time can be
  below the exact one; ``tests/unit/test_fabric_fidelity.py`` builds such a case. It is exact
  (the same completion time) for one stream whose steps are flows of equal size started
  together, each step charged one latency after its last byte (the proof is in that test
  file). docs/fabric.md "Speed" gives its measured error on training steps.
* ``auto`` (default): ``coarse`` when more than :data:`COARSE_ABOVE_GPUS` GPUs send or receive, else
  ``exact``. The result says which ran and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from willitscale.collectives.phases import Phase, Traffic
from willitscale.config import FrozenMap
from willitscale.errors import ConfigError
from willitscale.fabric.inflight import Block, InFlight
from willitscale.fabric.maxmin_incremental import FullRefill, IncrementalMaxMin
from willitscale.fabric.maxmin_reference import FullResolve
from willitscale.topology.graph import Topology
from willitscale.topology.routing import Balance, LinkMatrix, Router, Routing

__all__ = ["COARSE_ABOVE_GPUS", "FIDELITIES", "PhaseRoutes", "SimulationResult", "choose_fidelity", "simulate"]

#: the max-min solvers ``simulate`` can use: re-solve what an event touches, or everything
SOLVERS = {"incremental": IncrementalMaxMin, "reference": FullResolve}
FIDELITIES = ("auto", "exact", "coarse")
#: ``auto`` runs ``coarse`` above this many GPUs in the traffic. The exact simulation's events
#: grow faster than the GPUs on an oversubscribed fabric with ECMP (docs/fabric.md "Speed":
#: issue 15's step takes 4 CPU s exact at 16,384 GPUs, 19 s at 32,768 and ~600 s at 65,536 on
#: a 2-core machine), so 16,384 is the largest size that stays within seconds exactly.
COARSE_ABOVE_GPUS = 16_384


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
    solves: int  #: events at which the max-min fair rates were brought up to date
    steps_simulated: int  #: steps (phase repetitions) simulated event by event
    steps_reused: int  #: steps skipped by exact repetition
    flows_resolved: int = 0  #: flows whose rates those events re-computed, summed over events
    fidelity: str = "exact"  #: ``exact`` or ``coarse`` (module docstring)
    fidelity_reason: str = ""  #: why that fidelity ran

    def __post_init__(self) -> None:
        object.__setattr__(self, "stream_times", FrozenMap(dict(self.stream_times)))

    @property
    def link_utilization(self) -> np.ndarray:
        """Per directed link: bytes carried / (capacity x completion time)."""
        if self.completion_time <= 0:
            return np.zeros_like(self.link_bytes)
        return self.link_bytes / (self.topology.link_capacity * self.completion_time)


@dataclass(slots=True)
class _StreamState:
    phase: int = 0
    rep: int = 0
    ready: float = 0.0
    running: bool = False
    done: bool = False
    end: float = 0.0


class PhaseRoutes:
    """The routes of phases on one topology, kept across simulations given the same object
    (``simulate(..., routes=)``): a phase is routed once per routing, e.g. for the streams
    together and then each stream alone. Routes under ECMP and spray depend only on the phase,
    the routing and the topology, so reusing them changes no result; adaptive routes depend on
    the load in flight and are never kept."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.router = Router(topology)
        self._kept: dict[tuple[int, Routing], tuple[Phase, LinkMatrix, np.ndarray]] = {}

    def route(self, phase: Phase, routing: Routing, load: np.ndarray | None) -> tuple[LinkMatrix, np.ndarray]:
        """``(flows x links matrix, path latency per flow)`` of ``phase``; ``load`` (flows in
        flight per link) only for adaptive routing."""
        adaptive = routing.balance is Balance.ADAPTIVE
        key = (id(phase), routing)
        kept = None if adaptive else self._kept.get(key)
        if kept is not None and kept[0] is phase:  # the phase itself keeps its id unique
            return kept[1], kept[2]
        r = self.router.route(phase.src, phase.dst, phase.key, routing, load)
        out = (r.matrix(self.topology.links), r.latency)
        if not adaptive:
            self._kept[key] = (phase, *out)
        return out


class _Engine:
    def __init__(self, topology: Topology, traffic: Traffic, routing: Routing, reuse: bool, solver: str,
                 coarse: bool = False, routes: PhaseRoutes | None = None):
        self.topo, self.traffic, self.routing, self.reuse = topology, traffic, routing, reuse
        self.coarse = coarse
        if routes is not None and routes.topology is not topology:
            raise ConfigError("routes", "routes of another topology", "a PhaseRoutes of this topology")
        self.routes = PhaseRoutes(topology) if routes is None else routes
        # coarse: every solve follows many finishes and starts, and nearly every rate changes
        pool = FullRefill if coarse and solver == "incremental" else SOLVERS[solver]
        self.flight = InFlight(topology.link_capacity, pool)
        self.states = [_StreamState(ready=s.start) for s in traffic.streams]
        self.t = 0.0
        self.simulated = self.reused = 0
        self.seen: dict[tuple, tuple] = {}

    # -- routing of one step ---------------------------------------------------------
    def _route(self, phase: Phase) -> tuple[LinkMatrix, np.ndarray]:
        adaptive = self.routing.balance is Balance.ADAPTIVE
        load = self.flight.count.astype(np.float64) if adaptive else None
        return self.routes.route(phase, self.routing, load)

    def _start(self, s: int) -> None:
        st, phase = self.states[s], self.traffic.streams[s].phases[self.states[s].phase]
        m, lat = self._route(phase)
        lat = lat * phase.latency_hops
        block = Block(stream=s, matrix=m, total=phase.size, latency=lat, extra=phase.extra_latency, arrival=self.t)
        if phase.latency_mode == "mean" and lat.size:
            block.mean_latency = float(lat.mean())
            block.arrival = self.t + block.mean_latency
        zero = block.total <= 0
        if zero.any() and block.mean_latency is None:
            block.arrival = max(block.arrival, float((self.t + lat[zero]).max()))
        st.running = True
        self.flight.add(block, self.t)
        self.simulated += 1

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        while True:
            self._start_ready()
            if not self.flight.blocks:
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
        if self.reuse and not self.flight.blocks and all(
                st.done or i in starters for i, st in enumerate(self.states)):
            self._maybe_jump(starters)
        for s in starters:
            self._start(s)
        self._end_steps()

    def _maybe_jump(self, starters: list[int]) -> None:
        key = tuple((s, self.states[s].phase) for s in starters)
        reps = np.array([self.states[s].rep for s in starters])
        link_bytes = self.flight.link_bytes
        snap = self.seen.get(key)
        self.seen[key] = (self.t, reps, link_bytes.copy(), self.simulated)
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
        link_bytes += m * (link_bytes - bytes0)
        self.reused += m * (self.simulated - sim0)
        for s, d in zip(starters, dr.tolist()):
            self.states[s].rep += m * d
            self.states[s].ready = self.t
        self.seen[key] = (self.t, reps + m * dr, link_bytes.copy(), self.simulated)

    def _advance(self) -> None:
        """Rates at this event, then on to the next: a flow finishing or a stream starting
        (coarse: rates only when flows started, and on to the next step's end or start)."""
        if not self.coarse or self.flight.new_flows:
            self.flight.solve(self.t)
        t = self.flight.next_step_end() if self.coarse else self.flight.next_finish()
        waiting = [st.ready for st in self.states if not st.done and not st.running]
        if waiting and min(waiting) < t:
            t = min(waiting)
        self.t = t
        self.flight.finish_until(t, own_end=self.coarse)
        self._end_steps()

    def _end_steps(self) -> None:
        for b in self.flight.ended():
            st = self.states[b.stream]
            phases = self.traffic.streams[b.stream].phases
            st.running = False
            st.ready = b.arrival + b.extra
            st.rep += 1
            if st.rep >= phases[st.phase].repeat:
                st.phase, st.rep = st.phase + 1, 0
                if st.phase >= len(phases):
                    st.done, st.end = True, st.ready


def simulate(topology: Topology, traffic: Traffic, routing: Routing | None = None, *,
             reuse_phases: bool = True, solver: str = "incremental", fidelity: str = "auto",
             routes: PhaseRoutes | None = None) -> SimulationResult:
    """Simulate ``traffic`` on ``topology`` routed by ``routing`` (default ECMP, seed 0).

    Deterministic: the same inputs (including ``routing.seed``) give the same result.
    ``solver``: ``incremental`` (default) or ``reference``; ``fidelity``: ``auto`` (default),
    ``exact`` or ``coarse`` (see the module docstring). ``routes``: a :class:`PhaseRoutes` of
    ``topology`` shared by several simulations of the same phases (each routed once; the same
    results).
    """
    routing = routing or Routing()
    if solver not in SOLVERS:
        raise ConfigError("solver", solver, "one of " + ", ".join(SOLVERS))
    fidelity, reason = choose_fidelity(fidelity, _gpus_in(traffic))
    if traffic.max_gpu() >= topology.gpus:
        raise ConfigError("traffic", f"GPU {traffic.max_gpu()}", f"GPU indices below {topology.gpus} "
                          f"(the {topology.kind} fabric has {topology.gpus} GPUs)")
    eng = _Engine(topology, traffic, routing, reuse_phases, solver, coarse=fidelity == "coarse", routes=routes)
    eng.run()
    ends = {s.name: st.end for s, st in zip(traffic.streams, eng.states)}
    f = eng.flight
    return SimulationResult(
        completion_time=max(ends.values()), stream_times=ends, link_bytes=f.link_bytes,
        link_peak_flows=f.peak, topology=topology, traffic=traffic, routing=routing,
        solves=f.solves, steps_simulated=eng.simulated, steps_reused=eng.reused, flows_resolved=f.resolved,
        fidelity=fidelity, fidelity_reason=reason)


def _gpus_in(traffic: Traffic) -> int:
    """How many distinct GPUs send or receive in ``traffic``."""
    seen = np.zeros(traffic.max_gpu() + 1, dtype=bool)
    for stream in traffic.streams:
        for p in stream.phases:
            seen[p.src] = True
            seen[p.dst] = True
    return int(np.count_nonzero(seen))


def choose_fidelity(fidelity: str, gpus: int) -> tuple[str, str]:
    """``(exact or coarse, why)`` for a requested ``fidelity`` and traffic over ``gpus`` GPUs."""
    if fidelity not in FIDELITIES:
        raise ConfigError("fidelity", fidelity, "one of " + ", ".join(FIDELITIES))
    if fidelity != "auto":
        return fidelity, f"asked for ({fidelity})"
    if gpus > COARSE_ABOVE_GPUS:
        return "coarse", (f"{gpus:,} GPUs > {COARSE_ABOVE_GPUS:,}: rates re-solved when steps start, not "
                          "at every flow's finish (--fidelity exact forces the exact simulation)")
    return "exact", f"{gpus:,} GPUs <= {COARSE_ABOVE_GPUS:,}: every flow's finish re-solves the rates"


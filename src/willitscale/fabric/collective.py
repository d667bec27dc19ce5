"""Simulating collectives: one collective with nccl-tests metrics, a sweep over ECMP seeds, and
the times of a list of collective calls (the entry point for the estimate's flow backend)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from willitscale.collectives.flows import default_algorithm
from willitscale.collectives.metrics import busbw_factor
from willitscale.collectives.ops import Op, parse_op
from willitscale.errors import ConfigError
from willitscale.fabric.report import LinkReport, link_report
from willitscale.fabric.simulator import SimulationResult, simulate
from willitscale.fabric.traffic import CollectiveCall, calls_traffic, collective_call
from willitscale.topology.graph import Topology
from willitscale.topology.routing import Routing

__all__ = ["CollectiveReport", "simulate_collective", "SeedSweep", "sweep_seeds", "calls_time",
           "collective_time", "FlowCollectiveModel", "flow_collective_model"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveReport:
    """One simulated collective: its time, nccl-tests algbw/busbw and the link picture."""

    call: CollectiveCall
    routing: Routing
    completion_time: float
    links: LinkReport
    result: SimulationResult

    @property
    def algbw(self) -> float:
        return self.call.size / self.completion_time if self.completion_time > 0 else 0.0

    @property
    def busbw(self) -> float:
        return self.algbw * float(busbw_factor(self.call.op, self.call.ranks))

    def to_json(self) -> dict:
        r = self.result
        return {
            "op": self.call.op.value, "size_bytes": self.call.size, "ranks": self.call.ranks,
            "algorithm": self.call.algorithm, "channels": self.call.channels,
            "routing": self.routing.name, "seed": self.routing.seed,
            "completion_time_s": self.completion_time,
            "algbw_GBps": self.algbw / 1e9, "busbw_GBps": self.busbw / 1e9,
            **self.links.to_json(),
            "steps_simulated": r.steps_simulated, "steps_reused": r.steps_reused, "solves": r.solves,
        }


def simulate_collective(topology: Topology, op: Op | str, size: float, *, routing: Routing | None = None,
                        reuse_phases: bool = True, fidelity: str = "auto", **call_kwargs) -> CollectiveReport:
    """Simulate one collective; keywords as :func:`~willitscale.fabric.traffic.collective_call`
    (``gpus``, ``nodes``, ``algorithm``, ``placement``, ``channels``); ``fidelity`` as
    :func:`~willitscale.fabric.simulator.simulate`."""
    routing = routing or Routing()
    call = collective_call(topology, op, size, **call_kwargs)
    call = replace(call, algorithm=call.algorithm or _default(call.op))
    res = simulate(topology, calls_traffic(topology, [call]), routing, reuse_phases=reuse_phases,
                   fidelity=fidelity)
    return CollectiveReport(call=call, routing=routing, completion_time=res.completion_time,
                            links=link_report(res), result=res)


def _default(op: Op) -> str:
    return default_algorithm(op)


@dataclass(frozen=True, slots=True)
class SeedSweep:
    """The same simulation under several ECMP hash seeds."""

    reports: tuple[CollectiveReport, ...]

    @property
    def times(self) -> np.ndarray:
        return np.array([r.completion_time for r in self.reports])

    @property
    def worst(self) -> CollectiveReport:
        return self.reports[int(np.argmax(self.times))]

    def to_json(self) -> dict:
        """Mean/worst/best over the seeds; ``worst_seed`` is the seed of the slowest run.
        ``hottest_link_flows``: the most flows the slowest run's hottest link carried at once
        (``worst_seed_flows``, on ``worst_seed_link``) and the mean of that count over the seeds.
        ``max_link_utilization`` / ``mean_link_utilization`` are averaged over the seeds."""
        t = self.times
        worst = self.worst

        def hot_flows(r: CollectiveReport) -> int:
            return r.links.hottest[0]["peak_flows"] if r.links.hottest else 0

        return {
            "seeds": [r.routing.seed for r in self.reports],
            "worst_seed": worst.routing.seed,
            "completion_time_s": {"mean": float(t.mean()), "worst": float(t.max()), "best": float(t.min())},
            "busbw_GBps": {"mean": float(np.mean([r.busbw for r in self.reports])) / 1e9,
                           "worst": worst.busbw / 1e9},
            "max_link_utilization": float(np.mean([r.links.max_utilization for r in self.reports])),
            "mean_link_utilization": float(np.mean([r.links.mean_utilization for r in self.reports])),
            "hottest_link_flows": {"mean": float(np.mean([hot_flows(r) for r in self.reports])),
                                   "worst_seed_flows": hot_flows(worst),
                                   "worst_seed_link": worst.links.hottest[0]["link"] if worst.links.hottest
                                   else None},
            "per_seed": [{"seed": r.routing.seed, "completion_time_s": r.completion_time,
                          "busbw_GBps": r.busbw / 1e9, "hottest_link_flows": hot_flows(r)}
                         for r in self.reports],
        }


def sweep_seeds(run: Callable[[int], CollectiveReport], seeds: Iterable[int]) -> SeedSweep:
    """``run(seed)`` for every seed."""
    reports = tuple(run(int(s)) for s in seeds)
    if not reports:
        raise ConfigError("seeds", "none", "at least one seed")
    return SeedSweep(reports)


def calls_time(topology: Topology, calls: Sequence[CollectiveCall], routing: Routing | None = None,
               *, concurrent: bool = True) -> Mapping[str, float]:
    """Seconds each call takes. ``concurrent``: all calls start together and share the fabric
    (names must be unique); otherwise each runs alone on an idle fabric."""
    routing = routing or Routing()
    if concurrent:
        return dict(simulate(topology, calls_traffic(topology, calls), routing).stream_times)
    return {(c.name or f"call{i}"): simulate(topology, calls_traffic(topology, [c]), routing).completion_time
            for i, c in enumerate(calls)}


def collective_time(topology: Topology, call: CollectiveCall, routing: Routing | None = None) -> float:
    """Seconds one collective call (all its groups at once) takes on an otherwise idle fabric."""
    return simulate(topology, calls_traffic(topology, [call]), routing or Routing()).completion_time


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowCollectiveModel:
    """A collective's time on the fabric as ``per_byte x size + fixed`` seconds.

    Two simulations (at ``size`` 1 and 2 GB) give the line; :meth:`time` is then numpy-fast for
    any sizes. The line is exact - equal to simulating the call at that size - for one
    collective on an otherwise idle fabric, because of how the simulator runs a call:

    * every flow's bytes are proportional to the collective's size, and all flows of a step
      start together, so the step's max-min rates and the order in which its flows finish do
      not depend on the size: its transfers end at ``size x c_k``;
    * the call's channels and groups run **in lockstep**: step ``k`` of every channel and group
      is one phase (:func:`~willitscale.fabric.traffic.call_phases`), and the next step starts
      when that phase's last byte has arrived, so each step lasts ``size x c_k + l_k`` with
      ``l_k`` the latency charged at its end (a ring's mean hop latency; otherwise the path
      latency of the flow that arrives last, the same flow at every size for these collectives).

    Were the channels independent streams (as NCCL runs them), a channel that finished a step
    early would start its next while others still transfer; how steps overlap would then depend
    on size against latency, and a line through two sizes would only approximate. Several
    collectives sharing the fabric are not affine either: use :func:`calls_time`.
    """

    call: CollectiveCall  #: the collective at the reference size (1 GB)
    routing: Routing
    per_byte: float  #: seconds per byte of collective size
    fixed: float  #: seconds independent of size (latency terms)
    reference: CollectiveReport  #: the simulation at the reference size (links, hottest links)

    def time(self, sizes):
        """Seconds for each size in ``sizes`` (bytes, nccl-tests convention; array in, array out)."""
        s = np.asarray(sizes, dtype=float)
        return np.where(s > 0, self.per_byte * s + self.fixed, 0.0)


def flow_collective_model(topology: Topology, op: Op | str, *, routing: Routing | None = None,
                          groups: Sequence[Sequence[int]] | None = None, algorithm: str | None = None,
                          channels: int | None = None, **call_kwargs) -> FlowCollectiveModel:
    """The affine time model of ``op`` over ``groups`` (GPU indices in ring order; all groups at
    once) or, without groups, over ``call_kwargs`` as :func:`collective_call` takes them."""
    routing = routing or Routing()
    op = _op(op) if isinstance(op, str) else Op(op)
    ref = 1e9
    if groups is not None:
        call = CollectiveCall(op=op, size=ref, groups=tuple(map(tuple, groups)),
                              algorithm=algorithm or _default(op), channels=channels or 1, name=op.value)
    else:
        call = collective_call(topology, op, ref, algorithm=algorithm, channels=channels, **call_kwargs)
        call = replace(call, algorithm=call.algorithm or _default(call.op))
    t1 = simulate(topology, calls_traffic(topology, [call]), routing)
    t2 = simulate(topology, calls_traffic(topology, [replace(call, size=2 * ref)]), routing)
    per_byte = (t2.completion_time - t1.completion_time) / ref
    rep = CollectiveReport(call=call, routing=routing, completion_time=t1.completion_time,
                           links=link_report(t1), result=t1)
    return FlowCollectiveModel(call=call, routing=routing, per_byte=per_byte,
                               fixed=t1.completion_time - per_byte * ref, reference=rep)


def _op(name: str) -> Op:
    return parse_op(name)

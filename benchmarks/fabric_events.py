"""Why a training step on a congested fabric costs so many events, and where its CPU time goes.

    python benchmarks/fabric_events.py [--long] [--full]

Issue 15's step (TP 8, 2 x 100 MB TP all-reduces, 2 x 100 MB PP sends, a 1 GB DP all-reduce,
ECMP on a 4:1 fat-tree) at growing sizes; ``--long`` adds 32,768 GPUs (about a minute), ``--full``
the 65,536-GPU step itself (about ten CPU minutes, 400 MiB). For each
size, one exact simulation (``fidelity="exact"``: the simulator would pick its coarse fidelity
above 16,384 GPUs on its own) with the default (incremental) solver, accounted event by event:

* ``solves``: events (a flow finishing or a step starting, the max-min rates brought up to date);
* ``dp steps``: DP ring steps simulated event by event (the others are skipped by the exact
  repetition of :mod:`willitscale.fabric.simulator`, which needs a moment with no flow of another
  stream in flight: it starts only once TP and PP are done);
* ``per dp step``: solves per DP step simulated (every DP step's flows finish at that many
  distinct moments);
* ``with others``: share of the events while a TP or PP step was in flight too;
* ``big``: events that re-solved at least 10,000 flows (a slow flow finished, so nearly every
  flow's rate may rise: fact 1 of :mod:`willitscale.fabric.maxmin_incremental`), and their share
  of the CPU time.

Then, at 16,384 GPUs, what an opt-in finish tolerance would buy: a flow counts as finished once
less than ``tol`` of its bytes is left (the simulator's own ``DONE_TOL`` is 1e-9, rounding): fewer
events, and how much CPU time and accuracy that gives (largest relative change of a stream's
time). This wraps private methods of the engine (``_Engine._advance``, ``_Engine._start``) and
sets ``inflight.DONE_TOL`` for its accounting: a diagnostic, not an API.
"""

from __future__ import annotations

import argparse
import time

from _headlines import Headline, emit, long_flag

#: the step's bytes and counts, as issue 15 (and benchmarks/fabric_step.py) give them
COMM = {"tp_bytes": 100e6, "tp_count": 2, "pp_bytes": 100e6, "pp_count": 2, "dp_bytes": 1e9}

#: (GPUs, fat-tree parameters, layout): issue 15's 8,192-GPU step, then three tiers as its
#: 65,536-GPU step (``--k 128 --tiers 3 --nodes 8192 --tp 8 --pp 8 --dp 1024``) at 1/4 and 1/2
CASES = [(8192, {"k": 128, "nodes": 1024}, {"tp": 8, "pp": 4, "dp": 256}),
         (16384, {"k": 128, "tiers": 3, "nodes": 2048}, {"tp": 8, "pp": 8, "dp": 256})]
LONG = [(32768, {"k": 128, "tiers": 3, "nodes": 4096}, {"tp": 8, "pp": 8, "dp": 512})]
FULL = [(65536, {"k": 128, "tiers": 3, "nodes": 8192}, {"tp": 8, "pp": 8, "dp": 1024})]
#: the tolerances tried on the 16,384-GPU case
TOLERANCES = (1e-4, 1e-3, 1e-2)
BIG = 10_000  #: an event re-solving at least this many flows counts as big


def _setup(params: dict, layout: dict):
    from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
    from willitscale.topology import build_topology, parse_routing

    topo = build_topology("fat-tree", gpus_per_node=8, oversubscription=4, **params)
    return topo, step_traffic(topo, ParallelLayout(**layout), StepComm(**COMM)), parse_routing("ecmp", seed=1)


def _accounted(topo, traffic, routing) -> dict:
    """One simulation, its events counted by what was in flight and how many flows they re-solved."""
    from willitscale.fabric import simulator

    names = [s.name for s in traffic.streams]
    acc = {"events": 0, "with_others": 0, "big": 0, "big_cpu": 0.0, "dp_steps": 0}
    advance, start = simulator._Engine._advance, simulator._Engine._start

    def counted_advance(self):
        kinds = {names[b.stream] for b in self.flight.blocks}
        before, cpu = self.flight.resolved, time.process_time()
        advance(self)
        acc["events"] += 1
        acc["with_others"] += bool(kinds - {"dp"})
        if self.flight.resolved - before >= BIG:
            acc["big"] += 1
            acc["big_cpu"] += time.process_time() - cpu

    def counted_start(self, s):
        acc["dp_steps"] += names[s] == "dp"
        start(self, s)

    simulator._Engine._advance, simulator._Engine._start = counted_advance, counted_start
    try:
        cpu = time.process_time()
        res = simulator.simulate(topo, traffic, routing, fidelity="exact")
        acc["cpu"] = time.process_time() - cpu
    finally:
        simulator._Engine._advance, simulator._Engine._start = advance, start
    acc["result"] = res
    return acc


def _with_tolerance(topo, traffic, routing, tol: float):
    from willitscale.fabric import inflight, simulator

    exact = inflight.DONE_TOL
    inflight.DONE_TOL = tol
    try:
        cpu = time.process_time()
        res = simulator.simulate(topo, traffic, routing, fidelity="exact")
        return res, time.process_time() - cpu
    finally:
        inflight.DONE_TOL = exact


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    long_flag(ap)
    ap.add_argument("--full", action="store_true", help="add the 65,536-GPU step (about ten CPU minutes)")
    args = ap.parse_args(argv)
    print(f"{'GPUs':>7} {'solves':>8} {'dp steps':>9} {'per dp step':>11} {'with others':>11} {'big':>5} "
          f"{'big cpu':>8} {'cpu_s':>7} {'time_ms':>9}")
    rows = {}
    for gpus, params, layout in CASES + (LONG if args.long else []) + (FULL if args.full else []):
        topo, traffic, routing = _setup(params, layout)
        a = _accounted(topo, traffic, routing)
        rows[gpus] = a
        print(f"{gpus:>7,} {a['events']:>8,} {a['dp_steps']:>9,} {a['events'] / max(a['dp_steps'], 1):>11.0f} "
              f"{a['with_others'] / a['events']:>11.1%} {a['big']:>5} {a['big_cpu'] / a['cpu']:>8.1%} "
              f"{a['cpu']:>7.2f} {a['result'].completion_time * 1e3:>9.3f}", flush=True)
    gpus, params, layout = CASES[1]
    topo, traffic, routing = _setup(params, layout)
    exact, exact_cpu = rows[gpus]["result"], rows[gpus]["cpu"]
    print(f"\nfinish tolerance at {gpus:,} GPUs (exact: {exact.solves:,} solves, {exact_cpu:.2f} s CPU)")
    print(f"{'tol':>7} {'solves':>8} {'fewer':>6} {'cpu_s':>7} {'faster':>7} {'worst stream change':>20}")
    gains = []
    for tol in TOLERANCES:
        res, cpu = _with_tolerance(topo, traffic, routing, tol)
        worst = max(abs(res.stream_times[k] / v - 1) for k, v in exact.stream_times.items())
        gains.append((tol, exact.solves / res.solves, exact_cpu / cpu, worst))
        print(f"{tol:>7g} {res.solves:>8,} {gains[-1][1]:>5.1f}x {cpu:>7.2f} {gains[-1][2]:>6.2f}x {worst:>20.2e}",
              flush=True)
    heads = [Headline(f"step, {g:,} GPUs: solves per DP step simulated", r["events"] / max(r["dp_steps"], 1), "")
             for g, r in rows.items()]
    heads += [Headline(f"step, {g:,} GPUs: CPU share of events re-solving >= {BIG:,} flows",
                       100 * r["big_cpu"] / r["cpu"], "%") for g, r in rows.items()]
    heads += [Headline(f"step, {gpus:,} GPUs, finish tolerance {tol:g}: CPU speed-up (events {fewer:.1f}x fewer)",
                       faster, "x") for tol, fewer, faster, _ in gains]
    emit(heads)


if __name__ == "__main__":
    main()

"""The coarse fidelity against the exact simulation on issue 15's training step, scaled down.

    python benchmarks/fabric_fidelity.py [--long]

The step of ``fabric simulate --topology fat-tree --k 128 --tiers 3 --nodes 8192 --gpus-per-node 8
--oversubscription 4 --routing ecmp --step --tp 8 --pp 8 --dp 1024 --tp-bytes 100MB --tp-count 2
--pp-bytes 100MB --pp-count 2 --dp-bytes 1GB`` with DP (and the servers) scaled down: 1,024,
2,048, 4,096, 8,192 and 16,384 GPUs (DP 16 to 256); ``--long`` adds 32,768 (DP 512). ECMP seed 1,
as ``benchmarks/fabric_step.py``. Each size simulated exact and coarse in one process, one after
the other; for each: completion time, the signed relative error of coarse (``coarse / exact - 1``,
and the largest over the streams), solves and CPU seconds (the simulation alone, no build).

``coarse`` re-solves the max-min rates only when a step starts (docs/fabric.md "Speed" and
:mod:`willitscale.fabric.simulator`). Its error has no derived bound on this traffic (several
streams of unequal sizes); the table is a measurement, not a guarantee.
"""

from __future__ import annotations

import argparse
import time

from _headlines import Headline, emit, long_flag

#: the step's bytes and counts, as issue 15 (and benchmarks/fabric_step.py) give them
COMM = {"tp_bytes": 100e6, "tp_count": 2, "pp_bytes": 100e6, "pp_count": 2, "dp_bytes": 1e9}
SIZES = (1024, 2048, 4096, 8192, 16384)
LONG = (32768,)


def _case(gpus: int):
    from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
    from willitscale.topology import build_topology, parse_routing

    topo = build_topology("fat-tree", k=128, tiers=3, nodes=gpus // 8, gpus_per_node=8, oversubscription=4)
    traffic = step_traffic(topo, ParallelLayout(tp=8, pp=8, dp=gpus // 64), StepComm(**COMM))
    return topo, traffic, parse_routing("ecmp", seed=1)


def _timed(topo, traffic, routing, fidelity: str):
    from willitscale.fabric.simulator import simulate

    cpu = time.process_time()
    res = simulate(topo, traffic, routing, fidelity=fidelity)
    return res, time.process_time() - cpu


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    long_flag(ap)
    args = ap.parse_args(argv)
    print(f"{'GPUs':>7} {'exact_ms':>10} {'coarse_ms':>10} {'error':>8} {'worst stream':>13} "
          f"{'solves e/c':>13} {'cpu e/c s':>13} {'faster':>7}")
    rows = []
    for gpus in SIZES + (LONG if args.long else ()):
        topo, traffic, routing = _case(gpus)
        exact, cpu_e = _timed(topo, traffic, routing, "exact")
        coarse, cpu_c = _timed(topo, traffic, routing, "coarse")
        err = coarse.completion_time / exact.completion_time - 1
        worst = max((coarse.stream_times[k] / exact.stream_times[k] - 1 for k in exact.stream_times),
                    key=abs)
        rows.append((gpus, err, worst, cpu_e / cpu_c))
        print(f"{gpus:>7,} {exact.completion_time * 1e3:>10.4f} {coarse.completion_time * 1e3:>10.4f} "
              f"{err:>+8.2%} {worst:>+13.2%} {exact.solves:>6,}/{coarse.solves:<6,} "
              f"{cpu_e:>6.2f}/{cpu_c:<6.2f} {cpu_e / cpu_c:>6.1f}x", flush=True)
    heads = [Headline(f"step, {g:,} GPUs: coarse / exact completion - 1", err * 100, "%", digits=3)
             for g, err, _, _ in rows]
    heads += [Headline("largest |error| of a stream's time over the sizes", max(abs(w) for *_, w, _ in rows) * 100,
                       "%", digits=3)]
    heads += [Headline(f"step, {rows[-1][0]:,} GPUs: exact / coarse CPU seconds", rows[-1][3], "x")]
    emit(heads)


if __name__ == "__main__":
    main()

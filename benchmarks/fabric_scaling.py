"""How the flow simulator's wall time grows with the number of GPUs.

Run: python benchmarks/fabric_scaling.py [--max-gpus 8192] [--no-reuse-up-to 1024] [--long]

A 1 GB ring all_reduce over every GPU of a non-blocking rail-optimized fabric of 8-GPU servers
(128-port switches, 400 Gb/s NICs), 8 channels (one ring per rail, as NCCL), ECMP and
spraying; the largest size is the "full DP all_reduce on 8,192 GPUs". For each size: wall time
to build the topology and to simulate, the steps simulated and reused, and the simulated
completion time and busbw. Up to ``--no-reuse-up-to`` GPUs the same run without phase reuse is
timed too (it must give the same completion time: the reuse is exact). The last line is the
log-log slope of simulation wall time against GPUs, measured in this run.

Goals on a 2-core machine: 1,024 GPUs under 2 s, 8,192 GPUs under 30 s (build + simulate,
ECMP, phase reuse on, as ``fabric simulate`` runs by default). ``--long`` times the run without
phase reuse up to 4,096 GPUs (minutes) instead of 1,024.
"""

from __future__ import annotations

import argparse
import math
import time

from _headlines import Headline, emit, long_flag
from willitscale.fabric import simulate_collective
from willitscale.topology import build_topology, parse_routing


def run(gpus: int, routing: str, reuse: bool) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    topo = build_topology("rail-optimized", nodes=gpus // 8, gpus_per_node=8, radix=128)
    t1 = time.perf_counter()
    rep = simulate_collective(topo, "all_reduce", 1e9, routing=parse_routing(routing, seed=1), reuse_phases=reuse)
    return t1 - t0, time.perf_counter() - t1, rep


#: wall-time goals (s), build + simulate, ECMP, reuse: {GPUs: seconds}
GOALS = {1024: 2.0, 8192: 30.0}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-gpus", type=int, default=8192)
    ap.add_argument("--no-reuse-up-to", type=int, default=None,
                    help="also time the run without phase reuse up to this many GPUs "
                         "(default 1024; --long 4096)")
    long_flag(ap)
    args = ap.parse_args(argv)
    no_reuse_up_to = args.no_reuse_up_to or (4096 if args.long else 1024)
    sizes = [g for g in (128, 256, 512, 1024, 2048, 4096, 8192) if g <= args.max_gpus]
    run(64, "ecmp", True)  # warm up imports
    print(f"{'GPUs':>6} {'routing':>8} {'reuse':>5} {'build_s':>8} {'simulate_s':>10} {'steps_sim':>9} "
          f"{'steps_reused':>12} {'solves':>7} {'time_ms':>9} {'busbw_GBps':>10}")
    walls: dict[int, float] = {}
    without: dict[int, float] = {}
    for gpus in sizes:
        for routing in ("ecmp", "spray"):
            modes = (True, False) if gpus <= no_reuse_up_to and routing == "ecmp" else (True,)
            for reuse in modes:
                build, wall, rep = run(gpus, routing, reuse)
                r = rep.result
                if routing == "ecmp":
                    (walls if reuse else without)[gpus] = build + wall
                print(f"{gpus:>6} {routing:>8} {'yes' if reuse else 'no':>5} {build:>8.3f} {wall:>10.3f} "
                      f"{r.steps_simulated:>9} {r.steps_reused:>12} {r.solves:>7} "
                      f"{rep.completion_time * 1e3:>9.3f} {rep.busbw / 1e9:>10.1f}", flush=True)
    headlines = [Headline(f"1 GB ring all_reduce on {g:,} GPUs (build + simulate)", walls[g], "s",
                          at_most=goal, digits=2) for g, goal in GOALS.items() if g in walls]
    if len(walls) >= 2:
        lo, hi = min(walls), max(walls)
        slope = math.log(walls[hi] / walls[lo]) / math.log(hi / lo)
        print(f"wall time (build + simulate, ECMP, reuse) grows as GPUs^{slope:.2f} from {lo} to {hi} GPUs; "
              f"{hi} GPUs: {walls[hi]:.2f} s")
        headlines.append(Headline(f"growth of wall time with GPUs, {lo} to {hi} (exponent k of "
                                  "GPUs^k)", slope, "", digits=2))
    if without:
        g = max(without)
        headlines.append(Headline(f"phase reuse speed-up at {g:,} GPUs (same result)",
                                  without[g] / walls[g], "x"))
    emit(headlines)


if __name__ == "__main__":
    main()

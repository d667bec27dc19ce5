"""How fast the planner evaluates plans: candidates per second, and plans timed per second.

    python benchmarks/planner_speed.py [--long]

Four searches on this machine (the acceptance case, a larger cluster, two MoE models). Each
reports every candidate considered (structural checks, memory, step time for the ones that fit)
per second:

* ``cold``: the first search of a process, as ``willitscale plan`` runs it (it fills the
  bucket-layout caches);
* ``warm``: the best of 3 repeats (--long: 7);
* ``cpu``: the warm search's candidates per second of this process's CPU time, which other
  work on a shared machine disturbs far less than wall time (a loaded 2-core machine can halve
  the wall-time figures);

and the full step-time model alone (the plans that fit) per second, best of the repeats, with the
per-op compute model's cost as a ratio: the same plans timed with a flat ``--hfu 0.5`` in the
same run (the per-op model times each distinct operation shape once per batch). The
goal, >= 100,000 plans/s through the full step-time model, is checked on the acceptance case;
the slowest search is reported beside it, and the slowest cold search in candidates/s (what
``willitscale plan`` prints).
"""

from __future__ import annotations

import argparse
import os
import time

from _headlines import Headline, emit, long_flag
from willitscale.scenario.build import build_scenario
from willitscale.plan.search import search

CASES = (
    ("gpt3-175b, 1024 A100 (the acceptance case)",
     {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8,
      "inter_node": "8x200Gbps", "seq_len": 2048}, 1024, 1536),
    ("llama3-70b, 4096 H100",
     {"model": "llama3-70b", "gpu": "h100", "nodes": 512, "gpus_per_node": 8, "seq_len": 8192},
     4096, 2048),
    ("mixtral-8x7b, 64 H100 (expert parallelism)",
     {"model": "mixtral-8x7b", "gpu": "h100", "nodes": 8, "gpus_per_node": 8, "seq_len": 4096},
     64, 512),
    ("mixtral-8x7b, 256 H100 (expert parallelism)",
     {"model": "mixtral-8x7b", "gpu": "h100", "nodes": 32, "gpus_per_node": 8, "seq_len": 4096},
     256, 1024),
)

#: plans per second through the full step-time model (the planner's goal)
GOAL_PLANS_PER_S = 100_000


def _timed(scenario, gpus: int, batch: int):
    wall, cpu = time.perf_counter(), time.process_time()
    result = search(scenario, gpus=gpus, global_batch=batch)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def run(name: str, settings: dict, gpus: int, batch: int, repeats: int = 3) -> dict[str, float]:
    """Rates of one search: candidates/s cold, warm and per CPU second, and plans/s through the
    full step-time model (best of ``repeats``)."""
    from willitscale.step.evaluate import evaluate
    from willitscale.step.data import _stage_layout, stage_buckets

    _stage_layout.cache_clear()  # each case starts cold, as a new `willitscale plan` process
    stage_buckets.cache_clear()
    scenario = build_scenario({**settings, "micro_batch": 1})
    result, cold, _ = _timed(scenario, gpus, batch)
    wall = cpu = full = float("inf")
    for _ in range(repeats):
        result, w, c = _timed(scenario, gpus, batch)
        wall, cpu = min(wall, w), min(cpu, c)
        fitting = result.batch.take(result.ranked)
        start = time.perf_counter()
        evaluate(scenario, fitting)
        full = min(full, time.perf_counter() - start)
    flat_scenario = build_scenario({**settings, "micro_batch": 1, "hfu": 0.5})
    flat = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        evaluate(flat_scenario, fitting)
        flat = min(flat, time.perf_counter() - start)
    n, timed = result.evaluated, len(result.ranked)
    print(f"{name}: {n:,} candidates ({timed:,} fit and timed): cold {n / cold:,.0f}/s, "
          f"warm {n / wall:,.0f}/s, cpu {n / cpu:,.0f}/s; top plan "
          f"{result.batch.plan(int(result.ranked[0]))}")
    print(f"    full step-time model on the {timed:,} plans that fit: {full:.3f} s = "
          f"{timed / full:,.0f} plans/s; with a flat --hfu 0.5 instead of the per-op compute "
          f"model {flat:.3f} s: per-op / flat time = {full / flat:.2f}")
    return {"cold": n / cold, "warm": n / wall, "cpu": n / cpu, "full": timed / full,
            "per_op_cost": full / flat}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    long_flag(ap)
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rates = {case[0]: run(*case, repeats=7 if args.long else 3) for case in CASES}
    acceptance = rates[CASES[0][0]]
    slowest = min(rates, key=lambda k: rates[k]["full"])
    coldest = min(rates, key=lambda k: rates[k]["cold"])
    emit([Headline("planner, acceptance case (gpt3-175b, 1024 A100): candidates", acceptance["warm"],
                   "candidates/s"),
          Headline("planner, acceptance case: full step-time model", acceptance["full"], "plans/s",
                   at_least=GOAL_PLANS_PER_S),
          Headline("planner, acceptance case: per-op compute model's time over a flat HFU's "
                   "(same plans, same run)", acceptance["per_op_cost"], "x"),
          Headline(f"planner, slowest search ({slowest.split(' (')[0]}): full step-time model",
                   rates[slowest]["full"], "plans/s"),
          Headline(f"planner, slowest cold search ({coldest.split(' (')[0]}): candidates",
                   rates[coldest]["cold"], "candidates/s")])


if __name__ == "__main__":
    main()

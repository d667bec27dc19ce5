"""How fast the planner evaluates plans: candidates per second, and plans timed per second.

    python benchmarks/planner_speed.py [--long]

Three searches on this machine (the acceptance case, a larger cluster, an MoE model). Each
reports every candidate considered (structural checks, memory, step time for the ones that fit)
per second of wall time, and the full step-time model alone (the plans that fit) per second.
The first search of a process pays the bucket-layout caches; the figures reported are the best
of 3 repeats (warm; --long: 7). The goal, >= 100,000 plans/s through the full step-time model,
is checked on the acceptance case; the slowest of the three searches is reported beside it.
"""

from __future__ import annotations

import argparse
import time

from _headlines import Headline, emit, long_flag
from willitscale.plan.build import build_scenario
from willitscale.plan.search import search

CASES = (
    ("gpt3-175b, 1024 A100 (the acceptance case)",
     {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8,
      "inter_node": "8x200Gbps", "seq_len": 2048}, 1024, 1536),
    ("llama3-70b, 4096 H100",
     {"model": "llama3-70b", "gpu": "h100", "nodes": 512, "gpus_per_node": 8, "seq_len": 8192},
     4096, 2048),
    ("mixtral-8x7b, 256 H100 (expert parallelism)",
     {"model": "mixtral-8x7b", "gpu": "h100", "nodes": 32, "gpus_per_node": 8, "seq_len": 4096},
     256, 1024),
)


#: plans per second through the full step-time model (the planner's goal)
GOAL_PLANS_PER_S = 100_000


def run(name: str, settings: dict, gpus: int, batch: int, repeats: int = 3) -> tuple[float, float]:
    """``(candidates/s, plans/s through the full step-time model)``, best of ``repeats``."""
    from willitscale.plan.engine import evaluate

    scenario = build_scenario({**settings, "micro_batch": 1})
    best = full = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = search(scenario, gpus=gpus, global_batch=batch)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
        fitting = result.batch.take(result.ranked)
        start = time.perf_counter()
        evaluate(scenario, fitting)
        seconds = time.perf_counter() - start
        full = seconds if full is None else min(full, seconds)
    timed = len(result.ranked)
    print(f"{name}: {result.evaluated:,} candidates ({timed:,} fit and timed) in {best:.3f} s "
          f"= {result.evaluated / best:,.0f} candidates/s; top plan {result.batch.plan(int(result.ranked[0]))}")
    print(f"    full step-time model on the {timed:,} plans that fit: {full:.3f} s = "
          f"{timed / full:,.0f} plans/s")
    return result.evaluated / best, timed / full


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    long_flag(ap)
    args = ap.parse_args(argv)
    rates = {case[0]: run(*case, repeats=7 if args.long else 3) for case in CASES}
    acceptance = rates[CASES[0][0]]
    slowest = min(rates, key=lambda k: rates[k][1])
    emit([Headline("planner, acceptance case (gpt3-175b, 1024 A100): candidates", acceptance[0],
                   "candidates/s"),
          Headline("planner, acceptance case: full step-time model", acceptance[1], "plans/s",
                   at_least=GOAL_PLANS_PER_S),
          Headline(f"planner, slowest search ({slowest.split(' (')[0]}): full step-time model",
                   rates[slowest][1], "plans/s")])


if __name__ == "__main__":
    main()

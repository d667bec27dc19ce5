"""How fast the planner evaluates plans: candidates per second, and plans timed per second.

    python benchmarks/planner_speed.py

Three searches on this machine (the acceptance case, a larger cluster, an MoE model). Each
reports every candidate considered (structural checks, memory, step time for the ones that fit)
per second of wall time, and the full step-time model alone (the plans that fit) per second.
The first search of a process pays the bucket-layout caches; the figure reported is the best
of a few repeats (warm). No thresholds: speed goals are not unit tests.
"""

from __future__ import annotations

import time

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


def run(name: str, settings: dict, gpus: int, batch: int, repeats: int = 3) -> None:
    scenario = build_scenario({**settings, "micro_batch": 1})
    best = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = search(scenario, gpus=gpus, global_batch=batch)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    timed = len(result.ranked)
    print(f"{name}: {result.evaluated:,} candidates ({timed:,} fit and timed) in {best:.3f} s "
          f"= {result.evaluated / best:,.0f} candidates/s; top plan {result.batch.plan(int(result.ranked[0]))}")
    start = time.perf_counter()
    from willitscale.plan.engine import evaluate

    evaluate(scenario, result.batch.take(result.ranked))
    full = time.perf_counter() - start
    print(f"    full step-time model on the {timed:,} plans that fit: {full:.3f} s = "
          f"{timed / full:,.0f} plans/s")


def main() -> None:
    for case in CASES:
        run(*case)


if __name__ == "__main__":
    main()

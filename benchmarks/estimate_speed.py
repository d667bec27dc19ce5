"""How fast the data-parallel estimate runs: one scenario at a time, and the bucket schedule in
batches (what the planner of issue 4 will call with arrays of plans).

    python benchmarks/estimate_speed.py [--long]

(--long: 300 calls per scenario instead of 30, 300,000 bucket schedules instead of 100,000.)

Prints ratios measured in this run; no thresholds (speed goals are not unit tests).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _headlines import Headline, emit, long_flag
from willitscale.step.buckets import comm_schedule, last_end
from willitscale.scenario.build import build_scenario
from willitscale.estimation.estimate import estimate


def per_call(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    long_flag(ap)
    args = ap.parse_args(argv)
    repeat, plans = (300, 300_000) if args.long else (30, 100_000)
    params_mode = build_scenario({"params": 2e9, "gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8,
                                  "inter_node": "200Gbps", "micro_batch": 2, "seq_len": 2048,
                                  "hfu": 0.5, "recompute": "full"})
    shape_mode = build_scenario({"model": "gpt2-xl", "preset": "dgx-a100", "nodes": 4, "micro_batch": 4})
    headlines = []
    for name, scenario in (("--params 2e9, 4 nodes", params_mode), ("gpt2-xl on 4 DGX A100", shape_mode)):
        estimate(scenario)  # warm the caches: the figure is a warm call's
        seconds = per_call(lambda s=scenario: estimate(s), repeat)
        print(f"estimate(), {name}: {seconds * 1e3:.2f} ms per call ({1 / seconds:,.0f} per second)")
        headlines.append(Headline(f"estimate(), {name}", seconds * 1e3, "ms per call"))
    rng = np.random.default_rng(0)
    buckets = 128
    ready = np.sort(rng.uniform(0, 1, size=(plans, buckets)), axis=1)
    duration = rng.uniform(0, 0.01, size=(plans, buckets))
    for name, fn in (("comm_schedule (every start and end)", comm_schedule),
                     ("last_end (exposed only)", last_end)):
        seconds = per_call(lambda f=fn: f(ready, duration), 3)
        print(f"{name}: {plans:,} plans x {buckets} buckets in {seconds:.3f} s "
              f"= {plans / seconds:,.0f} plans per second")
        headlines.append(Headline(f"DDP bucket schedule, {name.split(' (')[0]}", plans / seconds,
                                  "plans/s"))
    emit(headlines)


if __name__ == "__main__":
    main()

"""How fast the collective cost models evaluate a batch (size x ranks grid) vs one call at a time.

Run: python benchmarks/collectives_vectorized.py [N] [--long]. For each all-reduce algorithm and
for fastest(), reports evaluations/s for one batch call over N (size, ranks) pairs (default
200,000; --long 2,000,000) and for a Python loop over the first 500 (--long 5,000), and their
ratio, measured in this one run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _headlines import Headline, emit, long_flag
from willitscale.collectives import Hierarchy, LinkCost, collective_cost, fastest

FLAT = LinkCost(bandwidth=50e9, latency=5e-6)
TWO = Hierarchy(ranks_per_node=8, intra=LinkCost(bandwidth=450e9, latency=1e-6),
                inter=LinkCost(bandwidth=400e9, latency=5e-6))


def grid(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = 10.0 ** rng.uniform(3, 10, n)
    ranks = 8.0 * rng.integers(1, 513, n)  # whole 8-GPU nodes
    return sizes, ranks


def rate(fn, sizes, ranks, loop: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn(sizes, ranks)
    batch = len(sizes) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for s, n in zip(sizes[:loop], ranks[:loop]):
        fn(float(s), int(n))
    single = loop / (time.perf_counter() - t0)
    return batch, single


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", help="(size, ranks) pairs in the batch")
    long_flag(ap)
    args = ap.parse_args(argv)
    n = args.n or (2_000_000 if args.long else 200_000)
    loop = 5_000 if args.long else 500
    sizes, ranks = grid(n)
    cases = {
        "ring (flat)": lambda s, r: collective_cost("all_reduce", "ring", s, r, FLAT),
        "halving_doubling (flat)": lambda s, r: collective_cost("all_reduce", "halving_doubling", s, r, FLAT),
        "hierarchical (2 levels)": lambda s, r: collective_cost("all_reduce", "hierarchical", s, r, TWO),
        "fastest (2 levels)": lambda s, r: fastest("all_reduce", s, r, TWO),
    }
    print(f"{'case':26s} {'batch/s':>12s} {'loop/s':>10s} {'ratio':>7s}")
    rates = {}
    for name, fn in cases.items():
        batch, single = rate(fn, sizes, ranks, loop=loop)
        rates[name] = (batch, single)
        print(f"{name:26s} {batch:12.3g} {single:10.3g} {batch / single:7.0f}x")
    batch, single = rates["fastest (2 levels)"]
    emit([Headline("fastest() over 2 levels, batched", batch, "evaluations/s"),
          Headline("fastest() batched vs one call at a time", batch / single, "x", digits=3),
          Headline("ring cost batched vs one call at a time",
                   rates["ring (flat)"][0] / rates["ring (flat)"][1], "x")])


if __name__ == "__main__":
    main()

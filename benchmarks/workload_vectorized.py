"""How fast the workload functions evaluate a batch of plans, vs one plan at a time.

Run: python benchmarks/workload_vectorized.py [N] [--long]. Reports plans/s for a batch of N
plans (default 100,000; --long 1,000,000; seq_len, micro-batch, tp, sequence parallelism,
recomputation, ZeRO stage, dp all varying) and for a Python loop over the first 2,000 (--long
20,000), and their ratio, measured in this one run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _headlines import Headline, emit, long_flag
from willitscale.memory.activations import activation_memory
from willitscale.memory.state import state_bytes_per_gpu
from willitscale.workload import get_model, training_flops
from willitscale.workload.params import layer_params_per_tp_rank


def plans(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "seq_len": rng.choice([1024, 2048, 4096, 8192], n),
        "micro_batch": rng.choice([1, 2, 4, 8], n),
        "tp": rng.choice([1, 2, 4, 8], n),
        "sp": rng.choice([False, True], n),
        "recompute": rng.choice(np.array(["none", "selective", "full"]), n),
        "zero_stage": rng.choice([0, 1, 2, 3], n),
        "dp": rng.choice([1, 8, 64, 512], n),
    }


def evaluate(model, p) -> float:
    flops = training_flops(model, p["seq_len"], recompute=p["recompute"]).hardware_per_token
    act = activation_memory(model, p["seq_len"], p["micro_batch"], recompute=p["recompute"], tp=p["tp"],
                            sequence_parallel=p["sp"]).total
    params = model.layers * layer_params_per_tp_rank(model, p["tp"])
    state = state_bytes_per_gpu(params, "zero-16", p["zero_stage"], p["dp"])
    return np.sum(flops) + np.sum(act) + np.sum(state)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", help="plans in the batch")
    long_flag(ap)
    args = ap.parse_args(argv)
    n = args.n or (1_000_000 if args.long else 100_000)
    model = get_model("llama3-70b")
    batch = plans(n)
    evaluate(model, plans(10))  # warm up imports
    t0 = time.perf_counter()
    evaluate(model, batch)
    batched = n / (time.perf_counter() - t0)
    k = min(n, 20_000 if args.long else 2_000)
    one_at_a_time = [{key: v[i].item() for key, v in batch.items()} for i in range(k)]
    t0 = time.perf_counter()
    for p in one_at_a_time:
        evaluate(model, p)
    looped = k / (time.perf_counter() - t0)
    print(f"batched: {batched:,.0f} plans/s ({n:,} plans)")
    print(f"looped:  {looped:,.0f} plans/s ({k:,} plans)")
    print(f"ratio:   {batched / looped:,.0f}x")
    emit([Headline("workload (FLOPs, activations, state) batched", batched, "plans/s"),
          Headline("batched vs one plan at a time", batched / looped, "x")])


if __name__ == "__main__":
    main()

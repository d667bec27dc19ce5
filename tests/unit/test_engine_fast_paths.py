"""The engine's short cuts for a batch of one plan change no number.

A batch of one plan on a kept context takes the engine's short cuts: its pure parts kept in
``Context.memo`` (memory, the gradient tail's stage groups, placements, per-op costs), every
stage column's gradient buckets timed in one line evaluation, and collectives no plan uses not
evaluated at all. A batch of more than ``MEMO_PLANS`` mixed plans takes none of them (nothing
kept, each stage column timed on its own, every collective evaluated for some plan, no group
of one rank alone in its lines). Each plan
alone, on a fresh context and again on the same context (from the memo), must equal its row of
the big batch exactly: the invariant is that a plan's numbers do not depend on the company it
is evaluated in, nor on what the context already holds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.engine import MEMO_PLANS, new_context
from willitscale.step.evaluate import run

DENSE = {"model": "llama2-7b", "preset": "dgx-h100", "nodes": 4, "micro_batch": 1,
         "seq_len": 4096, "recompute": "full"}
# data parallel only; TP + PP + DP with and without sequence parallelism; ZeRO-1/2/3 (hybrid
# sharding within a node too); context parallelism; the interleaved schedule
DENSE_PLANS = [
    {"dp": 32, "global_batch": 64},
    {"tp": 2, "pp": 2, "dp": 8, "global_batch": 64, "sequence_parallel": True, "zero": 1},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32},
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 32, "zero": 2},
    {"tp": 2, "cp": 2, "dp": 8, "global_batch": 32, "zero": 3, "shard_scope": "node",
     "sequence_parallel": True},
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 64, "pp_schedule": "interleaved",
     "virtual_stages": 2},
]
MOE = {"model": "mixtral-8x7b", "preset": "dgx-h100", "nodes": 4, "micro_batch": 1,
       "seq_len": 2048, "recompute": "full", "sequence_parallel": True}
MOE_PLANS = [
    {"tp": 2, "pp": 2, "dp": 8, "ep": 4, "global_batch": 64, "zero": 1},
    {"tp": 2, "dp": 16, "ep": 8, "global_batch": 64},
    {"tp": 4, "pp": 2, "dp": 4, "ep": 2, "global_batch": 32, "zero": 3},
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 32, "zero": 1},  # ep 1: all-to-alls of one rank
]


def _fields(result):
    """Every per-plan number of a result, by name."""
    out = {name: getattr(result, name) for name in (
        "step_time", "data_loading", "forward", "backward", "overlap_slowdown", "exposed_comms",
        "optimizer", "bubble", "compute", "comms", "model_flops", "executed_flops",
        "memory_column", "critical")}
    out["memory"] = result.memory.total
    for kind, parts in result.traffic.items():
        for part, value in parts.items():
            out[f"traffic {kind} {part}"] = value
    return out


@pytest.mark.parametrize("base, plans", [(DENSE, DENSE_PLANS), (MOE, MOE_PLANS)],
                         ids=["dense", "moe"])
def test_a_plan_alone_equals_its_row_of_a_big_mixed_batch(base, plans):
    scenarios = [build_scenario({**base, **p}) for p in plans]
    repeats = MEMO_PLANS // len(plans) + 1  # more than MEMO_PLANS rows: nothing kept
    big = PlanBatch.from_plans([s.plan for s in scenarios] * repeats)
    assert len(big) > MEMO_PLANS
    rows = _fields(run(new_context(scenarios[0]), big))
    assert np.all(np.isfinite(rows["step_time"]) & (rows["step_time"] > 0))  # real numbers compared
    for i, sc in enumerate(scenarios):
        ctx = new_context(sc)
        one = PlanBatch.from_plans([sc.plan])
        for attempt in ("fresh context", "kept context"):
            alone = _fields(run(ctx, one))
            assert alone.keys() == rows.keys()
            for name, value in alone.items():
                assert np.array_equal(np.asarray(value)[0], np.asarray(rows[name])[i],
                                      equal_nan=True), (plans[i], attempt, name)


# data parallel only (--params), TP + PP + DP, ZeRO-3 with hybrid sharding, MoE with expert
# parallelism, context parallelism, and --network flow on a small oversubscribed fat-tree
ESTIMATES = {
    "dp only": {"params": 1.3e9, "gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8, "dp": 32,
                "micro_batch": 1, "global_batch": 128, "seq_len": 2048},
    "tp pp dp": {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 64, "gpus_per_node": 8,
                 "tp": 8, "pp": 8, "dp": 8, "global_batch": 512, "seq_len": 2048,
                 "recompute": "full"},
    "zero-3 hybrid": {**DENSE, "dp": 32, "zero": 3, "shard_scope": "node", "global_batch": 64},
    "moe ep": {**MOE, "tp": 2, "pp": 2, "dp": 8, "ep": 4, "zero": 1, "global_batch": 64},
    "cp": {**DENSE, "tp": 2, "cp": 4, "dp": 4, "seq_len": 32768, "global_batch": 16,
           "sequence_parallel": True},
    "flow fat-tree": {**DENSE, "tp": 2, "pp": 2, "dp": 8, "zero": 1, "global_batch": 64,
                      "seq_len": 2048, "network": "flow", "topology": "fat-tree",
                      "oversubscription": 4},
}


@pytest.mark.parametrize("name", list(ESTIMATES))
def test_an_estimate_with_nothing_kept_on_its_context_is_the_same(name, monkeypatch):
    """The memo keys name every input: ``estimate()`` (its fit, probes and fixes run the engine
    on contexts that share one memo, with scaled links) gives the same JSON, byte for byte,
    when no batch is small enough to be kept."""
    import willitscale.step.engine as engine
    from willitscale.estimation.estimate import estimate

    kept = json.dumps(estimate(build_scenario(ESTIMATES[name])).to_json())
    monkeypatch.setattr(engine, "MEMO_PLANS", 0)
    assert json.dumps(estimate(build_scenario(ESTIMATES[name])).to_json()) == kept

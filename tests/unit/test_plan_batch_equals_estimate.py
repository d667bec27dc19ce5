"""The planner's batched evaluation gives exactly what estimate() gives, plan by plan.

The planner evaluates thousands of plans as numpy arrays; estimate() evaluates one. They share
the engine, and this test checks the claim on a sample of the plans the planner ranks and a
sample of every kind it could meet (ZeRO stages, schedules, CP, EP, hybrid sharding).
"""

import numpy as np
import pytest

from willitscale.estimation.estimate import estimate
from willitscale.plan.search import SearchSpace, search
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.evaluate import evaluate

BASE = {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 16, "gpus_per_node": 8,
        "inter_node": "8x200Gbps", "seq_len": 2048, "micro_batch": 1}


def _compare(settings, plan, batch_result, i):
    scenario = build_scenario({**settings, **_flags(plan)})
    one = estimate(scenario, allow_oom=True)
    assert one.step_time == pytest.approx(float(batch_result.step_time[i]), rel=1e-9)
    assert one.memory.total == pytest.approx(float(batch_result.memory_per_gpu[i]), rel=1e-9)
    assert one.tflops_per_gpu == pytest.approx(float(batch_result.tflops_per_gpu[i]), rel=1e-9)
    assert one.breakdown.bubble == pytest.approx(float(batch_result.bubble[i]), rel=1e-9, abs=1e-12)


def _flags(plan) -> dict:
    return {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep,
            "zero": plan.zero, "shard_scope": plan.shard_scope, "micro_batch": plan.micro_batch,
            "grad_accum": plan.grad_accum, "recompute": plan.recompute,
            "pp_schedule": plan.pp_schedule, "virtual_stages": plan.virtual_stages,
            "sequence_parallel": plan.sequence_parallel}


def test_a_sample_of_ranked_plans_matches_estimate():
    scenario = build_scenario(BASE)
    result = search(scenario, gpus=128, global_batch=256, space=SearchSpace(max_micro_batch=4))
    assert len(result.ranked) > 100
    rng = np.random.default_rng(0)
    sample = np.concatenate([result.ranked[:5], rng.choice(result.ranked, 15, replace=False)])
    batch = result.batch.take(sample)
    evaluated = evaluate(scenario, batch)
    for i in range(len(sample)):
        # the search's own numbers are the batch's
        assert evaluated.step_time[i] == pytest.approx(result.step_time[sample[i]], rel=1e-12)
        _compare(BASE, batch.plan(i), evaluated, i)


@pytest.mark.parametrize("settings, plans", [
    ({"params": 2e9, "gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8, "inter_node": "200Gbps",
      "seq_len": 2048, "micro_batch": 2, "hfu": 0.5, "recompute": "full"},
     [dict(dp=32, zero=z) for z in (0, 1, 2, 3)] + [dict(dp=32, zero=3, shard_scope="node")]),
    ({"model": "llama3-8b", "gpu": "h100", "nodes": 4, "gpus_per_node": 8, "seq_len": 8192,
      "micro_batch": 1},
     [dict(dp=4, tp=2, pp=2, cp=2, zero=1, grad_accum=8, recompute="selective",
           pp_schedule="interleaved", virtual_stages=2, sequence_parallel=True),
      dict(dp=8, tp=4, zero=3, grad_accum=2), dict(dp=2, tp=8, pp=2, grad_accum=4,
                                                  pp_schedule="gpipe", recompute="full")]),
    ({"model": "mixtral-8x7b", "gpu": "h100", "nodes": 4, "gpus_per_node": 8, "seq_len": 4096,
      "micro_batch": 1},
     # MoE with tp > 1 runs with sequence parallelism (Megatron-LM requires it)
     [dict(dp=8, tp=2, pp=2, ep=8, zero=1, grad_accum=4, sequence_parallel=True),
      dict(dp=4, tp=8, ep=2, grad_accum=2, sequence_parallel=True)]),
])
def test_every_kind_of_plan_matches_estimate(settings, plans):
    from willitscale.scenario.plan import Plan

    scenario = build_scenario(settings)
    base = {k: settings[k] for k in ("micro_batch", "recompute") if k in settings}
    full = [Plan(**{**base, **p}) for p in plans]
    batch = PlanBatch.from_plans(full)
    result = evaluate(scenario, batch)
    for i, plan in enumerate(full):
        _compare(settings, plan, result, i)

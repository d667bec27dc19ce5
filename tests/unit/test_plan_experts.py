"""Expert parallelism in the report: the experts' gradients in their own row (review PB2)."""

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario

MIXTRAL = {"model": "mixtral-8x7b", "gpu": "h100", "nodes": 8, "gpus_per_node": 8, "tp": 2,
           "ep": 8, "zero": 1, "global_batch": 256, "seq_len": 4096, "recompute": "full",
           "sequence_parallel": True}


def test_expert_gradients_are_reduced_over_their_own_group():
    est = estimate(build_scenario(MIXTRAL))
    ops = {op.parallelism: op for op in est.comm_ops}
    dp, edp = ops["dp"], ops["edp"]
    # groups: 64 GPUs / tp 2 = dp 32 replicas of the dense weights; each expert is held by
    # dp / ep = 4 of them (cp 1), so its gradients are reduced over 4 ranks, not 32
    assert (dp.ranks, edp.ranks) == (32, 4)
    assert dp.op == edp.op == "reduce_scatter"  # ZeRO-1
    # mixtral-8x7b (h 4096, 32 layers, 32 heads of 128, 8 kv heads, ffn 14336, 8 experts,
    # vocab 32000, untied), fp32 gradients, one reduce-scatter per step (ZeRO-1):
    # experts: 32 layers x 8 experts x 3 x 4096 x 14336 / (tp 2 x ep 8) = 2.818e9 params
    experts = 32 * 8 * 3 * 4096 * 14336 / (2 * 8)
    assert edp.bytes == pytest.approx(experts * 4, rel=1e-9)
    # dense: attention 4096 x (4096 + 2 x 1024) + 4096 x 4096 per layer / tp 2, router
    # 4096 x 8 and two norms of 4096 per layer (not split), token embedding and head
    # 32000 x 4096 / tp 2 each, the final norm
    attention = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096) / 2
    dense = attention + 32 * (4096 * 8 + 2 * 4096) + 2 * 32000 * 4096 / 2 + 4096
    assert dp.bytes == pytest.approx(dense * 4, rel=1e-9)
    # the two rows share one bucket stream: their times and exposure add up to the stream's
    # (the planner's batched evaluation keeps them as one)
    from willitscale.scenario.batch import PlanBatch
    from willitscale.step.evaluate import evaluate

    scenario = build_scenario(MIXTRAL)
    both = evaluate(scenario, PlanBatch.from_plans([scenario.plan])).traffic["dp"]
    assert dp.time + edp.time == pytest.approx(float(both["time"][0]), rel=1e-9)
    assert dp.exposed + edp.exposed == pytest.approx(float(both["exposed"][0]), rel=1e-9)
    assert dp.bytes + edp.bytes == pytest.approx(float(both["bytes"][0]), rel=1e-9)
    assert edp.time > dp.time > 0  # 3.5x the bytes, over 1/8 of the NICs instead of 4/8
    assert 0 <= edp.exposed <= edp.time and 0 <= dp.exposed <= dp.time
    assert "expert data parallel: 4 nodes x 1 GPU" in edp.group

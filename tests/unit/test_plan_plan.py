"""Plan validation and the batch arithmetic."""

import pytest

from willitscale.errors import ConfigError
from willitscale.scenario.plan import Plan, resolve_batch


def test_degrees_must_multiply_to_the_cluster():
    plan = Plan(dp=6, tp=8)
    with pytest.raises(ConfigError, match=r"tp\*pp\*dp\*cp = 8\*1\*6\*1 = 48 but the cluster has 64 GPUs"):
        plan.check_cluster(64)
    Plan(dp=8, tp=8).check_cluster(64)


def test_global_batch_is_micro_times_accum_times_dp():
    assert Plan(dp=32, micro_batch=2, grad_accum=4).global_batch == 256


def test_bad_values_name_the_field():
    with pytest.raises(ConfigError, match="recompute"):
        Plan(recompute="some")
    with pytest.raises(ConfigError, match="micro_batch"):
        Plan(micro_batch=0)
    with pytest.raises(ConfigError, match="zero"):
        Plan(zero=4)


def test_plan_level_contradictions_are_errors():
    with pytest.raises(ConfigError, match="sequence_parallel"):
        Plan(sequence_parallel=True)  # nothing to split along the sequence without tp
    with pytest.raises(ConfigError, match="virtual_stages"):
        Plan(pp=4, pp_schedule="interleaved")  # interleaving needs >= 2 chunks per stage
    with pytest.raises(ConfigError, match="ZeRO stage"):
        Plan(shard_scope="node")  # hybrid sharding of nothing
    with pytest.raises(ConfigError, match="a divisor of dp = 6"):
        Plan(dp=6, ep=4).check_cluster(6)  # experts are sharded over data-parallel ranks


def test_weak_scaling_from_micro_batch():
    assert resolve_batch(dp=32, micro_batch=2, global_batch=None, grad_accum=None) == (2, 1)


def test_strong_scaling_from_global_batch():
    # 64 samples over 8 replicas at micro-batch 2: 64 / (2 x 8) = 4 accumulation steps
    assert resolve_batch(dp=8, micro_batch=2, global_batch=64, grad_accum=None) == (2, 4)
    # global batch and accumulation fix the micro-batch: 64 / (2 x 8) = 4
    assert resolve_batch(dp=8, micro_batch=None, global_batch=64, grad_accum=2) == (4, 2)


def test_disagreeing_batch_knobs_are_an_error_with_the_arithmetic():
    with pytest.raises(ConfigError, match=r"2 x 1 x 32 = 64"):
        resolve_batch(dp=32, micro_batch=2, global_batch=16, grad_accum=1)
    with pytest.raises(ConfigError, match="not a multiple"):
        resolve_batch(dp=32, micro_batch=2, global_batch=16, grad_accum=None)

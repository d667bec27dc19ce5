"""ZeRO-1/2/3 and FSDP: memory per GPU and the traffic sharding costs."""

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario

P = 1e9
BASE = {"params": P, "gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 8, "seq_len": 1024,
        "micro_batch": 1, "hfu": 0.5, "grad_reduce_dtype": "bf16", "memory_convention": "zero-16"}


def run(**overrides):
    return estimate(build_scenario({**BASE, **overrides}), allow_oom=True)


def test_memory_of_each_zero_stage():
    # zero-16: 2 B weights, 2 B gradients, 12 B optimizer (master + Adam) per parameter, dp = 8,
    # sharded as each stage's implied framework shards (ddp, deepspeed 1 and 2, fsdp)
    expected = {0: 16 * P, 1: 4 * P + 12 * P / 8, 2: 2 * P + 14 * P / 8, 3: 16 * P / 8}
    for zero, total in expected.items():
        m = run(zero=zero).memory
        assert m.state == pytest.approx(total), zero


def test_zero3_moves_one_and_a_half_times_the_bytes_of_ddp():
    # DDP: one ring all-reduce of the 2 GB of bf16 gradients, 2 (n-1)/n S per rank.
    # ZeRO-3: all-gather of the bf16 weights in forward and again in backward, reduce-scatter
    # of the gradients: 3 x (n-1)/n S. Bandwidth-bound (2 GB, 80 MB buckets): ratio 1.5.
    ddp = run(bucket_cap=80 * 2**20)
    fsdp = run(zero=3)
    ddp_time = sum(op.time for op in ddp.comm_ops)
    z3 = next(op for op in fsdp.comm_ops if op.parallelism == "zero")
    assert z3.time / ddp_time == pytest.approx(1.5, rel=0.02)


def test_zero2_reduce_scatters_every_micro_batch_zero1_once():
    z1 = run(zero=1, grad_accum=4)
    z2 = run(zero=2, grad_accum=4)
    grads = 2 * P  # bf16
    dp1 = next(op for op in z1.comm_ops if op.parallelism == "dp")
    dp2 = next(op for op in z2.comm_ops if op.parallelism == "dp")
    assert dp1.bytes == pytest.approx(grads) and dp2.bytes == pytest.approx(4 * grads)
    assert z2.memory.gradients == pytest.approx(z1.memory.gradients / 8)


def test_hybrid_shards_within_the_node_only():
    # 2 nodes x 8 GPUs, dp 16: FULL_SHARD divides the state by 16, HYBRID_SHARD by the 8 ranks
    # of a node (replicated across the 2 nodes)
    full = run(nodes=2, fsdp="full")
    hybrid = run(nodes=2, fsdp="hybrid")
    state = lambda m: m.state  # noqa: E731
    assert state(full.memory) == pytest.approx(16 * P / 16)
    assert state(hybrid.memory) == pytest.approx(16 * P / 8)
    assert hybrid.plan["shard_scope"] == "node" and hybrid.plan["zero"] == 3


def test_fsdp_flag_contradicting_zero_is_an_error(cli):
    code, _, err = cli("estimate", "--params", "1e9", "--gpu", "a100-80gb", "--seq-len", "1024",
                       "--fsdp", "full", "--zero", "1")
    assert code == 2 and "contradicts --zero 1" in err

"""Tensor parallelism: the collectives per layer, sequence parallelism, overlap, TP across nodes."""

import pytest

from willitscale.plan.build import build_scenario
from willitscale.plan.estimate import estimate
from willitscale.plan.tensor import ring_allreduce_bytes_factor

ONE_NODE = {"model": "gpt3-175b", "gpu": "a100-80gb", "gpus_per_node": 8, "seq_len": 2048,
            "micro_batch": 1, "global_batch": 1, "tp": 8, "hfu": 0.5, "recompute": "none"}
ACTIVATION = 2048 * 12288 * 2  # b s h x 2 bytes, micro-batch 1


def tp_op(**overrides):
    est = estimate(build_scenario({**ONE_NODE, **overrides}), allow_oom=True)
    return est, next(op for op in est.comm_ops if op.parallelism == "tp")


def test_two_all_reduces_per_layer_each_way():
    _, op = tp_op()
    # 96 layers x (2 forward + 2 backward) + the embedding's forward + the head's backward
    assert op.calls == 96 * 4 + 2
    assert op.bytes == pytest.approx(op.calls * ACTIVATION)
    _, full = tp_op(recompute="full")
    assert full.calls == op.calls + 96 * 2  # the recomputed forward all-reduces again


def test_sequence_parallel_moves_the_same_bytes_in_twice_the_calls():
    _, ar = tp_op()
    _, sp = tp_op(sequence_parallel=True)
    assert sp.calls == 2 * ar.calls  # a reduce-scatter and an all-gather per all-reduce
    # a ring reduce-scatter + all-gather sends what a ring all-reduce sends: the same time up to
    # the latency terms
    assert sp.time == pytest.approx(ar.time, rel=0.01)


def test_ring_sends_one_and_three_quarter_times_the_activations_at_tp_8():
    assert ring_allreduce_bytes_factor(8) == pytest.approx(2 * 7 / 8)


def test_forward_on_the_critical_path_unless_overlapped():
    est, op = tp_op()
    # no overlap in the forward: the forward's share is exposed; backward's hides behind the
    # weight-gradient GEMMs (Korthikanti et al. 2022)
    assert 0.4 * op.time < op.exposed < op.time
    _, overlapped = tp_op(tp_comm_overlap=True)
    assert overlapped.exposed < 0.05 * overlapped.time


def test_tp_wider_than_a_node_crosses_the_network_and_is_flagged():
    est = estimate(build_scenario({**ONE_NODE, "nodes": 2, "tp": 16, "global_batch": 1}),
                   allow_oom=True)
    op = next(op for op in est.comm_ops if op.parallelism == "tp")
    assert op.leaves_node and any("wider than a node" in w for w in est.warnings)
    narrow = estimate(build_scenario({**ONE_NODE, "nodes": 2, "tp": 8, "global_batch": 2}),
                      allow_oom=True)
    narrow_op = next(op for op in narrow.comm_ops if op.parallelism == "tp")
    # per byte the 16-wide ring is limited by the node's NICs (200 GB/s x 0.8 shared by the node's
    # 8 ranks of the group) instead of NVLink (300 x 0.8 per GPU): each all-reduce is slower
    assert op.time / op.calls > narrow_op.time / narrow_op.calls

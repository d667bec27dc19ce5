"""Tensor parallelism: the collectives per layer, sequence parallelism, overlap, TP across nodes."""

import numpy as np
import pytest

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.step.tensor import ring_allreduce_bytes_factor

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


def test_sequence_parallel_replaces_each_all_reduce_and_regathers_saved_inputs():
    _, ar = tp_op()
    _, sp = tp_op(sequence_parallel=True)
    # a reduce-scatter and an all-gather per all-reduce, plus in the backward each
    # column-parallel layer's input all-gathered again (only its sequence shard was saved):
    # 2 per layer, 96 layers
    assert sp.calls == 2 * ar.calls + 2 * 96
    # a ring reduce-scatter + all-gather sends what a ring all-reduce sends, and an all-gather
    # half of it: (4L + 2) all-reduces' worth + 2L halves = 386 + 96 all-reduces' time, up to
    # the latency terms
    assert sp.time == pytest.approx(ar.time * (386 + 96) / 386, rel=0.01)


def _lines(slope):
    from willitscale.collectives.lines import CollectiveLines

    return CollectiveLines(op="all_reduce", algorithms=("ring",), intercept=np.zeros((1, 1)),
                           slope=np.array([[slope]]))


def _by_hand(**kw):
    from willitscale.step.tensor import tensor_traffic

    col = lambda x: np.array([[x, x, x]], dtype=float)  # noqa: E731
    args = dict(tokens=np.array([1000.0]), hidden=1000, layers=col(2), emb=col(1), head=col(1),
                full_recompute=np.array([False]), sequence_parallel=np.array([False]),
                lines_ar=_lines(1e-9), lines_rs=_lines(0.5e-9), lines_ag=_lines(0.5e-9),
                fwd_compute=col(1.0), bwd_compute=col(1.0), overlap=False, element=2.0,
                wgrad_qkv=col(0.5e-3), wgrad_fc1=col(3e-3), wgrad_head=col(1e-3))
    args.update(kw)
    t = tensor_traffic(**args)
    return {k: float(getattr(t, k)[0, 0]) for k in ("fwd", "bwd", "fwd_exposed", "bwd_exposed",
                                                     "calls")}


def test_backward_all_reduces_hide_only_behind_their_own_weight_gradient_gemm():
    # By hand: 1000 tokens x h 1000 x 2 bytes = 2 MB per all-reduce at 1 ns/byte: u = 2 ms.
    # 2 layers, the embedding (forward) and the head (backward). Weight-gradient GEMMs: QKV
    # 0.5 ms, MLP-in 3 ms, head 1 ms.
    got = _by_hand()
    # forward: (2 L + 1) u = 10 ms, all exposed (between dependent matmuls)
    assert got["fwd"] == pytest.approx(10e-3) and got["fwd_exposed"] == pytest.approx(10e-3)
    # backward: per layer max(0, 2 - 0.5) + max(0, 2 - 3) = 1.5 ms, x 2 layers, + head
    # max(0, 2 - 1) = 1 ms: 4 ms of the 10. (Before: max(0, 10 - forward compute) against the
    # whole forward, i.e. 0 here with a 1 s forward.)
    assert got["bwd"] == pytest.approx(10e-3) and got["bwd_exposed"] == pytest.approx(4e-3)
    # full recomputation reruns the forward's 2 L all-reduces before the backward: exposed
    got = _by_hand(full_recompute=np.array([True]))
    assert got["bwd"] == pytest.approx(18e-3) and got["bwd_exposed"] == pytest.approx(12e-3)


def test_sequence_parallel_backward_by_hand():
    # reduce-scatter and all-gather 1 ms each. Per layer backward: the row-parallel layers'
    # output-gradient all-gathers (2 x 1 ms, exposed), each column-parallel layer's
    # reduce-scatter beside its weight gradient and the regather of its input beside its
    # input gradient (same FLOPs): QKV max(0, 1 - 0.5) x 2 = 1 ms, MLP-in 0: 3 ms per layer,
    # 6 ms for 2; the head's pair against 1 ms: 0.
    got = _by_hand(sequence_parallel=np.array([True]))
    assert got["bwd_exposed"] == pytest.approx(6e-3)
    # busy: (2 L + 1) x (1 + 1) + 2 L regathers x 1 = 14 ms; calls 2 x (5 + 5) + 4 = 24
    assert got["bwd"] == pytest.approx(14e-3) and got["calls"] == 24
    assert got["fwd_exposed"] == pytest.approx(10e-3)


def test_recomputed_forward_all_reduces_are_exposed_in_the_full_model():
    # review P3: GPT-3 175B on one node, tp 8, micro-batch 1: a QKV weight gradient
    # (6 h^2 x 2048 / 8 FLOPs at HFU 0.5 of 312 TFLOP/s = 1.49 ms) outlasts an all-reduce of
    # 2048 x 12288 x 2 bytes (~0.37 ms over NVLink), so the backward's 2 L + 1 input-gradient
    # all-reduces hide; the forward's 2 L + 1 and the recomputed forward's 2 L do not:
    # (4 L + 1) / (6 L + 2) = 385 / 578 of the time (before: 193 / 578, all backward hidden)
    _, op = tp_op(recompute="full")
    assert op.calls == 6 * 96 + 2
    assert op.exposed == pytest.approx(op.time * 385 / 578, rel=1e-9)


def test_ring_sends_one_and_three_quarter_times_the_activations_at_tp_8():
    assert ring_allreduce_bytes_factor(8) == pytest.approx(2 * 7 / 8)


def test_forward_on_the_critical_path_unless_overlapped():
    est, op = tp_op()
    # no overlap in the forward: the forward's share is exposed; backward's hides behind the
    # weight-gradient GEMMs (Korthikanti et al. 2022): (2 L + 1) / (4 L + 2) = half
    assert op.exposed == pytest.approx(op.time / 2, rel=1e-9)
    # with overlap each collective is cut into t = 8 chunks; the first has nothing to hide
    # behind, the other 7/8 hide while the pass's compute lasts (here far longer than the
    # all-reduces: 1.49 ms of QKV weight gradient alone vs ~0.37 ms each), so 1/8 stays exposed
    _, overlapped = tp_op(tp_comm_overlap=True)
    assert overlapped.exposed == pytest.approx(overlapped.time / 8, rel=1e-9)


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

"""Pipeline schedules: bubble, pipeline time with unequal stages, micro-batches in flight, sends."""

import numpy as np
import pytest

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.step.pipeline import bubble_fraction, in_flight, pipeline_time


def test_bubble_fraction_of_narayanan():
    # (p - 1) / m, and (p - 1) / (v m) interleaved (Narayanan et al. 2021, 2.2.1 and 2.2.2)
    assert bubble_fraction(4, 8) == pytest.approx(3 / 8)
    assert bubble_fraction(4, 8, 2) == pytest.approx(3 / 16)


def test_pipeline_time_equal_and_unequal_stages():
    counts = np.array([[1.0, 2.0, 1.0]])  # p = 4
    equal = np.array([[1.0, 1.0, 1.0]])
    pipe, bubble, _ = pipeline_time(equal, counts, np.array([8.0]), np.array([1]), np.array([False]))
    assert pipe[0] == pytest.approx((8 + 4 - 1) * 1.0)  # (m + p - 1) T
    assert bubble[0] == pytest.approx(3.0)
    pipe, bubble, _ = pipeline_time(equal, counts, np.array([8.0]), np.array([2]), np.array([True]))
    assert pipe[0] == pytest.approx(8 + 3 / 2)  # m T + (p - 1) T / v
    # last stage 1.5 (the LM head): 8 x 1.5 + (1 + 2 + 1.5 - 1.5) = 12 + 3 = 15
    pipe, bubble, crit = pipeline_time(np.array([[1.0, 1.0, 1.5]]), counts, np.array([8.0]),
                                       np.array([1]), np.array([False]))
    assert (pipe[0], bubble[0], crit[0]) == (pytest.approx(15.0), pytest.approx(3.0), 2)


def test_micro_batches_in_flight_per_schedule():
    p, m = np.array([4]), np.array([8])
    one_f_one_b = in_flight(p, m, np.array([False]), np.array([False]), np.array([1]))
    assert one_f_one_b.tolist() == [[4, 3, 1]]  # min(m, p - k) on stages 0, 1 and 3
    assert in_flight(p, m, np.array([True]), np.array([False]), np.array([1])).tolist() == [[8, 8, 8]]
    inter = in_flight(p, m, np.array([False]), np.array([True]), np.array([2]))
    # first stage: 2(p-1) + (v-1)p + 1 = 11 chunks of L/(p v) = p (1 + (p-1)/(p v)) = 5.5 stages
    assert inter[0, 0] == pytest.approx(4 * (1 + 3 / 8))
    assert inter[0, 2] == pytest.approx(((2 - 1) * 4 + 1) / 2)  # last stage: 5 chunks


SETTINGS = {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8,
            "inter_node": "8x200Gbps", "seq_len": 2048, "micro_batch": 1, "global_batch": 32,
            "tp": 8, "pp": 4, "hfu": 0.5, "recompute": "full"}


def run(**overrides):
    return estimate(build_scenario({**SETTINGS, **overrides}), allow_oom=True)


def test_sends_between_stages_and_their_bytes():
    est = run()
    sends = next(op for op in est.comm_ops if op.name.startswith("PP activation"))
    # the slowest stage is the last (LM head); it sends one activation gradient per micro-batch
    # backward: m = 32 micro-batches x b s h x 2 bytes / tp = 32 x 2048 x 12288 x 2 / 8
    assert est.pipeline["critical_stage"] == "last"
    assert sends.bytes == pytest.approx(32 * 2048 * 12288 * 2 / 8)
    assert sends.leaves_node and sends.ranks == 4


def test_gpipe_same_bubble_more_memory_interleaving_less_bubble():
    one = run()
    gpipe = run(pp_schedule="gpipe")
    inter = run(pp_schedule="interleaved", virtual_stages=3)
    assert gpipe.breakdown.bubble == pytest.approx(one.breakdown.bubble)
    assert gpipe.memory.activations > one.memory.activations
    assert inter.breakdown.bubble < 0.5 * one.breakdown.bubble  # ~1/3, plus more sends
    # the bubble is (sum of stage times - the slowest) / v: with p = 4, m = 32 it is a bit over
    # (p - 1)/(m + p - 1) = 3/35 of the step (the last stage is the slowest)
    assert one.breakdown.bubble / one.step_time == pytest.approx(3 / 35, rel=0.1)


def test_tied_head_keeps_a_copy_of_the_embedding_on_the_last_stage():
    est = run(pp=2, global_batch=16, nodes=2)
    tied = [op for op in est.comm_ops if op.name.startswith("tied embedding")]
    # 50257 x 12288 / tp 8 fp32 gradients all-reduced between the first and the last stage
    assert tied and tied[0].bytes == pytest.approx(50257 * 12288 / 8 * 4) and tied[0].ranks == 2

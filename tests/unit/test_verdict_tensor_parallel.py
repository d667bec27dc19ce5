"""The scaling verdict does not judge tensor-parallel traffic inside a node (issue 17).

The textbook GPT-3 175B run (Narayanan et al. 2021: TP 8 inside a DGX A100, PP 8, 1536 x 2048)
was called network-bound by NVLink because the 5% rule counted the TP all-reduces, which are part
of the model's computation at tp = 8. The criterion now counts every exposed communication except
tensor-parallel groups that stay inside a node; a TP group that crosses nodes still counts.
"""

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.estimation.verdict.levers import EXPOSED_SHARE_LIMIT
from willitscale.scenario.build import build_scenario

GPT3 = {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8,
        "inter_node": "8x ib-hdr", "seq_len": 2048, "micro_batch": 1, "global_batch": 1536,
        "tp": 8, "pp": 8, "zero": 1, "recompute": "full"}


def _exposed(est, kind):
    return sum(op.exposed for op in est.comm_ops if op.parallelism == kind)


def test_textbook_gpt3_is_compute_bound_with_tp_named_separately():
    est = estimate(build_scenario(GPT3))
    shares = dict(est.bottleneck.shares)
    tensor = _exposed(est, "tp")
    # the TP all-reduces leave more than the 5% limit exposed on their own ...
    assert tensor / est.step_time > EXPOSED_SHARE_LIMIT
    # ... yet they are not judged: the judged share is everything else, under the limit
    assert shares["tensor_parallel"] == pytest.approx(tensor / est.step_time)
    assert shares["communication"] == pytest.approx((est.exposed_comms - tensor) / est.step_time)
    assert shares["communication"] < EXPOSED_SHARE_LIMIT
    assert est.bottleneck.resource == "compute"
    assert not est.scaling_verdict
    assert "tensor parallelism inside each node" in est.bottleneck.reason


def test_tensor_parallel_across_nodes_still_counts():
    # tp 16 on 8-GPU nodes: the all-reduces cross the NICs, a network cost the verdict judges
    est = estimate(build_scenario({**GPT3, "tp": 16, "pp": 4}))
    shares = dict(est.bottleneck.shares)
    assert shares["tensor_parallel"] == 0.0
    assert shares["communication"] == pytest.approx(est.exposed_comms / est.step_time)
    assert shares["communication"] > EXPOSED_SHARE_LIMIT
    assert est.bottleneck.resource.endswith("network")

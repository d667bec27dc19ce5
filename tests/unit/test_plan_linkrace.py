"""The A100 vs A800 case of the lecture (seeds/004): NVLink must be 1.75x faster than RDMA."""

import pytest

from willitscale.hardware import get_node
from willitscale.scenario.build import build_scenario
from willitscale.validation.linkrace import lecture_case, lecture_ratio, model_case

MEASURED_RDMA = 160e9  # seeds/004: "8 X 200Gbps ... typically measured 160GBps"


def test_the_ratio_from_the_traffic_counts():
    # backward of one micro-batch of X bytes: each GPU sends 2 (8-1)/8 X = 1.75 X over NVLink
    # for the TP all-reduce; the server sends X over its NICs (X/8 per GPU) to the other stage
    assert lecture_ratio(8) == pytest.approx(1.75)
    assert lecture_ratio(2) == pytest.approx(1.0)


def test_a100_is_rdma_bound_and_a800_nvlink_bound_as_the_lecture_says():
    a100 = lecture_case(get_node("dgx-a100"), rdma=MEASURED_RDMA)
    a800 = lecture_case(get_node("hgx-a800"), rdma=MEASURED_RDMA)
    # 300 / 160 = 1.875 >= 1.75; 200 / 160 = 1.25 < 1.75 (one direction, GB/s)
    assert a100.ratio == pytest.approx(300 / 160) and a100.bottleneck == "RDMA"
    assert a800.ratio == pytest.approx(200 / 160) and a800.bottleneck == "NVLink"


def test_the_a100_verdict_rests_on_comparing_nominal_nvlink_with_measured_rdma():
    # both nominal: 300 / 200 = 1.5; both derated by the catalog's 0.8: 240 / 160 = 1.5
    assert lecture_case(get_node("dgx-a100")).bottleneck == "NVLink"
    derated = lecture_case(get_node("dgx-a100"), rdma=MEASURED_RDMA, derate_nvlink=True)
    assert derated.ratio == pytest.approx(1.5) and derated.bottleneck == "NVLink"


def test_with_megatron_traffic_nvlink_dominates_and_a800_pays_its_lost_links():
    # two nodes, TP 8 inside, PP 2 across; llama2-13b: 40 layers, 20 per stage
    times = {}
    for preset in ("dgx-a100", "hgx-a800"):
        scenario = build_scenario({"model": "llama2-13b", "preset": preset, "nodes": 2, "tp": 8,
                                   "pp": 2, "micro_batch": 1, "global_batch": 16, "seq_len": 4096,
                                   "collectives": "alpha-beta"})  # NVLink bytes at the link rate
        times[preset] = model_case(scenario)
    a100, a800 = times["dgx-a100"], times["hgx-a800"]
    # 2 all-reduces per layer per pass on 20 layers against one send per boundary: NVLink
    # carries far more time than RDMA on both...
    assert a100["nvlink_s"] > 10 * a100["rdma_s"]
    # ...and the A800's 8 of 12 NVLinks make its NVLink time ~300/200 = 1.5x the A100's (latency
    # terms aside), with the same RDMA time
    assert a800["nvlink_s"] / a100["nvlink_s"] == pytest.approx(1.5, rel=0.05)
    assert a800["rdma_s"] == pytest.approx(a100["rdma_s"])

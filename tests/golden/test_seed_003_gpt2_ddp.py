"""seeds/003 ("The Impact of GPU Networking (Part 1)", Tomas, 2025-03-14): DDP epoch times of
GPT-2 and GPT-2 Large on Baskerville, predicted from the measured single-GPU epoch.

Measured (the article's tables): GPT-2 157.60 / 62.96 / 62.55 s, GPT-2 Large 498.37 / 266.83 /
406.12 s for 1x1 / 1x2 (NVLink 3) / 2x1 (InfiniBand HDR). Our figures and the reason for every
difference are in docs/reproductions.md.
"""

import pytest

from willitscale.plan.reproduce import seed003_rows


@pytest.fixture(scope="module")
def rows():
    return {(r.model, r.nodes, r.assumptions): r for r in seed003_rows()}


@pytest.mark.parametrize("nodes,measured", [(1, 266.83), (2, 406.12)])
def test_gpt2_large_with_the_articles_measured_allreduce_within_10_percent(rows, nodes, measured):
    row = rows[("gpt2-large", nodes, "measured")]
    assert row.measured_s == measured
    assert abs(row.error) < 0.10


def test_the_articles_own_arithmetic_is_an_upper_bound_of_ours(rows):
    # The article adds the whole all-reduce to half the single-GPU time:
    # 498.37 / 2 + 1108 x 0.12 = 382.15 s for HDR. The 0.12 s is for 1.32 GiB of bf16 values, but
    # bf16 autocast keeps fp32 gradients: 708.7M x 4 B = 2.83 GB take 2 x 0.12 = 0.24 s per step,
    # of which DDP hides what runs under backward (2/3 of the 0.225 s step).
    row = rows[("gpt2-large", 2, "measured")]
    per_step = 0.12 * 708_720_640 * 4 / (1.32 * 2**30)  # 0.240 s
    assert row.comms_s == pytest.approx(per_step)
    backward = 2 / 3 * 498.37 / 2216  # forward:backward = 1:2 by FLOPs
    assert row.exposed_s == pytest.approx(per_step - backward, abs=0.01)


def test_calibrated_node_reproduces_the_hdr_row(rows):
    # the Baskerville preset's HDR efficiency (0.43) was fitted to the same e-16-2 benchmark
    assert abs(rows[("gpt2-large", 2, "calibrated")].error) < 0.05


def test_catalog_defaults_miss_the_hdr_row_by_a_third(rows):
    # the catalog's HDR at 80% of 25 GB/s hides the 2.83 GB all-reduce (0.14 s) under the 0.15 s
    # backward; Baskerville's NCCL reached only 43% of the port (e-16-2), hence -31%
    row = rows[("gpt2-large", 2, "defaults")]
    assert -0.35 < row.error < -0.25


def test_gpt2_two_gpus_is_faster_than_linear_which_no_network_model_explains(rows):
    # 157.60 / 2 = 78.80 s > measured 62.96 s and 62.55 s: communication can only add time, so any
    # prediction of the form T1/2 + comms is at least 78.80 s: >= 25% above both measurements.
    half = 157.60 / 2
    for nodes in (1, 2):
        for assumptions in ("defaults", "measured", "calibrated"):
            row = rows[("gpt2", nodes, assumptions)]
            assert row.predicted_s >= half
            assert row.error > 0.25

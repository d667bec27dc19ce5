"""seeds/000 (Bekman, "Inter-node and intra-node Networking Hardware", the handbook chapter):
the 2B-parameter DDP example. The article's numbers are quoted in each comment; ours are derived
independently and the reason for every difference is written beside it (docs/reproductions.md).
"""

import json
from dataclasses import replace

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario

ARTICLE = {"params": 2e9, "gpu": "a100-80gb", "gpus_per_node": 8, "inter_node": "200Gbps",
           "micro_batch": 2, "seq_len": 2048, "hfu": 0.5, "recompute": "full"}
ACCEPTANCE = ["estimate", "--params", "2e9", "--gpu", "a100-80gb", "--gpus-per-node", "8",
              "--inter-node", "200Gbps", "--micro-batch", "2", "--seq-len", "2048", "--hfu", "0.5",
              "--recompute", "full", "--json"]


def _ideal(scenario):
    """The article's simplification: links at their full rate, no latency."""
    node = scenario.cluster.node
    node = replace(node, nic=replace(node.nic, efficiency=1.0, latency=0.0),
                   intra_link=replace(node.intra_link, efficiency=1.0, latency=0.0))
    return replace(scenario, cluster=replace(scenario.cluster, node=node))


def test_65_536_tflop_per_gpu_and_0_42_s():
    est = estimate(build_scenario({**ARTICLE, "nodes": 1}))
    # "2 * 4 * 2 * 2048 * 16 / (8 * 1e3) = 65.536 TFLOP" per GPU per iteration (with recompute)
    assert est.executed_flops == pytest.approx(65.536e12)
    # "it'll take 0.42 secs": 65.536e12 / (0.5 x 312e12) = 0.42010 s
    assert est.compute == pytest.approx(0.42, rel=0.02)
    # the model-FLOPs MFU of that step is lower than 0.5: 6/8 of the FLOPs, over a longer step
    assert est.mfu < 0.5 * 6 / 8


@pytest.mark.parametrize("nodes,article", [(1, 0.027), (4, 0.64)])
def test_comms_under_the_articles_simplification(nodes, article):
    est = estimate(_ideal(build_scenario({**ARTICLE, "nodes": nodes})))
    grads = 2e9 * 4  # "grads are in fp32": 8 GB
    if nodes == 1:
        # article: 16 GB / 600 GB/s = 0.027 s. 600 GB/s is NVLink 3's duplex figure; one
        # direction is 300 GB/s, and a ring all-reduce on 8 GPUs sends 2 x 7/8 x 8 GB = 14 GB:
        # 14 / 300 = 0.0467 s = the article's x (600 / 300) x (7/8)
        ours = 2 * 7 / 8 * grads / 300e9
        assert ours == pytest.approx(article * 2 * 7 / 8, rel=0.02)
    else:
        # article: 128 Gb / 200 Gbps = 0.64 s (all-reduce volume 2 x 8 GB, ignoring (n-1)/n).
        # NCCL's ring over 32 GPUs puts 2 x 31/32 x 8 GB through each node's NIC: 0.62 s
        ours = 2 * 31 / 32 * grads / 25e9
        assert ours == pytest.approx(article * 31 / 32)
    # our model at full rate and zero latency (bandwidth term of the chosen algorithm)
    assert est.comms == pytest.approx(ours, rel=0.03)


def test_400_gbps_halves_the_inter_node_time():
    # "if you were able to get a 400Gbps inter-node the speed would double ... 0.32 secs"
    at200 = estimate(_ideal(build_scenario({**ARTICLE, "nodes": 4})))
    at400 = estimate(_ideal(build_scenario({**ARTICLE, "nodes": 4, "inter_node": "400Gbps"})))
    assert at400.comms == pytest.approx(at200.comms / 2, rel=0.02)
    assert at400.comms == pytest.approx(0.32 * 31 / 32, rel=0.03)  # the (n-1)/n again


def test_eighty_percent_of_advertised_speed():
    # "expect to get 320Gbps (about 80%)": at an achievable fraction e of the advertised rate the
    # bandwidth-bound all-reduce takes 1/e of the full-rate time (latency is negligible at 8 GB).
    # The article's e = 0.8 gives 1.25x; the catalog's InfiniBand default (0.92, NCCL's measured
    # per-NIC busbw, docs/hardware.md) gives 1/0.92 = 1.087x.
    ideal = estimate(_ideal(build_scenario({**ARTICLE, "nodes": 4})))
    scenario = build_scenario({**ARTICLE, "nodes": 4})
    node = scenario.cluster.node
    at_80 = replace(scenario, cluster=replace(scenario.cluster, node=replace(
        node, nic=replace(node.nic, efficiency=0.8, latency=0.0),
        intra_link=replace(node.intra_link, efficiency=1.0, latency=0.0))))
    assert estimate(at_80).comms == pytest.approx(ideal.comms / 0.8, rel=0.01)
    default = estimate(scenario)
    assert node.nic.efficiency == pytest.approx(0.92)
    # plus latency the ideal case drops: ~307 buckets x (2*3 hops x 2.7 us + 2*28 x 0.6 us) ~ 15 ms,
    # 2% of the 0.67 s; so within 3%, and never below the bandwidth-only figure
    assert default.comms == pytest.approx(ideal.comms / 0.92, rel=0.03)
    assert default.comms >= ideal.comms / 0.92


def test_acceptance_four_nodes(cli):
    code, out, _ = cli(*ACCEPTANCE, "--nodes", "4")
    d = json.loads(out)
    assert code == 0
    assert d["compute_s"] == pytest.approx(0.42, rel=0.02)
    assert d["comms_s"] > d["compute_s"]
    assert "inter-node network" in d["bottleneck"]
    for key in ("step_time_s", "exposed_comms_s", "mfu", "tokens_per_s", "memory_per_gpu_bytes"):
        assert key in d


def test_acceptance_one_node(cli):
    code, out, _ = cli(*ACCEPTANCE, "--nodes", "1")
    d = json.loads(out)
    assert code == 0 and d["global_batch"] == 16  # the article's case: 8 GPUs x 2 samples
    assert d["compute_s"] == pytest.approx(0.42, rel=0.02)
    assert d["bottleneck"] == "compute"
    assert d["comms_s"] < 0.1


def test_the_table_nodes_comms_compute_bottleneck(cli):
    # | nodes | comms | compute | comms is a bottleneck |  1: 0.027 0.42 no;  4: 0.64 0.42 yes
    argv = [a for a in ACCEPTANCE if a != "--json"]
    code, out, _ = cli("scale", *argv[1:], "--nodes", "1,4", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["nodes"] for r in rows] == [1, 4]
    assert [r["comms_is_bottleneck"] for r in rows] == [False, True]
    assert all(r["compute_s"] == pytest.approx(0.42, rel=0.02) for r in rows)

"""The link that limits a multi-node all-reduce (review A2): when the link inside the node (PCIe,
an H800's NVLink) paces the collective, the estimate says so, speeds up that link in its fixes,
and ``requirements`` agrees. Derivations beside each assertion, in the alpha-beta model of the
links (``collectives = "alpha-beta"``); NCCL's model of the same cases is tested in
tests/unit/test_collectives_nccl_graph.py."""

import json
from dataclasses import replace

import pytest

from willitscale.collectives.lines import cluster_links
from willitscale.estimation.estimate import estimate
from willitscale.estimation.verdict.levers import EXPOSED_SHARE_LIMIT
from willitscale.plan.requirements import link_requirement, scaled_link
from willitscale.scenario.build import build_scenario

PCIE = {"params": 2e9, "gpu": "a100-80gb-pcie", "gpus_per_node": 4, "nodes": 2,
        "micro_batch": 2, "seq_len": 2048, "collectives": "alpha-beta"}
H800 = {"params": 2e9, "preset": "hgx-h800", "nodes": 4, "micro_batch": 2, "seq_len": 2048,
        "collectives": "alpha-beta"}


def test_pcie_node_is_limited_inside_the_node():
    scenario = build_scenario(PCIE)
    est = estimate(scenario)
    # A100 PCIe servers have a NIC per GPU (4 x HDR): NCCL's rings leave the node through every
    # GPU in turn, so each GPU's PCIe link carries (g-1)/g of a ring's bytes. Ring over n = 8:
    # 2 x 7/8 x 8 GB x 3/4 = 10.5 GB per GPU at 31.5 GB/s x 0.80 = 25.2 GB/s -> 0.417 s, while the
    # NICs carry 2 x 7/8 x 8 GB = 14 GB per node at 4 x 25 GB/s x 0.92 = 92 GB/s -> 0.152 s.
    assert cluster_links(scenario).rails
    assert est.comms == pytest.approx(10.5e9 / 25.2e9, rel=0.02)  # + 307 buckets of latency
    assert est.bottleneck.level == "intra"
    assert est.bottleneck.resource == "intra-node network"
    assert "intra-node link limits it" in est.bottleneck.reason
    # the fix speeds up the PCIe link, not the NICs
    assert est.bottleneck.fixes[0].startswith("intra-node link >=")


def test_faster_nics_do_not_help_a_pcie_limited_all_reduce():
    # review A2: --inter-node 4x800Gbps left the 1.87 s; the NICs were never the limit
    slow = estimate(build_scenario(PCIE))
    fast = estimate(build_scenario({**PCIE, "inter_node": "4x800Gbps"}))
    assert fast.comms == pytest.approx(slow.comms, rel=1e-3)
    # a 4x faster intra-node link does: 0.417 s / 4 = 0.104 s of bytes, now below the NICs'
    # 0.152 s, so the NICs pace the ring (NCCL's tree would need 2 x 8 GB over 100.8 GB/s per GPU:
    # 0.159 s, slower)
    scenario = build_scenario(PCIE)
    node = scenario.cluster.node
    quick = estimate(replace(scenario, cluster=replace(scenario.cluster, node=replace(
        node, intra_link=scaled_link(node.intra_link, 4.0)))))
    assert quick.comms == pytest.approx(14e9 / 92e9, rel=0.05)


def test_the_intra_node_fix_reaches_the_target_and_requirements_agree():
    scenario = build_scenario(PCIE)
    req = link_requirement(scenario)
    assert req.level == "intra" and req.needed is not None
    # at the required PCIe rate exposed communication is at most 5% of the step ...
    node = scenario.cluster.node
    at = estimate(replace(scenario, cluster=replace(scenario.cluster, node=replace(
        node, intra_link=scaled_link(node.intra_link, req.factor)))))
    assert at.exposed_comms / at.step_time <= EXPOSED_SHARE_LIMIT * (1 + 1e-3)
    # ... and the estimate's own fix names the same rate: one search (levers.needed_bandwidth),
    # printed to three significant digits
    from willitscale.units import format_bandwidth

    fix = estimate(scenario).bottleneck.fixes[0]
    assert fix.startswith(f"intra-node link >= {format_bandwidth(req.needed)} per GPU")


def test_h800_nvlink_limits_a_multi_node_step():
    # HGX H800: NVLink 4 with 8 of 18 links, 200 GB/s x 0.80 = 160 GB/s per GPU; 8 x NDR = 8 x 50
    # x 0.92 = 368 GB/s per node. A ring over 32 ranks puts 2 x 31/32 x 8 GB x 7/8 = 13.56 GB on
    # each GPU's NVLink (84.8 ms) and 15.5 GB through each node's NICs (42.1 ms): NVLink limits.
    # Each of the 307 buckets also pays the ring's latency, 2(n-m) x 0.6 us on NVLink + 2(m-1) x
    # 2.7 us on NDR (catalog) = 49.8 us: 15.3 ms.
    est = estimate(build_scenario(H800))
    assert est.comms == pytest.approx(13.5625e9 / 160e9 + 307 * (56 * 0.6e-6 + 6 * 2.7e-6), rel=0.01)
    assert est.bottleneck.resource == "intra-node network"
    assert "368 GB/s per node, are not the limit" in est.bottleneck.reason


def test_requirements_names_the_link_the_estimate_names(cli):
    code, out, _ = cli("requirements", "--params", "2e9", "--preset", "hgx-h800", "--nodes", "4",
                       "--micro-batch", "2", "--seq-len", "2048", "--collectives", "alpha-beta",
                       "--json")
    row = json.loads(out)[0]
    assert code == 0
    assert row["link"] == "intra-node, per GPU" and row["bottleneck"] == "intra-node network"
    # current line rate: 200 GB/s = 1,600 Gb/s per GPU; the requirement is above it
    assert row["current_bandwidth_Gbps"] == pytest.approx(1600)
    assert row["required_bandwidth_Gbps"] > 1600 and not row["enough"]
    # the closed form moves the ring's NVLink bytes: 13.5625 GB per GPU per step
    assert row["closed_form_algorithm"] == "ring"
    assert row["closed_form_bytes_per_step"] == pytest.approx(2 * 31 / 32 * 8e9 * 7 / 8)


def test_one_nic_per_node_is_not_rails():
    # the handbook's node: 8 GPUs behind one 200 Gb/s port, so rings cross NVLink in full
    links = cluster_links(build_scenario({**PCIE, "gpu": "a100-80gb", "gpus_per_node": 8,
                                          "inter_node": "200Gbps"}))
    assert not links.rails


def test_assumptions_name_what_the_link_model_leaves_out():
    # NVLS is left out by the alpha-beta links, modelled by NCCL's (no such caveat there)
    nvls = dict(estimate(build_scenario({**H800, "preset": "dgx-h100"})).assumptions)
    assert "NVLS" in nvls["not modelled"]
    nccl = estimate(build_scenario({**H800, "preset": "dgx-h100", "collectives": "nccl"})).assumptions
    assert not any("NVLS" in v for k, v in nccl if k == "not modelled")
    pcie = [v for k, v in estimate(build_scenario(PCIE)).assumptions if k == "not modelled"]
    assert any("PCIe switch" in v for v in pcie)

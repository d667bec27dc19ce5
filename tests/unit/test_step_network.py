"""The engine's Network protocol (step/network.py) and its flow backend (step/flow_network.py)."""

import numpy as np
import pytest

from willitscale.collectives.line_time import CollectiveLines, line_time, select_lines, with_contention
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step import flow_network as fn
from willitscale.step import group_traffic as gt
from willitscale.step.engine import make_context
from willitscale.step.evaluate import run
from willitscale.step.flow_network import network_for
from willitscale.step.network import GROUPS, AnalyticNetwork, Network
from willitscale.topology.links import FabricLinks

LLAMA = {"model": "llama2-7b", "preset": "dgx-h100", "nodes": 2, "global_batch": 32, "micro_batch": 1,
         "seq_len": 1024}


def _flow(settings, **fabric):
    return build_scenario({**settings, "network": "flow", **fabric})


def test_both_backends_answer_the_protocol():
    analytic = build_scenario({**LLAMA, "tp": 2, "pp": 2, "dp": 4})
    flow = _flow({**LLAMA, "tp": 2, "pp": 2, "dp": 4})
    for scenario, kind in ((analytic, AnalyticNetwork), (flow, fn.SimulatedNetwork)):
        net = network_for(scenario)
        assert isinstance(net, Network) and isinstance(net, kind)
        ctx = make_context(scenario)
        b = PlanBatch.from_plans([scenario.plan])
        lines = net.lines(ctx, b, run(ctx, b, detail=True).detail.places)
        assert set(lines) == set(GROUPS)


def test_contention_slows_the_bytes_term_only_and_keeps_the_pick():
    # two plain columns: A = 1 us + S / 100 GB/s, B = 10 us + S / 200 GB/s. At 1 MB A takes
    # 11 us and B 15 us: A is picked. With the bytes term x3, A achieves 1 + 3 x 10 = 31 us
    # (B would take 10 + 15 = 25 us, but the pick is made blind to contention, as NCCL's is)
    lines = CollectiveLines(op="all_reduce", algorithms=("A", "B"), tolerance=0.0,
                            intercept=np.array([[1e-6, 10e-6]]), slope=np.array([[1 / 100e9, 1 / 200e9]]))
    assert float(line_time(lines, np.array([1e6]))[0]) == pytest.approx(11e-6)
    slowed = with_contention(lines, 3.0)
    time, index = line_time(slowed, np.array([1e6]), with_choice=True)
    assert int(index[0]) == 0 and float(time[0]) == pytest.approx(31e-6)
    # per plan: two plans of one geometry, only the second slowed; joined lines keep it
    two = CollectiveLines(op="all_reduce", algorithms=("A",), intercept=np.array([[0.0]]),
                          slope=np.array([[1e-9]]), geometry=np.array([0, 0]))
    per_plan = with_contention(two, np.array([1.0, 2.0]))
    assert line_time(per_plan, np.array([1e6, 1e6])).tolist() == pytest.approx([1e-3, 2e-3])
    joined = select_lines(np.array([True, False]), two, per_plan)  # plan 1 from per_plan
    assert line_time(joined, np.array([1e6, 1e6])).tolist() == pytest.approx([1e-3, 2e-3])


def test_a_measured_line_is_slowed_by_contention_like_the_model():
    # a calibration's measured line for the picked column, 5 us + S / 50 GB/s, replaces the
    # model's time; under a fabric slowdown x2 its bytes term doubles and its latency does not:
    # at 1 MB, 5 + 2 x 20 = 45 us (quiet: 5 + 20 = 25 us)
    measured = np.full((1, 2, 2), np.nan)
    measured[0, 0] = (5e-6, 1 / 50e9)
    lines = CollectiveLines(op="all_reduce", algorithms=("A", "B"), tolerance=0.0,
                            intercept=np.array([[1e-6, 10e-6]]),
                            slope=np.array([[1 / 100e9, 1 / 200e9]]), measured=measured)
    assert float(line_time(lines, np.array([1e6]))[0]) == pytest.approx(25e-6)
    assert float(line_time(with_contention(lines, 2.0), np.array([1e6]))[0]) == pytest.approx(45e-6)


def test_groups_used_and_simulated_together():
    # tp 2, pp 2, dp 4, ZeRO-1, sequence parallel, tied embedding, 8 GPUs per node
    used = gt.used_groups((2, 1, 1, 4, 2, 1, 0, 1, 1, 8))
    assert used == ("tp_reduce_scatter", "tp_all_gather", "pp", "emb", "shard_rs", "shard_ag")
    assert gt.concurrent_sets(used) == [("tp_reduce_scatter",), ("tp_all_gather",), ("pp",),
                                        ("shard_rs", "emb", "pp"), ("shard_ag",)]


def test_simulated_times_by_hand():
    # 2 DGX H100 nodes, tp 8 (one node each), dp 2 (one GPU per node, same local index).
    # Links without latency, so a collective's time is its bytes over its bottleneck:
    # * TP all-reduce, ring over 8 GPUs on NVLink, 1 GB: 2 x 7 steps of 1e9 / 8 bytes per GPU
    #   link: 14 x 1.25e8 / nvlink;
    # * DP all-reduce over 2 ranks on the ideal fabric: 2 x 1 steps of 1e9 / 2 over one NIC.
    sc = _flow({**LLAMA, "tp": 8, "dp": 2}, topology="fat-tree", oversubscription=4)
    flow = network_for(sc).plan_flow(sc)
    links = FabricLinks.from_node(sc.cluster.node)
    tp, dp = flow.groups["tp_all_reduce"], flow.groups["dp_ar"]
    assert tp.time == pytest.approx(14 * 1.25e8 / links.nvlink_bandwidth, rel=1e-12)
    assert tp.ideal == tp.time and tp.slowdown == 1.0 and not tp.leaves_node
    assert dp.ideal == pytest.approx(2 * 0.5e9 / links.nic_bandwidth, rel=1e-12)
    assert dp.leaves_node and dp.time >= dp.ideal


def test_one_estimate_simulates_each_geometry_once():
    from willitscale.estimation.estimate import estimate

    # every knob given: fitting an unstated one (sequence parallel on or off) simulates each candidate
    sc = _flow({**LLAMA, "tp": 2, "pp": 2, "dp": 4, "zero": 1, "sequence_parallel": False,
                "recompute": "none"}, topology="fat-tree", oversubscription=2,
               routing_seed=11)
    before = fn.step_flow.cache_info()
    est = estimate(sc)
    after = fn.step_flow.cache_info()
    assert after.misses - before.misses == 1  # the what-ifs re-run the engine on the cached flow
    assert after.hits > before.hits
    again = fn.step_flow.cache_info()
    estimate(sc)
    assert fn.step_flow.cache_info().misses == again.misses
    groups = {g["group"] for g in est.network["groups"]}
    assert {"tp_all_reduce", "pp", "shard_rs"} <= groups
    assert est.to_json()["network"]["backend"] == "flow"


def test_trees_by_hand_and_per_column_slowdown():
    # 4 DGX H100 nodes, tp 8, dp 4: eight DP groups of one GPU per node, each on its own NICs.
    # Ring: 2 x 3 steps of 1e9 / 4 bytes over one NIC = 1.5e9 / nic. NCCL's double binary
    # trees over ranks 0-3 (collectives/flows.py): tree 1 is 2 -> 0, 1 -> 2, 3 -> 2, tree 2 its
    # mirror 2 -> 1, 3 -> 1, 0 -> 1; every edge carries 1e9 / 2 each way at once. Ranks 1 and 2
    # each send (and receive) 4 such flows through their NIC, so every flow gets nic / 4 and
    # the tree takes (1e9 / 2) / (nic / 4) = 2e9 / nic.
    sc = _flow({**LLAMA, "nodes": 4, "tp": 8, "dp": 4}, topology="fat-tree", oversubscription=4)
    dp = network_for(sc).plan_flow(sc).groups["dp_ar"]
    nic = FabricLinks.from_node(sc.cluster.node).nic_bandwidth
    assert dp.ideal == pytest.approx(1.5e9 / nic, rel=1e-12)
    assert dp.tree_ideal == pytest.approx(2e9 / nic, rel=1e-12)
    assert fn.column_patterns(("Tree/LL", "Ring/Simple", "NVLSTree/Simple", "double_binary_tree", "ring")) == (
        "tree", "ring", "tree", "tree", "ring")


def test_tied_embedding_pair_crosses_nodes_when_the_pipeline_does():
    # tp 4, pp 4 on two 8-GPU nodes (pp outermost): stages sit at ranks 0, 4, 8, 12, so the
    # first and the last stage are on different nodes and the tied-embedding all-reduce is a
    # 2-rank group with one member on each of two nodes. A dp-2 group of tp 8 x dp 2 on the same
    # two nodes is exactly that geometry (one member per node, 8 such groups per node), so the
    # two must be costed alike; inside one node (tp 4, pp 2 on one node) the pair is a 2-GPU
    # NVLink group, like the dp-2 group of tp 4 x dp 2 there.
    from willitscale.step.network import analytic_lines

    def lines(settings, nodes):
        sc = build_scenario({**LLAMA, "nodes": nodes, **settings})
        ctx = make_context(sc)
        b = PlanBatch.from_plans([sc.plan])
        return analytic_lines(ctx, b, run(ctx, b, detail=True).detail.places)

    size = np.array([256e6])
    across = lines({"tp": 4, "pp": 4, "dp": 1, "global_batch": 32}, 2)["emb"]
    pair = lines({"tp": 8, "pp": 1, "dp": 2, "global_batch": 32}, 2)["dp_ar"]
    assert float(line_time(across, size)[0]) == pytest.approx(float(line_time(pair, size)[0]), rel=1e-12)
    inside = lines({"tp": 4, "pp": 2, "dp": 1, "global_batch": 32, "gpus_per_node": 8}, 1)["emb"]
    nvlink = lines({"tp": 4, "pp": 1, "dp": 2, "global_batch": 32}, 1)["dp_ar"]
    assert float(line_time(inside, size)[0]) == pytest.approx(float(line_time(nvlink, size)[0]), rel=1e-12)
    assert float(line_time(across, size)[0]) > 2 * float(line_time(inside, size)[0])  # IB, not NVLink


def test_the_flow_report_names_the_simulations_fidelity(monkeypatch):
    from willitscale.estimation.estimate import estimate
    from willitscale.fabric import simulator

    # 2 DGX H100 nodes = 16 GPUs: simulate's auto runs exact (coarse is above 16,384 GPUs); with the
    # threshold lowered to 8 GPUs the same estimate runs coarse and its report must say so
    sc = _flow({**LLAMA, "tp": 2, "pp": 2, "dp": 4, "zero": 1, "sequence_parallel": False,
                "recompute": "none"}, topology="fat-tree", oversubscription=2, routing_seed=23)
    for threshold, expected in ((simulator.COARSE_ABOVE_GPUS, "exact"), (8, "coarse")):
        monkeypatch.setattr(simulator, "COARSE_ABOVE_GPUS", threshold)
        fn.step_flow.cache_clear()
        fn._set_flow.cache_clear()
        net = estimate(sc).to_json()["network"]
        assert net["fidelity"] == expected, net["fidelity_reason"]
    fn.step_flow.cache_clear()
    fn._set_flow.cache_clear()

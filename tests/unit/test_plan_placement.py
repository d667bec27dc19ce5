"""Placement of ranks on nodes, and the network each group's collectives see."""

import numpy as np
import pytest

from willitscale.collectives import Hierarchy, LinkCost, collective_cost, fastest
from willitscale.errors import ConfigError
from willitscale.plan.links import ClusterLinks, collective_lines, line_time
from willitscale.plan.placement import group_placement, parse_order


def place(kind, g=8, order=None, **degrees):
    deg = {k: np.array([degrees.get(k, 1)]) for k in ("tp", "cp", "ep", "dp", "pp")}
    p = group_placement(kind, deg, g, parse_order(order))
    return {f: float(np.asarray(getattr(p, f))[0]) for f in
            ("size", "members_per_node", "nodes", "node_share")} | {"rail": bool(p.rail_aligned[0])}


def test_tp_inside_a_node_and_dp_one_per_node_on_its_rail():
    # 1024 GPUs, tp 8 pp 16 dp 8 on nodes of 8: TP ranks 0..7 are node 0.
    assert place("tp", tp=8, pp=16, dp=8) == {"size": 8, "members_per_node": 8, "nodes": 1,
                                                "node_share": 1.0, "rail": False}
    # DP ranks are 8 apart (stride tp = 8): one per node, 8 nodes; every GPU of a node is in a
    # different DP group and all all-reduce at once: each gets 1/8 of the node's NICs, and
    # all members have the same local index (8 | stride): they stay on their rail.
    assert place("dp", tp=8, pp=16, dp=8) == {"size": 8, "members_per_node": 1, "nodes": 8,
                                                "node_share": 0.125, "rail": True}
    # PP ranks are tp x dp = 64 apart: 16 nodes, one each.
    assert place("pp", tp=8, pp=16, dp=8)["nodes"] == 16


def test_dp_with_two_way_tp_has_four_members_per_node():
    # tp 2: DP ranks 0, 2, 4, 6 share node 0 -> 4 per node, 32 / 4 = 8 nodes, half the NICs each
    p = place("dp", tp=2, dp=32)
    assert (p["members_per_node"], p["nodes"], p["node_share"]) == (4, 8, 0.5)


def test_order_is_configurable_and_validated():
    # dp innermost: 8 DP ranks fill a node, TP ranks are 8 apart (8 nodes).
    assert place("dp", order="dp-tp-cp-ep-pp", tp=8, dp=8)["nodes"] == 1
    assert place("tp", order="dp-tp-cp-ep-pp", tp=8, dp=8)["nodes"] == 8
    with pytest.raises(ConfigError, match="permutation"):
        parse_order("tp-dp-pp")


def test_gradient_group_spans_context_parallel_ranks():
    # cp ranks hold the same weights: gradients are reduced over cp x dp = 2 x 4 = 8 ranks
    assert place("dp", tp=4, cp=2, dp=4)["size"] == 8
    # experts: over cp x dp / ep = 2 x 4 / 2 = 4
    assert place("edp", tp=4, cp=2, dp=4, ep=2)["size"] == 4


LINKS = ClusterLinks(gpus_per_node=8, nodes=4, intra_bandwidth=240e9, intra_latency=1e-6,
                     inter_bandwidth=160e9, inter_latency=5e-6, intra_name="nv", inter_name="ib",
                     intra_line_rate=300e9, inter_line_rate=200e9)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather", "send_recv", "all_to_all"])
def test_lines_equal_the_collective_model(op):
    # A straight line through two sizes reproduces the alpha-beta model at any size, and the
    # NCCL choice for all-reduce (ring vs double binary tree within 1%) matches fastest().
    deg = {"tp": np.array([1, 8]), "cp": np.array([1, 1]), "ep": np.array([1, 1]),
           "dp": np.array([32, 4]), "pp": np.array([1, 1])}
    placement = group_placement("dp", deg, 8)
    lines = collective_lines(op, placement, LINKS)
    sizes = np.array([1e3, 3e5, 7e7, 2e9])
    got = line_time(lines, np.broadcast_to(sizes, (2, 4)))
    # plan 0: 32 ranks, 8 per node over 4 nodes, whole node NICs; plan 1: 4 ranks one per node
    nets = [Hierarchy(ranks_per_node=8, intra=LinkCost(bandwidth=240e9, latency=1e-6),
                      inter=LinkCost(bandwidth=160e9, latency=5e-6)),
            Hierarchy(ranks_per_node=1, intra=LinkCost(bandwidth=240e9, latency=1e-6),
                      inter=LinkCost(bandwidth=160e9 / 8, latency=5e-6))]
    for row, (net, n) in enumerate(zip(nets, (32, 4))):
        if op == "all_reduce":
            want = fastest(op, sizes, n, net, algorithms=("ring", "double_binary_tree")).cost.time
        else:
            want = collective_cost(op, "direct" if op in ("send_recv", "all_to_all") else "ring",
                                   sizes, n, net).time
        assert got[row] == pytest.approx(np.asarray(want), rel=1e-9)

"""Placement of ranks on nodes, and the network each group's collectives see."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.collectives import Hierarchy, LinkCost, collective_cost, fastest
from willitscale.collectives.lines import ClusterLinks, collective_lines, line_time
from willitscale.errors import ConfigError
from willitscale.topology.placement import (
    group_placement,
    parse_order,
    uneven_detail,
    uneven_groups,
)


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


# -- uneven placement (review P1) ------------------------------------------------------------

def _degrees(**degrees):
    return {k: np.array([degrees.get(k, 1)]) for k in ("tp", "cp", "ep", "dp", "pp")}


def test_a_group_split_two_plus_one_is_found_and_an_even_order_suggested():
    # 24 GPUs on nodes of 8, tp 4 pp 2 dp 3 (tp-cp-ep-dp-pp): the DP stride is tp = 4, so DP
    # group {0, 4, 8} has ranks 0 and 4 on node 0 and rank 8 on node 1: 2 + 1. The old closed
    # form gave 2 members per node and the collective model raised "ranks = 3 ... multiple of 2".
    deg = _degrees(tp=4, dp=3, pp=2)
    assert uneven_groups(deg, 8)[0] == "dp"
    assert "2 + 1 GPUs on nodes 0, 1" in uneven_detail("dp", deg, 8)
    # pp outside tp, dp outermost: the DP stride is tp x pp = 8, one member per node, and the
    # pipeline pair {r, r + 4} shares a node: every group even
    assert uneven_groups(deg, 8, parse_order("tp-cp-ep-pp-dp"))[0] == ""


def test_groups_of_an_uneven_geometry_that_land_evenly_are_placed_exactly():
    # same plan: the pipeline pair {r, r + 12} lands on two different nodes (12 >= 8), one
    # member each; 12 is not a multiple of 8, so the two members have different local indices
    # (r and r + 4 mod 8): they cross rails
    p = place("pp", tp=4, dp=3, pp=2)
    assert (p["members_per_node"], p["nodes"], p["rail"]) == (1, 2, False)
    assert p["node_share"] == 1 / 8
    # TP blocks of 4 consecutive ranks never straddle a boundary (4 divides 8)
    assert place("tp", tp=4, dp=3, pp=2)["nodes"] == 1


@given(tp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 2, 4, 8]),
       pp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2]), g=st.sampled_from([2, 4, 8]))
@settings(max_examples=60, deadline=None)
def test_the_closed_form_equals_counting_every_rank(tp, cp, dp, pp, ep, g):
    # powers of two on nodes of a power of two always cut the rank at a digit boundary: the
    # closed form of the module docstring must equal placing every rank and counting
    from hypothesis import assume

    from willitscale.topology.placement import AXES, _exact

    assume(dp % ep == 0 and tp * cp * dp * pp % g == 0)
    deg = _degrees(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp)
    exact = _exact((tp, cp, ep, dp // ep, pp), AXES, g)
    for kind in ("tp", "cp", "ep", "dp", "edp", "pp"):
        p = group_placement(kind, deg, g)
        size, per_node, nodes, aligned, even = exact[kind]
        assert even and p.size[0] == size
        assert (p.members_per_node[0], p.nodes[0], bool(p.rail_aligned[0])) == (per_node, nodes, aligned)


def test_estimate_and_plan_say_why_instead_of_an_internal_error(cli):
    code, _, err = cli("estimate", "--model", "llama3-8b", "--gpu", "h100", "--nodes", "3",
                       "--gpus-per-node", "8", "--tp", "4", "--pp", "2", "--dp", "3",
                       "--global-batch", "96", "--seq-len", "8192")
    assert code == 2 and "[uneven_placement]" in err and "--rank-order tp-cp-ep-pp-dp" in err
    code, out, _ = cli("estimate", "--model", "llama3-8b", "--gpu", "h100", "--nodes", "3",
                       "--gpus-per-node", "8", "--tp", "4", "--pp", "2", "--dp", "3",
                       "--global-batch", "96", "--seq-len", "8192", "--rank-order",
                       "tp-cp-ep-pp-dp", "--json")
    assert code == 0
    import json

    code, out, err = cli("plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "24",
                         "--gpus-per-node", "8", "--global-batch", "96", "--seq-len", "8192",
                         "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["rejected"]["uneven_placement"] > 0 and result["plans"]


def test_rail_label_says_how_many_local_gpus_a_group_has_per_node():
    # review PB1: --tp 16 on two nodes of 8 was labelled "same local GPU on every node", but each
    # node holds 8 of its GPUs (all local indices 0..7 on both nodes)
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    est = estimate(build_scenario({"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 2,
                                   "gpus_per_node": 8, "tp": 16, "global_batch": 1,
                                   "seq_len": 2048, "hfu": 0.5}), allow_oom=True)
    tp = next(r for r in est.placement if r["parallelism"] == "tp")
    assert tp["gpus_per_node"] == 8 and "same local GPU on every node" not in tp["where"]
    assert "the same 8 local GPUs on every node" in tp["where"]
    # one member per node keeps the old wording
    est = estimate(build_scenario({"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 2,
                                   "gpus_per_node": 8, "tp": 8, "pp": 2, "global_batch": 1,
                                   "seq_len": 2048, "hfu": 0.5}), allow_oom=True)
    pp = next(r for r in est.placement if r["parallelism"] == "pp")
    assert "same local GPU on every node: stays on its rail" in pp["where"]


def test_exact_placement_memory_grows_with_the_ranks_not_their_square():
    # 8,191 nodes (a prime) x 8 GPUs, dp 8,191 x pp 8: the dp groups cut the node boundary, so
    # every rank is placed. A dense groups x nodes table for the 65,528 one-rank tp groups would
    # be 65,528 x 8,191 x 8 B = 4.3 GB (8,191 nodes took 9 GB before); counted sparsely the peak
    # stays near a dozen 65,528-element int64 arrays (~6 MB)
    import tracemalloc

    from willitscale.topology.placement import AXES, _exact

    tracemalloc.start()
    exact = _exact((1, 1, 1, 8191, 8), AXES, 8)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100e6
    # dp group of stage 1 = ranks 8,191..16,381 = nodes 1,023..2,047: 1,025 nodes, full ones
    # holding 8 members (stage 0: ranks 0..8,190 on 1,024 nodes)
    size, per_node, nodes, _, _ = exact["dp"]
    assert (size, per_node, nodes) == (8191, 8, 1025)

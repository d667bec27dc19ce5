"""Exact, hand-derived costs on two levels.

The network: g = 4 ranks per node, each with B1 = 4e9 bytes/s and alpha1 = 1 us inside the node;
each node has B2 = 1e9 bytes/s (all its NICs) and alpha2 = 10 us to other nodes. With n = 8 ranks
there are m = 2 nodes. S = 8e9 bytes unless said otherwise.
"""

import pytest

from willitscale.collectives import Hierarchy, LinkCost, NotApplicable, collective_cost
from willitscale.errors import ConfigError

A1, A2 = 1e-6, 1e-5
NET = Hierarchy(ranks_per_node=4, intra=LinkCost(bandwidth=4e9, latency=A1),
                inter=LinkCost(bandwidth=1e9, latency=A2))
approx = pytest.approx


def cost(op, algorithm, size=8e9, ranks=8, net=NET):
    return collective_cost(op, algorithm, size, ranks, net)


def test_hierarchical_all_reduce_both_levels():
    # 1. ring reduce-scatter inside each node: (g-1)/g·S/B1 = 3/4·8e9/4e9 = 1.5 s, 3 alpha1.
    # 2. each rank all-reduces its S/g = 2e9 shard with its peer on the other node; the 4 rings
    #    share the node's NICs, which carry 4 x 2(m-1)/m x 2e9 = 8e9 bytes: 8e9 / 1e9 = 8 s, 2 alpha2.
    # 3. ring all-gather inside: 1.5 s, 3 alpha1.
    c = cost("all_reduce", "hierarchical")
    assert c.time == approx(1.5 + 8 + 1.5 + 6 * A1 + 2 * A2, rel=1e-12)
    assert c.rounds == 8  # 3 + 2 + 3
    assert c.peak_node_bytes_in == approx(8e9) and c.peak_node_bytes_out == approx(8e9)
    # a rank sends 2·3/4·8e9 = 12e9 over NVLink and 2·1/2·2e9 = 2e9 across: 14e9
    assert c.bytes_sent_per_rank == approx(14e9)
    assert c.fan_in == 4  # in each cross-node step all 4 ranks of a node hear from a remote peer


def test_hierarchical_reduce_scatter_and_all_gather_are_halves():
    # one of steps 1-3 above plus half of step 2: 1.5 s + 4 s, 3 alpha1 + 1 alpha2
    for op in ("reduce_scatter", "all_gather"):
        assert cost(op, "hierarchical").time == approx(5.5 + 3 * A1 + A2, rel=1e-12)


def test_ring_across_two_levels():
    # NCCL's ring over 8 ranks, node by node: 2(n-1) = 14 steps of S/n = 1e9 bytes. Over NVLink a
    # step takes 1e9/4e9 = 0.25 s, across the node boundary 1e9/1e9 = 1 s: the boundary sets the
    # pace, 14 s. Latency as NCCL's tuning model: 2(m-1) = 2 inter-node steps, 12 intra-node.
    c = cost("all_reduce", "ring")
    assert c.time == approx(14 + 12 * A1 + 2 * A2, rel=1e-12)
    assert c.peak_node_bytes_in == approx(14e9)  # 2(n-1)/n·S crosses each node boundary
    assert c.fan_in == 1


def test_double_binary_tree_across_two_levels():
    # NCCL's tree: a chain through the 4 ranks of a node (a middle rank passes S up and S down:
    # 2 S / B1 = 2 x 8e9 / 4e9 = 4 s) and trees over the 2 nodes (they swap halves: S / B2 = 8 s),
    # all pipelined: max(4, 8) = 8 s. Latency 2(g-1) alpha1 + 2 ceil(log2 2) alpha2.
    c = cost("all_reduce", "double_binary_tree")
    assert c.time == approx(8 + 6 * A1 + 2 * A2, rel=1e-12)
    assert c.peak_node_bytes_in == approx(8e9)


def test_parameter_server_on_two_levels():
    # a server node on the inter-node network: 8 ranks push S (64e9 bytes into its NICs, 64 s),
    # then it sends S to each (64 s); 8 + 8 messages through its port at alpha2.
    c = cost("all_reduce", "parameter_server")
    assert c.time == approx(128 + 16 * A2, rel=1e-12)
    assert c.peak_node_bytes_in == approx(64e9) and c.fan_in == 8


def test_direct_all_to_all_on_two_levels():
    # each rank sends S/n = 1e9 to each of 7 others. Inside the node: 3 x 1e9 per rank over B1 =
    # 0.75 s. Across: the node's 4 ranks send 4 x 4 x 1e9 = 16e9 through its NICs = 16 s. The
    # transfers run at once, so 16 s; each rank's port starts 3 intra + 4 inter messages.
    c = cost("all_to_all", "direct")
    assert c.time == approx(16 + 3 * A1 + 4 * A2, rel=1e-12)
    assert c.peak_node_bytes_in == approx(16e9) and c.fan_in == 4


def test_ranks_within_one_node_use_only_the_intra_link():
    # n = 2 <= g: one node, 2 ranks. Ring all_reduce: 2 steps of S/2 = 4e9 over B1 = 1 s each.
    c = cost("all_reduce", "ring", ranks=2)
    assert c.time == approx(2 + 2 * A1, rel=1e-12)
    assert c.peak_node_bytes_in == 0  # nothing crosses the node's NICs
    # hierarchical on one node is the intra ring alone: 2(g-1)/g·S/B1 with g = 2: 1 s x 2 = 2 s
    assert cost("all_reduce", "hierarchical", ranks=2).time == approx(2 + 2 * A1, rel=1e-12)


def test_ranks_must_fill_whole_nodes():
    with pytest.raises(ConfigError, match="multiple of ranks_per_node = 4"):
        cost("all_reduce", "ring", ranks=6)


def test_one_level_algorithms_are_not_applicable_on_two_levels():
    for algorithm in ("halving_doubling", "binary_tree", "naive"):
        with pytest.raises(NotApplicable, match="one level only"):
            cost("all_reduce", algorithm)


def test_hierarchy_validates():
    link = LinkCost(bandwidth=1e9)
    with pytest.raises(ConfigError, match="ranks_per_node"):
        Hierarchy(ranks_per_node=0, intra=link, inter=link)
    with pytest.raises(ConfigError, match="inter"):
        Hierarchy(ranks_per_node=8, intra=link, inter=1e9)


def _node():
    from willitscale.hardware.model import Gpu, Link, Node

    gpu = Gpu(name="g", display_name="G", vendor="x", memory=80e9, memory_bandwidth=2e12, peak_flops={"bf16": 1e15})
    nvlink = Link(name="nv", kind="nvlink", bandwidth=450e9, latency=1e-6, efficiency=0.8)
    nic = Link(name="ib", kind="infiniband", bandwidth=50e9, latency=5e-6, efficiency=0.9)
    return Node(name="box", gpu=gpu, gpus_per_node=8, intra_link=nvlink, nic=nic, nics=8), nvlink


def test_hierarchy_from_a_catalog_node():
    node, nvlink = _node()
    net = Hierarchy.from_node(node)
    # per GPU 450 GB/s x 0.8 achievable = 360 GB/s; per node 8 NICs x 50 GB/s x 0.9 = 360 GB/s
    assert net.ranks_per_node == 8
    assert net.intra.bandwidth == pytest.approx(360e9) and net.intra.latency == 1e-6
    assert net.inter.bandwidth == pytest.approx(360e9) and net.inter.latency == 5e-6
    raw = Hierarchy.from_node(node, derate=False)
    assert raw.intra.bandwidth == 450e9 and raw.inter.bandwidth == 400e9  # 8 x 50 GB/s
    link = LinkCost.from_link(nvlink)
    assert link.bandwidth == pytest.approx(360e9) and "0.8 achievable" in link.name

"""Exact, hand-derived costs on one flat level.

Unless a test says otherwise the link is B = 1e9 bytes/s one direction and alpha = 1 us, so a
bandwidth term of k·S/B with S = 1e9 is k seconds and the latency term is (alphas) x 1e-6 s.
"""

import numpy as np
import pytest

from willitscale.collectives import (
    Algorithm,
    LinkCost,
    NotApplicable,
    Op,
    applicable_algorithms,
    collective_cost,
)
from willitscale.errors import ConfigError

LINK = LinkCost(bandwidth=1e9, latency=1e-6)
US = 1e-6
approx = pytest.approx


def cost(op, algorithm, size, ranks, link=LINK):
    return collective_cost(op, algorithm, size, ranks, link)


# ------------------------------------------------------------------------------------ ring


def test_ring_all_reduce_four_ranks():
    # n = 4, S = 4e9 so every step moves S/n = 1e9 bytes = 1 s; reduce-scatter then all-gather
    # take (n-1) + (n-1) = 6 steps: 6 s + 6 alpha.
    c = cost("all_reduce", "ring", 4e9, 4)
    assert c.rounds == 6
    assert c.time == approx(6 + 6 * US, rel=1e-12)
    assert c.bandwidth_time == approx(6.0, rel=1e-12)
    assert c.bytes_sent_per_rank == approx(6e9)  # 2(n-1)/n · S = 1.5 x 4e9
    assert c.peak_node_bytes_in == approx(6e9) and c.peak_node_bytes_out == approx(6e9)
    assert c.peak_node_bytes_per_round == approx(1e9)  # S/n per step
    assert c.fan_in == 1  # each rank hears only from its predecessor


def test_ring_reduce_scatter_and_all_gather_are_one_half_each():
    # (n-1) = 3 steps of S/n = 1e9 bytes: 3 s + 3 alpha; each rank sends (n-1)/n · S = 3e9.
    for op in ("reduce_scatter", "all_gather"):
        c = cost(op, "ring", 4e9, 4)
        assert (c.rounds, c.time, c.bytes_sent_per_rank) == (3, approx(3 + 3 * US), approx(3e9))


def test_ring_broadcast_is_a_pipelined_chain():
    # n-1 = 3 hops of latency, and in the pipelined limit every rank forwards all S once: S/B = 4 s.
    c = cost("broadcast", "ring", 4e9, 4)
    assert c.time == approx(4 + 3 * US) and c.rounds == 3 and c.bytes_sent_per_rank == approx(4e9)


def test_acceptance_example_ring_1GB_8_ranks_100GBps():
    # issue 2: 2·7/8·1e9 / 1e11 = 0.0175 s; busbw = (1e9 / 0.0175) x 2·7/8 = 1e11 = the link;
    # bytes sent per rank 2·7/8·1e9 = 1.75e9.
    c = cost("all_reduce", "ring", 1e9, 8, LinkCost(bandwidth=100e9, latency=0.0))
    assert c.time == approx(0.0175, rel=1e-12)
    assert c.busbw == approx(100e9, rel=1e-12)
    assert c.algbw == approx(1e9 / 0.0175, rel=1e-12)
    assert c.bytes_sent_per_rank == approx(1.75e9, rel=1e-12)


# ------------------------------------------------------------------------------ binary tree


def test_binary_tree_seven_ranks():
    # heap tree of 7 ranks: 0 -> 1, 2; 1 -> 3, 4; 2 -> 5, 6. Depth 2.
    # broadcast: 2 hops; an inner rank sends S to each of 2 children through one link: 2 S/B = 2 s.
    b = cost("broadcast", "binary_tree", 1e9, 7)
    assert (b.rounds, b.time, b.fan_in) == (2, approx(2 + 2 * US), 1)
    # reduce: the mirror image; an inner rank hears from 2 children at once.
    r = cost("reduce", "binary_tree", 1e9, 7)
    assert (r.rounds, r.time, r.fan_in, r.peak_node_bytes_in) == (2, approx(2 + 2 * US), 2, approx(2e9))
    # all_reduce, pipelined: rank 1 gets S from 3 and from 4 (reduce) and S from 0 (broadcast):
    # 3 S in and, symmetrically, 3 S out: 3 s; up 2 hops and down 2 hops: 4 alpha.
    a = cost("all_reduce", "binary_tree", 1e9, 7)
    assert (a.rounds, a.time, a.fan_in, a.bytes_sent_per_rank) == (4, approx(3 + 4 * US), 3, approx(3e9))


def test_binary_tree_small_trees():
    # n = 2: one edge; all_reduce swaps S each way: S/B = 1 s, 1 hop up + 1 down.
    assert cost("all_reduce", "binary_tree", 1e9, 2).time == approx(1 + 2 * US)
    # n = 3: the root has 2 children and exchanges S with each: 2 s; depth 1.
    assert cost("all_reduce", "binary_tree", 1e9, 3).time == approx(2 + 2 * US)
    # n = 2 broadcast: the root has one child: S/B.
    assert cost("broadcast", "binary_tree", 1e9, 2).time == approx(1 + 1 * US)


# ------------------------------------------------------------------------ double binary tree


def test_double_binary_tree_all_reduce_eight_ranks():
    # NCCL's tree for 8 ranks: 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}: depth 3 = ceil(log2 8).
    # Each tree carries S/2; rank 2 is inner in one tree (parent + 2 children: 3 x S/2 each way)
    # and a leaf in the other (S/2 each way): 2 S each way = 2 s. Latency: 3 up + 3 down.
    c = cost("all_reduce", "double_binary_tree", 1e9, 8)
    assert c.rounds == 6
    assert c.time == approx(2 + 6 * US)
    assert c.bytes_sent_per_rank == approx(2e9)
    assert c.fan_in == 4  # two children and a parent in one tree, a parent in the other


def test_double_binary_tree_small_and_odd():
    # n = 5: depth ceil(log2 5) = 3 (0 -> 4 -> 2 -> {1, 3}); the 2 S bound already holds.
    assert cost("all_reduce", "double_binary_tree", 1e9, 5).time == approx(2 + 6 * US)
    # n = 3: trees 0 -> 2 -> 1 and (shifted) 1 -> 0 -> 2; rank 2 is a middle link in one
    # (S/2 + S/2 each way) and a leaf in the other (S/2): 1.5 S. Depth 2.
    assert cost("all_reduce", "double_binary_tree", 1e9, 3).time == approx(1.5 + 4 * US)
    # n = 2: the two ranks swap halves in both trees: S each way, 1 hop up + 1 down.
    assert cost("all_reduce", "double_binary_tree", 1e9, 2).time == approx(1 + 2 * US)


def test_double_binary_tree_broadcast_is_full_bandwidth():
    # Sanders et al. 2009: half the data down each tree, every rank sends at most 2 x S/2: S/B.
    c = cost("broadcast", "double_binary_tree", 1e9, 8)
    assert c.time == approx(1 + 3 * US) and c.rounds == 3


# --------------------------------------------------------------------- halving-doubling


def test_halving_doubling_power_of_two():
    # Rabenseifner at n = 8: log2 8 = 3 halving steps (S/2, S/4, S/8) + 3 doubling steps:
    # 2·(1/2 + 1/4 + 1/8) S = 1.75 S = 1.75 s; 6 alpha.
    c = cost("all_reduce", "halving_doubling", 1e9, 8)
    assert (c.rounds, c.time, c.bytes_sent_per_rank) == (6, approx(1.75 + 6 * US), approx(1.75e9))
    assert c.peak_node_bytes_per_round == approx(0.5e9)  # the first halving step
    # all_gather alone: 3 doubling steps moving (1/8 + 1/4 + 1/2) S = 7/8 S.
    g = cost("all_gather", "halving_doubling", 1e9, 8)
    assert (g.rounds, g.time) == (3, approx(0.875 + 3 * US))


def test_halving_doubling_not_a_power_of_two():
    # Thakur et al. 2005 §4.4, n = 6: p = 4 ranks do Rabenseifner, r = 2 extra ranks first hand
    # their whole vector to a partner (alpha + S/B) and get the result back at the end (alpha + S/B).
    # Time: 2·log2 4 alpha + 2·3/4 S/B + 2 (alpha + S/B) = 6 alpha + 3.5 s.
    c = cost("all_reduce", "halving_doubling", 1e9, 6)
    assert c.rounds == 6
    assert c.time == approx(3.5 + 6 * US)
    # a partner sends 1.5 S in the core and S back: 2.5 S; it also receives S + 1.5 S.
    assert c.bytes_sent_per_rank == approx(2.5e9) and c.peak_node_bytes_in == approx(2.5e9)
    # reduce_scatter at n = 6: S in (alpha + S/B), recursive halving among 4 (2 alpha + 3/4 S/B),
    # each excluded rank's S/6 shard back (alpha + S/(6B)): 4 alpha + (1 + 0.75 + 1/6) s.
    rs = cost("reduce_scatter", "halving_doubling", 1e9, 6)
    assert rs.rounds == 4 and rs.time == approx(1 + 0.75 + 1 / 6 + 4 * US)
    # all_gather at n = 6: Bruck et al., ceil(log2 6) = 3 steps moving 1 + 2 + 2 blocks of S/6.
    ag = cost("all_gather", "halving_doubling", 1e9, 6)
    assert ag.rounds == 3 and ag.time == approx(5 / 6 + 3 * US)
    assert ag.peak_node_bytes_per_round == approx(2 / 6 * 1e9)


def test_halving_doubling_broadcast_and_reduce():
    # broadcast, n = 8 (van de Geijn): binomial scatter (3 steps, root sends 7/8 S) then
    # recursive-doubling all-gather (3 steps, 7/8 S): 6 alpha + 1.75 s.
    assert cost("broadcast", "halving_doubling", 1e9, 8).time == approx(1.75 + 6 * US)
    # reduce, n = 8 (Rabenseifner): halving reduce-scatter (3 steps, 7/8 S) then binomial gather
    # to the root (3 steps, 7/8 S): 6 alpha + 1.75 s; n = 6 adds the hand-in step: alpha + S/B.
    assert cost("reduce", "halving_doubling", 1e9, 8).time == approx(1.75 + 6 * US)
    assert cost("reduce", "halving_doubling", 1e9, 6).time == approx(2.5 + 5 * US)


# -------------------------------------------------- parameter server, naive, direct


def test_parameter_server_four_workers():
    # push: 4 workers x S into the server (4 S/B = 4 s), pull: 4 x S out (4 s). Two rounds, but
    # the server's port handles 4 + 4 messages one at a time: 8 alpha.
    c = cost("all_reduce", "parameter_server", 1e9, 4)
    assert c.rounds == 2
    assert c.time == approx(8 + 8 * US)
    assert c.bytes_sent_per_rank == approx(1e9)  # a worker sends its S once
    assert c.peak_node_bytes_in == approx(4e9) and c.peak_node_bytes_out == approx(4e9)
    assert c.peak_node_bytes_per_round == approx(4e9)
    assert c.fan_in == 4


def test_parameter_server_other_ops():
    # broadcast: root -> server (S), server -> 3 others (3 S): 4 s, 1 + 3 messages.
    assert cost("broadcast", "parameter_server", 1e9, 4).time == approx(4 + 4 * US)
    # all_gather with S = 4e9: 4 shards of 1e9 in (4 s), 3e9 out to each of 4 (12 s): 16 s, 8 messages.
    assert cost("all_gather", "parameter_server", 4e9, 4).time == approx(16 + 8 * US)


def test_naive_decentralized():
    # seeds/004 "Try #2" with rounds moved earlier: round k, rank i sends its whole S to rank i+k;
    # 3 rounds of S/B at n = 4. Each rank sends (n-1) S = 3e9; at most S arrives per round.
    c = cost("all_reduce", "naive", 1e9, 4)
    assert (c.rounds, c.time, c.bytes_sent_per_rank) == (3, approx(3 + 3 * US), approx(3e9))
    assert (c.peak_node_bytes_per_round, c.fan_in) == (approx(1e9), 1)


def test_direct_all_to_all_and_send_recv():
    # all_to_all, n = 4, S = 4e9: 1e9 to each of 3 others at once: 3e9 through the link = 3 s;
    # the port starts 3 messages: 3 alpha. busbw = (S/t)·(n-1)/n = (4e9/3)·3/4 = 1e9 = B.
    c = cost("all_to_all", "direct", 4e9, 4, LinkCost(bandwidth=1e9, latency=0.0))
    assert (c.rounds, c.time, c.fan_in) == (1, approx(3.0), 3)
    assert c.busbw == approx(1e9)
    assert cost("all_to_all", "direct", 4e9, 4).time == approx(3 + 3 * US)
    # send_recv: S to the next rank: alpha + S/B.
    assert cost("send_recv", "direct", 1e9, 2).time == approx(1 + 1 * US)


# ---------------------------------------------------------------- edges and errors


@pytest.mark.parametrize("op", list(Op))
def test_one_rank_costs_nothing_and_gives_no_nan(op):
    for algorithm in applicable_algorithms(op, LINK):
        c = cost(op, algorithm, 1e9, 1)
        values = [c.time, c.rounds, c.bytes_sent_per_rank, c.peak_node_bytes_in, c.fan_in, c.algbw, c.busbw]
        assert values == [0] * 7, algorithm


def test_arrays_broadcast_and_match_scalars():
    sizes = np.array([[1e3], [1e6], [1e9]])
    ranks = np.array([1, 2, 3, 6, 8, 256])
    for algorithm in applicable_algorithms(Op.ALL_REDUCE, LINK):
        batch = cost("all_reduce", algorithm, sizes, ranks)
        assert batch.time.shape == (3, 6)
        for i, s in enumerate(sizes[:, 0]):
            for j, n in enumerate(ranks):
                one = cost("all_reduce", algorithm, float(s), int(n))
                assert batch.time[i, j] == approx(one.time, rel=1e-12, abs=0)
                assert batch.busbw[i, j] == approx(one.busbw, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    "op, algorithm",
    [("all_gather", "binary_tree"), ("all_to_all", "ring"), ("all_reduce", "direct"),
     ("reduce_scatter", "double_binary_tree"), ("broadcast", "naive"), ("all_reduce", "hierarchical")],
)
def test_not_applicable_is_an_error_with_a_reason(op, algorithm):
    with pytest.raises(NotApplicable, match="cannot run"):
        cost(op, algorithm, 1e9, 8)


@pytest.mark.parametrize("ranks", [0, -1, 2.5, float("nan"), True])
def test_bad_ranks(ranks):
    with pytest.raises(ConfigError, match="ranks"):
        cost("all_reduce", "ring", 1e9, ranks)


@pytest.mark.parametrize("size", [-1, float("inf"), "1GB"])
def test_bad_size(size):
    with pytest.raises(ConfigError, match="size"):
        cost("all_reduce", "ring", size, 8)


def test_bad_link():
    with pytest.raises(ConfigError, match="bandwidth"):
        LinkCost(bandwidth=0, latency=0)
    with pytest.raises(ConfigError, match="latency"):
        LinkCost(bandwidth=1e9, latency=-1e-6)


def test_algorithm_names_and_aliases():
    from willitscale.collectives import parse_algorithm

    assert parse_algorithm("double-binary-tree") is Algorithm.DOUBLE_BINARY_TREE
    assert parse_algorithm("DBT") is Algorithm.DOUBLE_BINARY_TREE
    assert parse_algorithm("ps") is Algorithm.PARAMETER_SERVER
    with pytest.raises(ConfigError, match="one of ring"):
        parse_algorithm("butterfly")


def test_nccl_tests_size_convention():
    from willitscale.collectives import nccl_tests_size

    # nccl-tests reports all_gather by its output (8 shards of 1 MB = 8 MB) and all_reduce by its buffer.
    assert nccl_tests_size("all_gather", 1e6, 8) == 8e6
    assert nccl_tests_size("reduce_scatter", 1e6, 8) == 8e6
    assert nccl_tests_size("all_reduce", 1e6, 8) == 1e6

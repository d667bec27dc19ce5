"""fastest(): picks like NCCL would, says why, and works on arrays."""

import numpy as np
import pytest

from willitscale.collectives import (
    DEFAULT_LINK,
    NCCL_ALGORITHMS,
    Algorithm,
    Hierarchy,
    LinkCost,
    NotApplicable,
    fastest,
)


def test_large_message_ties_go_to_ring():
    # 1 GB on 8 ranks, no latency: ring and halving-doubling both move 2·7/8 S = 1.75 GB per rank:
    # a tie, and NCCL runs the ring.
    choice = fastest("all_reduce", 1e9, 8, LinkCost(bandwidth=100e9, latency=0.0))
    assert choice.algorithm is Algorithm.RING
    assert choice.cost.time == pytest.approx(0.0175)
    assert "ring is the fastest" in choice.reason


def test_large_message_at_a_non_power_of_two_is_ring():
    # 10 GB on 96 ranks, default link (50 GB/s, 5 us). Ring: 2·95/96·1e10/5e10 = 0.3958 s + 190·5 us
    # = 0.3968 s. Double binary tree: 2·1e10/5e10 = 0.4 s + 14·5 us = 0.40007 s (+0.8%: inside the
    # 1% tolerance, but the ring is both faster and preferred). Halving-doubling with p = 64 pays
    # 2 S extra for the 32 excluded ranks: 2·63/64·0.2 + 0.4 = 0.794 s.
    choice = fastest("all_reduce", 10e9, 96)
    assert choice.algorithm is Algorithm.RING and choice.model_fastest is Algorithm.RING


def test_small_message_at_many_ranks_is_a_log_depth_algorithm():
    # 1 kB on 256 ranks, default link: ring pays 2·255 = 510 alphas = 2.55 ms; the double binary
    # tree 2·log2 256 = 16 alphas = 80 us (+ 2 kB / 50 GB/s = 0.04 us). Halving-doubling also takes
    # 16 alphas: a tie that goes to the tree NCCL runs.
    choice = fastest("all_reduce", 1e3, 256)
    assert choice.algorithm is Algorithm.DOUBLE_BINARY_TREE
    assert choice.cost.time == pytest.approx(16 * 5e-6 + 2e3 / 50e9)
    assert "latency-bound" in choice.reason


def test_hierarchical_wins_when_the_nics_are_much_slower_than_nvlink():
    # 4 nodes x 4 GPUs, 300 GB/s NVLink per GPU, one 25 Gb/s (3.125 GB/s) NIC per node, S = 1 GB.
    # Ring: the node boundary carries 2·15/16·S = 1.875 GB: 0.6 s. Tree: 4 nodes -> 2 S across:
    # 0.64 s. Hierarchical: 2·3/4·S/300e9 = 5 ms inside + 2·3/4·S/3.125e9 = 0.48 s across.
    net = Hierarchy(ranks_per_node=4, intra=LinkCost(bandwidth=300e9, latency=1e-6),
                    inter=LinkCost(bandwidth=3.125e9, latency=5e-6))
    choice = fastest("all_reduce", 1e9, 16, net)
    assert choice.algorithm is Algorithm.HIERARCHICAL
    assert choice.cost.time == pytest.approx(0.005 + 0.48 + 6e-6 + 6 * 5e-6)


def test_one_rank_is_free():
    choice = fastest("all_reduce", 1e9, 1)
    assert choice.cost.time == 0 and "one rank" in choice.reason


def test_restricting_to_nccl_algorithms_skips_those_that_cannot_run():
    # direct cannot all-reduce; ring and the tree can: the choice is between those two.
    choice = fastest("all_reduce", 1e3, 256, DEFAULT_LINK, algorithms=NCCL_ALGORITHMS)
    assert {c.algorithm for c in choice.candidates} == {Algorithm.RING, Algorithm.DOUBLE_BINARY_TREE}
    with pytest.raises(NotApplicable):
        fastest("all_to_all", 1e3, 8, algorithms=["ring", "binary_tree"])


def test_array_choice_matches_scalar_choices():
    sizes = np.logspace(2, 10, 9)
    ranks = np.array([[2], [6], [64], [256]])
    batch = fastest("all_reduce", sizes, ranks)
    assert batch.algorithm.shape == (4, 9)
    for i, n in enumerate(ranks[:, 0]):
        for j, s in enumerate(sizes):
            one = fastest("all_reduce", float(s), int(n))
            assert batch.algorithm[i, j] == one.algorithm.value
            assert batch.cost.time[i, j] == pytest.approx(one.cost.time, rel=1e-12)


def test_choice_is_ring_for_large_and_log_depth_for_small_on_a_dgx_like_cluster():
    # 16 nodes x 8 GPUs: NVLink 450 GB/s per GPU, 8 x 400 Gb/s = 400 GB/s per node.
    net = Hierarchy(ranks_per_node=8, intra=LinkCost(bandwidth=450e9, latency=1e-6),
                    inter=LinkCost(bandwidth=400e9, latency=5e-6))
    assert fastest("all_reduce", 1e4, 128, net).algorithm is Algorithm.DOUBLE_BINARY_TREE
    assert fastest("all_reduce", 10e9, 128, net).algorithm is Algorithm.RING

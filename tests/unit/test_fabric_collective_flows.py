"""The flows each collective algorithm emits: counts, sizes and volumes derived by hand."""

import numpy as np
import pytest

from willitscale.collectives.flows import (
    collective_phases,
    double_binary_trees,
    group_phases,
)
from willitscale.errors import ConfigError


def _sent_per_rank(phases, n):
    out = np.zeros(n)
    for p in phases:
        np.add.at(out, p.src, p.size * p.repeat)
    return out


@pytest.mark.parametrize("n", [2, 3, 8])
def test_ring_all_reduce_moves_2_n_minus_1_over_n(n):
    # textbook ring all-reduce: each rank sends 2(n-1)/n of the buffer
    ph = group_phases("all_reduce", 1.0, range(n))
    assert len(ph) == 1 and ph[0].repeat == 2 * (n - 1) and ph[0].flows == n
    assert np.allclose(_sent_per_rank(ph, n), 2 * (n - 1) / n)


def test_reduce_scatter_and_all_gather_are_half_the_ring():
    rs = group_phases("reduce_scatter", 8.0, range(4))
    ag = group_phases("all_gather", 8.0, range(4))
    # size is the total (nccl-tests): 3 steps of 8/4 = 2 bytes
    assert (rs[0].repeat, float(rs[0].size[0])) == (3, 2.0)
    assert (ag[0].repeat, float(ag[0].size[0])) == (3, 2.0)


def test_all_to_all_direct_and_pairwise():
    d = group_phases("all_to_all", 8.0, range(4))
    assert d[0].flows == 12 and np.allclose(d[0].size, 2.0)  # n(n-1) flows of S/n
    p = group_phases("all_to_all", 8.0, range(4), "pairwise")
    assert len(p) == 3 and all(x.flows == 4 for x in p)


def test_double_binary_trees_are_trees_with_at_most_two_children():
    for n in (2, 5, 8, 13):
        p1, p2, depth = double_binary_trees(n)
        for parent in (p1, p2):
            assert np.sum(parent < 0) == 1  # one root
            assert np.bincount(parent[parent >= 0], minlength=n).max() <= 2
        assert depth == int(np.ceil(np.log2(n)))  # root 0 has one child: ceil(log2 n) edges deep
        inner1, inner2 = set(p1[p1 >= 0].tolist()), set(p2[p2 >= 0].tolist())
        assert len(inner1 & inner2) <= n % 2  # no rank inner in both trees (odd n: at most one)
    p1, p2, _ = double_binary_trees(8)
    assert set(range(8)) - set(p1[p1 >= 0].tolist()) == {1, 3, 5, 7}  # odd ranks are tree 1's leaves
    assert set(p2[p2 >= 0].tolist()) == {1, 3, 5, 7}  # and tree 2's inner ranks


def test_tree_all_reduce_sends_half_the_buffer_per_tree_edge_each_way():
    ph = group_phases("all_reduce", 2.0, range(8), "tree")
    assert ph[0].flows == 2 * 2 * 7  # 2 trees x 7 edges x up and down
    assert np.allclose(ph[0].size, 1.0)


def test_hierarchical_all_reduce_steps():
    # 2 nodes x 4 GPUs, S = 8: RS inside nodes (3 steps of 2), AR across nodes of 8/4 = 2 bytes
    # over 2 nodes (2 steps of 1), AG inside nodes (3 steps of 2)
    ph = group_phases("all_reduce", 8.0, range(8), "hierarchical", ranks_per_node=4)
    assert [(p.repeat, float(p.size[0]), p.flows) for p in ph] == [(3, 2.0, 8), (2, 1.0, 8), (3, 2.0, 8)]


def test_lockstep_groups_merge_and_must_match():
    ph = collective_phases("all_reduce", 4.0, [[0, 1], [2, 3]], keys=[0, 1])
    assert ph[0].flows == 4 and set(ph[0].key.tolist()) == {0, 1}
    with pytest.raises(ConfigError, match="equal size"):
        collective_phases("all_reduce", 4.0, [[0, 1], [2, 3, 4]])
    with pytest.raises(ConfigError, match="disjoint"):
        collective_phases("all_reduce", 4.0, [[0, 1], [1, 2]])
    assert group_phases("all_reduce", 4.0, [3]) == []  # one rank: nothing to send

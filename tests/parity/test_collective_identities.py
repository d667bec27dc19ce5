"""Identities and invariants of the collective cost models, and the lecture's table (seeds/004)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.collectives import (
    Algorithm,
    Hierarchy,
    LinkCost,
    Op,
    applicable_algorithms,
    collective_cost,
)

sizes = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
ranks = st.integers(min_value=1, max_value=4096)
bandwidths = st.floats(min_value=1e6, max_value=1e13)
latencies = st.floats(min_value=0, max_value=1e-3)
links = st.builds(lambda b, a: LinkCost(bandwidth=b, latency=a), bandwidths, latencies)
rel = {"rel": 1e-9, "abs": 1e-15}


@st.composite
def hierarchies(draw):
    g = draw(st.integers(min_value=1, max_value=16))
    return Hierarchy(ranks_per_node=g, intra=draw(links), inter=draw(links))


@st.composite
def two_level_cases(draw):
    net = draw(hierarchies())
    n = net.ranks_per_node * draw(st.integers(min_value=1, max_value=256))
    if draw(st.booleans()):
        n = draw(st.integers(min_value=1, max_value=net.ranks_per_node))  # all inside one node
    return net, n


def _time(op, algorithm, size, n, net):
    return collective_cost(op, algorithm, size, n, net).time


# ---------------------------------------------------------------- composition identities


@given(sizes, ranks, links)
def test_ring_all_reduce_is_reduce_scatter_plus_all_gather(size, n, link):
    ar = _time("all_reduce", "ring", size, n, link)
    assert ar == pytest.approx(_time("reduce_scatter", "ring", size, n, link) + _time("all_gather", "ring", size, n, link), **rel)


@given(sizes, two_level_cases())
def test_two_level_all_reduce_is_reduce_scatter_plus_all_gather(size, case):
    net, n = case
    for algorithm in ("ring", "hierarchical"):
        ar = _time("all_reduce", algorithm, size, n, net)
        halves = _time("reduce_scatter", algorithm, size, n, net) + _time("all_gather", algorithm, size, n, net)
        assert ar == pytest.approx(halves, **rel)


@given(ranks.filter(lambda n: n >= 2), bandwidths, st.floats(min_value=1, max_value=1e12))
def test_busbw_of_a_bandwidth_bound_ring_is_the_link_bandwidth(n, bandwidth, size):
    # nccl-tests' busbw factor 2(n-1)/n is exactly the ring's per-rank traffic: busbw = B for any n
    c = collective_cost("all_reduce", "ring", size, n, LinkCost(bandwidth=bandwidth, latency=0.0))
    assert c.busbw == pytest.approx(bandwidth, rel=1e-9)
    for op in ("reduce_scatter", "all_gather"):
        assert collective_cost(op, "ring", size, n, LinkCost(bandwidth=bandwidth)).busbw == pytest.approx(bandwidth, rel=1e-9)


@given(sizes, ranks, links)
def test_one_rank_per_node_is_the_flat_network(size, n, link):
    # With g = 1 and inter == intra, the two-level models are the flat ones: hierarchical is the
    # flat ring, and ring / tree / parameter server / direct agree with their one-level versions.
    net = Hierarchy(ranks_per_node=1, intra=link, inter=link)
    flat_ring = collective_cost("all_reduce", "ring", size, n, link)
    for algorithm in ("hierarchical", "ring"):
        c = collective_cost("all_reduce", algorithm, size, n, net)
        assert c.time == pytest.approx(flat_ring.time, **rel)
        assert c.bytes_sent_per_rank == pytest.approx(flat_ring.bytes_sent_per_rank, **rel)
        assert c.peak_node_bytes_in == pytest.approx(flat_ring.peak_node_bytes_in, **rel)
        assert c.rounds == flat_ring.rounds and c.fan_in == flat_ring.fan_in
    for op in Op:
        for algorithm in applicable_algorithms(op, net):
            if algorithm is Algorithm.HIERARCHICAL:
                continue
            two, one = collective_cost(op, algorithm, size, n, net), collective_cost(op, algorithm, size, n, link)
            for field in ("time", "bytes_sent_per_rank", "peak_node_bytes_in", "peak_node_bytes_out"):
                assert getattr(two, field) == pytest.approx(getattr(one, field), **rel), (op, algorithm, field)


# --------------------------------------------------------------------------- monotonicity


def _all_cases(network):
    return [(op, a) for op in Op for a in applicable_algorithms(op, network)]


@settings(max_examples=60)
@given(sizes, ranks, links, st.floats(min_value=1, max_value=1e3))
def test_more_bandwidth_is_never_slower_on_one_level(size, n, link, factor):
    faster = LinkCost(bandwidth=link.bandwidth * factor, latency=link.latency)
    for op, algorithm in _all_cases(link):
        assert _time(op, algorithm, size, n, faster) <= _time(op, algorithm, size, n, link) * (1 + 1e-12)


@settings(max_examples=60)
@given(sizes, two_level_cases(), st.floats(min_value=1, max_value=1e3), st.sampled_from(["intra", "inter"]))
def test_more_bandwidth_is_never_slower_on_two_levels(size, case, factor, level):
    net, n = case
    link = getattr(net, level)
    better = LinkCost(bandwidth=link.bandwidth * factor, latency=link.latency)
    faster = Hierarchy(ranks_per_node=net.ranks_per_node, **{"intra": net.intra, "inter": net.inter, level: better})
    for op, algorithm in _all_cases(net):
        assert _time(op, algorithm, size, n, faster) <= _time(op, algorithm, size, n, net) * (1 + 1e-12)


@settings(max_examples=60)
@given(sizes, sizes, ranks, links)
def test_cost_is_monotone_in_size(a, b, n, link):
    small, large = min(a, b), max(a, b)
    for op, algorithm in _all_cases(link):
        assert _time(op, algorithm, small, n, link) <= _time(op, algorithm, large, n, link)


@settings(max_examples=60)
@given(sizes, two_level_cases())
def test_two_level_costs_are_finite_and_monotone_in_size(size, case):
    net, n = case
    for op, algorithm in _all_cases(net):
        c = collective_cost(op, algorithm, size, n, net)
        assert np.isfinite(c.time) and c.time >= 0 and np.isfinite(c.busbw)
        assert _time(op, algorithm, size * 2, n, net) >= c.time


@given(sizes, ranks, links)
def test_nothing_beats_the_bandwidth_lower_bound_of_all_reduce(size, n, link):
    # Patarasuk & Yuan 2009: an all-reduce must move at least 2(n-1)/n·S through some rank's link.
    bound = 2 * (n - 1) / n * size / link.bandwidth
    for algorithm in applicable_algorithms(Op.ALL_REDUCE, link):
        assert collective_cost("all_reduce", algorithm, size, n, link).bandwidth_time >= bound * (1 - 1e-12)


# ------------------------------------------------------------------- the lecture's table


def test_lecture_table_rounds_peak_node_bandwidth_and_fan_in():
    """seeds/004, "Allreduce: put it all together" (N the data size, P the processors):

    ====================  ========  ===================  ===============
    algorithm             rounds    peak node bandwidth  per-node fan-in
    ====================  ========  ===================  ===============
    parameter server      O(1)      O(N·P)               O(P)
    decentralized         O(P)      O(N)                 O(1)
    ring                  O(2·P)    O(N/P)               O(1)
    ====================  ========  ===================  ===============

    "Peak node bandwidth" is what one node takes in within one round. Our exact figures: PS 2
    rounds, N·P, fan-in P; naive P-1 rounds, N, fan-in 1; ring 2(P-1) rounds, N/P, fan-in 1.
    """
    N = 97.5e6
    for P in (16, 64, 256, 1024):
        ps, naive, ring = (collective_cost("all_reduce", a, N, P) for a in ("parameter_server", "naive", "ring"))
        assert (ps.rounds, naive.rounds, ring.rounds) == (2, P - 1, 2 * (P - 1))
        assert ps.peak_node_bytes_per_round == pytest.approx(N * P)
        assert naive.peak_node_bytes_per_round == pytest.approx(N)
        assert ring.peak_node_bytes_per_round == pytest.approx(N / P)
        assert (ps.fan_in, naive.fan_in, ring.fan_in) == (P, 1, 1)


def test_lecture_resnet50_example():
    # seeds/004: ResNet-50 gradients 97.5 MB, 256 workers: the parameter server takes in
    # 256 x 97.5 MB = 24.96 GB per iteration and sends as much back. At 3 iterations/s that is
    # 74.9 GB/s each way (the lecture's 73.1 is the same figure in GiB/s), beyond a 50 GB/s NIC.
    c = collective_cost("all_reduce", "parameter_server", 97.5e6, 256)
    assert c.peak_node_bytes_in == pytest.approx(24.96e9) and c.peak_node_bytes_out == pytest.approx(24.96e9)
    assert 3 * c.peak_node_bytes_in == pytest.approx(74.88e9)


# ------------------------------------------------- tree formulas vs the trees themselves


def _nccl_tree_parents(n):
    """child -> parent of NCCL's first tree (src/graph/trees.cc, ncclGetBtree): rank r's parent
    flips its lowest set bit and sets the next one up, or only clears it if that is out of range."""
    parents = {}
    for r in range(1, n):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parents[r] = up if up < n else r ^ bit
    return parents


def _nccl_second_tree(n):
    first = _nccl_tree_parents(n)
    if n % 2:  # odd: shift every rank by one
        return {(c + 1) % n: (p + 1) % n for c, p in first.items()}
    return {n - 1 - c: n - 1 - p for c, p in first.items()}  # even: mirror


def _heap_parents(n):
    return {r: (r - 1) // 2 for r in range(1, n)}


def _depth(parents):
    def hops(r):
        return 0 if r not in parents else 1 + hops(parents[r])

    return max((hops(r) for r in parents), default=0)


def _busiest(trees, share):
    """Bytes (in units of S) into the busiest rank when every tree edge carries ``share`` each way."""
    load, senders = {}, {}
    for parents in trees:
        for c, p in parents.items():
            for a, b in ((c, p), (p, c)):
                load[a] = load.get(a, 0) + share
                senders.setdefault(a, set()).add(b)
    return max(load.values()), max(len(s) for s in senders.values())


@pytest.mark.parametrize("n", range(2, 130))
def test_double_binary_tree_formula_matches_nccls_trees(n):
    # Build both trees, sum S/2 per edge each way (reduce up + broadcast down) per rank.
    trees = (_nccl_tree_parents(n), _nccl_second_tree(n))
    load, fan = _busiest(trees, 0.5)
    c = collective_cost("all_reduce", "double_binary_tree", 1.0, n, LinkCost(bandwidth=1.0, latency=1.0))
    assert c.bandwidth_time == pytest.approx(load)
    assert c.rounds == 2 * max(_depth(t) for t in trees)
    assert fan <= c.fan_in  # the model's fan-in is the bound "two parents and two children"


@pytest.mark.parametrize("n", range(2, 130))
def test_binary_tree_formula_matches_a_heap_tree(n):
    tree = _heap_parents(n)
    load, fan = _busiest([tree], 1.0)
    c = collective_cost("all_reduce", "binary_tree", 1.0, n, LinkCost(bandwidth=1.0, latency=1.0))
    assert c.bandwidth_time == pytest.approx(load) and c.fan_in == fan
    assert c.rounds == 2 * _depth(tree)

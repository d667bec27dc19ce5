"""The simulator's sparse arrays without scipy are scipy's, to the last bit.

The command no longer imports scipy (~0.15 s of its start-up): a route's flows x links matrix
(:meth:`Routes.matrix`), its transpose (:meth:`IncrementalMaxMin.by_link`) and the bytes a step
leaves on each link are built with numpy. The simulation's results stay byte-identical only if
these arrays are exactly the ones ``scipy.sparse`` gave: same order of entries, same sums. Each
test builds both and compares them exactly (``array_equal``, not a tolerance).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from willitscale.fabric.inflight import _bytes_on_links
from willitscale.fabric.maxmin_incremental import IncrementalMaxMin
from willitscale.topology import build_topology, parse_routing
from willitscale.topology.routing import Router, Routes


def _same_csr(ours, theirs) -> None:
    assert ours.shape == theirs.shape
    assert np.array_equal(ours.indptr, theirs.indptr)
    assert np.array_equal(ours.indices, theirs.indices)
    assert np.array_equal(ours.data, theirs.data)


@st.composite
def _entries(draw, max_links=9):
    n_flows = draw(st.integers(1, 8))
    n_links = draw(st.integers(1, max_links))
    size = draw(st.integers(0, 30))
    flow = np.array(draw(st.lists(st.integers(0, n_flows - 1), min_size=size, max_size=size)), dtype=np.int64)
    link = np.array(draw(st.lists(st.integers(0, n_links - 1), min_size=size, max_size=size)), dtype=np.int64)
    frac = np.array(draw(st.lists(st.floats(1e-3, 1.0), min_size=size, max_size=size)))
    return Routes(flow=flow, link=link, frac=frac, latency=np.zeros(n_flows)), n_links


@settings(max_examples=200, deadline=None)
@given(_entries())
def test_route_matrix_is_scipys(drawn):
    """Any entries, repeated (flow, link) pairs included (then scipy sums them, as before)."""
    routes, n_links = drawn
    expected = csr_matrix((routes.frac, (routes.flow, routes.link)), shape=(routes.latency.size, n_links))
    _same_csr(routes.matrix(n_links), expected)


def test_real_routes_are_scipys():
    """ECMP and spray routes of a small fat-tree: the matrices the simulator starts steps with."""
    topo = build_topology("fat-tree", k=4, nodes=4, gpus_per_node=2)
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, topo.gpus, 40), rng.integers(0, topo.gpus, 40)
    keep = src != dst
    for name in ("ecmp", "spray"):
        r = Router(topo).route(src[keep], dst[keep], np.zeros(keep.sum()), parse_routing(name, seed=1), None)
        expected = csr_matrix((r.frac, (r.flow, r.link)), shape=(r.latency.size, topo.links))
        _same_csr(r.matrix(topo.links), expected)


@settings(max_examples=100, deadline=None)
@given(_entries(), st.booleans())
def test_by_link_is_scipys_transpose(drawn, wide):
    """The transpose in scipy's order (rows ascending within a link), also above 2**16 links
    (the two-pass radix sort)."""
    routes, n_links = drawn
    if wide:
        n_links, routes = 70_000, Routes(flow=routes.flow, link=routes.link * 7_777, frac=routes.frac,
                                         latency=routes.latency)
    m = routes.matrix(n_links)
    pool = IncrementalMaxMin(np.ones(n_links))
    pool.append(m)
    expected = csr_matrix((m.data, m.indices, m.indptr), shape=m.shape).tocsc()
    ptr, rows, frac = pool.by_link()
    assert np.array_equal(ptr, expected.indptr)
    assert np.array_equal(rows, expected.indices)
    assert np.array_equal(frac, expected.data)


@settings(max_examples=100, deadline=None)
@given(_entries(), st.integers(0, 2**32))
def test_bytes_on_links_are_scipys_product(drawn, seed):
    routes, n_links = drawn
    m = routes.matrix(n_links)
    total = np.random.default_rng(seed).uniform(1.0, 1e9, m.shape[0])
    expected = csr_matrix((m.data, m.indices, m.indptr), shape=m.shape).T @ total
    assert np.array_equal(_bytes_on_links(m, total, n_links), expected)

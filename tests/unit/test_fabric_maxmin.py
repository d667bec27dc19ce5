"""Max-min fairness: hand-solved cases and the defining properties (hypothesis)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from willitscale.fabric.maxmin import max_min_fair


def _inc(rows, n_links):
    flow, link, frac = [], [], []
    for f, row in enumerate(rows):
        for e, w in row.items():
            flow.append(f)
            link.append(e)
            frac.append(w)
    return csr_matrix((frac, (flow, link)), shape=(len(rows), n_links))


def test_equal_share_on_one_link():
    # 3 flows on a 12 B/s link: 4 each
    r = max_min_fair(_inc([{0: 1}, {0: 1}, {0: 1}], 1), np.array([12.0]))
    assert np.allclose(r, 4.0)


def test_textbook_two_links():
    # link A (1 B/s): f0, f1; link B (2 B/s): f1, f2. A fills first at 0.5 each; f2 then takes
    # what B has left: 2 - 0.5 = 1.5.
    r = max_min_fair(_inc([{0: 1}, {0: 1, 1: 1}, {1: 1}], 2), np.array([1.0, 2.0]))
    assert np.allclose(r, [0.5, 0.5, 1.5])


def test_sprayed_flow_counts_its_fraction():
    # f0 puts half its bytes on each of two 10 B/s links, f1 uses link 0 only.
    # Filling: link 0 carries 0.5 r + r = 10 -> r = 20/3 for both; link 1 has 10 - 10/3 left but
    # f0 is frozen by link 0.
    r = max_min_fair(_inc([{0: 0.5, 1: 0.5}, {0: 1}], 2), np.array([10.0, 10.0]))
    assert np.allclose(r, [20 / 3, 20 / 3])


def test_inactive_flows_get_nothing():
    r = max_min_fair(_inc([{0: 1}, {0: 1}], 1), np.array([10.0]), np.array([True, False]))
    assert np.allclose(r, [10.0, 0.0])


@st.composite
def _problems(draw):
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(1, 8))
    rows = []
    for _ in range(n_flows):
        links = draw(st.sets(st.integers(0, n_links - 1), min_size=1, max_size=n_links))
        rows.append({e: draw(st.sampled_from([1.0, 0.5, 0.25])) for e in links})
    caps = np.array(draw(st.lists(st.floats(0.1, 100.0), min_size=n_links, max_size=n_links)))
    return _inc(rows, n_links), caps


@settings(max_examples=200, deadline=None)
@given(_problems())
def test_feasible_and_every_flow_has_a_bottleneck(problem):
    inc, cap = problem
    rate = max_min_fair(inc, cap)
    load = inc.T @ rate
    assert np.all(load <= cap * (1 + 1e-9))  # no link carries more than its capacity
    assert np.all(rate > 0)
    dense = inc.toarray() > 0
    saturated = load >= cap * (1 - 1e-7)
    for f in range(inc.shape[0]):
        # max-min optimality: some saturated link of f where no flow gets more than f
        ok = [e for e in np.flatnonzero(dense[f]) if saturated[e] and rate[f] >= rate[dense[:, e]].max() * (1 - 1e-9)]
        assert ok, f"flow {f} has no bottleneck"


def test_flow_on_no_link_is_rejected():
    with pytest.raises(ValueError):
        max_min_fair(csr_matrix((1, 1)), np.array([1.0]))


def test_unfrozen_flows_on_links_is_each_such_flow_once_by_either_path():
    # the helper takes a sparse path (few entries) or a dense pass (many); both must give every
    # unfrozen flow that crosses one of the links, once
    from willitscale.fabric.maxmin_reference import _unfrozen_on

    rng = np.random.default_rng(1)
    n_flows, n_links = 400, 30
    inc = csr_matrix((np.ones(1200), (rng.integers(0, n_flows, 1200), rng.integers(0, n_links, 1200))),
                     shape=(n_flows, n_links))
    by_link = inc.T.tocsr()
    dense = inc.toarray() > 0
    unfrozen = rng.random(n_flows) < 0.7
    for links in (np.array([3]), np.arange(n_links)):  # ~40 entries (sparse path), all (dense)
        got = _unfrozen_on(by_link, links, unfrozen, np.empty(n_flows, dtype=np.int64))
        want = np.flatnonzero(dense[:, links].any(axis=1) & unfrozen)
        assert np.array_equal(np.sort(got), want) and np.unique(got).size == got.size

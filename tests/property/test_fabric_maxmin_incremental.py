"""The incremental max-min solver returns the full solve's rates (issue 15, Must 1).

Hypothesis draws flows over links (with sprayed fractions), capacities and a sequence of events,
each starting some flows and finishing others; after every event the incremental rates must be
the reference solver's (today's full re-solve, kept in ``maxmin_reference``) to 1e-9 relative.
The reference counts a link full once less than 1e-9 of its capacity is left, the new solvers
fill exactly: the two agree to that tolerance, not to rounding.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from willitscale.fabric import maxmin_incremental
from willitscale.fabric.maxmin import max_min_fair
from willitscale.fabric.maxmin_incremental import IncrementalMaxMin
from willitscale.fabric.maxmin_reference import max_min_fair as reference

RTOL = 1e-9


def _matrix(rows, n_links):
    flow, link, frac = [], [], []
    for f, row in enumerate(rows):
        for e, w in row.items():
            flow.append(f)
            link.append(e)
            frac.append(w)
    return csr_matrix((frac, (flow, link)), shape=(len(rows), n_links))


@st.composite
def _problems(draw, max_flows=14):
    n_links = draw(st.integers(1, 7))
    n_flows = draw(st.integers(1, max_flows))
    rows = []
    for _ in range(n_flows):
        links = draw(st.sets(st.integers(0, n_links - 1), min_size=1, max_size=min(n_links, 4)))
        rows.append({e: draw(st.sampled_from([1.0, 0.5, 0.25, 1 / 3])) for e in links})
    caps = np.array(draw(st.lists(st.floats(0.1, 100.0), min_size=n_links, max_size=n_links)))
    return _matrix(rows, n_links), caps


@st.composite
def _histories(draw):
    """A problem and events: each event a set of flows to start and a set to finish."""
    inc, caps = draw(_problems())
    n = inc.shape[0]
    active = np.zeros(n, dtype=bool)
    used = np.zeros(n, dtype=bool)  # a flow starts at most once, as in the simulator
    events = []
    for _ in range(draw(st.integers(1, 8))):
        can_start = np.flatnonzero(~used).tolist()
        can_end = np.flatnonzero(active).tolist()
        start = draw(st.lists(st.sampled_from(can_start), unique=True)) if can_start else []
        end = draw(st.lists(st.sampled_from(can_end), unique=True)) if can_end else []
        if not start and not end:
            continue
        used[start] = active[start] = True
        active[end] = False
        events.append((start, end))
    return inc, caps, events


def _close(got, want):
    assert np.allclose(got, want, rtol=RTOL, atol=0), np.max(np.abs(got - want) / np.maximum(want, 1e-300))


def _replay(inc, caps, events):
    solver = IncrementalMaxMin(caps)
    solver.append(inc)
    active = np.zeros(inc.shape[0], dtype=bool)
    for start, end in events:
        before = solver.rate.copy()
        solver.start(np.array(start, dtype=np.int64))
        solver.finish(np.array(end, dtype=np.int64))
        active[start] = True
        active[end] = False
        part, previous = solver.solve()
        _close(solver.rate, reference(inc, caps, active))
        assert np.array_equal(previous, before[part])
        untouched = np.setdiff1d(np.flatnonzero(active), part)
        assert np.array_equal(solver.rate[untouched], before[untouched])  # kept, not re-solved
        assert np.all(solver.rate[~active] == 0)


@settings(max_examples=300, deadline=None)
@given(_problems(max_flows=20))
def test_the_full_solve_is_the_reference_solve(problem):
    inc, caps = problem
    _close(max_min_fair(inc, caps), reference(inc, caps))


@settings(max_examples=300, deadline=None)
@given(_histories())
def test_incremental_rates_are_the_full_solve_after_every_event(history):
    _replay(*history)


@pytest.mark.parametrize("search_rows", [0, 2])
@settings(max_examples=150, deadline=None)
@given(history=_histories())
def test_exact_when_the_search_gives_up_and_every_rising_flow_is_refilled(search_rows, history):
    # the breadth-first search hands over to "re-fill every rising flow" past a size: force it
    with pytest.MonkeyPatch.context() as m:
        m.setattr(maxmin_incremental, "_SEARCH_ROWS", search_rows)
        _replay(*history)


@settings(max_examples=200, deadline=None)
@given(_problems(), st.data())
def test_first_fill_is_where_a_link_of_the_new_flows_fills(problem, data):
    # Fact 1 for starting flows, checked against its definition by bisection: old flows keep
    # their old rates r_i below the level, so link e carries sum_i w_i min(r_i, L) + W_new L;
    # the level is the lowest L at which some link of the new flows reaches its capacity.
    inc, caps = problem
    n = inc.shape[0]
    new = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1))))
    old = np.setdiff1d(np.arange(n), new)
    solver = IncrementalMaxMin(caps)
    solver.append(inc)
    solver.start(old)
    solver.solve()
    got = solver._first_fill(new)
    dense = inc.toarray()
    links = np.flatnonzero(dense[new].sum(axis=0) > 0)

    def overfull(level):
        load = dense[old].T @ np.minimum(solver.rate[old], level) + dense[new].T @ np.full(new.size, level)
        return np.any(load[links] > caps[links])

    lo, hi = 0.0, float((caps[links] / dense[new][:, links].sum(axis=0)).min())  # all new, no old: fills by then
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if overfull(mid) else (mid, hi)
    assert got == pytest.approx(hi, rel=1e-9)


def test_a_finishing_flow_frees_its_share_for_the_flows_it_shared_with():
    # link 0 (10 B/s): f0, f1; link 1 (4 B/s): f1, f2. Filling: link 1 at 2 (f1, f2 frozen), then
    # f0 takes link 0's remaining 10 - 2 = 8. When f2 finishes, f1 is alone on link 1 (4) and
    # shares link 0 with f0: 5 each would put 5 on link 1, so link 1 fills at 4; f0 gets 6.
    inc = _matrix([{0: 1}, {0: 1, 1: 1}, {1: 1}], 2)
    s = IncrementalMaxMin(np.array([10.0, 4.0]))
    s.append(inc)
    s.start(np.array([0, 1, 2]))
    s.solve()
    assert np.allclose(s.rate, [8, 2, 2])
    s.finish(np.array([2]))
    part, _ = s.solve()
    assert np.allclose(s.rate, [6, 4, 0])
    assert set(part.tolist()) == {0, 1}  # f2 froze at 2: every flow at or above it may change


def test_keep_renumbers_rows_and_keeps_their_rates():
    inc = _matrix([{0: 1}, {0: 1}, {1: 1}], 2)
    s = IncrementalMaxMin(np.array([10.0, 6.0]))
    s.append(inc)
    s.start(np.array([0, 1, 2]))
    s.solve()
    s.finish(np.array([0]))
    s.solve()
    s.keep(np.array([1, 2]))
    assert np.allclose(s.rate, [10, 6]) and s.flows == 2
    s.append(_matrix([{1: 1}], 2))
    s.start(np.array([2]))
    s.solve()
    assert np.allclose(s.rate, [10, 3, 3])


def _rates_after_each_event(inc, caps, events):
    solver = IncrementalMaxMin(caps)
    solver.append(inc)
    out = []
    for start, end in events:
        solver.start(np.array(start, dtype=np.int64))
        solver.finish(np.array(end, dtype=np.int64))
        part, _ = solver.solve()
        out.append((solver.rate.copy(), part.copy()))
    return out


@settings(max_examples=300, deadline=None)
@given(_histories())
def test_the_first_step_shortcut_is_bit_identical_to_the_search(history):
    # When only starting flows are active (a first step), solve skips the first-fill level, the
    # search (_found_alone orders the rows as the search would) and the frozen load (all 0).
    # With the shortcut disabled (as if another flow were active) every rate and every re-solved
    # row's order must be the same, bit for bit: the re-fill's sums run in that order.
    fast = _rates_after_each_event(*history)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(maxmin_incremental, "_others_active", lambda active, rows: True)
        slow = _rates_after_each_event(*history)
    for (rate_a, part_a), (rate_b, part_b) in zip(fast, slow):
        assert np.array_equal(rate_a, rate_b)
        assert np.array_equal(part_a, part_b)


@settings(max_examples=200, deadline=None)
@given(_problems(max_flows=20), st.data())
def test_found_alone_is_the_search_order(problem, data):
    inc, caps = problem
    n = inc.shape[0]
    new = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1))))
    solver = IncrementalMaxMin(caps)
    solver.append(inc)
    solver.start(new)
    links = solver.indices[np.concatenate([np.arange(solver.indptr[r], solver.indptr[r + 1]) for r in new])]
    # the seeds: the new rows' links, then (as if some flows had finished) any links
    extra = np.array(data.draw(st.lists(st.integers(0, caps.size - 1), max_size=4)), dtype=np.int64)
    seeds = np.concatenate((links, extra))
    assert np.array_equal(solver._found_alone(new, seeds), solver._touched(np.inf, new, seeds))

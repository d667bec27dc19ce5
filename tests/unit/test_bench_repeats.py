"""Repeated runs: median/min/max per point and the runs that deviate."""

from __future__ import annotations

import pytest

from willitscale.collectives.ops import Op
from willitscale.results.records import CollectiveRow
from willitscale.results.repeats import compare_runs


def _rows(time_s: float):
    return [CollectiveRow(op=Op.ALL_REDUCE, size_bytes=size, count=size // 4, dtype="float32",
                          redop="sum", root=-1, in_place=False, ranks=2, time=time_s * size / 1e6,
                          wrong=0).to_json() for size in (1_000_000, 2_000_000)]


def test_a_slow_run_is_flagged():
    # busbw of 2 ranks = S / t: 1 MB per 0.04 s = 25 MB/s for runs 1, 2, 4; run 3 at 0.05 s/MB
    # = 20 MB/s is 20% below the median (25 MB/s) -> flagged at a 10% threshold
    runs = [(1, "t1", _rows(0.04)), (2, "t2", _rows(0.04)), (3, "t3", _rows(0.05)), (4, "t4", _rows(0.04))]
    points, deviations = compare_runs("collectives", runs)
    assert len(points) == 2
    p = points[0]
    assert (p.runs, p.median, p.min, p.max) == (4, pytest.approx(0.025), pytest.approx(0.02), pytest.approx(0.025))
    assert p.spread == pytest.approx(0.2)
    flagged = {d.run_id: d for d in deviations}
    assert flagged[3].flagged and flagged[3].deviation == pytest.approx(-0.2)
    assert not any(flagged[i].flagged for i in (1, 2, 4))


def test_two_runs_are_never_flagged():
    _, deviations = compare_runs("collectives", [(1, "a", _rows(0.04)), (2, "b", _rows(0.08))])
    assert not any(d.flagged for d in deviations)

"""Repeated runs of one setup: the spread of each measurement and the runs that deviate (pure).

A shared network is slower at some hours than at others (000_7d6d1081ea6fefb3.txt, "Shared
internode network"), so one run proves little. Runs are comparable when they measured the
same thing on the same setup (:func:`setup_signature`); for each measured point (a collective
size, a matmul shape, a training config) we keep the median, min and max over runs, and for
each run the median of its points' ratios to those medians. A run whose ratio is off by more
than ``threshold`` (10% by default) is flagged -- from three runs on: with two, the median is
their mean and neither can be singled out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from willitscale.results.records import row_from_json

__all__ = ["setup_signature", "metric_of", "PointStats", "RunDeviation", "compare_runs",
           "DEFAULT_THRESHOLD"]

DEFAULT_THRESHOLD = 0.10
MIN_RUNS_TO_FLAG = 3

#: per benchmark kind: (metric name with unit, function of a typed row, higher is better)
METRICS = {
    "collectives": ("busbw_GBps", lambda r: r.busbw / 1e9, True),
    "matmul": ("achieved_TFLOPS", lambda r: r.flop_rate / 1e12, True),
    "train": ("step_s", lambda r: r.step, False),
    # a backend that did not run a shape has no rate: that point is left out
    "attention": ("achieved_TFLOPS", lambda r: None if r.flop_rate is None else r.flop_rate / 1e12, True),
    "bandwidth": ("achieved_GBps", lambda r: r.bandwidth / 1e9, True),
}


def metric_of(kind: str) -> tuple[str, Any, bool]:
    return METRICS[kind]


def setup_signature(kind: str, environment: Mapping[str, Any]) -> tuple:
    """What two runs must share to be repeats: kind, ranks, nodes, backend, devices, emulation."""
    emulated = environment.get("emulated") or {}
    return (kind, environment.get("world_size"), environment.get("nodes"),
            environment.get("backend"), tuple(environment.get("devices") or ()),
            emulated.get("uplink_Bps"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PointStats:
    """One measured point over the runs that measured it."""

    key: tuple
    runs: int
    median: float
    min: float
    max: float

    @property
    def spread(self) -> float:
        """(max - min) / median."""
        return (self.max - self.min) / self.median if self.median else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDeviation:
    """How one run compares with the median of all runs, point by point."""

    run_id: int
    started_at: str
    deviation: float  #: median over its points of value / point median - 1
    flagged: bool


def compare_runs(kind: str, runs: Sequence[tuple[int, str, Sequence[Mapping[str, Any]]]],
                 *, threshold: float = DEFAULT_THRESHOLD) -> tuple[list[PointStats], list[RunDeviation]]:
    """``runs``: (run id, started_at, stored rows) of one setup, any order."""
    _, value_of, _ = METRICS[kind]
    values: dict[tuple, dict[int, float]] = {}
    for run_id, _, rows in runs:
        for data in rows:
            row = row_from_json(kind, data)
            value = value_of(row)
            if value is not None:
                values.setdefault(row.key, {})[run_id] = value
    points = [PointStats(key=key, runs=len(v), median=statistics.median(v.values()),
                         min=min(v.values()), max=max(v.values())) for key, v in values.items()]
    medians = {p.key: p.median for p in points}
    deviations = []
    for run_id, started, _ in sorted(runs, key=lambda r: (r[1], r[0])):
        ratios = [v[run_id] / medians[k] - 1 for k, v in values.items()
                  if run_id in v and medians[k]]
        dev = statistics.median(ratios) if ratios else 0.0
        deviations.append(RunDeviation(run_id=run_id, started_at=started, deviation=dev,
                                       flagged=len(runs) >= MIN_RUNS_TO_FLAG and abs(dev) > threshold))
    return points, deviations

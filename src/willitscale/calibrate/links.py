"""Fit each link level's latency (alpha) and bandwidth (beta = 1 / bandwidth) to collective sweeps.

For a flat level the algorithm's time is linear in the two unknowns,

    t(S) = a(S, n) * alpha + w(S, n) * beta

where ``a`` counts the latency terms and ``w`` the bytes on the critical path (both read off
the cost model: ``w`` is its time at 1 byte/s and no latency, ``a`` the extra time when alpha is
1 s). We fit on **relative** residuals ``t_model / t_measured - 1``, so a 1 kB point and a 1 GB
point weigh the same, with a soft-L1 loss, so the few points where a library switches
protocol (small messages) or a shared network hiccups pull less than a squared loss lets them.
``alpha, beta >= 0``. The linear least-squares solution starts the robust fit.

Several nodes of several ranks (two levels) are fitted for the inter-node link with the
intra-node figures held at their own fit (from single-node runs in the same calibration).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from willitscale.calibrate.forms import default_algorithm, flat_time, two_level_time
from willitscale.calibrate.runs import MeasuredRun
from willitscale.collectives.ops import Op
from willitscale.errors import BenchmarkError
from willitscale.hardware.calibration import LinkCalibration

__all__ = ["Fit", "fit_flat", "fit_two_level", "link_calibrations", "SOFT_L1_SCALE"]

#: relative residual beyond which the soft-L1 loss grows linearly instead of quadratically
SOFT_L1_SCALE = 0.05


@dataclass(frozen=True, slots=True)
class Fit:
    latency: float  #: alpha, seconds
    bandwidth: float  #: 1 / beta, bytes/s
    rms_error: float  #: relative, over the points
    points: int


def _robust(residuals: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lower, upper) -> np.ndarray:
    from scipy.optimize import least_squares

    x0 = np.clip(x0, lower, upper)
    result = least_squares(residuals, x0, bounds=(lower, upper), loss="soft_l1",
                           f_scale=SOFT_L1_SCALE, x_scale="jac")
    return result.x


def fit_flat(op: Op, sizes, ranks, times, *, algorithm: str | None = None) -> Fit:
    """Fit alpha and bandwidth of one flat level to measured ``times`` of ``op``."""
    algorithm = algorithm or default_algorithm(op)
    S, n, t = (np.asarray(v, dtype=float) for v in (sizes, ranks, times))
    w = flat_time(op, algorithm, S, n, bandwidth=1.0, latency=0.0)  # bytes on the critical path
    a = flat_time(op, algorithm, S, n, bandwidth=1.0, latency=1.0) - w  # latency terms
    if np.any(t <= 0) or np.all(w == 0):
        raise BenchmarkError("cannot fit a link to these points (no time or no bytes)")
    A = np.column_stack([a, w]) / t[:, None]
    if len(np.unique(S)) < 2:  # one size: alpha and beta cannot be told apart; all bandwidth
        A = A[:, 1:]
    from scipy.optimize import lsq_linear

    x0 = lsq_linear(A, np.ones_like(t), bounds=(0, np.inf)).x
    x = _robust(lambda x: A @ x - 1.0, x0, 0.0, np.inf)
    alpha, beta = (0.0, x[0]) if A.shape[1] == 1 else (x[0], x[1])
    alpha = alpha if alpha * a.max() > 1e-9 * t.min() else 0.0  # solver dust, not a latency
    largest = int(np.argmax(w))
    if beta * w[largest] < 0.01 * t[largest]:  # bytes explain < 1% of even the largest point
        raise BenchmarkError("the fit found no bandwidth term: the sizes are all latency-bound; "
                             "sweep up to larger messages (e.g. -e 64MB)")
    rms = float(np.sqrt(np.mean((A @ x - 1.0) ** 2)))
    return Fit(latency=float(alpha), bandwidth=float(1.0 / beta), rms_error=rms, points=len(t))


def fit_two_level(op: Op, sizes, ranks, times, *, ranks_per_node: int, intra: Fit,
                  algorithm: str | None = None) -> Fit:
    """Fit the inter-node level of two-level runs, the intra-node level given."""
    algorithm = algorithm or default_algorithm(op)
    S, n, t = (np.asarray(v, dtype=float) for v in (sizes, ranks, times))

    def model(x):
        return two_level_time(op, algorithm, S, n, ranks_per_node=ranks_per_node,
                              intra=(intra.bandwidth, intra.latency),
                              inter=(float(np.exp(x[1])), float(np.exp(x[0]))))

    # start: no latency, the bandwidth the largest point implies
    x0 = np.array([np.log(1e-6), np.log(S.max() / t[S.argmax()])])
    lower, upper = np.array([np.log(1e-9), np.log(1.0)]), np.array([np.log(1.0), np.log(1e15)])
    x = _robust(lambda x: model(x) / t - 1.0, x0, lower, upper)
    rms = float(np.sqrt(np.mean((model(x) / t - 1.0) ** 2)))
    return Fit(latency=float(np.exp(x[0])), bandwidth=float(np.exp(x[1])), rms_error=rms, points=len(t))


def _op_to_fit(runs: Sequence[MeasuredRun], wanted: str | None) -> Op | None:
    ops = [row.op for run in runs for row in run.rows if row.wrong == 0]
    if wanted:
        return Op(wanted) if Op(wanted) in ops else None
    if Op.ALL_REDUCE in ops:  # what DDP issues
        return Op.ALL_REDUCE
    return max(set(ops), key=ops.count) if ops else None


def _points(runs: Sequence[MeasuredRun], op: Op):
    rows = [(row.size_bytes, row.ranks, row.time) for run in runs for row in run.rows
            if row.op is op and row.wrong == 0]
    return tuple(np.array(v, dtype=float) for v in zip(*rows, strict=True))


def _calibration(level: str, fit: Fit, runs: Sequence[MeasuredRun], op: Op) -> LinkCalibration:
    uplinks = {run.uplink for run in runs}
    nominal = uplinks.pop() if level == "inter_node" and len(uplinks) == 1 else None
    nics = {run.nics for run in runs}
    return LinkCalibration(
        level=level, bandwidth=fit.bandwidth, latency=fit.latency, backend=runs[0].backend,
        op=op.value, algorithm=default_algorithm(op), ranks=max(r.ranks for r in runs),
        ranks_per_node=max(r.ranks_per_node for r in runs), nominal_bandwidth=nominal,
        device="/".join(sorted({d for r in runs for d in r.devices})),
        nics_per_node=nics.pop() if len(nics) == 1 else None,
        points=fit.points, rms_error=fit.rms_error, runs=tuple(sorted(r.id for r in runs)))


def link_calibrations(runs: Sequence[MeasuredRun], *, op: str | None = None
                      ) -> tuple[list[LinkCalibration], list[str]]:
    """One :class:`LinkCalibration` per level the collective ``runs`` measured, and notes on
    what could not be fitted."""
    notes: list[str] = []
    by_level: dict[str, list[MeasuredRun]] = {}
    for run in runs:
        if run.kind == "collectives":
            by_level.setdefault(run.level, []).append(run)
    links: dict[str, LinkCalibration] = {}
    intra_fit = None
    for level in ("intra_node", "inter_node", "two_level"):
        group = by_level.get(level, [])
        if not group:
            continue
        if len({r.backend for r in group}) > 1:
            notes.append(f"{level}: runs of several backends; calibrate them separately")
            continue
        chosen = _op_to_fit(group, op)
        if chosen is None:
            notes.append(f"{level}: no correct {op or 'collective'} rows to fit")
            continue
        sizes, ranks, times = _points(group, chosen)
        if level == "two_level":
            if "inter_node" in links:
                notes.append("two-level runs not fitted: the one-rank-per-node runs set inter_node")
                continue
            if intra_fit is None:
                notes.append("two-level runs need an intra-node fit too: add a single-node run")
                continue
            fit = fit_two_level(chosen, sizes, ranks, times, ranks_per_node=group[0].ranks_per_node,
                                intra=intra_fit)
            links["inter_node"] = _calibration("inter_node", fit, group, chosen)
            continue
        fit = fit_flat(chosen, sizes, ranks, times)
        if level == "intra_node":
            intra_fit = fit
        links[level] = _calibration(level, fit, group, chosen)
    return list(links.values()), notes

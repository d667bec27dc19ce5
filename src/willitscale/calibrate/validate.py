"""``validate``: each measured row next to what a calibration predicts for it, and the error.

* A collective row is predicted by the calibration's ``[[collective]]`` entry of the same
  library, op, (algorithm, protocol) the run ran (:func:`~.collective_curves.measured_pair`:
  Gloo's one algorithm, NCCL's forced pair, NCCL's point-to-point sends) and geometry (nodes x
  ranks per node), when it has one: ``latency + size / algbw``. Otherwise with the alpha-beta
  form of its op (ring or direct) on the link level(s) its run crossed, using the calibration's
  ``[[link]]`` figures for them. The row names the algorithm and which of the two predicted it
  (``predicted_by``; ``Gloo ring``: Gloo runs nothing else).
* A training row is predicted by the estimate (:func:`willitscale.estimation.estimate.estimate`) for
  the same model, batch, ranks and nodes, given the calibration (see :mod:`.scenario`), with the
  run's collective library: a Gloo run's gradient all-reduce is Gloo's ring; the row names it.

A row is *in-sample* when it was one of the points the calibration was fitted to (its run is
among the fitted runs and, for collectives, it is of the fitted op); everything else is a real
test of the model. A run -- a sweep or a training step -- is predictable only on the setup it
was calibrated on: same backend, and for runs across nodes of an emulated cluster, the same
shaped uplink (a training run measured at another uplink is skipped with that reason, not
reported as an out-of-sample error).
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from willitscale.calibrate.collective_curves import measured_pair
from willitscale.calibrate.forms import (
    default_algorithm,
    flat_time,
    library_algorithm,
    two_level_time,
)
from willitscale.calibrate.runs import MeasuredRun
from willitscale.calibrate.scenario import predict_train_memory, train_step_estimate
from willitscale.hardware.calibration import Calibration, LinkCalibration

__all__ = ["Comparison", "Skipped", "compare", "collective_links", "collective_entry", "entry_algorithm"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One measured row and its prediction."""

    run_id: int
    kind: str
    point: str  #: what was measured, in words
    measured: float  #: seconds
    predicted: float  #: seconds
    in_sample: bool
    details: dict = field(default_factory=dict)  #: op, size_bytes, model, nodes, ...

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted - self.measured) / self.measured

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "kind": self.kind, "point": self.point, **self.details,
                "measured_s": self.measured, "predicted_s": self.predicted,
                "error": self.error, "error_pct": 100 * self.error, "in_sample": self.in_sample}


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    run_id: int
    kind: str
    reason: str

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "kind": self.kind, "reason": self.reason}


def _usable(link: LinkCalibration | None, run: MeasuredRun, level: str) -> str | None:
    """Why ``link`` cannot predict ``run``'s traffic on ``level`` (None if it can)."""
    if link is None:
        return f"the calibration has no {level} fit"
    if link.backend and link.backend != run.backend:
        return f"the {level} fit is for {link.backend}, the run used {run.backend}"
    if level == "inter_node" and not same_uplink(link.nominal_bandwidth, run.uplink):
        return "the run's emulated uplink differs from the calibrated one"
    return None


def collective_links(run: MeasuredRun, cal: Calibration) -> tuple[dict, str | None]:
    """The link figures ``run`` needs, as ``{level: LinkCalibration}``, or why it cannot have them."""
    levels = {"intra_node": ["intra_node"], "inter_node": ["inter_node"],
              "two_level": ["intra_node", "inter_node"]}[run.level]
    links = {}
    for level in levels:
        reason = _usable(cal.link(level), run, level)
        if reason:
            return {}, reason
        links[level] = cal.link(level)
    return links, None


def _collective_time(row, run: MeasuredRun, links: dict) -> float:
    algorithm = default_algorithm(row.op)
    if run.level == "two_level":
        intra, inter = links["intra_node"], links["inter_node"]
        t = two_level_time(row.op, algorithm, row.size_bytes, row.ranks,
                           ranks_per_node=run.ranks_per_node,
                           intra=(intra.bandwidth, intra.latency), inter=(inter.bandwidth, inter.latency))
    else:
        (link,) = links.values()
        t = flat_time(row.op, algorithm, row.size_bytes, row.ranks, bandwidth=link.bandwidth,
                      latency=link.latency)
    return float(np.asarray(t))


def _uplink_differs(run: MeasuredRun, cal: Calibration) -> bool:
    """Whether ``run`` crossed another network than the calibration's runs did (an emulated
    uplink shaped to another rate; ``calibrate`` fits one network per file)."""
    if run.nodes == 1:
        return False
    inter = cal.link("inter_node")
    return not same_uplink(inter.nominal_bandwidth if inter is not None else None, run.uplink)


def same_uplink(calibrated, run) -> bool:
    """Whether a calibration's emulated uplink rate (bytes/s, None: not emulated) is the run's.
    The rate is written in GB/s and read back, so the two are compared to rounding, not bit for
    bit (67 Mbit/s does not read back exactly)."""
    if not calibrated or not run:
        return not calibrated and not run
    return math.isclose(calibrated, run, rel_tol=1e-9)


def collective_entry(op, run: MeasuredRun, cal: Calibration):
    """The calibration's ``[[collective]]`` entry that predicts ``run``'s ``op`` rows (same
    library, op, pair and geometry, same network), or None."""
    pair = measured_pair(run, op)
    if isinstance(pair, str) or _uplink_differs(run, cal):
        return None
    want = (run.backend, op.value, pair[0].lower(), pair[1].lower(), run.nodes, run.ranks_per_node)
    return next((c for c in cal.section("collective") if c.key == want), None)


def entry_algorithm(curve) -> str:
    """An entry's pair named with its library: "NCCL Ring/Simple", "Gloo ring"."""
    library = {"gloo": "Gloo", "nccl": "NCCL"}.get(curve.backend, curve.backend)
    return f"{library} {curve.pair}"


def _entry_comparison(row, run: MeasuredRun, curve) -> Comparison:
    algorithm = entry_algorithm(curve)
    return Comparison(
        run_id=run.id, kind=run.kind,
        point=f"{row.op.value} {row.size_bytes:,} B x {row.ranks} ranks"
              + (" in-place" if row.in_place else "") + f" ({algorithm}, [[collective]] entry)",
        measured=row.time, predicted=float(curve.time(float(row.size_bytes))),
        in_sample=run.id in curve.runs,
        details={"op": row.op.value, "size_bytes": row.size_bytes, "ranks": row.ranks,
                 "nodes": run.nodes, "algorithm": algorithm,
                 "predicted_by": f"[[collective]] {curve.backend} {curve.op} {curve.pair} on "
                                 f"{curve.nodes} x {curve.ranks_per_node} (runs "
                                 f"{', '.join(map(str, curve.runs)) or '?'})",
                 "fitted": "[[collective]] entry" if run.id in curve.runs else None})


def _compare_collectives(run: MeasuredRun, cal: Calibration):
    links, reason = collective_links(run, cal)
    out = []
    for row in run.rows:
        if row.wrong:
            continue
        curve = collective_entry(row.op, run, cal)
        if curve is not None:
            out.append(_entry_comparison(row, run, curve))
            continue
        if reason:
            continue
        fitted = [link for link in links.values() if run.id in link.runs and link.op == row.op.value]
        algorithm = library_algorithm(run.backend, row.op)
        out.append(Comparison(
            run_id=run.id, kind=run.kind,
            point=f"{row.op.value} {row.size_bytes:,} B x {row.ranks} ranks"
                  + (" in-place" if row.in_place else "") + f" ({algorithm}, [[link]] fits)",
            measured=row.time, predicted=_collective_time(row, run, links),
            in_sample=bool(fitted),
            details={"op": row.op.value, "size_bytes": row.size_bytes, "ranks": row.ranks,
                     "nodes": run.nodes, "algorithm": algorithm,
                     "predicted_by": "[[link]] " + " + ".join(links),
                     "fitted": ", ".join(f"{link.level} link" for link in fitted) or None}))
    left = sorted({r.op.value for r in run.rows if not r.wrong} - {c.details["op"] for c in out})
    if reason and left:
        out.append(Skipped(run_id=run.id, kind=run.kind, reason=(
            f"{', '.join(left)}: no [[collective]] entry for this run's pair and geometry, and "
            f"{reason}")))
    return out


def _compare_train(run: MeasuredRun, cal: Calibration):
    if run.ranks > 1:  # its gradients cross the same links a sweep would: same checks
        _, reason = collective_links(run, cal)
        if reason:
            return Skipped(run_id=run.id, kind=run.kind, reason=reason)
    out = []
    for row in run.rows:
        est, reason = train_step_estimate(row, run, cal)
        if est is None:
            return Skipped(run_id=run.id, kind=run.kind, reason=reason)
        algorithm = _allreduce_name(est)
        out.append(Comparison(
            run_id=run.id, kind=run.kind,
            point=f"{row.model} step, {run.nodes} node(s) x {run.ranks_per_node} rank(s)"
                  + (f" (all-reduce: {algorithm})" if algorithm else ""),
            measured=row.step, predicted=float(est.step_time), in_sample=run.id in cal.runs,
            details={"model": row.model, "nodes": run.nodes, "ranks_per_node": run.ranks_per_node,
                     "allreduce_algorithm": algorithm,
                     "batch_per_rank": row.batch_per_rank, "seq_len": row.seq_len,
                     **_memory_details(row, run, cal),
                     # its forward/backward times set the compute efficiency; its communication
                     # is predicted from the collective fits either way
                     "fitted": "compute" if run.id in cal.runs else None}))
    return out


def _allreduce_name(est) -> str:
    """The gradient all-reduce's algorithm as the estimate names it ("" with one rank)."""
    for op in est.comm_ops:
        if op.op == "all_reduce" and op.ranks > 1:
            return op.algorithm.split(" (")[0]
    return ""


def _memory_details(row, run: MeasuredRun, cal: Calibration) -> dict:
    """The measured peak memory next to the estimate's (CUDA runs only: PyTorch counts no
    peak on the CPU, and the benchmark records None there)."""
    if row.peak_allocated_bytes is None:
        return {}
    predicted = predict_train_memory(row, run, cal)
    if predicted is None:
        return {}
    measured = float(row.peak_allocated_bytes)
    return {"peak_allocated_bytes": measured, "peak_reserved_bytes": row.peak_reserved_bytes,
            "predicted_allocated_bytes": predicted,
            "memory_error": (predicted - measured) / measured}


def compare(runs: Sequence[MeasuredRun], cal: Calibration) -> tuple[list[Comparison], list[Skipped]]:
    """Predicted vs measured for every row of ``runs`` the calibration can predict."""
    rows: list[Comparison] = []
    skipped: list[Skipped] = []
    for run in runs:
        if run.kind == "collectives":
            result = _compare_collectives(run, cal)
        elif run.kind == "train":
            result = _compare_train(run, cal)
        else:
            result = Skipped(run_id=run.id, kind=run.kind,
                             reason="matmul runs calibrate the peak; nothing to predict")
        for item in [result] if isinstance(result, Skipped) else result:
            (skipped if isinstance(item, Skipped) else rows).append(item)
    return rows, skipped

"""A traced step per op kind beside what the model predicts for it (``validate`` on a run that
``trace import`` stored).

Measured, per step (the mean over the trace's steps): the compute self-time of each kind the
trace importer classifies (:data:`~willitscale.results.importers.kineto.KINDS`: GEMM,
attention, elementwise, optimizer) and, for each collective op and group size, the summed
duration of the collectives the trace recorded with a size (the run's rows), their count and
bytes.

Predicted:

* compute kinds, from an estimate of the job the trace ran (``validate --job FILE``): GEMM and
  attention from the per-op compute model, ``elementwise`` from its memory-bound ops plus each
  kernel's fixed cost (on a CPU trace the importer's ``elementwise`` also holds the framework's
  own time between ops), ``optimizer`` from the step's optimizer time. Without a job, or with a
  flat efficiency (no per-op split), a compute kind has no prediction: shown as such, never
  guessed.
* collectives, from the calibration: each traced collective's size predicted by the link fit
  (the same per-row predictions ``validate`` lists), summed per op and group size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KindRow", "trace_steps", "trace_source", "kind_rows", "predicted_compute_kinds"]

#: compute kinds of the trace importer, in its order
COMPUTE_KINDS = ("gemm", "attention", "elementwise", "optimizer")


@dataclass(frozen=True, slots=True, kw_only=True)
class KindRow:
    """One op kind of a traced step: measured and predicted seconds per step."""

    kind: str  #: gemm, attention, elementwise, optimizer, or "<op> (<n> ranks)"
    measured: float
    predicted: float | None  #: None: nothing predicts it (see ``source``)
    source: str  #: where the prediction comes from, or why there is none
    calls: float | None = None  #: collectives per step (measured)
    size_bytes: float | None = None  #: their bytes per step (measured)

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured; None without a prediction or a measurement."""
        if self.predicted is None or self.measured <= 0:
            return None
        return (self.predicted - self.measured) / self.measured

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "measured_s": self.measured, "predicted_s": self.predicted,
                "error": self.error, "source": self.source, "calls_per_step": self.calls,
                "size_bytes_per_step": self.size_bytes}


def trace_steps(options: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The traced steps a run stored (``options["trace"]["steps"]``); [] for other runs."""
    trace = options.get("trace") if isinstance(options, Mapping) else None
    steps = trace.get("steps") if isinstance(trace, Mapping) else None
    if not isinstance(steps, (list, tuple)):
        return []
    return [s for s in steps if isinstance(s, Mapping)]


def trace_source(source: str) -> str:
    """The trace a run came from: ``trace import`` stores one run per group size, its source
    ``torch.profiler trace FILE sha256:... group size N``; the part before " group size"."""
    return source.split(" group size", 1)[0]


def predicted_compute_kinds(estimate) -> dict[str, float] | None:
    """Seconds per step by the trace importer's compute kinds, from an estimate's per-op split;
    None when the estimate timed compute with a flat efficiency (no split)."""
    k = estimate.compute_kinds
    if k is None:
        return None
    return {"gemm": k.gemm, "attention": k.attention, "elementwise": k.memory + k.overhead,
            "optimizer": estimate.breakdown.optimizer}


def kind_rows(steps: Sequence[Mapping[str, Any]], comparisons: Iterable,
              predicted: Mapping[str, float] | None, why_none: str) -> list[KindRow]:
    """Per op kind, measured (mean per traced step) beside predicted. ``comparisons`` are
    ``validate``'s rows of this run (each traced collective, measured and predicted);
    ``predicted`` the compute kinds of :func:`predicted_compute_kinds` (None: ``why_none``)."""
    n = len(steps)
    if n == 0:
        return []
    out = []
    for kind in COMPUTE_KINDS:
        measured = sum(float((s.get("compute_s") or {}).get(kind, 0.0)) for s in steps) / n
        value = None if predicted is None else predicted[kind]
        out.append(KindRow(kind=kind, measured=measured, predicted=value,
                           source=why_none if predicted is None else "estimate of the job"))
    groups: dict[tuple[str, int], list] = defaultdict(list)
    for c in comparisons:
        groups[(str(c.details.get("op")), int(c.details.get("ranks") or 0))].append(c)
    for (op, ranks), rows in sorted(groups.items()):
        out.append(KindRow(kind=f"{op} ({ranks} ranks)",
                           measured=sum(r.measured for r in rows) / n,
                           predicted=sum(r.predicted for r in rows) / n,
                           source="calibration at the traced sizes" + (
                               " (in-sample: fitted to these)" if any(r.in_sample for r in rows)
                               else ""),
                           calls=len(rows) / n,
                           size_bytes=sum(float(r.details.get("size_bytes") or 0) for r in rows) / n))
    return out

"""Predicted vs published, row by row and summarised: :func:`row_errors`, :func:`summary`.

A row's error is the relative throughput error of :func:`~willitscale.validation.published.throughput_error`
(positive: we predict faster than published). The summary of a set of rows gives the mean
absolute error, its median, the worst row and the bias (the mean signed error), overall and by
GPU, by parallelism and by dtype (:func:`groups`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from willitscale.validation.published.rows import PublishedRun

__all__ = ["RowError", "Summary", "row_errors", "summary", "groups", "parallelism_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RowError:
    run: PublishedRun
    predicted: float  #: in the row's metric
    error: float  #: relative throughput error
    mfu: float  #: our PaLM-style MFU of the run
    mfu_causal: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    rows: int
    mean_abs: float
    median_abs: float
    worst: float  #: the largest absolute error, signed
    worst_id: str
    bias: float  #: mean signed error

    def to_json(self) -> dict:
        return {"rows": self.rows, "mean_abs_error": self.mean_abs,
                "median_abs_error": self.median_abs, "worst_error": self.worst,
                "worst_row": self.worst_id, "bias": self.bias}


def row_errors(runs: Iterable[PublishedRun], **overrides) -> list[RowError]:
    """Our prediction of every expressible run (not-expressible rows are skipped: list them
    with ``[r for r in runs if not r.expressible]``)."""
    from willitscale.validation.published import predict, throughput_error, value

    out = []
    for run in runs:
        if not run.expressible:
            continue
        est = predict(run, **overrides)
        predicted = value(est, run.metric)
        out.append(RowError(run=run, predicted=predicted,
                            error=throughput_error(run.metric, run.published, predicted),
                            mfu=float(est.mfu), mfu_causal=float(est.mfu_causal)))
    return out


def summary(errors: list[RowError]) -> Summary | None:
    if not errors:
        return None
    e = np.array([r.error for r in errors])
    worst = int(np.argmax(np.abs(e)))
    return Summary(rows=len(e), mean_abs=float(np.mean(np.abs(e))),
                   median_abs=float(np.median(np.abs(e))), worst=float(e[worst]),
                   worst_id=errors[worst].run.id, bias=float(np.mean(e)))


def parallelism_of(run: PublishedRun) -> str:
    """The row's parallelism in a word: FSDP (ZeRO-3), then the model-parallel degrees, else DP."""
    s = run.settings or {}
    parts = [k.upper() for k in ("tp", "pp", "cp") if int(s.get(k, 1)) > 1]
    if s.get("fsdp") or int(s.get("zero", 0)) == 3:
        parts.insert(0, "FSDP")
    return "+".join(parts) or "DP"


def groups(errors: list[RowError]) -> dict[str, dict[str, Summary]]:
    """Summaries by GPU, by parallelism and by dtype."""
    keys = {"gpu": lambda r: r.run.gpu, "parallelism": lambda r: parallelism_of(r.run),
            "dtype": lambda r: r.run.dtype}
    out: dict[str, dict[str, Summary]] = {}
    for name, key in keys.items():
        buckets: dict[str, list[RowError]] = {}
        for r in errors:
            buckets.setdefault(key(r), []).append(r)
        out[name] = {k: summary(v) for k, v in sorted(buckets.items())}
    return out

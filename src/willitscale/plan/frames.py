"""pandas DataFrames of results, for notebooks: pandas is optional (``willitscale[frame]``).

:func:`to_frame` takes a planner result (:class:`~willitscale.plan.search.SearchResult`), a
scaling sweep (the :class:`~willitscale.plan.scaling.ScalingRow` list of
:func:`~willitscale.plan.scaling.scaling_rows`) or estimates (a sequence of
:class:`~willitscale.estimation.result.StepEstimate`); the columns are the keys of the objects'
JSON, with their units in the names (``step_time_s``, ``memory_per_gpu_bytes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from willitscale.errors import ConfigError, MissingDependency

__all__ = ["to_frame", "records_frame"]

#: StepEstimate.to_json keys that hold one number or string (the rest are nested)
_FLAT = ("step_time_s", "compute_s", "comms_s", "exposed_comms_s", "bubble_s", "mfu", "hfu",
         "tokens_per_s", "samples_per_s", "memory_per_gpu_bytes", "tflops_per_gpu", "gpus",
         "nodes", "global_batch", "bottleneck")


def records_frame(records: Iterable[Mapping[str, Any]], purpose: str):
    """A DataFrame of ``records`` (one row each); a clear error when pandas is missing."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependency("pandas", "frame", purpose) from None
    return pd.DataFrame.from_records(list(records))


def to_frame(results: Any, **options: Any):
    """A DataFrame of a planner result, a scaling sweep or estimates (see the module doc)."""
    if hasattr(results, "rows") and hasattr(results, "ranked"):
        return results.to_frame(**options)
    if options:
        raise ConfigError("to_frame options", sorted(options), "none except for a planner result")
    items = list(results) if isinstance(results, Iterable) else None
    if items is None or not all(hasattr(r, "to_json") for r in items):
        raise ConfigError("to_frame", type(results).__name__,
                          "a SearchResult, a list of ScalingRow (scaling_rows) or of StepEstimate")
    rows = [r.to_json() for r in items]
    if items and hasattr(items[0], "timeline"):  # estimates: the flat headline columns
        rows = [{k: r[k] for k in _FLAT} | {"plan": dict(e.plan)} for r, e in zip(rows, items)]
    return records_frame(rows, "to_frame")

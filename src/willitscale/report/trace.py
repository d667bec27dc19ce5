"""A :class:`~willitscale.report.timeline.Timeline` as Chrome trace-event JSON (opens in Perfetto).

Format: the Trace Event Format's "complete" events (``"ph": "X"``) with ``ts`` and ``dur`` in
microseconds, one ``tid`` per lane, named by ``"ph": "M"`` ``thread_name`` metadata events
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU, the format
``chrome://tracing`` and https://ui.perfetto.dev read). The spans are the same objects the
terminal renderer draws, so the two never disagree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from willitscale.errors import ConfigError
from willitscale.estimation.timeline import LANES, Timeline

__all__ = ["chrome_trace", "write_chrome_trace"]

_US = 1e6  # trace timestamps are microseconds


def chrome_trace(timeline: Timeline, *, steps: int = 1, process_name: str = "rank 0") -> dict[str, Any]:
    """The trace-event JSON object for ``steps`` consecutive identical steps."""
    if steps < 1:
        raise ConfigError("steps", steps, "an integer >= 1")
    tid = {lane: i for i, lane in enumerate(LANES)}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": process_name}},
    ]
    for lane, i in tid.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": lane}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": i,
                       "args": {"sort_index": i}})
    for step in range(steps):
        offset = step * timeline.step_time
        for span in timeline.spans:
            events.append({
                "name": span.name, "cat": span.kind, "ph": "X", "pid": 0, "tid": tid[span.lane],
                "ts": (offset + span.start) * _US, "dur": span.duration * _US,
                "args": {"step": step, **dict(span.args)},
            })
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(timeline: Timeline, path: str | Path, *, steps: int = 1) -> Path:
    """Write the trace to ``path`` (open it at https://ui.perfetto.dev); returns the path."""
    path = Path(path)
    if not path.parent.is_dir():  # a typo must not make a directory tree
        raise ConfigError("trace path", str(path), f"a file in an existing directory: directory "
                                                   f"{path.parent} does not exist")
    try:
        path.write_text(json.dumps(chrome_trace(timeline, steps=steps), allow_nan=False))
    except OSError as exc:  # disk full, no permission: name the file
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    return path

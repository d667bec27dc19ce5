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

__all__ = ["chrome_trace", "kineto_trace", "write_chrome_trace", "TRACE_NAMES"]

#: the event vocabularies ``write_chrome_trace`` writes
TRACE_NAMES = ("willitscale", "kineto")
#: words in a communication span's name -> the NCCL kernel name PyTorch's profiler records
_NCCL_KERNELS = (("all-reduce", "AllReduce"), ("reduce-scatter", "ReduceScatter"),
                 ("all-gather", "AllGather"), ("gathers", "AllGather"),
                 ("all-to-all", "AllToAll"), ("send", "SendRecv"))

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


def kineto_trace(timeline: Timeline, *, steps: int = 1, world_size: int = 1) -> dict[str, Any]:
    """The same spans in the vocabulary of a PyTorch profiler (Kineto) trace, so a predicted
    step and a measured one open side by side in Perfetto or Holistic Trace Analysis and
    ``willitscale trace import`` reads both alike: a ``ProfilerStep#N`` annotation per step,
    compute and communication spans as GPU ``kernel`` events on two streams, communication
    named as NCCL's kernels (``ncclDevKernel_AllReduce`` ...) with ``Collective name``, and
    ``distributedInfo``. Idle spans (bubble, waiting) are left out: they are gaps."""
    if steps < 1:
        raise ConfigError("steps", steps, "an integer >= 1")
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "predicted rank 0"}}]
    for step in range(steps):
        offset = step * timeline.step_time
        events.append({"name": f"ProfilerStep#{step}", "cat": "user_annotation", "ph": "X",
                       "pid": 0, "tid": 0, "ts": offset * _US, "dur": timeline.step_time * _US,
                       "args": {}})
        for span in timeline.spans:
            if span.lane == "idle":
                continue
            comm = span.lane == "comms"
            words_of = span.name.lower().replace("_", "-")
            kernel = next((k for words, k in _NCCL_KERNELS if words in words_of), "Generic")
            name = f"ncclDevKernel_{kernel}({span.name})" if comm else span.name
            args = {"step": step, **dict(span.args)}
            if comm and kernel != "Generic":
                args["Collective name"] = kernel.lower()
            events.append({"name": name, "cat": "kernel", "ph": "X", "pid": 0,
                           "tid": 20 if comm else 7, "ts": (offset + span.start) * _US,
                           "dur": span.duration * _US, "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms", "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world_size}}


def write_chrome_trace(timeline: Timeline, path: str | Path, *, steps: int = 1,
                       names: str = "willitscale", world_size: int = 1) -> Path:
    """Write the trace to ``path`` (open it at https://ui.perfetto.dev); returns the path.
    ``names="kineto"`` writes :func:`kineto_trace`'s events."""
    if names not in TRACE_NAMES:
        raise ConfigError("trace names", names, " or ".join(TRACE_NAMES))
    path = Path(path)
    if not path.parent.is_dir():  # a typo must not make a directory tree
        raise ConfigError("trace path", str(path), f"a file in an existing directory: directory "
                                                   f"{path.parent} does not exist")
    try:
        trace = chrome_trace(timeline, steps=steps) if names == "willitscale" else \
            kineto_trace(timeline, steps=steps, world_size=world_size)
        path.write_text(json.dumps(trace, allow_nan=False))
    except OSError as exc:  # disk full, no permission: name the file
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    return path

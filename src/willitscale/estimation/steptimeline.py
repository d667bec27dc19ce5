"""The spans of one data-parallel step, built from the estimate's numbers.

Lanes as in the handbook's diagrams (Bekman's networking chapter): data loading, compute (forward, backward,
optimizer), communication (one span per DDP bucket all-reduce, or per run of identical
buckets), and the idle time compute waits for the last all-reduce. Beyond
:data:`MAX_DRAWN_MICRO_STEPS` micro-steps the earlier ones are one span with
``args["micro_batches"]``. The last backward is drawn
stretched by the overlap slowdown (the compute that ran beside NCCL kernels); the bucket
schedule given is already the one computed on that stretched backward
(:func:`willitscale.step.data.bucket_tail`), so the last all-reduce ends exactly where the
idle span ends.
"""

from __future__ import annotations

import numpy as np

from willitscale.estimation.timeline import Span, Timeline

__all__ = ["build_timeline", "MAX_DRAWN_MICRO_STEPS"]

#: beyond this many accumulation micro-steps the earlier ones are drawn as one span
MAX_DRAWN_MICRO_STEPS = 8


def _compute_spans(fwd: float, bwd: float, steps: int, offset: float, slowdown: float) -> list[Span]:
    spans: list[Span] = []
    t = offset
    if steps > MAX_DRAWN_MICRO_STEPS:
        end = t + (steps - 1) * (fwd + bwd)
        spans.append(Span(lane="compute", kind="backward", name=f"micro-steps 1-{steps - 1}",
                          start=t, end=end, args={"micro_batches": steps - 1,
                                                  "note": "forward + backward, gradients "
                                                          "accumulated, no all-reduce"}))
        t, first = end, steps
    else:
        first = 1
    for k in range(first, steps + 1):
        last = k == steps
        spans.append(Span(lane="compute", kind="forward", name=f"forward {k}", start=t, end=t + fwd))
        stretch = slowdown if last else 0.0
        spans.append(Span(lane="compute", kind="backward", name=f"backward {k}", start=t + fwd,
                          end=t + fwd + bwd + stretch,
                          args={"overlap_slowdown_s": stretch} if last else {}))
        t += fwd + bwd
    return spans


def _bucket_name(i: int, counts) -> str:
    if counts is None:
        return f"all_reduce bucket {i}"
    first = int(sum(counts[:i]))
    n = int(counts[i])
    return f"all_reduce bucket {first}" if n == 1 else f"all_reduce buckets {first}-{first + n - 1}"


def build_timeline(*, micro_forward: float, micro_backward: float, micro_steps: int, data: float,
                   slowdown: float, comm_start, comm_end, bucket_bytes, optimizer: float,
                   step_time: float, link: str = "", counts=None) -> Timeline:
    """The :class:`Timeline` of one step; comm times are relative to the start of compute and
    already account for the stretched last backward. ``counts``: buckets per comm row."""
    spans: list[Span] = []
    if data > 0:
        spans.append(Span(lane="data", kind="data", name="data loading", start=0.0, end=data))
    compute_end = data + micro_steps * (micro_forward + micro_backward)
    spans += _compute_spans(micro_forward, micro_backward, micro_steps, data, slowdown)
    start = np.asarray(comm_start, dtype=float) + data
    end = np.asarray(comm_end, dtype=float) + data
    for i, (s, e, size) in enumerate(zip(start, end, bucket_bytes)):
        args = {"size_bytes": float(size), "link": link}
        if counts is not None and counts[i] > 1:
            args["buckets"] = int(counts[i])
        spans.append(Span(lane="comms", kind="comm", name=_bucket_name(i, counts), start=float(s),
                          end=float(e), args=args))
    waited_from = compute_end + slowdown
    last_comm = float(end.max()) if len(end) else waited_from
    if last_comm > waited_from:
        spans.append(Span(lane="idle", kind="idle", name="waiting for the gradient all-reduce",
                          start=waited_from, end=last_comm))
    opt_start = max(waited_from, last_comm)
    if optimizer > 0:
        spans.append(Span(lane="compute", kind="optimizer", name="optimizer step", start=opt_start,
                          end=opt_start + optimizer))
    return Timeline(spans=spans, step_time=max(step_time, opt_start + optimizer))

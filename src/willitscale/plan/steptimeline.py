"""The spans of one data-parallel step, built from the estimate's numbers.

Lanes as in the handbook's diagrams (seeds/000): data loading, compute (forward, backward,
optimizer), communication (one span per DDP bucket all-reduce), and the idle time compute
waits for the last all-reduce. The overlap slowdown is drawn at the end of the last backward
(it stretches the compute that ran beside NCCL kernels); bucket all-reduces still running then
launched during it are pushed back in proportion to how far backward had run (all of it for
those launched after it), so the exposed all-reduce ends exactly at the idle span's end.
"""

from __future__ import annotations

import numpy as np

from willitscale.report.timeline import Span, Timeline

__all__ = ["build_timeline", "MAX_DRAWN_MICRO_STEPS"]

#: beyond this many accumulation micro-steps the earlier ones are drawn as one span
MAX_DRAWN_MICRO_STEPS = 8


def _compute_spans(fwd: float, bwd: float, steps: int, offset: float, slowdown: float) -> list[Span]:
    spans: list[Span] = []
    t = offset
    if steps > MAX_DRAWN_MICRO_STEPS:
        end = t + (steps - 1) * (fwd + bwd)
        spans.append(Span(lane="compute", kind="backward", name=f"micro-steps 1-{steps - 1}",
                          start=t, end=end, args={"note": "forward + backward, gradients "
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


def build_timeline(*, micro_forward: float, micro_backward: float, micro_steps: int, data: float,
                   slowdown: float, comm_start, comm_end, bucket_bytes, optimizer: float,
                   step_time: float, link: str = "") -> Timeline:
    """The :class:`Timeline` of one step; comm times are relative to the start of compute."""
    spans: list[Span] = []
    if data > 0:
        spans.append(Span(lane="data", kind="data", name="data loading", start=0.0, end=data))
    compute_end = data + micro_steps * (micro_forward + micro_backward)
    spans += _compute_spans(micro_forward, micro_backward, micro_steps, data, slowdown)
    start = np.asarray(comm_start, dtype=float) + data
    end = np.asarray(comm_end, dtype=float) + data
    # The slowdown stretches the last backward evenly, so a bucket launched at a fraction f of it
    # launches f x slowdown later; buckets launched after it ends, the whole slowdown later.
    backward_start = compute_end - micro_backward
    progress = np.clip((start - backward_start) / micro_backward, 0.0, 1.0) if micro_backward > 0 \
        else np.ones_like(start)
    start, end = start + slowdown * progress, end + slowdown * progress
    for i, (s, e, size) in enumerate(zip(start, end, bucket_bytes)):
        spans.append(Span(lane="comms", kind="comm", name=f"all_reduce bucket {i}", start=float(s),
                          end=float(e), args={"size_bytes": float(size), "link": link}))
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

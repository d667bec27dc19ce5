"""The timeline of a model-parallel step on the critical stage's GPU.

Lanes as for data parallelism: compute (each micro-batch's forward and backward, their exposed
tensor/context/expert/pipeline communication drawn on the comms lane at the end of each pass),
idle (the pipeline bubble, half while the pipeline fills and half while it drains: where it
really falls depends on the stage), then the exposed gradient synchronisation, ZeRO's extras and
the optimizer. The spans add up to the step time.
"""

from __future__ import annotations

from willitscale.plan.steptimeline import MAX_DRAWN_MICRO_STEPS
from willitscale.report.timeline import Span, Timeline

__all__ = ["pipeline_timeline"]


def _micro_batches(fwd, fwd_exp, bwd, bwd_exp, m: int, t: float, slowdown: float) -> tuple[list, float]:
    spans: list[Span] = []
    first = 1
    if m > MAX_DRAWN_MICRO_STEPS:
        end = t + (m - 1) * (fwd + fwd_exp + bwd + bwd_exp)
        spans.append(Span(lane="compute", kind="backward", name=f"micro-batches 1-{m - 1}",
                          start=t, end=end, args={"note": "forward + backward with their exposed "
                                                          "communication"}))
        t, first = end, m
    for k in range(first, m + 1):
        spans.append(Span(lane="compute", kind="forward", name=f"forward {k}", start=t, end=t + fwd))
        t += fwd
        if fwd_exp > 0:
            spans.append(Span(lane="comms", kind="comm", name=f"exposed forward comms {k}",
                              start=t, end=t + fwd_exp))
            t += fwd_exp
        stretch = slowdown if k == m else 0.0
        spans.append(Span(lane="compute", kind="backward", name=f"backward {k}", start=t,
                          end=t + bwd + stretch))
        t += bwd + stretch
        if bwd_exp > 0:
            spans.append(Span(lane="comms", kind="comm", name=f"exposed backward comms {k}",
                              start=t, end=t + bwd_exp))
            t += bwd_exp
    return spans, t


def pipeline_timeline(scenario, result, breakdown) -> Timeline:
    crit = int(result.critical[0])
    comp, traffic = result.detail["comp"], result.detail["traffic"]
    fwd, bwd = float(comp[0][0, crit]), float(comp[1][0, crit])
    fwd_exp = float(sum(tr.fwd_exposed[0, crit] for tr in traffic.values()))
    bwd_exp = float(sum(tr.bwd_exposed[0, crit] for tr in traffic.values()))
    m = scenario.plan.grad_accum
    spans: list[Span] = []
    t = 0.0
    if breakdown.data_loading > 0:
        spans.append(Span(lane="data", kind="data", name="data loading", start=0.0,
                          end=breakdown.data_loading))
        t = breakdown.data_loading
    half = breakdown.bubble / 2
    if half > 0:
        spans.append(Span(lane="idle", kind="idle", name="pipeline fill (bubble)", start=t, end=t + half))
        t += half
    drawn, t = _micro_batches(fwd, fwd_exp, bwd, bwd_exp, m, t, breakdown.overlap_slowdown)
    spans += drawn
    if half > 0:
        spans.append(Span(lane="idle", kind="idle", name="pipeline drain (bubble)", start=t, end=t + half))
        t += half
    rest = breakdown.total - t - breakdown.optimizer
    if rest > 1e-15:
        spans.append(Span(lane="comms", kind="comm", name="gradient sync after the last backward "
                          "(exposed)", start=t, end=t + rest))
        spans.append(Span(lane="idle", kind="idle", name="waiting for gradients", start=t, end=t + rest))
        t += rest
    if breakdown.optimizer > 0:
        spans.append(Span(lane="compute", kind="optimizer", name="optimizer step", start=t,
                          end=t + breakdown.optimizer))
        t += breakdown.optimizer
    return Timeline(spans=spans, step_time=max(breakdown.total, t))


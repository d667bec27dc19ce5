"""The timeline of a model-parallel step on the critical stage's GPU.

Lanes as for data parallelism. **Compute**: each micro-batch's forward and backward (the last
backward stretched by the overlap slowdown, ``args["overlap_slowdown_s"]``), the optimizer.
**Comms**: every collective the step issues, hidden or not, so the lane adds up to the
communication the estimate reports:

* per pass, each kind of model-parallel communication (tensor, context, expert, pipeline,
  ZeRO-3): its hidden part from the start of the pass, its exposed part after the pass's compute
  (the compute waits for it);
* the gradient synchronisation: the part hidden under the last backward (ZeRO-2: under every
  backward, it reduce-scatters each micro-batch) ends with that backward; the tied embedding's
  hidden part runs while the pipeline drains; the exposed rest follows the drain;
* ZeRO-1/2's weight all-gather after the optimizer is prefetched under the next forward: drawn
  at the start of the step, its exposed part before the first forward.

Kinds issued on different streams overlap in time, so comm spans may overlap each other.
**Idle**: the pipeline bubble (kind ``bubble``: half while the pipeline fills, half while it
drains; where it really falls depends on the stage) and the waits for exposed gradient
synchronisation and weight gathers. Beyond
:data:`~willitscale.estimation.steptimeline.MAX_DRAWN_MICRO_STEPS` micro-batches the earlier ones'
compute is one span with ``args["micro_batches"]``; their communication is drawn pass by pass.
Compute, idle and the exposed comm spans after each pass add up to the step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.estimation.steptimeline import MAX_DRAWN_MICRO_STEPS
from willitscale.estimation.timeline import Span, Timeline

__all__ = ["pipeline_timeline"]

#: short span names of each kind of communication (the trace viewer's labels)
_LABEL = {"tp": "TP all-reduces", "cp": "CP K/V sends", "ep": "EP all-to-alls",
          "pp": "PP sends", "ppgather": "PP all-gather over TP", "zero3": "ZeRO-3 gathers",
          "dp": "gradient all-reduce", "edp": "expert gradient all-reduce",
          "emb": "tied embedding all-reduce", "zero_ag": "ZeRO weight all-gather"}
#: the gradient synchronisation's names under ZeRO-1/2 (a reduce-scatter)
_ZERO_LABEL = {"dp": "ZeRO gradient reduce-scatter", "edp": "expert gradient reduce-scatter"}


@dataclass(frozen=True, slots=True)
class _Pass:
    """One kind's communication during one forward or backward: seconds hidden and exposed."""

    kind: str
    hidden: float
    exposed: float


def _value(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def _comm(name: str, start: float, duration: float, **args) -> Span:
    return Span(lane="comms", kind="comm", name=name, start=start, end=start + duration,
                args=args)


def _pass_spans(parts, start: float, compute_end: float, what: str, **args) -> tuple[list, float]:
    """Hidden parts laid from ``start``, exposed ones after ``compute_end``; returns the spans
    and where the exposed ones end."""
    spans, h, t = [], start, compute_end
    for p in parts:
        if p.hidden > 0:
            spans.append(_comm(f"{_LABEL[p.kind]}, {what} (hidden)", h, p.hidden, **args))
            h += p.hidden
    for p in parts:
        if p.exposed > 0:
            spans.append(_comm(f"{_LABEL[p.kind]}, {what} (exposed)", t, p.exposed, **args))
            t += p.exposed
    return spans, t


def _ending_at(name: str, end: float, duration: float, **args) -> Span:
    """A comm span of ``duration`` that ends at ``end`` (starts at 0 at the earliest)."""
    start = max(0.0, end - duration)
    return _comm(name, start, duration, **args)


def _grad_hidden(result, m: int, zero: int) -> tuple[dict, dict]:
    """Hidden gradient synchronisation per kind (``dp``, ``edp``): ``(under the last backward,
    under each earlier backward)``. ZeRO-2 reduce-scatters every micro-batch; the split follows
    the bucket schedule of the stage that ends the step (:mod:`~willitscale.step.tail`)."""
    tail, per = result.detail.tail, result.traffic
    col = int(np.asarray(tail.tail_col)[0])
    one = float(np.asarray(tail.total)[0, col])
    exposed_last = min(_value(tail.tail), float(np.asarray(tail.exposed)[0, col]))
    hidden = {k: max(0.0, _value(per[k]["time"]) - _value(per[k]["exposed"]))
              for k in ("dp", "edp") if k in per}
    total = sum(hidden.values())
    last_share = 1.0 if total <= 0 or zero != 2 or m == 1 else \
        min(1.0, max(0.0, one - exposed_last) / total)
    last = {k: h * last_share for k, h in hidden.items()}
    earlier = {k: (h - last[k]) / (m - 1) if m > 1 else 0.0 for k, h in hidden.items()}
    return last, earlier


def _micro_batches(fwd, bwd, fwd_parts, bwd_parts, grads, m: int, t: float,
                   slowdown: float, labels) -> tuple[list, float]:
    """The micro-batches' compute spans and their communication; ``grads``: the hidden gradient
    synchronisation under the last and each earlier backward (:func:`_grad_hidden`). Beyond
    :data:`MAX_DRAWN_MICRO_STEPS` the earlier micro-batches' compute is one span; their
    communication is still drawn pass by pass, where it runs."""
    last_grads, earlier_grads = grads
    spans: list[Span] = []
    first = m if m > MAX_DRAWN_MICRO_STEPS else 1
    if first > 1:
        n = m - 1
        per = fwd + bwd + sum(p.exposed for p in fwd_parts + bwd_parts)
        spans.append(Span(lane="compute", kind="backward", name=f"micro-batches 1-{n}", start=t,
                          end=t + n * per, args={"micro_batches": n, "note": "forward + backward "
                                                 "with their exposed communication"}))
    for k in range(1, m + 1):
        drawn = k >= first
        if drawn:
            spans.append(Span(lane="compute", kind="forward", name=f"forward {k}", start=t,
                              end=t + fwd))
        comms, t = _pass_spans(fwd_parts, t, t + fwd, f"forward {k}")
        spans += comms
        stretch = slowdown if k == m else 0.0
        end = t + bwd + stretch
        if drawn:
            spans.append(Span(lane="compute", kind="backward", name=f"backward {k}", start=t,
                              end=end, args={"overlap_slowdown_s": stretch} if k == m else {}))
        grads = last_grads if k == m else earlier_grads
        spans += [_ending_at(f"{labels[kind]}, backward {k} (hidden)", end, h)
                  for kind, h in grads.items() if h > 0]
        comms, t = _pass_spans(bwd_parts, t, end, f"backward {k}")
        spans += comms
    return spans, t


def _parts(traffic, crit: int) -> tuple[list[_Pass], list[_Pass]]:
    fwd, bwd = [], []
    for kind, tr in traffic.items():
        f, fe = float(tr.fwd[0, crit]), float(tr.fwd_exposed[0, crit])
        b, be = float(tr.bwd[0, crit]), float(tr.bwd_exposed[0, crit])
        if f + b > 0:
            fwd.append(_Pass(kind, max(0.0, f - fe), fe))
            bwd.append(_Pass(kind, max(0.0, b - be), be))
    return fwd, bwd


def pipeline_timeline(scenario, result, breakdown) -> Timeline:
    """The spans of one step on the critical stage's GPU (see the module docstring)."""
    crit = int(result.critical[0])
    comp, per = result.detail.comp, result.traffic
    fwd, bwd = float(comp.forward[0, crit]), float(comp.backward[0, crit])
    fwd_parts, bwd_parts = _parts(result.detail.traffic, crit)
    m = scenario.plan.grad_accum
    labels = {**_LABEL, **(_ZERO_LABEL if scenario.plan.zero in (1, 2) else {})}
    spans: list[Span] = []
    t = 0.0
    if breakdown.data_loading > 0:
        spans.append(Span(lane="data", kind="data", name="data loading", start=0.0,
                          end=breakdown.data_loading))
        t = breakdown.data_loading
    gather, gather_exposed = _value(per["zero_ag"]["time"]), _value(per["zero_ag"]["exposed"])
    if gather > 0:  # the previous step's updated weights, gathered under this forward
        spans.append(_comm(f"{_LABEL['zero_ag']} (exposed)", t, gather_exposed))
        spans.append(_comm(f"{_LABEL['zero_ag']} (hidden)", t + gather_exposed,
                           max(0.0, gather - gather_exposed)))
        if gather_exposed > 0:
            spans.append(Span(lane="idle", kind="idle", name="waiting for the weight all-gather",
                              start=t, end=t + gather_exposed))
        t += gather_exposed
    half = breakdown.bubble / 2
    if half > 0:
        spans.append(Span(lane="idle", kind="bubble", name="pipeline fill", start=t, end=t + half))
        t += half
    drawn, t = _micro_batches(fwd, bwd, fwd_parts, bwd_parts,
                              _grad_hidden(result, m, scenario.plan.zero), m, t,
                              breakdown.overlap_slowdown, labels)
    spans += drawn
    emb, emb_exposed = _value(per["emb"]["time"]), _value(per["emb"]["exposed"])
    if emb - emb_exposed > 0:  # hidden by the drain's slack
        spans.append(_comm(f"{_LABEL['emb']} (hidden)", t, emb - emb_exposed))
    if half > 0:
        spans.append(Span(lane="idle", kind="bubble", name="pipeline drain", start=t, end=t + half))
        t += half
    start = t
    for kind in ("dp", "edp", "emb"):
        exposed = _value(per[kind]["exposed"]) if kind in per else 0.0
        if exposed > 0:
            spans.append(_comm(f"{labels[kind]} after the last backward (exposed)", t, exposed))
            t += exposed
    if t > start:
        spans.append(Span(lane="idle", kind="idle", name="waiting for gradients", start=start,
                          end=t))
    if breakdown.optimizer > 0:
        spans.append(Span(lane="compute", kind="optimizer", name="optimizer step", start=t,
                          end=t + breakdown.optimizer))
        t += breakdown.optimizer
    return Timeline(spans=spans, step_time=max(breakdown.total, t))

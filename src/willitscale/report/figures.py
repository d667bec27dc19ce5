"""The figures each command draws, from the model's results (the glue between the model's
objects and the plain-data plot functions of :mod:`willitscale.report.plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.report.chartdata import breakdown_parts, memory_parts
from willitscale.report.plots.base import Chart

__all__ = ["cluster_label", "estimate_charts", "scaling_charts", "requirements_charts",
           "timeline_chart", "memory_chart"]


def cluster_label(est) -> str:
    """``"4 nodes × 8 GPUs"`` for an estimate."""
    per_node = est.gpus // est.nodes if est.nodes else est.gpus
    return f"{est.nodes} node{'s' if est.nodes != 1 else ''} × {per_node} GPUs"


def timeline_chart(groups: Sequence[tuple[str, object]], *, title: str | None = None) -> Chart:
    """The step timeline of ``(label, estimate)`` groups."""
    from willitscale.report.plots.timeline import step_timeline

    return step_timeline([(label, est.timeline) for label, est in groups],
                         title=title or "One training step, lanes of one GPU")


def memory_chart(labelled: Sequence[tuple[str, object]], *, title: str = "Memory per GPU") -> Chart:
    """Memory per GPU against HBM for ``(label, estimate)`` pairs."""
    from willitscale.report.plots.memory import memory_bars

    mems = [est.memory for _, est in labelled]
    return memory_bars([label for label, _ in labelled], memory_parts(mems),
                       [m.capacity for m in mems], title=title)


def estimate_charts(est, *, compare: Sequence[tuple[str, object]] = ()) -> list[Chart]:
    """``estimate --plot``: the step timeline (beside ``compare`` groups) and memory per GPU."""
    groups = [*compare, (cluster_label(est), est)]
    return [timeline_chart(groups), memory_chart([(cluster_label(est), est)])]


def scaling_charts(estimates: Sequence) -> list[Chart]:
    """``scale --plot``: breakdown across node counts, throughput and efficiency, comms vs
    compute with the crossover (estimates in increasing node count)."""
    from willitscale.report.plots.scaling import breakdown_bars, comms_vs_compute, scaling_efficiency

    nodes = [e.nodes for e in estimates]
    labels = [f"{e.nodes}\n{e.gpus} GPUs" for e in estimates]
    charts = [breakdown_bars(labels, breakdown_parts([e.breakdown for e in estimates]),
                             xlabel="nodes", title="Where the step time goes, by node count")]
    if len(estimates) > 1:
        charts.append(scaling_efficiency([e.gpus for e in estimates],
                                         [e.tokens_per_s for e in estimates]))
    charts.append(comms_vs_compute(nodes, [e.compute for e in estimates],
                                   [e.comms for e in estimates],
                                   [e.exposed_comms for e in estimates]))
    return charts


def requirements_charts(rows: Sequence[Mapping], *, share: float | None = None) -> list[Chart]:
    """``requirements --plot``: the needed line rate against nodes, one curve per model size.

    ``rows`` are ``requirements --json`` records (``nodes``, ``params``, ``link``,
    ``required_bandwidth_Gbps``, ``current_bandwidth_Gbps``, ``comms_within_backward_Gbps``).
    Rows across nodes (per-node NIC rates) are drawn; one-node rows (NVLink per GPU) are a
    different link and only drawn when there is nothing else.
    """
    from willitscale.report.plots.requirements import bandwidth_requirements
    inter = [r for r in rows if str(r["link"]).startswith("inter")]
    chosen = inter or list(rows)
    if not chosen:
        return []
    nodes = sorted({int(r["nodes"]) for r in chosen})
    series: dict[str, list] = {}
    closed: dict[str, list] = {}
    for r in chosen:
        key = _params_label(r["params"])
        series.setdefault(key, [None] * len(nodes))[nodes.index(int(r["nodes"]))] = \
            r["required_bandwidth_Gbps"]
        if not closed or key in closed:
            closed.setdefault(key, [None] * len(nodes))[nodes.index(int(r["nodes"]))] = \
                r.get("comms_within_backward_Gbps")
    closed_named = {f"all-reduce within backward, bandwidth-bound ({k})": v
                    for k, v in closed.items()}
    link = "inter-node, per node" if inter else "intra-node, per GPU"
    return [bandwidth_requirements(nodes, {f"{k} parameters": v for k, v in series.items()},
                                   current=chosen[0]["current_bandwidth_Gbps"],
                                   closed_form=closed_named, share=share, link=link)]


def _params_label(params: float) -> str:
    """``2e9`` -> ``"2B"``, ``1.3e8`` -> ``"130M"``."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if params >= scale:
            return f"{params / scale:.3g}{suffix}"
    return f"{params:.3g}"

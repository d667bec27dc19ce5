"""The figures each command draws, from the model's results (the glue between the model's
objects and the plain-data plot functions of :mod:`willitscale.report.plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.estimation.verdict.levers import EXPOSED_SHARE_LIMIT
from willitscale.report.chartdata import breakdown_parts, compute_time, memory_parts
from willitscale.report.plots.base import Chart
from willitscale.report.plots.memory import memory_bars
from willitscale.report.plots.requirements import RequirementPanel, requirement_panels
from willitscale.report.plots.scaling import (
    breakdown_bars,
    comms_vs_compute,
    scaling_efficiency,
)
from willitscale.report.plots.timeline import step_timeline
from willitscale.report.verdict import exposed_share

__all__ = ["cluster_label", "estimate_charts", "scaling_charts", "scaling_notes",
           "requirements_charts", "requirement_panels_of", "timeline_chart", "memory_chart",
           "LINK_OF_LEVEL"]

#: a limiting level as the requirements name its link (``requirements --json``'s ``link``)
LINK_OF_LEVEL = {"inter": "inter-node, per node", "intra": "intra-node, per GPU",
                 "measured": "measured all-reduce"}


def cluster_label(est) -> str:
    """``"4 nodes × 8 GPUs"`` for an estimate (``", out of memory"`` when it does not fit)."""
    per_node = est.gpus // est.nodes if est.nodes else est.gpus
    oom = ", out of memory" if est.memory.fits is False else ""
    return f"{est.nodes} node{'s' if est.nodes != 1 else ''} × {per_node} GPUs{oom}"


def timeline_chart(groups: Sequence[tuple[str, object]], *, title: str | None = None) -> Chart:
    """The step timeline of ``(label, estimate)`` groups. Every schedule draws all of its
    communication on the comms lane, hidden and exposed."""

    return step_timeline([(label, est.timeline) for label, est in groups],
                         title=title or "One training step, lanes of one GPU")


def memory_chart(labelled: Sequence[tuple[str, object]], *, title: str = "Memory per GPU") -> Chart:
    """Memory per GPU against HBM for ``(label, estimate)`` pairs."""

    mems = [est.memory for _, est in labelled]
    return memory_bars([label for label, _ in labelled], memory_parts(mems),
                       [m.capacity for m in mems], usable=[m.limit for m in mems], title=title)


def estimate_charts(est, *, compare: Sequence[tuple[str, object]] = ()) -> list[Chart]:
    """``estimate --plot``: the step timeline (beside ``compare`` groups) and memory per GPU."""
    groups = [*compare, (cluster_label(est), est)]
    return [timeline_chart(groups), memory_chart([(cluster_label(est), est)])]


def scaling_charts(estimates: Sequence) -> list[Chart]:
    """``scale --plot``: breakdown across node counts, throughput and efficiency, comms vs
    compute with the crossover (estimates in increasing node count). With one node count only
    the breakdown is drawn (:func:`scaling_notes` says why)."""

    nodes = [e.nodes for e in estimates]
    labels = [f"{e.nodes}\n{e.gpus} GPUs" for e in estimates]
    marks = ["OOM" if e.memory.fits is False else None for e in estimates]
    charts = [breakdown_bars(labels, breakdown_parts([e.breakdown for e in estimates]),
                             xlabel="nodes", title="Where the step time goes, by node count",
                             marks=marks)]
    if len(estimates) > 1:
        charts.append(scaling_efficiency([e.gpus for e in estimates],
                                         [e.tokens_per_s for e in estimates]))
        charts.append(comms_vs_compute(
            nodes, [compute_time(e) for e in estimates], [e.comms for e in estimates],
            [e.exposed_comms for e in estimates],
            network_bound=[exposed_share(e) > _limit() for e in estimates],
            step=[e.step_time for e in estimates], share=_limit()))
    return charts


def _limit() -> float:
    return EXPOSED_SHARE_LIMIT


def scaling_notes(estimates: Sequence) -> list[str]:
    """Why :func:`scaling_charts` drew fewer figures: one node count has no scaling curve and
    no crossover to show."""
    if len(estimates) == 1:
        return [f"only one node count ({estimates[0].nodes}): no scaling or comms-vs-compute "
                "chart (a crossover needs several node counts, e.g. --nodes 1..16)"]
    return []


def requirement_panels_of(rows: Sequence[Mapping]) -> list:
    """``requirements --json`` rows as one :class:`~.plots.requirements.RequirementPanel` per
    link, in the order of their smallest node count (the link inside a node usually limits the
    fewest nodes): every row is drawn, each on the link that limits it at its node count."""

    first = {}
    for r in rows:
        link = str(r["link"])
        first[link] = min(first.get(link, int(r["nodes"])), int(r["nodes"]))
    links = sorted(first, key=lambda k: (first[k], k))
    panels = []
    for link in links:
        chosen = [r for r in rows if str(r["link"]) == link]
        nodes = sorted({int(r["nodes"]) for r in chosen})
        series: dict[str, list] = {}
        closed: dict[str, list] = {}
        for r in chosen:
            key, i = _params_label(r["params"]), nodes.index(int(r["nodes"]))
            series.setdefault(key, [None] * len(nodes))[i] = r.get("required_bandwidth_Gbps")
            if not closed or key in closed:  # one closed form: it does not depend on the size
                closed.setdefault(key, [None] * len(nodes))[i] = r.get("comms_within_backward_Gbps")
        closed_named = {f"all-reduce within backward, bandwidth-bound ({k})": v
                        for k, v in closed.items() if any(x is not None for x in v)}
        panels.append(RequirementPanel(
            link=link, nodes=nodes, required={f"{k} parameters": v for k, v in series.items()},
            current=chosen[0].get("current_bandwidth_Gbps"), closed_form=closed_named))
    return panels


def requirements_charts(rows: Sequence[Mapping], *, share: float | None = None) -> list[Chart]:
    """``requirements --plot``: the needed line rate against nodes, one curve per model size, one
    panel per limiting link.

    ``rows`` are ``requirements --json`` records (``nodes``, ``params``, ``link``,
    ``required_bandwidth_Gbps``, ``current_bandwidth_Gbps``, ``comms_within_backward_Gbps``).
    The link that limits can change with the node count (the link inside a PCIe node at one or
    two nodes, the NICs beyond): each row is drawn in its link's panel, against that link's
    rate today, per node for the NICs and per GPU inside a node.
    """

    panels = requirement_panels_of(rows)
    return [requirement_panels(panels, share=share)] if panels else []


def _params_label(params: float) -> str:
    """``2e9`` -> ``"2B"``, ``1.3e8`` -> ``"130M"``."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if params >= scale:
            return f"{params / scale:.3g}{suffix}"
    return f"{params:.3g}"

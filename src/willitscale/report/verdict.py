"""The report's answer in one sentence, by the estimate's own criterion (pure: no I/O).

The estimate decides the bottleneck by one number (:mod:`willitscale.estimation.verdict.levers`): the share of
the step that communication leaves exposed. Above :data:`~willitscale.estimation.verdict.levers.
EXPOSED_SHARE_LIMIT` (5%) the network is the bottleneck, and the level whose speed-up cuts it
most is the limiting link: the link inside each node (NVLink, PCIe: per GPU) or the NICs
between nodes (per node). A plan that does not fit in memory gets that verdict first, with the
memory it needs against the memory it may use. The sentence states that share, names that link
and compares the same "compute" (forward + backward, :func:`~willitscale.report.chartdata.
compute_time`) as the charts and ``willitscale scale``.
"""

from __future__ import annotations

import re

from willitscale.collectives.lines import cluster_links
from willitscale.estimation.verdict.levers import EXPOSED_SHARE_LIMIT
from willitscale.report.chartdata import compute_time
from willitscale.units import format_bandwidth, format_size, format_time

__all__ = ["verdict", "link_phrase", "percent", "exposed_share", "judged_exposed"]


def percent(x: float) -> str:
    """``0.0454`` -> ``"4.5%"`` (one decimal below 10%, so 4.5% never reads as the 5% limit),
    ``0.367`` -> ``"37%"``."""
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def exposed_share(est) -> float:
    """Exposed communication over the step: the criterion of the bottleneck verdict (without
    tensor-parallel traffic inside a node, :mod:`willitscale.estimation.verdict.levers`)."""
    shares = dict(est.bottleneck.shares)
    if "communication" in shares:
        return float(shares["communication"])
    return est.exposed_comms / est.step_time if est.step_time else 0.0


def judged_exposed(est) -> float:
    """Seconds of the step the verdict judges as exposed communication."""
    return exposed_share(est) * est.step_time


def _tensor_cost(est) -> str:
    share = float(dict(est.bottleneck.shares).get("tensor_parallel", 0.0))
    if share <= 0:
        return ""
    return (f"; tensor parallelism inside each node adds {format_time(share * est.step_time)} "
            f"({percent(share)}) of exposed communication, counted with the model's computation")


#: "(25.0 GB/s one direction)" after a link's name: the inputs table gives the line rate
_LINE_RATE = re.compile(r"\s*\([^()]*one direction\)")


def link_phrase(scenario, level: str | None) -> str:
    """The limiting link, named, with its effective bandwidth and what the rate is per."""

    links = cluster_links(scenario)
    intra_name, inter_name = (_LINE_RATE.sub("", n) for n in (links.intra_name, links.inter_name))
    if level == "intra":
        text = (f"the link inside each node, {intra_name} at "
                f"{format_bandwidth(links.intra_bandwidth)} effective per GPU")
        return text + (" (the NICs are not the limit)" if links.nodes > 1 else "")
    if level == "inter":
        g = links.gpus_per_node
        return (f"the network between nodes, {inter_name} at "
                f"{format_bandwidth(links.inter_bandwidth)} effective per node"
                + (f" shared by its {g} GPUs" if g > 1 else ""))
    if level == "measured":
        return "the measured all-reduce"
    return "latency, not a link's bandwidth"


def _where(c) -> str:
    cluster = c.scenario.cluster
    plural = lambda n: "s" if n != 1 else ""  # noqa: E731
    return (f"{cluster.nodes} node{plural(cluster.nodes)} × {cluster.node.gpus_per_node} "
            f"{cluster.gpu.name} ({cluster.gpus} GPU{plural(cluster.gpus)})")


def _scaling(c) -> str:
    eff, est = c.efficiency, c.estimate
    return (f"; its {est.gpus} GPUs reach {eff:.0%} of linear scaling from one node"
            if eff is not None else "")


def _out_of_memory(c) -> str:
    est = c.estimate
    m = est.memory
    gib = lambda x: format_size(x, binary=True)  # noqa: E731
    where = f" on the {m.stage}" if m.stage else ""
    usable = (f"{gib(m.limit)} usable ({m.fraction:g} × {gib(m.capacity)})" if m.fraction < 1
              else f"{gib(m.limit)} usable")
    fitting = [f for f in est.bottleneck.fixes if f.endswith("(fits)")]
    change = (f"; {fitting[0].replace(' (fits)', ', which fits')}" if fitting else
              "; no single change of ZeRO stage, recomputation or micro-batch fits")
    share = exposed_share(est)
    timing = (f"if it fit, {format_time(judged_exposed(est))} of each "
              f"{format_time(est.step_time)} step ({percent(share)}) would wait for "
              f"communication paced by {link_phrase(c.scenario, est.bottleneck.level)}"
              if est.comms > 0 else
              f"if it fit, a step would take {format_time(est.step_time)}")
    return (f"No — on {_where(c)} this plan does not fit in memory: it needs "
            f"{gib(m.total)} per GPU{where} against {usable}{change}; {timing}.")


def _network(c, limit: float) -> str:
    est = c.estimate
    b = est.bottleneck
    share = exposed_share(est)
    return (f"No — on {_where(c)} the {b.resource} is the bottleneck: "
            f"{format_time(judged_exposed(est))} of each {format_time(est.step_time)} step "
            f"({percent(share)}, above the {limit:.0%} limit) waits for communication, "
            f"paced by {link_phrase(c.scenario, b.level)}; communication is busy "
            f"{format_time(est.comms)} per step against {format_time(compute_time(est))} of "
            f"compute (forward + backward){_tensor_cost(est)}{_scaling(c)}.")


def _storage(c, limit: float) -> str:
    est = c.estimate
    shares = dict(est.bottleneck.shares)
    data = est.breakdown.data_loading
    busy = dict(est.bottleneck.busy).get("storage", data)
    return (f"No — on {_where(c)} storage is the bottleneck: {format_time(data)} of each "
            f"{format_time(est.step_time)} step ({percent(shares.get('data_loading', 0.0))}, "
            f"above the {limit:.0%} limit) waits for data; reading the step's samples takes "
            f"{format_time(busy)} against {format_time(compute_time(est))} of compute "
            f"(forward + backward){_scaling(c)}.")


def _compute(c, limit: float) -> str:
    est = c.estimate
    eff = c.efficiency
    word = "Yes" if eff is None or eff >= 0.9 else "Mostly"
    compute = compute_time(est)
    head = (f"{word} — on {_where(c)} compute is the bottleneck: "
            f"{format_time(compute)} of forward + backward in a {format_time(est.step_time)} step")
    if est.comms <= 0:
        comms = "; there is no communication to wait for"
    else:
        comms = (f"; exposed communication is {format_time(judged_exposed(est))} "
                 f"({percent(exposed_share(est))}, under the {limit:.0%} limit) of "
                 f"{format_time(est.comms)} in all, paced by "
                 f"{link_phrase(c.scenario, est.bottleneck.level)}{_tensor_cost(est)}")
    bubble = est.breakdown.bubble
    extra = (f"; the pipeline bubble adds {format_time(bubble)} ({percent(bubble / est.step_time)})"
             if bubble > 0 else "")
    return f"{head}{comms}{extra}{_scaling(c)}."


def verdict(c) -> str:
    """The answer in one sentence: does it scale, what limits it (the exposed share of the step
    and the link that paces it), by how much; out of memory first when the plan does not fit."""

    resource = c.estimate.bottleneck.resource
    if resource == "out of memory":
        return _out_of_memory(c)
    if resource.endswith("network"):
        return _network(c, EXPOSED_SHARE_LIMIT)
    if resource == "storage":
        return _storage(c, EXPOSED_SHARE_LIMIT)
    return _compute(c, EXPOSED_SHARE_LIMIT)

"""What a report says, computed: the estimate, the same job on one node, a scaling sweep, the
bandwidth each node count needs, and the verdict in one sentence (pure: no I/O, no plotting).

:func:`build_contents` runs the model; :mod:`willitscale.report.html` renders the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from willitscale.units import format_bandwidth, format_time

__all__ = ["ReportContents", "build_contents", "default_sweep", "verdict", "what_would_change",
           "better_plan", "levers"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportContents:
    """Everything one report shows, as the model's own objects."""

    title: str
    scenario: Any  #: the :class:`~willitscale.plan.scenario.Scenario` asked about
    estimate: Any  #: its :class:`~willitscale.plan.result.StepEstimate`
    one_node: Any = None  #: the same job on one node (None on one node, or when infeasible)
    sweep: tuple = ()  #: estimates over node counts, increasing
    skipped: tuple[tuple[int, str], ...] = ()  #: node counts the sweep could not estimate, why
    requirements: tuple[tuple[int, float | None], ...] = ()  #: (nodes, least line rate bytes/s)
    needed: tuple[float | None, Any] = (None, None)  #: this node count: (line rate, estimate there)
    share: float = 0.05  #: exposed-communication share the requirements aim for
    command: str = ""  #: the command that made the report
    plans: tuple[Mapping[str, Any], ...] = ()  #: the planner's best plans, when it ran
    #: (change, estimate with it): the same job with one lever moved, computed, not guessed
    what_ifs: tuple[tuple[str, Any], ...] = ()

    @property
    def efficiency(self) -> float | None:
        """Scaling efficiency against one node (tokens/s per GPU), None without a baseline."""
        if self.one_node is None:
            return None
        return (self.estimate.tokens_per_s / self.estimate.gpus) / \
            (self.one_node.tokens_per_s / self.one_node.gpus)


def default_sweep(nodes: int) -> list[int]:
    """Powers of two from 1 to at least 16 and 4x the scenario's nodes, plus the nodes."""
    top = max(16, 4 * nodes)
    out, n = [], 1
    while n <= top:
        out.append(n)
        n *= 2
    return sorted(set(out) | {nodes})


def _estimate_at(settings: Mapping[str, Any], nodes: int):
    from willitscale.plan.build import build_scenario
    from willitscale.plan.estimate import estimate

    return estimate(build_scenario({**settings, "nodes": nodes}))


def build_contents(settings: Mapping[str, Any], *, sweep: Sequence[int] | None = None,
                   share: float = 0.05, command: str = "", plans: Sequence = ()) -> ReportContents:
    """Run the model for a report on ``settings`` (flags and file merged, SI values)."""
    from willitscale.errors import WillItScaleError
    from willitscale.plan.build import build_scenario
    from willitscale.plan.estimate import estimate
    from willitscale.plan.requirements import least_link_bandwidth

    scenario = build_scenario(settings)
    est = estimate(scenario)
    nodes = scenario.cluster.nodes
    points, skipped = [], []
    for n in sorted(set(sweep or default_sweep(nodes))):
        try:
            points.append(est if n == nodes else _estimate_at(settings, n))
        except WillItScaleError as exc:  # e.g. a global batch that does not divide
            skipped.append((n, str(exc)))
    one = next((p for p in points if p.nodes == 1), None) if nodes > 1 else None
    if nodes > 1 and one is None:
        try:
            one = _estimate_at(settings, 1)
        except WillItScaleError:
            one = None
    reqs = []
    for p in points:
        if p.nodes > 1:
            needed, _ = least_link_bandwidth(build_scenario({**settings, "nodes": p.nodes}),
                                             max_exposed_share=share)
            reqs.append((p.nodes, needed))
    here = least_link_bandwidth(scenario, max_exposed_share=share)
    what_ifs = _what_ifs(settings, scenario)
    title = scenario.name or _default_title(scenario, est)
    return ReportContents(title=title, scenario=scenario, estimate=est, one_node=one,
                          sweep=tuple(points), skipped=tuple(skipped), requirements=tuple(reqs),
                          needed=here, share=share, command=command, plans=tuple(plans),
                          what_ifs=what_ifs)


def _what_ifs(settings: Mapping[str, Any], scenario) -> tuple[tuple[str, Any], ...]:
    """The job with one lever moved: twice the inter-node bandwidth, gradients reduced in bf16,
    twice the gradient accumulation. Levers that do not apply (one node, bf16 already, a fixed
    global batch) or that the model refuses are left out."""
    from dataclasses import replace

    from willitscale.errors import WillItScaleError
    from willitscale.plan.build import build_scenario
    from willitscale.plan.estimate import estimate
    from willitscale.plan.requirements import scaled_link

    out = []
    node = scenario.cluster.node
    if scenario.cluster.nodes > 1:
        faster = replace(scenario, cluster=replace(scenario.cluster,
                                                   node=replace(node, nic=scaled_link(node.nic, 2.0))))
        out.append((f"twice the inter-node bandwidth ({node.nics} x "
                    f"{format_bandwidth(2 * node.nic.bandwidth, bits=True)} per node)", faster))
    if scenario.ddp.grad_reduce_dtype == "fp32":
        out.append(("gradients all-reduced in bf16 (--grad-reduce-dtype bf16)",
                    {**settings, "grad_reduce_dtype": "bf16"}))
    if settings.get("global_batch") is None:
        accum = 2 * scenario.plan.grad_accum
        out.append((f"a batch per GPU twice as large (--grad-accum {accum})",
                    {**settings, "grad_accum": accum}))
    done = []
    for label, what in out:
        try:
            est = estimate(what if not isinstance(what, Mapping) else build_scenario(what))
        except WillItScaleError:
            continue
        done.append((label, est))
    return tuple(done)


def _default_title(scenario, est) -> str:
    """``"2B parameters on 4 × 8 a100-80gb-sxm"`` for a scenario without a name."""
    c = scenario.cluster
    if scenario.model is not None:
        model = scenario.model.name
    else:
        model = next((f"{est.params / k:.3g}{u} parameters" for k, u in
                      ((1e12, "T"), (1e9, "B"), (1e6, "M")) if est.params >= k),
                     f"{est.params:.3g} parameters")
    return f"{model} on {c.nodes} × {c.node.gpus_per_node} {c.gpu.name}"


def _cluster_words(c: ReportContents) -> str:
    cluster = c.scenario.cluster
    return (f"{cluster.nodes} node{'s' if cluster.nodes != 1 else ''} × "
            f"{cluster.node.gpus_per_node} {cluster.gpu.name} ({cluster.gpus} GPUs)")


def verdict(c: ReportContents) -> str:
    """The answer in one sentence: does it scale, what limits it, by how much."""
    est = c.estimate
    b = est.bottleneck
    busy = dict(b.busy)
    compute = busy.get("compute", est.compute)
    eff = c.efficiency
    scaling = (f", and its {est.gpus} GPUs reach {eff:.0%} of linear scaling from one node"
               if eff is not None else "")
    share = est.exposed_comms / est.step_time if est.step_time else 0.0
    if b.resource.endswith("network"):
        return (f"No — on {_cluster_words(c)} the {b.resource} is the bottleneck: it is busy "
                f"{format_time(busy.get(b.resource, est.comms))} per step against "
                f"{format_time(compute)} of compute, so {format_time(est.exposed_comms)} of each "
                f"{format_time(est.step_time)} step ({share:.0%}) waits for it{scaling}.")
    if b.resource == "storage":
        return (f"No — on {_cluster_words(c)} storage is the bottleneck: reading the step's data "
                f"takes {format_time(busy.get('storage', 0.0))} against {format_time(compute)} of "
                f"compute{scaling}.")
    word = "Yes" if eff is None or eff >= 0.9 else "Mostly"
    return (f"{word} — on {_cluster_words(c)} compute is the bottleneck: communication "
            f"({format_time(est.comms)} per step) runs under {format_time(compute)} of compute, "
            f"{format_time(est.exposed_comms)} of the {format_time(est.step_time)} step "
            f"({share:.0%}) stays exposed{scaling}.")


def what_would_change(c: ReportContents) -> list[str]:
    """The cheapest changes that flip the verdict, as the estimate computed them (bandwidth,
    batch, gradient dtype), then the planner's best plan when it ran."""
    out = list(c.estimate.bottleneck.fixes)
    best = better_plan(c)
    if best is not None:
        ratio = best["tokens_per_s"] / c.estimate.tokens_per_s
        how = f"willitscale estimate ... {best['flags']}" if best.get("flags") else "willitscale plan"
        out.append(f"another parallel plan: {best.get('label', 'the planner’s best')} gives "
                   f"{best['tokens_per_s']:,.0f} tokens/s, {ratio:.2f}x this one ({how})")
    return out


def better_plan(c: ReportContents) -> Mapping[str, Any] | None:
    """The planner's best plan when it beats the plan asked about by more than 0.5% (rounding
    of a step time is not a reason to change plans), else None."""
    if not c.plans or c.estimate.tokens_per_s <= 0:
        return None
    best = c.plans[0]
    return best if best.get("tokens_per_s", 0.0) > 1.005 * c.estimate.tokens_per_s else None


def levers(c: ReportContents) -> list[tuple[str, Any]]:
    """``(change, estimate)`` for each lever moved alone, best throughput first: the bandwidth
    that keeps exposed communication under the target share, then :attr:`what_ifs`."""
    out: list[tuple[str, Any]] = []
    needed, at = c.needed
    if c.scenario.cluster.nodes > 1 and needed is not None and at is not None:
        now = c.scenario.cluster.node.inter_node_bandwidth
        if needed > now * 1.001:
            out.append((f"inter-node bandwidth {format_bandwidth(needed, bits=True)} per node "
                        f"(exposed communication <= {c.share:.0%})", at))
    out += list(c.what_ifs)
    return sorted(out, key=lambda item: -item[1].tokens_per_s)

"""What a report says, computed: the estimate, the same job on one node, a scaling sweep, the
bandwidth each node count needs, and the verdict in one sentence (pure: no I/O, no plotting).

:func:`build_contents` runs the model; :mod:`willitscale.report.html` renders the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from willitscale.errors import WillItScaleError
from willitscale.estimation.estimate import estimate, estimate_in_context
from willitscale.estimation.verdict.levers import scaled_context
from willitscale.plan.requirements import link_requirement
from willitscale.report.verdict import verdict as sentence
from willitscale.scenario.build import build_scenario
from willitscale.step.engine import make_context
from willitscale.units import format_bandwidth, format_size

__all__ = ["ReportContents", "Requirement", "build_contents", "default_sweep", "sweep_settings",
           "requirement_at", "requirement_label", "verdict", "what_would_change", "better_plan",
           "levers"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    """The least line rate of the link that limits one node count (``link_requirement``)."""

    nodes: int
    level: str | None  #: intra (per GPU), inter (per node), measured, None (no communication)
    now: float  #: that link's line rate now, bytes/s one direction
    needed: float | None  #: the least line rate for the target share; None: this link alone cannot
    limited_by: str | None = None  #: when ``needed`` is None: the other level, or "latency"

    @property
    def per(self) -> str:
        """What the rate is per: ``"GPU"`` inside a node, ``"node"`` across nodes."""
        return "GPU" if self.level == "intra" else "node"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportContents:
    """Everything one report shows, as the model's own objects."""

    title: str
    scenario: Any  #: the :class:`~willitscale.scenario.scenario.Scenario` asked about
    estimate: Any  #: its :class:`~willitscale.estimation.result.StepEstimate` (out of memory kept)
    one_node: Any = None  #: the same job on one node (None on one node, or when infeasible)
    sweep: tuple = ()  #: estimates over node counts, increasing
    skipped: tuple[tuple[int, str], ...] = ()  #: node counts the sweep could not estimate, why
    requirements: tuple[Requirement, ...] = ()  #: per node count of the sweep above one node
    needed: Requirement | None = None  #: this node count's requirement
    needed_estimate: Any = None  #: the estimate at ``needed.needed`` (None when it cannot)
    share: float = 0.05  #: exposed-communication share the requirements aim for
    command: str = ""  #: the command that made the report
    plans: tuple[Mapping[str, Any], ...] = ()  #: the planner's best plans, when it ran
    #: (change, estimate with it): the same job with one lever moved, computed, not guessed
    what_ifs: tuple[tuple[str, Any], ...] = ()
    sweep_note: str = ""  #: how the sweep's scenarios differ from the one asked about

    def __repr__(self) -> str:
        return (f"ReportContents({self.title!r}: {self.estimate!r}; sweep of {len(self.sweep)}, "
                f"{len(self.what_ifs)} what-ifs, {len(self.plans)} plans)")

    @property
    def efficiency(self) -> float | None:
        """Scaling efficiency against one node (tokens/s per GPU), None without a baseline."""
        if self.one_node is None:
            return None
        return (self.estimate.tokens_per_s / self.estimate.gpus) / \
            (self.one_node.tokens_per_s / self.one_node.gpus)


def default_sweep(nodes: int, least: int = 1) -> list[int]:
    """Powers of two from ``least`` (the fewest nodes the model-parallel degrees fit on) to at
    least 16 and 4x the scenario's nodes, plus the nodes."""
    top = max(16, 4 * nodes)
    out, n = [], 1
    while n <= top:
        if n >= least:
            out.append(n)
        n *= 2
    return sorted(set(out) | {nodes})


def _fewest_nodes(scenario) -> int:
    """Nodes one model replica needs: tp x pp x cp GPUs over the GPUs per node, rounded up."""
    plan = scenario.plan
    return max(1, -(-plan.tp * plan.pp * plan.cp // scenario.cluster.node.gpus_per_node))


def sweep_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The settings for other node counts, and what changes: a data-parallel degree given for
    this node count cannot hold on another (tp x pp x cp x dp = GPUs), so dp fills the GPUs the
    other degrees leave."""
    if settings.get("dp") is None:
        return dict(settings), ""
    fixed = " x ".join(f"{k} {settings[k]}" for k in ("tp", "pp", "cp")
                       if (settings.get(k) or 1) > 1)
    return ({k: v for k, v in settings.items() if k != "dp"},
            f"At other node counts dp fills the GPUs{' ' + fixed + ' leave' if fixed else ''} "
            f"(dp {settings['dp']} is for {settings.get('nodes', 1)} nodes).")


def _estimate_at(settings: Mapping[str, Any], nodes: int):
    return estimate(build_scenario({**settings, "nodes": nodes}), allow_oom=True)


def requirement_at(scenario, share: float = 0.05) -> tuple[Requirement, Any]:
    """The requirement of ``scenario`` on its limiting link, and the engine context there."""

    req = link_requirement(scenario, max_exposed_share=share)
    return Requirement(nodes=scenario.cluster.nodes, level=req.level, now=req.now,
                       needed=req.needed, limited_by=req.limited_by), req.context


def build_contents(settings: Mapping[str, Any], *, sweep: Sequence[int] | None = None,
                   share: float = 0.05, command: str = "", plans: Sequence = ()) -> ReportContents:
    """Run the model for a report on ``settings`` (flags and file merged, SI values). A plan
    that does not fit in memory is reported with its numbers and an out-of-memory verdict."""

    scenario = build_scenario(settings)
    est = estimate(scenario, allow_oom=True)
    nodes = scenario.cluster.nodes
    others, note = sweep_settings(settings)
    points, skipped = [], []
    for n in sorted(set(sweep or default_sweep(nodes, _fewest_nodes(scenario)))):
        try:
            points.append(est if n == nodes else _estimate_at(others, n))
        except WillItScaleError as exc:  # e.g. a global batch that does not divide
            skipped.append((n, str(exc)))
    one = next((p for p in points if p.nodes == 1), None) if nodes > 1 else None
    if nodes > 1 and one is None:
        try:
            one = _estimate_at(others, 1)
        except WillItScaleError:
            one = None
    here, ctx = requirement_at(scenario, share)
    reqs = [here if p.nodes == nodes else
            requirement_at(build_scenario({**others, "nodes": p.nodes}), share)[0]
            for p in points if p.nodes > 1]
    at = None if here.needed is None else estimate_in_context(scenario, ctx, allow_oom=True)
    title = scenario.name or _default_title(scenario, est)
    return ReportContents(title=title, scenario=scenario, estimate=est, one_node=one,
                          sweep=tuple(points), skipped=tuple(skipped), requirements=tuple(reqs),
                          needed=here, needed_estimate=at, share=share, command=command,
                          plans=tuple(plans), what_ifs=_what_ifs(settings, scenario, est),
                          sweep_note=note if len(points) > 1 else "")


def _what_ifs(settings: Mapping[str, Any], scenario, est) -> tuple[tuple[str, Any], ...]:
    """The job with one lever moved, each estimated again: twice the bandwidth of the link inside
    the node when it limits, twice the inter-node bandwidth, gradients reduced in bf16, twice the
    gradient accumulation; for a plan that does not fit, the single memory changes that make it
    fit instead. Levers that do not apply or that the model refuses are left out."""

    if est.bottleneck.resource == "out of memory":
        return _memory_what_ifs(settings, scenario)
    links = make_context(scenario).links
    out: list[tuple[str, Any]] = []
    if est.bottleneck.level == "intra":
        out.append((f"twice the intra-node link bandwidth "
                    f"({format_bandwidth(2 * links.intra_line_rate)} per GPU)", {"intra": 2.0}))
    if scenario.cluster.nodes > 1:
        node = scenario.cluster.node
        out.append((f"twice the inter-node bandwidth ({node.nics} x "
                    f"{format_bandwidth(2 * node.nic.bandwidth, bits=True)} per node)",
                    {"inter": 2.0}))
    if scenario.ddp.grad_reduce_dtype == "fp32":
        out.append(("gradients all-reduced in bf16 (--grad-reduce-dtype bf16)",
                    build_scenario({**settings, "grad_reduce_dtype": "bf16"})))
    if settings.get("global_batch") is None:
        accum = 2 * scenario.plan.grad_accum
        out.append((f"a batch per GPU twice as large (--grad-accum {accum})",
                    build_scenario({**settings, "grad_accum": accum})))
    done = []
    for label, what in out:
        try:
            if isinstance(what, Mapping):  # a link level made faster, as the estimate's fixes do
                e = estimate_in_context(scenario, scaled_context(make_context(scenario), **what))
            else:
                e = estimate(what)
        except WillItScaleError:
            continue
        done.append((label, e))
    return tuple(done)


def _memory_what_ifs(settings: Mapping[str, Any], scenario) -> tuple[tuple[str, Any], ...]:
    """For a plan out of memory: higher ZeRO stages, full recomputation, micro-batch 1 (the
    global batch kept), each kept only when it fits."""

    plan = scenario.plan
    changes: list[tuple[str, dict]] = []
    if plan.dp * plan.cp > 1:
        changes += [(f"--zero {z}", {"zero": z}) for z in range(plan.zero + 1, 4)]
    if plan.recompute != "full" and scenario.model is not None:
        changes.append(("--recompute full", {"recompute": "full"}))
    if plan.micro_batch > 1:
        keep = ({} if settings.get("global_batch") is not None
                else {"grad_accum": plan.grad_accum * plan.micro_batch})
        changes.append((f"--micro-batch 1 (grad-accum x{plan.micro_batch})",
                        {"micro_batch": 1, **keep}))
    done = []
    for label, change in changes:
        try:
            est = estimate(build_scenario({**settings, **change}))
        except WillItScaleError:  # still out of memory, or not a valid plan
            continue
        done.append((f"{label} (fits: {format_size(est.memory.total, binary=True)} per GPU)", est))
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


def what_would_change(c: ReportContents) -> list[str]:
    """The cheapest changes that flip the verdict, as the estimate computed them (bandwidth,
    batch, gradient dtype; memory when out of memory), then the planner's best plan when it ran."""
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


def requirement_label(req: Requirement, share: float) -> str:
    """``"inter-node bandwidth 329 Gb/s per node line rate (...)"``, or the link inside the node
    per GPU when that is the link that limits."""
    what = (f"inter-node bandwidth {format_bandwidth(req.needed, bits=True)} per node"
            if req.level == "inter" else
            f"intra-node link {format_bandwidth(req.needed)} per GPU")
    return f"{what} line rate (exposed communication <= {share:.0%})"


def levers(c: ReportContents) -> list[tuple[str, Any]]:
    """``(change, estimate)`` for each lever moved alone, best throughput first: the line rate of
    the limiting link that keeps exposed communication under the target share, then
    :attr:`what_ifs`."""
    out: list[tuple[str, Any]] = []
    req, at = c.needed, c.needed_estimate
    if (req is not None and at is not None and req.level in ("intra", "inter")
            and c.estimate.bottleneck.resource != "out of memory"
            and req.needed > req.now * 1.001):
        out.append((requirement_label(req, c.share), at))
    out += list(c.what_ifs)
    return sorted(out, key=lambda item: -item[1].tokens_per_s)


def verdict(c: ReportContents) -> str:
    """The answer in one sentence (:func:`willitscale.report.verdict.verdict`)."""

    return sentence(c)

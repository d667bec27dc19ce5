"""What limits a step and how much of one change would fix it, by rerunning the engine.

**One criterion** decides the bottleneck verdict, every computed fix and ``requirements``: the
*exposed share* of the step, communication that compute does not hide over the step time
(:func:`exposed_share`). Tensor-parallel traffic inside a node is part of the model's computation
(a TP plan cannot run without it, and no network upgrade between GPUs is what a user asks for
when they ask whether a job scales): it is reported separately and left out of the share, while
TP groups that cross nodes, and data, pipeline, context and expert traffic, count.
Communication is the bottleneck when that share exceeds
:data:`EXPOSED_SHARE_LIMIT` (5%, the default of ``requirements --max-exposed-share``), and every
fix is the least change that brings it to the limit. Comparing the communication's busy time
with all compute (the handbook's "comms is a bottleneck" column) would miss that DDP hides the
all-reduce only behind the last micro-batch's backward, never behind forward, the optimizer
or the other accumulation steps.

**The limiting link.** A collective over several nodes runs on two levels at once: each GPU's
link inside its node (``intra``: NVLink, NVSwitch, PCIe) and the node's NICs (``inter``). In
the alpha-beta model a ring moves ``S/n`` per step over both, paced by the slower; NCCL's tree
runs a chain through the node's GPUs (``2S`` each way per GPU) beside the tree across nodes
(``2S`` per node): which level paces the transfer depends on the algorithm the model picks, its
bytes per level and the bandwidths, not on whether the group spans nodes. A PCIe node or an
H800 (8 NVLinks of 18) is often limited inside the node. :func:`limiting_level` therefore asks
the step itself: the level whose bandwidth, doubled, cuts exposed communication most (ties:
the communication's busy time) is the one a fix must speed up. A measured all-reduce
(``--allreduce-time``) is its own level, ``measured``.

Every probe is the batched engine's answer for the plan on links scaled by a factor, so the
estimate, its fixes, ``requirements`` and the planner use the same numbers. The probes of one
question run as the rows of **one** batch whose links take a factor per row
(:meth:`~willitscale.collectives.lines.ClusterLinks.with_plan_scale`, :func:`probe_outcomes`):
:func:`limiting_level`'s two doublings in one pass, :func:`least_factor`'s bisection
:data:`LOOKAHEAD` levels of its tree per pass, the first pass with the range's two ends (the same
midpoints, walked in the same order, so the same answer as one run per probe; the estimate's own
share decides the midpoint at factor 1 without a probe when it is above the limit). A measured all-reduce's factor and a simulated fabric
(``--network flow``) are applied per probe instead (:func:`scaled_context`, one run each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from willitscale.step.evaluate import run
from willitscale.topology.placement import group_placement

__all__ = ["EXPOSED_SHARE_LIMIT", "LEVEL_RESOURCE", "BANDWIDTH_RANGE", "BANDWIDTH_RTOL", "Outcome",
           "BandwidthNeed", "available_levels", "exposed_share", "least_factor", "limiting_level",
           "in_node_tensor_exposed", "needed_bandwidth", "outcome", "outcomes", "probe_outcomes",
           "probe_context", "level_probes",
           "scaled_context", "LOOKAHEAD"]

#: exposed communication above this share of the step makes the network the bottleneck
EXPOSED_SHARE_LIMIT = 0.05
#: the resource a limiting level stands for in the bottleneck verdict
LEVEL_RESOURCE = {"intra": "intra-node network", "inter": "inter-node network"}
#: the factor :func:`limiting_level` doubles each level's bandwidth by
_PROBE = 2.0
#: :func:`needed_bandwidth` searches factors in ``[1 / BANDWIDTH_RANGE, BANDWIDTH_RANGE]``
BANDWIDTH_RANGE = 1e4
#: ... to this relative tolerance: 0.1%, below the 3 significant digits every figure prints
BANDWIDTH_RTOL = 1e-3
#: bisection levels :func:`least_factor` evaluates per engine pass (2**LOOKAHEAD - 1 probes; 127
#: rows + the range's two ends stay under the engine's :data:`~willitscale.step.engine.MEMO_PLANS`,
#: so a pass costs about a run of one plan: a search to 0.1% over 1e-4..1e4, 15 levels, takes
#: 3 passes where 4 levels per pass took 5)
LOOKAHEAD = 7


def exposed_share(exposed, step):
    """Exposed communication over the step time (numpy-friendly)."""
    return np.asarray(exposed, dtype=float) / np.asarray(step, dtype=float)


def scaled_context(ctx, *, intra: float = 1.0, inter: float = 1.0, measured: float = 1.0):
    """``ctx`` with each GPU's intra-node link ``intra`` times, each node's NICs ``inter`` times and
    a measured all-reduce ``measured`` times faster (line rates scaled alike)."""
    links = ctx.links
    links = replace(links, intra_bandwidth=links.intra_bandwidth * intra,
                    intra_line_rate=links.intra_line_rate * intra,
                    inter_bandwidth=links.inter_bandwidth * inter,
                    inter_line_rate=links.inter_line_rate * inter)
    scenario = ctx.scenario
    if measured != 1.0 and scenario.measured.allreduce_time is not None:
        scenario = replace(scenario, measured=replace(
            scenario.measured, allreduce_time=scenario.measured.allreduce_time / measured,
            allreduce_size=scenario.measured.allreduce_size))
    return replace(ctx, links=links, scenario=scenario)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The numbers of one plan under one change."""

    step: float
    exposed: float  #: exposed communication the verdict judges (all but in-node tensor parallel)
    tensor_exposed: float  #: exposed tensor-parallel communication inside a node, not judged
    comms: float  #: communication busy time
    memory: float  #: bytes per GPU (largest stage)
    result: object  #: the engine's BatchResult (its rows: the probes of one pass)
    row: int = 0  #: this outcome's row of ``result``

    @property
    def share(self) -> float:
        return float(exposed_share(self.exposed, self.step))


def in_node_tensor_exposed(ctx, batch, result) -> np.ndarray:
    """Per plan, the exposed tensor-parallel communication of groups that stay inside a node."""
    tensor = result.traffic.get("tp")
    if tensor is None:
        return np.zeros_like(np.asarray(result.step_time, dtype=float))
    degrees = {"tp": batch.tp, "cp": batch.cp, "ep": batch.ep, "dp": batch.dp, "pp": batch.pp}
    groups = group_placement("tp", degrees, ctx.links.gpus_per_node,
                             ctx.scenario.options.rank_order)
    return np.where(groups.nodes <= 1, np.asarray(tensor["exposed"], dtype=float), 0.0)


def outcome(ctx, batch, index: int = 0, result=None) -> Outcome:
    """Plan ``index`` of ``batch`` evaluated on ``ctx`` (or taken from ``result``)."""

    r = run(ctx, batch) if result is None else result
    return outcomes(ctx, batch, r, [index])[0]


def outcomes(ctx, batch, r, rows) -> list[Outcome]:
    """The outcomes of ``rows`` of an engine result ``r`` of ``batch``."""
    tensor = in_node_tensor_exposed(ctx, batch, r)
    step, exposed, comms = r.step_time, r.exposed_comms, r.comms
    memory = r.memory_per_gpu
    out = []
    for i in rows:
        t = float(np.asarray(tensor)[i])
        out.append(Outcome(step=float(np.asarray(step)[i]),
                           exposed=float(np.asarray(exposed)[i]) - t, tensor_exposed=t,
                           comms=float(np.asarray(comms)[i]), memory=float(np.asarray(memory)[i]),
                           result=r, row=i))
    return out


def probe_context(ctx, changes):
    """``ctx`` whose links take row ``i`` of a batch ``changes[i]`` times faster (a dict level ->
    factor, as :func:`scaled_context` takes; ``{}``: as they are), or None when the changes
    cannot be rows of one pass: a measured all-reduce's factor, or links already scaled per
    plan. A simulated fabric (``--network flow``) takes them as rows too: its slowdown per group
    geometry does not change with the links' speed (docs/fabric.md), so each row is the
    analytic lines at that row's scale times the same slowdown."""
    if (ctx.links.plan_scale is not None
            or any(set(c) - {"intra", "inter"} for c in changes)):
        return None
    links = ctx.links.with_plan_scale([c.get("intra", 1.0) for c in changes],
                                      [c.get("inter", 1.0) for c in changes])
    return replace(ctx, links=links)


def probe_outcomes(ctx, batch, changes, index: int = 0) -> list[Outcome]:
    """Plan ``index`` of ``batch`` under each change (a dict level -> factor on that level's
    bandwidth, as :func:`scaled_context` takes), in one engine pass: the changes are the rows of
    one batch whose links take a factor per row (:func:`probe_context`); where they cannot be,
    one run per change on a :func:`scaled_context`."""
    changes = list(changes)
    if not changes:
        return []
    one = batch.take(np.full(len(changes), index))
    probe = probe_context(ctx, changes)
    if probe is None:
        return [outcome(scaled_context(ctx, **c), one, i) for i, c in enumerate(changes)]
    return outcomes(ctx, one, run(probe, one), range(len(changes)))


def level_probes(ctx) -> tuple[tuple[str, dict], ...]:
    """``(level, change)`` of each probe :func:`limiting_level` makes: every available level's
    bandwidth doubled."""
    return tuple((level, {level: _PROBE}) for level in available_levels(ctx))


def available_levels(ctx) -> tuple[str, ...]:
    """The levels a change could speed up: ``intra`` with several GPUs per node, ``inter`` with
    several nodes, ``measured`` with a measured all-reduce."""
    sc = ctx.scenario
    out = []
    if ctx.links.gpus_per_node > 1:
        out.append("intra")
    if sc.cluster.nodes > 1:
        out.append("inter")
    if sc.measured.allreduce_time is not None:
        out.append("measured")
    return tuple(out)


def limiting_level(ctx, batch, base: Outcome | None = None,
                   probed: dict[str, Outcome] | None = None) -> str | None:
    """The level whose bandwidth, doubled, cuts exposed communication most (then the busy time);
    None when no level changes anything (one GPU, or no communication). ``probed``: the
    outcomes of :func:`level_probes` when the caller evaluated them already (level -> outcome),
    e.g. as extra rows of its own engine pass."""
    base = base or outcome(ctx, batch)
    best, key = None, (base.exposed, base.comms)
    probes = level_probes(ctx)
    if probed is None:
        outs = probe_outcomes(ctx, batch, [change for _, change in probes])
        probed = {level: out for (level, _), out in zip(probes, outs)}
    for level, _ in probes:
        out = probed[level]
        candidate = (out.exposed, out.comms)
        if candidate < key and not np.allclose(candidate, (base.exposed, base.comms), rtol=1e-9,
                                               atol=1e-12):
            best, key = level, candidate
    return best


def least_factor(ctx, batch, levels, *, share: float = EXPOSED_SHARE_LIMIT, lo: float = 1.0,
                 hi: float = 1e4, rtol: float = 0.01, above: tuple[float, ...] = ()):
    """``(factor, outcome)``: the least factor in ``[lo, hi]`` on the bandwidth of every level in
    ``levels`` at which exposed communication is at most ``share`` of the step, found by geometric
    bisection to ``rtol`` (the exposed share never grows with bandwidth: a property test checks
    it). ``(None, outcome at hi)`` when even ``hi`` is not enough. The probes run
    :data:`LOOKAHEAD` levels of the bisection per engine pass (:func:`probe_outcomes`).
    ``above``: factors at which the caller knows the share exceeds ``share`` (1.0, the plan as
    it is, when communication is its bottleneck): where the bisection reaches one it moves up
    without a probe (such a probe keeps no outcome), one level fewer to run."""
    def at(factors) -> list[Outcome]:
        return probe_outcomes(ctx, batch, [{level: f for level in levels} for f in factors])

    # the range's ends and the first LOOKAHEAD levels of the bisection in one pass (the tree's
    # probes are wasted when an end already answers: cheaper than a pass of their own)
    tree = _bisection_tree(lo, hi, rtol, LOOKAHEAD, above)
    top, bottom, *rest = at([hi, lo] + [mid for _, _, mid in tree])
    if top.share > share:
        return None, top
    if bottom.share <= share:
        return lo, bottom
    best = top
    while hi / lo > 1 + rtol:
        outs = dict(zip([(a, b) for a, b, _ in tree], rest))
        probed = 0
        while probed < LOOKAHEAD and hi / lo > 1 + rtol:  # the one-probe-per-run walk
            mid = math.sqrt(lo * hi)
            if mid in above:
                lo = mid
                continue
            out, probed = outs[(lo, hi)], probed + 1
            if out.share <= share:
                hi, best = mid, out
            else:
                lo = mid
        tree = _bisection_tree(lo, hi, rtol, LOOKAHEAD, above)
        rest = at([mid for _, _, mid in tree]) if tree else []
    return hi, best


def _bisection_tree(lo: float, hi: float, rtol: float, depth: int,
                    above: tuple[float, ...] = ()) -> list[tuple]:
    """``(lo, hi, midpoint)`` of every interval the geometric bisection of ``[lo, hi]`` can
    reach in ``depth`` probes (the midpoints it would probe, computed as it computes them; a
    midpoint in ``above`` is passed upwards without a probe)."""
    if depth == 0 or not hi / lo > 1 + rtol:
        return []
    mid = math.sqrt(lo * hi)
    if mid in above:
        return _bisection_tree(mid, hi, rtol, depth, above)
    return ([(lo, hi, mid)] + _bisection_tree(lo, mid, rtol, depth - 1, above)
            + _bisection_tree(mid, hi, rtol, depth - 1, above))


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthNeed:
    """The least speed-up of one level's bandwidth that brings exposed communication to a share."""

    level: str  #: intra, inter or measured
    factor: float | None  #: the least factor on that level; None when it alone cannot
    at: Outcome  #: the outcome at ``factor`` (at the top of the range when None)
    #: when ``factor`` is None and the other level exists: the least factor on both together
    both: float | None = None
    both_at: Outcome | None = None  #: the outcome at ``both`` (or at the top of the range)

    @property
    def limited_by(self) -> str | None:
        """Why ``factor`` is None: the other level (``intra``/``inter``) or ``latency``."""
        if self.factor is not None:
            return None
        if self.both is not None:
            return {"intra": "inter", "inter": "intra"}[self.level]
        return "latency"


def needed_bandwidth(ctx, batch, level: str, *, share: float = EXPOSED_SHARE_LIMIT,
                     limit: float = BANDWIDTH_RANGE, rtol: float = BANDWIDTH_RTOL,
                     base: Outcome | None = None) -> BandwidthNeed:
    """The one bandwidth search behind the estimate's bandwidth fix, ``requirements`` and the
    report (so all print the same figure): the least factor in ``[1/limit, limit]`` on ``level``
    at which exposed communication is at most ``share`` of the step, to ``rtol``. When that level
    alone cannot and both network levels exist, the least factor on both together. ``base``:
    the plan's own outcome when the caller has it (its share above ``share`` decides the
    search's factor 1 without a probe: :func:`least_factor`'s ``above``)."""
    above = (1.0,) if base is not None and base.share > share else ()
    factor, at = least_factor(ctx, batch, (level,), share=share, lo=1.0 / limit, hi=limit,
                              rtol=rtol, above=above)
    if factor is not None:
        return BandwidthNeed(level=level, factor=factor, at=at)
    both = tuple(lvl for lvl in available_levels(ctx) if lvl in ("intra", "inter"))
    if level not in both or len(both) < 2:
        return BandwidthNeed(level=level, factor=None, at=at)
    together, both_at = least_factor(ctx, batch, both, share=share, lo=1.0, hi=limit, rtol=rtol)
    return BandwidthNeed(level=level, factor=None, at=at, both=together, both_at=both_at)

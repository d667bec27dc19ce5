"""Fitting the knobs a user did not give: sharding (ZeRO stage), sequence parallelism and
recomputation.

A published run rarely states every knob; taking each unstated one at its most memory-hungry
value (no sharding, no sequence parallelism, no recomputation) refuses runs that worked. So,
for the knobs in ``Scenario.unstated``, the estimate evaluates every combination the plan's
framework offers (:data:`willitscale.memory.frameworks.FRAMEWORK_STAGES`; a ZeRO stage only
with more than one data-parallel rank, sequence parallelism only with ``tp > 1``) with the
same engine, and takes

* the shortest predicted step among the combinations that **fit**; if none fits, the shortest
  among those that are **tight**; if none is, the literal default (and its verdict: does not
  fit);
* on a tie (steps within a millionth), the literal default, else the fewest changed knobs.

An explicit flag is never changed: only ``Scenario.unstated`` knobs vary. The planner ranks
its candidates by the same rule (:mod:`willitscale.plan.search`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import product

import numpy as np

from willitscale.estimation.memory_verdict import memory_of
from willitscale.estimation.result import MemoryBreakdown
from willitscale.memory.frameworks import FRAMEWORK_STAGES
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.plan import RECOMPUTE
from willitscale.scenario.validate import structural_reasons
from willitscale.step.engine import make_context
from willitscale.step.evaluate import run
from willitscale.units import format_size, format_time

__all__ = ["KnobFit", "fit_scenario", "choose", "knob_candidates", "TIE"]

TIE = 1e-6  #: relative step-time difference under which two combinations tie


@dataclass(frozen=True, slots=True, kw_only=True)
class KnobFit:
    """Which values the unstated knobs took, why, and what the literal default would need."""

    knobs: tuple[str, ...]  #: the knobs fitted
    chosen: dict  #: knob -> value taken
    literal: dict  #: knob -> the literal default
    reason: str
    literal_memory: MemoryBreakdown
    literal_step_time: float
    candidates: int = 0
    rejected: dict = field(default_factory=dict)  #: verdict -> count among the candidates

    @property
    def changed(self) -> bool:
        return self.chosen != self.literal

    def to_json(self) -> dict:
        return {"knobs": list(self.knobs), "chosen": dict(self.chosen),
                "literal_default": dict(self.literal), "changed": self.changed,
                "reason": self.reason, "candidates": self.candidates,
                "literal_default_step_time_s": self.literal_step_time,
                "literal_default_memory": self.literal_memory.to_json()}


def _knob_values(plan, knobs) -> dict:
    return {k: getattr(plan, k) for k in knobs}


def knob_candidates(plan, knobs: tuple[str, ...], has_shape: bool) -> list:
    """The plans the unstated ``knobs`` allow, the literal one first."""
    values = {}
    if "zero" in knobs:
        stages = FRAMEWORK_STAGES[plan.resolved_framework]
        values["zero"] = [z for z in stages if z == plan.zero or plan.dp * plan.cp > 1]
    if "sequence_parallel" in knobs and plan.tp > 1 and has_shape:
        values["sequence_parallel"] = [plan.sequence_parallel, not plan.sequence_parallel]
    if "recompute" in knobs and has_shape:
        values["recompute"] = [plan.recompute] + [r for r in RECOMPUTE if r != plan.recompute]
    names = list(values)
    plans = []
    for combo in product(*(values[n] for n in names)):
        # an implied framework stays the same: its stages imply it back (memory.frameworks)
        plans.append(replace(plan, **dict(zip(names, combo))))
    return plans


def choose(step_time, verdict, changed) -> int:
    """Index of the combination to take: shortest step among those that fit, else among the
    tight ones, else 0 (the literal default); ties go to the literal default (index 0), then to
    the fewest ``changed`` knobs."""
    step = np.asarray(step_time, dtype=float)
    verdict = np.asarray(verdict)
    for allowed in (0, 1):
        pool = np.nonzero((verdict == allowed) & np.isfinite(step))[0]
        if pool.size:
            best = float(np.min(step[pool]))
            ties = pool[step[pool] <= best * (1 + TIE)]
            if 0 in ties:
                return 0
            return int(min(ties, key=lambda i: (changed[i], step[i])))
    return 0


def _describe(values: dict) -> str:
    words = []
    for k, v in values.items():
        if k == "zero":
            words.append(f"ZeRO {v}")
        elif k == "sequence_parallel":
            words.append("sequence parallelism " + ("on" if v else "off"))
        elif k == "recompute":
            words.append(f"recompute {v}")
    return ", ".join(words)


def _structurally_valid(scenario, ctx, plans) -> np.ndarray:
    batch = PlanBatch.from_plans(plans)
    reason = structural_reasons(batch.degrees(), ctx.terms, scenario.model,
                                gpus_per_node=ctx.links.gpus_per_node, seq_len=scenario.seq_len,
                                allow_tp_across_nodes=True, order=scenario.options.rank_order)
    return reason == 0


def fit_scenario(scenario, *, context=None):
    """``(scenario with the fitted plan, KnobFit)``; ``(scenario, None)`` when nothing is
    unstated or only one combination exists. ``context``: the scenario's engine context when the
    caller has one (it does not depend on the plan)."""
    knobs = tuple(scenario.unstated)
    if not knobs:
        return scenario, None
    plans = knob_candidates(scenario.plan, knobs, scenario.model is not None)
    if len(plans) <= 1:
        return replace(scenario, unstated=()), None
    ctx = context if context is not None else make_context(scenario)
    valid = _structurally_valid(scenario, ctx, plans)
    valid[0] = True  # the literal default is the user's plan: its problems are reported as such
    plans = [p for p, ok in zip(plans, valid) if ok]
    result = run(ctx, PlanBatch.from_plans(plans))
    verdict = result.verdict
    step = np.asarray(result.step_time, dtype=float)
    literal = _knob_values(scenario.plan, knobs)
    changed = [sum(_knob_values(p, knobs)[k] != literal[k] for k in knobs) for p in plans]
    best = choose(step, verdict, changed)
    chosen = plans[best]
    literal_memory = memory_of(result, scenario, 0)
    words = {0: "fits", 1: "tight", 2: "does not fit"}
    picked = _knob_values(chosen, knobs)
    if best == 0:
        why = ("the literal default: " + ("it is the fastest that fits" if verdict[0] == 0 else
               "the fastest tight one" if verdict[0] == 1 else "no combination fits"))
    else:
        that = "fits" if verdict[best] == 0 else "is tight (none fits)"
        why = (f"the shortest predicted step that {that} ({format_time(float(step[best]))}) "
               f"among {len(plans)} combinations; the literal default ({_describe(literal)}) "
               f"would need {format_size(literal_memory.total, binary=True)} per GPU "
               f"({literal_memory.verdict}"
               + (f", step {format_time(float(step[0]))})" if np.isfinite(step[0]) else ")"))
    counts = {words[v]: int(np.sum(verdict == v)) for v in (0, 1, 2)}
    fit = KnobFit(knobs=knobs, chosen=picked, literal=literal,
                  reason=f"{_describe(picked)}: {why}", literal_memory=literal_memory,
                  literal_step_time=float(step[0]), candidates=len(plans), rejected=counts)
    return replace(scenario, plan=chosen, unstated=()), fit

"""The planner's best plans as plain records, for ``plan --plot`` and the HTML report.

The planner ranks thousands of plans from batched arrays; a chart or a report wants, for its
few best, the full estimate: the step's breakdown and the memory per GPU. :func:`plan_records`
estimates each of those plans again with :func:`~willitscale.estimation.estimate.estimate` (the same
engine, so the same step time: ``tests/unit/test_plan_batch_equals_estimate.py``) and returns
records in the shape :func:`willitscale.cli.plot_flag.plan_plots` and
:func:`willitscale.report.contents.build_contents` take.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from willitscale.estimation.estimate import estimate
from willitscale.plan.search import SearchSpace, search
from willitscale.scenario.build import build_scenario

__all__ = ["PLAN_KEYS", "plan_flags", "plan_label", "plan_settings", "plan_records", "best_plans",
           "leaves_parallelism_open"]

#: settings a plan decides (the planner searches them; a scenario that gives none of the
#: layout keys leaves parallelism open)
PLAN_KEYS = ("dp", "tp", "pp", "cp", "ep", "zero", "fsdp", "shard_scope", "recompute",
             "pp_schedule", "virtual_stages", "sequence_parallel", "micro_batch", "grad_accum")
_LAYOUT_KEYS = ("dp", "tp", "pp", "cp", "ep", "zero", "fsdp", "shard_scope")
_RECOMPUTE_SHORT = {"none": "", "selective": "sel", "full": "full"}


def plan_settings(plan) -> dict[str, Any]:
    """The settings that give ``plan`` (a :class:`~willitscale.scenario.plan.Plan`) to
    :func:`~willitscale.scenario.build.build_scenario`."""
    return {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep,
            "zero": plan.zero, "shard_scope": plan.shard_scope, "micro_batch": plan.micro_batch,
            "grad_accum": plan.grad_accum, "recompute": plan.recompute,
            "pp_schedule": plan.pp_schedule, "virtual_stages": plan.virtual_stages,
            "sequence_parallel": plan.sequence_parallel}


def plan_flags(plan) -> str:
    """The ``willitscale estimate`` flags that give ``plan``, every knob stated (so the estimate
    fits none of them: estimation.fit)."""
    from dataclasses import replace

    flags = [f"--dp {plan.dp}", f"--tp {plan.tp}", f"--pp {plan.pp}"]
    flags += [f"--{k} {getattr(plan, k)}" for k in ("cp", "ep") if getattr(plan, k) > 1]
    flags.append("--fsdp hybrid" if plan.shard_scope == "node" else f"--zero {plan.zero}")
    if plan.framework and plan.framework != replace(plan, framework="").resolved_framework:
        flags.append(f"--framework {plan.framework}")
    flags += [f"--micro-batch {plan.micro_batch}", f"--recompute {plan.recompute}"]
    if plan.pp > 1:
        flags.append(f"--pp-schedule {plan.pp_schedule}")
        if plan.pp_schedule == "interleaved":
            flags.append(f"--virtual-stages {plan.virtual_stages}")
    if plan.tp > 1:
        flags.append(f"--sequence-parallel {'true' if plan.sequence_parallel else 'false'}")
    return " ".join(flags)


def plan_label(plan) -> str:
    """A short name for a chart axis: ``"TP2 PP4 DP16 ZeRO-1 mb2 sel"`` (degrees above 1, DP
    always; ZeRO stage or FSDP hybrid; micro-batch; recomputation; interleaving; SP)."""
    words = [f"{k.upper()}{getattr(plan, k)}" for k in ("tp", "pp", "cp", "ep") if getattr(plan, k) > 1]
    words.append(f"DP{plan.dp}")
    if plan.zero:
        words.append("FSDP-hybrid" if plan.shard_scope == "node" else f"ZeRO-{plan.zero}")
    words.append(f"mb{plan.micro_batch}")
    words += [w for w in (_RECOMPUTE_SHORT[plan.recompute],) if w]
    if plan.pp > 1 and plan.pp_schedule != "1f1b":
        words.append(f"il{plan.virtual_stages}" if plan.pp_schedule == "interleaved" else "gpipe")
    if plan.sequence_parallel:
        words.append("SP")
    return " ".join(words)


def leaves_parallelism_open(settings: Mapping[str, Any]) -> bool:
    """True when ``settings`` (flags and scenario file merged) give no parallel layout: no
    degree, no ZeRO stage, no FSDP. The micro-batch and recomputation do not count: they are
    batch and memory choices a user often fixes while the layout is still open."""
    return all(settings.get(k) is None for k in _LAYOUT_KEYS)


def _without_plan(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k not in PLAN_KEYS and k != "global_batch"}


def plan_records(settings: Mapping[str, Any], result, *, top: int = 10) -> list[dict[str, Any]]:
    """``top`` best plans of a :class:`~willitscale.plan.search.SearchResult`, best first, each
    estimated on ``settings`` (the cluster and model the search ran on; their own plan keys are
    ignored): ``label``, ``flags``, ``step_time_s``, ``tokens_per_s``, ``mfu``, ``breakdown_s``
    (:meth:`Breakdown.to_json`), ``memory`` (:meth:`MemoryBreakdown.to_json`) and ``fits``."""

    base = _without_plan(settings)
    out = []
    for i in result.ranked[:top]:
        plan = result.batch.plan(int(i))
        est = estimate(build_scenario({**base, **plan_settings(plan)}), allow_oom=True)
        out.append({"label": plan_label(plan), "flags": plan_flags(plan),
                    "step_time_s": est.step_time, "tokens_per_s": est.tokens_per_s,
                    "mfu": est.mfu, "breakdown_s": est.breakdown.to_json(),
                    "memory": est.memory.to_json(), "fits": est.memory.fits})
    return out


def best_plans(settings: Mapping[str, Any], *, top: int = 5, space=None):
    """Search the plans for the model, cluster and global batch of ``settings`` (the batch the
    scenario's own plan gives) and return ``(records, result)``: :func:`plan_records` of the
    ``top`` best and the :class:`~willitscale.plan.search.SearchResult`."""

    given = build_scenario(settings)
    base = _without_plan(settings)
    scenario = build_scenario({**base, "micro_batch": 1})
    result = search(scenario, gpus=scenario.cluster.gpus, global_batch=given.plan.global_batch,
                    space=space or SearchSpace())
    return plan_records(settings, result, top=top), result

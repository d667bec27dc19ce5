"""The step-time estimate of one training job: :func:`estimate`.

The numbers come from the batched engine (:mod:`willitscale.step.engine`) run on a batch of
one plan, so the planner and this function agree by construction. This module dresses them:
the breakdown, memory against HBM (an :class:`~willitscale.scenario.validate.OutOfMemory` verdict
when the plan does not fit), one report per kind of communication, the timeline, the
bottleneck and the assumptions.

One optimizer step, on the GPU that finishes last::

    step = data_loading (exposed) + forward + backward (incl. recomputation)
         + exposed communication (tensor/context/expert parallel, pipeline sends, gradient tail)
         + pipeline bubble + overlap_slowdown + optimizer

For plain data parallelism (docs/estimate.md): DDP buckets all-reduced over the links the
data-parallel group crosses during the last micro-step's backward; fused AdamW at 28 bytes per
parameter at the GPU's memory bandwidth; data loading over the node's storage bandwidth. Model
parallelism: docs/parallelism.md.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from willitscale.compute.efficiency import resolved_efficiency
from willitscale.errors import ConfigError
from willitscale.estimation.calibration_scope import calibration_scope
from willitscale.estimation.dpreport import data_parallel_parts
from willitscale.estimation.memory_verdict import (
    memory_levers,
    memory_of,
    out_of_memory,
    out_of_memory_verdict,
)
from willitscale.estimation.mpreport import model_parallel_parts
from willitscale.estimation.result import (
    Bottleneck,
    Breakdown,
    ComputeKinds,
    Deferred,
    StepEstimate,
)
from willitscale.estimation.verdict.levers import level_probes, outcomes, probe_context
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.scenario import Scenario
from willitscale.step.engine import make_context
from willitscale.step.evaluate import run

__all__ = ["estimate", "estimate_in_context", "resolved_efficiency",
           "memory_of", "out_of_memory_verdict"]

def _check_measured_compute(scenario, result, peak: float) -> None:
    """A measured single-GPU step faster than the GPU's peak allows is a typo, not a GPU."""
    measured = scenario.measured.step_time_one_gpu
    if measured is None:
        return
    executed = float(np.asarray(result.executed_flops)[0])
    optimizer = float(np.asarray(result.optimizer)[0])
    least = executed / peak + optimizer
    if not measured > least:
        raise ConfigError("--compute-time-per-step", f"{measured:g} s",
                          f"> {least:.4g} s: this step executes {executed:.4g} FLOPs per GPU, "
                          f"{executed / peak:.4g} s even at the {scenario.cluster.gpu.name}'s "
                          f"{peak / 1e12:g} TFLOP/s {scenario.dtype} peak, and its optimizer "
                          f"needs {optimizer:.3g} s more at the memory bandwidth")


def estimate(scenario: Scenario, *, allow_oom: bool = False) -> StepEstimate:
    """Predict one training step of ``scenario``.

    Knobs the user did not give (``scenario.unstated``) are fitted first
    (:func:`willitscale.estimation.fit.fit_scenario`); the estimate's ``plan`` and ``knobs``
    say what was taken and why. Raises :class:`~willitscale.scenario.validate.OutOfMemory` (an
    ``Infeasible`` with reason ``out_of_memory``) when the plan does not fit in the GPU;
    with ``allow_oom`` the numbers are computed anyway and the bottleneck is ``out of memory``.
    A measured single-GPU step faster than the peak allows is a ``ConfigError``.
    """

    knobs = {}
    ctx = make_context(scenario)  # the plan's knobs do not change it: one for the fit and the step
    if scenario.unstated:
        from willitscale.estimation.fit import fit_scenario

        scenario, fit = fit_scenario(scenario, context=ctx)
        knobs = fit.to_json() if fit is not None else {}
        ctx = replace(ctx, scenario=_kept_fitted(ctx, scenario))
        scenario = ctx.scenario
    est = estimate_in_context(scenario, ctx, allow_oom=allow_oom)
    return replace(est, knobs=knobs) if knobs else est


def _kept_fitted(ctx, fitted):
    """``fitted``, or the equal fitted scenario an earlier estimate on ``ctx`` kept: the engine
    keeps what it computed per scenario object (:func:`~willitscale.step.engine.memo` keys name
    the scenario by identity), so a repeated estimate finds its memory and bucket layouts
    again instead of recomputing them for a new but equal object."""
    kept = ctx.memo.get(("fitted scenario",))
    if kept is not None and kept == fitted:
        return kept
    ctx.memo[("fitted scenario",)] = fitted
    return fitted


def estimate_in_context(scenario: Scenario, ctx, *, allow_oom: bool = False) -> StepEstimate:
    """:func:`estimate` on an engine context, e.g. one whose links a what-if scaled
    (:func:`willitscale.estimation.verdict.levers.scaled_context`)."""

    result, probed = _step_and_probes(scenario, ctx)
    _check_measured_compute(scenario, result, ctx.peak)
    memory = memory_of(result, scenario)
    oom = out_of_memory(memory, scenario, ctx) if memory.fits is False else None
    if oom is not None and not allow_oom:
        raise oom
    value = lambda name: float(np.asarray(getattr(result, name))[0])  # noqa: E731
    breakdown = Breakdown(
        data_loading=value("data_loading"), forward=value("forward"), backward=value("backward"),
        overlap_slowdown=value("overlap_slowdown"), exposed_comms=value("exposed_comms"),
        optimizer=value("optimizer"), bubble=value("bubble"))
    if scenario.plan.is_data_parallel:
        parts = data_parallel_parts(scenario, ctx, result, breakdown, probed)
    else:
        parts = model_parallel_parts(scenario, ctx, result, breakdown, probed)
    # the engine's step, as the planner ranks it (the parts add up to it within rounding: summed
    # in another order they may differ in the last bit, and `plan`'s flags must give `estimate`
    # the very figure `plan` printed)
    step = value("step_time")
    peak = ctx.peak
    bottleneck = parts.bottleneck
    if oom is not None:  # asked for the numbers anyway: out of memory is still the verdict

        bottleneck = Bottleneck(resource="out of memory", reason=str(oom),
                                fixes=tuple(memory_levers(scenario, ctx)), busy=bottleneck.busy,
                                shares=bottleneck.shares, level=bottleneck.level)

    scope_warnings, scope_assumptions = calibration_scope(scenario)
    model_flops, executed_flops = value("model_flops"), value("executed_flops")
    tokens = scenario.tokens_per_step
    plan = scenario.plan
    return StepEstimate(
        step_time=step, breakdown=breakdown, compute=value("compute"), comms=value("comms"),
        exposed_comms=breakdown.exposed_comms, model_flops=model_flops,
        executed_flops=executed_flops, peak_flops=peak, mfu=model_flops / (step * peak),
        hfu=executed_flops / (step * peak), tokens_per_s=tokens / step,
        samples_per_s=plan.global_batch / step, global_batch=plan.global_batch,
        tokens_per_step=tokens, params=ctx.terms.total_params, gpus=scenario.cluster.gpus,
        nodes=scenario.cluster.nodes, memory=memory, comm_ops=parts.comm_ops,
        bottleneck=bottleneck, assumptions=tuple(parts.assumptions) + scope_assumptions,
        unknowns=parts.unknowns,
        timeline_source=Deferred(lambda: _timeline_with_kinds(parts.timeline(), result)),
        plan=_plan_json(plan), pipeline=parts.pipeline,
        placement=parts.placement,
        warnings=scope_warnings + tuple(scenario.cluster.warnings) + tuple(parts.warnings),
        mfu_causal=float(np.asarray(result.mfu_causal)[0]),
        compute_kinds=_compute_kinds(result), compute_model=_compute_model(ctx),
        network=result.detail.network)


def _step_and_probes(scenario, ctx):
    """The engine's answer for the plan (row 0, with the report's detail) and, in the same pass,
    the probes of the verdict's limiting level (:func:`~.verdict.levers.level_probes`: each
    level's bandwidth doubled) as rows 1.. whose links are scaled (level -> outcome); the probes
    are left to the verdict (None) where they cannot be rows of one pass."""
    probes = level_probes(ctx)
    probe = probe_context(ctx, [{}] + [change for _, change in probes]) if probes else None
    if probe is None:
        return run(ctx, PlanBatch.from_plans([scenario.plan]), detail=True), None
    batch = PlanBatch.from_plans([scenario.plan] * (1 + len(probes)))
    result = run(probe, batch, detail=True)
    outs = outcomes(ctx, batch, result, range(1, 1 + len(probes)))
    return result, {level: out for (level, _), out in zip(probes, outs)}


def _compute_kinds(result) -> ComputeKinds | None:
    kinds = result.detail.compute_kinds or {}
    if not kinds:
        return None
    one = lambda part, k: float(np.asarray(kinds[part][k])[0])  # noqa: E731
    names = ("gemm", "attention", "memory", "overhead")
    total = {k: one("forward", k) + one("backward", k) for k in names}
    return ComputeKinds(**total, recompute=sum(one("recompute", k) for k in names),
                        forward=sum(one("forward", k) for k in names),
                        backward=sum(one("backward", k) for k in names))


def _timeline_with_kinds(timeline, result):
    """The timeline's forward and backward spans carry the per-op model's split of their pass
    by op kind (shares of the pass, in the trace viewer's arguments)."""
    kinds = result.detail.compute_kinds or {}
    if timeline is None or not kinds:
        return timeline
    shares = {}
    for part in ("forward", "backward"):
        seconds = {k: float(np.asarray(v)[0]) for k, v in kinds[part].items()}
        total = sum(seconds.values())
        shares[part] = {f"{k}_share": round(v / total, 4) for k, v in seconds.items()} if total else {}
    spans = tuple(replace(s, args={**dict(s.args), **shares[s.kind]}) if s.kind in shares else s
                  for s in timeline.spans)
    return replace(timeline, spans=spans)


def _compute_model(ctx) -> str:
    if ctx.spec is not None:
        return "per-op model"
    if ctx.efficiency is None:
        return "measured single-GPU step"
    return f"flat {ctx.efficiency.describe()}"


def _plan_json(plan) -> dict:
    return {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep,
            "zero": plan.zero, "shard_scope": plan.shard_scope, "micro_batch": plan.micro_batch,
            "grad_accum": plan.grad_accum, "global_batch": plan.global_batch,
            "recompute": plan.recompute, "pp_schedule": plan.pp_schedule,
            "virtual_stages": plan.virtual_stages, "sequence_parallel": plan.sequence_parallel}

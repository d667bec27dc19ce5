"""Memory against the GPU for one plan: its :class:`MemoryBreakdown`, the names of the bytes
used, and the out-of-memory verdict with the single changes that would make it fit.

The three verdicts (fits, tight, does not fit) are decided in
:mod:`willitscale.memory.device`; the components in docs/memory.md.
"""

from __future__ import annotations

import numpy as np

from willitscale.estimation.result import MemoryBreakdown
from willitscale.memory.frameworks import FRAMEWORK_STAGES, layout_text
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.scenario import Scenario
from willitscale.scenario.validate import OutOfMemory, check_plan
from willitscale.step.engine import make_context, memory_settings
from willitscale.step.evaluate import run
from willitscale.units import format_size

__all__ = ["STAGE_NAMES", "memory_of", "convention_text", "memory_parts_text",
           "out_of_memory_verdict", "out_of_memory", "memory_levers"]

STAGE_NAMES = ("first pipeline stage", "middle pipeline stages", "last pipeline stage")


def memory_of(result, scenario, index: int = 0, *, plan=None) -> MemoryBreakdown:
    """The :class:`MemoryBreakdown` of plan ``index`` of an engine result (its fullest stage);
    ``plan`` is that plan (default: the scenario's)."""
    mem, col = result.memory, int(result.memory_column[index])
    part = lambda x: float(np.asarray(x)[index, col])  # noqa: E731
    plan = plan or scenario.plan
    stage = "" if plan.pp == 1 else STAGE_NAMES[col]
    framework = plan.resolved_framework
    return MemoryBreakdown(
        weights=part(mem.weights), gradients=part(mem.gradients), master=part(mem.master),
        optimizer=part(mem.optimizer), activations=part(mem.activations) if mem.known else None,
        buffers=part(mem.buffers), workspace=part(mem.workspace), step=part(mem.step),
        context=float(mem.context[index]), nccl=float(mem.nccl[index]),
        capacity=scenario.cluster.gpu.memory, stage=stage, fraction=scenario.memory_fraction,
        framework=framework, convention=convention_text(scenario, framework, plan.zero),
        reserved_ratio=float(mem.reserve[index]))


def convention_text(scenario, framework: str, zero: int) -> str:
    """The training-state bytes used, named: the framework's (its formula) or the convention's."""
    settings = memory_settings(scenario)
    formula = layout_text(framework, zero, settings.table)
    if scenario.memory_convention:
        return f"{scenario.memory_convention} ({formula}, --memory-convention)"
    stage = {"megatron": {0: "", 1: " distributed optimizer"},
             "fsdp": {2: " SHARD_GRAD_OP", 3: " FULL_SHARD"}}.get(framework, {}).get(
                 zero, f" ZeRO-{zero}" if framework == "deepspeed" else "")
    return f"{framework}{stage} ({formula})"


def _variants(plan, has_shape: bool):
    """Single changes that reduce memory: sharding the framework offers (or another framework's),
    sequence parallelism, full recomputation, micro-batch 1."""
    from dataclasses import replace

    out = []
    if plan.dp * plan.cp > 1:
        stages = FRAMEWORK_STAGES[plan.framework] if plan.framework else (0, 1, 2, 3)
        for z in (z for z in stages if z > plan.zero):
            variant = replace(plan, zero=z)
            flag = f"--zero {z}"
            if not plan.framework and variant.resolved_framework != plan.resolved_framework:
                flag += f" (--framework {variant.resolved_framework})"
            out.append((flag, variant))
    if has_shape and plan.tp > 1 and not plan.sequence_parallel:
        out.append(("--sequence-parallel", replace(plan, sequence_parallel=True)))
    if plan.recompute != "full" and has_shape:
        out.append(("--recompute full", replace(plan, recompute="full")))
    if plan.micro_batch > 1:
        out.append(("--micro-batch 1 (more accumulation steps)",
                    replace(plan, micro_batch=1, grad_accum=plan.grad_accum * plan.micro_batch)))
    return out


def memory_levers(scenario, ctx) -> list[str]:
    """What each single change would need per GPU (the engine's memory part)."""

    variants = _variants(scenario.plan, scenario.model is not None)
    if not variants:
        return []
    result = run(ctx, PlanBatch.from_plans([p for _, p in variants]), memory_only=True)
    need, verdict = result.memory_per_gpu, result.verdict
    words = {0: " (fits)", 1: " (tight)", 2: ""}
    lines = [f"{flag} would need {format_size(float(n), binary=True)}" + words[int(v)]
             for (flag, _), n, v in zip(variants, need, verdict)]
    fitting = [line for line in lines if line.endswith("(fits)")] or [
        line for line in lines if line.endswith("(tight)")]
    return fitting[:2] or lines[:3]


def out_of_memory_verdict(scenario: Scenario, *, batch_problem: str = ""):
    """The :class:`~willitscale.scenario.validate.OutOfMemory` verdict of ``scenario``'s plan, or
    None when it fits (memory only: no step time). ``batch_problem`` says why the plan cannot
    run as given either (a global batch that does not split over ``dp``): the verdict then
    says it before the changes that would fit, which all still need a batch that splits."""

    check_plan(scenario)
    ctx = make_context(scenario)
    memory = memory_of(run(ctx, PlanBatch.from_plans([scenario.plan]), memory_only=True), scenario)
    if memory.fits is not False:
        return None
    return out_of_memory(memory, scenario, ctx, batch_problem=batch_problem)


def memory_parts_text(memory: MemoryBreakdown) -> str:
    """The components in one line, largest parts first as they are listed in docs/memory.md."""
    gib = lambda x: format_size(x, binary=True)  # noqa: E731
    parts = [("weights", memory.weights), ("gradients", memory.gradients),
             ("master weights", memory.master), ("optimizer states", memory.optimizer)]
    parts.append(("activations", memory.activations))
    parts += [("buffers", memory.buffers), ("workspace", memory.workspace)]
    text = ", ".join(f"{name} {'unknown' if value is None else gib(value)}"
                     for name, value in parts if value is None or value > 0 or name == "activations")
    if memory.step > (memory.activations or 0.0) + memory.buffers + memory.workspace:
        text += f"; the optimizer step's temporaries ({gib(memory.step)}) set the peak"
    return (text + f"; CUDA context {gib(memory.context)}"
            + (f", NCCL {gib(memory.nccl)}" if memory.nccl else ""))


def out_of_memory(memory: MemoryBreakdown, scenario, ctx, *, batch_problem: str = ""):
    gib = lambda x: format_size(x, binary=True)  # noqa: E731
    where = f" on the {memory.stage}" if memory.stage else ""
    levers = memory_levers(scenario, ctx) + ["more model parallelism (--tp up to the GPUs per node, "
                                       "then --pp)", "`willitscale plan` to search plans that fit"]
    room = (f"one {scenario.cluster.gpu.name} has {gib(memory.capacity)}" if memory.fraction >= 1 else
            f"a plan may fill {gib(memory.limit)} of one {scenario.cluster.gpu.name}'s "
            f"{gib(memory.capacity)} (--memory-fraction {memory.fraction:g})")
    also = (f"It cannot run as given either: {batch_problem.rstrip('.')}. With a global batch "
            "that splits: ") if batch_problem else ""
    message = (f"does not fit (out of memory): this plan needs {gib(memory.total)} per GPU{where} "
               f"({memory_parts_text(memory)}; {memory.convention}), {gib(-memory.headroom)} more "
               f"than {room}. " + also + "; ".join(levers))
    return OutOfMemory(message, memory)



"""Which resource limits a step, why, and the least single changes that would fix it.

One criterion (:mod:`.levers`): the **exposed share** of the step. Communication that compute
does not hide is the bottleneck when it exceeds :data:`~.levers.EXPOSED_SHARE_LIMIT` (5%) of the
step: the network level that limits it (:func:`~.levers.limiting_level`, the intra-node link
when NVLink or PCIe paces the collective, else the NICs) is named. Else storage when exposed
data loading exceeds it, else compute. "Compute" means the same everywhere (text, JSON
``compute_s``, ``busy_s``, ``scale``): forward + backward incl. recomputation; the overlap
slowdown and the optimizer are named separately.

Fixes are computed with the full model, each the least change that brings the exposed share to
the limit (the criterion ``requirements`` uses, so the two agree):

* the bandwidth of the limiting level (both levels together when raising one alone only moves
  the limit to the other; none when latency-bound);
* more gradient accumulation: DDP syncs once per step and hides it only behind the last
  micro-batch's backward, so more micro-steps do not hide more, they dilute the exposed part;
* a larger micro-batch (a longer last backward hides more), with its memory;
* bf16 gradient reduction when gradients travel in fp32.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from willitscale.estimation.result import Bottleneck
from willitscale.estimation.verdict.levers import (
    EXPOSED_SHARE_LIMIT,
    LEVEL_RESOURCE,
    exposed_share,
    limiting_level,
    needed_bandwidth,
    outcome,
)
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.validate import structural_reasons
from willitscale.step.engine import ALL_COLUMNS, with_ddp
from willitscale.step.evaluate import run
from willitscale.units import format_bandwidth, format_size, format_time

__all__ = ["find_bottleneck", "network_fixes", "verdict_resource", "level_description",
           "MAX_GRAD_ACCUM", "MAX_MICRO_BATCH_FACTOR"]

MAX_GRAD_ACCUM = 1024  #: the largest gradient accumulation a fix proposes
MAX_MICRO_BATCH_FACTOR = 64  #: the largest micro-batch multiple a fix proposes


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def level_resource(ctx, level: str | None) -> str:
    """The resource name of a limiting level (a measured all-reduce: the network it crossed)."""
    if level in LEVEL_RESOURCE:
        return LEVEL_RESOURCE[level]
    return "inter-node network" if ctx.scenario.cluster.nodes > 1 else "intra-node network"


def level_description(ctx, level: str | None) -> str:
    """One phrase naming the limiting link with its effective bandwidth."""
    links, nodes = ctx.links, ctx.scenario.cluster.nodes
    if level == "intra":
        text = (f"the intra-node link limits it: {links.intra_name}, "
                f"{format_bandwidth(links.intra_bandwidth)} effective per GPU")
        if nodes > 1:
            text += (f" (the NICs, {format_bandwidth(links.inter_bandwidth)} per node, are not "
                     "the limit)")
        return text
    if level == "inter":
        g = links.gpus_per_node
        return (f"the inter-node link limits it: {links.inter_name}, "
                f"{format_bandwidth(links.inter_bandwidth)} effective per node"
                + (f", shared by its {g} GPUs" if g > 1 else ""))
    if level == "measured":
        m = ctx.scenario.measured
        rate = (m.allreduce_size or 0.0) / m.allreduce_time if m.allreduce_size else None
        return "the measured all-reduce sets its pace" + (
            f" ({format_bandwidth(rate)} of gradients)" if rate else "")
    return "latency-bound: more bandwidth barely changes it"


def verdict_resource(ctx, result_share: float, data_share: float, level: str | None) -> str:
    """``compute``, ``storage`` or the limiting network, by the exposed shares of the step."""
    worst = max(result_share, data_share)
    if worst <= EXPOSED_SHARE_LIMIT:
        return "compute"
    return level_resource(ctx, level) if result_share >= data_share else "storage"


def _rate(ctx, level: str, factor: float) -> str:
    links = ctx.links
    if level == "intra":
        now = links.intra_line_rate
        return (f"intra-node link >= {format_bandwidth(now * factor)} per GPU line rate (now "
                f"{format_bandwidth(now)})")
    if level == "inter":
        now = links.inter_line_rate
        return (f"inter-node bandwidth >= {format_bandwidth(now * factor, bits=True)} per node "
                f"line rate (now {format_bandwidth(now, bits=True)})")
    return f"an all-reduce {factor:.3g}x faster than the measured one"


def _bandwidth_fixes(ctx, batch, level: str, base=None) -> list[str]:
    """The bandwidth fix, from :func:`~.levers.needed_bandwidth` (``requirements`` and the report
    call the same search, so the figure agrees everywhere)."""
    limit = _pct(EXPOSED_SHARE_LIMIT)
    need = needed_bandwidth(ctx, batch, level, base=base)
    if need.factor is not None:
        return [f"{_rate(ctx, level, need.factor)}: exposed communication then "
                f"{_pct(need.at.share)} of the step (<= {limit})"]
    if need.both is not None:
        both, other = need.both, need.limited_by
        return [f"the {level}-node link alone cannot: the {other}-node link limits next. Both "
                f"{both:.3g}x faster ({_rate(ctx, 'intra', both)}; {_rate(ctx, 'inter', both)}): "
                f"exposed then {_pct(need.both_at.share)} of the step"]
    last = need.both_at if need.both_at is not None else need.at
    return [f"more bandwidth alone cannot bring exposed communication under {limit}: even 10,000x "
            f"leaves {_pct(last.share)} (latency, or a part no link speed shortens)"]


def _least_row(result, ok):
    rows = np.flatnonzero(ok)
    return None if rows.size == 0 else int(rows[0])


def _runnable(scenario, ctx, batch):
    """Plans of ``batch`` the model can run (an interleaved pipeline needs the micro-batches to
    be a multiple of its stages, ...): :func:`~willitscale.scenario.validate.structural_reasons` is 0."""

    return structural_reasons(batch.degrees(), ctx.terms, scenario.model,
                              gpus_per_node=ctx.links.gpus_per_node, seq_len=scenario.seq_len) == 0


def _variants(plan, **column) -> PlanBatch:
    """``plan`` once per value of one column (``grad_accum`` or ``micro_batch``, positive
    integers: every other field, the implied framework included, stays the plan's)."""
    (name, values), = column.items()
    values = np.asarray(values, dtype=np.int64)
    one = PlanBatch.from_plans([plan])
    return replace(one.take(np.zeros(len(values), dtype=int)), **{name: values})


def _joined(*batches) -> PlanBatch:
    """The plans of ``batches`` as one batch, in order."""
    first = batches[0]
    return replace(first, **{n: np.concatenate([getattr(b, n) for b in batches])
                             for n in ALL_COLUMNS})


def _batch_fixes(scenario, ctx, base) -> list[str]:
    """More gradient accumulation; a larger micro-batch: both sets of variants as the rows of
    one batched engine run (each row is computed as it would be alone)."""

    plan, limit, out = scenario.plan, EXPOSED_SHARE_LIMIT, []
    accum = np.arange(plan.grad_accum + 1, MAX_GRAD_ACCUM + 1)
    factors = np.arange(2, MAX_MICRO_BATCH_FACTOR + 1)
    micro = _variants(plan, micro_batch=plan.micro_batch * factors)
    batch = _joined(_variants(plan, grad_accum=accum), micro) if accum.size else micro
    r = run(ctx, batch)
    share = exposed_share(r.exposed_comms, r.step_time)
    ok = (share <= limit) & _runnable(scenario, ctx, batch)
    i = _least_row(r, ok[:accum.size])
    if i is not None:
        a = int(accum[i])
        out.append(f"--grad-accum {a} (global batch {plan.micro_batch * a * plan.dp}): the "
                   "gradients still sync once, hidden only by the last micro-batch's backward; "
                   f"{a} micro-steps dilute the exposed part to "
                   f"{_pct(float(r.exposed_comms[i] / r.step_time[i]))} of the step")
    i = _least_row(r, ok[accum.size:])
    if i is not None:
        k, i = int(factors[i]), i + accum.size
        need = float(r.memory_per_gpu[i])
        room = scenario.memory_fraction * scenario.cluster.gpu.memory
        known = r.memory.known
        mem = (f"needs {format_size(need, binary=True)} per GPU"
               + ("" if not known else (" (fits)" if need <= room else " (does not fit)"))
               + ("" if known else ", plus activations: if memory allows"))
        out.append(f"--micro-batch {plan.micro_batch * k} ({k}x; global batch "
                   f"{plan.micro_batch * k * plan.grad_accum * plan.dp}): a longer last backward "
                   f"hides more; exposed then {_pct(float(share[i]))} of the step; {mem}")
    return out


def _bf16_context(scenario, ctx):
    """``ctx`` with gradients reduced in bf16 (:func:`~willitscale.step.engine.with_ddp`), kept
    on the context for ``scenario`` (so a repeated estimate finds the engine's parts it keeps
    per scenario object again)."""
    key = ("bf16 gradients", id(scenario))
    kept = ctx.memo.get(key)
    if kept is None or kept[0] is not scenario:
        half = replace(scenario, ddp=replace(scenario.ddp, grad_reduce_dtype="bf16"))
        kept = ctx.memo[key] = (scenario, with_ddp(ctx, half))
    return kept[1]


def _bf16_fix(scenario, ctx, base) -> list[str]:
    if scenario.ddp.grad_reduce_dtype != "fp32":
        return []

    at = outcome(_bf16_context(scenario, ctx), PlanBatch.from_plans([scenario.plan]))
    if at.share > 0.9 * base.share:  # not worth a line unless it cuts a tenth
        return []
    enough = "" if at.share <= EXPOSED_SHARE_LIMIT else " (not enough alone)"
    return [f"reduce gradients in bf16 (--grad-reduce-dtype bf16, or a bf16 compression hook): "
            f"half the bytes; exposed then {_pct(at.share)} of the step{enough}"]


def network_fixes(scenario, ctx, base, level: str | None) -> tuple[str, ...]:
    """The computed fixes when communication is the bottleneck (see the module docstring)."""

    batch = PlanBatch.from_plans([scenario.plan])
    fixes = _bandwidth_fixes(ctx, batch, level, base) if level is not None else []
    return tuple(fixes + _batch_fixes(scenario, ctx, base) + _bf16_fix(scenario, ctx, base))


def find_bottleneck(*, scenario, ctx, result, breakdown, ops, probed=None) -> Bottleneck:
    """The data-parallel step's bottleneck with a one-line reason and computed fixes;
    ``probed``: :func:`~.levers.limiting_level`'s probes when already evaluated."""

    step = breakdown.total
    base = outcome(ctx, PlanBatch.from_plans([scenario.plan]), result=result)
    comm_share, data_share = base.share, breakdown.data_loading / step
    level = (limiting_level(ctx, PlanBatch.from_plans([scenario.plan]), base, probed)
             if base.comms > 0 else None)
    resource = verdict_resource(ctx, comm_share, data_share, level)
    compute = breakdown.forward + breakdown.backward
    op = ops[0] if ops else None
    comms, exposed = base.comms, breakdown.exposed_comms
    extras = [f"{format_time(t)} {what}" for what, t in (("overlap slowdown", breakdown.overlap_slowdown),
                                                        ("optimizer", breakdown.optimizer)) if t > 0]
    on_top = f" (+ {', '.join(extras)})" if extras else ""
    fixes: tuple[str, ...] = ()
    if resource.endswith("network"):
        reason = (f"{format_time(exposed)} ({_pct(comm_share)}) of the {format_time(step)} step "
                  f"waits for the gradient all-reduce: {format_time(comms)} all-reducing "
                  f"{format_size(op.bytes)}, {format_time(comms - exposed)} of it hidden under "
                  f"backward; {level_description(ctx, level)}")
        fixes = network_fixes(scenario, ctx, base, level)
    elif resource == "storage":
        data = scenario.data
        rest = step - breakdown.data_loading
        reason = (f"storage: {format_time(breakdown.data_loading)} ({_pct(data_share)}) of the "
                  f"step waits for the step's samples at {format_bandwidth(data.storage_bandwidth)} "
                  f"per node")
        load = float(np.asarray(result.detail.load)[0])
        fixes = (f"storage bandwidth >= {format_bandwidth(data.storage_bandwidth * load / rest)} "
                 "per node (the reads then hide behind the rest of the step)",)
    elif comms > 0:
        hidden = ("hides under backward" if comm_share <= 0.01 else
                  f"leaves {format_time(exposed)} ({_pct(comm_share)}) exposed, under the "
                  f"{_pct(EXPOSED_SHARE_LIMIT)} that would make it the bottleneck")
        reason = (f"compute: forward + backward {format_time(compute)} of the {format_time(step)} "
                  f"step{on_top}; the gradient all-reduce ({format_time(comms)}, "
                  f"{level_description(ctx, level)}) {hidden}")
    else:
        reason = (f"compute: forward + backward {format_time(compute)} of the {format_time(step)} "
                  f"step{on_top}; one GPU, no gradients to synchronise")
    busy = [("compute", compute), ("communication", comms)]
    if scenario.data is not None:
        busy.append(("storage", float(np.asarray(result.detail.load)[0])))
    return Bottleneck(resource=resource, reason=reason, fixes=fixes, busy=tuple(busy),
                      shares=(("communication", comm_share), ("data_loading", data_share),
                              ("bubble", breakdown.bubble / step)),
                      level=level)

"""Why the planner's top plans: each degree compared with its neighbours, with the numbers.

For a ranked plan and a field (``tp``, ``pp``, ...), the neighbours are the halved and doubled
values. For each, :func:`neighbour_line` reports the best plan with that value anywhere in the
searched space: how much slower it is, or why none runs (the most common rejection reason, and
for out-of-memory the least memory any of them needs). The plan's own line says what the value
implies (TP inside a node, the pipeline bubble, the memory headroom).
"""

from __future__ import annotations

import numpy as np

from willitscale.scenario.validate import REASONS
from willitscale.units import format_size, format_time

__all__ = ["explain_plan", "neighbour_line"]

_WORDS = {
    "out_of_memory": "out of memory", "tp_not_dividing_heads": "does not divide the heads",
    "pp_not_dividing_layers": "does not divide the layers", "tp_wider_than_node": "wider than a node",
    "batch_not_divisible": "the batch does not split", "cp_not_dividing_sequence":
    "does not divide the sequence", "interleaved_needs_microbatches": "too few micro-batches to interleave",
    "virtual_stages_not_dividing_layers": "layers do not split into chunks",
}


def _gib(x: float) -> str:
    return format_size(x, binary=True)


def _parts(result, i: int) -> dict[str, float]:
    """Plan ``i``'s step in four parts: compute (forward + backward), bubble, exposed
    communication, and the rest (overlap slowdown, optimizer, data loading)."""
    step, bubble, exposed, compute = (float(x[i]) for x in (
        result.step_time, result.bubble, result.exposed, result.compute))
    return {"compute": compute, "bubble": bubble, "exposed communication": exposed,
            "overlap slowdown and optimizer": step - bubble - exposed - compute}


def why_different(result, other: int, index: int) -> str:
    """The part of the step that differs most between plan ``other`` and plan ``index``, signed
    as ``other`` minus ``index``: ``"bubble +412 ms"``."""
    a, b = _parts(result, other), _parts(result, index)
    sign = np.sign(float(result.step_time[other]) - float(result.step_time[index])) or 1.0
    name = max(a, key=lambda k: sign * (a[k] - b[k]))
    delta = a[name] - b[name]
    return f"{name} {'+' if delta >= 0 else '-'}{format_time(abs(delta))}"


def neighbour_line(result, field: str, value: int, best: float, index: int | None = None) -> str | None:
    """``"tp 8: +3.1% (18.9 s; exposed communication +512 ms)"`` or ``"tp 2: out of memory (the
    least needs 93 GiB)"``; None if never a candidate. With ``index`` (the plan explained), the
    part of the step that makes the neighbour slower (or faster) is named."""
    values = getattr(result.batch, field)
    rows = values == value
    if not np.any(rows):
        return None
    feasible = rows & (result.reason == 0) & np.isfinite(result.step_time)
    if np.any(feasible):
        candidates = np.nonzero(feasible)[0]
        j = int(candidates[np.argmin(result.step_time[candidates])])
        t = float(result.step_time[j])
        why = f"; {why_different(result, j, index)}" if index is not None else ""
        return f"{field} {value}: {100 * (t / best - 1):+.1f}% ({format_time(t)}{why})"
    if index is not None:  # why the plans most like this one fail, not the whole column
        like = rows.copy()
        for other in ("tp", "cp", "ep", "zero", "shard_node", "recompute", "sequence_parallel"):
            if other != field:
                column = getattr(result.batch, other)
                like &= column == column[index]
        rows = like if np.any(like) else rows
    codes = np.bincount(result.reason[rows], minlength=len(REASONS))
    code = int(np.argmax(codes[1:]) + 1)
    name = REASONS[code][0]
    text = f"{field} {value}: {_WORDS.get(name, name.replace('_', ' '))}"
    if name == "out_of_memory":
        need = float(np.nanmin(np.where(rows & (result.reason == code), result.memory, np.nan)))
        text += f" (the least needs {_gib(need)})"
    return text


def _neighbours(result, field: str, value: int, best: float, others=None, index=None) -> str:
    others = (value // 2, value * 2) if others is None else others
    lines = [neighbour_line(result, field, v, best, index) for v in others if v >= 0 and v != value]
    lines = [x for x in lines if x]
    return "; best with " + ", ".join(lines) if lines else ""


def explain_plan(result, index: int, *, gpus_per_node: int) -> list[str]:
    """A few lines on why plan ``index`` of a search result ranks where it does."""
    b = result.batch
    plan = b.plan(index)
    step = float(result.step_time[index])
    tp, pp = plan.tp, plan.pp
    where = "inside one node" if tp <= gpus_per_node else "across nodes"
    what = "reduce-scatters/all-gathers" if plan.sequence_parallel else "all-reduces"
    head = f"why tp {tp} ({what} {where})" if tp > 1 else "why tp 1 (no tensor-parallel traffic)"
    lines = [head + _neighbours(result, "tp", tp, step, index=index)]
    bubble = float(result.bubble[index])
    v = plan.virtual_stages if plan.pp_schedule == "interleaved" else 1
    sched = f"{plan.pp_schedule}" + (f" v={v}" if v > 1 else "")
    if pp > 1:
        lines.append(f"why pp {pp} (bubble {format_time(bubble)}, {bubble / step:.1%} of the step, "
                     f"{sched}, {plan.grad_accum} micro-batches)"
                     + _neighbours(result, "pp", pp, step, index=index))
    else:
        lines.append("why pp 1 (no pipeline bubble)" + _neighbours(result, "pp", pp, step, index=index))
    mem = float(result.memory[index])
    zero = {0: "no ZeRO", 1: "ZeRO-1", 2: "ZeRO-2",
            3: "ZeRO-3" + (" hybrid" if plan.shard_scope == "node" else "")}
    fraction = result.extra.get("memory_fraction", 1.0)
    lines.append(f"memory {_gib(mem)} of {_gib(fraction * result.capacity)} usable "
                 f"({fraction:g} x {_gib(result.capacity)}; {zero[plan.zero]}, recompute "
                 f"{plan.recompute}, micro-batch {plan.micro_batch})"
                 + _neighbours(result, "zero", plan.zero, step, (plan.zero - 1, plan.zero + 1),
                               index=index))
    if plan.cp > 1 or plan.dp > 1:
        many = "micro-batch" if plan.grad_accum == 1 else "micro-batches"
        lines.append(f"dp {plan.dp} x cp {plan.cp}: {plan.grad_accum} {many} per pipeline; "
                     f"exposed communication {format_time(float(result.exposed[index]))}")
    return lines

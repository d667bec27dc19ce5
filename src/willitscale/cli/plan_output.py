"""Printing a planner result: JSON (unit-named keys) or a ranked table with explanations."""

from __future__ import annotations

import numpy as np

from willitscale.report.plans import plan_flags
from willitscale.units import format_size, format_time

__all__ = ["plan_json", "plan_row", "plan_flags", "estimate_flags", "plan_warnings", "print_plans"]


def plan_row(result, index: int, *, peak: float) -> dict:
    """One ranked plan as JSON: :meth:`SearchResult.row` (MFU over ``peak``) and its flags."""
    row = {k: v for k, v in result.row(index).items() if k != "reason"}
    row["mfu"] = row["tflops_per_gpu"] * 1e12 / peak
    row["hfu"] = row["hardware_tflops_per_gpu"] * 1e12 / peak
    plan = result.batch.plan(index)
    row["flags"] = estimate_flags(plan, memory_fraction=result.extra.get("memory_fraction"))
    return row


def estimate_flags(plan, *, memory_fraction: float | None = None) -> str:
    """:func:`~willitscale.report.plans.plan_flags`, with the planner's ``--memory-fraction``
    when it is not the default, so ``estimate`` judges "fits" as the planner did."""
    from willitscale.memory.stage import DEFAULT_MEMORY_FRACTION

    flags = plan_flags(plan)
    if memory_fraction is not None and memory_fraction != DEFAULT_MEMORY_FRACTION:
        flags += f" --memory-fraction {memory_fraction:g}"
    return flags


def _degrees(r: dict) -> str:
    parts = [f"tp {r['tp']}", f"pp {r['pp']}", f"dp {r['dp']}"]
    parts += [f"{k} {r[k]}" for k in ("cp", "ep") if r[k] > 1]
    return " ".join(parts)


def _choices(r: dict) -> str:
    zero = "zh" if r["shard_scope"] == "node" else f"z{r['zero']}"
    sched = "" if r["pp"] == 1 else (f" il{r['virtual_stages']}" if r["pp_schedule"] == "interleaved"
                                     else f" {r['pp_schedule']}")
    rec = {"none": "none", "selective": "sel", "full": "full"}[r["recompute"]]
    return f"{zero} mb{r['micro_batch']} {rec}{sched}" + (" sp" if r["sequence_parallel"] else "")


def plan_json(result, scenario, *, top: int, explain: int) -> dict:
    from willitscale.plan.explain import explain_plan

    g = scenario.cluster.node.gpus_per_node
    peak = scenario.cluster.gpu.peak(scenario.dtype)
    rows = []
    for rank, i in enumerate(result.ranked[:top], start=1):
        row = {"rank": rank, **plan_row(result, int(i), peak=peak)}
        if rank <= explain:
            row["explanation"] = explain_plan(result, int(i), gpus_per_node=g)
        rows.append(row)
    return {
        "model": scenario.model.name if scenario.model is not None else None,
        "params": float(scenario.params) if scenario.model is None else None,
        "gpu": scenario.cluster.gpu.name, "gpus": scenario.cluster.gpus, "gpus_per_node": g,
        "nodes": scenario.cluster.nodes, "global_batch": result.global_batch,
        "seq_len": result.seq_len, "evaluated": result.evaluated,
        "feasible": int(np.sum(result.reason == 0)), "timed": int(len(result.ranked)),
        "rejected": result.rejected(),
        "memory_limit_bytes": result.extra["memory_fraction"] * result.capacity,
        "seconds": result.seconds, "plans_per_second": result.plans_per_second,
        "interrupted": result.interrupted, "plans": rows,
        "memory_complete": scenario.model is not None, "warnings": list(plan_warnings(scenario)),
        "network": result.extra.get("network", "analytic"),
    }


def plan_warnings(scenario) -> tuple[str, ...]:
    """What about the scenario deserves a second look before trusting the ranking: the
    calibration applied to a cluster it does not describe, the cluster's own warnings."""
    from willitscale.estimation.calibration_scope import calibration_scope

    return calibration_scope(scenario)[0] + tuple(scenario.cluster.warnings)


def print_plans(result, scenario, *, top: int, explain: int, file=None) -> None:
    from rich.markup import escape

    from willitscale.cli.output import console, print_table
    from willitscale.plan.explain import explain_plan

    out = console(file)
    g = scenario.cluster.node.gpus_per_node
    peak = scenario.cluster.gpu.peak(scenario.dtype)
    name = scenario.model.name if scenario.model is not None else f"{scenario.params:g} params"
    out.print(f"[bold]Plans[/bold] for {escape(name)} on {scenario.cluster.gpus} x "
              f"{scenario.cluster.gpu.name} ({scenario.cluster.nodes} nodes x {g}), global batch "
              f"{result.global_batch} x {result.seq_len} tokens")
    for warning in plan_warnings(scenario):
        out.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    if result.extra.get("network"):
        out.print(f"[dim]network: {escape(result.extra['network'])}[/dim]")
    feasible = int(np.sum(result.reason == 0))
    out.print(f"{result.evaluated:,} plans evaluated in {result.seconds:.2f} s "
              f"({result.plans_per_second:,.0f}/s); {feasible:,} fit under "
              f"{format_size(result.extra['memory_fraction'] * result.capacity, binary=True)} per GPU")
    rows = []
    moe = bool(np.any(result.batch.ep[result.ranked[:top]] > 1))
    for rank, i in enumerate(result.ranked[:top], start=1):
        r = plan_row(result, int(i), peak=peak)
        rows.append((rank, r["tp"], r["pp"], r["dp"], r["cp"], *((r["ep"],) if moe else ()),
                     _choices(r), format_time(r["step_time_s"]),
                     f"{r['tflops_per_gpu']:.0f}/{r['hardware_tflops_per_gpu']:.0f}",
                     f"{r['mfu']:.3f}", f"{r['memory_per_gpu_bytes'] / 2**30:.1f}"))
    print_table(None, ["#", "tp", "pp", "dp", "cp", *(("ep",) if moe else ()), "choices", "step",
                       "TFLOP/s", "MFU", "mem"], rows,
                units=["", "", "", "", "", *(("",) if moe else ()), "", "", "mod/ex", "", "GiB"],
                file=file)
    out.print("[dim]choices: z ZeRO stage (zh FSDP hybrid), mb micro-batch, recomputation "
              "none/sel/full, schedule (il v: interleaved, v chunks), sp sequence parallel[/dim]")
    for rank, i in enumerate(result.ranked[:explain], start=1):
        flags = estimate_flags(result.batch.plan(int(i)), memory_fraction=result.extra.get("memory_fraction"))
        out.print(f"[bold]#{rank}[/bold] {escape(flags)}")
        for line in explain_plan(result, int(i), gpus_per_node=g):
            out.print(f"   {escape(line)}")
    if scenario.model is None:
        out.print("[yellow]No model shape (--params): memory counts the training state only, "
                  "activations unknown; only data parallelism and ZeRO are searched.[/yellow]")
    rejected = result.rejected()
    if rejected:
        print_table("Rejected", ["reason", "plans"], sorted(rejected.items(), key=lambda x: -x[1]),
                    file=file)
    if not len(result.ranked):
        out.print("[red]No plan fits.[/red] More GPUs, a smaller model or batch, or "
                  "--memory-fraction closer to 1.")

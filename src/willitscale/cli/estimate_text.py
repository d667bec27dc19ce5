"""The readable (rich) rendering of a :class:`~willitscale.plan.result.StepEstimate`."""

from __future__ import annotations

from willitscale.units import format_bandwidth, format_count, format_size, format_time

__all__ = ["print_estimate", "scenario_line"]


def scenario_line(scenario) -> str:
    """One line naming the model, the cluster and the batch."""
    model = (f"{scenario.model.name}" if scenario.model is not None
             else f"{format_count(scenario.params)} parameters (no shape)")
    c = scenario.cluster
    node = c.node
    inter = (f", {node.nics} x {format_bandwidth(node.nic.bandwidth, bits=True)} per node"
             if c.nodes > 1 else "")
    plan = scenario.plan
    return (f"{model} on {c.nodes} node(s) x {node.gpus_per_node} {c.gpu.name} = {c.gpus} GPUs"
            f"{inter}; global batch {plan.global_batch} x {scenario.seq_len} tokens "
            f"(micro-batch {plan.micro_batch}, grad-accum {plan.grad_accum}), "
            f"recompute {plan.recompute}")


def _share(part: float, total: float) -> str:
    return f"{100 * part / total:.0f}%" if total > 0 else "-"


def print_estimate(est, scenario, *, width: int = 72, file=None) -> None:
    """Headline, breakdown table, communication, memory, bottleneck, timeline, assumptions."""
    from willitscale.cli.output import console, print_table
    from willitscale.report.timeline import render_timeline

    out = console(file)
    out.print(f"[bold]Estimate[/bold]: {scenario_line(scenario)}")
    out.print(f"step time [bold]{format_time(est.step_time)}[/bold]  ·  "
              f"{est.tokens_per_s:,.0f} tokens/s  ·  MFU {est.mfu:.3f}  ·  HFU {est.hfu:.3f}")
    b = est.breakdown
    rows = [(name, format_time(value), _share(value, est.step_time)) for name, value in (
        ("data loading", b.data_loading), ("forward", b.forward), ("backward (+recompute)", b.backward),
        ("overlap slowdown", b.overlap_slowdown), ("exposed communication", b.exposed_comms),
        ("optimizer", b.optimizer), ("pipeline bubble", b.bubble))]
    rows.append(("step", format_time(est.step_time), "100%"))
    print_table("Where the step goes", ["part", "time", "share"], rows, file=file)
    for op in est.comm_ops:
        out.print(f"[bold]Communication[/bold]: {format_time(est.comms)} total, "
                  f"{format_time(est.exposed_comms)} exposed, "
                  f"{format_time(est.comms - est.exposed_comms)} hidden under backward")
        out.print(f"  {op.name}: {format_size(op.bytes)} per GPU in {op.calls} bucket(s), "
                  f"{op.group}; {op.algorithm}")
        out.print(f"  crosses: {' -> '.join(op.links)}")
    m = est.memory
    known = "" if m.activations is not None else " (training state only: activations unknown)"
    verdict = {True: "fits", False: "[red]does not fit[/red]", None: "state fits; total unknown"}[m.fits]
    out.print(f"[bold]Memory per GPU[/bold]: {format_size(m.total)} of {format_size(m.capacity)} "
              f"HBM{known}: {verdict}  (weights {format_size(m.weights)}, gradients "
              f"{format_size(m.gradients)}, optimizer {format_size(m.optimizer)}, activations "
              f"{'?' if m.activations is None else format_size(m.activations)}; {m.convention})")
    out.print(f"[bold]Bottleneck: {est.bottleneck.resource}[/bold] — {est.bottleneck.reason}")
    for fix in est.bottleneck.fixes:
        out.print(f"  fix: {fix}")
    out.print("[bold]Timeline[/bold] (one step, rank 0):")
    out.print(render_timeline(est.timeline, width=width), markup=False, highlight=False)
    out.print("[dim]Assumptions:[/dim]")
    for what, value in est.assumptions:
        out.print(f"[dim]  {what}: {value}[/dim]", markup=True, highlight=False)
    for unknown in est.unknowns:
        out.print(f"[yellow]  not computed: {unknown}[/yellow]")

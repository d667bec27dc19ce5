"""The readable (rich) rendering of a :class:`~willitscale.plan.result.StepEstimate`.

Laid out for an 80-column terminal: a headline, the breakdown table, communication, memory,
the bottleneck with its fixes, the timeline lanes, then the assumptions.
"""

from __future__ import annotations

from rich.markup import escape

from willitscale.units import format_bandwidth, format_count, format_size, format_time

__all__ = ["print_estimate", "scenario_line", "DEFAULT_WIDTH"]

DEFAULT_WIDTH = 64  #: timeline characters; with the lane labels the lines fit 80 columns


def scenario_line(scenario) -> str:
    """Two short lines naming the model, the cluster and the batch."""
    model = (scenario.model.name if scenario.model is not None
             else f"{format_count(scenario.params)} params (no shape)")
    c, plan = scenario.cluster, scenario.plan
    node = c.node
    inter = (f" · {node.nics} x {format_bandwidth(node.nic.bandwidth, bits=True)} per node"
             if c.nodes > 1 else "")
    return (f"{model} · {c.nodes} x {node.gpus_per_node} {c.gpu.name} ({c.gpus} GPUs){inter}\n"
            f"batch {plan.global_batch} x {scenario.seq_len} tokens (micro-batch "
            f"{plan.micro_batch}, grad-accum {plan.grad_accum}) · recompute {plan.recompute}")


def _share(part: float, total: float) -> str:
    return f"{100 * part / total:.0f}%" if total > 0 else "-"


def _breakdown(est, file) -> None:
    from willitscale.cli.output import print_table

    b = est.breakdown
    parts = (("data loading", b.data_loading), ("forward", b.forward),
             ("backward (incl. recompute)", b.backward), ("overlap slowdown", b.overlap_slowdown),
             ("exposed communication", b.exposed_comms), ("optimizer", b.optimizer),
             ("pipeline bubble", b.bubble))
    rows = [(name, format_time(value), _share(value, est.step_time)) for name, value in parts]
    rows.append(("step", format_time(est.step_time), "100%"))
    print_table(None, ["part of the step", "time", "share"], rows, file=file)


def _memory_line(m) -> str:
    gib = lambda x: format_size(x, binary=True)  # noqa: E731 - HBM is sold in GiB
    verdict = {True: "fits", False: "[red]does not fit[/red]",
               None: "the state fits; activations unknown"}[m.fits]
    acts = "?" if m.activations is None else gib(m.activations)
    return (f"[bold]Memory per GPU[/bold] {gib(m.total)} of {gib(m.capacity)}: {verdict}\n"
            f"  weights {gib(m.weights)} · gradients {gib(m.gradients)} · optimizer "
            f"{gib(m.optimizer)} · activations {acts}  ({escape(m.convention)})")


def print_estimate(est, scenario, *, width: int = DEFAULT_WIDTH, brief: bool = False,
                   file=None) -> None:
    """Headline, breakdown table, communication, memory, bottleneck, timeline, assumptions
    (``brief``: without the assumptions)."""
    from willitscale.cli.output import console
    from willitscale.report.timeline import render_timeline

    out = console(file)
    out.print(f"[bold]Estimate[/bold] {escape(scenario_line(scenario))}")
    out.print(f"[bold]step {format_time(est.step_time)}[/bold] · {est.tokens_per_s:,.0f} tokens/s"
              f" · MFU {est.mfu:.3f} · HFU {est.hfu:.3f}")
    _breakdown(est, file)
    out.print(f"[bold]Communication[/bold] {format_time(est.comms)} per step: "
              f"{format_time(est.exposed_comms)} exposed, "
              f"{format_time(est.comms - est.exposed_comms)} hidden under backward")
    for op in est.comm_ops:
        out.print(escape(f"  {op.name}: {format_size(op.bytes)} in {op.calls} bucket(s) over "
                         f"{op.ranks} GPUs; {op.algorithm}"))
        out.print(escape(f"  crosses {' -> '.join(op.links)}"))
    out.print(_memory_line(est.memory))
    out.print(f"[bold]Bottleneck: {escape(est.bottleneck.resource)}[/bold] — "
              f"{escape(est.bottleneck.reason)}")
    for fix in est.bottleneck.fixes:
        out.print(f"  [green]fix[/green] {escape(fix)}")
    out.print("[bold]Timeline[/bold] one step on rank 0 (--trace FILE for Perfetto):")
    out.print(render_timeline(est.timeline, width=width), markup=False, highlight=False)
    if brief:
        out.print("[dim]Assumptions and defaults: willitscale estimate ... (or --json)[/dim]")
        return
    out.print("[dim]Assumptions[/dim]")
    for what, value in est.assumptions:
        out.print(f"[dim]  {escape(what)}: {escape(value)}[/dim]")
    for unknown in est.unknowns:
        out.print(f"[yellow]  not computed: {escape(unknown)}[/yellow]")

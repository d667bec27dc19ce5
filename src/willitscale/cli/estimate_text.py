"""The readable (rich) rendering of a :class:`~willitscale.estimation.result.StepEstimate`.

Laid out for an 80-column terminal: a headline, the breakdown table, communication, memory,
the bottleneck with its fixes, the timeline lanes, then the assumptions.
"""

from __future__ import annotations

from rich.markup import escape

from willitscale.estimation.memory_verdict import memory_parts_text
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
    degrees = ""
    if not plan.is_data_parallel:
        parts = [f"{k} {getattr(plan, k)}" for k in ("tp", "pp", "cp", "ep", "dp")
                 if getattr(plan, k) > 1 or k == "dp"]
        zero = f" · ZeRO-{plan.zero}" + (" hybrid" if plan.shard_scope == "node" else "") if plan.zero else ""
        sp = " · sequence parallel" if plan.sequence_parallel else ""
        sched = f" · {plan.pp_schedule}" + (f" v={plan.virtual_stages}" if plan.virtual_stages > 1 else "") \
            if plan.pp > 1 else ""
        degrees = "\n" + " x ".join(parts) + zero + sp + sched
    return (f"{model} · {c.nodes} x {node.gpus_per_node} {c.gpu.name} ({c.gpus} GPUs){inter}\n"
            f"batch {plan.global_batch} x {scenario.seq_len} tokens (micro-batch "
            f"{plan.micro_batch}, grad-accum {plan.grad_accum}) · recompute {plan.recompute}"
            + degrees)


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


KIND_NAMES = (("gemm", "GEMM"), ("attention", "attention"), ("memory", "memory-bound"),
              ("overhead", "kernel overhead"))


def compute_lines(est) -> list[str]:
    """Where compute goes per op kind, and MFU two ways (rich markup)."""
    k = est.compute_kinds
    if k is not None:
        parts = " · ".join(f"{name} {k.share(kind):.0%}" for kind, name in KIND_NAMES)
        first = (f"[bold]Compute[/bold] {format_time(est.compute)} by op kind (per-op model): "
                 f"{parts}")
        if k.recompute > 0:
            first += f"; recomputation {format_time(k.recompute)} of it"
    elif est.compute_model.startswith("flat") and "default" in est.compute_model:
        first = (f"[bold]Compute[/bold] {format_time(est.compute)}: "
                 f"{escape(est.compute_model)}: the per-op model needs the model's shape and "
                 "the GPU's compute curves (no split by op kind)")
    elif est.compute_model.startswith("flat"):
        first = (f"[bold]Compute[/bold] {format_time(est.compute)}: "
                 f"{escape(est.compute_model)}, one fraction replacing the per-op model (no "
                 "split by op kind)")
    else:
        first = f"[bold]Compute[/bold] {format_time(est.compute)}: {escape(est.compute_model)}"
    mfu = (f"  MFU {est.mfu:.3f} PaLM-style (causal attention counted in full) · "
           f"{est.mfu_causal:.3f} causal-adjusted (its unmasked half)")
    return [first, mfu]


def _memory_line(m) -> str:
    gib = lambda x: format_size(x, binary=True)  # noqa: E731 - HBM is sold in GiB
    verdict = {"fits": "fits", "tight": "[yellow]tight[/yellow]",
               "does not fit": "[red]does not fit[/red]",
               None: "the state fits; activations unknown"}[m.verdict]
    if m.verdict == "tight":
        verdict += (f" ({gib(m.headroom)} free; the caching allocator typically reserves "
                    f"{m.reserved_ratio:g}x its peak, {gib(m.reserved)}, which does not fit: it "
                    "runs if the cache can be given back, e.g. "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or fails on fragmentation)")
    elif m.verdict == "does not fit":
        verdict += f" ({gib(-m.headroom)} over)"
    where = f" ({escape(m.stage)})" if m.stage else ""
    room = (f"{gib(m.capacity)}" if m.fraction >= 1 else
            f"{gib(m.limit)} usable ({m.fraction:g} x {gib(m.capacity)})")
    return (f"[bold]Memory per GPU[/bold]{where} {gib(m.total)} of {room}: {verdict}\n"
            f"  {escape(memory_parts_text(m))}\n"
            f"  {escape(m.convention)}; PyTorch's peak {gib(m.allocated)}, nvidia-smi would "
            f"show about {gib(m.device)} (docs/memory.md)")


def _data_parallel(est) -> bool:
    p = est.plan
    return not p or (p.get("tp", 1) == p.get("pp", 1) == p.get("cp", 1) == p.get("ep", 1) == 1
                     and p.get("zero", 0) == 0)


def _communication(est, out) -> None:
    if not _data_parallel(est):
        out.print(f"[bold]Communication[/bold] {format_time(est.comms)} per step on the critical "
                  f"GPU, {format_time(est.exposed_comms)} exposed")
        for op in est.comm_ops:
            out.print(escape(f"  [{op.parallelism}] {op.name}: {format_size(op.bytes)} in "
                             f"{op.calls} call(s), {format_time(op.time)}, "
                             f"{format_time(op.exposed)} exposed"))
            out.print(escape(f"       {op.group}"), style="dim")
        return
    if est.gpus == 1:
        out.print("[bold]Communication[/bold] none: one GPU has no gradients to synchronise")
        return
    out.print(f"[bold]Communication[/bold] {format_time(est.comms)} per step: "
              f"{format_time(est.exposed_comms)} exposed, "
              f"{format_time(est.comms - est.exposed_comms)} hidden under backward")
    for op in est.comm_ops:
        out.print(escape(f"  {op.name}: {format_size(op.bytes)} in {op.calls} bucket(s) over "
                         f"{op.ranks} GPUs; {op.algorithm}"))
        if op.links:
            out.print(escape(f"  crosses {' -> '.join(op.links)}"))


def _network(est, out) -> None:
    """``--network flow``: each group's simulated collective on the fabric and the ideal one."""
    net = est.network
    if not net:
        return
    size = format_size(net["size_bytes"])
    out.print(f"[bold]Fabric[/bold] {escape(net['fabric'])}: each group's {size} collective, all "
              f"groups of a kind at once ({net['simulations']} simulations); the bytes terms above "
              "are slowed by the ratio to an ideal non-blocking fabric")
    if net.get("fidelity") == "coarse":
        out.print(escape(f"  fidelity: coarse ({net['fidelity_reason']})"))
    for g in net["groups"]:
        where = "leaves its node" if g["leaves_node"] else "NVLink only"
        with_ = f" with {', '.join(g['simulated_with'])}" if g["simulated_with"] else ""
        text = (f"  {g['group']} ({g['groups']} x {g['ranks']} ranks, {where}){with_}: "
                f"{format_time(g['simulated_s'])} vs {format_time(g['ideal_s'])} ideal "
                f"(x{g['slowdown']:.2f})")
        if "tree_slowdown" in g:
            text += (f"; as NCCL's trees {format_time(g['tree_simulated_s'])} vs "
                     f"{format_time(g['tree_ideal_s'])} (x{g['tree_slowdown']:.2f})")
        hot = g.get("busiest_link")
        if hot and g["leaves_node"]:
            text += (f"; busiest {hot['link']} ({hot['tier']}, up to {hot['peak_flows']} flows at "
                     f"once, {hot['groups']} group kind(s))")
        out.print(escape(text))


def _pipeline_and_groups(est, out) -> None:
    p = est.pipeline
    if p and p.get("stages", 1) > 1:
        out.print(f"[bold]Pipeline[/bold] {p['stages']} stages, {escape(str(p['schedule']))}"
                  + (f" v={p['virtual_stages']}" if p.get("virtual_stages", 1) > 1 else "")
                  + f", {p['micro_batches']} micro-batches: bubble {format_time(p['bubble_s'])} "
                  f"({p['bubble_share_of_step']:.1%} of the step; (p-1)/(v m) = "
                  f"{p['bubble_fraction_of_ideal']:.1%} of the ideal), slowest stage: "
                  f"{p['critical_stage']}")
    leaving = [g for g in est.placement if g["leaves_node"]]
    if est.placement and len(est.placement) > 1:
        text = "; ".join(f"{g['parallelism']} {int(g['size'])} " + ("leaves the node" if g["leaves_node"]
                                                                    else "stays in its node")
                         for g in est.placement)
        out.print(f"[bold]Groups[/bold] {escape(text)}")
        for g in leaving:
            out.print(escape(f"  {g['parallelism']}: {g['where']}"), style="dim")
    for warning in est.warnings:
        out.print(f"[yellow]  warning: {escape(warning)}[/yellow]")


def print_estimate(est, scenario, *, width: int = DEFAULT_WIDTH, brief: bool = False,
                   file=None) -> None:
    """Headline, breakdown table, communication, memory, bottleneck, timeline, assumptions
    (``brief``: without the assumptions)."""
    from willitscale.cli.output import console
    from willitscale.report.timeline import render_timeline

    out = console(file)
    out.print(f"[bold]Estimate[/bold] {escape(scenario_line(scenario))}")
    rate = "" if _data_parallel(est) else (f" · {est.tflops_per_gpu:.0f} TFLOP/s per GPU"
                                           f" ({est.hardware_tflops_per_gpu:.0f} executed)")
    # HFU below MFU is no slip: a causal FlashAttention kernel skips the masked half of the
    # attention scores, which MFU (PaLM's convention) counts in full
    why = " (< MFU: causal)" if est.hfu < est.mfu else ""
    out.print(f"[bold]step {format_time(est.step_time)}[/bold] · {est.tokens_per_s:,.0f} tokens/s"
              f" · MFU {est.mfu:.3f} · HFU {est.hfu:.3f}{rate}{why}")
    _breakdown(est, file)
    for line in compute_lines(est):
        out.print(line)
    _communication(est, out)
    _network(est, out)
    _pipeline_and_groups(est, out)
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

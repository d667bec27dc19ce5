"""The HTML report: one self-contained file people can open without willitscale or a network.

Every figure is inlined as a ``data:`` URI (SVG by default, PNG on request), the style sheet is
inline, and there is no script. Every string that came from the user or a file (scenario name,
model name, catalog text, the command line) goes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from string import Template

from willitscale import __version__
from willitscale.report.chartdata import BREAKDOWN_PARTS, LIMIT_SHORT, compute_time
from willitscale.report.contents import (
    ReportContents,
    levers,
    verdict,
    what_would_change,
)
from willitscale.report.figures import (
    LINK_OF_LEVEL,
    cluster_label,
    memory_chart,
    scaling_charts,
    scaling_notes,
    timeline_chart,
)
from willitscale.report.html_template import CSS, PAGE
from willitscale.report.plots.base import png_bytes, svg_text
from willitscale.report.plots.planner import top_plans
from willitscale.report.plots.requirements import RequirementPanel, requirement_panels
from willitscale.report.verdict import exposed_share, percent
from willitscale.units import format_bandwidth, format_count, format_size, format_time

__all__ = ["render_html", "report_charts", "figure_html"]


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def figure_html(chart, fmt: str = "svg") -> str:
    """``<figure>`` with the chart inlined as a data: URI, its title as alt text and caption."""

    if fmt == "svg":
        data, mime = svg_text(chart.figure).encode(), "image/svg+xml"
    else:
        data, mime = png_bytes(chart.figure), "image/png"
    w, h = (round(v * 96) for v in chart.figure.get_size_inches())
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    caption = esc(chart.caption or chart.title)
    return (f'<figure data-chart="{esc(chart.name)}"><img src="{uri}" alt="{esc(chart.title)}" '
            f'width="{w}" height="{h}"><figcaption>{caption}</figcaption></figure>')


def _table(headers: Sequence[str], rows: Iterable[Sequence], *, numeric: Iterable[int] = (),
           here: int | None = None, cls: str = "") -> str:
    numeric = set(numeric)
    head = "".join(f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        cells = "".join(f'<td class="num">{esc(v)}</td>' if i in numeric else f"<td>{esc(v)}</td>"
                        for i, v in enumerate(row))
        attr = ' class="here"' if r == here else ""
        body.append(f"<tr{attr}>{cells}</tr>")
    return (f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def report_charts(c: ReportContents) -> dict[str, list]:
    """The report's charts by section: timeline, scaling, requirements, memory, plans."""

    est = c.estimate
    groups = ([(cluster_label(c.one_node) + " (for comparison)", c.one_node)]
              if c.one_node is not None else []) + [(cluster_label(est), est)]
    charts = {"timeline": [timeline_chart(groups, title="One training step, lanes of one GPU")],
              "scaling": scaling_charts(list(c.sweep)) if c.sweep else [],
              "memory": [memory_chart([(cluster_label(est), est)])], "requirements": [],
              "plans": []}
    panels = _requirement_panels(c)
    if panels:
        charts["requirements"] = [requirement_panels(panels, share=c.share)]
    if c.plans:
        charts["plans"] = [top_plans([p["label"] for p in c.plans],
                                     _plan_parts(c.plans), [p["tokens_per_s"] for p in c.plans],
                                     fits=[p.get("fits") for p in c.plans])]
    return charts


def _requirement_panels(c: ReportContents) -> list:
    """One panel per link that limits some node count of the sweep, each against its rate now."""

    panels = []
    levels = sorted({r.level for r in c.requirements if r.level is not None},
                    key=lambda lvl: min(r.nodes for r in c.requirements if r.level == lvl))
    for level in levels:
        rows = [r for r in c.requirements if r.level == level]
        if rows:
            gbps = [None if r.needed is None else r.needed * 8 / 1e9 for r in rows]
            panels.append(RequirementPanel(link=LINK_OF_LEVEL[level], nodes=[r.nodes for r in rows],
                                           required={"this job": gbps},
                                           current=rows[-1].now * 8 / 1e9))
    return panels


def _plan_parts(plans) -> dict[str, list[float]]:
    parts = {}
    for field, meaning in BREAKDOWN_PARTS:
        values = [float(p.get("breakdown_s", {}).get(f"{field}_s", 0.0)) for p in plans]
        if any(values):
            parts[meaning] = values
    return parts


def _plans_table(c: ReportContents) -> str:
    """The planner's best plans against the one asked about, with the flags that give each."""
    est = c.estimate
    rows = [("as given", format_time(est.step_time), f"{est.tokens_per_s:,.0f}", "1.00x",
             format_size(est.memory.total, binary=True), "")]
    for p in c.plans:
        mem = p.get("memory") or {}
        step = p.get("step_time_s")
        rows.append((p["label"], "-" if step is None else format_time(step), f"{p['tokens_per_s']:,.0f}",
                     f"{p['tokens_per_s'] / est.tokens_per_s:.2f}x",
                     format_size(mem["total_bytes"], binary=True) if "total_bytes" in mem else "-",
                     p.get("flags", "")))
    note = ('<p class="muted">The planner\'s best plans for this model, cluster and global batch '
            "(willitscale plan), each estimated again in full; the flags of a row give it to "
            "<code>willitscale estimate</code>.</p>")
    return note + _table(("plan", "step", "tokens/s", "throughput", "memory per GPU", "flags"),
                         rows, numeric=(1, 2, 3, 4), here=0)


def _cards(c: ReportContents) -> str:
    est = c.estimate
    oom = " (if it fit)" if est.memory.fits is False else ""
    items = [(format_time(est.step_time), "step time" + oom),
             (f"{est.tokens_per_s:,.0f}", "tokens/s (whole job)"),
             (f"{est.mfu:.1%}", f"MFU, PaLM-style ({est.mfu_causal:.1%} causal-adjusted)"),
             (format_time(est.comms), "communication per step"),
             (format_time(est.exposed_comms), f"of it exposed: {percent(exposed_share(est))} of "
                                              "the step"),
             (format_size(est.memory.total, binary=True),
              f"memory per GPU ({format_size(est.memory.limit, binary=True)} usable)")]
    if c.efficiency is not None:
        items.insert(3, (f"{c.efficiency:.0%}", "scaling efficiency vs 1 node"))
    return "".join(f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for v, k in items)


def _breakdown_table(est) -> str:
    b = est.breakdown
    parts = (("data loading", b.data_loading), ("forward", b.forward),
             ("backward (incl. recompute)", b.backward), ("overlap slowdown", b.overlap_slowdown),
             ("exposed communication", b.exposed_comms), ("optimizer", b.optimizer),
             ("pipeline bubble", b.bubble))

    rows = [(name, format_time(v), percent(v / est.step_time) if est.step_time else "-")
            for name, v in parts if v > 0]
    rows.append(("step", format_time(est.step_time), "100%"))
    return _table(("part of the step", "time", "share"), rows, numeric=(1, 2)) + _compute_table(est)


def _compute_table(est) -> str:
    """Compute by op kind (the per-op model), or what timed compute instead."""
    k = est.compute_kinds
    if k is None:
        return f'<p class="muted">Compute: {esc(est.compute_model)} (no split by op kind).</p>'
    kinds = (("GEMM", k.gemm), ("attention", k.attention), ("memory-bound", k.memory),
             ("kernel overhead", k.overhead))
    rows = [(name, format_time(v), percent(v / k.total)) for name, v in kinds]
    if k.recompute > 0:
        rows.append(("of it: recomputation", format_time(k.recompute), percent(k.recompute / k.total)))
    note = ('<p class="muted">Compute by op kind (per-op model, docs/estimate.md): every GEMM, the '
            "attention kernel, the memory-bound operations and each kernel's fixed cost.</p>")
    return note + _table(("compute", "time", "share"), rows, numeric=(1, 2))


def _scaling_table(c: ReportContents) -> str:
    """The sweep as ``willitscale scale`` prints it: the bottleneck (limit) and whether the plan
    fits in memory at each node count, beside the times."""

    if not c.sweep:
        return ""
    first = c.sweep[0]
    fits = {True: "yes", False: "no", None: "?"}
    rows = []
    for e in c.sweep:
        eff = (e.tokens_per_s / e.gpus) / (first.tokens_per_s / first.gpus)
        rows.append((e.nodes, e.gpus, e.global_batch, format_time(compute_time(e)),
                     format_time(e.comms), format_time(e.exposed_comms), format_time(e.step_time),
                     LIMIT_SHORT.get(e.bottleneck.resource, e.bottleneck.resource),
                     fits[e.memory.fits], f"{e.tokens_per_s:,.0f}", f"{e.mfu:.2f}", f"{eff:.0%}"))
    here = next((i for i, e in enumerate(c.sweep) if e.nodes == c.estimate.nodes), None)
    notes = [c.sweep_note] if c.sweep_note else []
    notes += [f"{n} nodes not estimated: {why}" for n, why in c.skipped]
    notes += [n[0].upper() + n[1:] + "." for n in scaling_notes(list(c.sweep))]
    note = "".join(f'<p class="muted">{esc(n)}</p>' for n in notes)
    legend = ('<p class="muted">compute: forward + backward; limit: the bottleneck (inter/intra: '
              "the network between or inside nodes, when exposed communication exceeds 5% of the "
              "step; OOM: the plan does not fit in memory, its times shown anyway); fits: memory "
              "(?: activations unknown).</p>")
    return _table(("nodes", "GPUs", "batch", "compute", "comms", "exposed", "step", "limit",
                   "fits", "tokens/s", "MFU", f"eff. vs {first.nodes}"), rows,
                  numeric=(0, 1, 2, 3, 4, 5, 6, 9, 10, 11), here=here) + legend + note


def _comm_table(est) -> str:
    rows = [(op.name, op.group, format_size(op.bytes), op.calls, format_time(op.time),
             format_time(op.exposed), op.algorithm, " → ".join(op.links)) for op in est.comm_ops]
    return _table(("communication", "group", "bytes per GPU", "calls", "time", "exposed",
                   "algorithm", "links crossed"), rows, numeric=(2, 3, 4, 5))


def _memory_table(m) -> str:
    gib = lambda x: "unknown" if x is None else format_size(x, binary=True)  # noqa: E731
    fits = {True: "fits", False: "does not fit", None: "state fits; activations unknown"}[m.fits]
    fits = getattr(m, "verdict", None) or fits
    where = f"; the {m.stage}, the fullest" if m.stage else ""
    return _table(("weights", "gradients", "master weights", "optimizer states", "activations",
                   "buffers", "workspace", "CUDA context + NCCL", "total", "usable", "GPU memory",
                   "verdict"),
                  [(gib(m.weights), gib(m.gradients), gib(m.master), gib(m.optimizer),
                    gib(m.activations), gib(m.buffers), gib(m.workspace), gib(m.context + m.nccl),
                    gib(m.total), gib(m.limit), gib(m.capacity), fits)],
                  numeric=range(11)) + (
        f'<p class="muted">Per GPU{esc(where)}. Total: PyTorch\'s allocated peak (the state plus '
        f"the larger of the forward/backward parts and the optimizer step's temporaries) plus the "
        f"CUDA context and NCCL. Usable: {m.fraction:g} of the GPU memory (--memory-fraction). "
        f"Buffers: DDP/DeepSpeed buckets, gathered FSDP/ZeRO-3 layers, pipeline receive buffers. "
        f"Convention: {esc(m.convention)}; docs/memory.md</p>")


def _inputs_table(c: ReportContents) -> str:
    s, est = c.scenario, c.estimate
    node, plan = s.cluster.node, s.plan
    model = s.model.name if s.model is not None else "parameter count only (no shape)"
    rows = [("scenario", s.name or "(unnamed)"), ("model", model),
            ("parameters", format_count(est.params)),
            ("cluster", f"{s.cluster.nodes} nodes × {node.gpus_per_node} {s.cluster.gpu.name}"),
            ("GPU link inside a node", f"{node.intra_link.display_name or node.intra_link.name}: "
                                       f"{format_bandwidth(node.intra_link.bandwidth)} per GPU, "
                                       "one direction"),
            ("network between nodes", f"{node.nics} × {node.nic.display_name or node.nic.name}: "
                                      f"{format_bandwidth(node.nic.bandwidth, bits=True)} each, "
                                      "one direction"),
            ("sequence length", f"{s.seq_len:,} tokens"),
            ("batch", f"micro-batch {plan.micro_batch} × grad-accum {plan.grad_accum} × dp "
                      f"{plan.dp} = {plan.global_batch} samples per step"),
            ("parallelism", f"dp {plan.dp} · tp {plan.tp} · pp {plan.pp} · cp {plan.cp} · ep "
                            f"{plan.ep} · ZeRO {plan.zero}"),
            ("recomputation", plan.recompute), ("compute dtype", s.dtype),
            ("gradient all-reduce", f"{s.ddp.grad_reduce_dtype}, "
                                    f"{'overlapped with backward' if s.ddp.overlap else 'after backward'}")]
    return _table(("input", "value"), rows)


def _summary(c: ReportContents) -> str:
    s = c.scenario
    cl, plan = s.cluster, s.plan
    model = s.model.name if s.model is not None else f"{format_count(c.estimate.params)} parameters"
    inter = (f" · {cl.node.nics} × {format_bandwidth(cl.node.nic.bandwidth, bits=True)} per node"
             if cl.nodes > 1 else "")
    return (f"{model} · {cl.nodes} × {cl.node.gpus_per_node} {cl.gpu.name} ({cl.gpus} GPUs){inter}"
            f" · batch {plan.global_batch} × {s.seq_len} tokens · recompute {plan.recompute}")


def _sources(c: ReportContents) -> list[tuple[str, str]]:
    """Where the hardware numbers come from (the catalog's ``source`` of each part)."""
    node = c.scenario.cluster.node
    out = []
    for what, obj in (("GPU", node.gpu), ("GPU link", node.intra_link), ("network link", node.nic)):
        name = getattr(obj, "display_name", "") or obj.name
        if obj.source:
            out.append((f"source: {what} ({name})", obj.source))
        for extra in ("latency_source", "efficiency_source"):
            text = getattr(obj, extra, "")
            if text:
                out.append((f"source: {what} {extra.split('_')[0]}", text))
    return out


def _fixes(c: ReportContents) -> str:
    items = what_would_change(c)
    est = c.estimate
    if items:
        out = '<ul class="fixes">' + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>"
    else:
        out = (f"<p>Compute is the bottleneck: {esc(format_time(est.exposed_comms))} of "
               f"communication ({esc(percent(exposed_share(est)))} of the step) stays exposed, "
               "under the 5% that would make the network the bottleneck. The levers below "
               "shorten what remains.</p>")
    share = lambda e: percent(exposed_share(e))  # noqa: E731
    mem = lambda e: format_size(e.memory.total, binary=True)  # noqa: E731
    rows = [(label, format_time(e.step_time), f"{e.tokens_per_s:,.0f}",
             f"{e.tokens_per_s / est.tokens_per_s:.2f}x", share(e), mem(e))
            for label, e in levers(c)]
    if rows:
        rows.insert(0, ("as given", format_time(est.step_time), f"{est.tokens_per_s:,.0f}",
                        "1.00x", share(est), mem(est)))
        out += ('<p class="muted">Each lever moved alone, estimated again:</p>'
                + _table(("change", "step", "tokens/s", "throughput", "exposed",
                          "memory per GPU"), rows, numeric=(1, 2, 3, 4, 5), here=0))
    return out


def render_html(c: ReportContents, *, figure_format: str = "svg", charts: dict | None = None) -> str:
    """The whole report as one HTML string (``charts``: from :func:`report_charts`)."""

    charts = report_charts(c) if charts is None else charts
    fig = lambda key: "".join(figure_html(ch, figure_format) for ch in charts.get(key, []))  # noqa: E731
    est = c.estimate
    plans = ""
    if c.plans:
        plans = f'<h2 id="plans">Other parallel plans</h2>{fig("plans")}{_plans_table(c)}'
    unknowns = "".join(f'<p class="muted">Not computed: {esc(u)}</p>' for u in est.unknowns)
    return Template(PAGE).substitute(
        version=esc(__version__), title=esc(c.title), css=CSS, summary=esc(_summary(c)),
        verdict=esc(verdict(c)),
        verdict_class="good" if est.bottleneck.resource == "compute" else "bad",
        cards=_cards(c), fixes=_fixes(c), timeline_figure=fig("timeline"),
        breakdown_table=_breakdown_table(est), scaling_figures=fig("scaling"),
        scaling_table=_scaling_table(c), communication_table=_comm_table(est),
        requirements_figure=fig("requirements"), memory_figure=fig("memory"),
        memory_table=_memory_table(est.memory), plans_section=plans,
        inputs_table=_inputs_table(c),
        assumptions_table=_table(("assumption", "value and source"),
                                 [*est.assumptions, *_sources(c)], cls="assumptions"),
        unknowns=unknowns, command=esc(c.command or "willitscale report"))

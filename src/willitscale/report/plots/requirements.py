"""The line rate a job needs on the link that limits it, against node count: one curve per
model size, one panel per link (the NICs per node, the link inside the node per GPU)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from willitscale.errors import ConfigError
from willitscale.report.plots.base import Chart, legend_below, new_figure, styled
from willitscale.report.plots.scaling import log2_axis
from willitscale.report.style import COLORS, WIDE

__all__ = ["bandwidth_requirements", "requirement_panels", "RequirementPanel"]

_MARKERS = "osD^v<>ph"
_GREYS = ("#222222", "#555555", "#888888", "#AAAAAA")
_PANEL_TITLE = {"inter-node, per node": "where the NICs between nodes limit",
                "intra-node, per GPU": "where the link inside a node limits",
                "measured all-reduce": "where the measured all-reduce limits"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequirementPanel:
    """One link's requirements: line rates in Gb/s (one direction) at each node count."""

    link: str  #: what the rate is of, e.g. "inter-node, per node" or "intra-node, per GPU"
    nodes: Sequence[int]
    required: Mapping[str, Sequence[float | None]]  #: per series; None: no bandwidth is enough
    current: float | None = None  #: today's line rate, drawn as a limit line
    closed_form: Mapping[str, Sequence[float | None]] = field(default_factory=dict)


def _draw(ax, panel: RequirementPanel) -> None:
    nodes = list(panel.nodes)
    for k, (label, values) in enumerate(panel.required.items()):
        pts = [(n, v) for n, v in zip(nodes, values) if v is not None and v > 0]
        if pts:
            # equal curves are common (at a fixed batch the need does not depend on the model
            # size): later series get larger hollow markers so every one stays visible
            ax.plot(*zip(*pts), marker=_MARKERS[k % len(_MARKERS)], color=COLORS["predicted"],
                    markersize=6 + 3 * k, markerfacecolor=COLORS["predicted"] if k == 0 else "none",
                    linewidth=1.8 if k == 0 else 1.0, label=f"needed: {label}")
    for k, (label, values) in enumerate(panel.closed_form.items()):
        pts = [(n, v) for n, v in zip(nodes, values) if v is not None and v > 0]
        if pts:
            ax.plot(*zip(*pts), linestyle="--", marker="_", markersize=14,
                    color=_GREYS[k % len(_GREYS)], label=label)
    if panel.current:
        ax.axhline(panel.current, color=COLORS["limit"], linestyle="-.", linewidth=1.4,
                   label="today's line rate")
        ax.annotate(f"today: {panel.current:,.0f} Gb/s", (1.0, panel.current),
                    xycoords=("axes fraction", "data"), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=8.5)
    log2_axis(ax, nodes)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=8)
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"line rate needed (Gb/s)\n{panel.link}")


@styled
def requirement_panels(panels: Sequence[RequirementPanel], *, share: float | None = None,
                       title: str = "Bandwidth needed", name: str = "requirements") -> Chart:
    """One panel per link, side by side: a job whose limiting link changes with the node count
    (the NICs at many nodes, PCIe or NVLink at few) shows every node count, each on the link
    that limits it, against that link's rate today."""
    if not panels:
        raise ConfigError("requirement panels", 0, "at least one")
    fig, axes = new_figure(figsize=WIDE if len(panels) > 1 else (7.5, 4.2), ncols=len(panels))
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, panel in zip(axes, panels):
        _draw(ax, panel)
        if len(panels) > 1:
            ax.set_title(_PANEL_TITLE.get(panel.link, panel.link), loc="left", fontsize=10.5)
    handles = {}
    for ax in axes:  # one legend for every panel: the same series, the same meaning
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    legend_below(fig, list(handles.values()), list(handles), width=fig.get_figwidth())
    what = (f"exposed communication at most {share:.0%} of the step" if share is not None
            else "communication hidden")
    full = f"{title}: {what}" if share is not None else title
    fig.suptitle(full, x=0.01, ha="left", fontweight="bold", fontsize=12)
    per_link = (" Each node count sits in the panel of the link that limits it there."
                if len(panels) > 1 else "")
    return Chart(name=name, title=full, figure=fig,
                 caption=f"Least line rate (one direction) of the limiting link for {what}; "
                         "above today's line that link must be upgraded. Missing points: no "
                         "bandwidth of that link alone is enough." + per_link)


def bandwidth_requirements(nodes: Sequence[int], required: Mapping[str, Sequence[float | None]],
                           *, current: float | None = None,
                           closed_form: Mapping[str, Sequence[float | None]] | None = None,
                           share: float | None = None, link: str = "inter-node, per node",
                           title: str = "Bandwidth needed",
                           name: str = "requirements") -> Chart:
    """Required line rate in Gb/s (one direction) against nodes, per series (e.g. per model
    size); ``None`` where no bandwidth is enough. ``current``: today's link, as a limit line;
    ``closed_form``: the bandwidth-bound formulas, dashed. One link: :func:`requirement_panels`
    draws several."""
    panel = RequirementPanel(link=link, nodes=nodes, required=required, current=current,
                             closed_form=closed_form or {})
    return requirement_panels([panel], share=share, title=title, name=name)

"""The inter-node bandwidth a job needs, against node count: one curve per model size."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.report.plots.base import Chart, new_figure, styled
from willitscale.report.plots.scaling import log2_axis
from willitscale.report.style import COLORS

__all__ = ["bandwidth_requirements"]

_MARKERS = "osD^v<>ph"


@styled
def bandwidth_requirements(nodes: Sequence[int], required: Mapping[str, Sequence[float | None]],
                           *, current: float | None = None,
                           closed_form: Mapping[str, Sequence[float | None]] | None = None,
                           share: float | None = None, link: str = "inter-node, per node",
                           title: str = "Bandwidth needed to hide communication",
                           name: str = "requirements") -> Chart:
    """Required line rate in Gb/s (one direction) against nodes, per series (e.g. per model
    size); ``None`` where no bandwidth is enough. ``current``: today's link, as a limit line;
    ``closed_form``: the bandwidth-bound formulas, dashed."""
    fig, ax = new_figure()
    greys = ("#222222", "#555555", "#888888", "#AAAAAA")
    for k, (label, values) in enumerate(required.items()):
        pts = [(n, v) for n, v in zip(nodes, values) if v is not None and v > 0]
        if pts:
            # equal curves are common (at a fixed batch the need does not depend on the model
            # size): later series get larger hollow markers so every one stays visible
            ax.plot(*zip(*pts), marker=_MARKERS[k % len(_MARKERS)], color=COLORS["predicted"],
                    markersize=6 + 3 * k, markerfacecolor=COLORS["predicted"] if k == 0 else "none",
                    linewidth=1.8 if k == 0 else 1.0, label=f"needed: {label}")
    for k, (label, values) in enumerate((closed_form or {}).items()):
        pts = [(n, v) for n, v in zip(nodes, values) if v is not None and v > 0]
        if pts:
            ax.plot(*zip(*pts), linestyle="--", color=greys[k % len(greys)], label=label)
    if current:
        ax.axhline(current, color=COLORS["limit"], linestyle="-.", linewidth=1.4,
                   label=f"today: {current:,.0f} Gb/s")
    log2_axis(ax, nodes)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=8)
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"line rate needed ({link}, Gb/s)")
    ax.set_title(title, loc="left")
    fig.legend(loc="outside lower center", ncol=2)
    what = (f"exposed communication at most {share:.0%} of the step" if share is not None
            else "communication hidden")
    return Chart(name=name, title=title, figure=fig,
                 caption=f"Least line rate (one direction) for {what}; above today's line the "
                         "network must be upgraded. Missing points: no bandwidth is enough.")

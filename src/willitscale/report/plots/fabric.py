"""The fabric simulator's pictures: how busy the links are, and which GPU pairs talk.

The heatmap follows Figure 7 of 'GPU fabrics for GenAI workloads' (traffic between GPU pairs when training GPT-3, from
Meta's rail-only paper): most pairs carry nothing, and the bytes concentrate in a few blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from willitscale.errors import ConfigError
from willitscale.report.plots.base import Chart, new_figure, styled
from willitscale.report.style import COLORS
from willitscale.units import format_size

__all__ = ["link_utilization_histogram", "traffic_heatmap"]


@styled
def link_utilization_histogram(histogram: Sequence[tuple[float, float, int]], *,
                               title: str = "Fabric link utilisation",
                               name: str = "link-utilization") -> Chart:
    """Bars of ``(from, to, links)`` bins of utilisation (a fraction 0..1) as the simulator's
    ``LinkReport.histogram`` gives them."""
    if not histogram:
        raise ConfigError("link utilisation histogram", "empty", "at least one (from, to, links) bin")
    fig, ax = new_figure(figsize=(7.0, 4.0))
    lefts = [100 * a for a, _, _ in histogram]
    widths = [100 * (b - a) for a, b, _ in histogram]
    counts = [n for _, _, n in histogram]
    ax.bar(lefts, counts, width=widths, align="edge", color=COLORS["communication"],
           edgecolor="white", linewidth=0.8)
    for x, w, n in zip(lefts, widths, counts):
        if n:
            ax.text(x + w / 2, n, f"{n:,}", ha="center", va="bottom", fontsize=8.5)
    ax.set_xlim(min(lefts), max(x + w for x, w in zip(lefts, widths)))
    ax.set_ylim(0, max(counts + [1]) * 1.12)
    ax.set_xlabel("link utilisation (% of capacity, averaged over the run)")
    ax.set_ylabel("fabric links")
    ax.grid(axis="x", visible=False)
    ax.set_title(title, loc="left")
    total = sum(counts)
    return Chart(name=name, title=title, figure=fig,
                 caption=f"{total:,} fabric links (NIC and switch-to-switch, both directions); "
                         "utilisation = bytes carried / (capacity x completion time).")


@styled
def traffic_heatmap(matrix, *, gpus_per_node: int | None = None, unit: str = "bytes per step",
                    title: str = "Traffic between GPU pairs", name: str = "traffic-heatmap") -> Chart:
    """``matrix[i][j]`` = bytes GPU ``i`` sends to GPU ``j`` (square); zero pairs are white,
    the rest on a log colour scale; thin lines separate nodes of ``gpus_per_node`` GPUs."""
    import numpy as np
    from matplotlib.colors import LogNorm

    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise ConfigError("traffic matrix", m.shape, "a square matrix of at least 2 x 2 GPUs")
    n = m.shape[0]
    fig, ax = new_figure(figsize=(6.4, 5.6))
    positive = m[m > 0]
    masked = np.ma.masked_less_equal(m, 0)
    cmap = _cmap()
    if positive.size:
        vmin, vmax = float(positive.min()), float(positive.max())
        norm = LogNorm(vmin=vmin, vmax=vmax if vmax > vmin else vmin * 10)
        image = ax.imshow(masked, cmap=cmap, norm=norm, interpolation="nearest", origin="upper")
        bar = fig.colorbar(image, ax=ax, shrink=0.85)
        bar.set_label(f"{unit} sent, row GPU to column GPU (log scale)")
        from matplotlib.ticker import FuncFormatter


        sized = FuncFormatter(lambda v, _: format_size(v) if unit.startswith("bytes") else f"{v:g}")
        bar.ax.yaxis.set_major_formatter(sized)
        bar.ax.yaxis.set_minor_formatter(sized)
        bar.ax.tick_params(which="both", labelsize=8)
    else:
        ax.imshow(np.zeros_like(m), cmap="Greys", vmin=0, vmax=1, origin="upper")
    if gpus_per_node and 1 < gpus_per_node < n:
        for b in range(gpus_per_node, n, gpus_per_node):
            ax.axhline(b - 0.5, color="#CCCCCC", linewidth=0.5)
            ax.axvline(b - 0.5, color="#CCCCCC", linewidth=0.5)
    ax.grid(False)
    ax.set_xlabel("destination GPU")
    ax.set_ylabel("source GPU")
    ax.set_title(title, loc="left")
    pairs = n * (n - 1)
    active = int(np.count_nonzero(m - np.diag(np.diag(m))))
    return Chart(name=name, title=title, figure=fig,
                 caption=f"{active:,} of {pairs:,} ordered GPU pairs carry traffic "
                         f"({100 * (1 - active / pairs):.1f}% idle), as in Figure 7 of 'GPU fabrics for GenAI workloads'.")


def _cmap():
    from matplotlib import colormaps

    return colormaps["viridis"].with_extremes(bad="white")

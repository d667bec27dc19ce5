"""How a job scales: the step's breakdown across node counts, throughput and scaling
efficiency against the ideal, and communication vs compute with the crossover marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.report.chartdata import crossover, efficiency, ideal_throughput
from willitscale.report.plots.base import Chart, new_figure, styled, time_unit
from willitscale.report.style import COLORS, HATCHES, LABELS, WIDE

__all__ = ["breakdown_bars", "scaling_efficiency", "comms_vs_compute", "log2_axis"]


def log2_axis(ax, values: Sequence[float], *, axis: str = "x") -> None:
    """A base-2 log axis ticked at ``values`` (node or GPU counts), labelled as integers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    ticks = sorted(set(values))
    if len(ticks) > 12:  # keep a dozen readable labels
        step = -(-len(ticks) // 12)
        ticks = ticks[::step]
    target.set_major_locator(FixedLocator(ticks))
    target.set_minor_locator(NullLocator())
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


@styled
def breakdown_bars(labels: Sequence[str], parts: Mapping[str, Sequence[float]], *,
                   xlabel: str = "nodes", title: str = "Where the step time goes",
                   name: str = "breakdown") -> Chart:
    """Stacked bars, one per label (a node count, a plan), of the step's parts in seconds.

    ``parts`` maps a style meaning (``forward``, ``backward``, ``exposed_comms``, ...) to one
    value per label; the bar's total is written above it.
    """
    totals = [sum(v[i] for v in parts.values()) for i in range(len(labels))]
    scale, unit = time_unit(max(totals, default=1.0) or 1.0)
    fig, ax = new_figure(figsize=(max(5.5, 1.2 + 0.9 * len(labels)) + 2.2, 4.3))
    x = range(len(labels))
    bottom = [0.0] * len(labels)
    for meaning, values in parts.items():
        heights = [v / scale for v in values]
        ax.bar(x, heights, bottom=bottom, width=0.68, color=COLORS.get(meaning, "#777777"),
               hatch=HATCHES.get(meaning, ""), edgecolor="white", linewidth=0.5,
               label=LABELS.get(meaning, meaning))
        bottom = [b + h for b, h in zip(bottom, heights)]
    for i, total in enumerate(totals):
        ax.text(i, total / scale, f"{total / scale:,.0f}", ha="center", va="bottom", fontsize=8.5)
    ax.set_xticks(list(x), labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"step time ({unit})")
    ax.set_ylim(0, max(totals, default=1.0) / scale * 1.1)
    ax.grid(axis="x", visible=False)
    ax.set_title(title, loc="left")
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], names[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return Chart(name=name, title=title, figure=fig,
                 caption="Each bar is one step; the parts add up to the step time written above "
                         "it. Exposed communication is the all-reduce time compute did not hide.")


@styled
def scaling_efficiency(gpus: Sequence[int], tokens_per_s: Sequence[float], *,
                       title: str = "Throughput and scaling efficiency",
                       name: str = "scaling") -> Chart:
    """Left: tokens/s against GPUs with the ideal (linear from the first point); right: scaling
    efficiency ``(T/T0) / (G/G0)`` against 100%."""
    ideal = ideal_throughput(gpus, tokens_per_s)
    eff = efficiency(gpus, tokens_per_s)
    fig, (left, right) = new_figure(figsize=WIDE, ncols=2)
    left.plot(gpus, ideal, color=COLORS["ideal"], linestyle="--", label="ideal (linear)")
    left.plot(gpus, tokens_per_s, color=COLORS["predicted"], marker="o", label="predicted")
    log2_axis(left, gpus)
    left.set_yscale("log")
    left.set_xlabel("GPUs")
    left.set_ylabel("throughput (tokens/s, whole job)")
    left.legend(loc="upper left")
    right.axhline(100, color=COLORS["ideal"], linestyle="--", label="ideal (100%)")
    right.plot(gpus, [100 * e for e in eff], color=COLORS["predicted"], marker="o",
               label="predicted")
    for g, e in zip(gpus, eff):
        right.annotate(f"{100 * e:.0f}%", (g, 100 * e), textcoords="offset points",
                       xytext=(0, -14), ha="center", fontsize=8.5)
    log2_axis(right, gpus)
    right.set_ylim(0, 112)
    right.set_xlabel("GPUs")
    right.set_ylabel(f"scaling efficiency vs {gpus[0]} GPUs (%)")
    right.legend(loc="lower left")
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=12)
    return Chart(name=name, title=title, figure=fig,
                 caption="Efficiency = speedup / (GPUs / first GPUs), speedup in tokens/s.")


def _crossover_note(x, compute, comms) -> tuple[float | None, str]:
    at = crossover(x, compute, comms)
    if at is not None:
        return at, f"communication outlasts compute from ≈{at:.2g} nodes (interpolated)"
    if comms and comms[0] > compute[0]:
        return None, f"communication outlasts compute at every node count ({x[0]}–{x[-1]})"
    return None, f"compute outlasts communication up to {x[-1]} nodes: no crossover"


@styled
def comms_vs_compute(nodes: Sequence[int], compute: Sequence[float], comms: Sequence[float],
                     exposed: Sequence[float] | None = None, *,
                     title: str = "Communication vs compute per step",
                     name: str = "comms-vs-compute") -> Chart:
    """Seconds per step of compute and of communication against nodes; the node count where
    communication overtakes compute (the handbook's "comms is a bottleneck") is marked."""
    top = max(list(compute) + list(comms) + list(exposed or []))
    scale, unit = time_unit(top or 1.0)
    fig, ax = new_figure()
    at, note = _crossover_note(list(nodes), list(compute), list(comms))
    if at is not None or (comms and comms[0] > compute[0]):
        ax.axvspan(at if at is not None else nodes[0], nodes[-1], color=COLORS["communication"],
                   alpha=0.08, linewidth=0)
    ax.plot(nodes, [c / scale for c in compute], color=COLORS["compute"], marker="o",
            label="compute (forward + backward)")
    ax.plot(nodes, [c / scale for c in comms], color=COLORS["communication"], marker="s",
            label="communication (all of it)")
    if exposed is not None:
        ax.plot(nodes, [c / scale for c in exposed], color=COLORS["communication"], marker="^",
                linestyle=":", label="exposed communication")
    if at is not None:
        ax.axvline(at, color=COLORS["limit"], linestyle="-.", linewidth=1.2)
        ax.annotate(f"crossover ≈ {at:.2g} nodes", (at, 0.96), xycoords=("data", "axes fraction"),
                    xytext=(6, 0), textcoords="offset points", ha="left", va="top", fontsize=9,
                    fontweight="bold")
    log2_axis(ax, nodes)
    ax.set_ylim(0, top / scale * 1.12)
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"time per step ({unit})")
    ax.set_title(title, loc="left")
    fig.legend(loc="outside lower center", ncol=3)
    return Chart(name=name, title=title, figure=fig,
                 caption=note[0].upper() + note[1:] + " (shaded: the network is busier than "
                         "compute, the handbook's 'comms is a bottleneck').")

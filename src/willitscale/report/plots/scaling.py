"""How a job scales: the step's breakdown across node counts, throughput and scaling
efficiency against the ideal, and communication vs compute with the crossover marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.errors import ConfigError
from willitscale.report.chartdata import crossover, efficiency, ideal_throughput
from willitscale.report.plots.base import Chart, new_figure, styled, time_unit
from willitscale.report.style import COLORS, HATCHES, LABELS, WIDE
from willitscale.units import format_time

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
                   name: str = "breakdown", marks: Sequence[str | None] | None = None,
                   shares: bool | None = None) -> Chart:
    """Stacked bars, one per label (a node count, a plan), of the step's parts.

    ``parts`` maps a style meaning (``forward``, ``backward``, ``exposed_comms``, ...) to one
    value per label in seconds; the bar's total is written above it, with ``marks[i]`` (e.g.
    ``"OOM"``: the plan does not fit in memory) above that. ``shares`` draws each bar as shares
    of its step (100%); by default when the steps differ more than 4x (strong scaling), where
    seconds would flatten the larger node counts into slivers.
    """

    n = len(labels)
    totals = [sum(v[i] for v in parts.values()) for i in range(n)]
    positive = [t for t in totals if t > 0]
    if shares is None:
        shares = bool(positive) and max(positive) > 4 * min(positive)
    scale, unit = time_unit(max(totals, default=1.0) or 1.0)
    per = [(t / 100 if shares else scale) or 1.0 for t in totals]  # seconds per drawn unit
    fig, ax = new_figure(figsize=(max(5.5, 1.2 + 0.9 * n) + 2.2, 4.3))
    x = range(n)
    bottom = [0.0] * n
    for meaning, values in parts.items():
        heights = [v / d for v, d in zip(values, per)]
        ax.bar(x, heights, bottom=bottom, width=0.68, color=COLORS.get(meaning, "#777777"),
               hatch=HATCHES.get(meaning, ""), edgecolor="white", linewidth=0.5,
               label=LABELS.get(meaning, meaning))
        bottom = [b + h for b, h in zip(bottom, heights)]
    marks = list(marks or [None] * n)
    for i, total in enumerate(totals):
        ax.text(i, bottom[i], format_time(total), ha="center", va="bottom", fontsize=8.5)
        if marks[i]:
            ax.text(i, bottom[i], f"{marks[i]}\n\n", ha="center", va="bottom", fontsize=8.5,
                    color="#B2182B", fontweight="bold")
    ax.set_xticks(list(x), labels)
    pad = max(0.0, (3 - n) / 2)  # one or two bars stay bar-shaped
    ax.set_xlim(-0.6 - pad, n - 0.4 + pad)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of the step (%)" if shares else f"step time ({unit})")
    ax.set_ylim(0, max(bottom, default=1.0) * (1.18 if any(marks) else 1.1))
    ax.grid(axis="x", visible=False)
    ax.set_title(title, loc="left")
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], names[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0))
    oom = " OOM: the plan does not fit in memory (its times are shown anyway)." if any(marks) else ""
    how = ("Each bar is one step, as shares of it; the step time is written above it."
           if shares else "Each bar is one step; the parts add up to the step time written "
                          "above it.")
    return Chart(name=name, title=title, figure=fig,
                 caption=how + " Exposed communication is the communication compute did not "
                               "hide." + oom)


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
    from matplotlib.ticker import FuncFormatter

    left.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _short_count(v)))
    left.yaxis.set_minor_formatter(FuncFormatter(  # 2x and 5x between the powers of ten
        lambda v, _: _short_count(v) if f"{v:.0e}"[0] in "25" else ""))
    left.tick_params(axis="y", which="minor", labelsize=8)
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
    right.set_ylim(0, max(112, 100 * max(eff) + 12))
    right.set_xlabel("GPUs")
    right.set_ylabel(f"scaling efficiency vs {gpus[0]} GPUs (%)")
    right.legend(loc="lower left")
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=12)
    return Chart(name=name, title=title, figure=fig,
                 caption="Efficiency = speedup / (GPUs / first GPUs), speedup in tokens/s.")


def _short_count(v: float) -> str:
    """``400000`` -> ``"400k"``, ``1.2e6`` -> ``"1.2M"`` (tick labels)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


def _crossover_note(x, compute, comms) -> tuple[float | None, str]:
    at = crossover(x, compute, comms)
    if at is not None:
        return at, f"communication outlasts compute from ≈{at:.2g} nodes (interpolated)"
    if comms and comms[0] > compute[0]:
        return None, f"communication outlasts compute at every node count ({x[0]}–{x[-1]})"
    return None, f"compute outlasts communication up to {x[-1]} nodes: no crossover"


def _shade_points(ax, nodes: Sequence[int], flags: Sequence[bool], label: str) -> None:
    """Shade around each flagged node count, to halfway (in log2) to its neighbours."""
    import math

    logs = [math.log2(n) for n in nodes]
    for i, flagged in enumerate(flags):
        if not flagged:
            continue
        lo = logs[i] - (logs[i] - logs[i - 1]) / 2 if i > 0 else logs[i]
        hi = logs[i] + (logs[i + 1] - logs[i]) / 2 if i + 1 < len(logs) else logs[i]
        ax.axvspan(2 ** lo, 2 ** hi, color=COLORS["communication"], alpha=0.08, linewidth=0,
                   label=label)
        label = None


@styled
def comms_vs_compute(nodes: Sequence[int], compute: Sequence[float], comms: Sequence[float],
                     exposed: Sequence[float] | None = None, *,
                     network_bound: Sequence[bool] | None = None,
                     step: Sequence[float] | None = None, share: float = 0.05,
                     title: str = "Communication vs compute per step",
                     name: str = "comms-vs-compute") -> Chart:
    """Seconds per step of compute and of communication against nodes; the node count where
    communication overtakes compute (the handbook's "comms is a bottleneck") is marked.

    ``network_bound`` (one flag per node count, the estimate's criterion: exposed communication
    above ``share`` of the step) shades the node counts where the network limits; ``step``
    draws ``share`` of the step time, the line the exposed communication crosses when it does.
    Without ``network_bound`` the shading is the handbook's criterion, communication longer than
    compute. Needs two node counts or more.
    """
    if len(nodes) < 2 or not (len(nodes) == len(compute) == len(comms)):
        raise ConfigError("comms vs compute", f"{len(nodes)} node counts",
                          "at least two, with one compute and one communication time each")
    top = max(list(compute) + list(comms) + list(exposed or []))
    scale, unit = time_unit(top or 1.0)
    fig, ax = new_figure()
    at, note = _crossover_note(list(nodes), list(compute), list(comms))
    if network_bound is not None:
        _shade_points(ax, nodes, network_bound, f"the network limits (exposed > {share:.0%})")
        shaded = (f"Shaded: the network limits the step, exposed communication above "
                  f"{share:.0%} of it (the estimate's bottleneck criterion)")
    else:
        if at is not None or comms[0] > compute[0]:
            ax.axvspan(at if at is not None else nodes[0], nodes[-1],
                       color=COLORS["communication"], alpha=0.08, linewidth=0)
        shaded = "Shaded: communication longer than compute (the handbook's 'comms is a bottleneck')"
    ax.plot(nodes, [c / scale for c in compute], color=COLORS["compute"], marker="o",
            label="compute (forward + backward)")
    ax.plot(nodes, [c / scale for c in comms], color=COLORS["communication"], marker="s",
            label="communication (all of it)")
    if exposed is not None:
        ax.plot(nodes, [c / scale for c in exposed], color=COLORS["communication"], marker="^",
                linestyle=":", label="exposed communication")
    if step is not None:
        ax.plot(nodes, [share * s / scale for s in step], color=COLORS["ideal"], linestyle="--",
                linewidth=1.0, label=f"{share:.0%} of the step")
    if at is not None:
        ax.axvline(at, color=COLORS["limit"], linestyle="-.", linewidth=1.2)
        ax.annotate(f"crossover ≈ {at:.2g} nodes\n(communication = compute)", (at, 0.96),
                    xycoords=("data", "axes fraction"),
                    xytext=(6, 0), textcoords="offset points", ha="left", va="top", fontsize=9,
                    fontweight="bold", bbox={"boxstyle": "square,pad=0.2", "facecolor": "white",
                                             "edgecolor": "none", "alpha": 0.85})
    log2_axis(ax, nodes)
    positive = [v for v in list(compute) + list(comms) if v > 0]
    if positive and max(positive) > 30 * min(positive):  # strong scaling over a wide range
        ax.set_yscale("log", nonpositive="mask")
        ax.set_ylim(min(positive) / scale / 3, top / scale * 1.6)
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.4g}"))
    else:
        ax.set_ylim(0, top / scale * (1.25 if at is not None else 1.12))
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"time per step ({unit}{', log scale' if ax.get_yscale() == 'log' else ''})")
    ax.set_title(title, loc="left")
    fig.legend(loc="outside lower center", ncol=3, fontsize=8.5, columnspacing=1.2,
               handlelength=1.8)
    return Chart(name=name, title=title, figure=fig,
                 caption=note[0].upper() + note[1:] + f". {shaded}.")

"""The planner's best plans: each plan's step breakdown as a horizontal stacked bar, best first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.report.plots.base import Chart, new_figure, styled, time_unit
from willitscale.report.style import COLORS, HATCHES, LABELS

__all__ = ["top_plans"]


@styled
def top_plans(labels: Sequence[str], parts: Mapping[str, Sequence[float]],
              tokens_per_s: Sequence[float], *, fits: Sequence[bool | None] | None = None,
              title: str = "Best parallel plans", name: str = "plans") -> Chart:
    """One bar per plan (``labels`` such as ``"TP2 PP4 DP8 mb2"``, best first): the step's
    parts (style meanings -> seconds), with tokens/s written at the end of each bar;
    ``fits=False`` marks plans that do not fit in memory."""
    n = len(labels)
    totals = [sum(v[i] for v in parts.values()) for i in range(n)]
    scale, unit = time_unit(max(totals, default=1.0) or 1.0)
    fig, ax = new_figure(figsize=(8.5, 1.8 + 0.42 * n))
    left = [0.0] * n
    for meaning, values in parts.items():
        widths = [v / scale for v in values]
        ax.barh(range(n), widths, left=left, height=0.62, color=COLORS.get(meaning, "#777777"),
                hatch=HATCHES.get(meaning, ""), edgecolor="white", linewidth=0.5,
                label=LABELS.get(meaning, meaning))
        left = [a + w for a, w in zip(left, widths)]
    for i, (end, tps) in enumerate(zip(left, tokens_per_s)):
        bad = fits is not None and fits[i] is False
        ax.text(end + max(left) * 0.01, i, f"{tps:,.0f} tok/s" + ("  (does not fit)" if bad else ""),
                va="center", ha="left", fontsize=8.5, color="#B2182B" if bad else "#222222")
    ax.set_yticks(range(n), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left, default=1.0) * 1.3)
    ax.set_xlabel(f"step time ({unit})")
    ax.grid(axis="y", visible=False)
    ax.set_title(title, loc="left")
    fig.legend(loc="outside lower center", ncol=4, handlelength=1.2)
    return Chart(name=name, title=title, figure=fig,
                 caption="Ranked by throughput, best at the top; the parts add up to each plan's "
                         "step time.")

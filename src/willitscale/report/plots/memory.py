"""Memory per GPU against the GPU's memory (HBM): one stacked bar per plan or scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.report.plots.base import Chart, new_figure, styled
from willitscale.report.style import COLORS, LABELS

__all__ = ["memory_bars"]

GIB = 2**30  # HBM is sold in GiB (80 GiB = 85.9e9 bytes)


@styled
def memory_bars(labels: Sequence[str], parts: Mapping[str, Sequence[float | None]],
                capacity: float | Sequence[float], *, title: str = "Memory per GPU",
                name: str = "memory") -> Chart:
    """Horizontal stacked bars in GiB of ``parts`` (``weights``, ``gradients``,
    ``optimizer_states``, ``activations``; ``None`` = unknown) with the HBM capacity line."""
    n = len(labels)
    caps = [float(capacity)] * n if isinstance(capacity, (int, float)) else list(capacity)
    fig, ax = new_figure(figsize=(7.5, 1.7 + 0.5 * n))
    left = [0.0] * n
    unknown = [False] * n
    for meaning, values in parts.items():
        widths = []
        for i, v in enumerate(values):
            unknown[i] |= v is None
            widths.append(0.0 if v is None else v / GIB)
        ax.barh(range(n), widths, left=left, height=0.55, color=COLORS.get(meaning, "#777777"),
                edgecolor="white", linewidth=0.5, label=LABELS.get(meaning, meaning))
        left = [a + w for a, w in zip(left, widths)]
    top = max(left + [c / GIB for c in caps])
    for i, (used, cap) in enumerate(zip(left, caps)):
        ax.plot([cap / GIB] * 2, [i - 0.42, i + 0.42], color=COLORS["limit"], linestyle="-.",
                linewidth=1.4, label="GPU memory (HBM)" if i == 0 else None)
        over = used > cap / GIB
        note = (f"{used:,.1f} of {cap / GIB:,.0f} GiB" + (" + activations (unknown)" if unknown[i]
                else "") + (": does not fit" if over else ""))
        ax.text(used + top * 0.01, i, note, va="center", ha="left", fontsize=8.5,
                color="#B2182B" if over else "#222222")
    ax.set_yticks(range(n), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.35)
    ax.set_ylim(n - 0.5, -0.9 if n == 1 else -0.6)
    ax.set_xlabel("memory per GPU (GiB)")
    ax.grid(axis="y", visible=False)
    ax.set_title(title, loc="left")
    fig.legend(loc="outside lower center", ncol=5, handlelength=1.2, columnspacing=1.0)
    return Chart(name=name, title=title, figure=fig,
                 caption="GiB = 2^30 bytes; the dash-dot line is the GPU's memory.")

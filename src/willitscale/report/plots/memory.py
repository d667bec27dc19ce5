"""Memory per GPU against the GPU's memory (HBM): one stacked bar per plan or scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.report.plots.base import Chart, new_figure, styled
from willitscale.report.style import COLORS, LABELS

__all__ = ["memory_bars"]

GIB = 2**30  # HBM is sold in GiB (80 GiB = 85.9e9 bytes)


@styled
def memory_bars(labels: Sequence[str], parts: Mapping[str, Sequence[float | None]],
                capacity: float | Sequence[float], *, usable: float | Sequence[float] | None = None,
                title: str = "Memory per GPU", name: str = "memory") -> Chart:
    """Horizontal stacked bars in GiB of ``parts`` (``weights``, ``gradients``,
    ``optimizer_states``, ``activations``, ``buffers``; ``None`` = unknown) with the HBM
    capacity line, and the share a plan may fill (``usable``, e.g. 0.9 x HBM) when below it."""
    n = len(labels)
    per_bar = lambda x: [float(x)] * n if isinstance(x, (int, float)) else list(x)  # noqa: E731
    caps = per_bar(capacity)
    room = caps if usable is None else per_bar(usable)
    fig, ax = new_figure(figsize=(7.5, 1.7 + 0.5 * n))
    left = [0.0] * n
    unknown = [False] * n
    for meaning, values in parts.items():
        widths = []
        for i, v in enumerate(values):
            unknown[i] |= v is None
            widths.append(0.0 if v is None else v / GIB)
        if not any(widths):
            continue  # an unknown part is said beside the bar, not drawn (nor in the legend)
        ax.barh(range(n), widths, left=left, height=0.55, color=COLORS.get(meaning, "#777777"),
                edgecolor="white", linewidth=0.5, label=LABELS.get(meaning, meaning))
        left = [a + w for a, w in zip(left, widths)]
    top = max(left + [c / GIB for c in caps])
    for i, (used, cap, fill) in enumerate(zip(left, caps, room)):
        ax.plot([cap / GIB] * 2, [i - 0.42, i + 0.42], color=COLORS["limit"], linestyle="-.",
                linewidth=1.4, label="GPU memory (HBM)" if i == 0 else None)
        if fill < cap * (1 - 1e-9):
            ax.plot([fill / GIB] * 2, [i - 0.42, i + 0.42], color=COLORS["limit"], linestyle=":",
                    linewidth=1.4, label=f"usable ({fill / cap:.2g} x HBM)" if i == 0 else None)
        over = used > fill / GIB
        limit = f"{fill / GIB:,.1f} GiB usable" if fill < cap * (1 - 1e-9) else f"{cap / GIB:,.0f} GiB"
        note = (f"{used:,.1f} of {limit}" + ("\ndoes not fit" if over else "")
                + ("\n+ activations (unknown)" if unknown[i] else ""))
        # right of the bar and of the memory lines, so no line crosses the words
        ax.text(max(used, cap / GIB) + top * 0.015, i, note, va="center", ha="left",
                fontsize=8.5, color="#B2182B" if over else "#222222")
    ax.set_yticks(range(n), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.55)
    ax.set_ylim(n - 0.5, -0.9 if n == 1 else -0.6)
    ax.set_xlabel("memory per GPU (GiB)")
    ax.grid(axis="y", visible=False)
    ax.set_title(title, loc="left")
    fig.legend(loc="outside lower center", ncol=4, handlelength=1.2, columnspacing=1.0)
    return Chart(name=name, title=title, figure=fig,
                 caption="GiB = 2^30 bytes; the dash-dot line is the GPU's memory, the dotted "
                         "line the share a plan may fill (--memory-fraction).")

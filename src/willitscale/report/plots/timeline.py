"""The step timeline: compute / communication / idle lanes per rank group, on one time axis.

Drawn like the handbook chapter's diagrams (Bekman's networking chapter)::

    [DL][  compute  ][idle][DL][  compute  ][idle]
    [         comms       ][         comms       ]

one block of lanes per rank group (a pipeline stage, a node count, ...), so a 1-node and a
4-node step side by side show where the idle time appears. Spans of one kind closer than 0.2%
of the axis merge into one block (hundreds of DDP buckets read as one all-reduce), and a block
never shrinks below 0.3% of the axis, so a short exposed all-reduce stays visible. A pipeline's
bubble (spans of kind ``bubble``) is drawn in the bubble's colour, not as idle time; the earlier
micro-batches a schedule draws as one compute span (``args["micro_batches"]``) are labelled as
such (``fwd + bwd × 191``), not as one backward.
"""

from __future__ import annotations

from collections.abc import Sequence

from willitscale.errors import ConfigError
from willitscale.estimation.timeline import LANES, Timeline
from willitscale.report.plots.base import Chart, new_figure, styled, time_unit
from willitscale.report.style import COLORS, HATCHES, KIND_MEANING, LABELS, WIDE
from willitscale.units import format_time

__all__ = ["step_timeline", "merged_blocks"]

_BLOCK_TEXT = {"data": "DL", "forward": "fwd", "backward": "bwd", "optimizer": "opt",
               "comm": "comms", "idle": "idle", "bubble": "bubble"}
_LANE_NAME = {"data": "data", "compute": "compute", "comms": "comms", "idle": "idle"}


def _text(span) -> str:
    collapsed = span.args.get("micro_batches")
    if collapsed and span.lane == "compute":
        return f"fwd + bwd × {collapsed}"
    return _BLOCK_TEXT.get(span.kind, span.kind)


def merged_blocks(spans, gap: float) -> list[tuple[float, float, str, str]]:
    """``(start, end, kind, text)`` blocks: spans drawn alike (same kind and text) at most
    ``gap`` apart merged, in order."""
    blocks: list[tuple[float, float, str, str]] = []
    for s in sorted(spans, key=lambda s: (s.start, s.end)):
        if s.duration <= 0:
            continue
        kind, text = s.kind, _text(s)
        if (blocks and blocks[-1][2] == kind and blocks[-1][3] == text
                and s.start - blocks[-1][1] <= gap):
            blocks[-1] = (blocks[-1][0], max(blocks[-1][1], s.end), kind, text)
        else:
            blocks.append((s.start, s.end, kind, text))
    return blocks


def _lanes(timeline: Timeline) -> list[str]:
    present = {s.lane for s in timeline.spans if s.duration > 0}
    return [lane for lane in LANES if lane in present or lane in ("compute", "comms")]


def _draw_lane(ax, y: float, blocks, *, xmax: float, scale: float, kinds_seen: list[str]) -> None:
    least = 0.003 * xmax
    for start, end, kind, text in blocks:
        meaning = KIND_MEANING.get(kind, kind)
        width = max(end - start, least)
        ax.broken_barh([(start / scale, width / scale)], (y - 0.36, 0.72),
                       facecolors=COLORS.get(meaning, "#777777"), edgecolor="white",
                       linewidth=0.6, hatch=HATCHES.get(meaning, ""))
        if kind not in kinds_seen:
            kinds_seen.append(kind)
        if width > 0.07 * xmax:
            dark = meaning in ("backward", "communication", "bubble", "data")
            ax.text((start + width / 2) / scale, y, text, ha="center",
                    va="center", fontsize=8.5, color="white" if dark else "#222222")


def _draw_slowdown(ax, y: float, spans, *, scale: float, kinds_seen: list[str]) -> None:
    """Hatch the end of a backward span stretched by NCCL kernels running beside it."""
    for s in spans:
        slow = float(s.args.get("overlap_slowdown_s", 0.0) or 0.0)
        if slow <= 0:
            continue
        ax.broken_barh([((s.end - slow) / scale, slow / scale)], (y - 0.36, 0.72),
                       facecolors=COLORS["overlap_slowdown"], edgecolor="white", linewidth=0.6,
                       hatch=HATCHES["overlap_slowdown"])
        if "overlap_slowdown" not in kinds_seen:
            kinds_seen.append("overlap_slowdown")


@styled
def step_timeline(groups: Sequence[tuple[str, Timeline]], *, title: str = "One training step",
                  name: str = "timeline") -> Chart:
    """One block of lanes per ``(label, timeline)`` group on a shared time axis."""
    if not groups:
        raise ConfigError("timeline groups", 0, "at least one (label, Timeline)")
    xmax = max(t.step_time for _, t in groups) or 1.0
    scale, unit = time_unit(xmax)
    rows = sum(len(_lanes(t)) + 1 for _, t in groups)
    fig, ax = new_figure(figsize=(WIDE[0], 1.25 + 0.36 * rows))
    y, yticks, ylabels, kinds = 0.0, [], [], []
    for label, timeline in groups:
        ax.text(0, y, f"{label} — step {format_time(timeline.step_time)}", ha="left",
                va="center", fontsize=9.5, fontweight="bold")
        top = y
        y -= 1
        for lane in _lanes(timeline):
            blocks = merged_blocks(timeline.lane(lane), gap=0.002 * xmax)
            _draw_lane(ax, y, blocks, xmax=xmax, scale=scale, kinds_seen=kinds)
            _draw_slowdown(ax, y, timeline.lane(lane), scale=scale, kinds_seen=kinds)
            yticks.append(y)
            bubble = lane == "idle" and any(b[2] == "bubble" for b in blocks)
            ylabels.append("bubble / idle" if bubble else _LANE_NAME[lane])
            y -= 1
        ax.plot([timeline.step_time / scale] * 2, [top - 0.5, y + 0.5], color=COLORS["limit"],
                linewidth=1.0, linestyle=(0, (3, 2)))
    ax.set_yticks(yticks, ylabels)
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(y + 0.4, 0.6)
    ax.set_xlim(0, xmax * 1.01 / scale)
    ax.grid(axis="y", visible=False)
    ax.spines["left"].set_visible(False)
    ax.set_xlabel(f"time from the start of the step ({unit})")
    ax.set_title(title, loc="left")
    from matplotlib.patches import Patch

    order = ("data", "forward", "backward", "overlap_slowdown", "optimizer", "comm", "idle",
             "bubble")
    meaning = {**KIND_MEANING, "overlap_slowdown": "overlap_slowdown"}
    handles = [Patch(facecolor=COLORS[meaning[k]], hatch=HATCHES.get(meaning[k], ""),
                     label=LABELS[meaning[k]]) for k in order if k in kinds]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4),
               handlelength=1.4, columnspacing=1.2)
    bubble = (" Pipeline bubble: the stage waiting while the pipeline fills and drains, drawn "
              "half before the first forward and half after the last backward."
              if "bubble" in kinds else "")
    return Chart(name=name, title=title, figure=fig,
                 caption="Lanes of one GPU per group (every data-parallel rank does the same); "
                         "the dashed line ends the step. Idle: compute waiting for "
                         "communication." + bubble)

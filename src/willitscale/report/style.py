"""One colour per meaning, shared by every figure and the HTML report.

Compute is blue (forward light, backward dark), communication vermillion, idle grey, the
pipeline bubble pink, data loading green, the optimizer yellow; measurements are black dots and
predictions purple lines; an ideal is a grey dashed line and a limit (HBM, today's bandwidth) a
dark dash-dot line. The hues are Okabe and Ito's colour-blind-safe set ("Color Universal Design",
https://jfly.uni-koeln.de/color/) plus a few of Paul Tol's (https://personal.sron.nl/~pault/) where
more were needed. Pure data: importing this module does not import matplotlib.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["COLORS", "HATCHES", "LABELS", "KIND_MEANING", "FIGSIZE", "WIDE", "DPI", "rc_params",
           "color"]

COLORS = MappingProxyType({
    # where a step's time goes
    "compute": "#0072B2",
    "forward": "#56B4E9",
    "backward": "#0072B2",
    "overlap_slowdown": "#A8D5F2",  #: compute slowed by NCCL kernels beside it (hatched)
    "communication": "#D55E00",
    "exposed_comms": "#D55E00",
    "hidden_comms": "#F3B48A",  #: communication that ran under compute
    "idle": "#BBBBBB",
    "bubble": "#CC79A7",
    "data": "#009E73",
    "optimizer": "#F0E442",
    # models against the world
    "measured": "#000000",
    "predicted": "#7B3294",
    "ideal": "#888888",
    "limit": "#333333",
    # memory per GPU
    "weights": "#332288",
    "gradients": "#999933",
    "optimizer_states": "#F0E442",  #: the optimizer's colour: its states
    "activations": "#44AA99",
    "buffers": "#882255",  #: DDP bucket copies, ZeRO-3 gathered layers, pipeline receive buffers
    "master_weights": "#88CCEE",  #: fp32 master weights
    "workspace": "#CC6677",  #: cuBLAS workspace, autocast's weight copies
    "step_temporaries": "#DDCC77",  #: the optimizer step's temporaries beyond the backward peak
    "cuda_context": "#AA4499",  #: outside PyTorch's allocator
    "nccl": "#117733",  #: NCCL's buffers, outside PyTorch's allocator
})

#: hatch patterns that add meaning beyond colour (readable in greyscale too)
HATCHES = MappingProxyType({"overlap_slowdown": "///", "bubble": "xx", "idle": ""})

LABELS = MappingProxyType({
    "data": "data loading", "forward": "forward", "backward": "backward (incl. recompute)",
    "overlap_slowdown": "overlap slowdown", "exposed_comms": "exposed communication",
    "hidden_comms": "hidden communication", "communication": "communication",
    "optimizer": "optimizer", "bubble": "pipeline bubble", "idle": "idle", "compute": "compute",
    "measured": "measured", "predicted": "predicted", "ideal": "ideal",
    "weights": "weights", "gradients": "gradients", "optimizer_states": "optimizer states",
    "activations": "activations", "buffers": "buffers", "master_weights": "master weights",
    "workspace": "workspace", "step_temporaries": "optimizer-step temporaries",
    "cuda_context": "CUDA context", "nccl": "NCCL",
})

#: a timeline span's kind -> the meaning (colour) it is drawn with
KIND_MEANING = MappingProxyType({
    "data": "data", "forward": "forward", "backward": "backward", "optimizer": "optimizer",
    "comm": "communication", "idle": "idle", "bubble": "bubble",
})

FIGSIZE = (7.5, 4.2)  #: inches; at DPI 150 a 1125 x 630 PNG, readable on a laptop and in a doc
WIDE = (9.5, 4.2)
DPI = 150


def color(meaning: str) -> str:
    """The colour of ``meaning`` (a key of :data:`COLORS`); unknown meanings are grey."""
    return COLORS.get(meaning, "#777777")


def rc_params() -> dict:
    """matplotlib settings every figure uses: sizes readable at 100%, no clutter, fixed
    metadata so the same data gives byte-identical files."""
    return {
        "figure.figsize": FIGSIZE, "figure.dpi": 100, "savefig.dpi": DPI,
        "font.size": 10, "axes.titlesize": 12, "axes.titleweight": "bold", "axes.labelsize": 10.5,
        "xtick.labelsize": 9.5, "ytick.labelsize": 9.5, "legend.fontsize": 9,
        "legend.frameon": False, "axes.spines.top": False, "axes.spines.right": False,
        "axes.grid": True, "grid.color": "#E5E5E5", "grid.linewidth": 0.8, "axes.axisbelow": True,
        "svg.fonttype": "path", "svg.hashsalt": "willitscale", "path.simplify": True,
        "font.family": "DejaVu Sans", "hatch.linewidth": 0.8,
    }

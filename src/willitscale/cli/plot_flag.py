"""The ``--plot DIR`` flag every command that has figures shares, and writing them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["add_plot_flag", "write_plots"]


def add_plot_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--plot DIR`` (PNG and SVG figures; needs the ``plot`` extra)."""
    parser.add_argument("--plot", metavar="DIR",
                        help="also write the figures as PNG and SVG into DIR (needs matplotlib: "
                             "pip install 'willitscale[plot]')")


def write_plots(directory: str, charts: Callable[[], Sequence]) -> list:
    """Draw ``charts()`` and save them into ``directory``; says what it wrote on stderr."""
    from willitscale.report.plots.base import require_matplotlib, write_charts

    require_matplotlib()
    drawn = list(charts())
    paths = write_charts(drawn, directory)
    names = ", ".join(f"{c.name}.{{png,svg}}" for c in drawn)
    print(f"figures written to {directory}: {names}", file=sys.stderr)
    return paths


# -- one call per command ---------------------------------------------------------------------

def estimate_plots(directory: str, est) -> list:
    """``estimate --plot``: the step timeline and memory per GPU."""
    from willitscale.report.figures import estimate_charts

    return write_plots(directory, lambda: estimate_charts(est))


def scale_plots(directory: str, settings, nodes) -> list:
    """``scale --plot``: breakdown by node count, efficiency, comms vs compute (crossover)."""
    from willitscale.plan.build import build_scenario
    from willitscale.plan.estimate import estimate
    from willitscale.report.figures import scaling_charts

    def charts():
        return scaling_charts([estimate(build_scenario({**settings, "nodes": n})) for n in nodes])

    return write_plots(directory, charts)


def requirements_plots(directory: str, rows, *, share: float) -> list:
    """``requirements --plot``: the needed bandwidth against nodes, per model size."""
    from willitscale.report.figures import requirements_charts

    return write_plots(directory, lambda: requirements_charts(rows, share=share))


#: above this many GPUs the traffic heatmap sums each node's GPUs (a picture stays readable)
MAX_HEATMAP_GPUS = 512


def fabric_plots(directory: str, result) -> list:
    """``fabric simulate --plot``: the link utilisation histogram and the GPU-pair traffic
    heatmap (Figure 7 of seeds/002) of a :class:`~willitscale.fabric.simulator.SimulationResult`."""
    from willitscale.fabric.report import link_report
    from willitscale.report.chartdata import pair_matrix
    from willitscale.report.plots.fabric import link_utilization_histogram, traffic_heatmap

    def charts():
        topo = result.topology
        gpus, per_node = topo.gpus, topo.gpus_per_node
        group = per_node if gpus > MAX_HEATMAP_GPUS else 1
        ids, vol = result.traffic.pair_bytes(gpus)
        matrix = pair_matrix(ids, vol, gpus, group=group)
        heat = (traffic_heatmap(matrix, gpus_per_node=per_node, unit="bytes")
                if group == 1 else
                traffic_heatmap(matrix, unit="bytes", title="Traffic between node pairs"))
        return [link_utilization_histogram(link_report(result).histogram), heat]

    return write_plots(directory, charts)

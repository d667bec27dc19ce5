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

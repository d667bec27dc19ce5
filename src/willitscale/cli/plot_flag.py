"""The ``--plot DIR`` flag every command that has figures shares, and writing them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["add_plot_flag", "write_plots"]


def add_plot_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--plot DIR`` (PNG and SVG figures; needs the ``plot`` extra)."""
    from willitscale.cli.paths import output_directory

    parser.add_argument("--plot", metavar="DIR", type=output_directory("--plot"),
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
    """``scale --plot``: breakdown by node count, efficiency, comms vs compute (crossover); plans
    out of memory are drawn with their numbers (marked OOM), as the table shows them. With one
    node count only the breakdown: stderr says why."""
    from willitscale.estimation.estimate import estimate
    from willitscale.report.figures import scaling_charts, scaling_notes
    from willitscale.scenario.build import build_scenario

    def charts():
        estimates = [estimate(build_scenario({**settings, "nodes": n}), allow_oom=True)
                     for n in nodes]
        for note in scaling_notes(estimates):
            print(f"note: {note}", file=sys.stderr)
        return scaling_charts(estimates)

    return write_plots(directory, charts)


def requirements_plots(directory: str, rows, *, share: float) -> list:
    """``requirements --plot``: the needed bandwidth against nodes, per model size."""
    from willitscale.report.figures import requirements_charts

    return write_plots(directory, lambda: requirements_charts(rows, share=share))


#: above this many GPUs the traffic heatmap sums each node's GPUs (a picture stays readable)
MAX_HEATMAP_GPUS = 512


def fabric_plots(directory: str, result) -> list:
    """``fabric simulate --plot``: the link utilisation histogram and the GPU-pair traffic
    heatmap (Figure 7 of 'GPU fabrics for GenAI workloads') of a :class:`~willitscale.fabric.simulator.SimulationResult`."""
    from willitscale.fabric.report import link_report
    from willitscale.report.chartdata import pair_matrix
    from willitscale.report.plots.fabric import (
        link_utilization_histogram,
        traffic_heatmap,
    )

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


# -- measurements: plain records in, figures out ----------------------------------------------

def bench_plots(directory: str, rows, predicted=None, *, name: str = "busbw",
                title: str = "Bus bandwidth vs message size") -> list:
    """``bench collectives --plot``: busbw vs message size, measured (and predicted) on one chart.

    ``rows``: measured records as ``bench --json`` prints them (``op``, ``ranks``,
    ``size_bytes``, ``busbw_GBps``, optional ``in_place``); one series per (op, ranks), in-place
    rows of an op left out when it has out-of-place ones. ``predicted``: ``{label: (sizes, busbw in
    bytes/s)}`` from the model (e.g. the calibration's alpha-beta fit), or None.
    """
    from willitscale.report.plots.measurements import busbw_vs_size

    series: dict[str, dict[float, float]] = {}
    # per op: an op measured both ways shows its out-of-place rows; one torch runs only in
    # place (all_reduce, broadcast, reduce) shows those
    out_of_place_ops = {r["op"] for r in rows if not r.get("in_place", False)}
    for r in rows:
        if r["op"] in out_of_place_ops and r.get("in_place", False):
            continue
        label = f"{r['op']}, {r['ranks']} ranks"
        series.setdefault(label, {})[float(r["size_bytes"])] = float(r["busbw_GBps"]) * 1e9
    measured = {k: (sorted(v), [v[s] for s in sorted(v)]) for k, v in series.items()}
    return write_plots(directory, lambda: [busbw_vs_size(measured, predicted, title=title,
                                                         name=name)])


def collective_plots(directory: str, environment, rows, *, run_id: int | None = None,
                     name: str = "busbw") -> list:
    """``bench collectives --plot`` and ``results show --plot``: the measured rows (JSON records)
    against the model's prediction for the run's setup: the latest calibration when it can
    predict the run, else the catalog or the emulated uplink (:mod:`willitscale.calibrate.busbw`);
    says on stderr where the prediction came from."""
    from willitscale.calibrate.busbw import latest_calibration, predicted_busbw
    from willitscale.calibrate.runs import run_from_environment
    from willitscale.errors import WillItScaleError
    from willitscale.results.store import Store

    try:
        run = run_from_environment(environment, kind="collectives", rows=rows, id=run_id or 0)
        with Store() as store:
            calibration = latest_calibration(store)
        prediction = predicted_busbw(run, calibration)
        curves, note = prediction.curves, prediction.note
    except WillItScaleError as exc:  # uneven ranks per node, an unreadable calibration
        curves, note = None, f"no prediction: {exc}"
    print(note, file=sys.stderr)
    where = f", run {run_id}" if run_id is not None else ""
    return bench_plots(directory, rows, curves or None, name=name,
                       title=f"Bus bandwidth vs message size{where}")


def validate_plots(directory: str, rows, *, band: float = 0.10) -> list:
    """``validate --plot``: predicted vs measured with a ``±band`` error band; ``rows`` as
    ``validate --json`` prints them (``measured_s``, ``predicted_s``, ``in_sample``)."""
    from willitscale.report.plots.measurements import predicted_vs_measured

    return write_plots(directory, lambda: [predicted_vs_measured(
        [float(r["measured_s"]) for r in rows], [float(r["predicted_s"]) for r in rows],
        in_sample=[bool(r.get("in_sample")) for r in rows], band=band)])


def plan_plots(directory: str, plans, *, top: int = 10) -> list:
    """``plan --plot``: the best plans' step breakdowns, and their memory against HBM.

    ``plans``: records best first, each with ``label`` (e.g. ``"TP2 PP4 DP4 mb2"``),
    ``tokens_per_s``, ``breakdown_s`` (the estimate's ``Breakdown.to_json()``), optional
    ``fits`` and optional ``memory`` (``MemoryBreakdown.to_json()``).
    """
    from willitscale.report.chartdata import BREAKDOWN_PARTS
    from willitscale.report.plots.memory import memory_bars
    from willitscale.report.plots.planner import top_plans

    best = list(plans)[:top]

    def charts():
        parts = {}
        for field, meaning in BREAKDOWN_PARTS:
            values = [float(p["breakdown_s"].get(f"{field}_s", 0.0)) for p in best]
            if any(values):
                parts[meaning] = values
        out = [top_plans([p["label"] for p in best], parts, [p["tokens_per_s"] for p in best],
                         fits=[p.get("fits") for p in best])]
        mems = [p["memory"] for p in best if p.get("memory")]
        if len(mems) == len(best):
            parts = {"weights": [m["weights_bytes"] for m in mems],
                     "gradients": [m["gradients_bytes"] for m in mems],
                     "optimizer_states": [m["optimizer_bytes"] for m in mems],
                     "activations": [m["activations_bytes"] for m in mems]}
            buffers = [m.get("buffers_bytes") or 0.0 for m in mems]
            if any(buffers):  # ZeRO-3 gathered layers, pipeline receive buffers
                parts["buffers"] = buffers
            usable = [m.get("limit_bytes") or m["capacity_bytes"] for m in mems]
            out.append(memory_bars(
                [p["label"] for p in best], parts,
                [m["capacity_bytes"] for m in mems], usable=usable,
                title="Memory per GPU, best plans", name="plans-memory"))
        return out

    return write_plots(directory, charts)

"""What the model predicts for a measured collective sweep: busbw against message size.

``bench collectives --plot`` and ``results show --plot`` draw the measured rows next to a
prediction, nccl-tests style. The prediction comes, in this order of preference, from

1. **the calibration** (the latest ``willitscale calibrate`` wrote, or one given), when it can
   predict this run: each op by its ``[[collective]]`` entry for the run's library, pair and
   geometry (:func:`willitscale.calibrate.validate.collective_entry`), else, with the same
   backend, the link levels the run crosses fitted and the same emulated uplink
   (:func:`willitscale.calibrate.validate.collective_links`), in the alpha-beta form the
   calibration was fitted in (:func:`~willitscale.calibrate.forms.default_algorithm`);
2. **the catalog** for the detected setup, when the devices are a catalog GPU
   (:func:`~willitscale.calibrate.compute.catalog_gpu_for`) of a catalog node preset: that
   node's links at their catalog efficiency, and the algorithm the model would pick at each size
   (:func:`~willitscale.collectives.choice.fastest`), as ``willitscale collective --node`` does
   (on a node with one NIC per GPU, ``r`` ranks per node drive ``r`` of its NICs);
3. **the shaped uplink** of an emulated cluster with one rank per node: the tbf rate as the
   one-direction bandwidth, no latency (nothing in this kernel adds any; DESIGN.md), the ring;

else nothing, with the reason. The label of each curve says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from willitscale.calibrate.compute import catalog_gpu_for
from willitscale.calibrate.forms import (
    default_algorithm,
    flat_time,
    library_algorithm,
    two_level_time,
)
from willitscale.calibrate.runs import MeasuredRun
from willitscale.calibrate.validate import collective_entry, collective_links, entry_algorithm
from willitscale.collectives.choice import fastest
from willitscale.collectives.metrics import busbw
from willitscale.collectives.network import Hierarchy
from willitscale.collectives.ops import Op
from willitscale.hardware.calibration import Calibration
from willitscale.hardware.catalog import list_nodes
from willitscale.units import format_bandwidth

__all__ = ["Prediction", "predicted_busbw", "size_grid", "latest_calibration"]

#: points per factor of two in message size on a predicted curve
POINTS_PER_OCTAVE = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """Predicted busbw curves, ``{label: (sizes in bytes, busbw in bytes/s)}``, and where the
    figures come from (``source``: "calibration", "catalog", "uplink" or "" for none)."""

    curves: dict
    source: str
    note: str  #: one line for the user: what was used, or why nothing was


def size_grid(sizes: Sequence[float]) -> np.ndarray:
    """Message sizes from the smallest to the largest measured, :data:`POINTS_PER_OCTAVE` per
    factor of two (log-spaced), so a predicted line is smooth where the measurement is sparse."""
    lo, hi = float(min(sizes)), float(max(sizes))
    if hi <= lo:
        return np.array([lo])
    return np.geomspace(lo, hi, int(math.ceil(math.log2(hi / lo) * POINTS_PER_OCTAVE)) + 1)


def latest_calibration(store):
    """The newest calibration ``willitscale calibrate`` recorded in ``store``, or None."""
    import tomllib


    stored = store.calibrations()
    if not stored:
        return None
    cal = Calibration.from_toml_data(tomllib.loads(stored[0].toml), where=stored[0].path)
    return replace(cal, path=stored[0].path)


def _from_calibration(run: MeasuredRun, ops, grid, cal) -> Prediction | str:
    links, reason = collective_links(run, cal)
    curves = {}
    for op in ops:
        entry = collective_entry(op, run, cal)
        if entry is not None:  # the measured line of this op, pair and geometry
            curves[f"{op.value}, calibrated [[collective]] ({entry_algorithm(entry)})"] = (
                list(grid), list(busbw(op, grid, entry.time(np.asarray(grid, dtype=float)), run.ranks)))
            continue
        if reason:
            continue
        algorithm = default_algorithm(op)
        if run.level == "two_level":
            intra, inter = links["intra_node"], links["inter_node"]
            t = two_level_time(op, algorithm, grid, run.ranks, ranks_per_node=run.ranks_per_node,
                               intra=(intra.bandwidth, intra.latency),
                               inter=(inter.bandwidth, inter.latency))
        else:
            (link,) = links.values()
            t = flat_time(op, algorithm, grid, run.ranks, bandwidth=link.bandwidth,
                          latency=link.latency)
        curves[f"{op.value}, calibrated ({library_algorithm(run.backend, op)})"] = (list(grid),
                                                           list(busbw(op, grid, t, run.ranks)))
    if not curves:
        return f"the calibration cannot predict it ({reason or 'no op of the run'})"
    return Prediction(curves=curves, source="calibration",
                      note=f"predicted from the calibration {cal.path or '(unnamed)'} fitted to "
                           f"runs {', '.join(map(str, cal.runs))}")


def _catalog_node(run: MeasuredRun):
    """The catalog node preset of the run's devices, or the reason there is none."""

    if len(run.devices) != 1:
        return None, f"devices {', '.join(run.devices) or '?'} (one catalog GPU is needed)"
    gpu = catalog_gpu_for(run.devices[0])
    if gpu is None:
        return None, f"{run.devices[0]} is not a catalog GPU"
    nodes = [n for n in list_nodes() if n.gpu.name == gpu.name]
    if not nodes:
        return None, f"no catalog node preset has {gpu.name} GPUs"
    return nodes[0], ""


def _from_catalog(run: MeasuredRun, ops, grid) -> Prediction | str:
    node, reason = _catalog_node(run)
    if node is None:
        return reason
    net = Hierarchy.from_node(node)
    if net.rails and run.ranks_per_node < node.nics:  # one NIC per GPU: r ranks drive r NICs
        net = replace(net, inter=replace(net.inter, bandwidth=net.inter.bandwidth
                                         * run.ranks_per_node / node.nics))
    network = net.intra if run.nodes == 1 else (
        net.inter if run.ranks_per_node == 1 else replace(net, ranks_per_node=run.ranks_per_node))
    curves = {}
    for op in ops:
        times = np.asarray(fastest(op, grid, run.ranks, network).cost.time, dtype=float)
        curves[f"{op.value}, catalog {node.name}"] = (list(grid),
                                                      list(busbw(op, grid, times, run.ranks)))
    return Prediction(curves=curves, source="catalog",
                      note=f"predicted from the catalog node {node.name} (no calibration for this "
                           "setup: run `willitscale calibrate` to fit one)")


def _from_uplink(run: MeasuredRun, ops, grid) -> Prediction | str:
    if not run.uplink or run.nodes < 2 or run.ranks_per_node != 1:
        return "no emulated uplink with one rank per node"
    rate = format_bandwidth(run.uplink, bits=True)
    curves = {}
    for op in ops:
        algorithm = default_algorithm(op)
        t = flat_time(op, algorithm, grid, run.ranks, bandwidth=run.uplink, latency=0.0)
        curves[f"{op.value}, shaped uplink {rate} ({library_algorithm(run.backend, op)})"] = (
            list(grid), list(busbw(op, grid, t, run.ranks)))
    return Prediction(curves=curves, source="uplink",
                      note=f"predicted from the emulated uplink ({rate}, no latency): no "
                           "calibration for this setup, run `willitscale calibrate` to fit one")


def predicted_busbw(run: MeasuredRun, calibration=None) -> Prediction:
    """The prediction for ``run``'s collective rows (see the module docstring for the order)."""
    rows = [r for r in run.rows if not getattr(r, "wrong", 0)]
    if run.kind != "collectives" or not rows:
        return Prediction(curves={}, source="", note="no collective rows to predict")
    ops = sorted({Op(r.op) for r in rows}, key=lambda o: o.value)
    grid = size_grid([r.size_bytes for r in rows])
    if run.ranks < 2:
        return Prediction(curves={}, source="", note="one rank: no traffic to predict")
    reasons = []
    attempts = ((lambda: _from_calibration(run, ops, grid, calibration)) if calibration else None,
                lambda: _from_catalog(run, ops, grid), lambda: _from_uplink(run, ops, grid))
    for attempt in filter(None, attempts):
        got = attempt()
        if isinstance(got, Prediction):
            return got if not reasons else replace(got, note=f"{got.note}; {reasons[0]}")
        reasons.append(got)
    if calibration is None:
        reasons.insert(0, "no calibration yet")
    return Prediction(curves={}, source="", note="no prediction: " + "; ".join(reasons))

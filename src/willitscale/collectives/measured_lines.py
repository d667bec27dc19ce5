"""A calibration's measured collectives in the estimate's lines.

A measured profile's ``[[collective]]`` entries
(:class:`~willitscale.hardware.profile_collective.CollectiveCurve`) each hold ``time = latency +
size / bandwidth`` of one (library, op, algorithm, protocol) on one communicator geometry (nodes
x ranks per node), fitted by ``willitscale calibrate`` to a ``bench collectives`` sweep. The
estimate, the planner and every what-if that costs collectives through
:func:`willitscale.collectives.lines.collective_lines` take them here, per group geometry:

* **NCCL** (the catalog node's tuning model): NCCL still picks its (algorithm, protocol) by its
  own model (a measurement does not change what NCCL runs, as ``collective --calibration``,
  :mod:`willitscale.collectives.nccl_calibrated`); when the pick is a measured pair, its time is
  the measured line in place of the model's achieved time. Pairs not measured keep the model's.
* **Gloo** runs one algorithm per op: a measured entry of that op times the group outright.
* **alpha-beta** (NCCL on a calibration's fitted link levels, where NCCL's model is not run): the
  measured pairs replace the alpha-beta candidates of the group, and the fastest measured pair
  per size is taken (NCCL's tuner aims at the fastest pair; unmeasured pairs are not known here;
  as everywhere on these lines, the first within the alpha-beta rule's tolerance of the fastest).

NCCL's send_recv and all_to_all (pipeline sends, context-parallel ring passes, expert
all-to-alls) are point-to-point sends: their entries (``P2P``, protocol ``LL/Simple``, NCCL's own
choice per message, :mod:`willitscale.hardware.profile_collective`) time the model's one
point-to-point candidate, ``P2P/Simple``, under NCCL, and are the one measured candidate under
alpha-beta.

A geometry matches an entry when the group has the entry's nodes and ranks per node (a group
inside one node: ``nodes = 1``). The share of the node's NICs is not compared: a group of ``r``
ranks per node gets ``r / gpus_per_node`` of them in the placement, as one such communicator
measured alone on the nodes did.

A what-if that makes a level ``k`` times faster (``estimate``'s levers, ``requirements``: the
links' line rates scaled, :attr:`~willitscale.collectives.lines.ClusterLinks.scale`) makes a
measured line's bytes term ``k`` times faster, its latency unchanged: the inter-node factor for a
group across nodes (its bytes cross the NICs), the intra-node one for a group inside a node.

Outside the sizes an entry was fitted to (``min_size_bytes``..``max_size_bytes``) its line is
extrapolated as it stands (latency + size / bandwidth): continuous and, above the largest size,
NCCL's own form; below the smallest, the fitted latency may not be the latency NCCL pays there (a
protocol the measurement did not run). :func:`measured_notes` says so in the estimate's
assumptions, naming each entry's range.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from willitscale.collectives.line_time import CollectiveLines
from willitscale.units import format_size

__all__ = ["curves_for", "with_measured_curves", "measured_notes"]

_LIBRARY = {"nccl": "nccl", "alpha-beta": "nccl", "gloo": "gloo"}


def curves_for(curves, op: str, backend: str, nodes: int, ranks_per_node: int) -> list:
    """The entries of ``curves`` that time ``op`` on ``nodes`` x ``ranks_per_node`` ranks under
    ``backend`` (an estimate backend: nccl, alpha-beta or gloo)."""
    library = _LIBRARY.get(backend)
    return [c for c in curves if c.backend == library and c.op == op and c.nodes == nodes
            and c.ranks_per_node == ranks_per_node]


def _row_geometry(key: float, size: float) -> tuple[int, int] | None:
    """(nodes, ranks per node) of a row of :func:`~willitscale.collectives.lines._geometries`
    (key: members per node, 0 inside one node); None for an uneven split or a one-rank group."""
    n, k = int(size), int(key)
    if n <= 1:
        return None
    if k <= 0:
        return 1, n
    return (n // k, k) if n % k == 0 else None


def _line(curve, faster: float = 1.0) -> tuple[float, float]:
    """(latency, seconds per byte) of ``curve``, its bytes term ``faster`` times faster."""
    return float(curve.latency), 1.0 / (float(curve.bandwidth) * faster)


def _matched(lines: CollectiveLines, unique, curves, backend: str, scale):
    """(row, entries, what-if speed-up of the row's bytes term) for every row with at least one
    matching entry."""
    out = []
    for i, row in enumerate(np.asarray(unique, dtype=float)):
        geometry = _row_geometry(float(row[0]), float(row[1]))
        if geometry is None:
            continue
        found = curves_for(curves, lines.op, backend, *geometry)
        if found:
            across = geometry[0] > 1
            # the links' what-if factor times the row's own (a probe's per-plan scale,
            # columns 3 and 4 of the geometries: intra, inter)
            own = float(row[4] if across else row[3]) if row.size > 3 else 1.0
            out.append((i, found, float(scale[1] if across else scale[0]) * own))
    return out


def _pair(curve) -> str:
    """NCCL's spelling of the model candidate an entry times ("Ring/Simple", "NVLSTree/Simple";
    a point-to-point entry, ``P2P (LL/Simple)``, times the model's one P2P candidate
    "P2P/Simple"); an algorithm NCCL does not have is a
    :class:`~willitscale.errors.ConfigError` naming NCCL's."""
    from willitscale.collectives.nccl.run import parse_nccl_algorithm, parse_protocol

    field = f"[[collective]] {curve.op} on {curve.nodes} x {curve.ranks_per_node}: algorithm"
    algorithm, protocol = curve.model_pair
    algorithm = parse_nccl_algorithm(algorithm, field=field).value
    return f"{algorithm}/{parse_protocol(protocol, field=field[:-9] + 'protocol').label}"


def _label(curve) -> str:
    """An entry's name as a column of its own: NCCL's spelling of its pair; a point-to-point
    entry's own labels, "P2P (LL/Simple)"."""
    return curve.pair if curve.point_to_point else _pair(curve)


def _by_pair(lines: CollectiveLines, matched) -> CollectiveLines:
    """NCCL lines: a measured pair times its column where NCCL picks it."""
    columns = {name: j for j, name in enumerate(lines.algorithms)}
    measured = np.full(lines.intercept.shape + (2,), np.nan)
    for i, found, faster in matched:
        for curve in found:
            j = columns.get(_pair(curve))
            if j is not None and np.isfinite(lines.intercept[i, j]):
                measured[i, j] = _line(curve, faster)
    if np.isnan(measured).all():
        return lines
    return replace(lines, measured=measured)


def _gloo(lines: CollectiveLines, matched) -> CollectiveLines:
    """Gloo lines (one column, Gloo's algorithm for the op): the measured line times the row."""
    intercept, slope = lines.intercept.copy(), lines.slope.copy()
    for i, found, faster in matched:
        intercept[i, 0], slope[i, 0] = _line(found[0], faster)
    return replace(lines, intercept=intercept, slope=slope)


def _alpha_beta(lines: CollectiveLines, matched) -> CollectiveLines:
    """alpha-beta lines: a column per measured pair; on a measured row only those run, chosen by
    the alpha-beta rule (the first within its tolerance of the fastest)."""
    pairs = sorted({_label(c) for _, found, _ in matched for c in found})
    rows, old = lines.intercept.shape
    intercept = np.hstack([lines.intercept, np.full((rows, len(pairs)), np.inf)])
    slope = np.hstack([lines.slope, np.zeros((rows, len(pairs)))])
    for i, found, faster in matched:
        intercept[i, :old] = np.inf
        for curve in found:
            j = old + pairs.index(_label(curve))
            intercept[i, j], slope[i, j] = _line(curve, faster)
    return replace(lines, algorithms=lines.algorithms + tuple(f"{p} (measured)" for p in pairs),
                   intercept=intercept, slope=slope)


def with_measured_curves(lines: CollectiveLines, unique, curves, backend: str,
                         scale=(1.0, 1.0)) -> CollectiveLines:
    """``lines`` (rows: the distinct geometries ``unique``) timed by the measured entries
    ``curves`` wherever one matches, as the module docstring says; ``scale``: (intra, inter)
    what-if factors of the links' line rates."""
    if not curves:
        return lines
    matched = _matched(lines, unique, curves, backend, scale)
    if not matched:
        return lines
    if backend == "nccl":
        return _by_pair(lines, matched)
    if backend == "gloo":
        return _gloo(lines, matched)
    return _alpha_beta(lines, matched)


def measured_notes(curves, backend: str) -> tuple[str, ...]:
    """One line per entry the estimate may use: what it times and outside which sizes its line
    is extrapolated."""
    library = _LIBRARY.get(backend)
    out = []
    for c in curves:
        if c.backend != library:
            continue
        span = (f"{format_size(c.min_size, binary=True)} to {format_size(c.max_size, binary=True)}"
                if np.isfinite(c.max_size) else f"from {format_size(c.min_size, binary=True)}")
        how = {"nccl": "where NCCL's model picks this pair",
               "gloo": "for every such group",
               "alpha-beta": "the fastest measured pair per size for such groups"}[backend]
        out.append(f"{c.backend} {c.op} {c.pair} on {c.nodes} node(s) x {c.ranks_per_node} rank(s): "
                   f"measured {c.latency * 1e6:.3g} us + size / {c.bandwidth / 1e9:.4g} GB/s "
                   f"(runs {', '.join(map(str, c.runs)) or '?'}), {how}; fitted on {span}, "
                   "extrapolated along that line outside it")
    return tuple(out)

"""Fit ``[[collective]]`` profile entries: latency and bandwidth per (library, op, algorithm,
protocol) and communicator geometry, from ``bench collectives`` sweeps.

Each entry is NCCL's own form, ``time = latency + size / bandwidth`` (docs/collectives.md
section 11), fitted to the correct rows of every run of one setup by least squares on the
*relative* error (``(latency + S / B) / t - 1``; linear in ``latency`` and ``1 / B``, both kept
>= 0), so a 1 kB row and a 1 GB row weigh the same.

Which pair ran is known, never guessed:

* **Gloo** runs one algorithm per op (:data:`willitscale.collectives.gloo.GLOO_ALGORITHM`): the
  entry is named by it ("ring" for all_reduce), protocol "".
* **NCCL** picks a pair per size unless told: a run is fitted only when it set ``NCCL_ALGO`` and
  ``NCCL_PROTO`` to one algorithm and one protocol on every node (``bench collectives`` records
  both); otherwise a note says how to measure one (the pair NCCL chose per size is not recorded).
* **NCCL send_recv and all_to_all** are point-to-point sends, to which ``NCCL_ALGO`` and
  ``NCCL_PROTO`` do not apply: every such run is fitted, the entry named ``P2P`` /
  ``LL/Simple`` (NCCL's own choice of protocol per message;
  :mod:`willitscale.hardware.profile_collective` cites NCCL's source), from ``bench collectives``
  runs and imported nccl-tests ``sendrecv_perf`` / ``alltoall_perf`` logs alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from willitscale.calibrate.runs import MeasuredRun
from willitscale.collectives.gloo import GLOO_ALGORITHM
from willitscale.collectives.nccl.run import parse_nccl_algorithm, parse_protocol
from willitscale.errors import ConfigError
from willitscale.hardware.profile_collective import P2P_ALGORITHM, P2P_OPS, P2P_PROTOCOL, CollectiveCurve

__all__ = ["collective_curves", "fit_latency_bandwidth", "measured_pair"]


def fit_latency_bandwidth(sizes, times) -> tuple[float, float, float]:
    """``(latency, bandwidth, rms relative error)`` of ``time = latency + size / bandwidth``."""
    from scipy.optimize import lsq_linear

    s, t = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    a = np.stack([1.0 / t, s / t], axis=1)
    scale = np.array([float(np.median(t)), float(np.median(t / np.maximum(s, 1.0)))])
    result = lsq_linear(a * scale, np.ones_like(t), bounds=(0.0, np.inf))
    latency, inverse = result.x * scale
    if inverse <= 0:
        raise ConfigError("collective sweep", list(s), "sizes whose time grows with the size")
    rms = float(np.sqrt(np.mean(((latency + s * inverse) / t - 1) ** 2)))
    return float(latency), float(1.0 / inverse), rms


def measured_pair(run: MeasuredRun, op) -> tuple[str, str] | str:
    """(algorithm, protocol) the run ran for ``op``, as its ``[[collective]]`` entry names
    them, or why it is not known (the module docstring says when it is)."""
    if run.backend == "gloo":
        return GLOO_ALGORITHM[op].split(" (")[0], ""
    if run.backend != "nccl":
        return f"backend {run.backend!r} has no collective model"
    if op.value in P2P_OPS:  # point-to-point: NCCL_ALGO/NCCL_PROTO do not apply
        return P2P_ALGORITHM, P2P_PROTOCOL
    if not run.nccl_algo or not run.nccl_proto:
        return ("NCCL picked its algorithm and protocol per size (NCCL_ALGO and NCCL_PROTO unset); "
                "run `bench collectives` with both set, e.g. NCCL_ALGO=Ring NCCL_PROTO=Simple")
    try:
        return parse_nccl_algorithm(run.nccl_algo).value, parse_protocol(run.nccl_proto).label
    except ConfigError:
        return f"NCCL_ALGO={run.nccl_algo} NCCL_PROTO={run.nccl_proto} is not one algorithm and one protocol"


def _points(runs: Sequence[MeasuredRun]) -> tuple[dict, list[str]]:
    groups: dict[tuple, list] = {}
    notes: dict[tuple, str] = {}  # one per (run, op) left out
    for run in runs:
        if run.kind != "collectives":
            continue
        for row in run.rows:
            if row.wrong or row.ranks < 2:
                continue
            pair = measured_pair(run, row.op)
            if isinstance(pair, str):
                notes.setdefault((run.id, row.op.value),
                                 f"run {run.id}: no [[collective]] entry for {row.op.value}: {pair}")
                continue
            key = (run.backend, row.op.value, *pair, run.nodes, run.ranks_per_node)
            groups.setdefault(key, []).append((row.size_bytes, row.time, run.id))
    return groups, list(notes.values())


def collective_curves(runs: Sequence[MeasuredRun], *, source: str = "willitscale calibrate"
                      ) -> tuple[list[CollectiveCurve], list[str]]:
    """One :class:`CollectiveCurve` per (library, op, algorithm, protocol, nodes, ranks per node)
    the collective ``runs`` measured, and notes on what could not be fitted."""
    groups, notes = _points(runs)
    out = []
    for (backend, op, algorithm, protocol, nodes, rpn), points in groups.items():
        sizes = np.array([p[0] for p in points], dtype=float)
        if len(set(sizes)) < 2:
            notes.append(f"{backend} {op} on {nodes} x {rpn}: one size only, no latency/bandwidth split")
            continue
        try:
            latency, bandwidth, rms = fit_latency_bandwidth(sizes, [p[1] for p in points])
        except ConfigError as exc:
            notes.append(f"{backend} {op} on {nodes} x {rpn}: not fitted ({exc})")
            continue
        out.append(CollectiveCurve(
            backend=backend, op=op, algorithm=algorithm, protocol=protocol, nodes=nodes,
            ranks_per_node=rpn, latency=latency, bandwidth=bandwidth, min_size=float(sizes.min()),
            max_size=float(sizes.max()), points=len(points), rms_error=rms,
            runs=tuple(sorted({p[2] for p in points})), source=source))
    return out, notes

"""A measured profile's ``[[collective]]`` entries in NCCL's choice: measured pairs take their
measured time.

NCCL still picks by its own model (a measurement of one pair does not change what NCCL runs); the
*achieved* time of every pair a :class:`~willitscale.hardware.profile_collective.CollectiveCurve`
measured on the same communicator geometry (library NCCL, same op, same nodes and ranks per node)
becomes ``latency + size / bandwidth`` of that entry, in place of the fitted corrections of
:data:`~willitscale.collectives.nccl.run.ACHIEVED`. A point-to-point entry (send_recv,
all_to_all: ``P2P``, ``LL/Simple``) times the model's one point-to-point candidate, ``P2P/Simple``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from willitscale.collectives.nccl.run import NcclChoice

__all__ = ["with_measured_pairs"]


def with_measured_pairs(choice: NcclChoice, curves) -> tuple[NcclChoice, list[str]]:
    """``choice`` with the achieved times of the pairs ``curves`` measured, and a note per pair
    replaced (saying when a size lies outside the sizes its entry was fitted to)."""
    system = choice.system
    wanted = {tuple(name.lower() for name in c.model_pair): c for c in curves
              if c.backend == "nccl" and c.op == choice.op.value and c.nodes == system.nodes
              and c.ranks_per_node == system.ranks_per_node}
    if not wanted:
        return choice, []
    achieved = np.array(choice.achieved, dtype=float, copy=True)
    notes = []
    for j, pair in enumerate(choice.pairs):
        curve = wanted.get((pair.algorithm.value.lower(), pair.protocol.label.lower()))
        if curve is None:
            continue
        achieved[j] = curve.time(choice.size)
        outside = [s for s in choice.size if not curve.covers(float(s))]
        notes.append(f"{curve.pair}: measured time from the calibration's [[collective]] entry "
                     f"(runs {', '.join(map(str, curve.runs)) or '?'}, {curve.points} points)"
                     + (f"; {len(outside)} size(s) outside the measured {curve.min_size:,.0f}-"
                        f"{curve.max_size:,.0f} B" if outside else ""))
    return replace(choice, achieved=achieved), notes

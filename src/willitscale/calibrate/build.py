"""``calibrate``: stored runs in, a :class:`Calibration` out (plus notes on what was left out)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

from willitscale.calibrate.collective_curves import collective_curves
from willitscale.calibrate.compute import compute_calibrations
from willitscale.calibrate.links import link_calibrations
from willitscale.calibrate.runs import MeasuredRun
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import Calibration

__all__ = ["calibrate"]


def calibrate(runs: Sequence[MeasuredRun], *, created: str, op: str | None = None,
              gpu: str | None = None) -> tuple[Calibration, list[str]]:
    """Fit every link level, compute entry and ``[[collective]]`` curve ``runs`` measured."""
    if not runs:
        raise ConfigError("runs", [], "at least one stored run")
    links, link_notes = link_calibrations(runs, op=op)
    compute, compute_notes = compute_calibrations(runs, gpu=gpu)
    curves, curve_notes = collective_curves(runs, source=f"willitscale calibrate on {socket.gethostname()}")
    if not links and not compute and not curves:
        notes = link_notes + compute_notes + curve_notes
        why = "; ".join(notes) if notes else "; ".join(
            f"run {r.id} ({r.kind}) has {len(r.rows)} rows" for r in runs)
        raise ConfigError("runs", [r.id for r in runs],
                          f"runs with something to fit: collective sweeps, matmul or train runs ({why})")
    setups = sorted({r.setup for r in runs})
    shapes = sorted({f"{r.nodes} x {r.ranks_per_node}" for r in runs})
    cal = Calibration(links=tuple(links), compute=tuple(compute), created=created,
                      runs=tuple(sorted(r.id for r in runs)),
                      setup=f"{'; '.join(setups)}; nodes x ranks: {', '.join(shapes)}",
                      source=f"willitscale calibrate on {socket.gethostname()}",
                      sections={"collective": tuple(curves)} if curves else {})
    return cal, link_notes + compute_notes + curve_notes

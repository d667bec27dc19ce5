"""``calibrate``: stored runs in, a :class:`Calibration` out (plus notes on what was left out)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

from willitscale.calibrate.compute import compute_calibrations
from willitscale.calibrate.links import link_calibrations
from willitscale.calibrate.profile_fit import gemm_sections, sustained_section
from willitscale.calibrate.runs import MeasuredRun
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import Calibration
from willitscale.units import format_bandwidth

__all__ = ["calibrate", "check_same_network"]


def check_same_network(runs: Sequence[MeasuredRun]) -> None:
    """Refuse runs measured on different networks: an emulated uplink shaped to different rates
    (or emulated beside real) would be fitted as one link and describe neither."""
    across = [r for r in runs if r.nodes > 1]  # a single-node run never crosses the uplink
    if len({r.uplink for r in across}) < 2:
        return
    each = ", ".join(f"run {r.id}: " + (format_bandwidth(r.uplink, bits=True) + " emulated uplink"
                                         if r.uplink else "no emulated uplink") for r in across)
    raise ConfigError("run ids", [r.id for r in across],
                      f"runs measured on one network; these differ ({each}): calibrate each "
                      "uplink rate separately, one calibration file per network")


def calibrate(runs: Sequence[MeasuredRun], *, created: str, op: str | None = None,
              gpu: str | None = None) -> tuple[Calibration, list[str]]:
    """Fit every link level and compute entry ``runs`` measured, and the GEMM curves of the
    matmul sweeps on a catalog GPU (:mod:`.profile_fit`)."""
    if not runs:
        raise ConfigError("runs", [], "at least one stored run")
    check_same_network(runs)
    links, link_notes = link_calibrations(runs, op=op)
    compute, compute_notes = compute_calibrations(runs, gpu=gpu)
    if not links and not compute:
        notes = link_notes + compute_notes
        why = "; ".join(notes) if notes else "; ".join(
            f"run {r.id} ({r.kind}) has {len(r.rows)} rows" for r in runs)
        raise ConfigError("runs", [r.id for r in runs],
                          f"runs with something to fit: collective sweeps, matmul or train runs ({why})")
    setups = sorted({r.setup for r in runs})
    shapes = sorted({f"{r.nodes} x {r.ranks_per_node}" for r in runs})
    provenance, gemm, gemm_notes = gemm_sections(runs, gpu=gpu)
    sections = {"gemm": gemm} if gemm else {}
    provenance, sustained, sustained_notes = sustained_section(
        runs, provenance=provenance, sections=sections, gpu=gpu)
    if sustained:
        sections["sustained"] = sustained
    cal = Calibration(links=tuple(links), compute=tuple(compute), created=created,
                      provenance=provenance, sections=sections,
                      runs=tuple(sorted(r.id for r in runs)),
                      setup=f"{'; '.join(setups)}; nodes x ranks: {', '.join(shapes)}",
                      source=f"willitscale calibrate on {socket.gethostname()}")
    return cal, link_notes + compute_notes + gemm_notes + sustained_notes

"""A calibration: link and compute figures fitted to measurements of one cluster.

``willitscale calibrate`` writes one from stored benchmark runs; the estimate takes it with
``--calibration FILE`` and uses its figures in place of the catalog's. It lives here, in
``hardware``, because it describes hardware as measured; the code that fits it
(:mod:`willitscale.calibrate`) is never imported by the model core.

What it holds:

* per link level (``intra_node``: each rank's link inside a node; ``inter_node``: what one
  measured node sent to the others with its ``ranks_per_node`` ranks), the alpha-beta figures of
  :class:`~willitscale.collectives.network.LinkCost`: ``bandwidth`` (bytes/s one direction,
  what the fitted algorithm achieves) and ``latency`` (alpha, seconds per algorithm step), and
  what it was measured on: ``backend``, ``device``, ``ranks_per_node``, ``nics_per_node``. The
  estimate scales the inter-node figure to the node it is applied to per NIC
  (:func:`inter_node_bandwidth`) and warns when backend, device or node shape differ
  (:mod:`willitscale.estimation.calibration_scope`);
* per device and dtype, the compute figures: a ``peak_flop_rate`` (the catalog's, or the best
  matmul rate measured when the device has no catalog entry, e.g. a CPU), the rate a training
  step achieved on its executed FLOPs, their ratio ``efficiency`` (an HFU: see
  :mod:`willitscale.compute.efficiency`), and the optimizer's time per parameter.

The TOML format (every unit in the key). Format 2 (a **measured profile**) adds a
``[provenance]`` table and the sections of :mod:`willitscale.hardware.profile` (``[[gemm]]``,
``[[attention]]``, ``[[memory]]``, and those other measurements add); a format-1 file still
loads (it has neither)::

    format = 2
    created = "2025-01-01T00:00:00+00:00"
    runs = [3, 4]
    setup = "gloo, cpu, emulated 2 x 1, uplink 200Mbit"
    source = "willitscale calibrate"

    [[link]]
    level = "inter_node"           # or "intra_node"
    bandwidth_GBps = 0.02331       # one direction
    latency_us = 812.5             # alpha: per algorithm step
    backend = "gloo"
    op = "all_reduce"
    algorithm = "ring"
    ranks = 2
    ranks_per_node = 1             # ranks on each measured node
    device = "cpu"                 # what the ranks ran on, as torch names it (optional)
    nics_per_node = 1              # NICs of a measured node, when known (emulated: its uplink)
    nominal_bandwidth_GBps = 0.025 # optional: the advertised (or shaped) rate
    points = 4                     # rows fitted
    rms_error = 0.004              # relative, over those rows
    runs = [3]

    [[compute]]
    device = "cpu"                 # as torch names it ("NVIDIA H100 80GB HBM3")
    dtype = "fp32"                 # hardware.model.DTYPES spelling
    peak_TFLOPS = 0.11
    peak_source = "matmul run 5 (best of 4 sizes)"
    achieved_TFLOPS = 0.045        # executed FLOPs / (forward + backward) of a training step
    efficiency = 0.41              # achieved / peak (HFU)
    optimizer_ns_per_param = 9.5   # optimizer step time / parameters (optional)
    model = "gpt2-tiny"            # what the training step trained (optional)
    runs = [5, 6]

    [provenance]                   # format 2: what was measured (every key optional)
    gpu = "h100-sxm"
    device = "NVIDIA H100 80GB HBM3"
    driver = "550.54.15"
    cuda = "12.4"
    torch = "2.4.0"
    sm_clock_MHz = 1980.0
    date = "2025-01-01"
    host = "node-17"

    [[gemm]]                       # format 2 sections: see willitscale.hardware.profile
    dtype = "bf16"
    ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from willitscale.config import FrozenMap, Table, load_toml
from willitscale.errors import ConfigError
from willitscale.hardware.model import DTYPES
from willitscale.hardware.profile import SECTIONS, Provenance
from willitscale.units import format_bandwidth

__all__ = ["LEVELS", "LinkCalibration", "ComputeCalibration", "Calibration", "load_calibration",
           "inter_node_bandwidth", "device_matches"]

LEVELS = ("intra_node", "inter_node")
FORMAT = 2
FORMATS = (1, 2)  #: formats this willitscale reads
GB = 1e9
US = 1e-6
TFLOP = 1e12
NS = 1e-9


def _require(owner: str, name: str, value: float, *, positive: bool = True) -> None:
    ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        raise ConfigError(f"{owner}: {name}", value, "a finite number > 0" if positive else "a finite number >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkCalibration:
    """Alpha-beta figures of one link level, fitted to collective sweeps."""

    level: str  #: "intra_node" or "inter_node"
    bandwidth: float  #: bytes/s one direction (per rank inside a node, per node across nodes)
    latency: float  #: seconds per algorithm step (alpha)
    backend: str = ""  #: nccl, gloo
    op: str = "all_reduce"  #: the collective whose sweep was fitted
    algorithm: str = "ring"  #: the alpha-beta form fitted (willitscale.collectives algorithms)
    ranks: int = 2
    ranks_per_node: int = 1
    nominal_bandwidth: float | None = None  #: advertised or shaped rate, when known
    device: str = ""  #: what the ranks ran on ("cpu", "NVIDIA A100-SXM4-80GB"); "" unknown
    nics_per_node: int | None = None  #: NICs of a measured node (emulated: 1 uplink); None unknown
    points: int = 0
    rms_error: float = 0.0  #: relative RMS error of the fit over its points
    runs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ConfigError("link level", self.level, "one of " + ", ".join(LEVELS))
        _require(f"link {self.level}", "bandwidth", self.bandwidth)
        _require(f"link {self.level}", "latency", self.latency, positive=False)
        if self.nominal_bandwidth is not None:
            _require(f"link {self.level}", "nominal_bandwidth", self.nominal_bandwidth)
        for name in ("ranks", "ranks_per_node"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"link {self.level}: {name}", getattr(self, name), "an integer >= 1")
        if self.nics_per_node is not None and int(self.nics_per_node) < 1:
            raise ConfigError(f"link {self.level}: nics_per_node", self.nics_per_node, "an integer >= 1")
        object.__setattr__(self, "runs", tuple(int(r) for r in self.runs))

    @property
    def efficiency(self) -> float | None:
        """Fitted over nominal bandwidth (what an application gets of the advertised rate)."""
        return self.bandwidth / self.nominal_bandwidth if self.nominal_bandwidth else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeCalibration:
    """How fast one device computes in one dtype, as measured."""

    device: str
    dtype: str
    peak_flop_rate: float  #: FLOP/s: the catalog peak, or the best matmul rate measured
    peak_source: str = ""
    achieved_flop_rate: float | None = None  #: FLOP/s a training step achieved (executed FLOPs)
    optimizer_time_per_param: float | None = None  #: seconds per parameter per optimizer step
    model: str = ""
    runs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError("compute dtype", self.dtype, "one of " + ", ".join(DTYPES))
        _require(f"compute {self.device}", "peak_flop_rate", self.peak_flop_rate)
        for name in ("achieved_flop_rate", "optimizer_time_per_param"):
            if getattr(self, name) is not None:
                _require(f"compute {self.device}", name, getattr(self, name))
        if self.achieved_flop_rate is not None and self.achieved_flop_rate > self.peak_flop_rate * (1 + 1e-9):
            # a fraction of the peak above 1 is a typo or a wrong peak, never a measurement
            # (calibrate raises the peak to a faster training rate, with a note)
            raise ConfigError(f"compute {self.device} {self.dtype}: efficiency",
                              round(self.achieved_flop_rate / self.peak_flop_rate, 6),
                              "a fraction of the peak in (0, 1]: achieved_TFLOPS at most "
                              "peak_TFLOPS (raise peak_TFLOPS if the device is faster)")
        object.__setattr__(self, "runs", tuple(int(r) for r in self.runs))

    @property
    def efficiency(self) -> float | None:
        """Achieved over peak: an HFU (None without a training measurement)."""
        if self.achieved_flop_rate is None:
            return None
        return self.achieved_flop_rate / self.peak_flop_rate


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Everything fitted for one cluster (one setup); see the module docstring."""

    links: tuple[LinkCalibration, ...] = ()
    compute: tuple[ComputeCalibration, ...] = ()
    created: str = ""
    runs: tuple[int, ...] = ()
    setup: str = ""  #: what was measured, in words (backend, devices, nodes, emulation)
    source: str = ""
    path: str = field(default="", compare=False)  #: the file it was read from, if any
    provenance: Provenance | None = None  #: format 2: what was measured
    #: format 2: section name -> entries (willitscale.hardware.profile.SECTIONS)
    sections: Mapping[str, tuple] = field(default_factory=dict)

    def __post_init__(self) -> None:
        levels = [link.level for link in self.links]
        if len(set(levels)) != len(levels):
            raise ConfigError("calibration links", levels, "at most one entry per level")
        keys = [(c.device, c.dtype) for c in self.compute]
        if len(set(keys)) != len(keys):
            raise ConfigError("calibration compute", keys, "at most one entry per device and dtype")
        object.__setattr__(self, "links", tuple(self.links))
        object.__setattr__(self, "compute", tuple(self.compute))
        object.__setattr__(self, "runs", tuple(int(r) for r in self.runs))
        sections = {}
        for name, entries in dict(self.sections).items():
            if name not in SECTIONS:
                raise ConfigError("calibration section", name, "one of " + ", ".join(SECTIONS))
            entries = tuple(entries)
            keys = [e.key for e in entries]
            if len(set(keys)) != len(keys):
                raise ConfigError(f"calibration [[{name}]]", keys, "at most one entry per key")
            sections[name] = entries
        object.__setattr__(self, "sections", FrozenMap(sections))

    def section(self, name: str) -> tuple:
        """The entries of one format-2 section (empty when the file has none)."""
        if name not in SECTIONS:
            raise ConfigError("calibration section", name, "one of " + ", ".join(SECTIONS))
        return self.sections.get(name, ())

    def __repr__(self) -> str:
        links = ", ".join(f"{c.level} {format_bandwidth(c.bandwidth)} + {c.latency * 1e6:.3g} us"
                          for c in self.links)
        compute = ", ".join(f"{c.device} {c.dtype}" for c in self.compute)
        where = f" from {self.path}" if self.path else ""
        return (f"Calibration(links: {links or 'none'}; compute: {compute or 'none'}; "
                f"{len(self.runs)} run(s){where})")

    def link(self, level: str) -> LinkCalibration | None:
        """The fit for ``level`` ("intra_node" or "inter_node"), or None."""
        if level not in LEVELS:
            raise ConfigError("link level", level, "one of " + ", ".join(LEVELS))
        return next((link for link in self.links if link.level == level), None)

    @property
    def intra_node(self) -> LinkCalibration | None:
        return self.link("intra_node")

    @property
    def inter_node(self) -> LinkCalibration | None:
        return self.link("inter_node")

    def compute_for(self, dtype: str, device: str | None = None) -> ComputeCalibration | None:
        """The compute entry for ``dtype`` (and ``device``, when several devices were measured)."""
        found = [c for c in self.compute if c.dtype == dtype and (device is None or c.device == device)]
        return found[0] if found else None

    @property
    def compute_efficiency(self) -> float | None:
        """The HFU of the training measurement when exactly one compute entry has one."""
        measured = [c.efficiency for c in self.compute if c.efficiency is not None]
        return measured[0] if len(measured) == 1 else None

    # -- TOML ----------------------------------------------------------------------------

    def to_toml(self) -> str:
        lines = ["# willitscale calibration: link and compute figures fitted to measurements.",
                 "# Bandwidths are one direction; latency_us is alpha, the cost of one algorithm step.",
                 f"format = {FORMAT}", f"created = {_q(self.created)}", f"runs = {_ints(self.runs)}",
                 f"setup = {_q(self.setup)}", f"source = {_q(self.source)}"]
        for link in self.links:
            lines += ["", "[[link]]", f"level = {_q(link.level)}",
                      f"bandwidth_GBps = {_num(link.bandwidth / GB)}",
                      f"latency_us = {_num(link.latency / US)}", f"backend = {_q(link.backend)}",
                      f"op = {_q(link.op)}", f"algorithm = {_q(link.algorithm)}",
                      f"ranks = {link.ranks}", f"ranks_per_node = {link.ranks_per_node}"]
            if link.device:
                lines.append(f"device = {_q(link.device)}")
            if link.nics_per_node is not None:
                lines.append(f"nics_per_node = {link.nics_per_node}")
            if link.nominal_bandwidth is not None:
                lines.append(f"nominal_bandwidth_GBps = {_num(link.nominal_bandwidth / GB)}")
            lines += [f"points = {link.points}", f"rms_error = {_num(link.rms_error)}",
                      f"runs = {_ints(link.runs)}"]
        for c in self.compute:
            lines += ["", "[[compute]]", f"device = {_q(c.device)}", f"dtype = {_q(c.dtype)}",
                      f"peak_TFLOPS = {_num(c.peak_flop_rate / TFLOP)}",
                      f"peak_source = {_q(c.peak_source)}"]
            if c.achieved_flop_rate is not None:
                lines += [f"achieved_TFLOPS = {_num(c.achieved_flop_rate / TFLOP)}",
                          f"efficiency = {_num(c.efficiency)}"]
            if c.optimizer_time_per_param is not None:
                lines.append(f"optimizer_ns_per_param = {_num(c.optimizer_time_per_param / NS)}")
            lines += [f"model = {_q(c.model)}", f"runs = {_ints(c.runs)}"]
        if self.provenance is not None:
            lines += ["", *self.provenance.toml_lines()]
        for entries in self.sections.values():
            for entry in entries:
                lines += ["", *entry.toml_lines()]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_toml_data(cls, data: Mapping[str, Any], where: str = "calibration") -> Calibration:
        top = Table(data, where)
        version = top.int("format", FORMAT, min=1)
        if version not in FORMATS:
            raise ConfigError(f"{where}: format", version,
                              " or ".join(map(str, FORMATS)) + " (the formats this willitscale reads)")
        links = tuple(_link_from(t) for t in top.tables("link"))
        compute = tuple(_compute_from(t) for t in top.tables("compute"))
        provenance, sections = None, {}
        if version >= 2:
            if "provenance" in top:
                provenance = Provenance.from_table(top.table("provenance"))
            for name, entry in SECTIONS.items():
                found = tuple(entry.from_table(t) for t in top.tables(name))
                if found:
                    sections[name] = found
        cal = cls(links=links, compute=compute, created=top.str("created", ""),
                  runs=tuple(top.list("runs", [])), setup=top.str("setup", ""),
                  source=top.str("source", ""), provenance=provenance, sections=sections)
        top.done()
        return cal


def _link_from(t: Table) -> LinkCalibration:
    nominal = t.float("nominal_bandwidth_GBps", None, positive=True)
    link = LinkCalibration(
        level=t.str("level", choices=iter(LEVELS)),
        bandwidth=t.float("bandwidth_GBps", positive=True) * GB,
        latency=t.float("latency_us", min=0) * US, backend=t.str("backend", ""),
        op=t.str("op", "all_reduce"), algorithm=t.str("algorithm", "ring"),
        ranks=t.int("ranks", 2, min=1), ranks_per_node=t.int("ranks_per_node", 1, min=1),
        nominal_bandwidth=nominal * GB if nominal is not None else None,
        device=t.str("device", ""), nics_per_node=t.int("nics_per_node", None, min=1),
        points=t.int("points", 0, min=0), rms_error=t.float("rms_error", 0.0, min=0),
        runs=tuple(t.list("runs", [])))
    t.done()
    return link


def _compute_from(t: Table) -> ComputeCalibration:
    peak = t.float("peak_TFLOPS", positive=True)
    achieved = t.float("achieved_TFLOPS", None, positive=True)
    efficiency = t.float("efficiency", None, positive=True)
    if achieved is None and efficiency is not None:  # written by hand: the fraction of peak
        achieved = efficiency * peak
    elif achieved is not None and efficiency is not None and not math.isclose(
            efficiency, achieved / peak, rel_tol=1e-6):
        raise ConfigError(f"{t.where}: efficiency = {efficiency} but achieved_TFLOPS / peak_TFLOPS "
                          f"= {achieved / peak:.6g}; give one of them")
    per_param = t.float("optimizer_ns_per_param", None, positive=True)
    entry = ComputeCalibration(
        device=t.str("device"), dtype=t.str("dtype", choices=iter(DTYPES)),
        peak_flop_rate=peak * TFLOP,
        peak_source=t.str("peak_source", ""),
        achieved_flop_rate=achieved * TFLOP if achieved is not None else None,
        optimizer_time_per_param=per_param * NS if per_param is not None else None,
        model=t.str("model", ""), runs=tuple(t.list("runs", [])))
    t.done()
    return entry


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration TOML file written by ``willitscale calibrate`` (or by hand)."""
    cal = Calibration.from_toml_data(load_toml(path), where=str(path))
    object.__setattr__(cal, "path", str(path))
    return cal


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ints(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _num(value: float) -> str:
    return repr(float(value))


def inter_node_bandwidth(link: LinkCalibration, nics: int) -> tuple[float, str]:
    """``(bandwidth, how)``: a fitted inter-node bandwidth scaled to a node with ``nics`` NICs.

    The fit is what one measured node sent with ``ranks_per_node`` ranks; each rank drives one
    NIC (NCCL gives each GPU its nearest NIC), so the measurement used ``min(ranks_per_node,
    NICs)`` of its node's NICs, ``nics_per_node`` when recorded, else assumed to be ``nics`` (the
    node it is applied to). Per NIC that is ``bandwidth / used``; a node of ``nics`` NICs sends
    ``nics`` times that. One rank per node on an 8-NIC DGX measures one NIC: the node sends 8x
    the fit (applying the fit as the whole node's was 8x pessimistic); eight ranks per node
    measure all eight: the node sends the fit itself.
    """
    measured = link.nics_per_node or nics
    used = max(1, min(int(link.ranks_per_node), int(measured)))
    per_nic = link.bandwidth / used
    where = (f"{measured} NIC(s) per measured node" if link.nics_per_node else
             f"measured nodes assumed to have this node's {nics} NIC(s)")

    how = (f"fitted with {link.ranks_per_node} rank(s) per node ({where}, {used} driven): "
           f"{format_bandwidth(per_nic)} per NIC x {nics} NIC(s) = "
           f"{format_bandwidth(per_nic * nics)} per node")
    return per_nic * nics, how


def _model_words(text: str) -> set[str]:
    """Words that name a device model (a100, h100, mi300x, cpu): letters and digits, not a
    memory size."""
    import re

    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    return {w for w in words if w == "cpu" or (re.search(r"[a-z]", w) and re.search(r"\d", w)
                                               and not w.endswith("gb")
                                               and not w.startswith(("sxm", "hbm", "pcie", "gen")))}


def device_matches(device: str, gpu) -> bool | None:
    """Whether a measured ``device`` (as torch names it) is the catalog ``gpu``: True, False, or
    None when the name says too little to tell."""
    if not device:
        return None
    if device in (gpu.name, gpu.display_name):
        return True
    mine = _model_words(device)
    theirs = _model_words(gpu.display_name) | _model_words(gpu.name.replace("-", " "))
    if not mine or not theirs:
        return None
    return bool(mine & theirs)

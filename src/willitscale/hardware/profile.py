"""Measured-profile sections: curves a calibration (format 2) can hold beside its links.

A **measured profile** is a calibration file (:mod:`willitscale.hardware.calibration`) with
``format = 2``: the format-1 ``[[link]]`` and ``[[compute]]`` tables, a ``[provenance]`` table
saying what was measured, and any number of **sections**, each an array of tables named after
it. The compute model's built-in per-GPU constants (``compute/curves.toml``) are written in the
same sections, so a measured entry replaces a built-in one key for key.

Sections (this module's :data:`SECTIONS`; each entry class reads itself from a TOML table with
``from_table`` and writes itself back with ``toml_lines``):

* ``gemm``: one GEMM efficiency curve per dtype (:class:`GemmCurve`, the model of
  :mod:`willitscale.compute.gemm`);
* ``attention``: one attention kernel curve per kernel, pass, causality and dtype
  (:class:`AttentionCurve`, :mod:`willitscale.compute.attention`);
* ``memory``: achievable HBM bandwidth and the fixed cost of one kernel (:class:`MemoryCurve`);
* ``sustained``: the share of those kernel rates a training step sustains (:class:`SustainedRate`,
  :mod:`willitscale.compute.sustained`), fitted to ``bench train`` steps;
* ``collective``: one collective's latency and bandwidth per (library, op, algorithm, protocol)
  and communicator geometry (:class:`~willitscale.hardware.profile_collective.CollectiveCurve`).

**Adding a section** (the NCCL and GPU measurement work do): write a frozen entry class with a
``key`` property (what makes two entries the same: one wins), ``from_table(t)`` and
``toml_lines()`` (a fitted one subclasses :class:`FittedEntry` for its fit's keys), and add it
to :data:`SECTIONS`. The loader then reads ``[[name]]`` tables
into ``Calibration.sections[name]`` and writes them back; an unknown section name is an error
(a typo must not be ignored). docs/measure.md, "The measured profile", has the format.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

from willitscale.config import Table
from willitscale.errors import ConfigError
from willitscale.hardware.profile_collective import CollectiveCurve

__all__ = ["Provenance", "FittedEntry", "GemmCurve", "AttentionCurve", "MemoryCurve", "SustainedRate",
           "SECTIONS", "ATTENTION_PASSES", "fmt_number", "fmt_string"]

TFLOP = 1e12
GB = 1e9
US = 1e-6
ATTENTION_PASSES = ("forward", "backward")


def fmt_string(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def fmt_number(value: float) -> str:
    return repr(float(value))


def _ints(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _check(owner: str, name: str, value: float, low: float = 0.0, high: float = math.inf,
           *, open_low: bool = True) -> None:
    ok = math.isfinite(value) and (value > low if open_low else value >= low) and value <= high
    if not ok:
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        raise ConfigError(f"{owner}: {name}", value,
                          f"a number {bound}" + (f" and <= {high:g}" if high < math.inf else ""))


def _data(raw) -> tuple[tuple[float, ...], ...]:
    """``data = [[x, ..., y], ...]``: the points a curve was fitted to (numbers only)."""
    rows = []
    for row in raw:
        if not isinstance(row, list) or not row or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) for v in row):
            raise ValueError
        rows.append(tuple(float(v) for v in row))
    return tuple(rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """What a measured profile was measured on, and when."""

    gpu: str = ""  #: the catalog GPU it applies to ("h100-sxm"); "" unknown
    device: str = ""  #: as torch names it ("NVIDIA H100 80GB HBM3")
    driver: str = ""
    cuda: str = ""
    torch: str = ""
    sm_clock_MHz: float | None = None  #: the SM clock the measurements ran at
    memory_clock_MHz: float | None = None
    date: str = ""
    host: str = ""

    @classmethod
    def from_table(cls, t: Table) -> Provenance:
        out = cls(gpu=t.str("gpu", ""), device=t.str("device", ""), driver=t.str("driver", ""),
                  cuda=t.str("cuda", ""), torch=t.str("torch", ""),
                  sm_clock_MHz=t.float("sm_clock_MHz", None, positive=True),
                  memory_clock_MHz=t.float("memory_clock_MHz", None, positive=True),
                  date=t.str("date", ""), host=t.str("host", ""))
        t.done()
        return out

    def toml_lines(self) -> list[str]:
        lines = ["[provenance]"]
        for name in ("gpu", "device", "driver", "cuda", "torch"):
            if getattr(self, name):
                lines.append(f"{name} = {fmt_string(getattr(self, name))}")
        for name in ("sm_clock_MHz", "memory_clock_MHz"):
            if getattr(self, name) is not None:
                lines.append(f"{name} = {fmt_number(getattr(self, name))}")
        for name in ("date", "host"):
            if getattr(self, name):
                lines.append(f"{name} = {fmt_string(getattr(self, name))}")
        return lines


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedEntry:
    """What a section entry keeps of the fit its constants came from: the base of the ``gemm``,
    ``attention``, ``memory`` and ``sustained`` entries (a built-in entry never fitted leaves
    these empty; ``collective`` entries keep their own, without ``data``).

    An entry class reads these keys with ``**cls.fit_fields(t)`` in its ``from_table`` and
    writes them with ``*self.fit_lines()`` at the end of its ``toml_lines``."""

    points: int = 0  #: how many measured points the constants were fitted to
    rms_error: float = 0.0  #: root mean square relative error of the fit over those points
    runs: tuple[int, ...] = ()  #: the stored runs the points came from
    source: str = ""  #: where the constants come from
    data: tuple[tuple[float, ...], ...] = ()  #: the points fitted (see each class)

    @staticmethod
    def fit_fields(t: Table) -> dict:
        """The fit's keys of TOML table ``t``, as keyword arguments of an entry class."""
        return {"points": t.int("points", 0, min=0), "rms_error": t.float("rms_error", 0.0, min=0),
                "runs": tuple(int(r) for r in t.list("runs", [])), "source": t.str("source", ""),
                "data": t.get("data", _data, "a list of lists of numbers", ())}

    def fit_lines(self) -> list[str]:
        """The TOML lines of the fit's keys that are set (none for an entry never fitted)."""
        lines = []
        if self.points:
            lines += [f"points = {self.points}", f"rms_error = {fmt_number(self.rms_error)}"]
        if self.runs:
            lines.append(f"runs = {_ints(self.runs)}")
        if self.source:
            lines.append(f"source = {fmt_string(self.source)}")
        if self.data:
            lines.append("data = [" + ", ".join(
                "[" + ", ".join(str(int(v)) if v.is_integer() else repr(v) for v in row) + "]"
                for row in self.data) + "]")
        return lines


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmCurve(FittedEntry):
    """The GEMM efficiency model of one dtype on one GPU (:mod:`willitscale.compute.gemm`).

    ``time = max(2 M N K / (peak x efficiency x waves x K / (K + k_half)), bytes / bandwidth)
    + kernel_overhead``; the wave factor uses ``sms`` and the tile ``tile_m x tile_n``."""

    dtype: str
    peak_flop_rate: float  #: FLOP/s the efficiency is a fraction of (the datasheet dense peak)
    efficiency: float  #: best large-shape fraction of the peak
    k_half: float  #: reduction length at which a tile reaches half its rate (pipeline fill)
    tile_m: int = 128
    tile_n: int = 256
    sms: int = 132
    kernel_overhead: float = 0.0  #: seconds added to each GEMM call

    def __post_init__(self) -> None:
        owner = f"gemm {self.dtype}"
        _check(owner, "peak_TFLOPS", self.peak_flop_rate)
        _check(owner, "efficiency", self.efficiency, high=1.0)
        _check(owner, "k_half", self.k_half, open_low=False)
        _check(owner, "kernel_overhead_us", self.kernel_overhead, open_low=False)
        for name in ("tile_m", "tile_n", "sms"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{owner}: {name}", getattr(self, name), "an integer >= 1")

    @property
    def key(self) -> tuple:
        return (self.dtype,)

    @classmethod
    def from_table(cls, t: Table) -> GemmCurve:
        out = cls(dtype=t.str("dtype"), peak_flop_rate=t.float("peak_TFLOPS", positive=True) * TFLOP,
                  efficiency=t.float("efficiency", positive=True), k_half=t.float("k_half", min=0),
                  tile_m=t.int("tile_m", 128, min=1), tile_n=t.int("tile_n", 256, min=1),
                  sms=t.int("sms", 132, min=1),
                  kernel_overhead=t.float("kernel_overhead_us", 0.0, min=0) * US, **cls.fit_fields(t))
        t.done()
        return out

    def toml_lines(self) -> list[str]:
        return ["[[gemm]]", f"dtype = {fmt_string(self.dtype)}",
                f"peak_TFLOPS = {fmt_number(self.peak_flop_rate / TFLOP)}",
                f"efficiency = {fmt_number(self.efficiency)}", f"k_half = {fmt_number(self.k_half)}",
                f"tile_m = {self.tile_m}", f"tile_n = {self.tile_n}", f"sms = {self.sms}",
                f"kernel_overhead_us = {fmt_number(self.kernel_overhead / US)}", *self.fit_lines()]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionCurve(FittedEntry):
    """One attention kernel's speed (:mod:`willitscale.compute.attention`):
    ``rate(s) = peak x efficiency x s / (s + seq_half)`` on the FLOPs the kernel executes
    (causal: the unmasked half), for ``head_dim`` (scaled by ``head_dim_scale`` elsewhere)."""

    kernel: str  #: "fa2", "fa3", "cudnn", "fa4", "unfused", ...
    direction: str  #: "forward" or "backward"
    causal: bool
    dtype: str = "bf16"
    head_dim: int = 128
    efficiency: float  #: of the dtype's dense peak, at long sequences
    seq_half: float  #: sequence length at which the kernel reaches half of ``efficiency``

    def __post_init__(self) -> None:
        owner = f"attention {self.kernel} {self.direction}"
        if self.direction not in ATTENTION_PASSES:
            raise ConfigError(f"{owner}: direction", self.direction, "forward or backward")
        _check(owner, "efficiency", self.efficiency, high=1.0)
        _check(owner, "seq_half", self.seq_half, open_low=False)
        if int(self.head_dim) < 1:
            raise ConfigError(f"{owner}: head_dim", self.head_dim, "an integer >= 1")

    @property
    def key(self) -> tuple:
        return (self.kernel, self.direction, self.causal, self.dtype, self.head_dim)

    @classmethod
    def from_table(cls, t: Table) -> AttentionCurve:
        out = cls(kernel=t.str("kernel"), direction=t.str("direction", choices=iter(ATTENTION_PASSES)),
                  causal=t.bool("causal"), dtype=t.str("dtype", "bf16"),
                  head_dim=t.int("head_dim", 128, min=1), efficiency=t.float("efficiency", positive=True),
                  seq_half=t.float("seq_half", min=0), **cls.fit_fields(t))
        t.done()
        return out

    def toml_lines(self) -> list[str]:
        return ["[[attention]]", f"kernel = {fmt_string(self.kernel)}",
                f"direction = {fmt_string(self.direction)}",
                f"causal = {'true' if self.causal else 'false'}", f"dtype = {fmt_string(self.dtype)}",
                f"head_dim = {self.head_dim}", f"efficiency = {fmt_number(self.efficiency)}",
                f"seq_half = {fmt_number(self.seq_half)}", *self.fit_lines()]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryCurve(FittedEntry):
    """Memory-bound kernels: the HBM bandwidth they achieve and the fixed cost of one kernel."""

    bandwidth: float  #: bytes/s a streaming kernel achieves (one direction: read + write summed)
    kernel_overhead: float = 0.0  #: seconds per kernel launched back to back on a stream

    def __post_init__(self) -> None:
        _check("memory", "achievable_GBps", self.bandwidth)
        _check("memory", "kernel_overhead_us", self.kernel_overhead, open_low=False)

    @property
    def key(self) -> tuple:
        return ()

    @classmethod
    def from_table(cls, t: Table) -> MemoryCurve:
        out = cls(bandwidth=t.float("achievable_GBps", positive=True) * GB,
                  kernel_overhead=t.float("kernel_overhead_us", 0.0, min=0) * US, **cls.fit_fields(t))
        t.done()
        return out

    def toml_lines(self) -> list[str]:
        return ["[[memory]]", f"achievable_GBps = {fmt_number(self.bandwidth / GB)}",
                f"kernel_overhead_us = {fmt_number(self.kernel_overhead / US)}", *self.fit_lines()]


@dataclass(frozen=True, slots=True, kw_only=True)
class SustainedRate(FittedEntry):
    """The share of the kernel benchmarks' GEMM and attention rates a training step sustains
    on these GPUs (:mod:`willitscale.compute.sustained`), fitted to ``bench train`` steps; its
    ``data`` rows are (measured forward + backward seconds, the factor reproducing them)."""

    factor: float

    def __post_init__(self) -> None:
        _check("sustained", "factor", self.factor, 0.0, 2.0)

    @property
    def key(self) -> tuple:
        return ()

    @classmethod
    def from_table(cls, t: Table) -> SustainedRate:
        out = cls(factor=t.float("factor", positive=True), **cls.fit_fields(t))
        t.done()
        return out

    def toml_lines(self) -> list[str]:
        return ["[[sustained]]", f"factor = {fmt_number(self.factor)}", *self.fit_lines()]


#: section name -> entry class; add a line here to add a section (see the module docstring)
SECTIONS = MappingProxyType({"gemm": GemmCurve, "attention": AttentionCurve, "memory": MemoryCurve,
                             "sustained": SustainedRate, "collective": CollectiveCurve})

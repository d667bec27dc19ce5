"""The per-GPU curves the per-op compute model runs on: :func:`gpu_curves`.

Built-in curves live in ``curves.toml`` beside this module (written by
``scripts/build_compute_curves.py`` from published kernel benchmarks, every entry with its
source and the points it was fitted to). Their sections are those of a measured profile
(:mod:`willitscale.hardware.profile`): ``gemm`` per dtype, ``attention`` per kernel, pass,
causality, dtype and head dimension, ``memory`` (achievable HBM bandwidth, kernel overhead). A
GPU may say ``same_as = "other"``: it takes the other's entries except those it lists.

A calibration of format 2 whose provenance names the same GPU (or whose device name matches it)
replaces built-in entries key for key: :func:`gpu_curves` merges them and says which came from
where (:attr:`GpuCurves.measured`).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from willitscale.config import Table
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import device_matches
from willitscale.hardware.profile import AttentionCurve, GemmCurve, MemoryCurve

__all__ = ["GpuCurves", "gpu_curves", "builtin_gpus", "KERNELS"]

#: attention kernels the curves name: FlashAttention-2/3/4, cuDNN's fused attention, AMD's
#: Composable Kernel flash attention
KERNELS = ("fa2", "fa3", "fa4", "cudnn", "ck")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuCurves:
    """The curves of one GPU, built-in and measured merged."""

    gpu: str
    architecture: str  #: ampere, hopper, blackwell, cdna3 (which sustained-rate factor applies)
    attention_kernel: str  #: the kernel that runs attention by default on this GPU
    gemm: Mapping[str, GemmCurve]  #: dtype -> curve
    attention: tuple[AttentionCurve, ...]
    memory: MemoryCurve
    measured: tuple[str, ...] = ()  #: the sections a calibration replaced ("gemm bf16", ...)
    #: a calibration's measured sustained-rate factor (None: the architecture's built-in one)
    sustained: float | None = None
    borrowed: str = ""  #: "same_as" chain, in words, when the GPU takes another's curves

    def gemm_for(self, dtype: str) -> GemmCurve:
        try:
            return self.gemm[dtype]
        except KeyError:
            raise ConfigError(f"compute curves of {self.gpu}: GEMM dtype", dtype,
                              "one of " + ", ".join(self.gemm)) from None

    def kernels(self) -> tuple[str, ...]:
        return tuple(sorted({c.kernel for c in self.attention}))

    def attention_for(self, kernel: str, direction: str, causal: bool, head_dim: int,
                      dtype: str = "bf16") -> AttentionCurve:
        """The curve of ``kernel``'s ``direction`` pass with the nearest head dimension (in
        log2; a named approximation between measured head dimensions)."""
        found = [c for c in self.attention if c.kernel == kernel and c.direction == direction
                 and c.causal == causal and c.dtype in (dtype, "bf16")]
        if not found:
            raise ConfigError(f"attention kernel (on {self.gpu})", kernel,
                              "one of " + ", ".join(self.kernels()))
        return min(found, key=lambda c: (abs(math.log2(c.head_dim / head_dim)), c.dtype != dtype,
                                         c.head_dim))


def _entries(spec: Mapping, name: str, cls, where: str) -> list:
    return [cls.from_table(Table(t, f"{where}.{name}[{i}]")) for i, t in enumerate(spec.get(name, []))]


@cache
def _builtin() -> dict[str, dict]:
    text = files(__package__).joinpath("curves.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)["gpu"]
    out: dict[str, dict] = {}
    for gpu, spec in raw.items():
        where = f"compute/curves.toml: gpu {gpu}"
        known = {"same_as", "same_as_why", "architecture", "attention_kernel", "gemm", "attention",
                 "memory"}
        extra = set(spec) - known
        if extra:
            raise ConfigError(f"{where}: unknown key {sorted(extra)[0]!r}")
        out[gpu] = {"same_as": spec.get("same_as", ""), "why": spec.get("same_as_why", ""),
                    "kernel": spec.get("attention_kernel", ""), "arch": spec.get("architecture", ""),
                    "gemm": {c.dtype: c for c in _entries(spec, "gemm", GemmCurve, where)},
                    "attention": {c.key: c for c in _entries(spec, "attention", AttentionCurve, where)},
                    "memory": (_entries(spec, "memory", MemoryCurve, where) or [None])[0]}
    return out


def builtin_gpus() -> tuple[str, ...]:
    """Catalog GPUs with built-in curves."""
    return tuple(_builtin())


def _resolved(gpu: str, seen: tuple[str, ...] = ()) -> dict | None:
    table = _builtin()
    if gpu not in table:
        return None
    spec = table[gpu]
    if not spec["same_as"]:
        return {**spec, "borrowed": ""}
    if spec["same_as"] in seen + (gpu,):
        raise ConfigError(f"compute/curves.toml: same_as cycle through {gpu}")
    base = _resolved(spec["same_as"], seen + (gpu,))
    if base is None:
        raise ConfigError(f"compute/curves.toml: gpu {gpu}: same_as", spec["same_as"], "a GPU of the file")
    return {"kernel": spec["kernel"] or base["kernel"], "arch": spec["arch"] or base["arch"],
            "gemm": {**base["gemm"], **spec["gemm"]},
            "attention": {**base["attention"], **spec["attention"]},
            "memory": spec["memory"] or base["memory"],
            "borrowed": f"curves of {spec['same_as']} ({spec['why']})" +
                        (f"; {base['borrowed']}" if base["borrowed"] else "")}


def _applies(calibration, gpu) -> bool:
    prov = getattr(calibration, "provenance", None)
    if prov is not None and prov.gpu:
        return prov.gpu == gpu.name
    if prov is not None and prov.device:
        return bool(device_matches(prov.device, gpu))
    return False


def gpu_curves(gpu, calibration=None) -> GpuCurves | None:
    """The curves of catalog GPU ``gpu`` (a :class:`~willitscale.hardware.model.Gpu`), with a
    matching calibration's sections in place of the built-in entries; None when the GPU has no
    curves (then the flat default efficiency applies, and the estimate says so)."""
    spec = _resolved(gpu.name)
    measured: list[str] = []
    sustained = None
    if spec is None:
        return None
    gemm, attention, memory = dict(spec["gemm"]), dict(spec["attention"]), spec["memory"]
    if calibration is not None and _applies(calibration, gpu):
        for c in calibration.section("gemm"):
            gemm[c.dtype] = c
            measured.append(f"gemm {c.dtype}")
        for c in calibration.section("attention"):
            attention[c.key] = c
            measured.append(f"attention {c.kernel} {c.direction}")
        for c in calibration.section("memory"):
            memory = c
            measured.append("memory")
        for c in calibration.section("sustained"):
            sustained = c.factor
            measured.append("sustained")
    if memory is None:
        raise ConfigError(f"compute/curves.toml: gpu {gpu.name} has no memory entry")
    return GpuCurves(gpu=gpu.name, architecture=spec["arch"], attention_kernel=spec["kernel"], gemm=gemm,
                     attention=tuple(attention.values()), memory=memory,
                     measured=tuple(measured), borrowed=spec["borrowed"], sustained=sustained)

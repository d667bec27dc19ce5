"""``calibrate --profile``: a measured profile (format 2) from kernel sweeps -- ``[[memory]]``
from ``bench bandwidth``, ``[[gemm]]`` per dtype from ``bench matmul``, ``[[attention]]`` per
kernel, pass, causality, dtype and head dim from ``bench attention`` -- with the ``[provenance]``
of the runs (:mod:`willitscale.bench.provenance`). The fits are
:mod:`willitscale.calibrate.measured_curves`.

The peaks the efficiencies are fractions of are the catalog GPU's dense peaks (``--gpu``,
required: torch names H100 SXM and PCIe alike). FP8 rows of either scaling use the FP8 peak;
rowwise-scaled GEMMs get their own ``[[gemm]]`` entry (dtype ``fp8-rowwise``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from willitscale.calibrate.measured_curves import (
    PROFILE_DTYPE,
    fit_attention,
    fit_gemm,
    fit_memory,
)
from willitscale.calibrate.runs import MeasuredRun
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import Calibration
from willitscale.hardware.model import Gpu
from willitscale.hardware.profile import Provenance

__all__ = ["measured_profile", "profile_provenance", "PROFILE_RUN_KINDS", "with_absent_notes"]

PROFILE_RUN_KINDS = ("matmul", "attention", "bandwidth")
#: streaming multiprocessors, for the GEMM wave factor: NVIDIA H100 Tensor Core GPU Architecture
#: whitepaper (H100 SXM5 132 SMs, H100 PCIe 114; H200 is the same GH100 as H100 SXM5), NVIDIA
#: A100 Tensor Core GPU Architecture whitepaper (108 SMs). Others: 132 (the fit's default).
#: (The compute model's curves.toml carries these per GPU; use it once the branches meet.)
SMS = {"h100-sxm": 132, "h100-pcie": 114, "h200-sxm": 132, "a100-80gb-sxm": 108, "a100-40gb-sxm": 108}


def _peak(gpu: Gpu, dtype: str) -> float:
    """The dense peak of a bench dtype (``fp8-rowwise`` runs on the FP8 peak)."""
    name = PROFILE_DTYPE.get(dtype, dtype).removesuffix("-rowwise")
    if name not in gpu.peak_flops:
        raise ConfigError(f"dtype (for GPU {gpu.name})", dtype, "one with a catalog peak: "
                          + ", ".join(gpu.peak_flops))
    return gpu.peak_flops[name]


def profile_provenance(records: Sequence[Mapping[str, Any]], gpu: str) -> tuple[Provenance, list[str]]:
    """The ``[provenance]`` of runs from their stored provenance records (the first run's
    facts; notes name facts that differ between runs or were absent)."""
    if not records:
        raise ConfigError("runs", [], "at least one run with a provenance record")
    first, notes = records[0], []
    for field in ("device", "driver", "cuda", "torch"):
        values = {r.get(field) for r in records}
        if len(values) > 1:
            notes.append(f"runs differ in {field}: {sorted(map(str, values))}; the first run's is kept")
    for field, why in (first.get("absent") or {}).items():
        notes.append(f"provenance: {field} not recorded ({why})")
    clocks = {k: first.get(k) for k in ("sm_clock_MHz", "memory_clock_MHz")}
    return Provenance(gpu=gpu, device=first.get("device", ""), driver=first.get("driver", ""),
                      cuda=first.get("cuda", ""), torch=first.get("torch", ""), date=first.get("date", ""),
                      host=first.get("host", ""), **clocks), notes


def measured_profile(runs: Sequence[MeasuredRun], provenance: Sequence[Mapping[str, Any]], *,
                     gpu: Gpu, created: str) -> tuple[Calibration, list[str]]:
    """The profile of kernel runs (``provenance``: each run's stored record, same order)."""
    by_kind = {kind: [r for r in runs if r.kind == kind] for kind in PROFILE_RUN_KINDS}
    other = [r.id for r in runs if r.kind not in (*PROFILE_RUN_KINDS, "train")]
    notes = [f"runs {other} are not kernel sweeps: left out"] if other else []
    sections: dict[str, tuple] = {}
    bandwidth = gpu.memory_bandwidth
    if by_kind["bandwidth"]:
        rows = [row for r in by_kind["bandwidth"] for row in r.rows]
        memory = fit_memory(rows, runs=[r.id for r in by_kind["bandwidth"]])
        sections["memory"], bandwidth = (memory,), memory.bandwidth
    else:
        notes.append(f"no bandwidth run: GEMMs' memory roofline uses the catalog's "
                     f"{gpu.memory_bandwidth / 1e9:.4g} GB/s")
    gemms = []
    for dtype in sorted({row.dtype for r in by_kind["matmul"] for row in r.rows}):
        ids = [r.id for r in by_kind["matmul"] if any(row.dtype == dtype for row in r.rows)]
        rows = [row for r in by_kind["matmul"] for row in r.rows if row.dtype == dtype]
        gemms.append(fit_gemm(rows, peak=_peak(gpu, dtype), bandwidth=bandwidth,
                              sms=SMS.get(gpu.name, 132), runs=ids))
    if gemms:
        sections["gemm"] = tuple(gemms)
    curves = []
    attention_ids = [r.id for r in by_kind["attention"]]  # every run's rows: one curve per key
    for dtype in sorted({row.dtype for r in by_kind["attention"] for row in r.rows}):
        rows = [row for r in by_kind["attention"] for row in r.rows if row.dtype == dtype]
        curves += fit_attention(rows, peak=_peak(gpu, dtype), runs=attention_ids)
    if curves:
        sections["attention"] = tuple(curves)
    if not sections:
        raise ConfigError("runs", [r.id for r in runs], "matmul, attention or bandwidth runs with rows")
    prov, prov_notes = profile_provenance(provenance, gpu.name)
    cal = Calibration(created=created, runs=tuple(sorted(r.id for r in runs)),
                      setup=f"{prov.device or '?'}: kernel sweeps", source="willitscale calibrate --profile",
                      provenance=prov, sections=sections)
    return cal, notes + prov_notes


def with_absent_notes(text: str, record: Mapping[str, Any]) -> str:
    """``text`` (a profile's TOML) with a comment under ``[provenance]`` naming each fact that
    was not recorded and why (the table itself holds only what was read)."""
    absent = record.get("absent") or {}
    if not absent or "[provenance]\n" not in text:
        return text
    lines = "".join(f"# not recorded: {name} ({why})\n" for name, why in absent.items())
    return text.replace("[provenance]\n", "[provenance]\n" + lines, 1)

"""``bench matmul`` sweeps -> the measured profile's ``[[gemm]]`` curves: :func:`gemm_sections`.

For each device and dtype a matmul run measured on a catalog GPU with built-in compute curves
(``compute/curves.toml``), the GEMM model of :mod:`willitscale.compute.gemm` is fitted to the
measured products (:func:`~willitscale.calibrate.curves.fit_gemm_curve`), starting from the
built-in curve: its tile and SM count are kept, and the free constants depend on how many
distinct shapes were measured: one shape fixes the efficiency only, two the efficiency and
``k_half``, three or more the kernel overhead too. The fitted entry replaces the built-in one in
every estimate that loads the profile (:func:`willitscale.compute.curves.gpu_curves`); its
``data`` keeps the points, its ``runs`` the runs they came from.

A profile describes one GPU (its ``[provenance]``): when the matmul runs measured devices of
more than one catalog GPU, no curve is written and a note says so. CPU runs and devices no
catalog GPU matches write none either (their peak is fitted by :mod:`.compute` as before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from willitscale.calibrate.compute import catalog_gpu_for
from willitscale.calibrate.curves import fit_gemm_curve
from willitscale.calibrate.runs import TORCH_TO_DTYPE, MeasuredRun
from willitscale.hardware.profile import Provenance

__all__ = ["gemm_sections"]


def _points(runs: Sequence[MeasuredRun]) -> dict[tuple[str, str], tuple[dict, set[int]]]:
    """(device, dtype) -> ({(m, n, k): fastest FLOP/s}, run ids)."""
    out: dict[tuple[str, str], tuple[dict, set[int]]] = {}
    for run in runs:
        if run.kind != "matmul":
            continue
        for row in run.rows:
            key = (row.device, TORCH_TO_DTYPE.get(row.dtype, row.dtype))
            shapes, ids = out.setdefault(key, ({}, set()))
            shape = (row.m, row.n, row.k)
            shapes[shape] = max(shapes.get(shape, 0.0), row.flop_rate)
            ids.add(run.id)
    return out


def gemm_sections(runs: Sequence[MeasuredRun], *, gpu: str | None = None
                  ) -> tuple[Provenance | None, tuple, list[str]]:
    """``(provenance, gemm curves, notes)`` fitted to the matmul runs (see the module docstring)."""
    from willitscale.compute.curves import gpu_curves

    notes: list[str] = []
    fitted, gpus, devices = [], set(), set()
    for (device, dtype), (shapes, ids) in sorted(_points(runs).items()):
        if device == "cpu":
            continue
        catalog = catalog_gpu_for(device, gpu)
        curves = gpu_curves(catalog) if catalog is not None else None
        if curves is None or dtype not in curves.gemm:
            notes.append(f"{device} {dtype}: no built-in GEMM curve to start from: no [[gemm]] "
                         "entry fitted")
            continue
        start = curves.gemm_for(dtype)
        n = len(shapes)
        points = [(m, nn, k, rate) for (m, nn, k), rate in sorted(shapes.items())]
        curve = fit_gemm_curve(points, start, bandwidth=curves.memory.bandwidth,
                               fit_k_half=n >= 2, fit_overhead=n >= 3,
                               in_bytes=1.0 if dtype == "fp8" else 2.0)
        held = {1: "k_half and kernel overhead held at the built-in curve's",
                2: "kernel overhead held at the built-in curve's"}.get(n, "")
        source = (f"willitscale calibrate: bench matmul on {device}, {n} shape(s)"
                  + (f"; {held}" if held else ""))
        fitted.append(replace(curve, runs=tuple(sorted(ids)), source=source))
        gpus.add(catalog.name)
        devices.add(device)
    if len(gpus) > 1:
        notes.append(f"matmul runs on {len(gpus)} GPU models ({', '.join(sorted(gpus))}): a "
                     "profile describes one: no [[gemm]] entry written; calibrate each apart")
        return None, (), notes
    if not fitted:
        return None, (), notes
    provenance = Provenance(gpu=next(iter(gpus)), device=", ".join(sorted(devices)))
    return provenance, tuple(fitted), notes

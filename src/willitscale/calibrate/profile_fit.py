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

``bench train`` steps on the profile's GPU fit its ``[[sustained]]`` factor
(:func:`sustained_section`): the share of the kernel rates (the curves above, measured or
built in) a training step sustains. For each step, the per-op model times the benchmark's
model (one GPU, its micro-batch and sequence, eager PyTorch element-wise kernels, the fused
causal attention it runs) and the factor that makes its forward + backward equal the measured
one (without gradient synchronisation) is found by bisection; the profile keeps their median.
With it, the per-op model reproduces the user's own training step, as a flat HFU did before
curves were measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from willitscale.calibrate.compute import catalog_gpu_for
from willitscale.calibrate.curves import fit_gemm_curve
from willitscale.calibrate.runs import TORCH_TO_DTYPE, MeasuredRun
from willitscale.hardware.profile import Provenance

__all__ = ["gemm_sections", "sustained_section"]


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
        # not measured_curves.fit_gemm (``calibrate --profile``): this refits the built-in curve,
        # holding what too few shapes cannot fix, under the compute model's own GEMM time
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


def _step_compute(row, catalog, calibration) -> float:
    """The per-op model's forward + backward seconds of ``row``'s benchmark step."""
    from dataclasses import replace as _replace

    from willitscale.bench.models import FUSED_CAUSAL_ATTENTION, bench_model
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    settings = {"model": bench_model(row.model), "gpu": catalog.name, "nodes": 1,
                "gpus_per_node": 1, "micro_batch": row.batch_per_rank,
                "global_batch": row.batch_per_rank, "seq_len": row.seq_len,
                "dtype": TORCH_TO_DTYPE[row.dtype], "recompute": "none", "fusion": "eager",
                "flash_attention": FUSED_CAUSAL_ATTENTION}
    scenario = _replace(build_scenario(settings), calibration=calibration)
    return float(estimate(scenario, allow_oom=True).compute)


def _factor(row, catalog, base, measured: float) -> float:
    """Bisection on the factor (compute time falls as it rises)."""
    from willitscale.hardware.calibration import Calibration
    from willitscale.hardware.profile import SustainedRate

    def seconds(f: float) -> float:
        cal = Calibration(provenance=base.provenance,
                          sections={**base.sections, "sustained": (SustainedRate(factor=f),)})
        return _step_compute(row, catalog, cal)

    from willitscale.compute.curves import gpu_curves

    curves = gpu_curves(catalog, base)
    best = max([c.efficiency for c in curves.gemm.values()] + [c.efficiency for c in curves.attention])
    low, high = 0.02, min(2.0, 1.0 / best)  # no rate above the peak
    if seconds(high) > measured or seconds(low) < measured:
        return float("nan")
    for _ in range(40):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if seconds(mid) > measured else (low, mid)
    return 0.5 * (low + high)


def sustained_section(runs: Sequence[MeasuredRun], *, provenance: Provenance | None,
                      sections, gpu: str | None = None) -> tuple[Provenance | None, tuple, list[str]]:
    """``(provenance, (SustainedRate,) or (), notes)`` fitted to the train runs on one catalog
    GPU with curves (the profile's ``provenance`` GPU when it has one)."""
    import statistics

    from willitscale.compute.curves import gpu_curves
    from willitscale.hardware.calibration import Calibration
    from willitscale.hardware.profile import SustainedRate

    notes: list[str] = []
    points, ids, devices, catalog = [], set(), set(), None
    for run in runs:
        if run.kind != "train":
            continue
        for row in run.rows:
            if row.device == "cpu":
                continue
            found = catalog_gpu_for(row.device, gpu)
            if found is None or gpu_curves(found) is None:
                notes.append(f"{row.device}: no catalog GPU with compute curves: no [[sustained]] fitted")
                continue
            if (provenance is not None and found.name != provenance.gpu) or (
                    catalog is not None and found.name != catalog.name):
                notes.append(f"train runs on another GPU ({found.name}) than the profile's: "
                             "no [[sustained]] fitted; calibrate each GPU apart")
                return provenance, (), notes
            catalog = found
            points.append(row)
            ids.add(run.id)
            devices.add(row.device)
    if not points:
        return provenance, (), notes
    provenance = provenance or Provenance(gpu=catalog.name, device=", ".join(sorted(devices)))
    base = Calibration(provenance=provenance, sections=dict(sections))
    fitted = []
    for row in points:
        measured = row.forward + row.backward_no_sync
        f = _factor(row, catalog, base, measured)
        if f == f:  # not NaN
            fitted.append((f, measured))
        else:
            notes.append(f"train step of {row.model} on {row.device}: no factor that keeps every "
                         "rate within the peak "
                         "reproduces it: left out of [[sustained]]")
    if not fitted:
        return provenance, (), notes
    factor = statistics.median(f for f, _ in fitted)
    data = tuple((m, f) for f, m in fitted)
    entry = SustainedRate(factor=factor, points=len(fitted), runs=tuple(sorted(ids)), data=data,
                          source=f"willitscale calibrate: median over {len(fitted)} bench train "
                                 f"step(s) on {', '.join(sorted(devices))} (data: measured "
                                 "forward + backward s, the factor reproducing it)")
    return provenance, (entry,), notes

"""Compute figures from matmul and training runs.

* **peak**: the catalog's dense peak when the device is a known GPU; otherwise (a CPU, an
  unknown accelerator) the best matmul rate measured, which is what "peak" can mean there.
  Without either, the training rate itself (efficiency 1).
* **achieved**: executed FLOPs of one rank's training step (``workload.training_flops``, the
  estimate's own count: 3 x forward plus FlashAttention's recomputed scores) over that rank's
  forward + backward time measured under ``no_sync()`` (no gradient communication in it).
  The median over the training runs given.
* **optimizer time per parameter**: the optimizer step time over the parameter count (AdamW
  touches every parameter the same way, so it scales with parameters).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from willitscale.calibrate.runs import TORCH_TO_DTYPE, MeasuredRun
from willitscale.hardware.calibration import ComputeCalibration

__all__ = ["compute_calibrations", "train_executed_flops_per_rank"]


def train_executed_flops_per_rank(row) -> float:
    """Executed FLOPs of one rank's step in a :class:`~willitscale.bench.records.TrainRow`."""
    from willitscale.bench.models import bench_model
    from willitscale.workload.flops import training_flops

    flops = training_flops(bench_model(row.model), row.seq_len)
    return float(flops.hardware_per_token) * row.seq_len * row.batch_per_rank


def _catalog_peak(device: str, dtype: str) -> float | None:
    """The catalog's dense peak for a GPU as torch names it, when the catalog knows it."""
    if device == "cpu":
        return None
    try:
        from willitscale.hardware.catalog import gpu_for_device_name  # type: ignore[attr-defined]
    except ImportError:
        return None
    gpu = gpu_for_device_name(device)
    return gpu.peak_flops.get(dtype) if gpu is not None else None


def compute_calibrations(runs: Sequence[MeasuredRun]) -> tuple[list[ComputeCalibration], list[str]]:
    notes: list[str] = []
    best: dict[tuple[str, str], tuple[float, int]] = {}
    for run in runs:
        if run.kind != "matmul":
            continue
        for row in run.rows:
            key = (row.device, TORCH_TO_DTYPE.get(row.dtype, row.dtype))
            if key not in best or row.flop_rate > best[key][0]:
                best[key] = (row.flop_rate, run.id)
    train: dict[tuple[str, str], list[tuple[float, float, str, int]]] = {}
    for run in runs:
        if run.kind != "train":
            continue
        for row in run.rows:
            key = (row.device, TORCH_TO_DTYPE[row.dtype])
            rate = train_executed_flops_per_rank(row) / (row.forward + row.backward_no_sync)
            train.setdefault(key, []).append((rate, row.optimizer / row.params, row.model, run.id))
    entries = []
    for key in sorted(set(best) | set(train)):
        device, dtype = key
        measured = train.get(key, [])
        achieved = statistics.median(m[0] for m in measured) if measured else None
        per_param = statistics.median(m[1] for m in measured) if measured else None
        peak, source = _catalog_peak(device, dtype), "catalog"
        runs_used = sorted({m[3] for m in measured})
        if peak is None and key in best:
            peak, source = best[key][0], f"best matmul rate measured (run {best[key][1]})"
            runs_used = sorted({*runs_used, best[key][1]})
        if peak is None:
            peak, source = achieved, "no matmul run: the training rate itself (efficiency 1)"
            notes.append(f"{device} {dtype}: no peak known; run `willitscale bench matmul` for one")
        if achieved is not None and achieved > peak:
            notes.append(f"{device} {dtype}: the training step ran faster than the matmul peak "
                         f"({achieved / 1e12:.3g} > {peak / 1e12:.3g} TFLOP/s); peak raised to it")
            peak = achieved
        entries.append(ComputeCalibration(
            device=device, dtype=dtype, peak_flop_rate=peak, peak_source=source,
            achieved_flop_rate=achieved, optimizer_time_per_param=per_param,
            model=",".join(sorted({m[2] for m in measured})), runs=tuple(runs_used)))
    return entries, notes

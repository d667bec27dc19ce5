"""Compute figures from matmul and training runs.

* **peak**: the catalog's dense peak when the device is a known GPU (matched by name, or named
  with ``--gpu``); otherwise (a CPU, an
  unknown accelerator) the best matmul rate measured, which is what "peak" can mean there.
  Without either, the training rate itself (efficiency 1).
* **achieved**: executed FLOPs of one rank's training step (``workload.training_flops``, the
  estimate's own count for a causal fused attention kernel, as the benchmark's model runs: 3 x
  forward with half the attention scores, plus FlashAttention's recomputed scores -- counted as
  the estimate counts them, so a step is predicted at the speed it was measured) over that rank's
  forward + backward time measured under ``no_sync()`` (no gradient communication in it).
  The median over the training runs given.
* **optimizer time per parameter**: the optimizer step time over the parameter count (AdamW
  touches every parameter the same way, so it scales with parameters).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from willitscale.bench.models import FUSED_CAUSAL_ATTENTION, bench_model
from willitscale.calibrate.runs import TORCH_TO_DTYPE, MeasuredRun
from willitscale.hardware.calibration import ComputeCalibration
from willitscale.hardware.catalog import get_gpu, list_gpus
from willitscale.workload.flops import training_flops

__all__ = ["compute_calibrations", "train_executed_flops_per_rank"]


def train_executed_flops_per_rank(row) -> float:
    """Executed FLOPs of one rank's step in a :class:`~willitscale.results.records.TrainRow`."""

    fused = FUSED_CAUSAL_ATTENTION
    flops = training_flops(bench_model(row.model), row.seq_len, causal=fused, flash_attention=fused)
    return float(flops.hardware_per_token) * row.seq_len * row.batch_per_rank


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _model_tokens(tokens: set[str]) -> set[str]:
    """Tokens naming a GPU model (a100, h100, mi300x): letters and digits, not a memory size."""
    return {t for t in tokens if re.search(r"[a-z]", t) and re.search(r"\d", t)
            and not t.endswith("gb")}


def catalog_gpu_for(device: str, wanted: str | None = None):
    """The catalog GPU of a device as torch names it (``"NVIDIA A100-SXM4-80GB"``), or None.

    ``wanted`` names it outright. Otherwise the catalog entry sharing the most words with the
    device name, among those with its model word (a100, h100, ...); a tie is None: torch's
    ``"NVIDIA H100 80GB HBM3"`` could be the SXM or the PCIe card, and we do not guess.
    """

    if wanted:
        return get_gpu(wanted)
    if device == "cpu":
        return None
    tokens = _tokens(device)
    models = _model_tokens(tokens)
    scored = []
    for gpu in list_gpus():
        theirs = _tokens(gpu.display_name) | _tokens(gpu.name.replace("-", " "))
        if models & theirs:
            scored.append((len(tokens & theirs), gpu))
    if not scored:
        return None
    best = max(score for score, _ in scored)
    top = [gpu for score, gpu in scored if score == best]
    return top[0] if len(top) == 1 else None


def compute_calibrations(runs: Sequence[MeasuredRun], *, gpu: str | None = None
                         ) -> tuple[list[ComputeCalibration], list[str]]:
    """Compute entries per (device, dtype); ``gpu`` names the catalog GPU of the devices."""
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
        catalog = catalog_gpu_for(device, gpu)
        peak = catalog.peak_flops.get(dtype) if catalog is not None else None
        source = f"catalog: {catalog.name} dense {dtype}" if peak is not None else ""
        if device != "cpu" and catalog is None:
            notes.append(f"{device}: no catalog GPU matches its name; name it with --gpu")
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

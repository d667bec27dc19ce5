"""The estimate's view of a measured training run: a scenario built from a calibration.

The cluster is described by what was measured, not by a catalog entry: the device computes
at the calibrated peak (the catalog's for a known GPU, the best matmul rate for a CPU) with
the calibrated efficiency (the estimate reads both, and the optimizer time per parameter, from
the calibration it is given); its memory bandwidth is the one that makes the estimate's
optimizer model (``OPTIMIZER_BYTES_PER_PARAM`` bytes per parameter) take the measured
optimizer time; the links carry the fitted bandwidth and latency with efficiency 1 (the fit
already is what the application gets). The plan is the run's: plain DDP over every rank, its
per-rank batch, sequence length and DDP bucket caps -- the first bucket's too: given an
explicit ``bucket_cap_mb`` (as the benchmark always gives it) torch 2.13 uses it for the first
bucket as well, so a model smaller than the cap has one bucket, all-reduced after the whole
backward, not a 1 MiB first bucket overlapping it. Runs stored before the benchmark recorded
the first bucket are taken to have used the cap.
"""

from __future__ import annotations

from willitscale.bench.models import FUSED_CAUSAL_ATTENTION, bench_model
from willitscale.calibrate.runs import TORCH_TO_DTYPE, MeasuredRun
from willitscale.compute.kernels import OPTIMIZER_BYTES_PER_PARAM
from willitscale.estimation.estimate import estimate
from willitscale.hardware.calibration import Calibration
from willitscale.hardware.model import Cluster, Gpu, Link, LinkKind, Node
from willitscale.scenario.options import ParallelOptions
from willitscale.scenario.plan import Plan
from willitscale.scenario.scenario import DdpOptions, Scenario

__all__ = ["predict_train_step", "predict_train_memory", "scenario_for"]

HOST_MEMORY_BYTES = 2.0**40  #: the memory report is not validated; any large figure will do


def _links(run: MeasuredRun, cal: Calibration):
    def link(fit, name, kind):
        return Link(name=name, kind=kind, bandwidth=fit.bandwidth, latency=fit.latency,
                    efficiency=1.0, source=f"calibration (runs {list(fit.runs)})")

    intra, inter = cal.intra_node, cal.inter_node
    if run.ranks_per_node > 1 and intra is None:
        return None, "the calibration has no intra_node fit (add a single-node collectives run)"
    if run.nodes > 1 and inter is None:
        return None, "the calibration has no inter_node fit (add a one-rank-per-node run)"
    intra_link = link(intra or inter, "calibrated-intra", LinkKind.GENERIC)
    nic = link(inter or intra, "calibrated-inter", LinkKind.ETHERNET)
    return (intra_link, nic), None


def scenario_for(row, run: MeasuredRun, cal: Calibration):
    """``(scenario, None)`` for the estimate, or ``(None, reason)``."""
    dtype = TORCH_TO_DTYPE[row.dtype]
    compute = cal.compute_for(dtype, row.device)
    if compute is None or compute.efficiency is None:
        return None, f"the calibration has no training measurement for {row.device} {dtype}"
    links, reason = _links(run, cal)
    if reason:
        return None, reason
    per_param = compute.optimizer_time_per_param
    bytes_per_param = OPTIMIZER_BYTES_PER_PARAM
    gpu = Gpu(name=row.device, display_name=row.device, vendor="measured",
              memory=HOST_MEMORY_BYTES,
              memory_bandwidth=bytes_per_param / per_param if per_param else 1e15,
              peak_flops={dtype: compute.peak_flop_rate}, source="calibration")
    # each rank drives one NIC: the run's ranks per node use that many of the measured nodes'
    # NICs (one on the emulated cluster); the estimate scales the fit to them per NIC
    inter = cal.inter_node
    nics = min(run.ranks_per_node, (inter.nics_per_node if inter else None) or run.ranks_per_node)
    node = Node(name="calibrated", gpu=gpu, gpus_per_node=run.ranks_per_node,
                intra_link=links[0], nic=links[1], nics=nics)
    cluster = Cluster(node=node, nodes=run.nodes, name="calibrated")
    plan = Plan(dp=run.ranks, micro_batch=row.batch_per_rank)
    # the compute efficiency, optimizer time and link figures are the calibration's, read by
    # the estimate itself: validate predicts what `willitscale estimate --calibration` would
    scenario = Scenario(
        cluster=cluster, plan=plan, seq_len=row.seq_len, model=bench_model(row.model), dtype=dtype,
        ddp=DdpOptions(bucket_cap=row.bucket_bytes, grad_reduce_dtype="fp32",
                       first_bucket=row.first_bucket_bytes or row.bucket_bytes), calibration=cal,
        options=ParallelOptions(flash_attention=FUSED_CAUSAL_ATTENTION), name=f"run {run.id}")
    return scenario, None


def predict_train_step(row, run: MeasuredRun, cal: Calibration) -> tuple[float | None, str]:
    """The estimate's step time for a measured :class:`~willitscale.results.records.TrainRow`."""
    scenario, reason = scenario_for(row, run, cal)
    if scenario is None:
        return None, reason
    return float(estimate(scenario).step_time), ""


def predict_train_memory(row, run: MeasuredRun, cal: Calibration) -> float | None:
    """The estimate's ``torch.cuda.max_memory_allocated`` for a measured training row: the
    benchmark's model is eager PyTorch modules under ``torch.autocast`` (``autocast``
    activations), wrapped in DDP with ``gradient_as_bucket_view=True``, stepped by
    ``torch.optim.AdamW``'s default foreach implementation. None when the row cannot be
    predicted. (The benchmark frees the gradients after each step, ``set_to_none=True``; the
    model keeps them through the forward, as a loop that zeroes them after the forward does:
    at most 4 bytes per parameter above the measured peak.)"""
    from dataclasses import replace

    scenario, _ = scenario_for(row, run, cal)
    if scenario is None:
        return None
    memory_view = replace(
        scenario, model=replace(scenario.model, implementation="autocast"),
        ddp=replace(scenario.ddp, gradient_as_bucket_view=True), optimizer="adamw-foreach",
        unstated=())
    return float(estimate(memory_view, allow_oom=True).memory.allocated)

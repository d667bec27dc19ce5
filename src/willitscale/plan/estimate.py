"""The step-time estimate of data-parallel (DDP) training: :func:`estimate`.

One optimizer step on one representative GPU (all data-parallel ranks do the same work)::

    step = data_loading (exposed) + forward + backward (incl. recomputation)
         + overlap_slowdown + exposed_comms + optimizer

* forward/backward: :mod:`willitscale.plan.compute` (FLOPs / (efficiency x peak), or a
  measured single-GPU step time split by FLOPs);
* the gradient all-reduce: DDP buckets (:mod:`willitscale.plan.buckets`) costed by the
  collective model over the links the data-parallel group crosses
  (:mod:`willitscale.plan.comms`), scheduled on one communication stream during the last
  micro-step's backward (gradient accumulation syncs only then) or after it (``overlap=False``);
* ``overlap_slowdown = s x hidden communication`` (compute sharing the GPU with NCCL kernels);
* optimizer: fused AdamW streams each parameter's fp32 weight, gradient and two moments in and
  weight and moments out, 28 bytes per parameter, at the GPU's memory bandwidth (a lower bound);
* data loading: samples x bytes over the node's storage bandwidth shared by its GPUs; hidden
  behind the previous step when prefetched.

Docs with every derivation and source: ``docs/estimate.md``.
"""

from __future__ import annotations


from willitscale.plan.bottleneck import find_bottleneck
from willitscale.plan.buckets import comm_schedule, exposed_after
from willitscale.plan.compute import compute_time, forward_backward_split
from willitscale.plan.efficiency import Efficiency, default_efficiency
from willitscale.plan.memory import memory_breakdown
from willitscale.plan.plan import require_data_parallel
from willitscale.plan.result import Breakdown, StepEstimate
from willitscale.plan.scenario import Scenario
from willitscale.plan.steptimeline import build_timeline
from willitscale.plan.work import StepWork, gradient_ready, step_work

__all__ = ["OPTIMIZER_BYTES_PER_PARAM", "estimate", "resolved_efficiency"]

#: fused AdamW with fp32 state: reads weight, gradient, m, v (4 x 4 B), writes weight, m, v (3 x 4 B)
OPTIMIZER_BYTES_PER_PARAM = 28


def resolved_efficiency(scenario: Scenario) -> Efficiency:
    """The compute efficiency in force: the user's, a calibration's (an HFU), or the default."""
    if scenario.efficiency is not None:
        return scenario.efficiency
    calibration = scenario.calibration
    if calibration is not None:
        entry = calibration.compute_for(scenario.dtype)
        value = entry.efficiency if entry is not None else calibration.compute_efficiency
        if value is not None:
            where = getattr(calibration, "path", "") or "the calibration"
            return Efficiency(kind="hfu", value=min(float(value), 1.0), source=f"calibrated, {where}")
    return default_efficiency(scenario.cluster.gpu.name, scenario.dtype)


def _compute_seconds(scenario: Scenario, work: StepWork, peak: float) -> tuple[float, str]:
    measured = scenario.measured.step_time_one_gpu
    if measured is not None:
        return measured, "measured single-GPU step time (includes optimizer and data loading)"
    eff = resolved_efficiency(scenario)
    seconds = compute_time(model_flops=work.model_flops, executed_flops=work.executed_flops,
                           peak_flops=peak, efficiency=eff.value, kind=eff.kind)
    return float(seconds), eff.describe()


def _optimizer_seconds(scenario: Scenario, work: StepWork) -> float:
    if scenario.measured.step_time_one_gpu is not None:
        return 0.0  # inside the measured step
    calibration = scenario.calibration
    entry = calibration.compute_for(scenario.dtype) if calibration is not None else None
    if entry is not None and entry.optimizer_time_per_param is not None:
        return work.params * entry.optimizer_time_per_param
    return work.params * OPTIMIZER_BYTES_PER_PARAM / scenario.cluster.gpu.memory_bandwidth


def _data_seconds(scenario: Scenario) -> float:
    data = scenario.data
    if data is None or scenario.measured.step_time_one_gpu is not None:
        return 0.0
    samples = scenario.plan.micro_batch * scenario.plan.grad_accum  # per GPU per step
    per_gpu_bandwidth = data.storage_bandwidth / scenario.cluster.node.gpus_per_node
    return samples * data.sample_bytes / per_gpu_bandwidth


def estimate(scenario: Scenario) -> StepEstimate:
    """Predict one training step of ``scenario`` (data parallelism: tp = pp = cp = ep = 1)."""
    from willitscale.plan.comms import gradient_allreduce

    require_data_parallel(scenario.plan)
    cluster, plan, ddp = scenario.cluster, scenario.plan, scenario.ddp
    peak = cluster.gpu.peak(scenario.dtype)
    work = step_work(scenario)
    compute, compute_source = _compute_seconds(scenario, work, peak)
    micro = compute / work.micro_steps
    fwd, bwd = forward_backward_split(micro, forward_flops=work.forward_flops,
                                      backward_flops=work.backward_flops,
                                      recompute_flops=work.recompute_flops)
    fwd, bwd = float(fwd), float(bwd)
    bucket_bytes, ready_fraction = gradient_ready(work, ddp.grad_bytes, first_cap=ddp.first_bucket,
                                                  cap=ddp.bucket_cap)
    allreduce = gradient_allreduce(scenario, float(bucket_bytes.sum()))
    durations = allreduce.time(bucket_bytes)
    backward_start = compute - bwd  # of the last micro-step, from the start of compute
    ready = backward_start + (ready_fraction * bwd if ddp.overlap else bwd + 0 * ready_fraction)
    start, end = comm_schedule(ready, durations)
    comms = float(durations.sum())
    # (clamped: a cumulative sum over 1e5 buckets can overshoot the total by rounding)
    exposed = min(float(exposed_after(end[-1], compute)), comms) if len(end) else 0.0
    slowdown = ddp.overlap_slowdown * (comms - exposed) if ddp.overlap else 0.0
    optimizer = _optimizer_seconds(scenario, work)
    load = _data_seconds(scenario)
    rest = compute + slowdown + exposed + optimizer
    data_exposed = max(0.0, load - rest) if (scenario.data and scenario.data.overlapped) else load
    breakdown = Breakdown(data_loading=data_exposed, forward=fwd * work.micro_steps,
                          backward=bwd * work.micro_steps, overlap_slowdown=slowdown,
                          exposed_comms=exposed, optimizer=optimizer)
    step = breakdown.total
    report = allreduce.report(calls=len(durations), time=comms, exposed=exposed,
                              total_bytes=float(bucket_bytes.sum()))
    timeline = build_timeline(
        micro_forward=fwd, micro_backward=bwd, micro_steps=work.micro_steps, data=data_exposed,
        slowdown=slowdown, comm_start=start, comm_end=end, bucket_bytes=bucket_bytes,
        optimizer=optimizer, step_time=step, link=report.links[-1] if report.links else "")
    memory, memory_unknowns = memory_breakdown(scenario, work)
    bottleneck = find_bottleneck(
        scenario=scenario, work=work, allreduce=allreduce, bucket_bytes=bucket_bytes,
        compute=compute + slowdown + optimizer, comms=comms, exposed=exposed, storage=load,
        step=step)
    tokens = scenario.tokens_per_step
    return StepEstimate(
        step_time=step, breakdown=breakdown, compute=compute, comms=comms, exposed_comms=exposed,
        model_flops=work.model_flops, executed_flops=work.executed_flops, peak_flops=peak,
        mfu=work.model_flops / (step * peak), hfu=work.executed_flops / (step * peak),
        tokens_per_s=tokens / step, samples_per_s=plan.global_batch / step,
        global_batch=plan.global_batch, tokens_per_step=tokens, params=work.params,
        gpus=cluster.gpus, nodes=cluster.nodes, memory=memory, comm_ops=(report,),
        bottleneck=bottleneck,
        assumptions=_assumptions(scenario, compute_source, allreduce, work, load),
        unknowns=memory_unknowns, timeline=timeline,
    )


def _assumptions(scenario: Scenario, compute_source: str, allreduce, work: StepWork,
                 load: float) -> tuple[tuple[str, str], ...]:
    from willitscale.units import format_size

    ddp, plan = scenario.ddp, scenario.plan
    items = [
        ("compute efficiency", compute_source),
        ("compute dtype", f"{scenario.dtype}: peak {scenario.cluster.gpu.peak(scenario.dtype) / 1e12:g} "
                          f"TFLOP/s dense on {scenario.cluster.gpu.name}"),
        ("recomputation", plan.recompute),
        ("batch", f"micro-batch {plan.micro_batch} x grad-accum {plan.grad_accum} x dp {plan.dp} "
                  f"= global batch {plan.global_batch} samples of {scenario.seq_len} tokens"),
        ("gradient all-reduce", f"{allreduce.algorithm}: {allreduce.why}"),
        ("DDP buckets", f"{format_size(ddp.first_bucket, binary=True)} first, then "
                        f"{format_size(ddp.bucket_cap, binary=True)} (PyTorch defaults), "
                        f"{ddp.grad_reduce_dtype} gradients, "
                        + ("overlapped with backward" if ddp.overlap else "after backward (no overlap)")),
        ("overlap slowdown", f"{ddp.overlap_slowdown:g} s of compute per s of hidden communication"),
        ("optimizer", "measured step includes it" if scenario.measured.step_time_one_gpu else
         f"fused AdamW, {OPTIMIZER_BYTES_PER_PARAM} B/param at the GPU's memory bandwidth"),
        ("data loading", "not modelled (give --sample-bytes and --storage-bandwidth)"
         if scenario.data is None else
         f"{format_size(scenario.data.sample_bytes)}/sample, "
         + ("prefetched during the previous step" if scenario.data.overlapped else "not overlapped")),
    ]
    items += [("workload", note) for note in work.notes]
    items += [("default", d) for d in scenario.defaults_applied]
    return tuple(items)

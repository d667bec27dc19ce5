"""Reports of a plain data-parallel step (DDP): the bucket timeline, the all-reduce report, the
bottleneck with its computed fixes, and the assumptions, from the engine's numbers.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

__all__ = ["data_parallel_parts", "dp_assumptions"]


def data_parallel_parts(scenario, ctx, result, breakdown) -> SimpleNamespace:
    from willitscale.plan.bottleneck import find_bottleneck
    from willitscale.plan.buckets import comm_schedule
    from willitscale.plan.comms import gradient_allreduce
    from willitscale.plan.mpreport import placement_rows, unknowns_of
    from willitscale.plan.steptimeline import build_timeline

    detail = result.detail
    empty = np.zeros(0)
    sizes, ready, durations, counts, _ = detail["tail"].schedule.get(0, (empty,) * 4 + (0.0,))
    fwd_mb = float(detail["comp"][0][0, 0])
    bwd_mb = float(detail["comp"][1][0, 0])
    m = scenario.plan.grad_accum
    compute = breakdown.forward + breakdown.backward
    start, end = comm_schedule(np.asarray(ready) + (compute - bwd_mb), durations)
    comms = float(np.sum(durations))
    allreduce = gradient_allreduce(scenario, float(np.sum(sizes)), ctx.links)
    report = allreduce.report(calls=int(round(float(np.sum(counts)))), time=comms,
                              exposed=breakdown.exposed_comms, total_bytes=float(np.sum(sizes)))
    timeline = build_timeline(
        micro_forward=fwd_mb, micro_backward=bwd_mb, micro_steps=m, data=breakdown.data_loading,
        slowdown=breakdown.overlap_slowdown, comm_start=start, comm_end=end, bucket_bytes=sizes,
        optimizer=breakdown.optimizer, step_time=breakdown.total,
        link=report.links[-1] if report.links else "", counts=counts)
    bottleneck = find_bottleneck(scenario=scenario, ctx=ctx, result=result, breakdown=breakdown,
                                 ops=(report,))
    places = placement_rows(scenario, ctx, result)
    dp = next((p for p in places if p["parallelism"] == "dp"), None)
    if dp is not None:
        report = replace(report, parallelism="dp", leaves_node=dp["leaves_node"], placement=dp["where"])
    return SimpleNamespace(
        comm_ops=(report,), bottleneck=bottleneck, timeline=timeline,
        assumptions=dp_assumptions(scenario, ctx, allreduce),
        unknowns=unknowns_of(scenario), placement=tuple(places), warnings=(),
        pipeline={"schedule": "none (one stage)", "stages": 1, "micro_batches": m,
                  "virtual_stages": 1, "bubble_s": 0.0, "bubble_fraction": 0.0})


def compute_source(scenario, ctx) -> str:
    if scenario.measured.step_time_one_gpu is not None:
        return ("measured single-GPU step time, less the modelled optimizer (which runs after "
                "the all-reduce): forward + backward split by FLOPs; data loading inside it")
    return ctx.efficiency.describe()


def dp_assumptions(scenario, ctx, allreduce) -> tuple[tuple[str, str], ...]:
    from willitscale.plan.work import work_notes
    from willitscale.units import format_size

    ddp, plan = scenario.ddp, scenario.plan
    items = [
        ("compute efficiency", compute_source(scenario, ctx)),
        ("compute dtype", f"{scenario.dtype}: peak {ctx.peak / 1e12:g} TFLOP/s dense on "
                          f"{scenario.cluster.gpu.name}"),
        ("recomputation", plan.recompute),
        ("batch", f"micro-batch {plan.micro_batch} x grad-accum {plan.grad_accum} x dp {plan.dp} "
                  f"= global batch {plan.global_batch} samples of {scenario.seq_len} tokens"),
        ("gradient all-reduce", f"{allreduce.algorithm}: {allreduce.why}"),
        ("DDP buckets", f"{format_size(ddp.first_bucket, binary=True)} first, then "
                        f"{format_size(ddp.bucket_cap, binary=True)} (PyTorch defaults), "
                        f"{ddp.grad_reduce_dtype} gradients, "
                        + ("overlapped with backward" if ddp.overlap else "after backward (no overlap)")),
        ("overlap slowdown", f"{ddp.overlap_slowdown:g} s of compute per s of hidden communication"),
        ("optimizer", ("fused AdamW, 28" if scenario.optimizer == "adamw-fused" else
                       "torch.optim.AdamW's foreach implementation, 80")
         + " B/param at the GPU's memory bandwidth"
         + (" (taken out of the measured step: it waits for the all-reduce)"
            if scenario.measured.step_time_one_gpu else "")),
        ("data loading", "not modelled (give --sample-bytes and --storage-bandwidth)"
         if scenario.data is None else
         f"{format_size(scenario.data.sample_bytes)}/sample, "
         + ("prefetched during the previous step" if scenario.data.overlapped else "not overlapped")),
    ]
    from willitscale.plan.links import link_caveats

    items += [("not modelled", note) for note in link_caveats(scenario.cluster)]
    items += [("memory", memory_note(scenario))]
    items += [("workload", note) for note in work_notes(scenario)]
    items += [("default", d) for d in scenario.defaults_applied]
    return tuple(items)


def memory_note(scenario) -> str:
    """How memory is judged: the share of HBM a plan may fill, and DDP's bucket copy."""
    from willitscale.units import format_size

    gpu = scenario.cluster.gpu
    text = (f"a plan fits in {scenario.memory_fraction:g} of HBM "
            f"({format_size(scenario.memory_fraction * gpu.memory, binary=True)} of "
            f"{format_size(gpu.memory, binary=True)}, --memory-fraction, the planner's rule): the "
            "rest is for the CUDA context, NCCL buffers and fragmentation, which are not counted")
    if scenario.plan.is_data_parallel and scenario.plan.dp > 1:
        text += ("; DDP's buckets " + ("are the gradients (--gradient-as-bucket-view)"
                                       if scenario.ddp.gradient_as_bucket_view else
                                       "hold a copy of the gradients (PyTorch's default "
                                       "gradient_as_bucket_view=False), counted in buffers"))
    return text

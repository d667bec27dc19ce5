"""The assumptions, warnings and pipeline summary of an estimate, for its report.

Every estimate lists the same common items (compute efficiency, dtype, recomputation, batch,
what the link model leaves out, how memory is judged, how FLOPs were counted, the defaults
filled in); a data-parallel step adds its all-reduce and DDP buckets, a model-parallel one its
degrees, placement, schedule and sharding.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.lines import cluster_links, link_caveats
from willitscale.collectives.measured_lines import measured_notes
from willitscale.memory.device import reserved_ratio
from willitscale.memory.frameworks import framework_index
from willitscale.step.pipeline import bubble_fraction
from willitscale.units import format_size

__all__ = ["dp_assumptions", "mp_assumptions", "mp_warnings", "pipeline_summary", "work_notes"]

_ZERO = {0: "none (DDP: gradients all-reduced)", 1: "ZeRO-1: optimizer states sharded",
         2: "ZeRO-2: optimizer states and gradients sharded",
         3: "ZeRO-3 / FSDP: weights, gradients, optimizer states sharded"}


def _compute_source(scenario, ctx) -> str:
    if scenario.measured.step_time_one_gpu is not None:
        return ("measured single-GPU step time, less the modelled optimizer (which runs after "
                "the all-reduce): forward + backward split by FLOPs; data loading inside it")
    if ctx.spec is not None:
        return per_op_description(ctx.spec)
    note = ""
    if scenario.efficiency is None and scenario.model is not None and ctx.spec is None:
        note = (f" (no per-op compute curves for {scenario.cluster.gpu.name} {scenario.dtype}: "
                "the flat default applies)") if scenario.calibration is None else ""
    flat = ("; a flat fraction replacing the per-op compute model"
            if scenario.efficiency is not None else "")
    return ctx.efficiency.describe() + flat + note


def per_op_description(spec) -> str:
    """One line: the per-op model and where its curves come from."""
    c = spec.curves
    kernel = spec.kernel if spec.flash else "unfused softmax(Q K^T) V"
    if spec.document_length is not None and spec.document_length < spec.seq_len:
        kernel += (f" within documents of {spec.document_length} tokens (intra-document masking;"
                   " PaLM-style MFU still counts the whole sequence's attention)")
    where = "measured profile (" + ", ".join(c.measured) + ") + built-in curves" if c.measured \
        else "built-in curves (willitscale/compute/curves.toml)"
    borrowed = f"; {c.borrowed}" if c.borrowed else ""
    fp8 = f", FP8 {spec.fp8_recipe} scaling on the linear layers" if spec.dtype == "fp8" else ""
    return (f"per-op model: GEMMs by shape on the {spec.dtype} curve, attention as {kernel}, "
            f"memory-bound ops ({spec.fusion}) at {c.memory.bandwidth / 1e9:.0f} GB/s{fp8}; "
            f"{where}{borrowed} (docs/estimate.md, Compute)")


def _head(scenario, ctx, batch: str) -> list[tuple[str, str]]:
    plan = scenario.plan
    return [
        ("compute efficiency", _compute_source(scenario, ctx)),
        ("compute dtype", f"{scenario.dtype}: peak {ctx.peak / 1e12:g} TFLOP/s dense on "
                          f"{scenario.cluster.gpu.name}"),
        ("recomputation", plan.recompute),
        ("batch", f"micro-batch {plan.micro_batch} x {batch} x dp {plan.dp} = global batch "
                  f"{plan.global_batch} samples of {scenario.seq_len} tokens"),
    ]


def _tail(scenario) -> list[tuple[str, str]]:
    links = cluster_links(scenario)
    items = [("not modelled", note) for note in link_caveats(scenario.cluster, links.backend)]
    items += [("measured collective", note) for note in measured_notes(links.curves, links.backend)]
    items += [("memory", _memory_note(scenario))]
    items += [("workload", note) for note in work_notes(scenario)]
    items += [("default", d) for d in scenario.defaults_applied]
    return items


def dp_assumptions(scenario, ctx, allreduce) -> tuple[tuple[str, str], ...]:
    """The assumptions of a plain data-parallel (DDP) step."""
    ddp = scenario.ddp
    measured = scenario.measured.step_time_one_gpu
    items = _head(scenario, ctx, f"grad-accum {scenario.plan.grad_accum}") + [
        ("gradient all-reduce", f"{allreduce.algorithm}: {allreduce.why}"),
        ("DDP buckets", f"{format_size(ddp.first_bucket, binary=True)} first, then "
                        f"{format_size(ddp.bucket_cap, binary=True)} (PyTorch defaults), "
                        f"{ddp.grad_reduce_dtype} gradients, "
                        + ("overlapped with backward" if ddp.overlap else "after backward (no overlap)")),
        ("overlap slowdown", f"{ddp.overlap_slowdown:g} s of compute per s of hidden communication"),
        ("optimizer", ("fused AdamW, 28" if scenario.optimizer == "adamw-fused" else
                       "torch.optim.AdamW's foreach implementation, 80")
         + " B/param at the GPU's memory bandwidth"
         + (" (taken out of the measured step: it waits for the all-reduce)" if measured else "")),
        ("data loading", "not modelled (give --sample-bytes and --storage-bandwidth)"
         if scenario.data is None else
         f"{format_size(scenario.data.sample_bytes)}/sample, "
         + ("prefetched during the previous step" if scenario.data.overlapped else "not overlapped")),
    ]
    return tuple(items + _tail(scenario))


def mp_assumptions(scenario, ctx) -> tuple[tuple[str, str], ...]:
    """The assumptions of a model-parallel step (any of tp, pp, cp, ep > 1 or ZeRO)."""
    plan, opts = scenario.plan, scenario.options
    if plan.sequence_parallel:
        tensor = "sequence parallel (reduce-scatter + all-gather), "
    else:
        tensor = "all-reduces, "
    tensor += ("overlapped with the GEMMs" if opts.tp_comm_overlap else
               "on the critical path in forward, behind the weight-gradient GEMMs in backward")
    items = _head(scenario, ctx, f"{plan.grad_accum} micro-batches") + [
        ("parallelism", f"tp {plan.tp} x pp {plan.pp} x cp {plan.cp} x dp {plan.dp} "
                        f"(ep {plan.ep} inside dp) = {plan.gpus} GPUs"),
        ("placement", f"ranks {opts.order_text}, innermost first; node = rank // "
                      f"{ctx.links.gpus_per_node}"),
        ("pipeline schedule", plan.pp_schedule + (f", {plan.virtual_stages} virtual stages"
                                                  if plan.pp_schedule == "interleaved" else "")),
        ("tensor parallel", tensor),
        ("sharding", _ZERO[plan.zero] + (", within each node (hybrid)"
                                         if plan.shard_scope == "node" else "")),
        ("attention", "FlashAttention" if opts.flash_attention else "standard (s x s scores kept)"),
        ("links", ctx.links.describe()),
        ("gradient reduction", f"{scenario.ddp.grad_reduce_dtype}, buckets of "
                               f"{scenario.ddp.bucket_cap / 2**20:g} MiB during the last backward"),
        ("not modelled", "contention between different kinds of traffic on the same links"
         if scenario.network is None else
         "contention between kinds of traffic on the same NIC (the flow backend adds what the "
         "fabric's switches add: docs/fabric.md)"),
    ]
    return tuple(items + _tail(scenario))


def _memory_note(scenario) -> str:
    """How memory is judged: the framework, what is counted, the verdict's rule."""
    gpu = scenario.cluster.gpu
    plan = scenario.plan
    framework = plan.resolved_framework
    how = "given" if plan.framework else "implied by the plan (docs/memory.md)"
    limit = (f"{format_size(gpu.memory, binary=True)}" if scenario.memory_fraction >= 1 else
             f"{format_size(scenario.memory_fraction * gpu.memory, binary=True)} "
             f"(--memory-fraction {scenario.memory_fraction:g} of {format_size(gpu.memory, binary=True)})")
    text = (f"framework {framework} ({how}); PyTorch's allocated peak plus the CUDA context "
            f"({format_size(scenario.cuda_context, binary=True)}, --cuda-context) and NCCL's "
            f"buffers against {limit}; 'tight' when that fits but the caching allocator's typical "
            f"reserve ({reserved_ratio(framework_index(framework), plan.zero):g}x the peak, "
            f"docs/memory.md) does not")
    if framework == "ddp":
        text += ("; DDP's buckets " + ("are the gradients (--gradient-as-bucket-view)"
                                       if scenario.ddp.gradient_as_bucket_view else
                                       "hold a copy of the gradients (PyTorch's default "
                                       "gradient_as_bucket_view=False), counted in buffers"))
    return text


def work_notes(scenario) -> tuple[str, ...]:
    """How the FLOPs were counted.

    From a transformer shape the FLOPs are exact (every matmul, :mod:`willitscale.workload.flops`);
    from a bare parameter count (``--params``) they are the standard approximations: ``2P``
    forward FLOPs per token, ``6P`` for forward + backward (Kaplan et al. 2020), one more ``2P``
    with full recomputation (``8P``: the handbook's ``4 x 2 x P``). Selective recomputation
    reruns only the attention core, whose FLOPs need the shape: in ``--params`` mode it adds
    nothing, and the estimate says so.
    """
    plan = scenario.plan
    if scenario.model is None:
        notes = ("FLOPs from the parameter count: 2P forward, 4P backward per token "
                 "(6PD, Kaplan et al. 2020)"
                 + ("; full recomputation adds 2P (8PD)" if plan.recompute == "full" else ""),)
        if plan.recompute == "selective":
            notes += ("selective recomputation reruns the attention core, whose FLOPs need the "
                      "model shape: counted as 0 in --params mode",)
        return notes
    executed = ("with FlashAttention the causal kernel skips the masked blocks, so the time counts "
                "half the attention scores" if scenario.options.flash_attention else
                "standard attention computes every score, masked or not")
    return (f"FLOPs counted matmul by matmul for {scenario.model.name} at {scenario.seq_len} tokens: "
            "MFU counts the attention scores in full, as Megatron-LM and PaLM do; " + executed,)


def pipeline_summary(scenario, result, breakdown) -> dict:
    """Schedule, stages, micro-batches, layers per stage and the bubble, for the JSON report."""
    plan = scenario.plan
    v = plan.virtual_stages if plan.pp_schedule == "interleaved" else 1
    layers = np.asarray(result.detail.layers)[0]
    return {
        "schedule": plan.pp_schedule if plan.pp > 1 else "none (one stage)",
        "stages": plan.pp, "micro_batches": plan.grad_accum, "virtual_stages": v,
        "layers_per_stage": [float(layers[0]), float(layers[1]), float(layers[2])] if plan.pp > 2
        else [float(layers[0])] * plan.pp,
        "bubble_s": breakdown.bubble,
        "bubble_fraction_of_ideal": float(bubble_fraction(plan.pp, plan.grad_accum, v)),
        "bubble_share_of_step": breakdown.bubble / breakdown.total,
        "critical_stage": ("first", "middle", "last")[int(result.critical[0])] if plan.pp > 1 else "only",
        "formula": "pipeline = m x max_k T_k + (sum_k T_k - max_k T_k) / v; equal stages: "
                   "bubble / ideal = (p - 1) / (v m)",
    }


def mp_warnings(scenario, ctx, rows) -> tuple[str, ...]:
    """Plan choices worth a second look (TP across nodes, a pipeline that never fills, ...)."""
    plan = scenario.plan
    out = []
    g = ctx.links.gpus_per_node
    if plan.tp > g:
        out.append(f"tp = {plan.tp} is wider than a node ({g} GPUs): the tensor-parallel "
                   f"all-reduces of every layer cross the inter-node network")
    if plan.pp > 1 and plan.grad_accum < plan.pp:
        out.append(f"{plan.grad_accum} micro-batch(es) for {plan.pp} stages: the pipeline never "
                   "fills (bubble >= (p-1)/m of the ideal time)")
    if plan.zero >= 2 and plan.pp > 1:
        out.append("ZeRO-2/3 with pipeline parallelism: DeepSpeed refuses it; FSDP2 (torchtitan) "
                   "runs it, gathering and reducing every micro-batch as modelled")
    for row in rows:
        if row["parallelism"] in ("tp", "cp", "ep") and row["leaves_node"]:
            out.append(f"the {row['group']} group leaves the node: {row['where']}")
    return tuple(dict.fromkeys(out))

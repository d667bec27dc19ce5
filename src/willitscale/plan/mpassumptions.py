"""The assumptions, warnings and pipeline summary of a model-parallel estimate."""

from __future__ import annotations

import numpy as np

__all__ = ["mp_assumptions", "mp_warnings", "pipeline_summary"]


def pipeline_summary(scenario, result, breakdown) -> dict:
    from willitscale.plan.pipeline import bubble_fraction

    plan = scenario.plan
    v = plan.virtual_stages if plan.pp_schedule == "interleaved" else 1
    layers = np.asarray(result.detail["layers"])[0]
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


def mp_assumptions(scenario, ctx) -> tuple[tuple[str, str], ...]:
    from willitscale.plan.dpreport import compute_source
    from willitscale.plan.work import work_notes

    plan, opts = scenario.plan, scenario.options
    zero = {0: "none (DDP: gradients all-reduced)", 1: "ZeRO-1: optimizer states sharded",
            2: "ZeRO-2: optimizer states and gradients sharded",
            3: "ZeRO-3 / FSDP: weights, gradients, optimizer states sharded"}[plan.zero]
    items = [
        ("compute efficiency", compute_source(scenario, ctx)),
        ("compute dtype", f"{scenario.dtype}: peak {ctx.peak / 1e12:g} TFLOP/s dense on "
                          f"{scenario.cluster.gpu.name}"),
        ("recomputation", plan.recompute),
        ("batch", f"micro-batch {plan.micro_batch} x {plan.grad_accum} micro-batches x dp "
                  f"{plan.dp} = global batch {plan.global_batch} samples of {scenario.seq_len} tokens"),
        ("parallelism", f"tp {plan.tp} x pp {plan.pp} x cp {plan.cp} x dp {plan.dp} "
                        f"(ep {plan.ep} inside dp) = {plan.gpus} GPUs"),
        ("placement", f"ranks {opts.order_text}, innermost first; node = rank // "
                      f"{ctx.links.gpus_per_node}"),
        ("pipeline schedule", plan.pp_schedule + (f", {plan.virtual_stages} virtual stages"
                                                  if plan.pp_schedule == "interleaved" else "")),
        ("tensor parallel", ("sequence parallel (reduce-scatter + all-gather), " if plan.sequence_parallel
                             else "all-reduces, ") + ("overlapped with the GEMMs" if opts.tp_comm_overlap
                                                      else "on the critical path in forward, "
                                                      "behind the weight-gradient GEMMs in backward")),
        ("sharding", zero + (", within each node (hybrid)" if plan.shard_scope == "node" else "")),
        ("attention", "FlashAttention" if opts.flash_attention else "standard (s x s scores kept)"),
        ("links", ctx.links.describe()),
        ("gradient reduction", f"{scenario.ddp.grad_reduce_dtype}, buckets of "
                               f"{scenario.ddp.bucket_cap / 2**20:g} MiB during the last backward"),
        ("not modelled", "CUDA context, NCCL workspaces and fragmentation memory; contention "
                         "between different kinds of traffic on the same links"),
    ]
    from willitscale.plan.dpreport import memory_note
    from willitscale.plan.links import link_caveats

    items += [("not modelled", note) for note in link_caveats(scenario.cluster)]
    items += [("memory", memory_note(scenario))]
    items += [("workload", note) for note in work_notes(scenario)]
    items += [("default", d) for d in scenario.defaults_applied]
    return tuple(items)

"""The scenario flags shared by ``estimate``, ``scale`` and ``requirements``.

Every flag maps to one setting of :mod:`willitscale.scenario.settings`; a scenario TOML file (given
as the positional argument or ``--scenario``) supplies defaults that flags override.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_scenario_flags", "settings_from_args"]

# flag dest -> setting name (when they differ)
_DEST_TO_SETTING = {"step_time_one_gpu": "step_time_one_gpu"}


def add_scenario_flags(parser: argparse.ArgumentParser, *, nodes_help: str | None = None,
                       plan_flags: bool = True) -> None:
    """Add the model, cluster, training, DDP, data and measurement flags to ``parser``.

    ``plan_flags=False`` leaves out what a plan decides (degrees, ZeRO, schedule, micro-batch,
    gradient accumulation, recomputation): the planner searches those.
    """
    parser.add_argument("scenario_file", nargs="?", metavar="SCENARIO.toml",
                        help="a scenario file (see examples/); flags override its values")
    parser.add_argument("--scenario", dest="scenario_flag", metavar="FILE",
                        help="a scenario file (same as the positional argument)")
    m = parser.add_argument_group("model (one of)")
    m.add_argument("--model", help="catalog name (gpt2-large, llama3-8b, ...) or a HF config.json")
    m.add_argument("--params", help="parameter count only, back-of-envelope: 2e9, 7B")
    c = parser.add_argument_group("cluster")
    c.add_argument("--preset", help="a catalog cluster or node preset")
    c.add_argument("--gpu", help="catalog GPU name, e.g. a100-80gb, h100-sxm")
    c.add_argument("--nodes", help=nodes_help or "number of nodes")
    c.add_argument("--gpus-per-node", help="GPUs per node")
    c.add_argument("--intra-node", help="GPU link inside a node: catalog name or bandwidth per GPU")
    c.add_argument("--inter-node", help="per node: catalog NIC name, 200Gbps, or 8x400Gbps")
    t = parser.add_argument_group("training")
    t.add_argument("--seq-len", help="tokens per sample")
    t.add_argument("--global-batch", help="samples per optimizer step over all GPUs (strong scaling)")
    if plan_flags:
        t.add_argument("--micro-batch", help="samples per GPU per forward/backward")
        t.add_argument("--grad-accum", help="micro-steps per optimizer step")
        t.add_argument("--recompute", metavar="MODE",
                       help="activation recomputation: none, selective (attention core), full, "
                            "modules:core_attn,mlp,layernorm (Megatron-Core), layers:N (N layers "
                            "per stage), every:K (every K-th layer); not given: the estimate "
                            "fits it (docs/memory.md)")
    t.add_argument("--dtype", help="compute dtype, selects the GPU peak (default bf16)")
    eff = t.add_mutually_exclusive_group()
    eff.add_argument("--hfu", help="fraction of dense peak on executed FLOPs, recomputation included")
    eff.add_argument("--mfu", help="fraction of dense peak on model FLOPs (recomputation not counted)")
    t.add_argument("--memory-convention", help="training-state bytes per parameter (a low-level "
                   "override of the framework's: zero-16, handbook-18, fp32-16, fp16-no-master-12)")
    t.add_argument("--cuda-context", help="memory outside PyTorch's allocator per GPU (default "
                   "0.51GiB, today's PyTorch; 2022 stacks measured ~1.5GiB)")
    t.add_argument("--distribute-saved-activations", action="store_const", const="true",
                   help="full recomputation's saved layer inputs split over the TP ranks "
                        "(Megatron-Core distribute_saved_activations)")
    t.add_argument("--optimizer", choices=("adamw-fused", "adamw-foreach"),
                   help="optimizer step's memory traffic: fused AdamW, 28 B/param (default), or "
                        "torch.optim.AdamW's default foreach implementation, 80 B/param")
    if plan_flags:  # the planner has its own --memory-fraction (same setting, same default)
        t.add_argument("--memory-fraction", help="share of HBM a plan may fill (default 1: the CUDA "
                       "context, NCCL buffers and the allocator's reserve are counted)")
    _execution_flags(parser)
    if plan_flags:
        _parallel_flags(parser)
    _ddp_and_measurement_flags(parser)


def _execution_flags(parser) -> None:
    x = parser.add_argument_group("model-parallel execution (docs/parallelism.md)")
    x.add_argument("--tp-comm-overlap", action="store_const", const="true",
                   help="overlap TP collectives with the GEMMs (Megatron-Core userbuffers)")
    x.add_argument("--rank-order", help="placement of ranks, innermost first "
                                        "(default tp-cp-ep-dp-pp)")
    x.add_argument("--no-flash-attention", dest="flash_attention", action="store_const",
                   const="false", help="standard attention (keeps the s x s scores)")
    x.add_argument("--collectives", choices=("nccl", "gloo", "alpha-beta"),
                   help="how collectives are costed: nccl (default: NCCL's algorithm x protocol "
                        "pick and achieved time), gloo (PyTorch's Gloo rings over TCP) or "
                        "alpha-beta (textbook ring / double binary tree on the links)")
    k = parser.add_argument_group("kernels (docs/estimate.md, Compute)")
    k.add_argument("--attention-kernel", choices=("auto", "fa2", "fa3", "fa4", "cudnn", "ck"),
                   help="fused attention kernel (default auto: the GPU's own, FA2 on A100, FA3 "
                        "on H100/H200, FA4 on B200)")
    k.add_argument("--fusion", choices=("fused", "eager"),
                   help="element-wise kernels: fused (Megatron/TE/torch.compile, default) or "
                        "eager PyTorch (one kernel per tensor op)")
    k.add_argument("--fp8-recipe", choices=("delayed", "tensorwise", "rowwise"),
                   help="with --dtype fp8: scaling recipe (default delayed, Transformer Engine's)")
    k.add_argument("--document-length", metavar="TOKENS",
                   help="intra-document masking: samples pack documents of TOKENS tokens and "
                        "attention stays within each (default: one document per sample)")


def _parallel_flags(parser) -> None:
    p = parser.add_argument_group("parallelism (docs/parallelism.md)")
    what = {"dp": "data-parallel replicas (default: what the others leave)",
            "tp": "tensor-parallel degree (Megatron; keep within a node)",
            "pp": "pipeline stages", "cp": "context-parallel degree (ring attention)",
            "ep": "expert-parallel degree (MoE; divides dp)"}
    for name, text in what.items():
        p.add_argument(f"--{name}", help=text)
    p.add_argument("--zero", choices=("0", "1", "2", "3"), help="ZeRO stage: 1 optimizer states, "
                   "2 + gradients, 3 + weights (FSDP)")
    p.add_argument("--framework", choices=("megatron", "fsdp", "deepspeed", "ddp"),
                   help="what runs the plan, which decides its memory (docs/memory.md; default: "
                        "a Megatron-LM/NeMo/torchtitan job file's framework, else what the plan "
                        "implies: tp/pp -> megatron, --zero 3 -> fsdp, ...)")
    p.add_argument("--reduce-bucket-size", help="DeepSpeed reduce_bucket_size, elements "
                                                "(default 5e8)")
    p.add_argument("--overlap-comm", choices=("true", "false"),
                   help="DeepSpeed overlap_comm (default: true for ZeRO-3 only)")
    p.add_argument("--fsdp", choices=("full", "hybrid"), help="FSDP: full = ZeRO-3 over all "
                   "data-parallel ranks; hybrid = shard within each node, replicate across")
    p.add_argument("--pp-schedule", choices=("gpipe", "1f1b", "interleaved"),
                   help="pipeline schedule (default 1f1b)")
    p.add_argument("--virtual-stages", help="model chunks per stage with --pp-schedule "
                                            "interleaved (default 2)")
    p.add_argument("--sequence-parallel", nargs="?", const="true", choices=("true", "false"),
                   help="Megatron sequence parallelism (needs --tp > 1); `false` states it off "
                        "(not given: the estimate fits it, docs/memory.md)")


def _ddp_and_measurement_flags(parser) -> None:
    d = parser.add_argument_group("DDP gradient synchronisation")
    d.add_argument("--no-overlap", dest="overlap", action="store_const", const="false",
                   help="all-reduce after backward instead of during it")
    d.add_argument("--bucket-cap", help="DDP bucket cap (default 25MiB, PyTorch's bucket_cap_mb=25)")
    d.add_argument("--first-bucket", help="first bucket cap (default 1MiB)")
    d.add_argument("--grad-reduce-dtype", choices=("fp32", "bf16", "fp16"),
                   help="dtype of the all-reduced gradients (default fp32, as PyTorch AMP)")
    d.add_argument("--overlap-slowdown", help="extra compute seconds per second of overlapped "
                                              "communication (default 0.19)")
    d.add_argument("--gradient-as-bucket-view", action="store_const", const="true",
                   help="DDP(gradient_as_bucket_view=True): gradients live in the buckets; the "
                        "default (PyTorch's) keeps one more copy of the gradients in them")
    s = parser.add_argument_group("data loading (step 0)")
    s.add_argument("--sample-bytes", help="bytes read from storage per sample")
    s.add_argument("--storage-bandwidth", help="storage bandwidth into each node, e.g. 10GB/s")
    s.add_argument("--data-not-overlapped", dest="data_overlapped", action="store_const",
                   const="false", help="load each step's data before its compute (no prefetch)")
    x = parser.add_argument_group("measurements (calibration)")
    x.add_argument("--compute-time-per-step", "--step-time-one-gpu", dest="step_time_one_gpu",
                   help="measured time of one step on one GPU alone, same per-GPU batch (e.g. 0.2249s)")
    x.add_argument("--allreduce-time", help="measured time of one gradient all-reduce, e.g. 0.12s")
    x.add_argument("--allreduce-size", help="bytes of that measured all-reduce (default: the gradients)")
    x.add_argument("--calibration", help="a calibration file (efficiencies fitted to measurements)")
    n = parser.add_argument_group("network model (docs/fabric.md)")
    n.add_argument("--network", choices=("analytic", "flow"),
                   help="analytic alpha-beta model (default) or the flow-level fabric simulator")
    n.add_argument("--topology", help="with --network flow: rail-optimized (default), rail-only, fat-tree")
    n.add_argument("--oversubscription", help="with --network flow: leaf down:up ratio, e.g. 7")
    n.add_argument("--routing", help="with --network flow: ecmp (default), spray, adaptive, rail")
    n.add_argument("--routing-seed", help="with --network flow: the ECMP hash seed (default 0)")


def settings_from_args(args: argparse.Namespace, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The settings the flags give (file values first, flags on top), parsed to SI."""
    from willitscale.errors import ConfigError
    from willitscale.scenario.settings import (
        SETTINGS,
        load_settings,
        merge_settings,
        parse_setting,
    )

    files = [f for f in (args.scenario_file, args.scenario_flag) if f]
    if len(files) > 1:
        raise ConfigError("give the scenario file once (positional or --scenario), not both")
    base = load_settings(files[0]) if files else {}
    flags: dict[str, Any] = {}
    for name in SETTINGS:
        if name in skip:
            continue
        value = getattr(args, _DEST_TO_SETTING.get(name, name), None)
        if value is not None:
            flags[name] = parse_setting(name, value, field="--" + name.replace("_", "-"))
    return merge_settings(base, flags)

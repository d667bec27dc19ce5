"""The scenario file reference (``docs/scenario.md``), generated from the settings registry.

Every key of :data:`~willitscale.scenario.settings.SETTINGS` has an entry in :data:`SETTING_DOCS`
(its default and meaning); the table it lives in, its TOML spelling and its type come from the
registry itself, so the page cannot drift from what the loader accepts. A unit test checks that
every setting is documented and that ``docs/scenario.md`` is this module's output; regenerate it
with ``python scripts/scenario_reference.py > docs/scenario.md``.
"""

from __future__ import annotations

from willitscale.hardware.model import DTYPES
from willitscale.memory.frameworks import FRAMEWORKS
from willitscale.scenario import settings as registry
from willitscale.scenario.plan import PP_SCHEDULES
from willitscale.topology import TOPOLOGY_KINDS
from willitscale.topology.routing import ROUTINGS
from willitscale.units import parse_bandwidth, parse_size
from willitscale.workload.recompute import MODE_HELP

__all__ = ["SETTING_DOCS", "setting_type", "reference_markdown"]

#: setting -> (default, meaning). A default of "-" means: not set unless given.
SETTING_DOCS: dict[str, tuple[str, str]] = {
    "name": ("-", "a title for the scenario, shown in outputs"),
    "model": ("-", "a catalog model (`willitscale model list`) or a Hugging Face config.json path "
                   "(`config = \"path\"` in `[model]` reads as the same)"),
    "params": ("-", "a parameter count (2e9, 7B) when no model shape is given"),
    "preset": ("-", "a catalog node (dgx-h100, p5, ...): GPU, GPUs per node, links"),
    "gpu": ("-", "a catalog GPU (`willitscale hardware list`); a preset or a GPU is required"),
    "nodes": ("1", "nodes in the cluster"),
    "gpus_per_node": ("the preset's or GPU's reference server", "GPUs per node"),
    "intra_node": ("the GPU's standard link", "link inside a node: a catalog link or a rate"),
    "inter_node": ("the GPU's reference NICs", "NICs per node: a catalog link, a rate, or "
                                               "COUNTxRATE such as 8x400Gbps"),
    "seq_len": ("the model's training length", "tokens per sample"),
    "micro_batch": ("1 (or from global_batch)", "samples per GPU per forward/backward"),
    "global_batch": ("micro_batch x grad_accum x dp", "samples per optimizer step"),
    "grad_accum": ("1 (or from global_batch)", "micro-batches per optimizer step"),
    "recompute": ("none", "activation recomputation: " + MODE_HELP),
    "dtype": ("bf16", "compute dtype: " + ", ".join(DTYPES)),
    "hfu": ("the compute model's", "hardware FLOPs utilisation to assume (give hfu or mfu)"),
    "mfu": ("the compute model's", "model FLOPs utilisation to assume (give hfu or mfu)"),
    "memory_convention": ("the estimate's", "how model state bytes are counted (docs/estimate.md)"),
    "memory_fraction": ("0.9", "share of GPU memory a plan may fill"),
    "cuda_context": ("0.51GiB", "memory the CUDA context takes on each GPU (docs/memory.md)"),
    "distribute_saved_activations": ("false", "Megatron's distribute-saved-activations: the "
                                              "checkpointed layer inputs split over tp"),
    "framework": ("the job file's (Megatron-LM, NeMo: megatron; torchtitan: fsdp or ddp), else "
                  "implied by the plan", "whose memory layout to count: "
                                         + ", ".join(FRAMEWORKS) + " (docs/memory.md)"),
    "reduce_bucket_size": ("5e8", "DeepSpeed zero_optimization.reduce_bucket_size, elements"),
    "overlap_comm": ("true with ZeRO-3, else false", "DeepSpeed zero_optimization.overlap_comm "
                                                      "(a second bucket buffer)"),
    "optimizer": ("adamw-fused", "optimizer whose step is timed and whose state is counted"),
    "attention_kernel": ("auto", "fused attention kernel: auto (the GPU's own: fa2 on A100, fa3 "
                                 "on H100/H200, fa4 on B200), fa2, fa3, fa4, cudnn, ck "
                                 "(docs/estimate.md)"),
    "fusion": ("fused", "element-wise kernels: fused (Megatron/TE/torch.compile) or eager "
                        "(PyTorch eager, one kernel per tensor op)"),
    "fp8_recipe": ("delayed", "with dtype fp8: FP8 scaling recipe: delayed, tensorwise, rowwise"),
    "document_length": ("- (one document per sample)", "intra-document masking: each sample "
                        "packs documents of this many tokens and attends within them (a fused "
                        "kernel skips the blocks across documents); MFU still counts the whole "
                        "sequence's causal attention in full (docs/estimate.md)"),
    "dp": ("what tp x pp x cp leave", "data-parallel replicas"),
    "tp": ("1", "tensor-parallel degree"),
    "pp": ("1", "pipeline stages"),
    "cp": ("1", "context-parallel degree"),
    "ep": ("1", "expert-parallel degree (carved out of dp)"),
    "zero": ("0", "ZeRO stage: 0 plain DDP, 1 optimizer, 2 + gradients, 3 + parameters"),
    "pp_schedule": ("1f1b", "pipeline schedule: " + ", ".join(PP_SCHEDULES)),
    "virtual_stages": ("2 with interleaved, else 1", "model chunks per pipeline stage"),
    "sequence_parallel": ("false", "Megatron sequence parallelism with tp"),
    "fsdp": ("-", "full (ZeRO-3 over dp) or hybrid (ZeRO-3 within each node)"),
    "shard_scope": ("dp", "ZeRO shards over the whole data-parallel group (dp) or a node"),
    "rank_order": ("tp-cp-ep-dp-pp", "placement of the parallel axes, innermost first"),
    "tp_comm_overlap": ("false", "TP collectives overlapped with the GEMMs they feed"),
    "flash_attention": ("true", "a fused attention kernel (no s x s scores kept)"),
    "collectives": ("nccl", "how collectives are costed: nccl (NCCL's algorithm x protocol pick and "
                    "achieved time), gloo (Gloo's rings) or alpha-beta (textbook forms)"),
    "allow_tp_across_nodes": ("true", "whether the planner may place tp across nodes"),
    "overlap": ("true", "DDP all-reduces buckets during backward"),
    "bucket_cap": ("25MiB", "DDP bucket size (bucket_cap_mb)"),
    "first_bucket": ("1MiB", "DDP's first bucket"),
    "grad_reduce_dtype": ("fp32", "dtype gradients travel in"),
    "overlap_slowdown": ("0.19", "extra compute seconds per second of overlapped communication"),
    "gradient_as_bucket_view": ("false", "DDP gradient_as_bucket_view (saves a gradient copy)"),
    "sample_bytes": ("-", "bytes read per sample (with storage_bandwidth)"),
    "storage_bandwidth": ("-", "storage read bandwidth per node (with sample_bytes)"),
    "data_overlapped": ("true", "data loading overlaps compute"),
    "step_time_one_gpu": ("-", "a measured step time on one GPU, which sets the compute time"),
    "allreduce_time": ("-", "a measured all-reduce time (with allreduce_size)"),
    "allreduce_size": ("-", "the size of that measured all-reduce"),
    "calibration": ("-", "a calibration file (`willitscale calibrate`); relative to the "
                         "scenario file"),
    "network": ("analytic", "network model: analytic (alpha-beta) or flow (the simulator)"),
    "topology": ("rail-optimized", "fabric for network = flow: " + ", ".join(TOPOLOGY_KINDS)),
    "oversubscription": ("1", "leaf downlink:uplink ratio for network = flow"),
    "routing": ("ecmp", "routing for network = flow: " + ", ".join(ROUTINGS)),
    "routing_seed": ("0", "seed of ECMP's hash for network = flow"),
}

_TYPES = {
    registry._str: "string", registry._int: "integer", registry._float: "number",
    registry._fraction: "fraction in (0, 1]", registry._bool: "true or false",
    registry._link: "link name or rate (\"200Gbps\")", registry._count: "count (2e9, 7B)",
    registry._size_with_unit: "size with a unit (\"25MiB\")",
    registry._positive_size: "size with a unit (\"512MB\")",
    registry._positive_time: "time (\"1.5s\", \"200ms\")",
    parse_size: "size (\"4MB\", bytes)", parse_bandwidth: "bandwidth (\"2GB/s\", \"10Gbps\")",
}


def setting_type(name: str) -> str:
    """The type of a setting in words, from its parser."""
    parser = registry.SETTINGS[name][1]
    return _TYPES.get(parser, "value")


def reference_markdown() -> str:
    """The reference page: one table per TOML table, every key."""
    tables: dict[str, list[str]] = {}
    for name, (table, _) in registry.SETTINGS.items():
        tables.setdefault(table, []).append(name)
    lines = ["# Scenario files: every key", "",
             "<!-- generated by scripts/scenario_reference.py from "
             "willitscale.scenario.settings.SETTINGS; do not edit by hand -->", "",
             "A scenario file is TOML (`willitscale estimate SCENARIO.toml`, also `plan`, `scale`,",
             "`requirements`, `report`). Flags override the file key by key (`--micro-batch 2` for",
             "`micro_batch`). Values with units take SI or binary prefixes (`25MiB`, `200Gbps`).",
             "Unknown keys are an error naming the closest key. Examples: `examples/*.toml`.", ""]
    for table, names in tables.items():
        lines += [f"## {'[' + table + ']' if table else 'top level'}", "",
                  "| key | type | default | meaning |", "|---|---|---|---|"]
        for name in names:
            key = registry._TOML_KEY.get((table, name), name)
            default, meaning = SETTING_DOCS[name]
            lines.append(f"| `{key}` | {setting_type(name)} | {default} | {meaning} |")
        if table == "model":
            lines.append(f"| `{registry._MODEL_CONFIG_KEY}` | path | - | a Hugging Face config.json, "
                         "relative to the scenario file |")
        lines.append("")
    return "\n".join(lines)

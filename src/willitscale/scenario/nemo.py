"""NeMo 1.x Hydra YAML (``megatron_gpt_config.yaml`` and the configs derived from it), both ways.

The keys are those of NeMo's ``examples/nlp/language_modeling/conf/megatron_gpt_config.yaml``
(NVIDIA/NeMo at commit 382c533a64910913a1f0ac369d4c54dcb0e54dbd, and the 1.x releases after it,
which added ``virtual_pipeline_model_parallel_size``, ``sequence_parallel``,
``context_parallel_size``, ``expert_model_parallel_size``, ``num_query_groups`` and
``activations_checkpoint_granularity``): ``trainer.devices``, ``trainer.num_nodes``,
``trainer.precision`` (16, bf16, 32, and Lightning 2's ``16-mixed``, ``bf16-mixed``,
``32-true``); ``model.`` ``micro_batch_size``, ``global_batch_size``,
``tensor_model_parallel_size``, ``pipeline_model_parallel_size``,
``virtual_pipeline_model_parallel_size`` (model chunks per pipeline rank: the interleaved
schedule), ``context_parallel_size``, ``expert_model_parallel_size``, ``sequence_parallel``,
``encoder_seq_length``, the shape (``num_layers``, ``hidden_size``, ``ffn_hidden_size``,
``num_attention_heads``, ``num_query_groups``, ``max_position_embeddings``),
``activations_checkpoint_granularity`` (selective, full), ``activations_checkpoint_method``
(uniform: every layer; block: ``activations_checkpoint_num_layers`` layers per stage) and
``model.optim.name`` (``distributed_fused_adam`` and ``mcore_distributed_optim`` shard the
optimizer state over data parallelism: ZeRO-1 here).

``trainer.devices`` and ``trainer.num_nodes`` are read as the cluster's GPUs per node and nodes
(flags override them); the GPU and the network come from flags. References between keys
(``max_position_embeddings: ${.encoder_seq_length}``) are followed
(:mod:`willitscale.scenario.yaml_file`). Sequence parallelism is off at tensor parallel 1, as
Megatron-Core turns it off. NeMo's FSDP (``model.fsdp``) is not read: such a file is refused.
NeMo 1.x trains these models with Megatron-Core, so memory is counted as Megatron's layout
(``framework`` megatron); ``--framework`` overrides it.

Written files hold these keys only: merge them into a complete NeMo config (Hydra overrides of
``megatron_gpt_config.yaml`` work the same way: ``model.tensor_model_parallel_size=8``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from willitscale.errors import ConfigError
from willitscale.scenario.megatron import FRAMEWORK, check_plan, recompute_fields, shape_settings
from willitscale.scenario.yaml_file import integer_at, value_at

__all__ = ["is_nemo", "nemo_settings", "nemo_yaml", "PRECISIONS", "DISTRIBUTED_OPTIMIZERS"]

#: trainer.precision -> dtype (PyTorch Lightning 1.x and 2.x spellings)
PRECISIONS = {16: "fp16", "16": "fp16", "16-mixed": "fp16", "bf16": "bf16", "bf16-mixed": "bf16",
              32: "fp32", "32": "fp32", "32-true": "fp32"}
#: model.optim.name values that are Megatron's distributed optimizer (NeMo 1.x)
DISTRIBUTED_OPTIMIZERS = ("distributed_fused_adam", "mcore_distributed_optim")
_INT = {"model.tensor_model_parallel_size": "tp", "model.pipeline_model_parallel_size": "pp",
        "model.context_parallel_size": "cp", "model.expert_model_parallel_size": "ep",
        "model.micro_batch_size": "micro_batch", "model.global_batch_size": "global_batch",
        "model.encoder_seq_length": "seq_len", "trainer.devices": "gpus_per_node",
        "trainer.num_nodes": "nodes"}
_SHAPE = {"model.num_layers": "layers", "model.hidden_size": "hidden",
          "model.num_attention_heads": "heads", "model.ffn_hidden_size": "ffn_hidden",
          "model.num_query_groups": "kv_heads", "model.max_position_embeddings": "max_positions"}


def is_nemo(data: Mapping[str, Any]) -> bool:
    """A NeMo config has a ``model`` table holding its parallel or batch keys."""
    model = data.get("model")
    return isinstance(model, Mapping) and any(
        key in model for key in ("tensor_model_parallel_size", "micro_batch_size",
                                 "pipeline_model_parallel_size"))


def _flag(data: Mapping, key: str, file: str) -> bool:
    value = value_at(data, key, file)
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{file}: {key}", value, "true or false")
    return bool(value)


def _choice(data: Mapping, key: str, file: str, allowed: tuple) -> Any:
    value = value_at(data, key, file)
    if value not in allowed:
        raise ConfigError(f"{file}: {key}", value, ", ".join(str(a) for a in allowed))
    return value


def nemo_settings(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    """Scenario settings (see :mod:`willitscale.scenario.settings`) of a NeMo 1.x config."""
    if _flag(data, "model.fsdp", file):
        raise ConfigError(f"{file}: model.fsdp", True, "false: NeMo's FSDP is not read (use "
                          "--fsdp with the flags)")
    out: dict[str, Any] = {"framework": FRAMEWORK}
    for key, name in _INT.items():
        value = integer_at(data, key, file)
        if value is not None and value < 1:
            raise ConfigError(f"{file}: {key}", value, "an integer >= 1")
        if value is not None:
            out[name] = value
    out["sequence_parallel"] = _flag(data, "model.sequence_parallel", file) and out.get("tp", 1) > 1
    precision = value_at(data, "trainer.precision", file)
    if precision is not None:
        out["dtype"] = PRECISIONS[_choice(data, "trainer.precision", file, tuple(PRECISIONS))]
    optimizer = value_at(data, "model.optim.name", file)
    if optimizer is not None and not isinstance(optimizer, str):
        raise ConfigError(f"{file}: model.optim.name", optimizer, "an optimizer name")
    out["zero"] = 1 if optimizer in DISTRIBUTED_OPTIMIZERS else 0
    out["recompute"] = _recompute(data, file)
    virtual = integer_at(data, "model.virtual_pipeline_model_parallel_size", file, 1)
    if virtual > 1:
        if out.get("pp", 1) < 2:
            raise ConfigError(f"{file}: model.virtual_pipeline_model_parallel_size", virtual,
                              "null or 1 without pipeline parallelism (model chunks per stage)")
        out["pp_schedule"], out["virtual_stages"] = "interleaved", virtual
    shape = {name: integer_at(data, key, file) for key, name in _SHAPE.items()}
    out.update(shape_settings(shape, file))
    return out


def _recompute(data: Mapping, file: str) -> str:
    """The recomputation mode of NeMo's activations_checkpoint_* keys."""
    granularity = _choice(data, "model.activations_checkpoint_granularity", file,
                          (None, "selective", "full"))
    if granularity != "full":
        return granularity or "none"
    method = _choice(data, "model.activations_checkpoint_method", file, (None, "uniform", "block"))
    if method != "block":
        return "full"
    layers = integer_at(data, "model.activations_checkpoint_num_layers", file)
    if layers is None or layers < 1:
        raise ConfigError(f"{file}: model.activations_checkpoint_num_layers", layers,
                          "the layers per pipeline stage recomputed (>= 1) with method block")
    return f"layers:{layers}"


def nemo_yaml(plan, *, model, seq_len: int, dtype: str, nodes: int, gpus_per_node: int) -> str:
    """The NeMo 1.x config keys of ``plan`` for ``model`` (a catalog Transformer) on ``nodes``
    nodes of ``gpus_per_node`` GPUs; ConfigError for what NeMo cannot run."""
    import yaml

    check_plan(plan, dtype)
    granularity, method, layers = recompute_fields(plan.recompute)
    precision = {"bf16": "bf16", "fp16": 16, "fp32": 32}[dtype]
    trainer = {"devices": gpus_per_node, "num_nodes": nodes, "precision": precision}
    body = {
        "micro_batch_size": plan.micro_batch, "global_batch_size": plan.global_batch,
        "tensor_model_parallel_size": plan.tp, "pipeline_model_parallel_size": plan.pp,
        "virtual_pipeline_model_parallel_size": (plan.virtual_stages
                                                 if plan.pp_schedule == "interleaved" else None),
        "context_parallel_size": plan.cp, "expert_model_parallel_size": plan.ep,
        "sequence_parallel": plan.sequence_parallel, "encoder_seq_length": seq_len,
        "max_position_embeddings": model.max_positions, "num_layers": model.layers,
        "hidden_size": model.hidden, "ffn_hidden_size": model.ffn_hidden,
        "num_attention_heads": model.heads,
        "num_query_groups": model.kv_heads if model.kv_heads != model.heads else None,
        "activations_checkpoint_granularity": granularity,
        "activations_checkpoint_method": method or ("uniform" if granularity == "full" else None),
        "activations_checkpoint_num_layers": layers or (1 if granularity == "full" else None),
        "optim": {"name": DISTRIBUTED_OPTIMIZERS[0] if plan.zero == 1 else "fused_adam"},
    }
    header = ("# NeMo 1.x config keys of a plan, written by willitscale: merge them into a complete\n"
              "# config (megatron_gpt_config.yaml). trainer.devices/num_nodes are the cluster's.\n")
    return header + yaml.safe_dump({"trainer": trainer, "model": body}, sort_keys=False,
                                   default_flow_style=False)

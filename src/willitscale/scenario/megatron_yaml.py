"""Megatron-LM's YAML config (the file ``--yaml-cfg`` reads), both ways.

Its layout is Megatron-LM's ``examples/gpt3/gpt_config.yaml`` and its reader
``megatron/training/yaml_arguments.py`` (NVIDIA/Megatron-LM at commit
fa48608a3d333b8f011e1128546edf9242a7ce53): a ``language_model`` table (the shape:
``num_layers``, ``hidden_size``, ``num_attention_heads``, ``num_query_groups``,
``ffn_hidden_size``; recomputation: ``recompute_granularity``, ``recompute_method``,
``recompute_num_layers``), a ``model_parallel`` table (``tensor_model_parallel_size``,
``pipeline_model_parallel_size``, ``context_parallel_size``, ``expert_model_parallel_size``,
``sequence_parallel``, ``fp16``, ``bf16``) and the other arguments at the top
(``micro_batch_size``, ``global_batch_size``, ``seq_length`` or ``encoder_seq_length``,
``max_position_embeddings``, ``num_layers_per_virtual_pipeline_stage``,
``use_distributed_optimizer``). Each key is the command-line flag with ``_`` for ``-``, and means
what the flag means (:mod:`willitscale.scenario.megatron` reads both).

As ``yaml_arguments.py`` does: ``virtual_pipeline_model_parallel_size`` is derived from
``num_layers_per_virtual_pipeline_stage`` (a value given without it is overwritten there, so it
is an error here), the interleaved schedule needs more than 2 pipeline stages, and
``sequence_parallel`` is turned off when ``tensor_model_parallel_size`` is 1 (the example file
sets it with tp 1). Other keys are Megatron-LM's business and are not read. The cluster comes
from flags.

Written files hold the keys above only; Megatron-LM's YAML loader builds its whole configuration
from the file (``core_config_from_args`` raises on a missing field), so merge them into a
complete config such as ``examples/gpt3/gpt_config.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from willitscale.errors import ConfigError
from willitscale.scenario.megatron import check_plan, recompute_fields, settings_of_arguments

__all__ = ["is_megatron_yaml", "megatron_yaml_settings", "megatron_yaml"]

SECTIONS = ("language_model", "model_parallel")


def is_megatron_yaml(data: Mapping[str, Any]) -> bool:
    """A Megatron-LM YAML config has a ``language_model`` or ``model_parallel`` table."""
    return any(isinstance(data.get(name), Mapping) for name in SECTIONS)


def _arguments(data: Mapping[str, Any], file: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``{"--flag": value}`` as the command line would give them (a true boolean is a flag
    present; false and null are absent), and the YAML key each flag came from."""
    args: dict[str, Any] = {}
    where: dict[str, str] = {}
    for section in ("", *SECTIONS):
        table = data.get(section, {}) if section else data
        if not isinstance(table, Mapping):
            raise ConfigError(f"{file}: {section}", table, "a table of keys")
        for key, value in table.items():
            if not section and key in SECTIONS:
                continue
            if value is None or value is False:
                continue
            flag = "--" + str(key).replace("_", "-")
            args[flag], where[flag] = value, f"{section}.{key}" if section else str(key)
    return args, where


def megatron_yaml_settings(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    """Scenario settings (see :mod:`willitscale.scenario.settings`) of a Megatron-LM YAML config."""
    args, where = _arguments(data, file)
    if "--virtual-pipeline-model-parallel-size" in args \
            and "--num-layers-per-virtual-pipeline-stage" not in args:
        raise ConfigError(f"{file}: model_parallel.virtual_pipeline_model_parallel_size",
                          args["--virtual-pipeline-model-parallel-size"],
                          "null: Megatron-LM's YAML reader derives it from "
                          "num_layers_per_virtual_pipeline_stage (give that instead)")
    if "--seq-length" not in args and "--encoder-seq-length" in args:
        args["--seq-length"], where["--seq-length"] = (args["--encoder-seq-length"],
                                                       where["--encoder-seq-length"])
    if args.get("--fp16") and args.get("--bf16"):
        raise ConfigError(f"{file}: model_parallel.fp16", True, "false when bf16 is true (one "
                          "of the two)")
    out = settings_of_arguments(args, file, name=lambda flag: where.get(flag, flag[2:].replace("-", "_")))
    if out.get("tp", 1) == 1:
        out["sequence_parallel"] = False  # yaml_arguments.py: sequence parallelism off at tp 1
    if out.get("pp_schedule") == "interleaved" and out.get("pp", 1) <= 2:
        raise ConfigError(f"{file}: num_layers_per_virtual_pipeline_stage",
                          args["--num-layers-per-virtual-pipeline-stage"],
                          f"null with pipeline_model_parallel_size {out.get('pp', 1)}: Megatron-LM's "
                          "interleaved schedule needs more than 2 pipeline stages")
    return out


def megatron_yaml(plan, *, model, seq_len: int, dtype: str) -> str:
    """The Megatron-LM YAML keys of ``plan`` for ``model`` (a catalog Transformer), laid out as
    ``examples/gpt3/gpt_config.yaml``; ConfigError for what Megatron-LM cannot run."""
    import yaml

    check_plan(plan, dtype)
    if plan.pp_schedule == "interleaved" and plan.pp <= 2:
        raise ConfigError("pp", plan.pp, "> 2 with the interleaved schedule (Megatron-LM's YAML "
                          "reader refuses fewer stages)")
    granularity, method, layers = recompute_fields(plan.recompute)
    language_model = {
        "num_layers": model.layers, "hidden_size": model.hidden,
        "num_attention_heads": model.heads,
        "num_query_groups": model.kv_heads if model.kv_heads != model.heads else None,
        "ffn_hidden_size": model.ffn_hidden, "recompute_granularity": granularity,
        "recompute_method": method, "recompute_num_layers": layers}
    model_parallel = {
        "tensor_model_parallel_size": plan.tp, "context_parallel_size": plan.cp,
        "pipeline_model_parallel_size": plan.pp, "sequence_parallel": plan.sequence_parallel,
        "expert_model_parallel_size": plan.ep, "fp16": dtype == "fp16", "bf16": dtype == "bf16"}
    top = {
        "micro_batch_size": plan.micro_batch, "global_batch_size": plan.global_batch,
        "num_layers_per_virtual_pipeline_stage": (model.layers // (plan.pp * plan.virtual_stages)
                                                  if plan.pp_schedule == "interleaved" else None),
        "group_query_attention": model.kv_heads != model.heads,
        "max_position_embeddings": model.max_positions, "seq_length": seq_len,
        "use_distributed_optimizer": plan.zero == 1}
    header = ("# Megatron-LM --yaml-cfg keys of a plan, written by willitscale: merge them into a\n"
              "# complete config (examples/gpt3/gpt_config.yaml); the cluster is not part of it.\n")
    body = yaml.safe_dump({"language_model": language_model, "model_parallel": model_parallel,
                           **top}, sort_keys=False, default_flow_style=False)
    return header + body

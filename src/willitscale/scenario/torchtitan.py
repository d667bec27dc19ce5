"""torchtitan's job TOML, both ways: a job file as scenario settings, a plan as a job file.

The keys are torchtitan's ``JobConfig`` (``torchtitan/config/job_config.py``, pytorch/torchtitan
at commit 000204a4a8bf3d0f31adc44fc29855fbb6ea13d8): ``[parallelism]``
``data_parallel_replicate_degree``, ``data_parallel_shard_degree`` (-1: the ranks left over),
``tensor_parallel_degree``, ``pipeline_parallel_degree``, ``pipeline_parallel_schedule``,
``pipeline_parallel_microbatch_size``, ``pipeline_parallel_layers_per_stage``,
``context_parallel_degree``, ``expert_parallel_degree``; ``[training]`` ``local_batch_size``
(``batch_size`` in older files, per GPU), ``global_batch_size`` (-1: local x data parallel),
``seq_len``, ``mixed_precision_param``; ``[activation_checkpoint]`` ``mode``; ``[model]``
``name`` and ``flavor``. The cluster comes from flags, never from the file.

How the plans map: sharding (``data_parallel_shard_degree`` other than 1) is FSDP, ZeRO-3; with
replication too (HSDP) it is willitscale's hybrid sharding, which shards within a node (right
when the shard degree is the GPUs per node); no sharding is DDP. torchtitan's tensor parallel
plan runs the norms sequence-parallel (``apply_tp`` in its llama3 ``parallelize.py``:
``"attention_norm": SequenceParallel()``, the same for ``ffn_norm``), so ``tp > 1`` means
sequence parallelism here. Plans
torchtitan cannot express (ZeRO-1/2, tensor parallel without sequence parallel) are refused on
export with the reason.

Memory is counted as the framework torchtitan runs (``framework``,
:mod:`willitscale.memory.frameworks`), not what the plan alone implies: sharded, FSDP2's
``fully_shard`` with its ``MixedPrecisionPolicy`` (``fsdp``); not sharded, ``replicate`` (DDP)
with ``torch.autocast`` (``ddp``), where a plan with tensor or pipeline parallelism alone would
imply Megatron-LM's layout. ``--framework`` overrides it. (torchtitan's ``maybe_enable_amp``
turns mixed precision off for tensor or pipeline parallelism without FSDP, training in fp32;
the file's ``mixed_precision_param`` is still read as the dtype here.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from willitscale.errors import ConfigError

__all__ = ["is_torchtitan", "torchtitan_settings", "torchtitan_toml", "torchtitan_framework",
           "MODELS"]

#: torchtitan (model name, flavor) -> willitscale catalog model. Other catalog models are
#: written with flavor "willitscale" and read back by their name.
MODELS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b",
          ("llama3", "405B"): "llama3-405b",
          # pytorch/torchtitan torchtitan/models/deepseek_v3/__init__.py: deepseekv3_configs
          ("deepseek_v3", "671B"): "deepseek-v3"}
CATALOG_FLAVOR = "willitscale"
SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved"}
RECOMPUTE = {"none": "none", "selective": "selective", "full": "full"}
DTYPES = {"bfloat16": "bf16", "float32": "fp32"}


def is_torchtitan(data: Mapping[str, Any]) -> bool:
    """A torchtitan job file has a ``[parallelism]`` or ``[job]`` table, a scenario neither."""
    return isinstance(data.get("parallelism"), Mapping) or isinstance(data.get("job"), Mapping)


def _int(table: Mapping, key: str, where: str, default: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: {key}", value, "an integer")
    return value


def _table(data: Mapping, name: str, file: str) -> Mapping:
    table = data.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{file}: [{name}]", table, "a table")
    return table


def torchtitan_settings(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    """Scenario settings (see :mod:`willitscale.scenario.settings`) of a torchtitan job file."""
    par, tr = _table(data, "parallelism", file), _table(data, "training", file)
    ac, model = _table(data, "activation_checkpoint", file), _table(data, "model", file)
    where = f"{file}: [parallelism]"
    replicate = _int(par, "data_parallel_replicate_degree", where, 1)
    shard = _int(par, "data_parallel_shard_degree", where, -1)
    out: dict[str, Any] = {
        "tp": _int(par, "tensor_parallel_degree", where, 1),
        "pp": _int(par, "pipeline_parallel_degree", where, 1),
        "cp": _int(par, "context_parallel_degree", where, 1),
        "ep": _int(par, "expert_parallel_degree", where, 1),
    }
    if shard == 1:
        out["dp"], out["zero"] = replicate, 0
    else:
        out["fsdp"] = "hybrid" if replicate > 1 else "full"
        if shard > 1:
            out["dp"] = replicate * shard
    out["framework"] = "ddp" if shard == 1 else "fsdp"
    out["sequence_parallel"] = out["tp"] > 1
    if out["pp"] > 1:
        name = par.get("pipeline_parallel_schedule", "1F1B")
        if name not in SCHEDULES:
            raise ConfigError(f"{where}: pipeline_parallel_schedule", name,
                              "one of " + ", ".join(SCHEDULES) + " (the schedules willitscale models)")
        out["pp_schedule"] = SCHEDULES[name]
    local = _int(tr, "local_batch_size", f"{file}: [training]", _int(tr, "batch_size", f"{file}: [training]", 8))
    micro = _int(par, "pipeline_parallel_microbatch_size", where, 1) if out["pp"] > 1 else local
    if local % micro:
        raise ConfigError(f"{where}: pipeline_parallel_microbatch_size", micro,
                          f"a divisor of the local batch size {local}")
    out["micro_batch"] = micro
    total = _int(tr, "global_batch_size", f"{file}: [training]", -1)
    if total > 0:
        out["global_batch"] = total
    else:
        out["grad_accum"] = local // micro
    out["seq_len"] = _int(tr, "seq_len", f"{file}: [training]", 2048)
    dtype = tr.get("mixed_precision_param", "bfloat16")
    if dtype not in DTYPES:
        raise ConfigError(f"{file}: [training] mixed_precision_param", dtype, "bfloat16 or float32")
    out["dtype"] = DTYPES[dtype]
    mode = ac.get("mode", "selective")
    if mode not in RECOMPUTE:
        raise ConfigError(f"{file}: [activation_checkpoint] mode", mode, "none, selective or full")
    out["recompute"] = RECOMPUTE[mode]
    key = (model.get("name", "llama3"), str(model.get("flavor", "")))
    if key in MODELS:
        out["model"] = MODELS[key]
    elif key[1] == CATALOG_FLAVOR:
        out["model"] = key[0]
    if out.get("pp_schedule") == "interleaved":
        out["virtual_stages"] = _virtual_stages(par, out, where)
    return out


def torchtitan_framework(plan) -> str:
    """The framework a torchtitan job file of ``plan`` reads back as: fsdp when sharded, ddp."""
    return "fsdp" if plan.zero == 3 else "ddp"


def _virtual_stages(par: Mapping, out: Mapping, where: str) -> int:
    """Model chunks per pipeline rank: layers / (pp x pipeline_parallel_layers_per_stage)."""
    from willitscale.workload import get_model

    per_stage = _int(par, "pipeline_parallel_layers_per_stage", where, 0)
    if per_stage < 1 or "model" not in out:
        raise ConfigError(f"{where}: pipeline_parallel_layers_per_stage", per_stage or None,
                          "layers per virtual stage >= 1, with a catalog model: the interleaved "
                          "schedule's stages per rank are layers / (pp x this)")
    layers = get_model(out["model"]).layers
    stages, rest = divmod(layers, out["pp"] * per_stage)
    if rest or stages < 2:
        raise ConfigError(f"{where}: pipeline_parallel_layers_per_stage", per_stage,
                          f"a divisor of {layers} layers / pp {out['pp']} giving >= 2 stages per rank")
    return stages


def torchtitan_toml(plan, *, model: str, layers: int, seq_len: int, dtype: str) -> str:
    """The job file of ``plan`` (a :class:`~willitscale.scenario.plan.Plan`) for catalog model
    ``model`` of ``layers`` layers; ConfigError for what torchtitan cannot express."""
    if plan.zero in (1, 2):
        raise ConfigError("zero", plan.zero, "0 (DDP) or 3 (FSDP): torchtitan has no ZeRO-1/2")
    if plan.tp > 1 and not plan.sequence_parallel:
        raise ConfigError("sequence_parallel", False, "on with tp > 1: torchtitan's tensor "
                          "parallel plan always runs the norms sequence-parallel")
    if plan.pp > 1 and plan.pp_schedule not in SCHEDULES.values():
        raise ConfigError("pp_schedule", plan.pp_schedule, ", ".join(SCHEDULES.values()))
    if dtype not in DTYPES.values():
        raise ConfigError("dtype", dtype, "bf16 or fp32 (torchtitan's mixed_precision_param)")
    name, flavor = next(((n, f) for (n, f), m in MODELS.items() if m == model), (model, CATALOG_FLAVOR))
    if plan.zero == 3:
        shard = plan.dp if plan.shard_scope == "dp" else None
        if shard is None:
            raise ConfigError("shard_scope", "node", "dp: write HSDP's degrees with --fsdp full, "
                              "or give the shard degree (hybrid sharding's is the GPUs per node)")
        replicate = 1
    else:
        replicate, shard = plan.dp, 1
    local = plan.micro_batch * (plan.grad_accum if plan.pp > 1 else 1)
    lines = ["# torchtitan job file written by willitscale (the cluster is not part of it)",
             "[model]", f'name = "{name}"', f'flavor = "{flavor}"', "",
             "[training]", f"local_batch_size = {local}",
             f"global_batch_size = {plan.global_batch}", f"seq_len = {seq_len}",
             f'mixed_precision_param = "{next(k for k, v in DTYPES.items() if v == dtype)}"', "",
             "[parallelism]", f"data_parallel_replicate_degree = {replicate}",
             f"data_parallel_shard_degree = {shard}", f"tensor_parallel_degree = {plan.tp}",
             f"pipeline_parallel_degree = {plan.pp}", f"context_parallel_degree = {plan.cp}",
             f"expert_parallel_degree = {plan.ep}"]
    if plan.pp > 1:
        schedule = next(k for k, v in SCHEDULES.items() if v == plan.pp_schedule)
        lines += [f'pipeline_parallel_schedule = "{schedule}"',
                  f"pipeline_parallel_microbatch_size = {plan.micro_batch}"]
        if plan.pp_schedule == "interleaved":
            lines.append(f"pipeline_parallel_layers_per_stage = "
                         f"{layers // (plan.pp * plan.virtual_stages)}")
    lines += ["", "[activation_checkpoint]", f'mode = "{plan.recompute}"', ""]
    return "\n".join(lines)

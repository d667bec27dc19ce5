"""Scenario settings from TOML files and CLI flags, merged, then built into a :class:`Scenario`.

Both sources become one flat mapping of *settings* (SI values, keys as below); flags override
the file key by key; :func:`build_scenario` resolves catalog names and defaults and validates.
A scenario file (``examples/*.toml``)::

    name = "2B model, 4 nodes of 8 A100, 200 Gb/s per node"

    [model]            # one of: name = "gpt2-large" | config = "path/config.json" | params = 2e9
    params = 2e9

    [cluster]          # preset = "dgx-a100" | gpu, nodes, gpus_per_node, intra_node, inter_node
    gpu = "a100-80gb"
    nodes = 4
    gpus_per_node = 8
    inter_node = "200Gbps"

    [training]
    seq_len = 2048
    micro_batch = 2    # and/or global_batch, grad_accum
    recompute = "full"
    dtype = "bf16"     # also: memory_convention, memory_fraction, cuda_context,
                       # distribute_saved_activations
    hfu = 0.5          # or mfu (replaces the per-op compute model)
    # attention_kernel = "auto", fusion = "fused", fp8_recipe = "delayed" (docs/estimate.md)
    # document_length = 2048 (intra-document masking: packed documents of 2048 tokens)

    [parallel]         # dp, tp, pp, cp, ep, zero, fsdp, shard_scope, pp_schedule, virtual_stages,
                       # sequence_parallel, framework, rank_order, tp_comm_overlap, flash_attention
    [deepspeed]        # reduce_bucket_size (elements), overlap_comm
    [ddp]              # overlap, bucket_cap, first_bucket, grad_reduce_dtype, overlap_slowdown,
                       # gradient_as_bucket_view
    [data]             # sample_bytes, storage_bandwidth, overlapped
    [measured]         # step_time_one_gpu, allreduce_time, allreduce_size
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from willitscale.config import Table, load_toml
from willitscale.errors import ConfigError
from willitscale.scenario.megatron import is_megatron, megatron_settings
from willitscale.scenario.torchtitan import is_torchtitan, torchtitan_settings
from willitscale.units import parse_bandwidth, parse_count, parse_size, parse_time

__all__ = ["SETTINGS", "load_settings", "merge_settings", "parse_setting"]

# setting -> (TOML table, parser, what it is). Parsers take (value, field=...).


def _int(value: Any, *, field: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(field, value, "an integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "an integer") from None
    if number != float(value):
        raise ConfigError(field, value, "an integer")
    return number


def _float(value: Any, *, field: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(field, value, "a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "a number") from None


def _size_with_unit(value: Any, *, field: str) -> float:
    """A size whose key does not say bytes: ``"25"`` is an error (25 MB? MiB?), ``"25MiB"`` not."""
    return parse_size(value, field=field, unit_required=True)


def _positive_size(value: Any, *, field: str) -> float:
    return parse_size(value, field=field, unit_required=True, positive=True)


def _fraction(value: Any, *, field: str) -> float:
    """A share such as hfu, mfu or memory_fraction: 0 < x <= 1 (NaN is not one)."""
    number = _float(value, field=field)
    if not 0 < number <= 1:  # False for NaN too
        raise ConfigError(field, value, "a fraction in (0, 1]")
    return number


def _str(value: Any, *, field: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(field, value, "a string")
    return value


def _bool(value: Any, *, field: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ConfigError(field, value, "true or false")


def _link(value: Any, *, field: str) -> str:
    """Link settings stay strings: a catalog name, ``200Gbps`` or ``8x400Gbps`` (hardware parses)."""
    return _str(value, field=field) if not isinstance(value, (int, float)) else str(value)


def _count(value: Any, *, field: str) -> float:
    return parse_count(value, field=field, positive=True)


def _positive_time(value: Any, *, field: str) -> float:
    return parse_time(value, field=field, positive=True)


SETTINGS: Mapping[str, tuple[str, Any]] = {
    "name": ("", _str),
    # model
    "model": ("model", _str),
    "params": ("model", _count),
    # cluster
    "preset": ("cluster", _str),
    "gpu": ("cluster", _str),
    "nodes": ("cluster", _int),
    "gpus_per_node": ("cluster", _int),
    "intra_node": ("cluster", _link),
    "inter_node": ("cluster", _link),
    # training
    "seq_len": ("training", _int),
    "micro_batch": ("training", _int),
    "global_batch": ("training", _int),
    "grad_accum": ("training", _int),
    "recompute": ("training", _str),
    "dtype": ("training", _str),
    "hfu": ("training", _fraction),
    "mfu": ("training", _fraction),
    "memory_convention": ("training", _str),
    "memory_fraction": ("training", _fraction),
    "cuda_context": ("training", _size_with_unit),
    "distribute_saved_activations": ("training", _bool),
    "optimizer": ("training", _str),
    "attention_kernel": ("training", _str),
    "fusion": ("training", _str),
    "fp8_recipe": ("training", _str),
    "document_length": ("training", _int),
    # parallel
    "dp": ("parallel", _int), "tp": ("parallel", _int), "pp": ("parallel", _int),
    "cp": ("parallel", _int), "ep": ("parallel", _int), "zero": ("parallel", _int),
    "pp_schedule": ("parallel", _str), "virtual_stages": ("parallel", _int),
    "sequence_parallel": ("parallel", _bool),
    "framework": ("parallel", _str),  # megatron | fsdp | deepspeed | ddp (memory.frameworks)
    "fsdp": ("parallel", _str),  # full | hybrid: ZeRO-3 over the whole dp group or within nodes
    "shard_scope": ("parallel", _str),  # dp | node (ZeRO stages 1-3)
    "rank_order": ("parallel", _str),  # tp-cp-ep-dp-pp, innermost first
    "tp_comm_overlap": ("parallel", _bool),
    "flash_attention": ("parallel", _bool),
    "allow_tp_across_nodes": ("parallel", _bool),
    "collectives": ("parallel", _str),  # nccl | gloo | alpha-beta: how collectives are costed
    # ddp
    "overlap": ("ddp", _bool),
    "bucket_cap": ("ddp", _size_with_unit),
    "first_bucket": ("ddp", _size_with_unit),
    "grad_reduce_dtype": ("ddp", _str),
    "overlap_slowdown": ("ddp", _float),
    "gradient_as_bucket_view": ("ddp", _bool),
    # deepspeed (zero_optimization): what its buckets allocate
    "reduce_bucket_size": ("deepspeed", _count),
    "overlap_comm": ("deepspeed", _bool),
    # data loading
    "sample_bytes": ("data", parse_size),
    "storage_bandwidth": ("data", parse_bandwidth),
    "data_overlapped": ("data", _bool),
    # measurements
    "step_time_one_gpu": ("measured", _positive_time),
    "allreduce_time": ("measured", _positive_time),
    "allreduce_size": ("measured", _positive_size),
    # calibration file
    "calibration": ("", _str),
    # network model: the analytic alpha-beta model or the flow simulator (docs/fabric.md)
    "network": ("network", _str),
    "topology": ("network", _str),
    "oversubscription": ("network", _float),
    "routing": ("network", _str),
    "routing_seed": ("network", _int),
}

# TOML spellings that differ from the setting name
_TOML_KEY = {("model", "model"): "name", ("data", "data_overlapped"): "overlapped"}
_MODEL_CONFIG_KEY = "config"  # [model] config = "path/to/config.json" is also a model


def parse_setting(name: str, value: Any, *, field: str | None = None) -> Any:
    """One setting's value, parsed to SI (a flag's string or a TOML value)."""
    try:
        _, parser = SETTINGS[name]
    except KeyError:
        raise ConfigError(f"unknown setting {name!r}") from None
    return parser(value, field=field or name)


def load_settings(path: str | Path) -> dict[str, Any]:
    """The settings in a scenario TOML file; unknown keys are an error naming the closest key."""
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        return _yaml_settings(path)
    if path.suffix.lower() != ".toml" and path.is_file():
        text = path.read_text(errors="replace")
        if is_megatron(text):  # a Megatron-LM command line (a launch script)
            return megatron_settings(text, str(path))
    data = load_toml(path)
    if is_torchtitan(data):  # a torchtitan job file: its plan and training settings
        return torchtitan_settings(data, str(path))
    root = Table(data, str(path))
    out: dict[str, Any] = {}
    tables: dict[str, list[str]] = {}
    for name, (table, _) in SETTINGS.items():
        tables.setdefault(table, []).append(name)
    for table_name, names in tables.items():
        table = root if not table_name else root.table(table_name, None)
        if table is None:
            continue
        for name in names:
            key = _TOML_KEY.get((table_name, name), name)
            raw = table.get(key, lambda v: v, "a value", None)
            if raw is not None:
                out[name] = parse_setting(name, raw, field=f"{table.where}: {key}")
        if table_name == "model":
            config = table.get(_MODEL_CONFIG_KEY, lambda v: v, "a path", None)
            if config is not None:
                if "model" in out:
                    raise ConfigError(f"{table.where}: give only one of name and config")
                config_path = Path(_str(config, field=f"{table.where}: config"))
                out["model"] = str(config_path if config_path.is_absolute() else path.parent / config_path)
        if table is not root:
            table.done()
    if "calibration" in out and not Path(out["calibration"]).is_absolute():
        out["calibration"] = str(path.parent / out["calibration"])
    root.done()
    return out


def _yaml_settings(path: Path) -> dict[str, Any]:
    """The settings of a Megatron-LM (``--yaml-cfg``) or NeMo 1.x YAML file."""
    from willitscale.scenario.megatron_yaml import is_megatron_yaml, megatron_yaml_settings
    from willitscale.scenario.nemo import is_nemo, nemo_settings
    from willitscale.scenario.yaml_file import load_yaml

    data = load_yaml(path)
    if is_megatron_yaml(data):
        return megatron_yaml_settings(data, str(path))
    if is_nemo(data):
        return nemo_settings(data, str(path))
    raise ConfigError(str(path), ", ".join(map(str, list(data)[:6])) or "no keys",
                      "a Megatron-LM YAML config (a language_model or model_parallel table) or a "
                      "NeMo config (a model table with tensor_model_parallel_size or "
                      "micro_batch_size); scenario files are TOML")


def merge_settings(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers override earlier ones key by key; ``None`` means "not given"."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None})
    return merged
